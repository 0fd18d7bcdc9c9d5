// Imported models against PyTorch 1.13 (the exporter's own model) and onnxruntime: outputs in train
// and eval mode, the gradients of a probe loss, 10 SGD steps with BatchNorm's running statistics;
// names as the exporter's state_dict; several inputs and outputs; clones independent; a run config's
// type onnx with frozen initializers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "nn/config/run_config.h"
#include "nn/onnx/onnx_model.h"
#include "nn/optim/sgd.h"
#include "runtime/autograd.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/reduce.h"
#include "tests/data/temp_dir.h"
#include "tests/onnx/onnx_test_util.h"

using namespace tandem;
using tandem::testing::expect_close;
using tandem::testing::onnx_model;
using tandem::testing::onnx_reference;
using tandem::testing::ref;
using tandem::testing::TempDir;

namespace {

struct Case {
  const char* file;       // K.onnx
  const char* reference;  // K of K.ref.safetensors
  size_t inputs, outputs;
};

const Case kCases[] = {{"mlp.onnx", "mlp", 1, 1},       {"mlp_opset17.onnx", "mlp", 1, 1},
                       {"cnn.onnx", "cnn", 1, 1},       {"resnet.onnx", "resnet", 1, 1},
                       {"two_io.onnx", "two_io", 2, 2},   {"encoder.onnx", "encoder", 1, 1},
                       {"encoder_opset17.onnx", "encoder", 1, 1}, {"mobilenet.onnx", "mobilenet", 1, 1},
                       {"mobilenet_opset17.onnx", "mobilenet", 1, 1}, {"decoder.onnx", "decoder", 1, 1},
                       {"decoder_opset17.onnx", "decoder", 1, 1}, {"unet.onnx", "unet", 1, 1},
                       {"unet_opset17.onnx", "unet", 1, 1}};

std::vector<Tensor> inputs_of(const serialization::SafetensorsContents& r, size_t n, bool grad) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < n; ++i) {
    Tensor x = ref(r, "input." + std::to_string(i)).clone();
    if (grad && is_floating(x.dtype())) x.set_requires_grad(true);  // token ids have no gradient
    in.push_back(x);
  }
  return in;
}

// L = sum_j sum(output_j * probe_j), the references' loss.
Tensor probe_loss(const std::vector<Tensor>& out, const serialization::SafetensorsContents& r) {
  Tensor loss;
  for (size_t j = 0; j < out.size(); ++j) {
    Tensor term = ops::sum(ops::mul(out[j], ref(r, "probe." + std::to_string(j))));
    loss = loss.defined() ? ops::add(loss, term) : term;
  }
  return loss;
}

class OnnxImport : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(OnnxImport, ForwardInTrainAndEvalModeMatchesPyTorchAndOnnxruntime) {
  const Case& c = GetParam();
  const auto r = onnx_reference(c.reference);
  nn::onnx::OnnxModel eval_model(onnx_model(c.file));
  ASSERT_EQ(eval_model.num_inputs(), c.inputs);
  ASSERT_EQ(eval_model.num_outputs(), c.outputs);
  eval_model.eval();  // running statistics, whatever mode the export was made in
  std::vector<Tensor> y = eval_model.forward_many(inputs_of(r, c.inputs, false));
  for (size_t j = 0; j < c.outputs; ++j) expect_close(y[j], ref(r, "eval.output." + std::to_string(j)), 1e-5, "eval");

  nn::onnx::OnnxModel train_model(onnx_model(c.file));  // train() by default: batch statistics
  y = train_model.forward_many(inputs_of(r, c.inputs, false));
  double torch = 0, ort = 0;
  for (size_t j = 0; j < c.outputs; ++j) {
    torch = std::max(torch, expect_close(y[j], ref(r, "train.output." + std::to_string(j)), 1e-5, "train"));
    ort = std::max(ort, expect_close(y[j], ref(r, "ort.output." + std::to_string(j)), 1e-5, "onnxruntime"));
  }
  std::printf("%s: outputs max |tandem - PyTorch| %.3g, |tandem - onnxruntime| %.3g\n", c.file, torch, ort);
}

TEST_P(OnnxImport, ParametersAreTheExportersNamesAndGradientsMatchPyTorch) {
  const Case& c = GetParam();
  const auto r = onnx_reference(c.reference);
  nn::onnx::OnnxModel model(onnx_model(c.file));
  std::set<std::string> want, got;
  for (const auto& [name, t] : r.tensors)
    if (name.rfind("grad.", 0) == 0 && name.rfind("grad.input.", 0) != 0) want.insert(name.substr(5));
  for (const auto& [name, t] : model.named_parameters()) got.insert(name);
  EXPECT_EQ(got, want);

  std::vector<Tensor> in = inputs_of(r, c.inputs, true);
  probe_loss(model.forward_many(in), r).backward();
  double worst = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    worst = std::max(worst, expect_close(p.grad(), ref(r, "grad." + name), 1e-4, "grad." + name));
  }
  std::printf("%s: gradients max |tandem - PyTorch| %.3g\n", c.file, worst);
  for (size_t i = 0; i < c.inputs; ++i)
    if (const Tensor* want = r.find("grad.input." + std::to_string(i))) expect_close(in[i].grad(), *want, 1e-4, "grad.input");
}

// Ten steps of SGD (lr 0.01, momentum 0.9) on the same batch: the weights and BatchNorm's running
// statistics (PyTorch's momentum 0.1, unbiased variance) where PyTorch's are.
TEST_P(OnnxImport, TenSgdStepsMatchPyTorch) {
  const Case& c = GetParam();
  const auto r = onnx_reference(c.reference);
  nn::onnx::OnnxModel model(onnx_model(c.file));
  nn::SGDOptions o;
  o.lr = 0.01;
  o.momentum = 0.9;
  nn::SGD opt(model.parameters(), o);
  for (int s = 0; s < 10; ++s) {
    opt.zero_grad();
    probe_loss(model.forward_many(inputs_of(r, c.inputs, false)), r).backward();
    opt.step();
  }
  size_t compared = 0, references = 0;
  double worst = 0;
  for (const auto& [name, t] : model.state_dict())
    if (const Tensor* want = r.find("step10." + name)) {
      worst = std::max(worst, expect_close(t, *want, 1e-4, "step10." + name));
      ++compared;
    }
  for (const auto& [name, t] : r.tensors) references += name.rfind("step10.", 0) == 0;
  EXPECT_EQ(compared, references);  // every weight and running statistic PyTorch has, by its name
  std::printf("%s: after 10 SGD steps max |tandem - PyTorch| %.3g over %zu tensors\n", c.file, worst, compared);
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxImport, ::testing::ValuesIn(kCases), [](const auto& info) {
  std::string name = info.param.file;
  return name.substr(0, name.find('.'));
});

// DataParallel's replicas are clones: a clone's weights are its own.
TEST(OnnxModel, CloneIsIndependent) {
  const auto r = onnx_reference("resnet");
  nn::onnx::OnnxModel model(onnx_model("resnet.onnx"));
  model.eval();
  const Tensor before = model.forward(ref(r, "input.0"));
  auto copy = model.clone();
  {
    NoGradGuard no_grad;
    for (Tensor& p : copy->parameters()) p.zero_();
  }
  copy->eval();
  expect_close(model.forward(ref(r, "input.0")), before, 0, "original after zeroing the clone");
  for (double v : copy->forward(ref(r, "input.0")).to_vector<double>()) EXPECT_EQ(v, 0.0);  // fc is zero
}

// The run config's type onnx (TorchFort's layout): the file relative to the config file, frozen
// initializers out of the parameters (in the buffers: they save, load and move with the model).
TEST(OnnxModel, RunConfigTypeOnnxWithFrozenInitializers) {
  TempDir dir;
  std::filesystem::copy_file(onnx_model("resnet.onnx"), dir.file("resnet.onnx"));
  const std::string config = dir.file("run.yaml");
  std::ofstream(config) << "model:\n  type: onnx\n  parameters:\n    filename: resnet.onnx\n"
                           "    frozen: [conv1.weight, layer1.]\nloss: {type: cross_entropy}\n";
  const nn::config::RunConfig rc = nn::config::load_run_config(config);
  EXPECT_EQ(rc.model.filename, dir.file("resnet.onnx"));
  Generator gen(0);
  auto model = nn::config::build_model(rc.model, gen);
  for (const auto& [name, p] : model->named_parameters()) {
    EXPECT_NE(name, "conv1.weight");
    EXPECT_NE(name.rfind("layer1.", 0), 0u) << name;
  }
  bool kept = false;
  for (const auto& [name, b] : model->named_buffers()) kept = kept || name == "layer1.0.conv1.weight";
  EXPECT_TRUE(kept);
  EXPECT_EQ(model->named_parameters().size(), 13u);  // resnet's 20 trained tensors less conv1 and layer1's 6
}

// ONNX out: the imported graph written back with the trained initializers; read again, the same
// weights, running statistics and outputs, bit for bit.
TEST(OnnxModel, SaveOnnxWritesTheTrainedWeightsBack) {
  const auto r = onnx_reference("resnet");
  nn::onnx::OnnxModel model(onnx_model("resnet.onnx"));
  nn::SGDOptions o;
  o.lr = 0.05;
  nn::SGD opt(model.parameters(), o);
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    probe_loss(model.forward_many(inputs_of(r, 1, false)), r).backward();
    opt.step();
  }
  TempDir dir;
  model.save_onnx(dir.file("trained.onnx"));
  nn::onnx::OnnxModel back(dir.file("trained.onnx"));
  const auto want = model.state_dict(), got = back.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.to_vector<float>(), want[i].second.to_vector<float>()) << got[i].first;
  }
  model.eval();
  back.eval();
  EXPECT_EQ(back.forward(ref(r, "input.0")).to_vector<float>(), model.forward(ref(r, "input.0")).to_vector<float>());
  // The trained weights differ from the file's: the write is not the original handed back.
  nn::onnx::OnnxModel original(onnx_model("resnet.onnx"));
  EXPECT_NE(original.state_dict()[0].second.to_vector<float>(), got[0].second.to_vector<float>());
}

// The decoder's causal mask: its float `bias` buffer (read only through `bias[:, :, :T, :T] == 0`) is
// not a parameter, and logits at position t do not depend on the tokens after t, at any length up to
// the position table's 6 (the mask sliced to T).
TEST(OnnxModel, DecoderMaskIsABufferAndCausalAtEveryLength) {
  nn::onnx::OnnxModel model(onnx_model("decoder.onnx"));
  for (const auto& [name, t] : model.named_parameters()) EXPECT_NE(name, "bias");
  bool buffer = false;
  for (const auto& [name, t] : model.named_buffers()) buffer = buffer || name == "bias";
  EXPECT_TRUE(buffer);
  model.eval();
  for (int64_t tokens : {1, 2, 6}) {
    std::vector<int64_t> ids(static_cast<size_t>(2 * tokens));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 5 + 3) % 11);
    const Tensor a = model.forward(Tensor::from_vector<int64_t>(ids, {2, tokens}));
    ASSERT_EQ(a.shape(), (Shape{2, tokens, 11}));
    ids[static_cast<size_t>(tokens - 1)] = (ids[static_cast<size_t>(tokens - 1)] + 1) % 11;  // sample 0's last token
    const Tensor b = model.forward(Tensor::from_vector<int64_t>(ids, {2, tokens}));
    const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
    for (size_t i = 0; i < static_cast<size_t>((tokens - 1) * 11); ++i)
      EXPECT_EQ(av[i], bv[i]) << "T " << tokens << ": position " << i / 11 << " saw a later token";
    bool last_changed = false;
    for (int64_t v = 0; v < 11; ++v) last_changed = last_changed || av[static_cast<size_t>((tokens - 1) * 11 + v)] !=
                                                                     bv[static_cast<size_t>((tokens - 1) * 11 + v)];
    EXPECT_TRUE(last_changed) << "T " << tokens;
    for (size_t i = static_cast<size_t>(tokens * 11); i < av.size(); ++i) EXPECT_EQ(av[i], bv[i]);  // sample 1
  }
}
