// Text corpus loading and its window sources.
#include "runtime/data/text_corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "runtime/data/default_dirs.h"

#include "runtime/backend/common/philox.h"
#include "runtime/error.h"

namespace tandem::data {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string missing_hint(const std::string& dir) {
  return dir == kFortunesDir ? " (install Debian's fortunes package: apt-get install fortunes)" : "";
}

}  // namespace

TextCorpus load_text_corpus(const std::string& dir, double val_fraction) {
  TANDEM_CHECK(val_fraction > 0 && val_fraction < 1, "text corpus: the validation fraction {} must be in (0, 1)",
               val_fraction);
  std::error_code ec;
  TANDEM_CHECK_KIND(IO, fs::is_directory(dir, ec), "text corpus: '{}' is not a folder{}", dir, missing_hint(dir));
  TextCorpus c;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    // symlink_status: fortunes' *.u8 are links to the same texts; *.dat are strfile's binary indexes.
    if (!fs::is_regular_file(entry.symlink_status()) || name.empty() || name[0] == '.' || ends_with(name, ".dat"))
      continue;
    c.files.push_back(entry.path().string());
  }
  std::sort(c.files.begin(), c.files.end());
  std::vector<uint8_t> all;
  for (const auto& path : c.files) {
    std::ifstream in(path, std::ios::binary);
    TANDEM_CHECK_KIND(IO, in.good(), "text corpus: cannot read '{}'", path);
    all.insert(all.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  TANDEM_CHECK_KIND(IO, all.size() >= 2, "text corpus: '{}' holds no text ({} files, {} bytes){}", dir,
                    c.files.size(), all.size(), missing_hint(dir));
  auto n_val = static_cast<size_t>(std::llround(static_cast<double>(all.size()) * val_fraction));
  n_val = std::clamp<size_t>(n_val, 1, all.size() - 1);
  c.train.assign(all.begin(), all.end() - static_cast<std::ptrdiff_t>(n_val));
  c.val.assign(all.end() - static_cast<std::ptrdiff_t>(n_val), all.end());
  return c;
}

double unigram_entropy_nats(const std::vector<uint8_t>& bytes) {
  if (bytes.empty()) return 0;
  std::vector<double> count(256, 0.0);
  for (uint8_t b : bytes) count[b] += 1;
  double h = 0, n = static_cast<double>(bytes.size());
  for (double k : count)
    if (k > 0) h -= k / n * std::log(k / n);
  return h;
}

Batch gather_windows(const std::vector<int32_t>& tokens, const int64_t* starts, int64_t n, int64_t context) {
  Tensor x = Tensor::empty({n, context}, DType::i64), y = Tensor::empty({n, context}, DType::i64);
  int64_t* px = x.data<int64_t>();
  int64_t* py = y.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    TANDEM_CHECK(starts[i] >= 0 && starts[i] + context < static_cast<int64_t>(tokens.size()),
                 "text windows: window at {} of {} tokens does not fit {} tokens", starts[i], context, tokens.size());
    const int32_t* src = tokens.data() + starts[i];
    for (int64_t t = 0; t < context; ++t) {
      px[i * context + t] = src[t];
      py[i * context + t] = src[t + 1];
    }
  }
  return {x, y, {}};
}

namespace {

std::vector<int32_t> widen(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

void check_options(const TextWindowsOptions& o, size_t tokens, const std::string& unit, const char* what) {
  TANDEM_CHECK(o.batch_size > 0 && o.context > 0, "{}: batch size {} and context {} must be > 0", what, o.batch_size,
               o.context);
  TANDEM_CHECK(o.world_size > 0 && o.rank >= 0 && o.rank < o.world_size, "{}: rank {} of world size {}", what, o.rank,
               o.world_size);
  TANDEM_CHECK(static_cast<int64_t>(tokens) > o.context, "{}: {} {} hold no window of {} + 1 {}", what, tokens, unit,
               o.context, unit);
}

}  // namespace

TextWindows::TextWindows(std::vector<uint8_t> bytes, TextWindowsOptions options)
    : TextWindows(widen(bytes), options, "bytes") {}

TextWindows::TextWindows(std::vector<int32_t> tokens, TextWindowsOptions options, std::string unit)
    : tokens_(std::move(tokens)), opt_(options), unit_(std::move(unit)) {
  check_options(opt_, tokens_.size(), unit_, "TextWindows");
}

int64_t TextWindows::num_batches() const {
  const int64_t global_tokens = opt_.batch_size * opt_.context * opt_.world_size;
  return std::max<int64_t>(static_cast<int64_t>(tokens_.size()) / global_tokens, 1);
}

Batch TextWindows::batch(int64_t b) const {
  TANDEM_CHECK(b >= 0 && b < num_batches(), "TextWindows: batch {} out of range [0, {})", b, num_batches());
  const auto positions = static_cast<uint64_t>(static_cast<int64_t>(tokens_.size()) - opt_.context);
  // One Philox stream per (epoch, batch); the counter's block is the window's global index.
  const uint64_t stream = (static_cast<uint64_t>(epoch_) << 32) | static_cast<uint64_t>(b);
  std::vector<int64_t> starts(static_cast<size_t>(opt_.batch_size));
  for (int64_t i = 0; i < opt_.batch_size; ++i) {
    const auto global = static_cast<uint64_t>(opt_.rank * opt_.batch_size + i);
    Philox4 r = philox4x32_10(opt_.seed, global, stream);
    const uint64_t draw = (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
    starts[static_cast<size_t>(i)] = static_cast<int64_t>(draw % positions);
  }
  return gather_windows(tokens_, starts.data(), opt_.batch_size, opt_.context);
}

std::string TextWindows::describe() const { return fmt::format("{} training {}", tokens_.size(), unit_); }

EvalWindows::EvalWindows(std::vector<uint8_t> bytes, int64_t windows, TextWindowsOptions options)
    : EvalWindows(widen(bytes), windows, options, "bytes") {}

EvalWindows::EvalWindows(std::vector<int32_t> tokens, int64_t windows, TextWindowsOptions options, std::string unit)
    : tokens_(std::move(tokens)), opt_(options), unit_(std::move(unit)) {
  check_options(opt_, tokens_.size(), unit_, "EvalWindows");
  const int64_t n = static_cast<int64_t>(tokens_.size());
  const int64_t fit = (n - 1) / opt_.context;  // non-overlapping windows (T + 1 bytes, sharing one)
  if (windows <= 0 || windows >= fit) {
    for (int64_t i = 0; i < fit; ++i) starts_.push_back(i * opt_.context);
  } else {
    const int64_t last = n - opt_.context - 1;  // the last valid start
    for (int64_t i = 0; i < windows; ++i) starts_.push_back(windows == 1 ? 0 : i * last / (windows - 1));
  }
  // Contiguous shares, the first (size % world) ranks one more: the sums over ranks cover each once.
  const int64_t total = total_windows(), base = total / opt_.world_size, extra = total % opt_.world_size;
  begin_ = opt_.rank * base + std::min<int64_t>(opt_.rank, extra);
  end_ = begin_ + base + (opt_.rank < extra ? 1 : 0);
}

int64_t EvalWindows::num_batches() const { return (end_ - begin_ + opt_.batch_size - 1) / opt_.batch_size; }

int64_t EvalWindows::num_samples() const { return end_ - begin_; }

Batch EvalWindows::batch(int64_t b) const {
  TANDEM_CHECK(b >= 0 && b < num_batches(), "EvalWindows: batch {} out of range [0, {})", b, num_batches());
  const int64_t first = begin_ + b * opt_.batch_size, n = std::min(opt_.batch_size, end_ - first);
  return gather_windows(tokens_, starts_.data() + first, n, opt_.context);
}

std::string EvalWindows::describe() const {
  return fmt::format("{} validation windows of {} {}", total_windows(), opt_.context, unit_);
}

}  // namespace tandem::data
