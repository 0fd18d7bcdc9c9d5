// The user's own arrays: named arrays of a NumPy file (.npy: one array, .npz: several) or an HDF5
// file (.h5, .hdf5: its datasets, by path), read by rows of their first dimension (the samples)
// without loading a file whole: .npy files and the stored (np.savez) members of an .npz are read
// in place (memory-mapped, or seek and read), HDF5 datasets by hyperslabs. A compressed
// (np.savez_compressed) member is inflated into memory on first use: save large data uncompressed.
// A hostile file is an error naming the file (and the array), never a crash (fuzzed).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace tandem::data {

struct ArrayInfo {
  std::string name;  // the .npz member without ".npy", the HDF5 dataset's path without the leading '/'
  DType dtype = DType::f32;
  Shape shape;  // shape[0]: the samples
  std::string unsupported;  // why tandem cannot read it (a dtype it lacks): an error when it is used
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
};

class ArrayFile {
 public:
  virtual ~ArrayFile() = default;
  const std::string& path() const { return path_; }
  const std::vector<ArrayInfo>& arrays() const { return arrays_; }
  // The array called `name`; ValueError naming the file and the arrays it has when there is none,
  // or saying why it cannot be read (the file's other arrays can).
  const ArrayInfo& array(const std::string& name) const;
  // Rows `rows` of array `name` (each in [0, rows())), in that order: a CPU tensor of the array's
  // dtype and shape [rows.size(), shape[1:]...]. Safe to call from several threads.
  virtual Tensor read_rows(const std::string& name, const std::vector<int64_t>& rows) const = 0;

 protected:
  explicit ArrayFile(std::string path) : path_(std::move(path)) {}
  // The checks every reader shares: a supported dtype and rank >= 1 (or a ValueError naming it).
  void add_array(ArrayInfo info);
  // rows of `info` in range, or a ValueError naming it.
  void check_rows(const ArrayInfo& info, const std::vector<int64_t>& rows) const;

 private:
  std::string path_;
  std::vector<ArrayInfo> arrays_;
};

// By the file's suffix: .npy, .npz, .h5 or .hdf5 (ValueError for another; IOError for a file that
// cannot be read or is not what its suffix says; ValueError for an array of a dtype tandem lacks).
std::shared_ptr<ArrayFile> open_array_file(const std::string& path);

// NumPy's .npy header ("\x93NUMPY", version, {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...)}):
// the array's dtype and shape and where its data starts. `bytes` are the first `size` bytes of the
// file (or .npz member) of `total` bytes (0: size). `source` names it in errors: IOError for a
// header that is not one or data that `total` cannot hold, ValueError for a big-endian or
// Fortran-ordered array or a dtype tandem has no type for.
struct NpyHeader {
  DType dtype = DType::f32;
  Shape shape;
  size_t data_offset = 0;
  size_t data_bytes() const;
};
NpyHeader parse_npy_header(const uint8_t* bytes, size_t size, const std::string& source, size_t total = 0);

// The bytes of a .npy file holding `t` (a CPU tensor): for tests and tools that write arrays.
std::string npy_bytes(const Tensor& t);

}  // namespace tandem::data
