// What the BPE tokenizer's loading (bpe_tokenizer_load.cpp) and encoding (bpe_tokenizer_encode.cpp)
// share: the special token's spelling and the key of a merge's pair.
#pragma once
#include <cstdint>
#include <string_view>

namespace tandem::data::bpe_detail {

inline constexpr std::string_view kEndOfText = "<|endoftext|>";

// A merge's key in BpeTokenizer::merges_: the pair's left and right ids.
inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace tandem::data::bpe_detail
