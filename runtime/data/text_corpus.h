// A byte-level text corpus (vocabulary 256): the regular files of a folder concatenated in name
// order, split into training bytes and the last part as validation bytes; Debian's `fortunes`
// package is the default. TextWindows serves random windows of it as next-byte-prediction batches.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/batch_source.h"

namespace tandem::data {

struct TextCorpus {
  std::vector<uint8_t> train, val;
  std::vector<std::string> files;  // the files read, in order
};

// Reads the regular files of `dir` (symlinks such as fortunes' *.u8, hidden files and the *.dat
// indexes skipped) sorted by name, concatenated; the last `val_fraction` of the bytes is the
// validation split. IOError naming the folder (and the package that provides the default one) when
// it is missing or holds no text; ValueError for a val_fraction outside (0, 1).
TextCorpus load_text_corpus(const std::string& dir, double val_fraction = 0.1);

// Entropy of the byte-unigram distribution of `bytes`, in nats (the loss of a model that knows only
// byte frequencies).
double unigram_entropy_nats(const std::vector<uint8_t>& bytes);

struct TextWindowsOptions {
  int64_t batch_size = 8;  // windows per batch and rank
  int64_t context = 128;   // tokens per window (T); each window reads T + 1 bytes
  int world_size = 1, rank = 0;
  uint64_t seed = 0;
};

// Training batches: random windows of `bytes` (or of token ids). Window i of batch b in epoch e on
// rank r starts at a Philox draw keyed by (seed, e, b, global index r * batch_size + i), so the global batch of
// N ranks with batch B equals that of one rank with batch N * B, and any batch can be re-read
// exactly (resume). x = bytes[s, s + T), y = bytes[s + 1, s + T + 1), both i64 [B, T]. An epoch is
// len(bytes) / (tokens of one global batch) batches (at least 1).
class TextWindows final : public BatchSource {
 public:
  TextWindows(std::vector<uint8_t> bytes, TextWindowsOptions options);  // byte tokens (vocabulary 256)
  // Token ids (a BPE tokenizer's): the same windows over tokens; `unit` names them in describe().
  TextWindows(std::vector<int32_t> tokens, TextWindowsOptions options, std::string unit = "tokens");
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  int64_t num_batches() const override;
  int64_t num_samples() const override { return num_batches() * opt_.batch_size; }
  Batch batch(int64_t b) const override;
  std::string describe() const override;

 private:
  std::vector<int32_t> tokens_;
  TextWindowsOptions opt_;
  std::string unit_;
  int64_t epoch_ = 0;
};

// Validation batches: `windows` evenly spaced windows over `bytes` (fixed, every epoch alike; 0 or
// more than fit: consecutive non-overlapping windows covering the whole split), this rank's
// contiguous share of them, `batch_size` windows per batch.
class EvalWindows final : public BatchSource {
 public:
  EvalWindows(std::vector<uint8_t> bytes, int64_t windows, TextWindowsOptions options);
  EvalWindows(std::vector<int32_t> tokens, int64_t windows, TextWindowsOptions options, std::string unit = "tokens");
  void set_epoch(int64_t) override {}
  int64_t num_batches() const override;
  int64_t num_samples() const override;
  Batch batch(int64_t b) const override;
  std::string describe() const override;
  int64_t total_windows() const { return static_cast<int64_t>(starts_.size()); }

 private:
  std::vector<int32_t> tokens_;
  TextWindowsOptions opt_;
  std::string unit_;
  std::vector<int64_t> starts_;  // all ranks' windows
  int64_t begin_ = 0, end_ = 0;  // this rank's share of starts_
};

// The [n, T] inputs and targets of windows starting at `starts` (shared by both sources).
Batch gather_windows(const std::vector<int32_t>& tokens, const int64_t* starts, int64_t n, int64_t context);

}  // namespace tandem::data
