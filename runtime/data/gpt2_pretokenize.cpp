// GPT-2's pre-tokenisation regex as a hand-written scanner: at each position the first alternative
// that matches wins, each alternative matching what the regex engine's greedy match would.
#include "runtime/data/gpt2_pretokenize.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "runtime/data/unicode_classes_table.h"

namespace tandem::data {

namespace {

template <size_t N>
bool in_ranges(const unicode::Range (&table)[N], char32_t cp) {
  const auto* it = std::upper_bound(std::begin(table), std::end(table), cp,
                                    [](char32_t c, const unicode::Range& r) { return c < r.lo; });
  return it != std::begin(table) && cp <= std::prev(it)->hi;
}

struct Char {
  size_t begin, size;
  char32_t cp;
  CharClass cls;
};

}  // namespace

size_t next_code_point(std::string_view s, size_t i, char32_t& cp) {
  constexpr char32_t kInvalid = kInvalidCodePoint;
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = b(i);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t len = 0;
  char32_t min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, min = 0x80, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, min = 0x800, cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, min = 0x10000, cp = b0 & 0x07;
  }
  if (len == 0 || i + len > s.size()) {
    cp = kInvalid;
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) {
      cp = kInvalid;
      return 1;
    }
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {  // overlong, too big, surrogate
    cp = kInvalid;
    return 1;
  }
  return len;
}

CharClass char_class(char32_t cp) {
  if (cp == kInvalidCodePoint) return CharClass::Other;
  if (in_ranges(unicode::kLetters, cp)) return CharClass::Letter;
  if (in_ranges(unicode::kNumbers, cp)) return CharClass::Number;
  if (in_ranges(unicode::kSpaces, cp)) return CharClass::Space;
  return CharClass::Other;
}

std::vector<TextPiece> gpt2_pretokenize(std::string_view text) {
  std::vector<Char> cs;
  for (size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const size_t len = next_code_point(text, i, cp);
    cs.push_back({i, len, cp, char_class(cp)});
    i += len;
  }
  const size_t n = cs.size();
  const auto run_end = [&](size_t k, CharClass cls) {  // the end of the run of `cls` from k
    while (k < n && cs[k].cls == cls) ++k;
    return k;
  };
  const auto is = [&](size_t k, char c) { return k < n && cs[k].cp == static_cast<char32_t>(c); };

  std::vector<TextPiece> pieces;
  for (size_t i = 0; i < n;) {
    size_t end = i;
    // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, as GPT-2's pattern)
    if (is(i, '\'')) {
      if (is(i + 1, 's') || is(i + 1, 't') || is(i + 1, 'm') || is(i + 1, 'd'))
        end = i + 2;
      else if ((is(i + 1, 'r') && is(i + 2, 'e')) || (is(i + 1, 'v') && is(i + 2, 'e')) ||
               (is(i + 1, 'l') && is(i + 2, 'l')))
        end = i + 3;
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020, then a run of one class
    if (end == i) {
      const size_t first = is(i, ' ') ? i + 1 : i;
      if (first < n && cs[first].cls != CharClass::Space) end = run_end(first, cs[first].cls);
    }
    // `\s+(?!\S)` backs off one character when non-space follows, unless that leaves nothing;
    // then `\s+` takes the single space.
    if (end == i) {
      const size_t run = run_end(i, CharClass::Space);
      end = run == n || run - i == 1 ? run : run - 1;
    }
    pieces.push_back({cs[i].begin, cs[end - 1].begin + cs[end - 1].size - cs[i].begin});
    i = end;
  }
  return pieces;
}

}  // namespace tandem::data
