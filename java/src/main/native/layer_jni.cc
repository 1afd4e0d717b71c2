// The JNI side of org.blockrnn.Layer, over the C API's layer handles (blockrnn/layer_c_api.h):
// copies the Java arrays into native buffers (jni_tensors.h), runs the handle with the caller's
// direct ByteBuffer as its workspace when one is given (used in place, not copied), and copies
// the outputs into new Java arrays. Checks nothing the library checks: a failed status becomes a
// Java exception with the library's message (jni_util.h); every JNI call that can throw is
// checked (the tests run under -Xcheck:jni).
#include <jni.h>

#include <cstdint>
#include <string>
#include <vector>

#include "blockrnn/c_api.h"
#include "blockrnn/layer_c_api.h"
#include "jni_tensors.h"
#include "jni_util.h"
#include "org_blockrnn_Layer.h"

namespace {

using namespace blockrnn_jni;  // NOLINT

blockrnn_layer* handle_of(jlong h) {
  return reinterpret_cast<blockrnn_layer*>(static_cast<intptr_t>(h));
}

// The caller's workspace: the memory of a direct buffer (null: the handle's own).
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};
Workspace workspace_of(JNIEnv* env, const char* fn, jobject buffer) {
  Workspace w;
  if (buffer == nullptr) return w;
  w.data = env->GetDirectBufferAddress(buffer);
  check_pending(env);
  const jlong capacity = env->GetDirectBufferCapacity(buffer);
  check_pending(env);
  if (w.data == nullptr || capacity < 0) {
    throw_java(
        env, "java/lang/IllegalArgumentException",
        std::string(fn) + ": workspace must be a direct ByteBuffer (ByteBuffer.allocateDirect)");
  }
  w.bytes = static_cast<size_t>(capacity);
  return w;
}

std::vector<std::string> names(const char* prefix, jsize n) {
  std::vector<std::string> out;
  for (jsize k = 0; k < n; ++k) out.push_back(std::string(prefix) + "[" + std::to_string(k) + "]");
  return out;
}

}  // namespace

extern "C" {

JNIEXPORT jlong JNICALL Java_org_blockrnn_Layer_createNative(
    JNIEnv* env, jclass, jint kind, jboolean double_precision, jlong input_size, jlong hidden_size,
    jlong max_time, jlong max_batch, jboolean caller_workspace, jboolean has_forget_bias,
    jdouble forget_bias, jboolean has_cell_clip, jdouble cell_clip, jboolean use_peephole) {
  return guarded<jlong>(env, 0, [&] {
    blockrnn_layer_options o = blockrnn_layer_default_options();
    o.kind = kind;
    o.dtype = double_precision ? BLOCKRNN_FLOAT64 : BLOCKRNN_FLOAT32;
    o.input_size = input_size;
    o.hidden_size = hidden_size;
    o.max_time = max_time;
    o.max_batch = max_batch;
    o.caller_workspace = caller_workspace ? 1 : 0;
    o.has_forget_bias = has_forget_bias ? 1 : 0;
    o.forget_bias = forget_bias;
    o.has_cell_clip = has_cell_clip ? 1 : 0;
    o.cell_clip = cell_clip;
    o.use_peephole = use_peephole ? 1 : 0;
    blockrnn_layer* layer = nullptr;
    check(env, blockrnn_layer_create(&o, &layer));
    return static_cast<jlong>(reinterpret_cast<intptr_t>(layer));
  });
}

JNIEXPORT void JNICALL Java_org_blockrnn_Layer_freeNative(JNIEnv*, jclass, jlong h) {
  blockrnn_layer_free(handle_of(h));
}

JNIEXPORT jint JNICALL Java_org_blockrnn_Layer_numParamsNative(JNIEnv* env, jclass, jlong h) {
  return guarded<jint>(env, 0, [&] {
    int32_t n = 0;
    check(env, blockrnn_layer_num_params(handle_of(h), &n));
    return static_cast<jint>(n);
  });
}

JNIEXPORT jlongArray JNICALL Java_org_blockrnn_Layer_paramShapeNative(JNIEnv* env, jclass, jlong h,
                                                                      jint k) {
  return guarded<jlongArray>(env, nullptr, [&] {
    blockrnn_shape shape;
    check(env, blockrnn_layer_param_shape(handle_of(h), k, &shape));
    jlongArray s = env->NewLongArray(shape.rank);
    check_pending(env);
    env->SetLongArrayRegion(s, 0, shape.rank, reinterpret_cast<const jlong*>(shape.dims));
    check_pending(env);
    return s;
  });
}

JNIEXPORT void JNICALL Java_org_blockrnn_Layer_setWeightsNative(JNIEnv* env, jclass, jlong h,
                                                                jobjectArray data,
                                                                jobjectArray shapes) {
  guarded<int>(env, 0, [&] {
    const char* fn = "Layer.setWeights";
    const jsize n = env->GetArrayLength(data);
    check_pending(env);
    std::vector<NativeTensor> params = read_inputs(env, fn, data, shapes, names("params", n));
    std::vector<blockrnn_tensor> c;
    for (NativeTensor& t : params) c.push_back(t.c());  // a null one is absent: the layer names it
    check(env, blockrnn_layer_set_weights(handle_of(h), c.data(), c.size()));
    return 0;
  });
}

JNIEXPORT jlong JNICALL Java_org_blockrnn_Layer_workspaceBytesNative(JNIEnv* env, jclass, jlong h,
                                                                     jlong time, jlong batch) {
  return guarded<jlong>(env, 0, [&] {
    size_t bytes = 0;
    check(env, blockrnn_layer_workspace_bytes(handle_of(h), time, batch, &bytes));
    return static_cast<jlong>(bytes);
  });
}

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_Layer_forwardNative(
    JNIEnv* env, jclass, jlong h, jobjectArray data, jobjectArray shapes, jboolean has_seq_len_max,
    jlong seq_len_max, jobjectArray out_shapes, jobject workspace) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    const char* fn = "Layer.forward";
    std::vector<NativeTensor> in =
        read_inputs(env, fn, data, shapes, {"x", "cs_prev", "h_prev", "seq_lengths"});
    const int32_t dtype = float_dtype(env, fn, in[0]);
    const jsize n = env->GetArrayLength(out_shapes);
    check_pending(env);
    std::vector<NativeTensor> out = make_outputs(env, fn, dtype, out_shapes, names("outputs", n));
    const Workspace ws = workspace_of(env, fn, workspace);
    blockrnn_layer_inputs ci = {
        in[0].c(), in[1].c(), in[2].c(), in[3].c(), has_seq_len_max ? 1 : 0, seq_len_max};
    std::vector<blockrnn_tensor> co;
    for (NativeTensor& t : out) co.push_back(t.c());
    check(env, blockrnn_layer_forward(handle_of(h), &ci, co.data(), co.size(), ws.data, ws.bytes));
    return to_java(env, out);
  });
}

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_Layer_backwardNative(
    JNIEnv* env, jclass, jlong h, jobjectArray data, jobjectArray shapes, jint num_forward_outputs,
    jboolean has_seq_len_max, jlong seq_len_max, jobjectArray out_shapes, jobject workspace) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    const char* fn = "Layer.backward";
    // data: x, cs_prev, h_prev, seq_lengths, the forward's outputs, cs_grad, h_grad.
    std::vector<std::string> in_names = {"x", "cs_prev", "h_prev", "seq_lengths"};
    for (const std::string& s : names("outputs", num_forward_outputs)) in_names.push_back(s);
    in_names.push_back("cs_grad");
    in_names.push_back("h_grad");
    std::vector<NativeTensor> in = read_inputs(env, fn, data, shapes, in_names);
    const int32_t dtype = float_dtype(env, fn, in[0]);
    const jsize n = env->GetArrayLength(out_shapes);
    check_pending(env);
    std::vector<NativeTensor> out = make_outputs(env, fn, dtype, out_shapes, names("grads", n));
    const Workspace ws = workspace_of(env, fn, workspace);
    blockrnn_layer_inputs ci = {
        in[0].c(), in[1].c(), in[2].c(), in[3].c(), has_seq_len_max ? 1 : 0, seq_len_max};
    std::vector<blockrnn_tensor> fwd;
    for (jint k = 0; k < num_forward_outputs; ++k) fwd.push_back(in[4 + k].c());
    blockrnn_layer_grad_inputs cg;
    cg.outputs = fwd.data();
    cg.num_outputs = fwd.size();
    cg.cs_grad = in[4 + num_forward_outputs].c();
    cg.h_grad = in[5 + num_forward_outputs].c();
    std::vector<blockrnn_tensor> co;
    for (NativeTensor& t : out) co.push_back(t.c());
    check(env,
          blockrnn_layer_backward(handle_of(h), &ci, &cg, co.data(), co.size(), ws.data, ws.bytes));
    return to_java(env, out);
  });
}

}  // extern "C"
