// CRC-32 (IEEE 802.3, as used by PNG, zlib's crc32 and gzip) and Adler-32 (zlib
// stream trailer) checksums, both incremental.
#ifndef BLOCKRNN_TOOLS_TRAIN_CHECKSUM_H_
#define BLOCKRNN_TOOLS_TRAIN_CHECKSUM_H_

#include <cstdint>
#include <span>
#include <string_view>

namespace blockrnn::train {

// CRC-32 with the reflected polynomial 0xEDB88320, initial value and final XOR
// 0xFFFFFFFF. To checksum data in pieces pass the previous result as `crc`:
// crc32(b, crc32(a)) == crc32(a + b). crc32("123456789") == 0xCBF43926.
uint32_t crc32(std::span<const uint8_t> data, uint32_t crc = 0);
uint32_t crc32(std::string_view data, uint32_t crc = 0);

// Adler-32 as defined in RFC 1950. Start value is 1; pass the previous result to
// continue: adler32(b, adler32(a)) == adler32(a + b).
uint32_t adler32(std::span<const uint8_t> data, uint32_t adler = 1);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_CHECKSUM_H_
