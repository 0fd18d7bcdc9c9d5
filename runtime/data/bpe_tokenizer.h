// GPT-2's byte-level BPE tokenizer from a vocab.json and merges.txt (the files that come with GPT-2
// checkpoints), or from Hugging Face tokenizers' single tokenizer.json: text -> token ids -> the
// exact bytes back.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::data {

// GPT-2's map of the 256 bytes to printable characters (vocab.json and merges.txt spell tokens in
// it): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves, the other 68 for U+0100 on,
// in byte order (space is U+0120 'Ġ', newline U+010A 'Ċ').
char32_t gpt2_byte_char(uint8_t b);

class BpeTokenizer {
 public:
  // Reads `dir`/vocab.json and `dir`/merges.txt; where `dir` has no vocab.json, `dir`/tokenizer.json.
  static BpeTokenizer from_dir(const std::string& dir);

  // tokenizer.json as Hugging Face's tokenizers library writes it for GPT-2 (GPT2TokenizerFast's
  // save_pretrained): model.vocab as vocab.json, model.merges ranked by order, each "left right" or
  // ["left", "right"]. Only what this encoder does is taken: model.type "BPE", a ByteLevel
  // pre_tokenizer without add_prefix_space, no normalizer, no subword prefix or suffix, no dropout,
  // byte fallback or ignore_merges, and no added token but "<|endoftext|>" (the one encode splits
  // out); IOError naming the file and the field for anything else, and for the two files' errors.
  static BpeTokenizer from_tokenizer_json(const std::string& path);

  // vocab.json: a JSON object of token (in the byte alphabet above) -> id, ids distinct and >= 0.
  // merges.txt: an optional first line "#version...", then one merge "left right" per line, ranked
  // by line order; both parts and their concatenation must be tokens. IOError naming the file (and
  // line) for a missing or unreadable file, bad JSON, a token outside the byte alphabet, a repeated
  // id, a malformed merge or one whose parts or result are not in the vocabulary.
  BpeTokenizer(const std::string& vocab_path, const std::string& merges_path);

  // The largest id + 1 (GPT-2: 50257).
  int64_t vocab_size() const { return static_cast<int64_t>(id_bytes_.size()); }
  size_t num_merges() const { return merges_.size(); }
  // The id of "<|endoftext|>", -1 without one.
  int32_t end_of_text() const { return end_of_text_; }

  // Ids of `text` (any bytes; UTF-8 is split into GPT-2's pieces, see gpt2_pretokenize.h): each piece
  // merged by lowest rank first, as GPT-2's encoder does, and "<|endoftext|>" in the text encoded as
  // that one token (as Hugging Face's GPT2Tokenizer does). ValueError when a byte that stays unmerged
  // has no token (the first such piece's, as one thread would find it). Remembers the ids of each
  // piece it has seen (not thread-safe: one encode at a time). A text of 1 MiB or more is merged on
  // the OpenMP threads, in chunks of pieces, each thread with pieces of its own remembered only for
  // this call: the same ids on any thread count.
  std::vector<int32_t> encode(std::string_view text);

  // Whether `id` is a token (in range and given by vocab.json).
  bool has_token(int64_t id) const { return id >= 0 && id < vocab_size() && id_used_[static_cast<size_t>(id)]; }

  // The bytes of the tokens, concatenated. ValueError for an id outside [0, vocab_size()) or one
  // that vocab.json leaves unused.
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  struct Merge {
    int32_t rank, result;
  };
  // A pair of symbols that may merge, as it was when found: its rank and result, the position of its
  // left symbol, both ids. Ordered by rank, then from the left.
  struct Candidate {
    int32_t rank, result, left, left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  // merge_piece's working arrays, kept between pieces (one per thread): symbols' ids and links,
  // the symbols merged at one rank, candidate pairs.
  struct Scratch {
    std::vector<int32_t> ids, next, prev, merged;
    std::vector<Candidate> heap;
  };
  BpeTokenizer() = default;
  void read_vocab(const std::string& path);
  void read_merges(const std::string& path);
  // One vocabulary entry (`where`: the file, for errors).
  void add_token(const std::string& token, int32_t id, const std::string& where);
  // The merge of two tokens at `rank` (`where`: the file and line, for errors).
  void add_merge(const std::string& left, const std::string& right, int32_t rank, const std::string& where);
  // The same from "left right" (merges.txt's line, or a string in tokenizer.json's model.merges).
  void add_merge_line(const std::string& line, int32_t rank, const std::string& where);
  using PieceCache = std::unordered_map<std::string, std::vector<int32_t>>;  // piece -> ids
  // The ids of one piece (no cache).
  std::vector<int32_t> merge_piece(std::string_view piece, Scratch& scratch) const;
  // Appends the ids of `text` to `out`: pieces found in `shared` (may be null) or `cache`, the others
  // merged and added to `cache` (up to kCacheMax pieces).
  void encode_into(std::string_view text, Scratch& scratch, PieceCache& cache, const PieceCache* shared,
                   std::vector<int32_t>& out) const;
  const std::string& token_bytes(int64_t id) const;

  std::string vocab_path_;
  std::vector<std::string> id_bytes_;  // id -> its bytes
  std::vector<bool> id_used_;          // vocab.json may leave holes
  std::unordered_map<std::string, int32_t> byte_token_;  // a token's bytes -> id
  std::array<int32_t, 256> byte_id_{};                   // single bytes' ids, -1 for none
  std::unordered_map<uint64_t, Merge> merges_;           // (left id, right id) -> rank and result
  int32_t end_of_text_ = -1;
  PieceCache cache_;
  Scratch scratch_;  // the calling thread's
};

}  // namespace tandem::data
