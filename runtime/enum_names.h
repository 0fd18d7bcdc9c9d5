// The words of a settings enum, declared once beside the enum: the YAML parser, the command line's
// flags, tandem-serve's JSON schema and the log lines all read and write the same words from it.
// An enum E takes part by specialising EnumNames<E> with a constexpr array `words` of
// {value, "word"} pairs, the canonical spelling first (a value may have later aliases).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tandem {

template <class E>
struct EnumNames;  // static constexpr std::pair<E, const char*> words[] = {...};

// The canonical word of `value` ("?" for a value the table lacks: a cast integer).
template <class E>
const char* enum_name(E value) {
  for (const auto& [v, word] : EnumNames<E>::words)
    if (v == value) return word;
  return "?";
}

// The value `word` names (exactly: callers lower-case first where case does not matter).
template <class E>
std::optional<E> enum_value(const std::string& word) {
  for (const auto& [v, w] : EnumNames<E>::words)
    if (word == w) return v;
  return std::nullopt;
}

// The canonical words in declaration order, for messages ("expected off, f16 or bf16"), choices of a
// flag and a schema's enum.
template <class E>
std::vector<std::string> enum_words() {
  std::vector<std::string> out;
  for (const auto& [v, w] : EnumNames<E>::words)
    if (enum_name(v) == w) out.push_back(w);  // aliases spell a value already listed
  return out;
}

// word -> value for every spelling (aliases included): CLI11's CheckedTransformer takes this.
template <class E>
std::vector<std::pair<std::string, E>> enum_map() {
  std::vector<std::pair<std::string, E>> out;
  for (const auto& [v, w] : EnumNames<E>::words) out.emplace_back(w, v);
  return out;
}

}  // namespace tandem
