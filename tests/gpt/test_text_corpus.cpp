// The byte-level text corpus: which files it reads and in what order, the split, clear errors, and
// window batches that depend only on (seed, epoch, batch, global index).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "runtime/data/default_dirs.h"
#include "runtime/data/text_corpus.h"
#include "runtime/error.h"
#include "tests/data/temp_dir.h"

using namespace tandem;
using data::TextWindows;
using data::TextWindowsOptions;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

std::vector<int64_t> values(const Tensor& t) { return t.to_vector<int64_t>(); }

// 5000 bytes of pseudo-text (a repeating pattern, so windows at different starts differ).
std::vector<uint8_t> pattern_bytes(size_t n = 5000) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 7 + i / 13) % 251);
  return b;
}

}  // namespace

TEST(TextCorpus, RegularFilesInNameOrderWithoutIndexesOrLinks) {
  tandem::testing::TempDir dir;
  write(dir.file("b"), "world");
  write(dir.file("a"), "hello ");
  write(dir.file("a.dat"), std::string("\x00\x01\x02", 3));
  write(dir.file(".hidden"), "nope");
  std::filesystem::create_symlink(dir.file("a"), dir.file("a.u8"));
  std::filesystem::create_directory(dir.file("sub"));
  data::TextCorpus c = data::load_text_corpus(dir.path().string(), 0.1);
  ASSERT_EQ(c.files.size(), 2u);
  EXPECT_EQ(std::filesystem::path(c.files[0]).filename(), "a");
  EXPECT_EQ(std::string(c.train.begin(), c.train.end()), "hello worl");  // 11 bytes, the last 10% (1) is val
  EXPECT_EQ(std::string(c.val.begin(), c.val.end()), "d");
}

TEST(TextCorpus, MissingFolderAndEmptyCorpusAreClearErrors) {
  try {
    data::load_text_corpus("/nonexistent/tandem-text");
    FAIL() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tandem-text"), std::string::npos) << e.what();
  }
  tandem::testing::TempDir dir;
  write(dir.file("fortunes.dat"), "index");
  try {
    data::load_text_corpus(dir.path().string());
    FAIL() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no text"), std::string::npos) << e.what();
  }
  EXPECT_THROW(data::load_text_corpus(dir.path().string(), 1.0), ValueError);
}

TEST(TextCorpus, FortunesPackage) {
  // Installed by scripts/install-deps; the figures of docs/transformers.md.
  data::TextCorpus c = data::load_text_corpus(data::kFortunesDir);
  const size_t total = c.train.size() + c.val.size();
  EXPECT_GT(total, 2000000u);
  EXPECT_NEAR(static_cast<double>(c.val.size()) / static_cast<double>(total), 0.1, 1e-6);
  const double h = data::unigram_entropy_nats(c.train);
  std::printf("fortunes: %zu files, %zu train + %zu val bytes, byte-unigram entropy %.4f nats (all bytes %.4f)\n",
              c.files.size(), c.train.size(), c.val.size(), h,
              data::unigram_entropy_nats([&] {
                auto all = c.train;
                all.insert(all.end(), c.val.begin(), c.val.end());
                return all;
              }()));
  EXPECT_GT(h, 3.0);
  EXPECT_LT(h, 3.6);
}

TEST(TextCorpus, UnigramEntropy) {
  EXPECT_DOUBLE_EQ(data::unigram_entropy_nats(bytes_of("aaaa")), 0.0);
  EXPECT_NEAR(data::unigram_entropy_nats(bytes_of("abab")), std::log(2.0), 1e-12);
}

TEST(TextWindows, TargetsAreTheNextBytes) {
  auto bytes = pattern_bytes();
  TextWindowsOptions o;
  o.batch_size = 4;
  o.context = 16;
  TextWindows w(bytes, o);
  w.set_epoch(3);
  data::Batch b = w.batch(5);
  ASSERT_EQ(b.x.shape(), (Shape{4, 16}));
  ASSERT_EQ(b.y.shape(), (Shape{4, 16}));
  auto x = values(b.x), y = values(b.y);
  for (int64_t i = 0; i < 4; ++i) {
    // Find the window's start from its first bytes, then check both rows against the corpus.
    int64_t start = -1;
    for (size_t s = 0; s + 17 <= bytes.size() && start < 0; ++s)
      if (std::equal(x.begin() + i * 16, x.begin() + i * 16 + 16, bytes.begin() + static_cast<std::ptrdiff_t>(s),
                     [](int64_t a, uint8_t c) { return a == c; }))
        start = static_cast<int64_t>(s);
    ASSERT_GE(start, 0) << "window " << i << " is not a slice of the corpus";
    for (int64_t t = 0; t < 16; ++t) EXPECT_EQ(y[static_cast<size_t>(i * 16 + t)], bytes[static_cast<size_t>(start + t + 1)]);
  }
  EXPECT_EQ(w.num_batches(), 5000 / (4 * 16));
}

TEST(TextWindows, RanksTakeTheirPartOfOneGlobalBatch) {
  auto bytes = pattern_bytes();
  TextWindowsOptions one;
  one.batch_size = 6;
  one.context = 8;
  one.seed = 7;
  TextWindows whole(bytes, one);
  for (int64_t epoch : {0, 2}) {
    whole.set_epoch(epoch);
    for (int64_t b : {0, 3}) {
      std::vector<int64_t> expected = values(whole.batch(b).x), got;
      for (int r = 0; r < 3; ++r) {
        TextWindowsOptions o = one;
        o.batch_size = 2;
        o.world_size = 3;
        o.rank = r;
        TextWindows part(bytes, o);
        part.set_epoch(epoch);
        auto v = values(part.batch(b).x);
        got.insert(got.end(), v.begin(), v.end());
      }
      EXPECT_EQ(got, expected) << "epoch " << epoch << " batch " << b;
    }
  }
  // Another epoch, batch or seed draws other windows.
  whole.set_epoch(0);
  auto e0 = values(whole.batch(0).x);
  EXPECT_NE(values(whole.batch(1).x), e0);
  whole.set_epoch(1);
  EXPECT_NE(values(whole.batch(0).x), e0);
  one.seed = 8;
  TextWindows other(bytes, one);
  other.set_epoch(0);
  EXPECT_NE(values(other.batch(0).x), e0);
}

TEST(EvalWindows, RankSharesCoverEveryWindowOnce) {
  auto bytes = pattern_bytes(1000);
  TextWindowsOptions o;
  o.batch_size = 3;
  o.context = 10;
  data::EvalWindows all(bytes, 0, o);
  EXPECT_EQ(all.total_windows(), 99);  // (1000 - 1) / 10 non-overlapping windows
  std::vector<int64_t> expected;
  for (int64_t b = 0; b < all.num_batches(); ++b) {
    auto v = values(all.batch(b).x);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  std::vector<int64_t> got;
  for (int r = 0; r < 4; ++r) {
    TextWindowsOptions p = o;
    p.world_size = 4;
    p.rank = r;
    data::EvalWindows share(bytes, 0, p);
    for (int64_t b = 0; b < share.num_batches(); ++b) {
      auto v = values(share.batch(b).x);
      got.insert(got.end(), v.begin(), v.end());
    }
  }
  EXPECT_EQ(got, expected);
  data::EvalWindows spaced(bytes, 5, o);
  EXPECT_EQ(spaced.total_windows(), 5);
  EXPECT_THROW(TextWindows(pattern_bytes(8), o), ValueError);  // no window of 11 bytes in 8
}
