// The array readers (runtime/data/array_file.h) on files NumPy and h5py wrote
// (tests/reference/make_array_files.py): names, dtypes, shapes and the rows asked for, in their
// order, from .npy, stored and compressed .npz and HDF5 (big-endian and gzip-chunked datasets
// included); npy_bytes read back; and the errors for files and arrays tandem does not take.
#include <fstream>

#include <gtest/gtest.h>

#include "runtime/data/array_file.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "tests/data/temp_dir.h"

namespace tandem::data {
namespace {

std::string arrays_dir() { return std::string(TANDEM_TEST_DATA_DIR) + "/arrays/"; }

// x[r, j] = (3 r + j) / 4 and y[r] = r % 3 in every file the script wrote.
double x_value(int64_t r, int64_t j) { return static_cast<double>(3 * r + j) / 4.0; }

void expect_x_rows(const ArrayFile& f, const std::string& name, const std::vector<int64_t>& rows) {
  Tensor t = f.read_rows(name, rows);
  ASSERT_EQ(t.shape(), (Shape{static_cast<int64_t>(rows.size()), 3}));
  Tensor d = ops::cast(t, DType::f64);
  const std::vector<double> v = d.to_vector<double>();
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(v[i * 3 + static_cast<size_t>(j)], x_value(rows[i], j)) << name << " row " << rows[i];
}

template <class Fn>
void expect_error_with(Fn fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

TEST(ArrayFile, NpzStoredAndCompressed) {
  for (const char* file : {"xy.npz", "xy_compressed.npz"}) {
    SCOPED_TRACE(file);
    auto f = open_array_file(arrays_dir() + file);
    ASSERT_EQ(f->arrays().size(), 5u);
    EXPECT_EQ(f->array("x").dtype, DType::f32);
    EXPECT_EQ(f->array("x").shape, (Shape{10, 3}));
    EXPECT_EQ(f->array("y").dtype, DType::i64);
    EXPECT_EQ(f->array("ids").dtype, DType::i32);
    EXPECT_EQ(f->array("flag").dtype, DType::u8);  // bool as 0/1 bytes
    EXPECT_EQ(f->array("img").shape, (Shape{10, 1, 2, 2}));
    expect_x_rows(*f, "x", {7, 0, 9, 7, 3});  // any order, repeats allowed
    EXPECT_EQ(f->read_rows("y", {4, 5, 9}).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0}));
    EXPECT_EQ(f->read_rows("ids", {1}).to_vector<int32_t>(), (std::vector<int32_t>{14, 21}));
    EXPECT_EQ(f->read_rows("flag", {0, 1, 2}).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
    EXPECT_EQ(f->read_rows("img", {2}).to_vector<uint8_t>(), (std::vector<uint8_t>{8, 9, 10, 11}));
    EXPECT_EQ(f->read_rows("x", {}).shape(), (Shape{0, 3}));
  }
}

TEST(ArrayFile, Npy) {
  auto f = open_array_file(arrays_dir() + "x.npy");
  ASSERT_EQ(f->arrays().size(), 1u);
  EXPECT_EQ(f->arrays()[0].name, "x");  // the file's stem
  EXPECT_EQ(f->array("x").dtype, DType::f64);
  expect_x_rows(*f, "x", {9, 1, 1});
}

TEST(ArrayFile, Hdf5) {
  auto f = open_array_file(arrays_dir() + "xy.h5");
  ASSERT_EQ(f->arrays().size(), 4u);
  EXPECT_EQ(f->array("grp/z").dtype, DType::f64);  // a dataset in a group, by its path
  expect_x_rows(*f, "x", {9, 2, 3, 4, 0, 3});
  expect_x_rows(*f, "x", {1, 2, 5});  // ascending: the read itself is the result
  EXPECT_EQ(f->read_rows("y", {8, 2}).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  // big-endian in the file, converted by HDF5; z[r, j] = 2 r + j - 5
  EXPECT_EQ(f->read_rows("grp/z", {6, 0}).to_vector<double>(), (std::vector<double>{7, 8, -5, -4}));
  // chunked and gzip-compressed
  EXPECT_EQ(f->read_rows("img", {9, 2}).to_vector<uint8_t>(), (std::vector<uint8_t>{36, 37, 38, 39, 8, 9, 10, 11}));
}

TEST(ArrayFile, NpyBytesReadBack) {
  testing::TempDir dir;
  const Tensor t = Tensor::from_vector<float>({1.5f, -2, 3, 4, 5, 6}, {3, 2});
  {
    std::ofstream out(dir.file("t.npy"), std::ios::binary);
    const std::string bytes = npy_bytes(t);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto f = open_array_file(dir.file("t.npy"));
  EXPECT_EQ(f->array("t").shape, (Shape{3, 2}));
  EXPECT_EQ(f->read_rows("t", {2, 0}).to_vector<float>(), (std::vector<float>{5, 6, 1.5f, -2}));
  const std::string one = npy_bytes(Tensor::from_vector<int64_t>({1, 2, 3}, {3}));
  const NpyHeader h = parse_npy_header(reinterpret_cast<const uint8_t*>(one.data()), one.size(), "one");
  EXPECT_EQ(h.shape, (Shape{3}));
  EXPECT_EQ(h.data_offset % 64, 0u);  // aligned, as NumPy writes it
}

TEST(ArrayFile, Errors) {
  const std::string d = arrays_dir();
  expect_error_with([&] { open_array_file(d + "fortran.npy"); }, {"fortran.npy", "Fortran order", "ascontiguousarray"});
  expect_error_with([&] { open_array_file(d + "bigendian.npy"); }, {"bigendian.npy", "'>f4'", "not supported"});
  expect_error_with([&] { open_array_file(d + "uint16.npy"); }, {"uint16.npy", "'<u2'"});
  expect_error_with([&] { open_array_file(d + "structured.npy"); }, {"structured.npy", "structured"});
  expect_error_with([&] { open_array_file(d + "truncated.npy"); }, {"truncated.npy", "truncated", "240 bytes"});
  // An array tandem cannot read is an error when used; the file's others still read.
  auto strings = open_array_file(d + "strings.h5");
  expect_error_with([&] { strings->array("names"); }, {"strings.h5:names", "not supported"});
  expect_x_rows(*strings, "x", {1});
  expect_error_with([&] { open_array_file(d + "missing.npz"); }, {"missing.npz", "cannot read"});
  expect_error_with([&] { open_array_file(d + "x.npy.gz"); }, {"x.npy.gz", ".npy, .npz, .h5 or .hdf5"});
  expect_error_with([&] { open_array_file(d + "structured.npy.h5"); }, {"structured.npy.h5", "HDF5"});
  // not what the suffix says
  testing::TempDir dir;
  std::ofstream(dir.file("bad.npz")) << "not a zip file";
  std::ofstream(dir.file("bad.h5")) << "not an HDF5 file";
  std::ofstream(dir.file("bad.npy")) << "not an npy file";
  expect_error_with([&] { open_array_file(dir.file("bad.npz")); }, {"bad.npz", "zip"});
  expect_error_with([&] { open_array_file(dir.file("bad.h5")); }, {"bad.h5", "HDF5"});
  expect_error_with([&] { open_array_file(dir.file("bad.npy")); }, {"bad.npy", "NUMPY"});
  auto f = open_array_file(d + "xy.npz");
  expect_error_with([&] { f->array("labels"); }, {"xy.npz", "no array 'labels'", "x, y, ids, flag, img"});
  expect_error_with([&] { f->read_rows("x", {10}); }, {"row 10", "'x'", "10 rows"});
  expect_error_with([&] { f->read_rows("x", {-1}); }, {"row -1"});
}

}  // namespace
}  // namespace tandem::data
