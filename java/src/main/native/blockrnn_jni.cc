// The JNI side of org.blockrnn.RawOps, over the C API (blockrnn/c_api.h): copies the Java
// arrays in, runs the op, copies the outputs out, and turns a failed status into a Java
// exception (IllegalArgumentException for bad input). No C++ exception and no pending Java
// exception is ever ignored: every JNI call that can throw is checked (the tests run under
// -Xcheck:jni).
#include <jni.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "blockrnn/c_api.h"
#include "jni_util.h"
#include "org_blockrnn_RawOps.h"

namespace {

using namespace blockrnn_jni;  // NOLINT

int op_index(JNIEnv* env, const std::string& op) {
  const int index = blockrnn_op_find(op.c_str());
  if (index < 0) throw_status(env, BLOCKRNN_INVALID_ARGUMENT);
  return index;
}

jobjectArray string_array(JNIEnv* env, int n, const char* (*name)(int, int), int index) {
  jclass string_class = env->FindClass("java/lang/String");
  check_pending(env);
  jobjectArray out = env->NewObjectArray(n, string_class, nullptr);
  check_pending(env);
  for (int k = 0; k < n; ++k) {
    jstring s = env->NewStringUTF(name(index, k));
    check_pending(env);
    env->SetObjectArrayElement(out, k, s);
    check_pending(env);
    env->DeleteLocalRef(s);
  }
  return out;
}

// One input: its Java array (a local reference, until it is copied), dtype, shape and size in
// bytes, and, once the call is validated, its native copy.
struct Input {
  jarray array = nullptr;
  int32_t dtype = BLOCKRNN_FLOAT32;
  jsize length = 0;
  size_t nbytes = 0;
  std::vector<int64_t> shape;
  std::unique_ptr<unsigned char[]> bytes;
};

// Input k of the call: its array's type and length and its shape, nothing copied. (A Java
// Tensor's length is the product of its shape, checked by its constructor.)
Input read_input(JNIEnv* env, const std::string& op, jobjectArray data, jobjectArray shapes,
                 jsize k) {
  static const struct {
    const char* cls;
    int32_t dtype;
    size_t elem;
  } kTypes[] = {{"[F", BLOCKRNN_FLOAT32, sizeof(float)},
                {"[D", BLOCKRNN_FLOAT64, sizeof(double)},
                {"[J", BLOCKRNN_INT64, sizeof(int64_t)}};  // LongTensor: seq_lengths
  Input in;
  in.array = static_cast<jarray>(env->GetObjectArrayElement(data, k));
  check_pending(env);
  auto shape = static_cast<jlongArray>(env->GetObjectArrayElement(shapes, k));
  check_pending(env);
  const jsize rank = env->GetArrayLength(shape);
  check_pending(env);
  in.shape.resize(static_cast<size_t>(rank));
  env->GetLongArrayRegion(shape, 0, rank, reinterpret_cast<jlong*>(in.shape.data()));
  check_pending(env);
  env->DeleteLocalRef(shape);
  in.length = env->GetArrayLength(in.array);
  check_pending(env);
  for (const auto& type : kTypes) {
    jclass c = env->FindClass(type.cls);
    check_pending(env);
    const bool is = env->IsInstanceOf(in.array, c) == JNI_TRUE;
    env->DeleteLocalRef(c);
    if (!is) continue;
    in.dtype = type.dtype;
    in.nbytes = static_cast<size_t>(in.length) * type.elem;
    return in;
  }
  throw_java(env, "java/lang/IllegalArgumentException",
             op + ": input " + std::to_string(k) + " is not a float[], double[] or long[]");
}

// Copies an input's Java array into its native buffer.
void copy_in(JNIEnv* env, Input& in) {
  if (in.dtype == BLOCKRNN_FLOAT32) {
    env->GetFloatArrayRegion(static_cast<jfloatArray>(in.array), 0, in.length,
                             reinterpret_cast<jfloat*>(in.bytes.get()));
  } else if (in.dtype == BLOCKRNN_FLOAT64) {
    env->GetDoubleArrayRegion(static_cast<jdoubleArray>(in.array), 0, in.length,
                              reinterpret_cast<jdouble*>(in.bytes.get()));
  } else {
    env->GetLongArrayRegion(static_cast<jlongArray>(in.array), 0, in.length,
                            reinterpret_cast<jlong*>(in.bytes.get()));
  }
  check_pending(env);
}

// The attrs, as the C API takes them (`c` points into `names`).
struct Attrs {
  std::vector<std::string> names;
  std::vector<blockrnn_attr> c;
};
Attrs read_attrs(JNIEnv* env, jobjectArray attr_names, jdoubleArray attr_values,
                 jbooleanArray attr_is_bool) {
  const jsize n = env->GetArrayLength(attr_names);
  check_pending(env);
  std::vector<double> values(static_cast<size_t>(n));
  std::vector<jboolean> is_bool(static_cast<size_t>(n));
  env->GetDoubleArrayRegion(attr_values, 0, n, values.data());
  check_pending(env);
  env->GetBooleanArrayRegion(attr_is_bool, 0, n, is_bool.data());
  check_pending(env);
  Attrs attrs;
  for (jsize k = 0; k < n; ++k) {
    auto s = static_cast<jstring>(env->GetObjectArrayElement(attr_names, k));
    check_pending(env);
    attrs.names.push_back(utf(env, s, "attr name"));
    env->DeleteLocalRef(s);
  }
  for (size_t k = 0; k < attrs.names.size(); ++k) {
    const char* name = attrs.names[k].c_str();
    attrs.c.push_back(is_bool[k] ? blockrnn_attr_bool(name, values[k] != 0.0)
                                 : blockrnn_attr_float(name, values[k]));
  }
  return attrs;
}

int64_t element_count(const blockrnn_shape& shape) {
  int64_t count = 1;
  for (int d = 0; d < shape.rank; ++d) count *= shape.dims[d];  // checked by the library
  return count;
}

// Validates the call through the C API and checks its memory against the memory limit, reading
// the inputs in place (critical sections: no JNI call happens while they are held, and the
// library only validates, which reads no more than seq_lengths). The memory counted besides the
// op's workspace: the native outputs (allocated for this call), `input_bytes` of native input
// copies and the Java arrays of the outputs. Fills the outputs' dtype and shapes.
void validate(JNIEnv* env, const std::string& op, int index, std::vector<Input>& inputs,
              bool has_seq_len_max, int64_t* seq, const Attrs& attrs, int64_t input_bytes,
              int32_t* dtype, std::vector<blockrnn_shape>& out) {
  std::vector<void*> pinned(inputs.size(), nullptr);
  std::vector<blockrnn_tensor> tensors;
  if (has_seq_len_max) tensors.push_back({BLOCKRNN_INT64, 0, nullptr, nullptr, seq});
  bool out_of_memory = false;
  for (size_t k = 0; k < inputs.size() && !out_of_memory; ++k) {
    pinned[k] = env->GetPrimitiveArrayCritical(inputs[k].array, nullptr);
    out_of_memory = pinned[k] == nullptr;
    tensors.push_back({inputs[k].dtype, static_cast<int32_t>(inputs[k].shape.size()),
                       inputs[k].shape.data(), nullptr, pinned[k]});
  }
  blockrnn_status s = BLOCKRNN_OK;
  bool too_long = false;
  std::string too_long_output;
  if (!out_of_memory) {
    s = blockrnn_infer_outputs(op.c_str(), tensors.data(), tensors.size(), attrs.c.data(),
                               attrs.c.size(), dtype, out.data(), out.size());
    // A Java array holds at most INT_MAX - 8 elements; each output must fit in one.
    int64_t output_bytes = 0;
    for (size_t k = 0; s == BLOCKRNN_OK && k < out.size() && !too_long; ++k) {
      const int64_t count = element_count(out[k]);
      too_long = count > INT_MAX - 8;
      if (too_long) too_long_output = blockrnn_op_output_name(index, static_cast<int>(k));
      output_bytes += count * (*dtype == BLOCKRNN_FLOAT32 ? 4 : 8);
    }
    if (s == BLOCKRNN_OK && !too_long) {
      s = blockrnn_prepare_call(op.c_str(), tensors.data(), tensors.size(), attrs.c.data(),
                                attrs.c.size(), input_bytes + output_bytes, dtype, out.data(),
                                out.size());
    }
  }
  for (size_t k = inputs.size(); k-- > 0;) {
    if (pinned[k] != nullptr)
      env->ReleasePrimitiveArrayCritical(inputs[k].array, pinned[k], JNI_ABORT);
  }
  if (out_of_memory) throw_java(env, "java/lang/OutOfMemoryError", op + ": cannot read the inputs");
  if (s != BLOCKRNN_OK) throw_status(env, s);
  if (too_long) {
    throw_java(env, "java/lang/IllegalArgumentException",
               op + ": output " + too_long_output + " has more elements than a Java array holds");
  }
  if (*dtype != BLOCKRNN_FLOAT32 && *dtype != BLOCKRNN_FLOAT64) {
    throw_java(env, "java/lang/IllegalArgumentException",
               op + ": the Java binding supports float32 and float64 only");
  }
}

// `bytes` of native memory for `what`; the system's refusal is a ResourceExhausted error.
std::unique_ptr<unsigned char[]> allocate(JNIEnv* env, const std::string& op, size_t bytes,
                                          const std::string& what) {
  unsigned char* p = new (std::nothrow) unsigned char[bytes == 0 ? 1 : bytes];
  if (p == nullptr) {
    throw_library(env, BLOCKRNN_RESOURCE_EXHAUSTED,
                  op + ": the system refused " + std::to_string(bytes) + " bytes for " + what);
  }
  return std::unique_ptr<unsigned char[]>(p);
}

// The cancel check of RawOps.setCancellation: the flag's int, set by Cancellation.cancel().
int flag_is_set(void* flag) {
  return __atomic_load_n(static_cast<const int32_t*>(flag), __ATOMIC_ACQUIRE) != 0;
}

}  // namespace

extern "C" {

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_RawOps_opNames(JNIEnv* env, jclass) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    const int n = blockrnn_op_count();
    return string_array(
        env, n, [](int, int k) { return blockrnn_op_name(k); }, 0);
  });
}

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_RawOps_inputNames(JNIEnv* env, jclass,
                                                                   jstring op) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    const int index = op_index(env, utf(env, op, "op"));
    return string_array(env, blockrnn_op_num_inputs(index), blockrnn_op_input_name, index);
  });
}

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_RawOps_outputNames(JNIEnv* env, jclass,
                                                                    jstring op) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    const int index = op_index(env, utf(env, op, "op"));
    return string_array(env, blockrnn_op_num_outputs(index), blockrnn_op_output_name, index);
  });
}

JNIEXPORT jstring JNICALL Java_org_blockrnn_RawOps_version(JNIEnv* env, jclass) {
  return env->NewStringUTF(blockrnn_version());
}

JNIEXPORT void JNICALL Java_org_blockrnn_RawOps_setNumThreads(JNIEnv* env, jclass, jint n) {
  guarded<int>(env, 0, [&] {
    const blockrnn_status s = blockrnn_set_num_threads(n);
    if (s != BLOCKRNN_OK) throw_status(env, s);
    return 0;
  });
}

JNIEXPORT jint JNICALL Java_org_blockrnn_RawOps_getNumThreads(JNIEnv* env, jclass) {
  return guarded<jint>(env, 0, [&] {
    int n = 0;
    const blockrnn_status s = blockrnn_get_num_threads(&n);
    if (s != BLOCKRNN_OK) throw_status(env, s);
    return static_cast<jint>(n);
  });
}

JNIEXPORT jint JNICALL Java_org_blockrnn_RawOps_maxThreads(JNIEnv*, jclass) {
  return blockrnn_max_threads();
}

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_RawOps_runNative(
    JNIEnv* env, jclass, jstring op_name, jboolean has_seq_len_max, jlong seq_len_max,
    jobjectArray data, jobjectArray shapes, jobjectArray attr_names, jdoubleArray attr_values,
    jbooleanArray attr_is_bool, jobjectArray out_shapes) {
  return guarded<jobjectArray>(env, nullptr, [&]() -> jobjectArray {
    const std::string op = utf(env, op_name, "op");
    const int index = op_index(env, op);
    const int first = has_seq_len_max ? 1 : 0;  // the op's index of inputs[0]
    auto input_name = [&](std::size_t k) {
      const char* name = blockrnn_op_input_name(index, static_cast<int>(k) + first);
      return std::string(name != nullptr ? name : "input " + std::to_string(k + first));
    };

    // The inputs' types and shapes; their arrays stay Java's until the call is validated.
    const jsize n = env->GetArrayLength(data);
    check_pending(env);
    const int most = blockrnn_op_num_inputs(index) - first;
    if (n > most) {
      throw_java(env, "java/lang/IllegalArgumentException",
                 op + ": takes at most " + std::to_string(most) + " tensor inputs" +
                     (first ? " after seq_len_max" : "") + ", got " + std::to_string(n));
    }
    if (env->EnsureLocalCapacity(n + 16) != 0) throw JavaPending{};
    std::vector<Input> inputs(static_cast<size_t>(n));
    for (jsize k = 0; k < n; ++k)
      inputs[static_cast<size_t>(k)] = read_input(env, op, data, shapes, k);
    int64_t seq = seq_len_max;

    const Attrs attrs = read_attrs(env, attr_names, attr_values, attr_is_bool);

    // Validate the call and check its memory before allocating anything: the native copies of
    // the inputs, the native outputs and the Java arrays they are copied into.
    const size_t num_outputs = static_cast<size_t>(blockrnn_op_num_outputs(index));
    std::vector<blockrnn_shape> out(num_outputs);
    int32_t dtype = 0;
    int64_t input_bytes = 0;
    for (const Input& in : inputs) input_bytes += static_cast<int64_t>(in.nbytes);
    validate(env, op, index, inputs, has_seq_len_max != JNI_FALSE, &seq, attrs, input_bytes, &dtype,
             out);
    const size_t elem = dtype == BLOCKRNN_FLOAT32 ? sizeof(float) : sizeof(double);

    // Native copies of the inputs (the op may run long: no pinned Java arrays), then the native
    // outputs (every element is written by the op: not initialised).
    std::vector<blockrnn_tensor> tensors;
    if (has_seq_len_max) tensors.push_back({BLOCKRNN_INT64, 0, nullptr, nullptr, &seq});
    for (size_t k = 0; k < inputs.size(); ++k) {
      Input& in = inputs[k];
      in.bytes = allocate(env, op, in.nbytes, "a native copy of input " + input_name(k));
      copy_in(env, in);
      tensors.push_back({in.dtype, static_cast<int32_t>(in.shape.size()), in.shape.data(), nullptr,
                         in.bytes.get()});
      env->DeleteLocalRef(in.array);
      in.array = nullptr;
    }
    std::vector<std::unique_ptr<unsigned char[]>> buffers(num_outputs);
    std::vector<blockrnn_tensor> outputs(num_outputs);
    std::vector<jsize> counts(num_outputs);
    for (size_t k = 0; k < num_outputs; ++k) {
      counts[k] = static_cast<jsize>(element_count(out[k]));
      buffers[k] = allocate(env, op, static_cast<size_t>(counts[k]) * elem,
                            std::string("output ") + blockrnn_op_output_name(index, int(k)));
      outputs[k] = {dtype, out[k].rank, out[k].dims, nullptr, buffers[k].get()};
    }
    const blockrnn_status s =
        blockrnn_run_op(op.c_str(), tensors.data(), tensors.size(), attrs.c.data(), attrs.c.size(),
                        outputs.data(), num_outputs);
    if (s != BLOCKRNN_OK) throw_status(env, s);

    // Back into Java arrays.
    jclass object_class = env->FindClass("java/lang/Object");
    check_pending(env);
    jobjectArray result =
        env->NewObjectArray(static_cast<jsize>(num_outputs), object_class, nullptr);
    check_pending(env);
    for (size_t k = 0; k < num_outputs; ++k) {
      const jsize count = counts[k];
      jarray array;
      if (dtype == BLOCKRNN_FLOAT32) {
        jfloatArray a = env->NewFloatArray(count);
        check_pending(env);
        env->SetFloatArrayRegion(a, 0, count, reinterpret_cast<const jfloat*>(buffers[k].get()));
        array = a;
      } else {
        jdoubleArray a = env->NewDoubleArray(count);
        check_pending(env);
        env->SetDoubleArrayRegion(a, 0, count, reinterpret_cast<const jdouble*>(buffers[k].get()));
        array = a;
      }
      check_pending(env);
      buffers[k].reset();
      env->SetObjectArrayElement(result, static_cast<jsize>(k), array);
      check_pending(env);
      env->DeleteLocalRef(array);
      jlongArray shape = env->NewLongArray(out[k].rank);
      check_pending(env);
      env->SetLongArrayRegion(shape, 0, out[k].rank, reinterpret_cast<const jlong*>(out[k].dims));
      check_pending(env);
      env->SetObjectArrayElement(out_shapes, static_cast<jsize>(k), shape);
      check_pending(env);
      env->DeleteLocalRef(shape);
    }
    return result;
  });
}

JNIEXPORT void JNICALL Java_org_blockrnn_RawOps_setMemoryLimit(JNIEnv*, jclass, jlong bytes) {
  blockrnn_set_memory_limit(bytes);
}

JNIEXPORT jlong JNICALL Java_org_blockrnn_RawOps_getMemoryLimit(JNIEnv*, jclass) {
  return blockrnn_get_memory_limit();
}

JNIEXPORT void JNICALL Java_org_blockrnn_RawOps_setWorkspaceCacheLimit(JNIEnv*, jclass,
                                                                       jlong bytes) {
  blockrnn_set_workspace_cache_limit(bytes);
}

JNIEXPORT jlong JNICALL Java_org_blockrnn_RawOps_getWorkspaceCacheLimit(JNIEnv*, jclass) {
  return blockrnn_get_workspace_cache_limit();
}

JNIEXPORT void JNICALL Java_org_blockrnn_RawOps_setCancelFlag(JNIEnv* env, jclass, jobject flag) {
  guarded<int>(env, 0, [&] {
    if (flag == nullptr) {
      blockrnn_set_cancel_check(nullptr, nullptr);
      return 0;
    }
    void* address = env->GetDirectBufferAddress(flag);
    check_pending(env);
    if (address == nullptr || env->GetDirectBufferCapacity(flag) < jlong(sizeof(int32_t))) {
      throw_java(env, "java/lang/IllegalArgumentException",
                 "the cancel flag must be a direct buffer of at least 4 bytes");
    }
    blockrnn_set_cancel_check(&flag_is_set, address);
    return 0;
  });
}

}  // extern "C"
