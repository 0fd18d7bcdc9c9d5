// GPT-2's pre-tokenisation: text split into the pieces that BPE merges within, as GPT-2's regex
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ splits it, written by
// hand over UTF-8 code points (no regex engine).
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace tandem::data {

enum class CharClass { Letter, Number, Space, Other };

// \p{L}, \p{N}, \s or none of them, from the `regex` module's tables (unicode_classes_table.h).
CharClass char_class(char32_t cp);

// A piece of the text: bytes [begin, begin + size).
struct TextPiece {
  size_t begin, size;
};

// UTF-8: the code point starting at text[i] and its length in bytes (1-4). An invalid sequence
// (truncated, overlong, a surrogate, past U+10FFFF, a stray continuation byte) is its first byte
// alone, with cp = kInvalidCodePoint.
inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;
size_t next_code_point(std::string_view text, size_t i, char32_t& cp);

// The pieces of `text`, in order, covering it exactly. The text is read as UTF-8; a byte of an
// invalid sequence counts as one character in none of the classes, so any bytes split (and
// round-trip) without error.
std::vector<TextPiece> gpt2_pretokenize(std::string_view text);

}  // namespace tandem::data
