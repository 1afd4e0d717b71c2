// The JNI side of org.blockrnn.RawOps, over the C API (blockrnn/c_api.h): copies the Java
// arrays in, runs the op, copies the outputs out, and turns a failed status into a Java
// exception (IllegalArgumentException for bad input). No C++ exception and no pending Java
// exception is ever ignored: every JNI call that can throw is checked (the tests run under
// -Xcheck:jni).
#include <jni.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "blockrnn/c_api.h"
#include "org_blockrnn_RawOps.h"

namespace {

// Thrown inside this file when a Java exception is pending (or has just been raised): the
// entry points catch it and return to Java, which then sees that exception.
struct JavaPending {};

[[noreturn]] void throw_java(JNIEnv* env, const char* cls, const std::string& message) {
  if (env->ExceptionCheck()) throw JavaPending{};
  jclass c = env->FindClass(cls);
  if (c != nullptr) env->ThrowNew(c, message.c_str());
  throw JavaPending{};
}

void check_pending(JNIEnv* env) {
  if (env->ExceptionCheck()) throw JavaPending{};
}

[[noreturn]] void throw_status(JNIEnv* env, blockrnn_status s) {
  const std::string message = blockrnn_last_error();
  switch (s) {
    case BLOCKRNN_INVALID_ARGUMENT:
      throw_java(env, "java/lang/IllegalArgumentException", message);
    case BLOCKRNN_UNIMPLEMENTED:
      throw_java(env, "java/lang/UnsupportedOperationException", message);
    case BLOCKRNN_CANCELLED:
      throw_java(env, "java/util/concurrent/CancellationException", message);
    default: {
      if (env->ExceptionCheck()) throw JavaPending{};
      jclass c = env->FindClass("org/blockrnn/BlockrnnException");
      check_pending(env);
      jmethodID ctor = env->GetMethodID(c, "<init>", "(Ljava/lang/String;Ljava/lang/String;)V");
      check_pending(env);
      jstring status = env->NewStringUTF(blockrnn_status_name(s));
      check_pending(env);
      jstring text = env->NewStringUTF(message.c_str());
      check_pending(env);
      auto* e = static_cast<jthrowable>(env->NewObject(c, ctor, status, text));
      check_pending(env);
      env->Throw(e);
      throw JavaPending{};
    }
  }
}

// Runs `f`, converting whatever escapes into a Java exception; returns f's value or `fallback`.
template <typename R, typename F>
R guarded(JNIEnv* env, R fallback, F&& f) {
  try {
    return f();
  } catch (const JavaPending&) {
  } catch (const std::bad_alloc&) {
    if (!env->ExceptionCheck()) {
      jclass c = env->FindClass("java/lang/OutOfMemoryError");
      if (c != nullptr) env->ThrowNew(c, "blockrnn: native allocation failed");
    }
  } catch (...) {
    if (!env->ExceptionCheck()) {
      jclass c = env->FindClass("java/lang/IllegalStateException");
      if (c != nullptr) env->ThrowNew(c, "blockrnn: unexpected native exception");
    }
  }
  return fallback;
}

std::string utf(JNIEnv* env, jstring s, const char* what) {
  if (s == nullptr)
    throw_java(env, "java/lang/IllegalArgumentException", std::string(what) + " is null");
  const char* chars = env->GetStringUTFChars(s, nullptr);
  check_pending(env);
  std::string out(chars);
  env->ReleaseStringUTFChars(s, chars);
  return out;
}

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

// One input copied out of its Java array.
struct Input {
  int32_t dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

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
    jclass float_array = env->FindClass("[F");
    check_pending(env);
    jclass double_array = env->FindClass("[D");
    check_pending(env);
    jclass long_array = env->FindClass("[J");  // LongTensor: seq_lengths
    check_pending(env);

    // Inputs, copied into native memory (the op may run long: no pinned Java arrays).
    const jsize n = env->GetArrayLength(data);
    std::vector<Input> inputs(static_cast<size_t>(n));
    for (jsize k = 0; k < n; ++k) {
      Input& in = inputs[static_cast<size_t>(k)];
      jobject array = env->GetObjectArrayElement(data, k);
      check_pending(env);
      auto shape = static_cast<jlongArray>(env->GetObjectArrayElement(shapes, k));
      check_pending(env);
      const jsize rank = env->GetArrayLength(shape);
      in.shape.resize(static_cast<size_t>(rank));
      env->GetLongArrayRegion(shape, 0, rank, reinterpret_cast<jlong*>(in.shape.data()));
      check_pending(env);
      const jsize len = env->GetArrayLength(static_cast<jarray>(array));
      if (env->IsInstanceOf(array, float_array)) {
        in.dtype = BLOCKRNN_FLOAT32;
        in.bytes.resize(static_cast<size_t>(len) * sizeof(float));
        env->GetFloatArrayRegion(static_cast<jfloatArray>(array), 0, len,
                                 reinterpret_cast<jfloat*>(in.bytes.data()));
      } else if (env->IsInstanceOf(array, double_array)) {
        in.dtype = BLOCKRNN_FLOAT64;
        in.bytes.resize(static_cast<size_t>(len) * sizeof(double));
        env->GetDoubleArrayRegion(static_cast<jdoubleArray>(array), 0, len,
                                  reinterpret_cast<jdouble*>(in.bytes.data()));
      } else if (env->IsInstanceOf(array, long_array)) {
        in.dtype = BLOCKRNN_INT64;
        in.bytes.resize(static_cast<size_t>(len) * sizeof(int64_t));
        env->GetLongArrayRegion(static_cast<jlongArray>(array), 0, len,
                                reinterpret_cast<jlong*>(in.bytes.data()));
      } else {
        throw_java(env, "java/lang/IllegalArgumentException",
                   op + ": input " + std::to_string(k) + " is not a float[], double[] or long[]");
      }
      check_pending(env);
      env->DeleteLocalRef(array);
      env->DeleteLocalRef(shape);
    }
    std::vector<blockrnn_tensor> tensors;
    int64_t seq = seq_len_max;
    if (has_seq_len_max) tensors.push_back({BLOCKRNN_INT64, 0, nullptr, nullptr, &seq});
    for (Input& in : inputs) {
      tensors.push_back({in.dtype, static_cast<int32_t>(in.shape.size()), in.shape.data(), nullptr,
                         in.bytes.data()});
    }

    // Attrs.
    const jsize num_attrs = env->GetArrayLength(attr_names);
    std::vector<std::string> names;
    std::vector<double> values(static_cast<size_t>(num_attrs));
    std::vector<jboolean> is_bool(static_cast<size_t>(num_attrs));
    env->GetDoubleArrayRegion(attr_values, 0, num_attrs, values.data());
    check_pending(env);
    env->GetBooleanArrayRegion(attr_is_bool, 0, num_attrs, is_bool.data());
    check_pending(env);
    for (jsize k = 0; k < num_attrs; ++k) {
      auto s = static_cast<jstring>(env->GetObjectArrayElement(attr_names, k));
      check_pending(env);
      names.push_back(utf(env, s, "attr name"));
      env->DeleteLocalRef(s);
    }
    std::vector<blockrnn_attr> attrs;
    for (size_t k = 0; k < names.size(); ++k) {
      attrs.push_back(is_bool[k] ? blockrnn_attr_bool(names[k].c_str(), values[k] != 0.0)
                                 : blockrnn_attr_float(names[k].c_str(), values[k]));
    }

    // Outputs: shapes first, then native buffers, then the run.
    const size_t num_outputs = static_cast<size_t>(blockrnn_op_num_outputs(index));
    std::vector<blockrnn_shape> out(num_outputs);
    int32_t dtype = 0;
    blockrnn_status s =
        blockrnn_infer_outputs(op.c_str(), tensors.data(), tensors.size(), attrs.data(),
                               attrs.size(), &dtype, out.data(), num_outputs);
    if (s != BLOCKRNN_OK) throw_status(env, s);
    if (dtype != BLOCKRNN_FLOAT32 && dtype != BLOCKRNN_FLOAT64) {
      throw_java(env, "java/lang/IllegalArgumentException",
                 op + ": the Java binding supports float32 and float64 only");
    }
    const size_t elem = dtype == BLOCKRNN_FLOAT32 ? sizeof(float) : sizeof(double);
    std::vector<std::vector<unsigned char>> buffers(num_outputs);
    std::vector<blockrnn_tensor> outputs(num_outputs);
    std::vector<int64_t> counts(num_outputs);
    for (size_t k = 0; k < num_outputs; ++k) {
      int64_t count = 1;
      for (int d = 0; d < out[k].rank; ++d) count *= out[k].dims[d];
      if (count > INT_MAX - 8) {
        throw_java(env, "java/lang/IllegalArgumentException",
                   op + ": output " + blockrnn_op_output_name(index, static_cast<int>(k)) +
                       " has more elements than a Java array holds");
      }
      counts[k] = count;
      buffers[k].resize(static_cast<size_t>(count) * elem);
      outputs[k] = {dtype, out[k].rank, out[k].dims, nullptr, buffers[k].data()};
    }
    s = blockrnn_run_op(op.c_str(), tensors.data(), tensors.size(), attrs.data(), attrs.size(),
                        outputs.data(), num_outputs);
    if (s != BLOCKRNN_OK) throw_status(env, s);

    // Back into Java arrays.
    jclass object_class = env->FindClass("java/lang/Object");
    check_pending(env);
    jobjectArray result =
        env->NewObjectArray(static_cast<jsize>(num_outputs), object_class, nullptr);
    check_pending(env);
    for (size_t k = 0; k < num_outputs; ++k) {
      const auto count = static_cast<jsize>(counts[k]);
      jarray array;
      if (dtype == BLOCKRNN_FLOAT32) {
        jfloatArray a = env->NewFloatArray(count);
        check_pending(env);
        env->SetFloatArrayRegion(a, 0, count, reinterpret_cast<const jfloat*>(buffers[k].data()));
        array = a;
      } else {
        jdoubleArray a = env->NewDoubleArray(count);
        check_pending(env);
        env->SetDoubleArrayRegion(a, 0, count, reinterpret_cast<const jdouble*>(buffers[k].data()));
        array = a;
      }
      check_pending(env);
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

}  // extern "C"
