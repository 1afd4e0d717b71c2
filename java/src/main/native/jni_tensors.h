// What the JNI sources of the handles (rnn_jni.cc, layer_jni.cc) share: Java arrays copied into
// native tensors (a call may run long: no Java array stays pinned), output buffers, the outputs
// copied back into new Java arrays, and a failed status turned into a Java exception.
#pragma once

#include <jni.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "blockrnn/c_api.h"
#include "jni_util.h"

namespace blockrnn_jni {

// A tensor in native memory: a copy of a Java array (an input), or a buffer for an output.
struct NativeTensor {
  int32_t dtype = BLOCKRNN_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  bool absent = true;

  blockrnn_tensor c() {
    if (absent) return blockrnn_tensor{0, 0, nullptr, nullptr, nullptr};
    return {dtype, static_cast<int32_t>(shape.size()), shape.data(), nullptr, bytes.data()};
  }
};

inline size_t elem_size(int32_t dtype) {
  return dtype == BLOCKRNN_FLOAT32 ? sizeof(float) : 8;  // float64 and int64
}

inline std::vector<int64_t> long_array(JNIEnv* env, jlongArray a) {
  const jsize n = env->GetArrayLength(a);
  check_pending(env);
  std::vector<int64_t> out(static_cast<size_t>(n));
  env->GetLongArrayRegion(a, 0, n, reinterpret_cast<jlong*>(out.data()));
  check_pending(env);
  return out;
}

// Element k of data (a float[], double[] or long[], or null: absent) with shape k, copied.
// (A Java Tensor's length is the product of its shape, checked by its constructor.)
inline NativeTensor read_input(JNIEnv* env, const std::string& where, jobjectArray data,
                               jobjectArray shapes, jsize k) {
  NativeTensor t;
  auto array = static_cast<jarray>(env->GetObjectArrayElement(data, k));
  check_pending(env);
  if (array == nullptr) return t;
  t.absent = false;
  auto shape = static_cast<jlongArray>(env->GetObjectArrayElement(shapes, k));
  check_pending(env);
  t.shape = long_array(env, shape);
  env->DeleteLocalRef(shape);
  const jsize length = env->GetArrayLength(array);
  check_pending(env);
  jclass floats = env->FindClass("[F");
  check_pending(env);
  jclass doubles = env->FindClass("[D");
  check_pending(env);
  jclass longs = env->FindClass("[J");
  check_pending(env);
  const bool is_float = env->IsInstanceOf(array, floats) == JNI_TRUE;
  const bool is_double = env->IsInstanceOf(array, doubles) == JNI_TRUE;
  const bool is_long = env->IsInstanceOf(array, longs) == JNI_TRUE;
  env->DeleteLocalRef(floats);
  env->DeleteLocalRef(doubles);
  env->DeleteLocalRef(longs);
  if (!is_float && !is_double && !is_long) {
    throw_java(env, "java/lang/IllegalArgumentException",
               where + " is not a float[], double[] or long[]");
  }
  t.dtype = is_float ? BLOCKRNN_FLOAT32 : is_double ? BLOCKRNN_FLOAT64 : BLOCKRNN_INT64;
  t.bytes.resize(static_cast<size_t>(length) * elem_size(t.dtype));
  if (is_float) {
    env->GetFloatArrayRegion(static_cast<jfloatArray>(array), 0, length,
                             reinterpret_cast<jfloat*>(t.bytes.data()));
  } else if (is_double) {
    env->GetDoubleArrayRegion(static_cast<jdoubleArray>(array), 0, length,
                              reinterpret_cast<jdouble*>(t.bytes.data()));
  } else {
    env->GetLongArrayRegion(static_cast<jlongArray>(array), 0, length,
                            reinterpret_cast<jlong*>(t.bytes.data()));
  }
  check_pending(env);
  env->DeleteLocalRef(array);
  return t;
}

inline std::vector<NativeTensor> read_inputs(JNIEnv* env, const char* fn, jobjectArray data,
                                             jobjectArray shapes,
                                             const std::vector<std::string>& names) {
  std::vector<NativeTensor> out;
  for (size_t k = 0; k < names.size(); ++k) {
    out.push_back(read_input(env, std::string(fn) + ": " + names[k], data, shapes, jsize(k)));
  }
  return out;
}

// An output buffer of `shape` (absent when null) in `dtype`, its element count within what a
// Java array holds.
inline NativeTensor make_output(JNIEnv* env, const std::string& where, int32_t dtype,
                                std::vector<int64_t> shape) {
  NativeTensor t;
  t.absent = false;
  t.dtype = dtype;
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && count > (INT_MAX - 8) / d)) {
      throw_java(env, "java/lang/IllegalArgumentException",
                 where + " has more elements than a Java array holds");
    }
    count *= d;
  }
  t.shape = std::move(shape);
  t.bytes.resize(static_cast<size_t>(count) * elem_size(dtype));
  return t;
}

// The output shapes Java computed (element k of out_shapes; null: absent).
inline std::vector<NativeTensor> make_outputs(JNIEnv* env, const char* fn, int32_t dtype,
                                              jobjectArray out_shapes,
                                              const std::vector<std::string>& names) {
  std::vector<NativeTensor> out;
  for (size_t k = 0; k < names.size(); ++k) {
    auto shape = static_cast<jlongArray>(env->GetObjectArrayElement(out_shapes, jsize(k)));
    check_pending(env);
    if (shape == nullptr) {
      out.emplace_back();
      continue;
    }
    out.push_back(
        make_output(env, std::string(fn) + ": " + names[k], dtype, long_array(env, shape)));
    env->DeleteLocalRef(shape);
  }
  return out;
}

// The outputs as new Java arrays (null for the absent ones).
inline jobjectArray to_java(JNIEnv* env, std::vector<NativeTensor>& outs) {
  jclass object_class = env->FindClass("java/lang/Object");
  check_pending(env);
  jobjectArray result = env->NewObjectArray(static_cast<jsize>(outs.size()), object_class, nullptr);
  check_pending(env);
  for (size_t k = 0; k < outs.size(); ++k) {
    NativeTensor& t = outs[k];
    if (t.absent) continue;
    const auto count = static_cast<jsize>(t.bytes.size() / elem_size(t.dtype));
    jarray array;
    if (t.dtype == BLOCKRNN_FLOAT32) {
      jfloatArray a = env->NewFloatArray(count);
      check_pending(env);
      env->SetFloatArrayRegion(a, 0, count, reinterpret_cast<const jfloat*>(t.bytes.data()));
      array = a;
    } else {
      jdoubleArray a = env->NewDoubleArray(count);
      check_pending(env);
      env->SetDoubleArrayRegion(a, 0, count, reinterpret_cast<const jdouble*>(t.bytes.data()));
      array = a;
    }
    check_pending(env);
    std::vector<unsigned char>().swap(t.bytes);
    env->SetObjectArrayElement(result, static_cast<jsize>(k), array);
    check_pending(env);
    env->DeleteLocalRef(array);
  }
  return result;
}

inline void check(JNIEnv* env, blockrnn_status s) {
  if (s != BLOCKRNN_OK) throw_status(env, s);
}

// The dtype of the outputs: x's (the handle refuses an x of another dtype than its own).
inline int32_t float_dtype(JNIEnv* env, const char* fn, const NativeTensor& x) {
  if (x.absent || (x.dtype != BLOCKRNN_FLOAT32 && x.dtype != BLOCKRNN_FLOAT64)) {
    throw_java(env, "java/lang/IllegalArgumentException",
               std::string(fn) + ": x must be a FloatTensor or a DoubleTensor");
  }
  return x.dtype;
}

}  // namespace blockrnn_jni
