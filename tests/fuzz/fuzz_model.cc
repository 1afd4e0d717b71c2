// libFuzzer target: model files (docs/model-format.md) read by blockrnn::Model::load_buffer and,
// when one loads, run by Model::forward on a small input, under a memory limit. Every input must
// yield a model or blockrnn::Error, and every forward a result or blockrnn::Error — never a
// crash, a leak, a sanitizer report, a hang or another exception type (the binary is built with
// ASan + UBSan; scripts/test.sh runs it with -timeout=10). A forward that runs must give the same
// bits with 1 and 2 threads. (Finite inputs need not give finite outputs: a file's weights are
// finite, but near float's largest they overflow in a product, as they would in the source
// framework.)
//
// Input layout: 4 bytes of call parameters, then the file's bytes (seeds: well-formed files of
// every layer kind, written by tests/fuzz/make_model_seeds.py, behind 4 parameter bytes):
//   u8 T (mod 6), u8 B (mod 4)
//   u8 flags: bit0 seq_lengths given (values below); bit1 initial states given (zeros, or the
//             file's first bytes read as floats with bit2); bit3 input x from the file's bytes
//             (floats, may be NaN or infinite) instead of finite values; bits 4-7 the memory
//             limit: 0 the default, else 1 KiB << (m - 1)
//   u8 seq_lengths seed: example b gets (seed + 3·b) % 8 steps, which may exceed T (refused)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "blockrnn/model.h"

namespace {

using blockrnn::DType;
using blockrnn::Shape;
using blockrnn::Tensor;
using blockrnn::TensorView;

// Elements we fill per input tensor at most: a model whose input needs more is only loaded.
constexpr std::int64_t kMaxElements = 1 << 16;

// A memory limit for one run: the default again when the run ends, whatever happens.
struct MemoryLimit {
  explicit MemoryLimit(int m) {
    if (m > 0) blockrnn::set_memory_limit(1024ll << (m - 1));
  }
  ~MemoryLimit() { blockrnn::set_memory_limit(0); }
};

// Fills t with finite values in [-1, 1), or with the bytes of `raw` read as floats.
void fill(Tensor& t, const std::uint8_t* raw, std::size_t n, bool from_raw, std::uint64_t salt) {
  const std::int64_t count = t.num_elements();
  for (std::int64_t e = 0; e < count; ++e) {
    double v;
    if (from_raw && n >= 4) {
      float f;
      std::memcpy(&f, raw + (std::size_t(e) * 4) % (n - 3), sizeof f);
      v = f;
    } else {
      v = double((e * 2654435761u + salt) % 2000) / 1000.0 - 1.0;
    }
    if (t.dtype() == DType::kFloat64) {
      t.data_as<double>()[e] = v;
    } else {
      t.data_as<float>()[e] = static_cast<float>(v);
    }
  }
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         (a.num_bytes() == 0 || std::memcmp(a.data(), b.data(), a.num_bytes()) == 0);
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_model: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::int64_t T = data[0] % 6, B = data[1] % 4;
  const std::uint8_t flags = data[2], lengths_seed = data[3];
  const std::uint8_t* file = data + 4;
  const std::size_t file_size = size - 4;
  const MemoryLimit limit(flags >> 4);

  std::optional<blockrnn::Model> model;
  try {
    model.emplace(blockrnn::Model::load_buffer(file, file_size, "fuzz.safetensors"));
  } catch (const blockrnn::Error&) {
    return 0;  // a refused file: the expected outcome for most inputs
  }
  const std::int64_t I = model->input_size();
  if (I <= 0 || I > kMaxElements / std::max<std::int64_t>(T * B, 1)) return 0;
  const DType dt = model->dtype();
  const bool raw_x = flags & 8;

  Tensor x(dt, Shape{T, B, I});
  fill(x, file, file_size, raw_x, 1);
  Tensor lengths(DType::kInt64, Shape{B});
  for (std::int64_t b = 0; b < B; ++b)
    lengths.data_as<std::int64_t>()[b] = (lengths_seed + 3 * b) % 8;
  std::vector<Tensor> states;
  std::vector<TensorView> state_views;
  if (flags & 2) {
    for (std::int64_t k = 0; k < model->num_states(); ++k) {
      const std::int64_t H = model->state_info(k).hidden_size;
      if (H <= 0 || H * B > kMaxElements) return 0;
      Tensor& s = states.emplace_back(dt, Shape{B, H});
      fill(s, file, file_size, flags & 4, 7 + k);
      state_views.push_back(s.view());
    }
  }
  const TensorView seq_lengths = (flags & 1) ? lengths.view() : TensorView{};

  blockrnn::set_num_threads(1);
  std::optional<blockrnn::ModelResult> one;
  try {
    one.emplace(model->forward(x.view(), seq_lengths, state_views));
  } catch (const blockrnn::Error&) {
    blockrnn::set_num_threads(2);
    return 0;
  }
  blockrnn::set_num_threads(2);
  std::optional<blockrnn::ModelResult> result;
  try {
    result.emplace(model->forward(x.view(), seq_lengths, state_views));
  } catch (const blockrnn::Error& e) {
    // Two threads may need more scratch than one: only the memory limit may refuse now.
    if (e.code() != blockrnn::ErrorCode::kResourceExhausted) fail("refused with 2 threads only");
    return 0;
  }
  const blockrnn::ModelResult& two = *result;
  if (!bitwise_equal(one->y, two.y)) fail("1 and 2 threads gave different y");
  if (one->final_states.size() != two.final_states.size()) fail("final state counts differ");
  for (std::size_t k = 0; k < two.final_states.size(); ++k) {
    if (!bitwise_equal(one->final_states[k], two.final_states[k])) {
      fail("1 and 2 threads gave different final states");
    }
  }
  return 0;
}
