// The readers behind open_array_file (internal): one per file kind, and the copy of a set of rows
// into a tensor that each does with its own way of reading one row.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/array_file.h"

namespace tandem::data {

std::shared_ptr<ArrayFile> open_npy_file(const std::string& path);
std::shared_ptr<ArrayFile> open_npz_file(const std::string& path);
std::shared_ptr<ArrayFile> open_hdf5_file(const std::string& path);

// A tensor of `info`'s dtype and shape [rows.size(), shape[1:]...]: read_row(row, row_bytes, out)
// fills each row's bytes in turn.
template <class ReadRow>
Tensor gather_rows(const ArrayInfo& info, const std::vector<int64_t>& rows, ReadRow read_row) {
  Shape shape = info.shape;
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty(shape, info.dtype);
  const size_t row_bytes = static_cast<size_t>(shape_numel(Shape(shape.begin() + 1, shape.end()))) * dtype_size(info.dtype);
  auto* p = static_cast<uint8_t*>(out.data_ptr());
  for (size_t i = 0; i < rows.size(); ++i) read_row(rows[i], row_bytes, p + i * row_bytes);
  return out;
}

}  // namespace tandem::data
