// The training corpus embedded at build time (tools/train/data/corpus.txt, KJV
// Genesis-Exodus, see data/SOURCE.md) and the byte-level Vocabulary that maps
// characters to contiguous ids for the character-level language model.
#ifndef BLOCKRNN_TOOLS_TRAIN_CORPUS_H_
#define BLOCKRNN_TOOLS_TRAIN_CORPUS_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace blockrnn::train {

// The contents of tools/train/data/corpus.txt, embedded into the binary by a
// CMake step (cmake/embed_file.cmake). Valid for the lifetime of the program.
std::string_view embedded_corpus();

// Maps bytes to ids 0..size()-1. Ids are assigned in increasing unsigned byte
// order, so the vocabulary is fully described by its (sorted, unique) symbols.
class Vocabulary {
 public:
  // An empty vocabulary (size() == 0); encode() of any non-empty text throws.
  Vocabulary();

  // The sorted unique bytes occurring in `text`.
  static Vocabulary from_text(std::string_view text);

  // Rebuilds a vocabulary from symbols() (e.g. as stored in a checkpoint).
  // Throws std::invalid_argument unless `symbols` is strictly increasing as
  // unsigned bytes (sorted, no duplicates).
  static Vocabulary from_symbols(std::string_view symbols);

  int64_t size() const { return static_cast<int64_t>(symbols_.size()); }
  bool empty() const { return symbols_.empty(); }

  // Byte i is the symbol of id i.
  const std::string& symbols() const { return symbols_; }

  bool contains(char c) const { return ids_[static_cast<uint8_t>(c)] >= 0; }

  // Id of `c`; throws std::out_of_range if `c` is not in the vocabulary.
  int32_t id(char c) const;

  // Symbol of `id`; throws std::out_of_range if id is not in [0, size()).
  char symbol(int32_t id) const;

  // Ids of every byte of `text`. Throws std::invalid_argument naming the first
  // unknown character (printable or as \xNN) and its byte offset, line and column.
  std::vector<int32_t> encode(std::string_view text) const;

  // Inverse of encode(); throws std::out_of_range on an id outside [0, size()).
  std::string decode(std::span<const int32_t> ids) const;

  friend bool operator==(const Vocabulary& a, const Vocabulary& b) {
    return a.symbols_ == b.symbols_;
  }

 private:
  std::string symbols_;
  std::array<int32_t, 256> ids_;  // -1 for bytes not in the vocabulary
};

// Human-readable description of a byte for error messages: 'a', ' ', '\n',
// '\t', '\\', '\'' or \xNN for other non-printable bytes.
std::string describe_char(char c);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_CORPUS_H_
