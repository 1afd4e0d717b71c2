// blockrnn_cuda_tests: every op of blockrnn/cuda.h against the CPU reference.
//
// Device tests (fixture CudaOps): random inputs, the op on the device and the CPU path with the
// reference forced (src/ref/, the spec in code), in the same dtype, compared elementwise:
//   float64: |gpu − cpu| ≤ 1e-10 + 1e-10·|cpu|. Reason: cuBLAS sums the GEMMs' products in
//            another order than the reference's triple loop (and, for the sequence ops, the
//            input projection x·w_x and the recurrent h·w_h are two products added, dW is one
//            product over all steps instead of per-step sums, and db and the peephole gradients
//            sum the S·B rows in fixed chunks instead of per step). A reordered sum of n terms of
//            size ≤ 1 differs by about √n·eps relative to its size: n ≤ K + S·B ≤ ~100 for the
//            small shapes, and S·B = 10280 (dW, db) at the odd shapes, so ≤ ~1e-14 relative, and
//            the scaled weights keep the recurrence from amplifying it over the 40 steps. 1e-10 is
//            far above that and far below any real error (a wrong term is ≥ 1e-3 here).
//   float32: 2e-4 abs + 2e-4 rel. Reason: the same reordering at float32's eps (6e-8: √10280·eps
//            ≈ 6e-6) plus CUDA's expf/tanhf (≤ 2 ulp) against libm, over the recurrence.
//   float16: 4e-3 abs + 4e-3 rel. Reason: both paths compute in float32 and round each output
//            to half once (eps 9.8e-4), so float32-level differences can flip a rounding: at
//            most a couple of half ulps.
// Inputs are uniform in [−1, 1] (gate values in (0.05, 0.95)), the weight matrices scaled by
// 1/√(I+H) so that every pre-activation stays O(1) at any size: unscaled weights make the
// recurrence chaotic at real sizes (float64 BlockGRU at T = 40, H = 130 then amplifies the GEMMs'
// last-bit differences beyond 1e-10), which would test the inputs, not the kernels.
// Shapes include empty ones (T = 0, B = 0, I = 0), seq_len_max < T and seq_len_max = 0, and odd
// multi-block ones (B = 257, H = 130, T = 40: B·H = 33410 elements, 131 blocks of 256 threads).
// The optional seq_lengths input is omitted (the CUDA backend refuses it: CudaValidation).
// Without a CUDA device every device test is skipped ("no CUDA device"), never passed.
//
// The same file builds twice: blockrnn_cuda_tests on the real backend, and
// blockrnn_cuda_emu_tests on the host emulation (BLOCKRNN_CUDA_HOST_EMU, docs/cuda.md), where
// every device test runs and additionally fails on any broken CUDA / cuBLAS rule the stand-in
// reports and on device memory the op leaves allocated.
//
// Host-only tests (CudaValidation): the CUDA entry points validate exactly as the CPU API, with
// the same messages, before touching a device, so they run on any machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "blockrnn/context.h"
#include "blockrnn/cuda.h"
#include "blockrnn/error.h"
#include "blockrnn/ops.h"
#include "blockrnn/tensor.h"
#ifdef BLOCKRNN_CUDA_HOST_EMU
#include "cuda/emu/emu.h"
#endif

namespace blockrnn {
namespace {

bool has_device() {
  return cuda::device_count() > 0;
}

void cuda_ok(cudaError_t e, const char* what) {
  ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
}

// Device copy of a host tensor (or an uninitialised one of a shape).
class DeviceTensor {
 public:
  DeviceTensor(DType dtype, Shape shape) : dtype_(dtype), shape_(shape) {
    bytes_ = static_cast<std::size_t>(shape.num_elements()) * dtype_size(dtype);
    if (bytes_ > 0) {
      cuda_ok(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
      cuda_ok(cudaMemset(ptr_, 0xff, bytes_), "cudaMemset");  // NaN pattern: unwritten shows
      // cudaMemset of device memory may return before it is done, and the calls on a
      // non-blocking stream are not ordered after the legacy stream's work: wait for it.
      cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }
  explicit DeviceTensor(const Tensor& host) : DeviceTensor(host.dtype(), host.shape()) {
    if (bytes_ > 0) cuda_ok(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice), "H2D");
  }
  ~DeviceTensor() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  TensorView view() const { return TensorView(ptr_, dtype_, shape_); }
  MutableTensorView mutable_view() { return MutableTensorView(ptr_, dtype_, shape_); }
  Tensor to_host() const {
    Tensor t(dtype_, shape_);
    if (bytes_ > 0) cudaMemcpy(t.data(), ptr_, bytes_, cudaMemcpyDeviceToHost);
    return t;
  }

 private:
  DType dtype_;
  Shape shape_;
  std::size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

double element(const Tensor& t, std::int64_t e) {
  switch (t.dtype()) {
    case DType::kFloat16:
      return half_to_float(static_cast<const Half*>(t.data())[e]);
    case DType::kBFloat16:
      return bfloat16_to_float(static_cast<const BFloat16*>(t.data())[e]);
    case DType::kFloat32:
      return static_cast<const float*>(t.data())[e];
    case DType::kFloat64:
      return static_cast<const double*>(t.data())[e];
    case DType::kInt64:
      return double(static_cast<const std::int64_t*>(t.data())[e]);
  }
  return 0.0;
}

void set_element(Tensor& t, std::int64_t e, double v) {
  switch (t.dtype()) {
    case DType::kFloat16:
      static_cast<Half*>(t.data())[e] = float_to_half(static_cast<float>(v));
      return;
    case DType::kBFloat16:
      static_cast<BFloat16*>(t.data())[e] = float_to_bfloat16(static_cast<float>(v));
      return;
    case DType::kFloat32:
      static_cast<float*>(t.data())[e] = static_cast<float>(v);
      return;
    case DType::kFloat64:
      static_cast<double*>(t.data())[e] = v;
      return;
    case DType::kInt64:
      return;
  }
}

struct Dims {
  std::int64_t T, B, I, H, S;
};

// The inputs the tests pass: all but the optional ones (seq_lengths), which stay omitted.
std::size_t required_inputs(const OpDef& def) {
  return def.inputs.size() - static_cast<std::size_t>(def.num_optional_inputs);
}

bool is_weight(const std::string& name) {
  return name == "w" || name == "w_ru" || name == "w_c" || name == "w_i" || name == "w_h";
}

bool is_cell(const std::string& op) {
  return op.find("Cell") != std::string::npos;
}

// The shape of every input name of the ops (sequence or cell).
Shape shape_of(const std::string& name, const Dims& d, bool cell) {
  const std::int64_t T = d.T, B = d.B, I = d.I, H = d.H, K = I + H;
  if (name == "seq_len_max") return Shape{};
  if (name == "x") return cell ? Shape{B, I} : Shape{T, B, I};
  if (name == "cs_prev" || name == "h_prev") return Shape{B, H};
  if (name == "w") return Shape{K, 4 * H};
  if (name == "wci" || name == "wcf" || name == "wco" || name == "b_c") return Shape{H};
  if (name == "b") return Shape{4 * H};
  if (name == "w_ru") return Shape{K, 2 * H};
  if (name == "w_c") return Shape{K, H};
  if (name == "b_ru") return Shape{2 * H};
  if (name == "w_i") return Shape{I, 3 * H};
  if (name == "w_h") return Shape{H, 3 * H};
  if (name == "b_i" || name == "b_h") return Shape{3 * H};
  return cell ? Shape{B, H} : Shape{T, B, H};  // per-step tensors and their gradients
}

// Random inputs of `op` in `dtype` (seq_len_max = d.S): uniform in [−1, 1], gate values in
// (0.05, 0.95), weights scaled by 1/√(I+H) (see the top of the file).
std::vector<Tensor> random_inputs(const OpDef& def, const Dims& d, DType dtype, unsigned seed) {
  const bool cell = is_cell(def.name);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> sym(-1.0, 1.0), unit(0.05, 0.95);
  const double weight_scale =
      1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(1, d.I + d.H)));
  std::vector<Tensor> host;
  for (std::size_t k = 0; k < required_inputs(def); ++k) {
    const std::string& name = def.inputs[k];
    if (name == "seq_len_max") {
      host.emplace_back(DType::kInt64, Shape{});
      *host.back().data_as<std::int64_t>() = d.S;
      continue;
    }
    Tensor t(dtype, shape_of(name, d, cell));
    const bool gate = name == "i" || name == "f" || name == "o" || name == "r" || name == "u";
    const double scale = is_weight(name) ? weight_scale : 1.0;
    for (std::int64_t e = 0; e < t.num_elements(); ++e) {
      set_element(t, e, gate ? unit(rng) : scale * sym(rng));
    }
    host.push_back(std::move(t));
  }
  return host;
}

std::string attr_string(const AttrMap& attrs) {
  std::string s;
  for (const auto& [k, v] : attrs) s += k + "=" + std::to_string(v) + " ";
  return s;
}

// Calls the CUDA entry point of `op` with device views in the op's input / output order, on
// `stream`.
void cuda_run(const std::string& op, const std::vector<TensorView>& in,
              const std::vector<MutableTensorView>& out, const AttrMap& attrs,
              cudaStream_t stream = nullptr) {
  auto attr = [&](const char* name, double def) {
    auto it = attrs.find(name);
    return it == attrs.end() ? def : it->second;
  };
  const bool peep = attr("use_peephole", 0.0) != 0.0;
  const std::int64_t S = in.empty() || in[0].dtype != DType::kInt64
                             ? 0
                             : *static_cast<const std::int64_t*>(in[0].data);
  if (op == "GRUBlockCell") {
    cuda::gru_block_cell({in[0], in[1], in[2], in[3], in[4], in[5]},
                         {out[0], out[1], out[2], out[3]}, stream);
  } else if (op == "GRUBlockCellGrad" || op == "gradients.GRUBlockCell") {
    const GRUBlockCellGradInputs g{in[0], in[1], in[2], in[3], in[4],
                                   in[5], in[6], in[7], in[8], in[9]};
    if (op == "GRUBlockCellGrad") {
      cuda::gru_block_cell_grad(g, {out[0], out[1], out[2], out[3]}, stream);
    } else {
      cuda::gru_block_cell_backward(g, {out[0], out[1], out[2], out[3], out[4], out[5]}, stream);
    }
  } else if (op == "LSTMBlockCell") {
    cuda::lstm_block_cell({in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]},
                          {out[0], out[1], out[2], out[3], out[4], out[5], out[6]},
                          {attr("forget_bias", 1.0), attr("cell_clip", 3.0), peep}, stream);
  } else if (op == "LSTMBlockCellGrad" || op == "gradients.LSTMBlockCell") {
    const LSTMBlockCellGradInputs g{in[0], in[1], in[2],  in[3],  in[4],  in[5],  in[6],  in[7],
                                    in[8], in[9], in[10], in[11], in[12], in[13], in[14], in[15]};
    if (op == "LSTMBlockCellGrad") {
      cuda::lstm_block_cell_grad(g, {out[0], out[1], out[2], out[3], out[4]}, peep, stream);
    } else {
      cuda::lstm_block_cell_backward(
          g, {out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7]},
          {attr("forget_bias", 1.0), attr("cell_clip", 3.0), peep}, stream);
    }
  } else if (op == "BlockLSTM" || op == "BlockLSTMV2") {
    const BlockLSTMInputs f{S, in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8]};
    const BlockLSTMOutputs o{out[0], out[1], out[2], out[3], out[4], out[5], out[6]};
    if (op == "BlockLSTM") {
      cuda::block_lstm(f, o, {attr("forget_bias", 1.0), attr("cell_clip", 3.0), peep}, stream);
    } else {
      cuda::block_lstm_v2(f, o, {attr("cell_clip", 0.0), peep}, stream);
    }
  } else if (op == "BlockLSTMGrad" || op == "BlockLSTMGradV2") {
    const BlockLSTMGradInputs g{S,      in[1],  in[2],  in[3],  in[4],  in[5],
                                in[6],  in[7],  in[8],  in[9],  in[10], in[11],
                                in[12], in[13], in[14], in[15], in[16], in[17]};
    const BlockLSTMGradOutputs o{out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7]};
    if (op == "BlockLSTMGrad") {
      cuda::block_lstm_grad(g, o, peep, stream);
    } else {
      cuda::block_lstm_grad_v2(g, o, peep, stream);
    }
  } else if (op == "BlockGRU") {
    cuda::block_gru({S, in[1], in[2], in[3], in[4], in[5], in[6]}, {out[0], out[1], out[2], out[3]},
                    stream);
  } else if (op == "BlockGRUGrad") {
    cuda::block_gru_grad(
        {S, in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10], in[11]},
        {out[0], out[1], out[2], out[3], out[4], out[5]}, stream);
  } else if (op == "BlockGRUResetAfter") {
    cuda::block_gru_reset_after({S, in[1], in[2], in[3], in[4], in[5], in[6]},
                                {out[0], out[1], out[2], out[3], out[4]}, stream);
  } else if (op == "BlockGRUResetAfterGrad") {
    cuda::block_gru_reset_after_grad(
        {S, in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10], in[11], in[12]},
        {out[0], out[1], out[2], out[3], out[4], out[5]}, stream);
  } else {
    FAIL() << "no CUDA entry point for " << op;
  }
}

// One call of `op` on device copies of the host inputs `host` (seq_len_max stays a host
// integer), with device outputs of infer_outputs' shapes pre-filled with NaN bytes.
class DeviceCall {
 public:
  DeviceCall(const std::string& op, const std::vector<Tensor>& host, const AttrMap& attrs)
      : op_(op), def_(find_op(op)), host_(host), attrs_(attrs) {
    for (std::size_t k = 0; k < host.size(); ++k) {
      if (def_.inputs[k] == "seq_len_max") {
        in_views_.push_back(host[k].view());
        continue;
      }
      dev_in_.push_back(std::make_unique<DeviceTensor>(host[k]));
      in_views_.push_back(dev_in_.back()->view());
    }
    const std::vector<TensorView> host_views(host.begin(), host.end());
    const OutputSpec spec = infer_outputs(op, host_views, attrs);
    for (const Shape& shape : spec.shapes) {
      dev_out_.push_back(std::make_unique<DeviceTensor>(spec.dtype, shape));
      out_views_.push_back(dev_out_.back()->mutable_view());
    }
  }
  // Enqueues the call on `stream` (not waited for).
  void run(cudaStream_t stream) { cuda_run(op_, in_views_, out_views_, attrs_, stream); }
  // The same call through the by-name entry (cuda::run_op, the Python binding's).
  void run_by_name(cudaStream_t stream) {
    cuda::run_op(def_, in_views_, attrs_, out_views_, stream);
  }
  // The views a call takes (the device inputs, seq_len_max on the host; the device outputs).
  const std::vector<TensorView>& input_views() const { return in_views_; }
  const std::vector<MutableTensorView>& output_views() const { return out_views_; }
  // New device outputs (other addresses: allocated while the old ones still live), NaN bytes.
  void reallocate_outputs() {
    std::vector<std::unique_ptr<DeviceTensor>> fresh;
    out_views_.clear();
    for (const auto& old : dev_out_) {
      const MutableTensorView v = old->mutable_view();
      fresh.push_back(std::make_unique<DeviceTensor>(v.dtype, v.shape));
      out_views_.push_back(fresh.back()->mutable_view());
    }
    dev_out_ = std::move(fresh);
  }
  // Every output back to NaN bytes (then a call must write all of them again).
  void poison_outputs() {
    for (const MutableTensorView& o : out_views_) {
      const std::size_t bytes =
          static_cast<std::size_t>(o.shape.num_elements()) * dtype_size(o.dtype);
      if (bytes > 0) cuda_ok(cudaMemset(o.data, 0xff, bytes), "cudaMemset");
    }
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // as in DeviceTensor
  }
  // The outputs, read back (after the stream has run the call).
  std::vector<Tensor> outputs() const {
    std::vector<Tensor> out;
    for (const auto& d : dev_out_) out.push_back(d->to_host());
    return out;
  }
  // The op wrote none of its inputs: each device input still holds the host bytes.
  void expect_inputs_unchanged() const {
    std::size_t d = 0;
    for (std::size_t k = 0; k < host_.size(); ++k) {
      if (def_.inputs[k] == "seq_len_max") continue;
      const Tensor now = dev_in_[d++]->to_host();
      EXPECT_EQ(std::memcmp(now.data(), host_[k].data(), now.num_bytes()), 0)
          << "input " << def_.inputs[k] << " was modified";
    }
  }

 private:
  std::string op_;
  const OpDef& def_;
  const std::vector<Tensor>& host_;
  AttrMap attrs_;
  std::vector<std::unique_ptr<DeviceTensor>> dev_in_, dev_out_;
  std::vector<TensorView> in_views_;
  std::vector<MutableTensorView> out_views_;
};

struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return {1e-10, 1e-10};
    case DType::kFloat32:
      return {2e-4, 2e-4};
    default:
      return {4e-3, 4e-3};
  }
}

// Random inputs (random_inputs), the CPU reference and the device in `dtype`, compared output by
// output.
void compare_op(const std::string& op, const Dims& d, DType dtype, const AttrMap& attrs,
                unsigned seed = 1) {
  SCOPED_TRACE(op + " " + dtype_name(dtype) + " T=" + std::to_string(d.T) + " B=" +
               std::to_string(d.B) + " I=" + std::to_string(d.I) + " H=" + std::to_string(d.H) +
               " S=" + std::to_string(d.S) + " " + attr_string(attrs));
  const OpDef& def = find_op(op);
  const std::vector<Tensor> host = random_inputs(def, d, dtype, seed);
  std::vector<TensorView> host_views(host.begin(), host.end());
  set_force_reference(true);
  std::vector<Tensor> expected;
  try {
    expected = run_op(op, host_views, attrs);
  } catch (...) {
    set_force_reference(false);
    throw;
  }
  set_force_reference(false);

  DeviceCall call(op, host, attrs);
  call.run(nullptr);
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  call.expect_inputs_unchanged();
  const std::vector<Tensor> outputs = call.outputs();
  const Tolerance tol = tolerance(dtype);
  ASSERT_EQ(outputs.size(), expected.size());
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const Tensor& got = outputs[k];
    int reported = 0;
    for (std::int64_t e = 0; e < got.num_elements(); ++e) {
      const double g = element(got, e), x = element(expected[k], e);
      const bool ok = (std::isnan(g) && std::isnan(x)) ||
                      std::fabs(g - x) <= tol.atol + tol.rtol * std::fabs(x);
      if (!ok && reported++ < 5) {
        ADD_FAILURE() << "output " << def.outputs[k] << "[" << e << "]: device " << g
                      << ", CPU reference " << x;
      }
    }
  }
}

const DType kDTypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16};

const Dims kSeqDims[] = {
    {3, 2, 3, 4, 3},  // every step
    {5, 3, 2, 5, 3},  // seq_len_max < T
    {4, 2, 3, 4, 0},  // seq_len_max = 0: zeros
    {2, 1, 0, 3, 2},  // I = 0
    {0, 2, 3, 4, 0},  // T = 0
    {3, 0, 3, 4, 3},  // B = 0: empty work
    {6, 4, 7, 9, 6},  // odd sizes
};
const Dims kCellDims[] = {{1, 2, 3, 4, 1}, {1, 3, 0, 5, 1}, {1, 4, 7, 9, 1}};

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_device()) GTEST_SKIP() << "no CUDA device";
#ifdef BLOCKRNN_CUDA_HOST_EMU
    violations_ = cuda_emu::violation_count();
    allocations_ = cuda_emu::live_allocations();
#endif
  }
  void TearDown() override {
    cuda::set_math_mode(cuda::MathMode::kExactFP32);
    cuda::set_step_graphs(false);
#ifdef BLOCKRNN_CUDA_HOST_EMU
    // Even a broken rule whose status the code ignored (e.g. in a destructor) fails the test.
    EXPECT_EQ(cuda_emu::violation_count(), violations_)
        << "the CUDA emulation reported a broken API rule, last: " << cuda_emu::last_violation();
    EXPECT_EQ(cuda_emu::live_allocations(), allocations_) << "device memory left allocated";
#endif
  }

 private:
#ifdef BLOCKRNN_CUDA_HOST_EMU
  std::size_t violations_ = 0, allocations_ = 0;
#endif
};

// The by-name entry (cuda::run_op, which the Python binding calls) reaches each op's typed
// entry: for every op of list_ops(), in every dtype, with every attr away from its default, the
// typed call's bits; a wrong output count, an unknown attr and a host output are refused naming
// the op.
TEST_F(CudaOps, RunOpByNameGivesTheTypedCallsBits) {
  const Dims seq{5, 3, 2, 5, 3}, cell{1, 3, 2, 5, 1};
  for (DType t : kDTypes) {
    for (const OpDef& def : list_ops()) {
      SCOPED_TRACE(def.name + " " + dtype_name(t));
      AttrMap attrs;
      for (const AttrDef& a : def.attrs) {
        if (a.name == "use_peephole") attrs[a.name] = 1.0;
        if (a.name == "cell_clip") attrs[a.name] = 0.4;
        if (a.name == "forget_bias") attrs[a.name] = 0.5;
      }
      const std::vector<Tensor> host = random_inputs(def, is_cell(def.name) ? cell : seq, t, 7);
      DeviceCall typed(def.name, host, attrs), by_name(def.name, host, attrs);
      typed.run(nullptr);
      by_name.run_by_name(nullptr);
      cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      by_name.expect_inputs_unchanged();
      const std::vector<Tensor> want = typed.outputs(), got = by_name.outputs();
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t k = 0; k < want.size(); ++k) {
        ASSERT_EQ(got[k].num_bytes(), want[k].num_bytes());
        EXPECT_EQ(std::memcmp(got[k].data(), want[k].data(), want[k].num_bytes()), 0)
            << "output " << def.outputs[k] << " differs from the typed call's";
      }
      const std::vector<TensorView>& in = by_name.input_views();
      const std::vector<MutableTensorView>& out = by_name.output_views();
      try {
        cuda::run_op(def, in, attrs, std::span(out).first(out.size() - 1));
        ADD_FAILURE() << "one output too few was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find(def.name + ": expected " + std::to_string(out.size()) +
                                             " outputs, got " + std::to_string(out.size() - 1)),
                  std::string::npos)
            << e.what();
      }
      AttrMap unknown = attrs;
      unknown["no_such_attr"] = 1.0;
      try {
        cuda::run_op(def, in, unknown, out);
        ADD_FAILURE() << "an unknown attr was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find(def.name), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("no_such_attr"), std::string::npos) << e.what();
      }
      if (!out.empty() && out[0].shape.num_elements() > 0) {
        // An output in host memory: refused after validation, before any launch.
        Tensor host_out(out[0].dtype, out[0].shape);
        std::vector<MutableTensorView> mixed = out;
        mixed[0] = host_out.mutable_view();
        try {
          cuda::run_op(def, in, attrs, mixed);
          ADD_FAILURE() << "an output in host memory was accepted";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
          EXPECT_NE(std::string(e.what()).find(def.outputs[0]), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("device memory"), std::string::npos) << e.what();
        }
      }
    }
  }
}

TEST_F(CudaOps, GRUCellOps) {
  for (DType t : kDTypes) {
    for (const Dims& d : kCellDims) {
      for (const char* op : {"GRUBlockCell", "GRUBlockCellGrad", "gradients.GRUBlockCell"}) {
        compare_op(op, d, t, {});
      }
    }
  }
}

TEST_F(CudaOps, LSTMCellOps) {
  const AttrMap attr_sets[] = {
      {{"forget_bias", 1.0}, {"cell_clip", 3.0}, {"use_peephole", 0.0}},
      {{"forget_bias", 0.5}, {"cell_clip", 0.3}, {"use_peephole", 1.0}},           // the clip bites
      {{"forget_bias", 1.0}, {"cell_clip", std::nan("")}, {"use_peephole", 1.0}},  // no clip
      {{"forget_bias", -2.0}, {"cell_clip", -1.0}, {"use_peephole", 0.0}},
  };
  for (DType t : kDTypes) {
    for (const Dims& d : kCellDims) {
      for (const AttrMap& a : attr_sets) {
        compare_op("LSTMBlockCell", d, t, a);
        compare_op("gradients.LSTMBlockCell", d, t, a);
        compare_op("LSTMBlockCellGrad", d, t, {{"use_peephole", a.at("use_peephole")}});
      }
    }
  }
}

TEST_F(CudaOps, BlockLSTM) {
  for (DType t : kDTypes) {
    for (const Dims& d : kSeqDims) {
      for (double peep : {0.0, 1.0}) {
        compare_op("BlockLSTM", d, t,
                   {{"forget_bias", 1.0}, {"cell_clip", 0.4}, {"use_peephole", peep}});
        compare_op("BlockLSTMV2", d, t, {{"cell_clip", 0.0}, {"use_peephole", peep}});
        compare_op("BlockLSTMGrad", d, t, {{"use_peephole", peep}});
        compare_op("BlockLSTMGradV2", d, t, {{"use_peephole", peep}});
      }
    }
  }
}

TEST_F(CudaOps, BlockGRU) {
  for (DType t : kDTypes) {
    for (const Dims& d : kSeqDims) {
      for (const char* op :
           {"BlockGRU", "BlockGRUGrad", "BlockGRUResetAfter", "BlockGRUResetAfterGrad"}) {
        compare_op(op, d, t, {});
      }
    }
  }
}

// Odd sizes that span many blocks (B·H = 33410: 131 blocks of 256 threads, the last one partly
// idle), B not a multiple of 8, H not of 32, I odd, T = 40 steps, in every dtype; the cells at
// the same B, I, H. Same tolerances as above (the weights' 1/√(I+H) scale keeps the recurrence
// stable, so GEMM reordering is not amplified over the 40 steps).
void compare_odd_multi_block_shapes(DType t) {
  const Dims seq{40, 257, 31, 130, 40}, cell{1, 257, 31, 130, 1};
  const AttrMap lstm{{"forget_bias", 1.0}, {"cell_clip", 0.5}, {"use_peephole", 1.0}};
  compare_op("BlockLSTM", seq, t, lstm);
  compare_op("BlockLSTMV2", seq, t, {{"cell_clip", 0.0}, {"use_peephole", 1.0}});
  for (const char* op : {"BlockLSTMGrad", "BlockLSTMGradV2"}) {
    compare_op(op, seq, t, {{"use_peephole", 1.0}});
  }
  for (const char* op :
       {"BlockGRU", "BlockGRUGrad", "BlockGRUResetAfter", "BlockGRUResetAfterGrad"}) {
    compare_op(op, seq, t, {});
  }
  for (const char* op : {"GRUBlockCell", "GRUBlockCellGrad", "gradients.GRUBlockCell"}) {
    compare_op(op, cell, t, {});
  }
  compare_op("LSTMBlockCell", cell, t, lstm);
  compare_op("gradients.LSTMBlockCell", cell, t, lstm);
  compare_op("LSTMBlockCellGrad", cell, t, {{"use_peephole", 1.0}});
}

// One test per dtype, so that CTest can run them in parallel.
TEST_F(CudaOps, OddMultiBlockShapesFloat64) {
  compare_odd_multi_block_shapes(DType::kFloat64);
}
TEST_F(CudaOps, OddMultiBlockShapesFloat32) {
  compare_odd_multi_block_shapes(DType::kFloat32);
}
TEST_F(CudaOps, OddMultiBlockShapesFloat16) {
  compare_odd_multi_block_shapes(DType::kFloat16);
}

// More batch rows than one pass of the element-wise kernels' 2-D grid covers (gridDim.y is at
// most 65535 rows; the kernels stride over the rest): every element-wise kernel of the cells and
// of a two-step sequence, forward and backward, at B = 70000.
TEST_F(CudaOps, MoreRowsThanOneGridPass) {
  const Dims cell{1, 70000, 2, 3, 1}, seq{2, 70000, 2, 3, 2};
  const AttrMap lstm{{"forget_bias", 1.0}, {"cell_clip", 0.5}, {"use_peephole", 1.0}};
  compare_op("LSTMBlockCell", cell, DType::kFloat32, lstm);
  compare_op("gradients.LSTMBlockCell", cell, DType::kFloat32, lstm);
  compare_op("BlockLSTMGrad", seq, DType::kFloat32, {{"use_peephole", 1.0}});
  for (const char* op : {"GRUBlockCell", "gradients.GRUBlockCell"}) {
    compare_op(op, cell, DType::kFloat32, {});
  }
  for (const char* op :
       {"BlockGRU", "BlockGRUGrad", "BlockGRUResetAfter", "BlockGRUResetAfterGrad"}) {
    compare_op(op, seq, DType::kFloat32, {});
  }
}

// The TF32 mode changes only float32 products: float64 stays within its tolerance.
TEST_F(CudaOps, TF32ModeLeavesFloat64Alone) {
  cuda::set_math_mode(cuda::MathMode::kTF32);
  EXPECT_EQ(cuda::get_math_mode(), cuda::MathMode::kTF32);
  compare_op("BlockLSTM", {3, 2, 3, 4, 3}, DType::kFloat64,
             {{"forget_bias", 1.0}, {"cell_clip", 0.0}, {"use_peephole", 0.0}});  // fp64: exact
}

// The same host tensors in another floating dtype (seq_len_max, an int64 scalar, as it is).
std::vector<Tensor> converted(const std::vector<Tensor>& host, DType to) {
  std::vector<Tensor> out;
  for (const Tensor& t : host) {
    if (t.dtype() == DType::kInt64) {
      Tensor c(DType::kInt64, t.shape());
      std::memcpy(c.data(), t.data(), t.num_bytes());
      out.push_back(std::move(c));
      continue;
    }
    Tensor c(to, t.shape());
    for (std::int64_t e = 0; e < t.num_elements(); ++e) set_element(c, e, element(t, e));
    out.push_back(std::move(c));
  }
  return out;
}

// The largest |a − b| over every element of every output.
double max_abs_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double m = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    for (std::int64_t e = 0; e < a[k].num_elements(); ++e) {
      m = std::max(m, std::fabs(element(a[k], e) - element(b[k], e)));
    }
  }
  return m;
}

// The TF32 switch really switches: float32 calls with TF32 on are farther from the float64
// result (the CPU path on the same values, widened exactly) than the exact float32 calls, by more
// than 10× (TF32 rounds the GEMM inputs to a 10-bit mantissa, relative error 2⁻¹¹ ≈ 4.9e-4,
// against float32's 2⁻²⁴ ≈ 6e-8), yet within 1e-2 (the scaled weights keep every pre-activation
// O(1), so 112-term products of TF32-rounded values differ by ~1e-3 at most). Switched back off,
// a call gives the first exact call's bits again.
TEST_F(CudaOps, TF32OnIsFartherFromFloat64AndOffIsExact) {
  const Dims d{20, 8, 48, 64, 20};
  for (const char* op : {"BlockLSTM", "BlockLSTMGrad", "BlockGRUResetAfter", "BlockGRU"}) {
    SCOPED_TRACE(op);
    const AttrMap attrs =
        std::string(op).starts_with("BlockLSTM") ? AttrMap{{"use_peephole", 1.0}} : AttrMap{};
    const std::vector<Tensor> host32 = random_inputs(find_op(op), d, DType::kFloat32, 5);
    const std::vector<Tensor> host64 = converted(host32, DType::kFloat64);
    const std::vector<TensorView> views64(host64.begin(), host64.end());
    const std::vector<Tensor> exact64 = run_op(op, views64, attrs);
    auto device_run = [&](cuda::MathMode mode) {
      cuda::set_math_mode(mode);
      DeviceCall call(op, host32, attrs);
      call.run(nullptr);
      cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      return call.outputs();
    };
    const std::vector<Tensor> exact = device_run(cuda::MathMode::kExactFP32);
    const std::vector<Tensor> tf32 = device_run(cuda::MathMode::kTF32);
    const std::vector<Tensor> off_again = device_run(cuda::MathMode::kExactFP32);
    const double err_exact = max_abs_diff(exact, exact64), err_tf32 = max_abs_diff(tf32, exact64);
    EXPECT_GT(err_tf32, 10 * err_exact) << "TF32 on: " << err_tf32 << ", exact: " << err_exact;
    EXPECT_LE(err_tf32, 1e-2);
    EXPECT_LE(err_exact, 2e-4);  // float32's tolerance (top of the file)
    for (std::size_t k = 0; k < exact.size(); ++k) {
      EXPECT_EQ(std::memcmp(exact[k].data(), off_again[k].data(), exact[k].num_bytes()), 0)
          << "output " << k << " differs after TF32 was switched off";
    }
  }
}

// A thousand steps: every sequence op and its gradient against the CPU reference in float32 and
// float64, B not a multiple of 8, H not of 32. The same tolerances as at T = 40: with the weights
// scaled by 1/√(I+H) the recurrence contracts, so the per-step rounding differences do not grow
// with the number of steps.
TEST_F(CudaOps, ThousandSteps) {
  const Dims d{1000, 5, 7, 12, 1000};
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    compare_op("BlockLSTM", d, t,
               {{"forget_bias", 1.0}, {"cell_clip", 0.0}, {"use_peephole", 1.0}});
    compare_op("BlockLSTMGrad", d, t, {{"use_peephole", 1.0}});
    for (const char* op :
         {"BlockGRU", "BlockGRUGrad", "BlockGRUResetAfter", "BlockGRUResetAfterGrad"}) {
      compare_op(op, d, t, {});
    }
  }
}

// The per-step loops as CUDA Graphs (set_step_graphs): on a non-blocking stream, the first call
// captures and launches a graph, the second (same pointers: the memory pool keeps the freed
// workspace, as the timing tool configures it) replays it, and both give the bits of the direct
// launches, every output rewritten (poisoned between calls). New output pointers are a new graph.
// On the legacy default stream the loop is launched directly. Every sequence op, float32 and
// float64, forward and backward.
TEST_F(CudaOps, StepGraphsGiveTheBitsOfDirectLaunches) {
  cudaMemPool_t pool = nullptr;
  cuda_ok(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
  std::uint64_t keep = UINT64_MAX, release = 0;
  cuda_ok(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "pool");
  cudaStream_t s = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const Dims d{7, 5, 6, 11, 7};
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    for (const char* op : {"BlockLSTM", "BlockLSTMGrad", "BlockGRU", "BlockGRUGrad",
                           "BlockGRUResetAfter", "BlockGRUResetAfterGrad"}) {
      SCOPED_TRACE(std::string(op) + " " + dtype_name(t));
      const AttrMap attrs =
          std::string(op).starts_with("BlockLSTM") ? AttrMap{{"use_peephole", 1.0}} : AttrMap{};
      const std::vector<Tensor> host = random_inputs(find_op(op), d, t, 3);
      DeviceCall direct(op, host, attrs), graphed(op, host, attrs), moved(op, host, attrs);
      direct.run(s);
      cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      const std::vector<Tensor> want = direct.outputs();
      auto expect_same = [&](const std::vector<Tensor>& got, const char* what) {
        for (std::size_t k = 0; k < want.size(); ++k) {
          EXPECT_EQ(std::memcmp(got[k].data(), want[k].data(), want[k].num_bytes()), 0)
              << "output " << k << " differs " << what;
        }
      };
      cuda::set_step_graphs(true);
#ifdef BLOCKRNN_CUDA_HOST_EMU
      const std::size_t made = cuda_emu::graphs_instantiated(),
                        launched = cuda_emu::graph_launches();
#endif
      for (int call = 0; call < 2; ++call) {
        graphed.poison_outputs();
        graphed.run(s);
        cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        expect_same(graphed.outputs(), call == 0 ? "on the capturing call" : "on the replay");
      }
#ifdef BLOCKRNN_CUDA_HOST_EMU
      EXPECT_EQ(cuda_emu::graphs_instantiated(), made + 1) << "the second call captured again";
      EXPECT_EQ(cuda_emu::graph_launches(), launched + 2);
#endif
      graphed.reallocate_outputs();  // the same inputs, other outputs: a graph of its own
      graphed.run(s);
      cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      expect_same(graphed.outputs(), "with other output pointers");
      moved.run(s);  // other input pointers too
      cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      expect_same(moved.outputs(), "with other pointers");
#ifdef BLOCKRNN_CUDA_HOST_EMU
      EXPECT_EQ(cuda_emu::graphs_instantiated(), made + 3);
      const std::size_t before_legacy = cuda_emu::graph_launches();
#endif
      graphed.poison_outputs();
      graphed.run(nullptr);  // the legacy default stream: launched directly
      cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      expect_same(graphed.outputs(), "on the legacy default stream");
#ifdef BLOCKRNN_CUDA_HOST_EMU
      EXPECT_EQ(cuda_emu::graph_launches(), before_legacy);
#endif
      cuda::set_step_graphs(false);
    }
  }
  cuda_ok(cudaStreamDestroy(s), "cudaStreamDestroy");
  cuda_ok(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &release), "pool");
}

// Two runs of the same call give identical bits (no atomics, fixed-order reductions), at one
// reduction chunk (S·B = 24 rows) and at many (S·B = 1480 rows: 38 chunks of 39).
TEST_F(CudaOps, Deterministic) {
  for (const Dims& d : {Dims{6, 4, 7, 9, 6}, Dims{40, 37, 7, 9, 40}})
    for (const char* op : {"BlockLSTMGrad", "BlockGRUGrad", "BlockGRUResetAfterGrad"}) {
      SCOPED_TRACE(std::string(op) + " S*B=" + std::to_string(d.S * d.B));
      const OpDef& def = find_op(op);
      const std::vector<Tensor> host = random_inputs(def, d, DType::kFloat32, 7);
      const AttrMap attrs =
          std::string(op) == "BlockLSTMGrad" ? AttrMap{{"use_peephole", 1.0}} : AttrMap{};
      DeviceCall first(op, host, attrs), second(op, host, attrs);
      first.run(nullptr);
      second.run(nullptr);
      cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      const std::vector<Tensor> a = first.outputs(), b = second.outputs();
      for (std::size_t k = 0; k < a.size(); ++k) {
        EXPECT_EQ(std::memcmp(a[k].data(), b[k].data(), a[k].num_bytes()), 0)
            << "output " << def.outputs[k] << " differs between two runs";
      }
    }
}

// Calls on two non-blocking streams at once (each op's forward and backward, interleaved) give
// the same bits as the same calls one after another on the default stream: every call's work,
// workspace included, is ordered on its own stream.
TEST_F(CudaOps, TwoNonBlockingStreamsMatchSerialRuns) {
  const Dims d{7, 5, 6, 11, 7};
  const char* ops[] = {"BlockLSTM",    "BlockLSTMGrad",      "BlockGRU",
                       "BlockGRUGrad", "BlockGRUResetAfter", "BlockGRUResetAfterGrad"};
  std::vector<std::vector<Tensor>> inputs;
  std::vector<std::unique_ptr<DeviceCall>> serial, concurrent;
  for (const char* op : ops) {
    inputs.push_back(random_inputs(find_op(op), d, DType::kFloat32, 11));
  }
  for (std::size_t k = 0; k < std::size(ops); ++k) {
    const AttrMap attrs =
        std::string(ops[k]).starts_with("BlockLSTM") ? AttrMap{{"use_peephole", 1.0}} : AttrMap{};
    serial.push_back(std::make_unique<DeviceCall>(ops[k], inputs[k], attrs));
    concurrent.push_back(std::make_unique<DeviceCall>(ops[k], inputs[k], attrs));
  }
  for (auto& call : serial) call->run(nullptr);
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (cudaStream_t& s : streams) {
    cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  for (std::size_t k = 0; k < concurrent.size(); ++k) concurrent[k]->run(streams[k % 2]);
  for (cudaStream_t s : streams) cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  for (std::size_t k = 0; k < serial.size(); ++k) {
    SCOPED_TRACE(ops[k]);
    concurrent[k]->expect_inputs_unchanged();
    const std::vector<Tensor> a = serial[k]->outputs(), b = concurrent[k]->outputs();
    for (std::size_t o = 0; o < a.size(); ++o) {
      EXPECT_EQ(std::memcmp(a[o].data(), b[o].data(), a[o].num_bytes()), 0)
          << "output " << find_op(ops[k]).outputs[o] << " differs from the serial run";
    }
  }
  for (cudaStream_t s : streams) cuda_ok(cudaStreamDestroy(s), "cudaStreamDestroy");
}

// bfloat16 has no CUDA path yet: a valid bfloat16 call on device memory is refused
// (kUnimplemented naming the op and the dtype), not reported as an internal error.
TEST_F(CudaOps, BFloat16IsRefusedByName) {
  const std::int64_t B = 2, I = 3, H = 4;
  const DType bf = DType::kBFloat16;
  const DeviceTensor x(bf, {B, I}), h(bf, {B, H}), w_ru(bf, {I + H, 2 * H}), w_c(bf, {I + H, H}),
      b_ru(bf, {2 * H}), b_c(bf, {H});
  DeviceTensor r(bf, {B, H}), u(bf, {B, H}), c(bf, {B, H}), hout(bf, {B, H});
  try {
    cuda::gru_block_cell(
        {x.view(), h.view(), w_ru.view(), w_c.view(), b_ru.view(), b_c.view()},
        {r.mutable_view(), u.mutable_view(), c.mutable_view(), hout.mutable_view()});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("GRUBlockCell: bfloat16 is not supported on the CUDA"),
              std::string::npos)
        << e.what();
  }
}

// Host memory where device memory is expected is an error naming the argument.
TEST_F(CudaOps, HostPointerRejected) {
  const std::int64_t B = 2, I = 3, H = 4;
  Tensor x(DType::kFloat32, {B, I}), h(DType::kFloat32, {B, H}),
      w_ru(DType::kFloat32, {I + H, 2 * H}), w_c(DType::kFloat32, {I + H, H}),
      b_ru(DType::kFloat32, {2 * H}), b_c(DType::kFloat32, {H});
  DeviceTensor r(DType::kFloat32, {B, H}), u(DType::kFloat32, {B, H}), c(DType::kFloat32, {B, H}),
      hout(DType::kFloat32, {B, H});
  try {
    cuda::gru_block_cell({x, h, w_ru, w_c, b_ru, b_c}, {r.mutable_view(), u.mutable_view(),
                                                        c.mutable_view(), hout.mutable_view()});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("GRUBlockCell: x is not device memory"), std::string::npos)
        << e.what();
  }
  // Pinned host memory (cudaMallocHost) is host memory too: an output there is refused.
  void* pinned = nullptr;
  cuda_ok(cudaMallocHost(&pinned, sizeof(float) * B * H), "cudaMallocHost");
  const DeviceTensor dx(x), dh(h), dw_ru(w_ru), dw_c(w_c), db_ru(b_ru), db_c(b_c);
  try {
    cuda::gru_block_cell(
        {dx.view(), dh.view(), dw_ru.view(), dw_c.view(), db_ru.view(), db_c.view()},
        {MutableTensorView(pinned, DType::kFloat32, {B, H}), u.mutable_view(), c.mutable_view(),
         hout.mutable_view()});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("GRUBlockCell: output r is not device memory"),
              std::string::npos)
        << e.what();
  }
  cuda_ok(cudaFreeHost(pinned), "cudaFreeHost");
}

// ---- host-only: validation is the CPU path's, before any device access ------------------------

// The message the CPU API gives for a call, or "" when it succeeds.
template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaValidation, SameErrorsAsTheCpuApi) {
  const std::int64_t T = 3, B = 2, I = 3, H = 4;
  Tensor x(DType::kFloat32, {T, B, I}), hp(DType::kFloat32, {B, H}),
      bad_hp(DType::kFloat32, {B, H + 1}), w(DType::kFloat32, {I + H, 4 * H}),
      b(DType::kFloat32, {4 * H}), x64(DType::kFloat64, {T, B, I});
  std::vector<Tensor> outs;
  for (int k = 0; k < 7; ++k) outs.emplace_back(DType::kFloat32, Shape{T, B, H});
  const BlockLSTMOutputs o{outs[0].mutable_view(), outs[1].mutable_view(), outs[2].mutable_view(),
                           outs[3].mutable_view(), outs[4].mutable_view(), outs[5].mutable_view(),
                           outs[6].mutable_view()};
  const std::vector<BlockLSTMInputs> bad = {
      {std::nullopt, x, hp, bad_hp, w, {}, {}, {}, b},  // h_prev's shape
      {std::int64_t{4}, x, hp, hp, w, {}, {}, {}, b},   // seq_len_max > T
      {std::nullopt, x64, hp, hp, w, {}, {}, {}, b},    // mixed dtypes
      {std::nullopt, x, hp, hp, b, {}, {}, {}, b},      // w's rank
  };
  for (const BlockLSTMInputs& in : bad) {
    const std::string cpu = message_of([&] { block_lstm(in, o); });
    ASSERT_FALSE(cpu.empty());
    EXPECT_EQ(message_of([&] { cuda::block_lstm(in, o); }), cpu);
  }
  // With use_peephole, an omitted peephole vector is an error naming it, as on the CPU.
  const BlockLSTMInputs no_peep{std::nullopt, x, hp, hp, w, {}, {}, {}, b};
  const std::string cpu = message_of([&] { block_lstm(no_peep, o, {1.0, 3.0, true}); });
  ASSERT_NE(cpu.find("wci"), std::string::npos) << cpu;
  EXPECT_EQ(message_of([&] { cuda::block_lstm(no_peep, o, {1.0, 3.0, true}); }), cpu);
  // Output shape and aliasing.
  Tensor bad_out(DType::kFloat32, {T, B, H + 1});
  BlockLSTMOutputs o2 = o;
  o2.h = bad_out.mutable_view();
  const BlockLSTMInputs good{std::nullopt, x, hp, hp, w, {}, {}, {}, b};
  EXPECT_EQ(message_of([&] { cuda::block_lstm(good, o2); }),
            message_of([&] { block_lstm(good, o2); }));
  BlockLSTMOutputs o3 = o;
  o3.cs = o.i;
  EXPECT_EQ(message_of([&] { cuda::block_lstm(good, o3); }),
            message_of([&] { block_lstm(good, o3); }));
}

// An output on an input is refused whatever the size of the work: with B = 0 BlockLSTMGrad still
// zero-fills w_grad [I+H, 4H], which would zero the input w underneath it.
TEST(CudaValidation, OutputOnAnInputIsRefusedWithEmptyWork) {
  const std::int64_t T = 2, B = 0, I = 3, H = 4;
  std::vector<Tensor> ins, outs;
  ins.reserve(8), outs.reserve(8);  // the views below point into these tensors
  BlockLSTMGradInputs in;
  in.x = ins.emplace_back(DType::kFloat32, Shape{T, B, I});
  in.cs_prev = ins.emplace_back(DType::kFloat32, Shape{B, H});
  in.h_prev = ins.emplace_back(DType::kFloat32, Shape{B, H});
  Tensor w(DType::kFloat32, {I + H, 4 * H});
  in.w = w;
  in.wci = in.wcf = in.wco = ins.emplace_back(DType::kFloat32, Shape{H});
  in.b = ins.emplace_back(DType::kFloat32, Shape{4 * H});
  const Tensor& step = ins.emplace_back(DType::kFloat32, Shape{T, B, H});
  in.i = in.cs = in.f = in.o = in.ci = in.co = in.h = in.cs_grad = in.h_grad = step;
  BlockLSTMGradOutputs out;
  out.x_grad = outs.emplace_back(DType::kFloat32, Shape{T, B, I}).mutable_view();
  out.cs_prev_grad = outs.emplace_back(DType::kFloat32, Shape{B, H}).mutable_view();
  out.h_prev_grad = outs.emplace_back(DType::kFloat32, Shape{B, H}).mutable_view();
  out.w_grad = w.mutable_view();  // on the input w
  out.wci_grad = outs.emplace_back(DType::kFloat32, Shape{H}).mutable_view();
  out.wcf_grad = outs.emplace_back(DType::kFloat32, Shape{H}).mutable_view();
  out.wco_grad = outs.emplace_back(DType::kFloat32, Shape{H}).mutable_view();
  out.b_grad = outs.emplace_back(DType::kFloat32, Shape{4 * H}).mutable_view();
  const std::string cpu = message_of([&] { block_lstm_grad(in, out, false); });
  ASSERT_NE(cpu.find("overlaps input w"), std::string::npos) << cpu;
  EXPECT_EQ(message_of([&] { cuda::block_lstm_grad(in, out, false); }), cpu);
}

TEST(CudaValidation, GruAndCellErrors) {
  const std::int64_t T = 2, B = 2, I = 3, H = 4;
  Tensor x(DType::kFloat64, {T, B, I}), hp(DType::kFloat64, {B, H}),
      w_ru(DType::kFloat64, {I + H, 2 * H}), w_c(DType::kFloat64, {I + H + 1, H}),
      b_ru(DType::kFloat64, {2 * H}), b_c(DType::kFloat64, {H});
  std::vector<Tensor> outs;
  for (int k = 0; k < 4; ++k) outs.emplace_back(DType::kFloat64, Shape{T, B, H});
  const BlockGRUInputs in{std::nullopt, x, hp, w_ru, w_c, b_ru, b_c};
  const BlockGRUOutputs o{outs[0].mutable_view(), outs[1].mutable_view(), outs[2].mutable_view(),
                          outs[3].mutable_view()};
  const std::string cpu = message_of([&] { block_gru(in, o); });
  ASSERT_FALSE(cpu.empty());
  EXPECT_EQ(message_of([&] { cuda::block_gru(in, o); }), cpu);

  Tensor cx(DType::kFloat32, {B, I}), chp(DType::kFloat32, {B, H}),
      cw(DType::kFloat32, {I + H, 4 * H}), cb(DType::kFloat32, {4 * H + 1});
  std::vector<Tensor> couts;
  for (int k = 0; k < 7; ++k) couts.emplace_back(DType::kFloat32, Shape{B, H});
  const LSTMBlockCellInputs cin{cx, chp, chp, cw, {}, {}, {}, cb};
  const LSTMBlockCellOutputs cout{couts[0].mutable_view(), couts[1].mutable_view(),
                                  couts[2].mutable_view(), couts[3].mutable_view(),
                                  couts[4].mutable_view(), couts[5].mutable_view(),
                                  couts[6].mutable_view()};
  const std::string ccpu = message_of([&] { lstm_block_cell(cin, cout); });
  ASSERT_FALSE(ccpu.empty());
  EXPECT_EQ(message_of([&] { cuda::lstm_block_cell(cin, cout); }), ccpu);
}

// A valid call on a machine without a device is a clear error, after validation.
// seq_lengths has no CUDA kernel yet: a present one is refused (kUnimplemented naming the op and
// the argument) on every machine, never silently ignored.
TEST(CudaValidation, SeqLengthsIsRefusedNotIgnored) {
  const std::int64_t T = 2, B = 2, I = 3, H = 4;
  Tensor x(DType::kFloat32, {T, B, I}), hp(DType::kFloat32, {B, H}),
      w_ru(DType::kFloat32, {I + H, 2 * H}), w_c(DType::kFloat32, {I + H, H}),
      b_ru(DType::kFloat32, {2 * H}), b_c(DType::kFloat32, {H}), lengths(DType::kInt64, {B});
  std::vector<Tensor> outs;
  for (int k = 0; k < 4; ++k) outs.emplace_back(DType::kFloat32, Shape{T, B, H});
  BlockGRUInputs in{std::nullopt, x, hp, w_ru, w_c, b_ru, b_c};
  in.seq_lengths = lengths.view();
  const BlockGRUOutputs o{outs[0].mutable_view(), outs[1].mutable_view(), outs[2].mutable_view(),
                          outs[3].mutable_view()};
  try {
    cuda::block_gru(in, o);
    ADD_FAILURE() << "seq_lengths accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("BlockGRU: seq_lengths is not supported on the CUDA"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaValidation, NoDeviceIsAClearError) {
#ifdef BLOCKRNN_CUDA_HOST_EMU
  // The emulation can take its device away: the check runs on every CI machine.
  cuda_emu::set_device_count(0);
  struct Restore {
    ~Restore() { cuda_emu::set_device_count(1); }
  } restore;
#endif
  if (has_device()) GTEST_SKIP() << "a CUDA device is present (this checks the no-device error)";
  const std::int64_t B = 2, I = 3, H = 4;
  Tensor x(DType::kFloat32, {B, I}), h(DType::kFloat32, {B, H}),
      w_ru(DType::kFloat32, {I + H, 2 * H}), w_c(DType::kFloat32, {I + H, H}),
      b_ru(DType::kFloat32, {2 * H}), b_c(DType::kFloat32, {H});
  std::vector<Tensor> outs;
  for (int k = 0; k < 4; ++k) outs.emplace_back(DType::kFloat32, Shape{B, H});
  try {
    cuda::gru_block_cell({x, h, w_ru, w_c, b_ru, b_c},
                         {outs[0].mutable_view(), outs[1].mutable_view(), outs[2].mutable_view(),
                          outs[3].mutable_view()});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("GRUBlockCell: no CUDA device"), std::string::npos)
        << e.what();
  }
}

// The gradient reductions (db and the peephole gradients) sum in the documented fixed order
// (docs/cuda.md, "Structure"): the rows tiled into chunks of max(32, ⌈√rows⌉) consecutive rows,
// each chunk summed in increasing row order, then the chunk sums in increasing chunk order. The
// device results equal that order computed here bit for bit (float32 addition is exact IEEE
// arithmetic on both sides, and the products are not contracted into FMAs), at B = 100: chunks
// of 32, 32, 32 and 4 rows.
float chunked_sum(std::int64_t rows, const std::function<float(std::int64_t)>& term) {
  std::int64_t chunk = 1;
  while (chunk * chunk < rows) ++chunk;
  chunk = std::max<std::int64_t>(chunk, 32);
  float total = 0.0f;
  for (std::int64_t begin = 0; begin < rows; begin += chunk) {
    float partial = 0.0f;
    for (std::int64_t r = begin; r < std::min(rows, begin + chunk); ++r) partial += term(r);
    total += partial;
  }
  return total;
}

std::size_t index_of(const std::vector<std::string>& names, const std::string& name) {
  const auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return static_cast<std::size_t>(it - names.begin());
}

void expect_same_bits(float got, float want, const std::string& what) {
  EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0)
      << what << ": device " << got << ", chunked order " << want;
}

TEST_F(CudaOps, GradientReductionsSumInTheDocumentedChunkOrder) {
  const Dims d{1, 100, 3, 16, 1};
  const std::int64_t B = d.B, H = d.H;
  {  // LSTMBlockCellGrad's peephole gradients: Σ_n dicfo[n, gate, j]·cs[n, j].
    const OpDef& def = find_op("LSTMBlockCellGrad");
    const std::vector<Tensor> host = random_inputs(def, d, DType::kFloat32, 3);
    DeviceCall call("LSTMBlockCellGrad", host, {{"use_peephole", 1.0}});
    call.run(nullptr);
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const std::vector<Tensor> out = call.outputs();
    const float* dicfo = out[index_of(def.outputs, "dicfo")].data_as<float>();
    const float* cs_prev = host[index_of(def.inputs, "cs_prev")].data_as<float>();
    const float* cs = host[index_of(def.inputs, "cs")].data_as<float>();
    // Gate blocks in i, c, f, o order: wci pairs with block 0, wcf with 2, wco with 3.
    const struct {
      const char* output;
      std::int64_t block;
      const float* cell;
    } peepholes[] = {{"wci_grad", 0, cs_prev}, {"wcf_grad", 2, cs_prev}, {"wco_grad", 3, cs}};
    for (const auto& p : peepholes) {
      const float* got = out[index_of(def.outputs, p.output)].data_as<float>();
      for (std::int64_t j = 0; j < H; ++j) {
        const float want = chunked_sum(B, [&](std::int64_t n) {
          return dicfo[n * 4 * H + p.block * H + j] * p.cell[n * H + j];
        });
        expect_same_bits(got[j], want, std::string(p.output) + "[" + std::to_string(j) + "]");
      }
    }
  }
  {  // gradients.GRUBlockCell's bias gradients: the column sums of GRUBlockCellGrad's d_c_bar
     // and d_r_bar_u_bar (the same kernels compute those on the same inputs).
    const OpDef& grad = find_op("GRUBlockCellGrad");
    const OpDef& backward = find_op("gradients.GRUBlockCell");
    const std::vector<Tensor> host = random_inputs(grad, d, DType::kFloat32, 4);
    DeviceCall partials("GRUBlockCellGrad", host, {}), sums("gradients.GRUBlockCell", host, {});
    partials.run(nullptr);
    sums.run(nullptr);
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const std::vector<Tensor> p = partials.outputs(), s = sums.outputs();
    const struct {
      const char* partial;
      std::size_t bias;  // output index of gradients.GRUBlockCell: x, h_prev, w_ru, w_c, b_ru, b_c
      std::int64_t cols;
    } biases[] = {{"d_r_bar_u_bar", 4, 2 * H}, {"d_c_bar", 5, H}};
    for (const auto& b : biases) {
      const float* m = p[index_of(grad.outputs, b.partial)].data_as<float>();
      const float* got = s[b.bias].data_as<float>();
      for (std::int64_t j = 0; j < b.cols; ++j) {
        const float want = chunked_sum(B, [&](std::int64_t n) { return m[n * b.cols + j]; });
        expect_same_bits(got[j], want, backward.outputs[b.bias] + "[" + std::to_string(j) + "]");
      }
    }
  }
}

}  // namespace
}  // namespace blockrnn
