// GPT-2's pre-tokeniser against the pieces Python's `regex` module gives with GPT-2's pattern, and
// the character classes behind it.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/data/gpt2_pretokenize.h"

using namespace tandem;
using data::CharClass;

namespace {

std::vector<std::string> pieces(const std::string& text) {
  std::vector<std::string> out;
  for (const data::TextPiece& p : data::gpt2_pretokenize(text)) out.push_back(text.substr(p.begin, p.size));
  return out;
}

using Pieces = std::vector<std::string>;

}  // namespace

TEST(Gpt2Pretokenize, PiecesAsGpt2sRegex) {
  // Expected: regex.findall(GPT-2's pattern, text) with Python's `regex` module.
  EXPECT_EQ(pieces(""), Pieces{});
  EXPECT_EQ(pieces("a  b   c"), (Pieces{"a", " ", " b", "  ", " c"}));
  EXPECT_EQ(pieces("\n\n\nx"), (Pieces{"\n\n", "\n", "x"}));
  EXPECT_EQ(pieces("it's IT'S ''s"), (Pieces{"it", "'s", " IT", "'", "S", " ''", "s"}));
  EXPECT_EQ(pieces("we've they'll I'm you're he'd don't"),
            (Pieces{"we", "'ve", " they", "'ll", " I", "'m", " you", "'re", " he", "'d", " don", "'t"}));
  EXPECT_EQ(pieces(" 42x  !?"), (Pieces{" 42", "x", " ", " !?"}));
  EXPECT_EQ(pieces("end  "), (Pieces{"end", "  "}));
  EXPECT_EQ(pieces("caf\xc3\xa9 \xce\x95\xce\xbb\xc2\xb2 e\xcc\x81"),  // "café Ελ² e" + combining acute
            (Pieces{"caf\xc3\xa9", " \xce\x95\xce\xbb", "\xc2\xb2", " e", "\xcc\x81"}));
  EXPECT_EQ(pieces("\t\tx y\xe3\x80\x80z"), (Pieces{"\t", "\t", "x", " y", "\xe3\x80\x80", "z"}));  // U+3000
}

TEST(Gpt2Pretokenize, CharacterClasses) {
  for (char32_t c : {U'a', U'Z', U'\u00e9', U'\u03a9', U'\u6f22', U'\u30ab', U'\u00aa'})
    EXPECT_EQ(data::char_class(c), CharClass::Letter) << static_cast<uint32_t>(c);
  for (char32_t c : {U'0', U'9', U'\u0663', U'\u216b', U'\u00b2', U'\u00bd'})
    EXPECT_EQ(data::char_class(c), CharClass::Number) << static_cast<uint32_t>(c);
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', U'\v', U'\f', U'\u0085', U'\u00a0', U'\u2003', U'\u3000'})
    EXPECT_EQ(data::char_class(c), CharClass::Space) << static_cast<uint32_t>(c);
  // \x1c-\x1f are str.isspace() in Python but not \s in `regex` (GPT-2's engine); marks are not \p{L}.
  for (char32_t c : {U'!', U'\'', U'\x1c', U'\u0301', U'\U0001f44d', U'\u200b', U'\x7f'})
    EXPECT_EQ(data::char_class(c), CharClass::Other) << static_cast<uint32_t>(c);
  EXPECT_EQ(data::char_class(data::kInvalidCodePoint), CharClass::Other);
}

TEST(Gpt2Pretokenize, Utf8Decoding) {
  char32_t cp = 0;
  EXPECT_EQ(data::next_code_point("\xf0\x9f\x91\x8d", 0, cp), 4u);  // U+1F44D
  EXPECT_EQ(cp, U'\U0001f44d');
  EXPECT_EQ(data::next_code_point("\xe2\x82\xac", 0, cp), 3u);  // U+20AC
  EXPECT_EQ(cp, U'\u20ac');
  // Invalid: a lone continuation byte, overlong, a surrogate, truncated, past U+10FFFF.
  for (const char* bad : {"\x80", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80", "\xff"}) {
    EXPECT_EQ(data::next_code_point(bad, 0, cp), 1u) << bad;
    EXPECT_EQ(cp, data::kInvalidCodePoint);
  }
}

TEST(Gpt2Pretokenize, PiecesCoverAnyBytes) {
  std::mt19937 gen(19);
  for (int round = 0; round < 200; ++round) {
    std::string text(static_cast<size_t>(gen() % 64), '\0');
    for (char& c : text) c = static_cast<char>(gen() % 256);
    size_t at = 0;
    for (const data::TextPiece& p : data::gpt2_pretokenize(text)) {
      ASSERT_EQ(p.begin, at);
      ASSERT_GT(p.size, 0u);
      at += p.size;
    }
    ASSERT_EQ(at, text.size());
  }
}
