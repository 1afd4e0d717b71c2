// The JNI side of org.blockrnn.RNN, over the C API's RNN handles (blockrnn/rnn_c_api.h): copies
// the Java arrays into native buffers (a call may run long: no Java array stays pinned), runs the
// handle, and copies the outputs into new Java arrays. A failed status becomes a Java exception
// (jni_util.h); every JNI call that can throw is checked (the tests run under -Xcheck:jni).
#include <jni.h>

#include <cstdint>
#include <string>
#include <vector>

#include "blockrnn/c_api.h"
#include "blockrnn/rnn_c_api.h"
#include "jni_tensors.h"
#include "jni_util.h"
#include "org_blockrnn_RNN.h"

namespace {

using namespace blockrnn_jni;  // NOLINT

blockrnn_rnn* handle_of(jlong h) {
  return reinterpret_cast<blockrnn_rnn*>(static_cast<intptr_t>(h));
}

}  // namespace

extern "C" {

JNIEXPORT jlong JNICALL Java_org_blockrnn_RNN_createNative(
    JNIEnv* env, jclass, jint mode, jboolean double_precision, jlong input_size, jlong hidden_size,
    jlong num_layers, jboolean bidirectional, jlong max_time, jlong max_batch,
    jboolean has_forget_bias, jdouble forget_bias, jboolean has_cell_clip, jdouble cell_clip,
    jboolean use_peephole, jboolean torch_layout) {
  return guarded<jlong>(env, 0, [&] {
    blockrnn_rnn_options o = blockrnn_rnn_default_options();
    o.mode = mode;
    o.dtype = double_precision ? BLOCKRNN_FLOAT64 : BLOCKRNN_FLOAT32;
    o.input_size = input_size;
    o.hidden_size = hidden_size;
    o.num_layers = num_layers;
    o.bidirectional = bidirectional ? 1 : 0;
    o.max_time = max_time;
    o.max_batch = max_batch;
    o.has_forget_bias = has_forget_bias ? 1 : 0;
    o.forget_bias = forget_bias;
    o.has_cell_clip = has_cell_clip ? 1 : 0;
    o.cell_clip = cell_clip;
    o.use_peephole = use_peephole ? 1 : 0;
    blockrnn_rnn* rnn = nullptr;
    check(env, blockrnn_rnn_create_with_layout(
                   &o, torch_layout ? BLOCKRNN_PARAMS_TORCH : BLOCKRNN_PARAMS_OPS, &rnn));
    return static_cast<jlong>(reinterpret_cast<intptr_t>(rnn));
  });
}

JNIEXPORT void JNICALL Java_org_blockrnn_RNN_freeNative(JNIEnv*, jclass, jlong h) {
  blockrnn_rnn_free(handle_of(h));
}

JNIEXPORT jint JNICALL Java_org_blockrnn_RNN_paramsPerLayerNative(JNIEnv* env, jclass, jlong h) {
  return guarded<jint>(env, 0, [&] {
    int32_t n = 0;
    check(env, blockrnn_rnn_params_per_layer(handle_of(h), &n));
    return static_cast<jint>(n);
  });
}

JNIEXPORT void JNICALL Java_org_blockrnn_RNN_setWeightsNative(JNIEnv* env, jclass, jlong h,
                                                              jlong layer, jlong direction,
                                                              jobjectArray data,
                                                              jobjectArray shapes) {
  guarded<int>(env, 0, [&] {
    const char* fn = "RNN.setWeights";
    int32_t most = 0;
    check(env, blockrnn_rnn_params_per_layer(handle_of(h), &most));
    const jsize n = env->GetArrayLength(data);
    check_pending(env);
    if (n > most) {
      throw_java(env, "java/lang/IllegalArgumentException",
                 std::string(fn) + ": the layers take " + std::to_string(most) +
                     " parameters, got " + std::to_string(n));
    }
    std::vector<std::string> names;
    for (jsize k = 0; k < n; ++k) names.push_back("params[" + std::to_string(k) + "]");
    std::vector<NativeTensor> params = read_inputs(env, fn, data, shapes, names);
    std::vector<blockrnn_tensor> c;
    // A null one is absent (RNN.java lets only torch.nn's biases and peepholes be): the library
    // names a required one.
    for (NativeTensor& t : params) c.push_back(t.c());
    check(env, blockrnn_rnn_set_weights(handle_of(h), layer, direction, c.data(), c.size()));
    return 0;
  });
}

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_RNN_forwardNative(JNIEnv* env, jclass, jlong h,
                                                                   jobjectArray data,
                                                                   jobjectArray shapes,
                                                                   jobjectArray out_shapes) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    const char* fn = "RNN.forward";
    std::vector<NativeTensor> in =
        read_inputs(env, fn, data, shapes, {"x", "h0", "c0", "seq_lengths", "dropout_mask"});
    const int32_t dtype = float_dtype(env, fn, in[0]);
    std::vector<NativeTensor> out = make_outputs(env, fn, dtype, out_shapes, {"y", "h_n", "c_n"});
    blockrnn_rnn_inputs ci = {in[0].c(), in[1].c(), in[2].c(), in[3].c(), in[4].c()};
    blockrnn_rnn_outputs co = {out[0].c(), out[1].c(), out[2].c()};
    check(env, blockrnn_rnn_forward(handle_of(h), &ci, &co, nullptr));
    return to_java(env, out);
  });
}

JNIEXPORT jobjectArray JNICALL Java_org_blockrnn_RNN_backwardNative(JNIEnv* env, jclass, jlong h,
                                                                    jlong directions,
                                                                    jobjectArray data,
                                                                    jobjectArray shapes,
                                                                    jobjectArray out_shapes) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    const char* fn = "RNN.backward";
    std::vector<NativeTensor> in = read_inputs(
        env, fn, data, shapes,
        {"x", "h0", "c0", "seq_lengths", "dropout_mask", "y_grad", "h_n_grad", "c_n_grad"});
    const int32_t dtype = float_dtype(env, fn, in[0]);
    std::vector<NativeTensor> out =
        make_outputs(env, fn, dtype, out_shapes, {"x_grad", "h0_grad", "c0_grad"});
    // The parameters' gradients, shaped as the handle reports; their shapes go back to Java.
    int32_t per_layer = 0;
    check(env, blockrnn_rnn_params_per_layer(handle_of(h), &per_layer));
    const jsize total = env->GetArrayLength(out_shapes);
    check_pending(env);
    std::vector<blockrnn_tensor> params;
    for (jsize k = 3; k < total; ++k) {
      const jlong p = k - 3;
      blockrnn_shape shape;
      check(env, blockrnn_rnn_param_shape(handle_of(h), p / per_layer / directions,
                                          static_cast<int32_t>(p % per_layer), &shape));
      out.push_back(make_output(env, std::string(fn) + ": params[" + std::to_string(p) + "]", dtype,
                                std::vector<int64_t>(shape.dims, shape.dims + shape.rank)));
      jlongArray s = env->NewLongArray(shape.rank);
      check_pending(env);
      env->SetLongArrayRegion(s, 0, shape.rank, reinterpret_cast<const jlong*>(shape.dims));
      check_pending(env);
      env->SetObjectArrayElement(out_shapes, k, s);
      check_pending(env);
      env->DeleteLocalRef(s);
    }
    for (size_t k = 3; k < out.size(); ++k) params.push_back(out[k].c());
    blockrnn_rnn_inputs ci = {in[0].c(), in[1].c(), in[2].c(), in[3].c(), in[4].c()};
    blockrnn_rnn_grad_inputs cg = {in[5].c(), in[6].c(), in[7].c()};
    blockrnn_rnn_grad_outputs co = {out[0].c(), out[1].c(), out[2].c(), params.data(),
                                    params.size()};
    check(env, blockrnn_rnn_backward(handle_of(h), &ci, &cg, &co, nullptr));
    return to_java(env, out);
  });
}

}  // extern "C"
