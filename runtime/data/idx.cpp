// IDX reader and writer through zlib's gz* interface (which reads plain files transparently).
#include "runtime/data/idx.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <zlib.h>

#include "runtime/error.h"

namespace tandem::data {

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

uint32_t read_be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

// Reads up to n bytes; returns how many arrived. A zlib data error (bad deflate stream, CRC or
// length mismatch) is corruption; an early end of the compressed stream is truncation.
size_t read_bytes(gzFile f, const std::string& path, uint8_t* dst, size_t n, const char* what) {
  size_t got = 0;
  while (got < n) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
    int r = gzread(f, dst + got, chunk);
    if (r < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      if (errnum == Z_BUF_ERROR)
        TANDEM_FAIL(IO, "{}: truncated gzip stream while reading the {} ({})", path, what, msg);
      if (errnum == Z_ERRNO) TANDEM_FAIL(IO, "{}: read failed ({})", path, std::strerror(errno));
      TANDEM_FAIL(IO, "{}: corrupt gzip data while reading the {} ({}); re-download or reinstall the file",
                  path, what, msg);
    }
    if (r == 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      if (errnum == Z_BUF_ERROR)
        TANDEM_FAIL(IO, "{}: truncated gzip stream while reading the {} ({})", path, what, msg);
      if (errnum != Z_OK && errnum != Z_STREAM_END)
        TANDEM_FAIL(IO, "{}: corrupt gzip data while reading the {} ({})", path, what, msg);
      break;
    }
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

IdxArray read_idx(const std::string& path, uint32_t expected_magic) {
  std::FILE* probe = std::fopen(path.c_str(), "rb");
  if (!probe)
    TANDEM_FAIL(IO, "{}: cannot open ({}); is the dataset installed (Debian package dataset-fashion-mnist) "
                "or --data-dir pointing at it?", path, std::strerror(errno));
  std::fclose(probe);
  GzHandle f(gzopen(path.c_str(), "rb"));
  if (!f) TANDEM_FAIL(IO, "{}: gzopen failed ({})", path, std::strerror(errno));
  gzbuffer(f.get(), 1 << 17);

  uint8_t head[4];
  if (read_bytes(f.get(), path, head, 4, "magic number") < 4)
    TANDEM_FAIL(IO, "{}: truncated: the file ends before its 4-byte magic number", path);
  uint32_t magic = read_be32(head);
  if (magic != expected_magic)
    TANDEM_FAIL(IO, "{}: bad magic number {} (expected {}: an unsigned-byte IDX file with {} dimensions)", path,
                magic, expected_magic, expected_magic & 0xff);
  size_t rank = expected_magic & 0xff;

  std::vector<uint8_t> dim_bytes(4 * rank);
  if (read_bytes(f.get(), path, dim_bytes.data(), dim_bytes.size(), "header") < dim_bytes.size())
    TANDEM_FAIL(IO, "{}: truncated: the file ends inside its header ({} dimension sizes expected)", path, rank);
  IdxArray out;
  int64_t total = 1;
  for (size_t d = 0; d < rank; ++d) {
    int64_t n = read_be32(&dim_bytes[4 * d]);
    // Guards against an absurd header asking for gigabytes before any data is read. The product is
    // bounded by division: total (up to 2^32) times n (up to 2^31) overflows int64_t (fuzz_idx).
    constexpr int64_t kMaxTotal = int64_t(1) << 32;
    if (n <= 0 || n > (int64_t(1) << 31) || n > kMaxTotal / total)
      TANDEM_FAIL(IO, "{}: corrupt header: dimension {} has size {}", path, d, n);
    out.dims.push_back(n);
    total *= n;
  }

  // Grown as the data arrives (1 MiB at a time), so a header that promises gigabytes costs only
  // what the file holds (fuzz_idx: a 16-byte file had it allocate and zero 4 GiB).
  size_t got = 0;
  while (got < static_cast<size_t>(total)) {
    size_t chunk = std::min<size_t>(static_cast<size_t>(total) - got, size_t(1) << 20);
    out.data.resize(got + chunk);
    size_t r = read_bytes(f.get(), path, out.data.data() + got, chunk, "data");
    got += r;
    if (r < chunk) break;
  }
  if (got < static_cast<size_t>(total))
    TANDEM_FAIL(IO, "{}: truncated: the header promises {} data bytes, the file holds {}", path, total, got);
  // Reading on to the end makes zlib verify the gzip trailer (CRC and length) too.
  uint8_t extra[64];
  size_t tail = read_bytes(f.get(), path, extra, sizeof(extra), "end of the file");
  if (tail > 0) TANDEM_FAIL(IO, "{}: corrupt: extra bytes after the {} data bytes the header promises", path, total);
  return out;
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data,
               bool gzip) {
  std::vector<uint8_t> bytes;
  auto put32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(v >> s));
  };
  put32(0x800u | static_cast<uint32_t>(dims.size()));
  for (int64_t d : dims) put32(static_cast<uint32_t>(d));
  bytes.insert(bytes.end(), data.begin(), data.end());
  if (gzip) {
    GzHandle f(gzopen(path.c_str(), "wb"));
    if (!f) TANDEM_FAIL(IO, "{}: cannot create ({})", path, std::strerror(errno));
    if (gzwrite(f.get(), bytes.data(), static_cast<unsigned>(bytes.size())) != static_cast<int>(bytes.size()))
      TANDEM_FAIL(IO, "{}: gzwrite failed", path);
    return;
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) TANDEM_FAIL(IO, "{}: cannot create ({})", path, std::strerror(errno));
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    TANDEM_FAIL(IO, "{}: write failed", path);
}

}  // namespace tandem::data
