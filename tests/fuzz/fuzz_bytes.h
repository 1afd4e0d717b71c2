// The fuzz targets' reader of their input bytes (tests/fuzz/fuzz_*.cc): fixed-size fields read
// front to back (missing bytes read as 0), and element values taken cyclically from the whole
// input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace blockrnn::fuzz {

class Bytes {
 public:
  Bytes(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint8_t u8() { return pos_ < n_ ? d_[pos_++] : 0; }
  template <typename T>
  T read() {
    T v{};
    std::uint8_t buf[sizeof(T)] = {};
    for (std::size_t k = 0; k < sizeof(T); ++k) buf[k] = u8();
    std::memcpy(&v, buf, sizeof v);
    return v;
  }
  // Element values: 4-byte float bit patterns taken cyclically from the whole input.
  float value() {
    if (n_ == 0) return 0.25f;
    std::uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) bits = bits << 8 | d_[(cycle_++) % n_];
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }

 private:
  const std::uint8_t* d_;
  std::size_t n_, pos_ = 0, cycle_ = 0;
};

}  // namespace blockrnn::fuzz
