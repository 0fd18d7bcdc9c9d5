// HDF5 files through libhdf5 (serial): every dataset of the file, found by a walk of its links, is an
// array named by its path; rows are read as one hyperslab selection per batch, converted by HDF5 to
// the host's byte order. The library is not built thread-safe: one lock serialises every call.
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "runtime/data/array_file_readers.h"
#include "runtime/error.h"

namespace tandem::data {
namespace {

std::mutex& hdf5_lock() {
  static std::mutex m;
  return m;
}

// An hid_t closed by its own close function when it leaves scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// The tandem dtype of a dataset's HDF5 type, or a ValueError.
DType hdf5_dtype(hid_t type, const std::string& source) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (cls == H5T_FLOAT && size == 4) return DType::f32;
  if (cls == H5T_FLOAT && size == 8) return DType::f64;
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    if (is_signed && size == 4) return DType::i32;
    if (is_signed && size == 8) return DType::i64;
    if (!is_signed && size == 1) return DType::u8;
  }
  TANDEM_FAIL(Value, "{}: the dataset's type (HDF5 class {}, {} bytes) is not supported (float32, float64, int32, "
              "int64 or uint8)", source, static_cast<int>(cls), size);
}

// The in-memory type HDF5 converts a dataset of `dtype` to (from any byte order).
hid_t native_type(DType dtype) {
  switch (dtype) {
    case DType::f64: return H5T_NATIVE_DOUBLE;
    case DType::i32: return H5T_NATIVE_INT32;
    case DType::i64: return H5T_NATIVE_INT64;
    case DType::u8: return H5T_NATIVE_UINT8;
    default: return H5T_NATIVE_FLOAT;
  }
}

class Hdf5File final : public ArrayFile {
 public:
  explicit Hdf5File(const std::string& path) : ArrayFile(path) {
    std::lock_guard<std::mutex> lock(hdf5_lock());
    H5E_BEGIN_TRY { file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
    TANDEM_CHECK_KIND(IO, file_ >= 0, "{}: cannot read as an HDF5 file (missing, unreadable or corrupt)", path);
    try {
      std::vector<std::string> names;
      herr_t walked = -1;
      H5E_BEGIN_TRY { walked = H5Lvisit(file_, H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &names); }
      H5E_END_TRY;
      TANDEM_CHECK_KIND(IO, walked >= 0, "{}: cannot list the file's datasets (corrupt?)", path);
      for (const std::string& name : names) add_dataset(name);
    } catch (...) {
      H5Fclose(file_);
      throw;
    }
  }
  ~Hdf5File() override {
    std::lock_guard<std::mutex> lock(hdf5_lock());
    H5Fclose(file_);
  }
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  Tensor read_rows(const std::string& name, const std::vector<int64_t>& rows) const override {
    const ArrayInfo& info = array(name);
    check_rows(info, rows);
    // HDF5 reads a selection in the file's order: the distinct rows ascending, placed after.
    std::vector<int64_t> sorted = rows;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    Tensor block = read_sorted(info, sorted);
    if (sorted == rows) return block;  // already in order (evaluation's contiguous shares)
    const auto* src = static_cast<const uint8_t*>(block.data_ptr());
    return gather_rows(info, rows, [&](int64_t row, size_t row_bytes, uint8_t* out) {
      const size_t at = static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), row) - sorted.begin());
      std::memcpy(out, src + at * row_bytes, row_bytes);
    });
  }

 private:
  static herr_t collect_dataset(hid_t group, const char* name, const H5L_info_t* info, void* out) {
    if (info->type != H5L_TYPE_HARD) return 0;  // soft and external links: their targets are listed themselves
    // A dataset is what opens as one (the object-info calls differ between HDF5 1.10 and 1.12).
    Handle set(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
    if (set.ok()) static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  }

  void add_dataset(const std::string& name) {
    const std::string source = path() + ":" + name;
    Handle set(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
    TANDEM_CHECK_KIND(IO, set.ok(), "{}: cannot open the dataset", source);
    Handle type(H5Dget_type(set.get()), H5Tclose);
    Handle space(H5Dget_space(set.get()), H5Sclose);
    TANDEM_CHECK_KIND(IO, type.ok() && space.ok(), "{}: cannot read the dataset's type and shape", source);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    TANDEM_CHECK_KIND(IO, rank >= 0 && rank <= H5S_MAX_RANK, "{}: cannot read the dataset's shape", source);
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    TANDEM_CHECK_KIND(IO, H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) == rank,
                      "{}: cannot read the dataset's shape", source);
    ArrayInfo info;
    info.name = name;
    for (hsize_t d : dims) info.shape.push_back(static_cast<int64_t>(d));
    try {
      info.dtype = hdf5_dtype(type.get(), source);
    } catch (const ValueError& e) {  // strings, compounds...: the other datasets still can be read
      info.unsupported = e.what();
    }
    add_array(std::move(info));
  }

  // Rows `sorted` (ascending, distinct) of `info` in that order, in one read.
  Tensor read_sorted(const ArrayInfo& info, const std::vector<int64_t>& sorted) const {
    Shape shape = info.shape;
    shape[0] = static_cast<int64_t>(sorted.size());
    Tensor block = Tensor::empty(shape, info.dtype);
    if (block.numel() == 0) return block;
    const std::string source = path() + ":" + info.name;
    std::lock_guard<std::mutex> lock(hdf5_lock());
    const hid_t memory_type = native_type(info.dtype);
    herr_t status = -1;
    H5E_BEGIN_TRY {
      Handle set(H5Dopen2(file_, info.name.c_str(), H5P_DEFAULT), H5Dclose);
      Handle file_space(set.ok() ? H5Dget_space(set.get()) : -1, H5Sclose);
      if (file_space.ok()) {
        // One hyperslab per run of consecutive rows, or-ed together.
        std::vector<hsize_t> start(info.shape.size(), 0), count(info.shape.begin(), info.shape.end());
        status = H5Sselect_none(file_space.get());
        for (size_t i = 0; i < sorted.size() && status >= 0;) {
          size_t j = i + 1;
          while (j < sorted.size() && sorted[j] == sorted[j - 1] + 1) ++j;
          start[0] = static_cast<hsize_t>(sorted[i]);
          count[0] = static_cast<hsize_t>(j - i);
          status = H5Sselect_hyperslab(file_space.get(), H5S_SELECT_OR, start.data(), nullptr, count.data(), nullptr);
          i = j;
        }
        std::vector<hsize_t> mem_dims(shape.begin(), shape.end());
        Handle mem_space(H5Screate_simple(static_cast<int>(mem_dims.size()), mem_dims.data(), nullptr), H5Sclose);
        if (status >= 0 && mem_space.ok())
          status = H5Dread(set.get(), memory_type, mem_space.get(), file_space.get(), H5P_DEFAULT, block.data_ptr());
        else
          status = -1;
      }
    }
    H5E_END_TRY;
    TANDEM_CHECK_KIND(IO, status >= 0, "{}: reading {} rows failed (a corrupt or truncated file?)", source,
                      sorted.size());
    return block;
  }

  hid_t file_ = -1;
};

}  // namespace

std::shared_ptr<ArrayFile> open_hdf5_file(const std::string& path) { return std::make_shared<Hdf5File>(path); }

}  // namespace tandem::data
