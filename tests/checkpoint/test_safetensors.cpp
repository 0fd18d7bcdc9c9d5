// safetensors: the bytes we write (checked by hand against the format), round trips of every dtype,
// and the reader's refusal of truncated and corrupt files.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/serialization/atomic_file.h"
#include "runtime/serialization/safetensors.h"
#include "tests/checkpoint/temp_dir.h"

using namespace tandem;
using namespace tandem::serialization;
using nlohmann::json;

namespace {
uint64_t le64(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

std::string with_header(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}

// Expects IOError whose message contains every fragment.
template <class F>
void expect_io_error(F&& f, std::initializer_list<const char*> fragments) {
  try {
    f();
    ADD_FAILURE() << "no IOError";
  } catch (const IOError& e) {
    for (const char* frag : fragments) EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
        << "message lacks \"" << frag << "\": " << e.what();
  }
}
}  // namespace

TEST(Safetensors, BytesFollowTheFormat) {
  Tensor a = Tensor::from_vector<float>({1.0f, -2.0f, 0.5f}, {3});
  Tensor b = Tensor::from_vector<int64_t>({7, -1}, {1, 2});
  Tensor c = Tensor::from_vector<float>({1.0f, 3.0f}, {2}, DType::bf16);
  std::string bytes = safetensors_bytes({{"a", a}, {"b.weight", b}, {"c", c}}, {{"format", "pt"}});

  uint64_t n = le64(bytes, 0);
  ASSERT_EQ(n % 8, 0u) << "the header is padded so the data starts 8-byte aligned";
  ASSERT_EQ(bytes.size(), 8 + n + 12 + 16 + 4);
  json h = json::parse(bytes.substr(8, n));
  EXPECT_EQ(h["a"]["dtype"], "F32");
  EXPECT_EQ(h["a"]["shape"], json::array({3}));
  EXPECT_EQ(h["a"]["data_offsets"], json::array({0, 12}));
  EXPECT_EQ(h["b.weight"]["dtype"], "I64");
  EXPECT_EQ(h["b.weight"]["shape"], json::array({1, 2}));
  EXPECT_EQ(h["b.weight"]["data_offsets"], json::array({12, 28}));
  EXPECT_EQ(h["c"]["dtype"], "BF16");
  EXPECT_EQ(h["c"]["data_offsets"], json::array({28, 32}));
  EXPECT_EQ(h["__metadata__"]["format"], "pt");

  const unsigned char* d = reinterpret_cast<const unsigned char*>(bytes.data()) + 8 + n;
  // 1.0f = 0x3f800000 little-endian; -2.0f = 0xc0000000; 0.5f = 0x3f000000
  const unsigned char f32[] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x00, 0x3f};
  EXPECT_EQ(std::memcmp(d, f32, 12), 0);
  // 7 and -1 as little-endian int64
  const unsigned char i64[] = {7, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(std::memcmp(d + 12, i64, 16), 0);
  // bf16 1.0 = 0x3f80, 3.0 = 0x4040
  const unsigned char bf16[] = {0x80, 0x3f, 0x40, 0x40};
  EXPECT_EQ(std::memcmp(d + 28, bf16, 4), 0);
}

TEST(Safetensors, RoundTripEveryDtype) {
  TempDir dir;
  NamedTensors in;
  std::vector<double> v = {0.0, 1.5, -3.25, 65504.0, 1e-3, 42.0};
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::u8})
    in.emplace_back(std::string("t_") + dtype_name(t), Tensor::from_vector(v, {2, 3}, t));
  in.emplace_back("scalar", Tensor::scalar(2.5));
  in.emplace_back("empty", Tensor::zeros({0, 4}));
  std::string path = dir.path + "/m.safetensors";
  save_safetensors(path, in, {{"step", "17"}});
  SafetensorsContents out = load_safetensors(path);
  EXPECT_EQ(out.metadata.at("step"), "17");
  ASSERT_EQ(out.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    const Tensor* got = out.find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->dtype(), t.dtype()) << name;
    EXPECT_EQ(got->shape(), t.shape()) << name;
    ASSERT_EQ(got->nbytes(), t.nbytes());
    EXPECT_EQ(std::memcmp(got->data_ptr(), t.data_ptr(), t.nbytes()), 0) << name;
  }
}

TEST(Safetensors, RefusesTruncatedFiles) {
  std::string good = safetensors_bytes({{"w", Tensor::ones({4, 4})}});
  expect_io_error([&] { parse_safetensors(good.substr(0, 5), "f.st"); }, {"f.st", "shorter than"});
  expect_io_error([&] { parse_safetensors(good.substr(0, 20), "f.st"); }, {"f.st", "runs past the end"});
  expect_io_error([&] { parse_safetensors(good.substr(0, good.size() - 1), "f.st"); },
                  {"f.st", "\"w\"", "outside"});
  TempDir dir;
  write_file_atomic(dir.path + "/t.safetensors", good.substr(0, good.size() - 10));
  expect_io_error([&] { load_safetensors(dir.path + "/t.safetensors"); }, {"t.safetensors", "\"w\""});
}

TEST(Safetensors, RefusesCorruptHeaders) {
  std::string data(16, '\0');
  expect_io_error([&] { parse_safetensors(with_header("not json", data), "x"); }, {"x", "'{'"});
  expect_io_error([&] { parse_safetensors(with_header("{\"a\": ", data), "x"); }, {"x", "not a JSON object"});
  expect_io_error([&] { parse_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[4]}})", data), "x"); },
                  {"\"a\"", "data_offsets"});
  expect_io_error(
      [&] { parse_safetensors(with_header(R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}})", data), "x"); },
      {"\"a\"", "Q4"});
  // dtype x shape disagrees with the byte count
  expect_io_error(
      [&] { parse_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", data), "x"); },
      {"\"a\"", "needs 12 bytes"});
  expect_io_error(
      [&] { parse_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", data), "x"); },
      {"\"a\"", "negative"});
  // out of range
  expect_io_error(
      [&] { parse_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", data), "x"); },
      {"\"a\"", "outside"});
  // overlap
  expect_io_error(
      [&] {
        parse_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},
                                          "b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data), "x");
      },
      {"\"b\"", "overlaps"});
  // hole
  expect_io_error(
      [&] {
        parse_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                                          "b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", data), "x");
      },
      {"hole", "\"b\""});
  // trailing bytes nobody owns
  expect_io_error(
      [&] { parse_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data), "x"); },
      {"cover 8 bytes", "16"});
  EXPECT_THROW(load_safetensors("/nonexistent/file.safetensors"), IOError);
}

TEST(Safetensors, WriterRejectsBadNames) {
  EXPECT_THROW(safetensors_bytes({{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}}), ValueError);
  EXPECT_THROW(safetensors_bytes({{"", Tensor::ones({1})}}), ValueError);
}
