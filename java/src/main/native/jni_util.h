// What the JNI sources (java/src/main/native/*.cc) share: turning a failed library status or a
// C++ exception into a pending Java exception, and back out of the native code.
#pragma once

#include <jni.h>

#include <new>
#include <string>

#include "blockrnn/c_api.h"

namespace blockrnn_jni {

// Thrown inside the JNI code when a Java exception is pending (or has just been raised): the
// entry points catch it and return to Java, which then sees that exception.
struct JavaPending {};

[[noreturn]] inline void throw_java(JNIEnv* env, const char* cls, const std::string& message) {
  if (env->ExceptionCheck()) throw JavaPending{};
  jclass c = env->FindClass(cls);
  if (c != nullptr) env->ThrowNew(c, message.c_str());
  throw JavaPending{};
}

inline void check_pending(JNIEnv* env) {
  if (env->ExceptionCheck()) throw JavaPending{};
}

// The Java exception of a library status: IllegalArgumentException for bad input,
// UnsupportedOperationException, CancellationException, else BlockrnnException.
[[noreturn]] inline void throw_library(JNIEnv* env, blockrnn_status s, const std::string& message) {
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

// The failed call's status and blockrnn_last_error() as a Java exception.
[[noreturn]] inline void throw_status(JNIEnv* env, blockrnn_status s) {
  throw_library(env, s, blockrnn_last_error());
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

inline std::string utf(JNIEnv* env, jstring s, const char* what) {
  if (s == nullptr)
    throw_java(env, "java/lang/IllegalArgumentException", std::string(what) + " is null");
  const char* chars = env->GetStringUTFChars(s, nullptr);
  check_pending(env);
  std::string out(chars);
  env->ReleaseStringUTFChars(s, chars);
  return out;
}

}  // namespace blockrnn_jni
