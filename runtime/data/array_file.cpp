// What every array reader shares (the checks of an array and of the rows asked for), NumPy's .npy
// header, the .npy file read in place (memory-mapped), and open_array_file choosing a reader by suffix.
#include "runtime/data/array_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "runtime/data/array_file_readers.h"
#include "runtime/error.h"

namespace tandem::data {

const ArrayInfo& ArrayFile::array(const std::string& name) const {
  for (const ArrayInfo& a : arrays_) {
    if (a.name != name) continue;
    TANDEM_CHECK(a.unsupported.empty(), "{}", a.unsupported);
    return a;
  }
  std::vector<std::string> names;
  for (const ArrayInfo& a : arrays_) names.push_back(a.name);
  TANDEM_FAIL(Value, "{}: no array '{}' (it has: {})", path_, name, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
}

void ArrayFile::add_array(ArrayInfo info) {
  if (info.shape.empty() && info.unsupported.empty())
    info.unsupported = fmt::format("{}: array '{}' is a scalar; samples need a first dimension", path_, info.name);
  arrays_.push_back(std::move(info));
}

void ArrayFile::check_rows(const ArrayInfo& info, const std::vector<int64_t>& rows) const {
  for (int64_t r : rows)
    TANDEM_CHECK(r >= 0 && r < info.rows(), "{}: row {} of array '{}' asked for, which has {} rows", path_, r,
                 info.name, info.rows());
}

std::shared_ptr<ArrayFile> open_array_file(const std::string& path) {
  auto ends_with = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  if (ends_with(".npy")) return open_npy_file(path);
  if (ends_with(".npz")) return open_npz_file(path);
  if (ends_with(".h5") || ends_with(".hdf5")) return open_hdf5_file(path);
  TANDEM_FAIL(Value, "{}: not an array file tandem reads (.npy, .npz, .h5 or .hdf5)", path);
}

// ---- .npy

namespace {

// The dtype of a NumPy descr ('<f4', '|u1', ...): little-endian (or byte-sized) types tandem has.
DType npy_dtype(const std::string& descr, const std::string& source) {
  static const std::pair<const char*, DType> known[] = {
      {"f4", DType::f32}, {"f8", DType::f64}, {"f2", DType::f16}, {"i4", DType::i32},
      {"i8", DType::i64}, {"u1", DType::u8},  {"b1", DType::u8}};  // bool arrays as 0/1 bytes
  if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '='))
    for (const auto& [code, dtype] : known)
      if (descr.compare(1, 2, code) == 0) return dtype;
  TANDEM_FAIL(Value, "{}: array dtype '{}' is not supported (float32, float64, float16, int32, int64, uint8 or "
              "bool, little-endian; convert with .astype)", source, descr);
}

// The text after "'key':" in a header dict, or a failure naming the key.
size_t value_at(const std::string& dict, const char* key, const std::string& source) {
  const std::string quoted = std::string("'") + key + "'";
  size_t at = dict.find(quoted);
  if (at != std::string::npos) at = dict.find(':', at + quoted.size());
  TANDEM_CHECK_KIND(IO, at != std::string::npos, "{}: .npy header without '{}': {}", source, key, dict);
  at = dict.find_first_not_of(' ', at + 1);
  TANDEM_CHECK_KIND(IO, at != std::string::npos, "{}: .npy header ends after '{}'", source, key);
  return at;
}

}  // namespace

size_t NpyHeader::data_bytes() const { return static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype); }

NpyHeader parse_npy_header(const uint8_t* bytes, size_t size, const std::string& source, size_t total) {
  if (total == 0) total = size;
  static const char magic[] = "\x93NUMPY";
  TANDEM_CHECK_KIND(IO, size >= 10 && std::memcmp(bytes, magic, 6) == 0, "{}: not a .npy array (no \\x93NUMPY magic)",
                    source);
  const int major = bytes[6];
  TANDEM_CHECK_KIND(IO, major >= 1 && major <= 3, "{}: .npy format version {} is not one tandem reads (1 to 3)", source,
                    major);
  size_t header_len = 0, start = 10;
  if (major == 1) {
    header_len = bytes[8] | (size_t{bytes[9]} << 8);
  } else {
    TANDEM_CHECK_KIND(IO, size >= 12, "{}: truncated .npy header", source);
    header_len = bytes[8] | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) | (size_t{bytes[11]} << 24);
    start = 12;
  }
  TANDEM_CHECK_KIND(IO, header_len <= size - start, "{}: truncated .npy header ({} bytes claimed, {} there)", source,
                    header_len, size - start);
  const std::string dict(reinterpret_cast<const char*>(bytes) + start, header_len);

  NpyHeader h;
  size_t at = value_at(dict, "descr", source);
  TANDEM_CHECK_KIND(IO, dict[at] == '\'', "{}: .npy descr is not a string (a structured dtype?): {}", source, dict);
  const size_t end = dict.find('\'', at + 1);
  TANDEM_CHECK_KIND(IO, end != std::string::npos, "{}: .npy descr is not closed: {}", source, dict);
  h.dtype = npy_dtype(dict.substr(at + 1, end - at - 1), source);

  at = value_at(dict, "fortran_order", source);
  TANDEM_CHECK(dict.compare(at, 5, "False") == 0, "{}: the array is in Fortran order; save np.ascontiguousarray(a)",
               source);

  at = value_at(dict, "shape", source);
  TANDEM_CHECK_KIND(IO, dict[at] == '(', "{}: .npy shape is not a tuple: {}", source, dict);
  const size_t close = dict.find(')', at);
  TANDEM_CHECK_KIND(IO, close != std::string::npos, "{}: .npy shape is not closed: {}", source, dict);
  const std::string dims = dict.substr(at + 1, close - at - 1);
  uint64_t numel = 1;
  for (size_t p = 0; p < dims.size();) {
    p = dims.find_first_not_of(" ,L", p);
    if (p == std::string::npos) break;
    uint64_t d = 0;
    size_t digits = 0;
    for (; p < dims.size() && dims[p] >= '0' && dims[p] <= '9'; ++p, ++digits) {
      TANDEM_CHECK_KIND(IO, d <= (uint64_t{1} << 50), "{}: .npy dimension too large: {}", source, dict);
      d = d * 10 + static_cast<uint64_t>(dims[p] - '0');
    }
    TANDEM_CHECK_KIND(IO, digits > 0, "{}: .npy shape is not a tuple of sizes: {}", source, dict);
    numel = d == 0 ? 0 : numel;
    TANDEM_CHECK_KIND(IO, numel == 0 || d <= (uint64_t{1} << 50) / numel, "{}: .npy array too large: {}", source, dict);
    numel *= d;
    h.shape.push_back(static_cast<int64_t>(d));
  }
  h.data_offset = start + header_len;
  TANDEM_CHECK_KIND(IO, h.data_bytes() <= total - h.data_offset,
                    "{}: truncated .npy data (shape {} of {} needs {} bytes, {} there)", source, shape_str(h.shape),
                    dtype_name(h.dtype), h.data_bytes(), total - h.data_offset);
  return h;
}

std::string npy_bytes(const Tensor& t) {
  const char* descr = nullptr;
  switch (t.dtype()) {
    case DType::f32: descr = "<f4"; break;
    case DType::f64: descr = "<f8"; break;
    case DType::f16: descr = "<f2"; break;
    case DType::i32: descr = "<i4"; break;
    case DType::i64: descr = "<i8"; break;
    case DType::u8: descr = "|u1"; break;
    default: TANDEM_FAIL(Value, "npy_bytes: NumPy has no {}", dtype_name(t.dtype()));
  }
  std::string dims;
  for (int64_t d : t.shape()) dims += std::to_string(d) + ", ";
  if (t.dim() > 1) dims.resize(dims.size() - 1);  // (3,) for one dimension, (3, 4) for more
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  dict.resize(((10 + dict.size() + 1 + 63) / 64) * 64 - 10, ' ');  // the data aligned to 64 bytes
  dict.back() = '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  const Tensor c = t.to(kCPU);
  out.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  return out;
}

namespace {

// A .npy file mapped read-only: rows are copies out of the mapping.
class NpyFile final : public ArrayFile {
 public:
  explicit NpyFile(const std::string& path) : ArrayFile(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    TANDEM_CHECK_KIND(IO, fd >= 0, "{}: cannot open ({})", path, std::strerror(errno));
    struct stat st {};
    const bool stat_ok = ::fstat(fd, &st) == 0;
    size_ = stat_ok ? static_cast<size_t>(st.st_size) : 0;
    if (size_ > 0) map_ = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    TANDEM_CHECK_KIND(IO, stat_ok && map_ != MAP_FAILED, "{}: cannot map ({})", path, std::strerror(errno));
    TANDEM_CHECK_KIND(IO, map_ != nullptr, "{}: empty file, not a .npy array", path);
    try {
      header_ = parse_npy_header(static_cast<const uint8_t*>(map_), size_, path);
    } catch (...) {
      ::munmap(map_, size_);
      throw;
    }
    std::string name = path.substr(path.find_last_of('/') + 1);  // "x.npy" holds "x"
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    add_array({name, header_.dtype, header_.shape, {}});
  }
  ~NpyFile() override {
    if (map_ != nullptr) ::munmap(map_, size_);
  }
  NpyFile(const NpyFile&) = delete;
  NpyFile& operator=(const NpyFile&) = delete;

  Tensor read_rows(const std::string& name, const std::vector<int64_t>& rows) const override {
    const ArrayInfo& info = array(name);
    check_rows(info, rows);
    const uint8_t* data = static_cast<const uint8_t*>(map_) + header_.data_offset;
    return gather_rows(info, rows, [&](int64_t row, size_t row_bytes, uint8_t* out) {
      std::memcpy(out, data + static_cast<size_t>(row) * row_bytes, row_bytes);
    });
  }

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  NpyHeader header_;
};

}  // namespace

std::shared_ptr<ArrayFile> open_npy_file(const std::string& path) { return std::make_shared<NpyFile>(path); }

}  // namespace tandem::data
