// The C API on one process: every misuse returns its code with a message that says what is wrong;
// training lowers the loss; a checkpoint saved and loaded through the API continues bitwise; the
// header compiles as C.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "embed/c/backend_result.h"
#include "runtime/error.h"
#include "runtime/env_settings.h"
#include "runtime/serialization/safetensors.h"
#include "tandem/tandem_c.h"
#include "tests/capi/capi_test_util.h"

extern "C" int capi_c_smoke(const char* config_file);

namespace tandem::capi_test {
namespace {

const int64_t kX[2] = {8, 4}, kY[2] = {8, 3};

tandem_model_t make(const std::string& config) {
  tandem_model_t m = nullptr;
  EXPECT_EQ(tandem_model_create(&m, config.c_str(), "cpu"), TANDEM_SUCCESS) << tandem_last_error();
  return m;
}

// The model's output on a fixed probe batch.
std::vector<float> probe(tandem_model_t m) {
  std::vector<float> x, y, out(8 * 3);
  batch(999, 0, 8, x, y);
  EXPECT_EQ(tandem_inference(m, x.data(), TANDEM_FLOAT32, 2, kX, out.data(), TANDEM_FLOAT32, 2, kY), TANDEM_SUCCESS)
      << tandem_last_error();
  return out;
}

float train_step(tandem_model_t m, int64_t step) {
  std::vector<float> x, y;
  batch(step, 0, 8, x, y);
  float loss = -1;
  EXPECT_EQ(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, kX, y.data(), TANDEM_FLOAT32, 2, kY, &loss), TANDEM_SUCCESS)
      << tandem_last_error();
  return loss;
}

::testing::AssertionResult fails_with(tandem_result_t got, tandem_result_t want, const std::vector<std::string>& needles) {
  if (got != want) return ::testing::AssertionFailure() << "code " << got << ", want " << want << ": " << tandem_last_error();
  const std::string msg = tandem_last_error();
  for (const auto& n : needles)
    if (msg.find(n) == std::string::npos) return ::testing::AssertionFailure() << "'" << n << "' not in: " << msg;
  return ::testing::AssertionSuccess();
}

TEST(CApi, LastErrorIsEmptyNotNullBeforeAnyError) {
  std::string seen = "unset";
  std::thread([&] { seen = tandem_last_error() ? tandem_last_error() : "NULL"; }).join();
  EXPECT_EQ(seen, "");
  EXPECT_STREQ(tandem_version(), TANDEM_VERSION);
}

// A failed library call is coded by its library, wherever it failed: the NCCL communicator's CUDA
// calls are CUDA errors, not NCCL ones.
TEST(CApi, BackendErrorsAreCodedByTheFailedCall) {
  auto code_of = [](const char* call, const char* file) {
    try {
      tandem::throw_call_error(call, file, 7, "why");
    } catch (const tandem::BackendError& e) {
      return tandem::embed::backend_result(e.what());
    }
    return TANDEM_SUCCESS;
  };
  EXPECT_EQ(code_of("cudaStreamWaitEvent(s, e, 0)", "/src/comm/nccl/nccl_comm.cpp"), TANDEM_CUDA_ERROR);
  EXPECT_EQ(code_of("ncclAllReduce(b, b, n, t, o, c, s)", "/src/comm/nccl/nccl_comm.cpp"), TANDEM_NCCL_ERROR);
  EXPECT_EQ(code_of("MPI_Allreduce(a, b, n, t, o, c)", "/src/comm/mpi/mpi_transport.cpp"), TANDEM_MPI_ERROR);
  EXPECT_EQ(code_of("cudnnConvolutionForward(h, ...)", "/src/kernels/cuda/conv_cudnn.cpp"), TANDEM_CUDA_ERROR);
}

// A bad TANDEM_CPU_ISA is the creating call's error, before any kernel could meet it.
TEST(CApi, BadCpuIsaIsInvalidUsage) {
  TempDir dir;
  const std::string cfg = dir.write("run.yaml", mlp_config());
  tandem_result_t got;
  tandem_model_t m = nullptr;
  {
    tandem::env::ScopedValue isa("TANDEM_CPU_ISA", "avx3");
    got = tandem_model_create(&m, cfg.c_str(), "cpu");
  }
  EXPECT_TRUE(fails_with(got, TANDEM_INVALID_USAGE, {"tandem_model_create", "TANDEM_CPU_ISA=avx3", "avx2"}));
  EXPECT_EQ(m, nullptr);
}

TEST(CApi, NullArgumentsAreInvalidUsage) {
  TempDir dir;
  const std::string cfg = dir.write("run.yaml", mlp_config());
  std::vector<float> x(32), y(24);
  float loss;
  EXPECT_TRUE(fails_with(tandem_train(nullptr, x.data(), TANDEM_FLOAT32, 2, kX, y.data(), TANDEM_FLOAT32, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"tandem_train", "NULL", "tandem_model_create"}));
  EXPECT_TRUE(fails_with(tandem_model_create(nullptr, cfg.c_str(), "cpu"), TANDEM_INVALID_USAGE, {"NULL"}));
  tandem_model_t m = reinterpret_cast<tandem_model_t>(0x1);
  EXPECT_TRUE(fails_with(tandem_model_create(&m, nullptr, "cpu"), TANDEM_INVALID_USAGE, {"config_file is NULL"}));
  EXPECT_EQ(m, nullptr);  // cleared on failure
  EXPECT_EQ(tandem_model_destroy(nullptr), TANDEM_SUCCESS);
  m = make(cfg);
  EXPECT_TRUE(fails_with(tandem_train(m, nullptr, TANDEM_FLOAT32, 2, kX, y.data(), TANDEM_FLOAT32, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"input is NULL"}));
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, nullptr, y.data(), TANDEM_FLOAT32, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"input", "shape is NULL"}));
  EXPECT_TRUE(fails_with(tandem_save_checkpoint(m, nullptr), TANDEM_INVALID_USAGE, {"dir is NULL"}));
  EXPECT_TRUE(fails_with(tandem_get_step(m, nullptr), TANDEM_INVALID_USAGE, {"step is NULL"}));
  tandem_model_destroy(m);
}

TEST(CApi, WrongShapesRanksAndDtypesAreInvalidUsage) {
  TempDir dir;
  tandem_model_t m = make(dir.write("run.yaml", mlp_config()));
  std::vector<float> x(64), y(64), out(64);
  float loss;
  const int64_t five[2] = {8, 5}, batch7[2] = {7, 3}, zero[2] = {0, 4}, wrong_out[2] = {8, 2};
  // 5 features into a model that takes 4: the layer names both sizes.
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, five, y.data(), TANDEM_FLOAT32, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"tandem_train", "5", "4"}));
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, kX, y.data(), TANDEM_FLOAT32, 2, batch7, &loss),
                         TANDEM_INVALID_USAGE, {"batch 8", "7"}));
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), TANDEM_FLOAT32, 0, kX, y.data(), TANDEM_FLOAT32, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"input: rank 0"}));
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), TANDEM_FLOAT32, 9, kX, y.data(), TANDEM_FLOAT32, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"input: rank 9"}));
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, zero, y.data(), TANDEM_FLOAT32, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"dimension 0 is 0"}));
  // Dimensions fine one by one whose product (or its bytes) overflows 64 bits: an error, not a wrapped size.
  const int64_t huge[4] = {8, int64_t{1} << 31, int64_t{1} << 31, 4}, too_big[2] = {8, int64_t{1} << 58};
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), TANDEM_FLOAT32, 4, huge, y.data(), TANDEM_FLOAT32, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"input: shape [8, 2147483648, 2147483648, 4] is too large"}));
  EXPECT_TRUE(fails_with(tandem_inference(m, x.data(), TANDEM_FLOAT32, 2, kX, out.data(), TANDEM_FLOAT32, 2, too_big),
                         TANDEM_INVALID_USAGE, {"output: shape [8, 288230376151711744] is too large"}));
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), static_cast<tandem_dtype_t>(42), 2, kX, y.data(), TANDEM_FLOAT32, 2,
                                      kY, &loss),
                         TANDEM_INVALID_USAGE, {"unknown dtype 42"}));
  EXPECT_TRUE(fails_with(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, kX, y.data(), TANDEM_INT64, 2, kY, &loss),
                         TANDEM_INVALID_USAGE, {"label", "float"}));
  EXPECT_TRUE(fails_with(tandem_inference(m, x.data(), TANDEM_FLOAT32, 2, kX, out.data(), TANDEM_FLOAT32, 2, wrong_out),
                         TANDEM_INVALID_USAGE, {"tandem_inference", "[8, 3]", "[8, 2]"}));
  int64_t step = -1;
  EXPECT_EQ(tandem_get_step(m, &step), TANDEM_SUCCESS);
  EXPECT_EQ(step, 0);  // no failed call took a step
  tandem_model_destroy(m);
}

// An exported model through the C API (TorchFort's layout: model: {type: onnx, parameters:
// {filename: ...}}): PyTorch's output for the reference input, and it trains.
TEST(CApi, OnnxModelFromAFile) {
  TempDir dir;
  const std::string models = TANDEM_ONNX_MODELS;
  tandem_model_t m = make(dir.write("onnx.yaml", "model:\n  type: onnx\n  parameters: {filename: " + models +
                                                     "/mlp.onnx}\nloss: {type: mse}\n"
                                                     "optimizer: {type: sgd, parameters: {learning_rate: 0.05}}\n"));
  const serialization::SafetensorsContents r = serialization::load_safetensors(models + "/mlp.ref.safetensors");
  const std::vector<float> x = r.find("input.0")->to_vector<float>(), want = r.find("eval.output.0")->to_vector<float>();
  const int64_t xs[2] = {3, 6}, ys[2] = {3, 4};
  std::vector<float> out(12), target(12, 0.5f);
  ASSERT_EQ(tandem_inference(m, x.data(), TANDEM_FLOAT32, 2, xs, out.data(), TANDEM_FLOAT32, 2, ys), TANDEM_SUCCESS)
      << tandem_last_error();
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-5) << i;
  float first = 0, last = 0;
  for (int s = 0; s < 40; ++s) {
    ASSERT_EQ(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, xs, target.data(), TANDEM_FLOAT32, 2, ys, &last),
              TANDEM_SUCCESS) << tandem_last_error();
    if (s == 0) first = last;
  }
  EXPECT_LT(last, 0.1f * first);
  // Written back as ONNX and read again: the trained model's output.
  const std::string saved = dir.path + "/trained.onnx";
  ASSERT_EQ(tandem_save_onnx(m, saved.c_str()), TANDEM_SUCCESS) << tandem_last_error();
  ASSERT_EQ(tandem_inference(m, x.data(), TANDEM_FLOAT32, 2, xs, out.data(), TANDEM_FLOAT32, 2, ys), TANDEM_SUCCESS);
  tandem_model_t back = make(dir.write("back.yaml", "model:\n  type: onnx\n  parameters: {filename: trained.onnx}\n"
                                                    "loss: {type: mse}\n"));
  std::vector<float> again(12);
  ASSERT_EQ(tandem_inference(back, x.data(), TANDEM_FLOAT32, 2, xs, again.data(), TANDEM_FLOAT32, 2, ys),
            TANDEM_SUCCESS) << tandem_last_error();
  EXPECT_EQ(again, out);
  tandem_model_destroy(back);
  tandem_model_destroy(m);
  // A built-in model is exported (nn/onnx/onnx_export.h): read back through the API, the same outputs.
  tandem_model_t mlp = make(dir.write("run.yaml", mlp_config()));
  train_step(mlp, 0);
  const std::string exported = dir.path + "/mlp.onnx";
  ASSERT_EQ(tandem_save_onnx(mlp, exported.c_str()), TANDEM_SUCCESS) << tandem_last_error();
  tandem_model_t mlp_back = make(dir.write("mlp_back.yaml", "model:\n  type: onnx\n  parameters: {filename: mlp.onnx}\n"
                                                            "loss: {type: mse}\n"));
  std::vector<float> x8, y8, from_file(8 * 3);
  batch(999, 0, 8, x8, y8);
  ASSERT_EQ(tandem_inference(mlp_back, x8.data(), TANDEM_FLOAT32, 2, kX, from_file.data(), TANDEM_FLOAT32, 2, kY),
            TANDEM_SUCCESS) << tandem_last_error();
  const std::vector<float> native = probe(mlp);
  for (size_t i = 0; i < native.size(); ++i) EXPECT_NEAR(from_file[i], native[i], 1e-5) << i;
  tandem_model_destroy(mlp_back);
  tandem_model_destroy(mlp);
  // A type the exporter does not write says which.
  tandem_model_t resmlp = make(dir.write("resmlp.yaml", "model:\n  type: resmlp\n  parameters: {in_features: 4, "
                                                        "hidden: 8, blocks: 1, out_features: 3}\nloss: {type: mse}\n"));
  EXPECT_TRUE(fails_with(tandem_save_onnx(resmlp, saved.c_str()), TANDEM_NOT_SUPPORTED,
                         {"tandem_save_onnx: model type resmlp", "ONNX export writes"}));
  tandem_model_destroy(resmlp);
}

// TorchFort's multi-argument calls: a model of two inputs and two outputs (two_io.onnx).
TEST(CApi, MultiargTwoInputsTwoOutputs) {
  TempDir dir;
  const std::string models = TANDEM_ONNX_MODELS;
  tandem_model_t m = make(dir.write("two.yaml", "model:\n  type: onnx\n  parameters: {filename: " + models +
                                                    "/two_io.onnx}\nloss: {type: mse}\n"
                                                    "optimizer: {type: sgd, parameters: {learning_rate: 0.02}}\n"));
  const serialization::SafetensorsContents r = serialization::load_safetensors(models + "/two_io.ref.safetensors");
  std::vector<float> a = r.find("input.0")->to_vector<float>(), b = r.find("input.1")->to_vector<float>();
  const Tensor& want1 = *r.find("eval.output.0");
  const Tensor& want2 = *r.find("eval.output.1");
  const int64_t as[2] = {3, 5}, bs[2] = {3, 2}, y1s[2] = {3, want1.size(1)}, y2s[2] = {3, want2.size(1)};
  std::vector<float> y1(static_cast<size_t>(want1.numel())), y2(static_cast<size_t>(want2.numel()));
  tandem_tensor_list_t in = nullptr, out = nullptr, labels = nullptr;
  ASSERT_EQ(tandem_tensor_list_create(&in), TANDEM_SUCCESS);
  ASSERT_EQ(tandem_tensor_list_create(&out), TANDEM_SUCCESS);
  ASSERT_EQ(tandem_tensor_list_create(&labels), TANDEM_SUCCESS);
  ASSERT_EQ(tandem_tensor_list_add_tensor(in, a.data(), TANDEM_FLOAT32, 2, as), TANDEM_SUCCESS);
  ASSERT_EQ(tandem_tensor_list_add_tensor(in, b.data(), TANDEM_FLOAT32, 2, bs), TANDEM_SUCCESS);
  ASSERT_EQ(tandem_tensor_list_add_tensor(out, y1.data(), TANDEM_FLOAT32, 2, y1s), TANDEM_SUCCESS);
  EXPECT_TRUE(fails_with(tandem_inference_multiarg(m, in, out), TANDEM_INVALID_USAGE,
                         {"tandem_inference_multiarg", "2 outputs and 1 output arrays"}));
  ASSERT_EQ(tandem_tensor_list_add_tensor(out, y2.data(), TANDEM_FLOAT32, 2, y2s), TANDEM_SUCCESS);
  ASSERT_EQ(tandem_inference_multiarg(m, in, out), TANDEM_SUCCESS) << tandem_last_error();
  const std::vector<float> w1 = want1.to_vector<float>(), w2 = want2.to_vector<float>();
  for (size_t i = 0; i < y1.size(); ++i) EXPECT_NEAR(y1[i], w1[i], 1e-5) << i;
  for (size_t i = 0; i < y2.size(); ++i) EXPECT_NEAR(y2[i], w2[i], 1e-5) << i;

  // The loss is the sum of each output's mse against its label.
  std::vector<float> t1(y1.size(), 0.25f), t2(y2.size(), -0.5f);
  ASSERT_EQ(tandem_tensor_list_add_tensor(labels, t1.data(), TANDEM_FLOAT32, 2, y1s), TANDEM_SUCCESS);
  float loss = 0;
  EXPECT_TRUE(fails_with(tandem_train_multiarg(m, in, labels, &loss), TANDEM_INVALID_USAGE,
                         {"2 outputs and 1 labels"}));
  ASSERT_EQ(tandem_tensor_list_add_tensor(labels, t2.data(), TANDEM_FLOAT32, 2, y2s), TANDEM_SUCCESS);
  double expected = 0;
  for (size_t i = 0; i < y1.size(); ++i) expected += (w1[i] - 0.25) * (w1[i] - 0.25) / static_cast<double>(y1.size());
  for (size_t i = 0; i < y2.size(); ++i) expected += (w2[i] + 0.5) * (w2[i] + 0.5) / static_cast<double>(y2.size());
  float first = 0;
  for (int s = 0; s < 30; ++s) {
    ASSERT_EQ(tandem_train_multiarg(m, in, labels, &loss), TANDEM_SUCCESS) << tandem_last_error();
    if (s == 0) first = loss;
  }
  EXPECT_NEAR(first, expected, 1e-5);
  EXPECT_LT(loss, 0.5f * first);
  int64_t step = 0;
  tandem_get_step(m, &step);
  EXPECT_EQ(step, 30);

  // Errors: a NULL or empty list, batches that differ.
  tandem_tensor_list_t empty = nullptr;
  ASSERT_EQ(tandem_tensor_list_create(&empty), TANDEM_SUCCESS);
  EXPECT_TRUE(fails_with(tandem_train_multiarg(m, nullptr, labels, &loss), TANDEM_INVALID_USAGE, {"inputs is NULL"}));
  EXPECT_TRUE(fails_with(tandem_train_multiarg(m, empty, labels, &loss), TANDEM_INVALID_USAGE, {"inputs: the list is empty"}));
  const int64_t short_b[2] = {2, 2};
  ASSERT_EQ(tandem_tensor_list_add_tensor(empty, a.data(), TANDEM_FLOAT32, 2, as), TANDEM_SUCCESS);
  ASSERT_EQ(tandem_tensor_list_add_tensor(empty, b.data(), TANDEM_FLOAT32, 2, short_b), TANDEM_SUCCESS);
  EXPECT_TRUE(fails_with(tandem_train_multiarg(m, empty, labels, &loss), TANDEM_INVALID_USAGE,
                         {"input 1 has batch 2", "input 0 has 3"}));
  EXPECT_TRUE(fails_with(tandem_tensor_list_add_tensor(nullptr, a.data(), TANDEM_FLOAT32, 2, as), TANDEM_INVALID_USAGE,
                         {"the list is NULL"}));
  for (tandem_tensor_list_t l : {in, out, labels, empty}) EXPECT_EQ(tandem_tensor_list_destroy(l), TANDEM_SUCCESS);
  tandem_model_destroy(m);
}

TEST(CApi, BadConfigFilesAndDevices) {
  TempDir dir;
  tandem_model_t m = nullptr;
  const std::string missing = dir.path + "/nope.yaml";
  EXPECT_TRUE(fails_with(tandem_model_create(&m, missing.c_str(), "cpu"), TANDEM_INVALID_USAGE, {"nope.yaml"}));
  const std::string typo = dir.write("typo.yaml", mlp_config("  learning_rat: 3\n"));
  EXPECT_TRUE(fails_with(tandem_model_create(&m, typo.c_str(), "cpu"), TANDEM_INVALID_USAGE,
                         {"typo.yaml", "learning_rat"}));
  const std::string good = dir.write("run.yaml", mlp_config());
  EXPECT_TRUE(fails_with(tandem_model_create(&m, good.c_str(), "cuda:7"), TANDEM_NOT_SUPPORTED, {"cuda:7"}));
  EXPECT_TRUE(fails_with(tandem_model_create(&m, good.c_str(), "tpu"), TANDEM_INVALID_USAGE, {"tpu"}));
  EXPECT_EQ(m, nullptr);
}

TEST(CApi, TrainingLowersTheLossAndCountsSteps) {
  TempDir dir;
  tandem_model_t m = make(dir.write("run.yaml", mlp_config()));
  std::vector<float> first_probe = probe(m);
  float first = 0, last = 0;
  for (int64_t s = 0; s < 60; ++s) {
    const float loss = train_step(m, s % 4);
    if (s < 4) first += loss;
    if (s >= 56) last += loss;
  }
  EXPECT_LT(last, 0.5f * first);
  int64_t step = 0;
  EXPECT_EQ(tandem_get_step(m, &step), TANDEM_SUCCESS);
  EXPECT_EQ(step, 60);
  EXPECT_NE(probe(m), first_probe);
  tandem_model_destroy(m);
}

// A GPT through the C API (host codes train transformers too): token ids [batch, positions] in,
// logits [batch, positions, vocabulary] out. It learns a cycle of 12 tokens; float ids are refused.
TEST(CApi, GptTrainsOnTokenIdsAndInfersLogits) {
  tandem_model_t m = make(std::string(TANDEM_CAPI_DIR) + "/gpt_cycle.yaml");  // as the Fortran test's
  constexpr int64_t kB = 4, kT = 16, kV = 12;
  const int64_t ids_shape[2] = {kB, kT}, logits_shape[3] = {kB, kT, kV};
  std::vector<int64_t> x(kB * kT), y(kB * kT);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < kT; ++t) {
      x[static_cast<size_t>(b * kT + t)] = (3 * b + t) % kV;
      y[static_cast<size_t>(b * kT + t)] = (3 * b + t + 1) % kV;  // the next token
    }
  float first = 0, last = 0;
  for (int s = 0; s < 60; ++s) {
    float loss = -1;
    ASSERT_EQ(tandem_train(m, x.data(), TANDEM_INT64, 2, ids_shape, y.data(), TANDEM_INT64, 2, ids_shape, &loss),
              TANDEM_SUCCESS) << tandem_last_error();
    if (s == 0) first = loss;
    last = loss;
  }
  EXPECT_NEAR(first, std::log(12.0f), 0.3f);  // GPT-2's initialisation: near-uniform predictions
  EXPECT_LT(last, 0.1f * first);
  std::vector<float> logits(kB * kT * kV);
  ASSERT_EQ(tandem_inference(m, x.data(), TANDEM_INT64, 2, ids_shape, logits.data(), TANDEM_FLOAT32, 3, logits_shape),
            TANDEM_SUCCESS) << tandem_last_error();
  int right = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const float* row = logits.data() + i * kV;
    right += std::max_element(row, row + kV) - row == y[i];
  }
  EXPECT_EQ(right, kB * kT);
  std::vector<float> float_ids(kB * kT, 1.0f);
  float loss = 0;
  EXPECT_TRUE(fails_with(tandem_train(m, float_ids.data(), TANDEM_FLOAT32, 2, ids_shape, y.data(), TANDEM_INT64, 2,
                                      ids_shape, &loss),
                         TANDEM_INVALID_USAGE, {"a gpt model takes token ids, int32 or int64"}));
  tandem_model_destroy(m);
}

TEST(CApi, Float64BuffersMatchFloat32Ones) {
  TempDir dir;
  const std::string cfg = dir.write("run.yaml", mlp_config());
  tandem_model_t a = make(cfg), b = make(cfg);
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<float> x, y;
    batch(s, 0, 8, x, y);
    std::vector<double> xd(x.begin(), x.end()), yd(y.begin(), y.end());
    float la, lb;
    ASSERT_EQ(tandem_train(a, x.data(), TANDEM_FLOAT32, 2, kX, y.data(), TANDEM_FLOAT32, 2, kY, &la), TANDEM_SUCCESS);
    ASSERT_EQ(tandem_train(b, xd.data(), TANDEM_FLOAT64, 2, kX, yd.data(), TANDEM_FLOAT64, 2, kY, &lb), TANDEM_SUCCESS);
    EXPECT_EQ(la, lb);
  }
  std::vector<float> x, y;
  batch(5, 0, 8, x, y);
  std::vector<double> out(24);
  ASSERT_EQ(tandem_inference(b, x.data(), TANDEM_FLOAT32, 2, kX, out.data(), TANDEM_FLOAT64, 2, kY), TANDEM_SUCCESS);
  std::vector<float> pa = probe(a), pb = probe(b);
  EXPECT_EQ(pa, pb);
  tandem_model_destroy(a);
  tandem_model_destroy(b);
}

TEST(CApi, CheckpointResumesBitwise) {
  TempDir dir;
  const std::string cfg = dir.write("run.yaml", mlp_config());
  tandem_model_t straight = make(cfg), first = make(cfg);
  for (int64_t s = 0; s < 6; ++s) train_step(straight, s);
  for (int64_t s = 0; s < 3; ++s) train_step(first, s);
  const std::string ck = dir.path + "/ck";
  ASSERT_EQ(tandem_save_checkpoint(first, ck.c_str()), TANDEM_SUCCESS) << tandem_last_error();
  tandem_model_destroy(first);
  tandem_model_t resumed = make(cfg);
  ASSERT_EQ(tandem_load_checkpoint(resumed, ck.c_str()), TANDEM_SUCCESS) << tandem_last_error();
  int64_t step = 0;
  EXPECT_EQ(tandem_get_step(resumed, &step), TANDEM_SUCCESS);
  EXPECT_EQ(step, 3);
  for (int64_t s = 3; s < 6; ++s) train_step(resumed, s);
  const std::vector<float> a = probe(straight), b = probe(resumed);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  const std::string bad = dir.path + "/no-such-checkpoint";
  EXPECT_TRUE(fails_with(tandem_load_checkpoint(resumed, bad.c_str()), TANDEM_IO_ERROR, {"no-such-checkpoint"}));
  tandem_model_destroy(straight);
  tandem_model_destroy(resumed);
}

TEST(CApi, HeaderCompilesAsC) {
  TempDir dir;
  EXPECT_EQ(capi_c_smoke(dir.write("run.yaml", mlp_config()).c_str()), 0) << tandem_last_error();
}

}  // namespace
}  // namespace tandem::capi_test
