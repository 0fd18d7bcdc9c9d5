// GPT-2's byte-level BPE, encoding (merging by rank, a long text's chunks on the threads) and
// decoding. Loading the vocabulary and the merges: bpe_tokenizer_load.cpp.
#include "runtime/data/bpe_tokenizer.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <exception>
#include <functional>
#include <unordered_map>

#include "runtime/data/bpe_tokenizer_detail.h"
#include "runtime/data/gpt2_pretokenize.h"
#include "runtime/error.h"

namespace tandem::data {

using bpe_detail::kEndOfText;
using bpe_detail::pair_key;

namespace {

constexpr size_t kCacheMax = size_t{1} << 20;  // pieces remembered (a few hundred MB at most)
constexpr size_t kParallelFrom = size_t{1} << 20;  // bytes of text from which encode uses the threads

}  // namespace

std::vector<int32_t> BpeTokenizer::merge_piece(std::string_view piece, Scratch& scratch) const {
  // GPT-2's encoder merges, while any pair does, every occurrence of the pair of lowest rank, left to
  // right; it rescans the word for each merge, which takes time quadratic in a piece's length (a long
  // run of letters, digits or punctuation is one piece: 200 KB of random letters took 4.5 s). The same
  // merges here in O(n log n): the symbols are a linked list over the piece's bytes and the candidate
  // pairs a min-heap by (rank, position of the left symbol). All of one rank's occurrences merge before
  // the pairs they form are pushed, as GPT-2's pass over the word does. A byte without a token is
  // -1 - byte (merges never match it).
  TANDEM_CHECK(piece.size() < size_t{INT32_MAX}, "BPE tokenizer: a piece of {} bytes (one run of one kind of "
               "character) is longer than the 2 GiB the tokenizer takes", piece.size());
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<int32_t>& id = scratch.ids;
  std::vector<int32_t>& next = scratch.next;
  std::vector<int32_t>& prev = scratch.prev;
  id.resize(static_cast<size_t>(n));
  next.resize(static_cast<size_t>(n));
  prev.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const auto b = static_cast<uint8_t>(piece[static_cast<size_t>(i)]);
    id[i] = byte_id_[b] >= 0 ? byte_id_[b] : -1 - static_cast<int32_t>(b);
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  constexpr int32_t kAbsorbed = INT32_MIN;  // a symbol merged into the one on its left
  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  const auto add = [&](int32_t left) {  // the pair at `left`, if it merges, at the heap's end
    const int32_t right = left >= 0 ? next[left] : -1;
    if (right < 0 || id[left] < 0 || id[right] < 0) return false;
    const auto it = merges_.find(pair_key(id[left], id[right]));
    if (it == merges_.end()) return false;
    heap.push_back(Candidate{it->second.rank, it->second.result, left, id[left], id[right]});
    return true;
  };
  const auto push = [&](int32_t left) {
    if (add(left)) std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  // Whether the pair is still there: its left symbol not absorbed and both symbols as they were (a
  // symbol changes only by merging, into a longer token, so an id seen again is the same symbol).
  const auto current = [&](const Candidate& c) {
    return id[c.left] == c.left_id && next[c.left] >= 0 && id[next[c.left]] == c.right_id;
  };
  for (int32_t i = 0; i + 1 < n; ++i) add(i);
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  std::vector<int32_t>& merged = scratch.merged;
  while (!heap.empty()) {
    const int32_t rank = heap.front().rank;  // one pair has this rank; merge all of its occurrences
    merged.clear();
    while (!heap.empty() && heap.front().rank == rank) {
      const Candidate c = heap.front();
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      heap.pop_back();
      if (!current(c)) continue;
      const int32_t right = next[c.left];
      id[c.left] = c.result;
      next[c.left] = next[right];
      if (next[right] >= 0) prev[next[right]] = c.left;
      id[right] = kAbsorbed;
      merged.push_back(c.left);
    }
    for (int32_t m : merged) {  // the pairs the merged symbols now form with their neighbours
      push(prev[m]);
      push(m);
    }
  }
  std::vector<int32_t> word;
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = next[i]) {
    TANDEM_CHECK(id[i] >= 0, "BPE tokenizer: byte 0x{:02x} has no token in {} and no merge covers it", -1 - id[i],
                 vocab_path_);
    word.push_back(id[i]);
  }
  return word;
}

void BpeTokenizer::encode_into(std::string_view text, Scratch& scratch, PieceCache& cache, const PieceCache* shared,
                               std::vector<int32_t>& out) const {
  while (!text.empty()) {
    // "<|endoftext|>" in the text is the special token; the text around it is encoded on its own.
    const size_t special = end_of_text_ >= 0 ? text.find(kEndOfText) : std::string_view::npos;
    const std::string_view part = text.substr(0, special);
    for (const TextPiece& t : gpt2_pretokenize(part)) {
      const std::string piece(part.substr(t.begin, t.size));
      const std::vector<int32_t>* word = nullptr;
      if (shared)
        if (auto it = shared->find(piece); it != shared->end()) word = &it->second;
      if (!word) {
        auto it = cache.find(piece);
        if (it == cache.end()) {
          std::vector<int32_t> merged = merge_piece(piece, scratch);
          if (cache.size() >= kCacheMax) {
            out.insert(out.end(), merged.begin(), merged.end());
            continue;
          }
          it = cache.emplace(piece, std::move(merged)).first;
        }
        word = &it->second;
      }
      out.insert(out.end(), word->begin(), word->end());
    }
    if (special == std::string_view::npos) break;
    out.push_back(end_of_text_);
    text.remove_prefix(special + kEndOfText.size());
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) {
  std::vector<int32_t> ids;
  const int threads = text.size() >= kParallelFrom ? omp_get_max_threads() : 1;
  if (threads <= 1) {
    encode_into(text, scratch_, cache_, nullptr, ids);
    return ids;
  }
  // Chunks of the text on the threads, cut where the pieces are the same as in the whole text: before
  // a newline that follows a printable ASCII byte (the piece holding that byte ends there, and the
  // whitespace run from the newline on depends only on what follows it; no "<|endoftext|>" or UTF-8
  // sequence holds a newline). Each thread reads the shared cache (nobody writes it meanwhile) and
  // keeps the pieces it merges in its own; the chunks' ids are joined in order. An error (a byte
  // without a token) is the first chunk's that has one, as one thread would meet it.
  const size_t target = text.size() / (static_cast<size_t>(threads) * 8) + 1;
  std::vector<size_t> cuts = {0};
  for (size_t at = target; at < text.size();) {
    const size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) break;
    const auto before = static_cast<unsigned char>(text[nl - 1]);
    if (before > 0x20 && before < 0x7f) {
      cuts.push_back(nl);
      at = nl + target;
    } else {
      at = nl + 1;
    }
  }
  cuts.push_back(text.size());
  const size_t chunks = cuts.size() - 1;
  std::vector<std::vector<int32_t>> parts(chunks);
  std::vector<std::exception_ptr> errors(chunks);
#pragma omp parallel num_threads(threads)
  {
    Scratch scratch;
    PieceCache mine;
#pragma omp for schedule(dynamic)
    for (size_t c = 0; c < chunks; ++c) {
      try {
        encode_into(text.substr(cuts[c], cuts[c + 1] - cuts[c]), scratch, mine, &cache_, parts[c]);
      } catch (...) {
        errors[c] = std::current_exception();
      }
    }
  }
  for (size_t c = 0; c < chunks; ++c) {
    if (errors[c]) std::rethrow_exception(errors[c]);
    ids.insert(ids.end(), parts[c].begin(), parts[c].end());
  }
  return ids;
}

const std::string& BpeTokenizer::token_bytes(int64_t id) const {
  TANDEM_CHECK(id >= 0 && id < vocab_size(), "BPE tokenizer: id {} is out of range [0, {}) of {}", id, vocab_size(),
               vocab_path_);
  TANDEM_CHECK(id_used_[static_cast<size_t>(id)], "BPE tokenizer: id {} has no token in {}", id, vocab_path_);
  return id_bytes_[static_cast<size_t>(id)];
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) out += token_bytes(id);
  return out;
}

}  // namespace tandem::data
