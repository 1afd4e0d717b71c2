// Tests for the embedded corpus (matches data/corpus.txt, size, content) and
// for Vocabulary (construction, encode/decode, error messages).
#include "train/corpus.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace blockrnn::train {
namespace {

std::string error_of_encode(const Vocabulary& v, std::string_view text) {
  try {
    v.encode(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(EmbeddedCorpus, MatchesSourceFile) {
  std::ifstream in(BLOCKRNN_TRAIN_CORPUS_PATH, std::ios::binary);
  ASSERT_TRUE(in) << BLOCKRNN_TRAIN_CORPUS_PATH;
  std::ostringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(embedded_corpus(), ss.str());
}

TEST(EmbeddedCorpus, IsReadableEnglishText) {
  const std::string_view text = embedded_corpus();
  EXPECT_GE(text.size(), 300u * 1000);
  EXPECT_LE(text.size(), 500u * 1000);
  EXPECT_EQ(text.substr(0, 55), "In the beginning God created the heaven and the earth.\n");
  EXPECT_EQ(text.back(), '\n');
  for (char c : text) {
    ASSERT_TRUE(c == '\n' || (c >= ' ' && c <= '~')) << describe_char(c);
  }
  const Vocabulary v = Vocabulary::from_text(text);
  EXPECT_GE(v.size(), 50);
  EXPECT_LE(v.size(), 96);
}

TEST(Vocabulary, SortedUniqueBytes) {
  const Vocabulary v = Vocabulary::from_text("hello world\n");
  EXPECT_EQ(v.symbols(), "\n dehlorw");
  EXPECT_EQ(v.size(), 9);
  EXPECT_EQ(v.id('\n'), 0);
  EXPECT_EQ(v.id(' '), 1);
  EXPECT_EQ(v.id('w'), 8);
  EXPECT_EQ(v.symbol(2), 'd');
  EXPECT_TRUE(v.contains('l'));
  EXPECT_FALSE(v.contains('z'));
  EXPECT_EQ(Vocabulary::from_symbols(v.symbols()), v);
  // High bytes sort as unsigned, after ASCII.
  const Vocabulary hi =
      Vocabulary::from_text(std::string("\xff"
                                        "a\x80",
                                        3));
  EXPECT_EQ(hi.symbols(), std::string("a\x80\xff", 3));
  EXPECT_TRUE(Vocabulary().empty());
}

TEST(Vocabulary, EncodeDecodeRoundTrip) {
  const std::string_view text = embedded_corpus().substr(0, 20000);
  const Vocabulary v = Vocabulary::from_text(text);
  const std::vector<int32_t> ids = v.encode(text);
  ASSERT_EQ(ids.size(), text.size());
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, v.size());
  }
  EXPECT_EQ(v.decode(ids), text);
  EXPECT_TRUE(v.encode("").empty());
}

TEST(Vocabulary, UnknownCharacterErrorNamesCharacterAndPosition) {
  const Vocabulary v = Vocabulary::from_text("abc\n");
  const std::string e1 = error_of_encode(v, "ab\nc@a");
  EXPECT_NE(e1.find("'@'"), std::string::npos) << e1;
  EXPECT_NE(e1.find("byte offset 4"), std::string::npos) << e1;
  EXPECT_NE(e1.find("line 2, column 2"), std::string::npos) << e1;
  const std::string e2 = error_of_encode(v, std::string("a\x01", 2));
  EXPECT_NE(e2.find("\\x01"), std::string::npos) << e2;
  EXPECT_NE(e2.find("byte offset 1"), std::string::npos) << e2;
  const std::string e3 = error_of_encode(v, "\t");
  EXPECT_NE(e3.find("'\\t'"), std::string::npos) << e3;
  EXPECT_THROW(Vocabulary().encode("a"), std::invalid_argument);
}

TEST(Vocabulary, RangeErrors) {
  const Vocabulary v = Vocabulary::from_text("xyz");
  EXPECT_THROW(v.id('a'), std::out_of_range);
  EXPECT_THROW(v.symbol(3), std::out_of_range);
  EXPECT_THROW(v.symbol(-1), std::out_of_range);
  const std::vector<int32_t> bad = {0, 1, 7};
  try {
    v.decode(bad);
    FAIL();
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Vocabulary::from_symbols("ba"), std::invalid_argument);
  EXPECT_THROW(Vocabulary::from_symbols("aa"), std::invalid_argument);
  EXPECT_EQ(describe_char('\''), "'\\''");
  EXPECT_EQ(describe_char('\\'), "'\\\\'");
  EXPECT_EQ(describe_char('\xe9'), "\\xE9");
}

}  // namespace
}  // namespace blockrnn::train
