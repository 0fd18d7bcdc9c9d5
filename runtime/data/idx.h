// IDX files (the MNIST family's format), plain or gzip-compressed: a big-endian header of a magic
// number and dimension sizes, then the unsigned-byte payload.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

// The magic numbers of unsigned-byte IDX files: 0x0000080N, N the number of dimensions.
constexpr uint32_t kIdxImagesMagic = 2051;  // [n, rows, cols]
constexpr uint32_t kIdxLabelsMagic = 2049;  // [n]

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Reads an unsigned-byte IDX file (gzip or plain, zlib tells them apart) whose magic must be
// `expected_magic`. Throws IOError naming the file and the problem: missing, truncated, corrupt
// gzip, bad magic, trailing bytes.
IdxArray read_idx(const std::string& path, uint32_t expected_magic);

// Writes an unsigned-byte IDX file, gzip-compressed when `gzip` (tests build their fixtures with it).
void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data,
               bool gzip);

}  // namespace tandem::data
