// The IDX reader on tiny files the test writes itself: valid (gzip and plain), missing, truncated,
// bad magic, corrupt gzip, mismatched counts; and the real Fashion-MNIST files when installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/data/default_dirs.h"
#include "runtime/data/dataset.h"
#include "runtime/data/idx.h"
#include "runtime/error.h"
#include "tests/data/temp_dir.h"

using namespace tandem;
using namespace tandem::data;
using tandem::testing::TempDir;

namespace {

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return v;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Expects read_idx to throw IOError whose message names the file and contains `problem`.
void expect_io_error(const std::string& path, uint32_t magic, const std::string& problem) {
  try {
    read_idx(path, magic);
    FAIL() << "no error reading " << path;
  } catch (const IOError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(problem), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Idx, ReadsGzipAndPlainFiles) {
  TempDir dir;
  auto data = pattern(5 * 4 * 3);
  for (bool gz : {true, false}) {
    std::string path = dir.file(gz ? "img.gz" : "img");
    write_idx(path, {5, 4, 3}, data, gz);
    IdxArray a = read_idx(path, kIdxImagesMagic);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{5, 4, 3}));
    EXPECT_EQ(a.data, data);
  }
  write_idx(dir.file("lab.gz"), {7}, pattern(7), true);
  EXPECT_EQ(read_idx(dir.file("lab.gz"), kIdxLabelsMagic).data, pattern(7));
}

TEST(Idx, MissingFileIsNamed) {
  TempDir dir;
  expect_io_error(dir.file("nope-images-idx3-ubyte.gz"), kIdxImagesMagic, "cannot open");
}

TEST(Idx, BadMagicIsNamed) {
  TempDir dir;
  write_idx(dir.file("labels.gz"), {6}, pattern(6), true);
  expect_io_error(dir.file("labels.gz"), kIdxImagesMagic, "bad magic number 2049");
}

TEST(Idx, TruncatedPlainFile) {
  TempDir dir;
  std::string path = dir.file("img");
  write_idx(path, {4, 8, 8}, pattern(256), false);
  std::filesystem::resize_file(path, 16 + 100);  // header intact, 156 data bytes missing
  expect_io_error(path, kIdxImagesMagic, "truncated");
  std::filesystem::resize_file(path, 10);  // inside the header
  expect_io_error(path, kIdxImagesMagic, "truncated");
}

TEST(Idx, TruncatedGzipStream) {
  TempDir dir;
  std::string path = dir.file("img.gz");
  write_idx(path, {4, 8, 8}, pattern(256), true);
  auto bytes = read_all(path);
  bytes.resize(bytes.size() - 12);  // the gzip trailer and some deflate data gone
  write_all(path, bytes);
  expect_io_error(path, kIdxImagesMagic, "truncated");
}

TEST(Idx, HeaderPromisingMoreThanTheFileHolds) {
  TempDir dir;
  std::string path = dir.file("img.gz");
  write_idx(path, {4, 8, 8}, pattern(200), true);  // a complete gzip stream, 56 bytes short
  expect_io_error(path, kIdxImagesMagic, "truncated: the header promises 256 data bytes, the file holds 200");
}

TEST(Idx, CorruptGzipData) {
  TempDir dir;
  std::string path = dir.file("img.gz");
  write_idx(path, {4, 8, 8}, pattern(256), true);
  auto bytes = read_all(path);
  // The CRC-32 in the trailer: the data decompresses fine, then the check fails.
  bytes[bytes.size() - 8] = static_cast<char>(bytes[bytes.size() - 8] ^ 0x5a);
  write_all(path, bytes);
  expect_io_error(path, kIdxImagesMagic, "corrupt gzip data");
  // Garbage inside the deflate stream.
  write_idx(path, {4, 8, 8}, pattern(256), true);
  bytes = read_all(path);
  for (size_t i = 12; i < 40 && i < bytes.size() - 8; ++i) bytes[i] = static_cast<char>(0xff);
  write_all(path, bytes);
  expect_io_error(path, kIdxImagesMagic, "corrupt gzip data");
}

TEST(Idx, ExtraBytesAfterData) {
  TempDir dir;
  std::string path = dir.file("img");
  write_idx(path, {2, 2, 2}, pattern(8), false);
  auto bytes = read_all(path);
  bytes.push_back('x');
  write_all(path, bytes);
  expect_io_error(path, kIdxImagesMagic, "extra bytes");
}

TEST(Dataset, ImageAndLabelCountsMustAgree) {
  TempDir dir;
  write_idx(dir.file("img.gz"), {3, 2, 2}, pattern(12), true);
  write_idx(dir.file("lab.gz"), {4}, {0, 1, 2, 3}, true);
  try {
    load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"));
    FAIL() << "mismatched counts accepted";
  } catch (const IOError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("3 images"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4 labels"), std::string::npos) << msg;
  }
  write_idx(dir.file("lab.gz"), {3}, {0, 1, 10}, true);
  EXPECT_THROW(load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 10), IOError);
  write_idx(dir.file("lab.gz"), {3}, {0, 1, 9}, true);
  Dataset ds = load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 10);
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.pixels(), 4);
  EXPECT_EQ(ds.images.dtype(), DType::u8);
  EXPECT_EQ(ds.labels.to_vector<int>(), (std::vector<int>{0, 1, 9}));
}

TEST(Dataset, FashionMnistWhenInstalled) {
  if (!std::filesystem::exists(std::string(kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Dataset test = load_fashion_mnist(kFashionMnistDir, Split::Test);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(test.height(), 28);
  EXPECT_EQ(test.width(), 28);
  // Every class appears 1000 times in the test split.
  std::vector<int> counts(10);
  for (int l : test.labels.to_vector<int>()) counts[static_cast<size_t>(l)]++;
  EXPECT_EQ(counts, std::vector<int>(10, 1000));
}
