// tandem's own models exported as ONNX (nn/onnx/onnx_export.h): read back by tandem's importer they
// compute what the models compute (eval and, through autograd, training), with the models' parameter
// names and values; onnxruntime's outputs on the same files (models/exported.ref.safetensors, written
// by tests/reference/check_exported_onnx.py) match the native models; what cannot be exported says so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "nn/model_registry.h"
#include "runtime/error.h"
#include "runtime/serialization/safetensors.h"
#include "tests/onnx/export_cases.h"

using namespace tandem;
using namespace tandem::testing;

namespace {

std::shared_ptr<nn::onnx::OnnxModel> reimport(const ExportCase& c) {
  return nn::onnx::OnnxModel::from_bytes(c.bytes, c.name + ".onnx");
}

std::map<std::string, Tensor> by_name(const nn::NamedTensors& tensors) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : tensors) out[name] = t;
  return out;
}

TEST(OnnxExport, ReimportedComputesTheNativeModel) {
  for (ExportCase& c : all_export_cases()) {
    if (c.name == "roundtrip_mlp") continue;  // an imported model to begin with
    auto back = reimport(c);
    const Tensor want = eval_forward(*c.model, c.input), got = eval_forward(*back, c.input);
    expect_close(got, want, 1e-5, c.name);
  }
}

// Every parameter under its own name with its value; BatchNorm's running statistics are buffers.
TEST(OnnxExport, InitializersAreTheStateDict) {
  for (ExportCase& c : all_export_cases()) {
    if (c.name == "roundtrip_mlp") continue;
    auto back = reimport(c);
    const auto native = by_name(c.model->named_parameters()), imported = by_name(back->named_parameters());
    std::set<std::string> want_names, got_names;
    for (const auto& [name, t] : native) want_names.insert(name);
    for (const auto& [name, t] : imported) got_names.insert(name);
    EXPECT_EQ(got_names, want_names) << c.name;
    for (const auto& [name, t] : native) {
      if (imported.count(name) == 0) continue;
      EXPECT_EQ(imported.at(name).to_vector<float>(), t.to_vector<float>()) << c.name << " " << name;
    }
    const auto buffers = by_name(back->named_buffers());
    for (const auto& [name, t] : c.model->named_buffers()) {
      if (name.find("num_batches_tracked") != std::string::npos) continue;  // not written: no node reads it
      ASSERT_TRUE(buffers.count(name)) << c.name << " lacks buffer " << name;
      EXPECT_EQ(buffers.at(name).to_vector<float>(), t.to_vector<float>()) << c.name << " " << name;
    }
  }
}

// Trained as tandem's importer trains it (train mode: BatchNorm on batch statistics, updating the
// running ones with the model's momentum), the exported graph gives the native model's gradients.
TEST(OnnxExport, ReimportedTrainsAsTheNativeModel) {
  for (ExportCase c : {cnn_case(), gpt_case(5)}) {
    auto back = reimport(c);
    for (nn::Module* m : {c.model.get(), static_cast<nn::Module*>(back.get())}) {
      m->train();
      m->zero_grad();
      const Tensor y = m->forward(c.input);
      ops::sum(ops::mul(y, uniform(y.shape(), -1, 1, 99))).backward();
    }
    const auto native = by_name(c.model->named_parameters()), imported = by_name(back->named_parameters());
    for (const auto& [name, p] : native) {
      ASSERT_TRUE(imported.count(name)) << name;
      expect_close(imported.at(name).grad(), p.grad(), 1e-5, c.name + " grad " + name);
    }
    const auto stats = by_name(back->named_buffers());
    for (const auto& [name, t] : c.model->named_buffers())
      if (name.find("running_") != std::string::npos) expect_close(stats.at(name), t, 1e-6, c.name + " " + name);
  }
}

// The sequence length is the ids', any from 1 to the context; the graph refuses a longer one.
TEST(OnnxExport, GptTakesAnySequenceLengthUpToTheContext) {
  ExportCase c = gpt_case(8);
  auto back = reimport(c);
  for (int64_t t : {1, 3, 8}) expect_close(eval_forward(*back, gpt_ids(t)), eval_forward(*c.model, gpt_ids(t)), 1e-5,
                                          "gpt t=" + std::to_string(t));
  EXPECT_THROW(eval_forward(*back, gpt_ids(9)), ValueError);
}

TEST(OnnxExport, WhatCannotBeExportedSaysWhatItIs) {
  Generator gen(1);
  const nn::config::ModelConfig resmlp = nn::default_model_config("resmlp");
  try {
    nn::onnx::export_onnx(*nn::config::build_model(resmlp, gen));
    FAIL() << "resmlp exported";
  } catch (const NotSupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("model ResMLP"), std::string::npos) << e.what();
  }
  nn::Sequential flat_first;
  flat_first.emplace_back<nn::Flatten>();
  flat_first.emplace_back<nn::Linear>(4, 2, true, gen);
  try {
    nn::onnx::export_onnx(flat_first);
    FAIL() << "a Sequential without an input shape exported";
  } catch (const NotSupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("first layer Flatten (layer 0)"), std::string::npos) << e.what();
  }
}

TEST(OnnxExport, AFileThatCannotBeWrittenNamesItsPath) {
  ExportCase c = mlp_case();
  const std::string path = "/nonexistent-tandem-dir/mlp.onnx";
  try {
    nn::onnx::save_onnx(*c.model, path);
    FAIL() << "wrote " << path;
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  TempDir dir;
  nn::onnx::save_onnx(*c.model, dir.file("mlp.onnx"));
  EXPECT_EQ(serialization::read_file(dir.file("mlp.onnx")), c.bytes);
}

// onnxruntime's outputs on the files these models export (check_exported_onnx.py --golden), against
// the native models: the files they ran must be the ones the exporter writes now (the fingerprint).
TEST(OnnxExport, OnnxruntimeAgreesWithTheNativeModels) {
  const serialization::SafetensorsContents golden =
      serialization::load_safetensors(onnx_model("exported.ref.safetensors"));
  for (ExportCase& c : all_export_cases()) {
    const auto fp = golden.metadata.find(c.name + ".fingerprint");
    ASSERT_NE(fp, golden.metadata.end()) << c.name << ": not in exported.ref.safetensors";
    EXPECT_EQ(graph_fingerprint(c.bytes), fp->second)
        << c.name << ": the exporter writes another graph than onnxruntime ran; rerun "
                     "tests/reference/check_exported_onnx.py (its docstring says how)";
    const Tensor& input = ref(golden, c.name + ".input");
    ASSERT_EQ(input.shape(), c.input.shape()) << c.name;
    EXPECT_EQ(input.to_vector<double>(), c.input.to_vector<double>()) << c.name << ": the seeded input differs";
    const double diff = expect_close(eval_forward(*c.model, input), ref(golden, c.name + ".onnxruntime"), 2e-5, c.name);
    std::printf("max |tandem - onnxruntime| %-14s %.3g\n", c.name.c_str(), diff);
  }
}

// TANDEM_EXPORT_DIR=DIR: the files for tests/reference/check_exported_onnx.py (each model's .onnx,
// and its input and tandem's output with the graph's fingerprint in NAME.io.safetensors).
TEST(OnnxExport, WriteFilesForTheReferenceScript) {
  const char* dir = std::getenv("TANDEM_EXPORT_DIR");
  if (dir == nullptr) GTEST_SKIP() << "set TANDEM_EXPORT_DIR to write the files";
  serialization::make_directories(dir);
  for (ExportCase& c : all_export_cases()) {
    const std::string base = std::string(dir) + "/" + c.name;
    serialization::write_file_atomic(base + ".onnx", c.bytes);
    serialization::save_safetensors(base + ".io.safetensors",
                                    {{"input", c.input}, {"tandem", eval_forward(*c.model, c.input)}},
                                    {{"fingerprint", graph_fingerprint(c.bytes)}});
  }
}

}  // namespace
