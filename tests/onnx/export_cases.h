// The models the export tests write as ONNX, each built from a fixed seed with a fixed input (so
// tests/reference/check_exported_onnx.py's onnxruntime outputs, committed as
// models/exported.ref.safetensors, stay the outputs of these models), and the fingerprint of a graph's
// structure that ties those outputs to the exporter that wrote the files.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "nn/config/run_config.h"
#include "nn/gpt.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/onnx/onnx_export.h"
#include "nn/onnx/onnx_graph.h"
#include "nn/onnx/onnx_model.h"
#include "nn/optim/sgd.h"
#include "runtime/autograd.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/reduce.h"
#include "runtime/serialization/atomic_file.h"
#include "tests/data/temp_dir.h"
#include "tests/onnx/onnx_test_util.h"

namespace tandem::testing {

struct ExportCase {
  std::string name;
  std::shared_ptr<nn::Module> model;  // in eval mode
  Tensor input;
  std::string bytes;  // its ONNX file
};

inline Tensor uniform(const Shape& shape, double low, double high, uint64_t seed) {
  Tensor t = Tensor::zeros(shape);
  Generator gen(seed);
  nn::init::uniform_(t, low, high, gen);
  return t;
}

// BatchNorm's affine parameters and running statistics away from 1 and 0, so that a wrong epsilon,
// a swapped mean and variance or a batch-statistics run shows.
inline void vary_batchnorms(nn::Module& model, uint64_t seed) {
  Generator gen(seed);
  NoGradGuard no_grad;
  model.apply([&](const std::string&, nn::Module& m) {
    if (dynamic_cast<nn::BatchNormBase*>(&m) == nullptr) return;
    if (m.has_param("weight")) nn::init::uniform_(m.param("weight"), 0.5, 1.5, gen);
    if (m.has_param("bias")) nn::init::uniform_(m.param("bias"), -0.3, 0.3, gen);
    nn::init::uniform_(m.buffer("running_mean"), -0.3, 0.3, gen);
    nn::init::uniform_(m.buffer("running_var"), 0.5, 1.5, gen);
  });
}

inline ExportCase exported(std::string name, std::shared_ptr<nn::Module> model, Tensor input) {
  model->eval();
  std::string bytes = nn::onnx::export_onnx(*model);
  return {std::move(name), std::move(model), std::move(input), std::move(bytes)};
}

// The registry's mlp (TorchFort's layout: dropout after each hidden ReLU), 12-16-16-5.
inline ExportCase mlp_case() {
  nn::config::ModelConfig m;
  m.type = "mlp";
  m.layer_sizes = {12, 16, 16, 5};
  m.dropout = 0.1;
  Generator gen(11);
  return exported("mlp", nn::config::build_model(m, gen), uniform({3, 12}, -1, 1, 12));
}

// The registry's cnn (tandem-train's Fashion-MNIST net, BatchNorm epilogues fused) on 28x28 images.
inline ExportCase cnn_case() {
  nn::config::ModelConfig m;
  m.type = "cnn";
  Generator gen(21);
  auto model = nn::config::build_model(m, gen);
  vary_batchnorms(*model, 22);
  return exported("cnn", model, uniform({2, 1, 28, 28}, 0, 1, 23));
}

// A `sequential` stack of the other layers: Conv2d (stride, padding), BatchNorm2d, exact GELU,
// AvgPool2d, Flatten, LayerNorm, tanh GELU, Dropout, BatchNorm1d with a fused ReLU, Linear.
inline ExportCase sequential_case() {
  Generator gen(31);
  auto s = std::make_shared<nn::Sequential>();
  s->emplace_back<nn::Conv2d>(2, 4, 3, 1, 1, true, gen);
  s->emplace_back<nn::BatchNorm2d>(4);
  s->emplace_back<nn::GELU>(false);
  s->emplace_back<nn::AvgPool2d>(2);
  s->emplace_back<nn::Conv2d>(4, 6, 2, 2, 1, false, gen);
  s->emplace_back<nn::Flatten>();
  s->emplace_back<nn::Linear>(6 * 2 * 2, 8, true, gen);
  s->emplace_back<nn::LayerNorm>(Shape{8});
  s->emplace_back<nn::GELU>(true);
  s->emplace_back<nn::Dropout>(0.2);
  s->emplace_back<nn::BatchNorm1d>(8);
  s->emplace_back<nn::ReLU>();
  s->emplace_back<nn::Linear>(8, 3, false, gen);
  s->fuse_batchnorm_epilogues();
  vary_batchnorms(*s, 32);
  {  // LayerNorm's affine parameters away from 1 and 0 too
    NoGradGuard no_grad;
    nn::init::uniform_(s->at(7)->param("weight"), 0.5, 1.5, gen);
    nn::init::uniform_(s->at(7)->param("bias"), -0.3, 0.3, gen);
  }
  return exported("sequential", s, uniform({3, 2, 6, 6}, -1, 1, 33));
}

inline nn::GPTConfig tiny_gpt() {
  nn::GPTConfig c;
  c.vocab_size = 32, c.context = 8, c.n_layer = 2, c.n_head = 2, c.n_embd = 16;
  return c;
}

// ids [2, t] (t <= 8) of a tiny GPT: 2 layers, 2 heads, width 16, vocabulary 32.
inline Tensor gpt_ids(int64_t t) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 2 * t; ++i) ids.push_back((i * 7 + 3) % 32);
  return Tensor::from_vector(ids, {2, t}, DType::i64);
}

inline ExportCase gpt_case(int64_t t) {
  Generator gen(41);
  return exported(fmt::format("gpt_t{}", t), std::make_shared<nn::GPT>(tiny_gpt(), gen), gpt_ids(t));
}

// tests/onnx/models/mlp.onnx (PyTorch's export) imported, trained 5 SGD steps on a fixed probe loss,
// and written back by save_onnx: the round trip of what tandem trains on an imported model.
inline ExportCase roundtrip_case() {
  auto model = std::make_shared<nn::onnx::OnnxModel>(onnx_model("mlp.onnx"));
  model->train();
  nn::SGD sgd(model->parameters(), nn::SGDOptions{0.05, 0.9});
  const Tensor x = uniform({4, 6}, -1, 1, 51), probe = uniform({4, 4}, -1, 1, 52);
  for (int step = 0; step < 5; ++step) {
    sgd.zero_grad();
    ops::sum(ops::mul(model->forward(x), probe)).backward();
    sgd.step();
  }
  TempDir dir;
  nn::onnx::save_onnx(*model, dir.file("trained.onnx"));
  std::string bytes = serialization::read_file(dir.file("trained.onnx"));
  model->eval();
  return {"roundtrip_mlp", model, uniform({3, 6}, -1, 1, 53), std::move(bytes)};
}

inline std::vector<ExportCase> all_export_cases() {
  return {mlp_case(), cnn_case(), sequential_case(), gpt_case(5), gpt_case(8), roundtrip_case()};
}

inline Tensor eval_forward(nn::Module& m, const Tensor& x) {
  NoGradGuard no_grad;
  m.eval();
  return m.forward(x);
}

// FNV-1a over the graph's structure: its inputs, outputs, nodes with their attributes, and the
// initializers' names and shapes (not their values, which the seeded draws give; a Constant's values
// are the exporter's and count): the same file structure as the one onnxruntime ran, whatever the CPU.
inline std::string graph_fingerprint(const std::string& bytes) {
  const nn::onnx::Graph g = nn::onnx::read_graph_bytes(bytes, "fingerprint");
  std::string text = fmt::format("opset {}\n", g.opset);
  for (const auto& v : g.inputs)
    text += fmt::format("in {} {} [{}]\n", v.name, dtype_name(v.dtype), fmt::join(v.dims, ","));
  for (const auto& v : g.outputs) text += fmt::format("out {} [{}]\n", v.name, fmt::join(v.dims, ","));
  for (const auto& [name, t] : g.initializers) text += fmt::format("init {} {}\n", name, shape_str(t.shape()));
  for (const auto& n : g.nodes) {
    text += fmt::format("{} ({}) -> ({})", n.op, fmt::join(n.inputs, ","), fmt::join(n.outputs, ","));
    for (const auto& [name, a] : n.attributes)
      text += fmt::format(" {}={}/{}/{}/[{}]/{}:[{}]", name, a.i, a.f, a.s, fmt::join(a.ints, ","),
                          a.t.defined() ? shape_str(a.t.shape()) : "",
                          fmt::join(a.t.defined() ? a.t.to_vector<double>() : std::vector<double>{}, ","));
    text += "\n";
  }
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

}  // namespace tandem::testing
