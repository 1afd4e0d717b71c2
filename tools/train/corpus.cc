// Vocabulary (byte <-> id mapping) for the embedded character-level corpus.
// embedded_corpus() itself is generated at build time from data/corpus.txt.
#include "train/corpus.h"

#include <cstdio>
#include <stdexcept>

namespace blockrnn::train {

std::string describe_char(char c) {
  const auto u = static_cast<uint8_t>(c);
  switch (c) {
    case '\n':
      return "'\\n'";
    case '\r':
      return "'\\r'";
    case '\t':
      return "'\\t'";
    case '\0':
      return "'\\0'";
    case '\\':
      return "'\\\\'";
    case '\'':
      return "'\\''";
    default:
      break;
  }
  if (u >= 0x20 && u < 0x7F) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\x%02X", static_cast<unsigned>(u));
  return buf;
}

Vocabulary::Vocabulary() {
  ids_.fill(-1);
}

Vocabulary Vocabulary::from_text(std::string_view text) {
  std::array<bool, 256> present{};
  for (char c : text) present[static_cast<uint8_t>(c)] = true;
  std::string symbols;
  for (int b = 0; b < 256; ++b) {
    if (present[b]) symbols.push_back(static_cast<char>(b));
  }
  return from_symbols(symbols);
}

Vocabulary Vocabulary::from_symbols(std::string_view symbols) {
  Vocabulary vocab;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (i > 0 && static_cast<uint8_t>(symbols[i - 1]) >= static_cast<uint8_t>(symbols[i])) {
      throw std::invalid_argument("vocabulary symbols must be sorted and unique, but " +
                                  describe_char(symbols[i]) + " at index " + std::to_string(i) +
                                  " follows " + describe_char(symbols[i - 1]));
    }
    vocab.ids_[static_cast<uint8_t>(symbols[i])] = static_cast<int32_t>(i);
  }
  vocab.symbols_ = std::string(symbols);
  return vocab;
}

int32_t Vocabulary::id(char c) const {
  const int32_t i = ids_[static_cast<uint8_t>(c)];
  if (i < 0) throw std::out_of_range("character " + describe_char(c) + " is not in the vocabulary");
  return i;
}

char Vocabulary::symbol(int32_t id) const {
  if (id < 0 || id >= size()) {
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(size()) + ")");
  }
  return symbols_[static_cast<size_t>(id)];
}

std::vector<int32_t> Vocabulary::encode(std::string_view text) const {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int32_t id = ids_[static_cast<uint8_t>(text[i])];
    if (id < 0) {
      size_t line = 1;
      size_t line_start = 0;
      for (size_t j = 0; j < i; ++j) {
        if (text[j] == '\n') {
          ++line;
          line_start = j + 1;
        }
      }
      throw std::invalid_argument(
          "character " + describe_char(text[i]) + " at byte offset " + std::to_string(i) +
          " (line " + std::to_string(line) + ", column " + std::to_string(i - line_start + 1) +
          ") is not in the vocabulary of " + std::to_string(size()) + " characters");
    }
    out[i] = id;
  }
  return out;
}

std::string Vocabulary::decode(std::span<const int32_t> ids) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= size()) {
      throw std::out_of_range("token id " + std::to_string(ids[i]) + " at position " +
                              std::to_string(i) + " is outside the vocabulary [0, " +
                              std::to_string(size()) + ")");
    }
    out[i] = symbols_[static_cast<size_t>(ids[i])];
  }
  return out;
}

}  // namespace blockrnn::train
