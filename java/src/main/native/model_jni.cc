// The JNI side of org.blockrnn.Model, over the C API's model functions (blockrnn/c_api.h):
// copies the Java arrays in, runs the model, copies the outputs out, and turns a failed status
// into a Java exception (IllegalArgumentException for a bad file or bad input).
#include <jni.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "blockrnn/c_api.h"
#include "jni_util.h"
#include "org_blockrnn_Model.h"

namespace {

using blockrnn_jni::check_pending;
using blockrnn_jni::guarded;
using blockrnn_jni::throw_java;
using blockrnn_jni::throw_status;
using blockrnn_jni::utf;

constexpr const char* kIllegalArgument = "java/lang/IllegalArgumentException";

blockrnn_model* model_of(JNIEnv* env, jlong handle) {
  if (handle == 0) throw_java(env, "java/lang/IllegalStateException", "Model: the model is closed");
  return reinterpret_cast<blockrnn_model*>(handle);
}

// A tensor copied out of Java: its dtype, shape and bytes.
struct Buffer {
  int32_t dtype = BLOCKRNN_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  blockrnn_tensor tensor() {
    blockrnn_tensor t;
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(shape.size());
    t.shape = shape.data();
    t.strides = nullptr;
    t.data = bytes.data();
    return t;
  }
};

std::vector<int64_t> longs(JNIEnv* env, jlongArray a) {
  const jsize n = env->GetArrayLength(a);
  std::vector<int64_t> out(static_cast<std::size_t>(n));
  if (n > 0) env->GetLongArrayRegion(a, 0, n, reinterpret_cast<jlong*>(out.data()));
  check_pending(env);
  return out;
}

// A Java float[], double[] or long[] with its shape (what `what` names in messages).
Buffer copy_in(JNIEnv* env, jobject array, jlongArray shape, const std::string& what) {
  Buffer b;
  b.shape = longs(env, shape);
  jclass floats = env->FindClass("[F");
  check_pending(env);
  jclass doubles = env->FindClass("[D");
  check_pending(env);
  jclass int64s = env->FindClass("[J");
  check_pending(env);
  const jsize n = env->GetArrayLength(static_cast<jarray>(array));
  if (env->IsInstanceOf(array, floats)) {
    b.dtype = BLOCKRNN_FLOAT32;
    b.bytes.resize(sizeof(float) * static_cast<std::size_t>(n));
    env->GetFloatArrayRegion(static_cast<jfloatArray>(array), 0, n,
                             reinterpret_cast<jfloat*>(b.bytes.data()));
  } else if (env->IsInstanceOf(array, doubles)) {
    b.dtype = BLOCKRNN_FLOAT64;
    b.bytes.resize(sizeof(double) * static_cast<std::size_t>(n));
    env->GetDoubleArrayRegion(static_cast<jdoubleArray>(array), 0, n,
                              reinterpret_cast<jdouble*>(b.bytes.data()));
  } else if (env->IsInstanceOf(array, int64s)) {
    b.dtype = BLOCKRNN_INT64;
    b.bytes.resize(sizeof(int64_t) * static_cast<std::size_t>(n));
    env->GetLongArrayRegion(static_cast<jlongArray>(array), 0, n,
                            reinterpret_cast<jlong*>(b.bytes.data()));
  } else {
    throw_java(env, kIllegalArgument,
               "Model.forward: " + what + " must be a float, double or int64 tensor");
  }
  check_pending(env);
  return b;
}

// A zeroed buffer of the model's dtype and `shape`, whose size must fit a Java array.
Buffer output(JNIEnv* env, int32_t dtype, std::vector<int64_t> shape, const char* what) {
  long double n = 1;
  for (int64_t d : shape) n *= static_cast<long double>(d < 0 ? 0 : d);
  if (n > INT_MAX - 8) {
    throw_java(env, kIllegalArgument,
               std::string("Model.forward: ") + what +
                   " would have more elements than a Java array holds");
  }
  Buffer b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.bytes.resize(static_cast<std::size_t>(n) * (dtype == BLOCKRNN_FLOAT32 ? 4 : 8));
  return b;
}

jobject copy_out(JNIEnv* env, const Buffer& b) {
  const jsize n = static_cast<jsize>(b.bytes.size() / (b.dtype == BLOCKRNN_FLOAT32 ? 4 : 8));
  jarray a;
  if (b.dtype == BLOCKRNN_FLOAT32) {
    jfloatArray f = env->NewFloatArray(n);
    check_pending(env);
    env->SetFloatArrayRegion(f, 0, n, reinterpret_cast<const jfloat*>(b.bytes.data()));
    a = f;
  } else {
    jdoubleArray d = env->NewDoubleArray(n);
    check_pending(env);
    env->SetDoubleArrayRegion(d, 0, n, reinterpret_cast<const jdouble*>(b.bytes.data()));
    a = d;
  }
  check_pending(env);
  return a;
}

jlongArray long_array(JNIEnv* env, const std::vector<int64_t>& v) {
  jlongArray a = env->NewLongArray(static_cast<jsize>(v.size()));
  check_pending(env);
  if (!v.empty()) {
    env->SetLongArrayRegion(a, 0, static_cast<jsize>(v.size()),
                            reinterpret_cast<const jlong*>(v.data()));
  }
  check_pending(env);
  return a;
}

}  // namespace

extern "C" {

JNIEXPORT jlong JNICALL Java_org_blockrnn_Model_nativeLoad(JNIEnv* env, jclass, jstring path) {
  return guarded(env, jlong{0}, [&] {
    const std::string p = utf(env, path, "path");
    blockrnn_model* model = nullptr;
    const blockrnn_status s = blockrnn_model_load(p.c_str(), &model);
    if (s != BLOCKRNN_OK) throw_status(env, s);
    return reinterpret_cast<jlong>(model);
  });
}

JNIEXPORT void JNICALL Java_org_blockrnn_Model_nativeFree(JNIEnv*, jclass, jlong handle) {
  blockrnn_model_free(reinterpret_cast<blockrnn_model*>(handle));
}

JNIEXPORT jlongArray JNICALL Java_org_blockrnn_Model_nativeInfo(JNIEnv* env, jclass, jlong handle) {
  return guarded(env, static_cast<jlongArray>(nullptr), [&] {
    const blockrnn_model* m = model_of(env, handle);
    return long_array(env, {blockrnn_model_dtype(m), blockrnn_model_input_size(m),
                            blockrnn_model_output_size(m), blockrnn_model_num_states(m)});
  });
}

JNIEXPORT jlongArray JNICALL Java_org_blockrnn_Model_nativeStates(JNIEnv* env, jclass,
                                                                  jlong handle) {
  return guarded(env, static_cast<jlongArray>(nullptr), [&] {
    const blockrnn_model* m = model_of(env, handle);
    std::vector<int64_t> out;
    for (int64_t k = 0; k < blockrnn_model_num_states(m); ++k) {
      int64_t layer = 0, hidden = 0;
      int32_t direction = 0;
      const char* name = "";
      const blockrnn_status s = blockrnn_model_state_info(m, k, &layer, &direction, &name, &hidden);
      if (s != BLOCKRNN_OK) throw_status(env, s);
      out.insert(out.end(), {layer, direction, std::string(name) == "cs" ? 1 : 0, hidden});
    }
    return long_array(env, out);
  });
}

JNIEXPORT jstring JNICALL Java_org_blockrnn_Model_nativeSummary(JNIEnv* env, jclass, jlong handle) {
  return guarded(env, static_cast<jstring>(nullptr), [&] {
    jstring s = env->NewStringUTF(blockrnn_model_summary(model_of(env, handle)));
    check_pending(env);
    return s;
  });
}

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_Model_nativeForward(
    JNIEnv* env, jclass, jlong handle, jobject x, jlongArray x_shape, jlongArray seq_lengths,
    jlongArray seq_lengths_shape, jobjectArray initial_states, jobjectArray initial_shapes) {
  return guarded(env, static_cast<jobjectArray>(nullptr), [&] {
    blockrnn_model* m = model_of(env, handle);
    Buffer xb = copy_in(env, x, x_shape, "x");
    Buffer lb;
    if (seq_lengths != nullptr) lb = copy_in(env, seq_lengths, seq_lengths_shape, "seqLengths");
    std::vector<Buffer> init;
    std::vector<blockrnn_tensor> init_t;
    if (initial_states != nullptr) {
      const jsize n = env->GetArrayLength(initial_states);
      init.resize(static_cast<std::size_t>(n));
      for (jsize k = 0; k < n; ++k) {
        jobject a = env->GetObjectArrayElement(initial_states, k);
        check_pending(env);
        if (a == nullptr) {
          blockrnn_tensor absent{BLOCKRNN_FLOAT32, 0, nullptr, nullptr, nullptr};
          init_t.push_back(absent);
          continue;
        }
        auto shape = static_cast<jlongArray>(env->GetObjectArrayElement(initial_shapes, k));
        check_pending(env);
        init[k] = copy_in(env, a, shape, "initialStates[" + std::to_string(k) + "]");
        init_t.push_back(init[k].tensor());
        env->DeleteLocalRef(a);
        env->DeleteLocalRef(shape);
      }
    }
    const int32_t dtype = blockrnn_model_dtype(m);
    // y and the states are sized from x when it has rank 3; otherwise the forward reports x.
    const bool sized = xb.shape.size() == 3 && xb.shape[0] >= 0 && xb.shape[1] >= 0;
    const int64_t T = sized ? xb.shape[0] : 0, B = sized ? xb.shape[1] : 0;
    blockrnn_shape ys{};
    if (sized) {
      const blockrnn_status s = blockrnn_model_output_shape(m, T, B, &ys);
      if (s != BLOCKRNN_OK) throw_status(env, s);
    }
    Buffer yb = output(env, dtype, std::vector<int64_t>(ys.dims, ys.dims + ys.rank), "y");
    std::vector<Buffer> finals;
    std::vector<blockrnn_tensor> finals_t;
    for (int64_t k = 0; k < blockrnn_model_num_states(m); ++k) {
      int64_t hidden = 0;
      blockrnn_model_state_info(m, k, nullptr, nullptr, nullptr, &hidden);
      finals.push_back(output(env, dtype, {B, hidden}, "a state"));
    }
    for (Buffer& f : finals) finals_t.push_back(f.tensor());
    blockrnn_tensor xt = xb.tensor(), lt = lb.tensor(), yt = yb.tensor();
    if (!sized) yt = blockrnn_tensor{dtype, 0, nullptr, nullptr, nullptr};
    const blockrnn_status s = blockrnn_model_forward(
        m, &xt, seq_lengths != nullptr ? &lt : nullptr, init_t.empty() ? nullptr : init_t.data(),
        init_t.size(), &yt, finals_t.data(), finals_t.size());
    if (s != BLOCKRNN_OK) throw_status(env, s);
    jclass object_class = env->FindClass("java/lang/Object");
    check_pending(env);
    jobjectArray out =
        env->NewObjectArray(static_cast<jsize>(2 + finals.size()), object_class, nullptr);
    check_pending(env);
    jobject y_array = copy_out(env, yb);
    env->SetObjectArrayElement(out, 0, y_array);
    check_pending(env);
    env->DeleteLocalRef(y_array);
    jlongArray y_shape = long_array(env, yb.shape);
    env->SetObjectArrayElement(out, 1, y_shape);
    check_pending(env);
    env->DeleteLocalRef(y_shape);
    for (std::size_t k = 0; k < finals.size(); ++k) {
      jobject f = copy_out(env, finals[k]);
      env->SetObjectArrayElement(out, static_cast<jsize>(2 + k), f);
      check_pending(env);
      env->DeleteLocalRef(f);
    }
    return out;
  });
}

}  // extern "C"
