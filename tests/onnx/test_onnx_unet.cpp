// A U-Net exported by PyTorch (ConvTranspose, Resize, Concat with the skips) against PyTorch 1.13 and
// onnxruntime as test_onnx_import.cpp compares the other models: outputs in train and eval mode, the
// gradients of the probe loss, 10 SGD steps; and what Resize refuses, named at run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "nn/onnx/onnx_model.h"
#include "nn/optim/sgd.h"
#include "runtime/autograd.h"
#include "runtime/error.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/reduce.h"
#include "tests/onnx/onnx_test_util.h"

using namespace tandem;
using tandem::testing::expect_close;
using tandem::testing::onnx_model;
using tandem::testing::onnx_reference;
using tandem::testing::ref;

namespace {

// L = sum(output * probe), the references' loss (one input, one output).
Tensor probe_loss(const Tensor& y, const serialization::SafetensorsContents& r) {
  return ops::sum(ops::mul(y, ref(r, "probe.0")));
}

class OnnxUnet : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(OnnxUnet, ForwardInTrainAndEvalModeMatchesPyTorchAndOnnxruntime) {
  const auto r = onnx_reference("unet");
  nn::onnx::OnnxModel eval_model(onnx_model(GetParam()));
  eval_model.eval();
  const double eval = expect_close(eval_model.forward(ref(r, "input.0")), ref(r, "eval.output.0"), 1e-5, "eval");
  nn::onnx::OnnxModel model(onnx_model(GetParam()));
  const Tensor y = model.forward(ref(r, "input.0"));
  const double train = expect_close(y, ref(r, "train.output.0"), 1e-5, "train");
  const double ort = expect_close(y, ref(r, "ort.output.0"), 1e-5, "onnxruntime");
  std::printf("%s: outputs max |tandem - PyTorch| train %.3g, eval %.3g; |tandem - onnxruntime| %.3g\n", GetParam(),
              train, eval, ort);
}

TEST_P(OnnxUnet, GradientsMatchPyTorch) {
  const auto r = onnx_reference("unet");
  nn::onnx::OnnxModel model(onnx_model(GetParam()));
  Tensor x = ref(r, "input.0").clone();
  x.set_requires_grad(true);
  probe_loss(model.forward(x), r).backward();
  double worst = 0;
  size_t compared = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    worst = std::max(worst, expect_close(p.grad(), ref(r, "grad." + name), 1e-4, "grad." + name));
    ++compared;
  }
  size_t references = 0;
  for (const auto& [name, t] : r.tensors)
    references += name.rfind("grad.", 0) == 0 && name.rfind("grad.input.", 0) != 0;
  EXPECT_EQ(compared, references);
  worst = std::max(worst, expect_close(x.grad(), ref(r, "grad.input.0"), 1e-4, "grad.input.0"));
  std::printf("%s: gradients max |tandem - PyTorch| %.3g over %zu parameters and the input\n", GetParam(), worst,
              compared);
}

TEST_P(OnnxUnet, TenSgdStepsMatchPyTorch) {
  const auto r = onnx_reference("unet");
  nn::onnx::OnnxModel model(onnx_model(GetParam()));
  nn::SGDOptions o;
  o.lr = 0.01;
  o.momentum = 0.9;
  nn::SGD opt(model.parameters(), o);
  for (int s = 0; s < 10; ++s) {
    opt.zero_grad();
    probe_loss(model.forward(ref(r, "input.0")), r).backward();
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
  EXPECT_EQ(compared, references);
  std::printf("%s: after 10 SGD steps max |tandem - PyTorch| %.3g over %zu tensors\n", GetParam(), worst, compared);
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxUnet, ::testing::Values("unet.onnx", "unet_opset17.onnx"), [](const auto& info) {
  std::string name = info.param;
  return name.substr(0, name.find('.'));
});

// unet_cubic.onnx is the U-Net with its Resize's mode set to cubic: refused, naming the node and the
// attribute, never run as another mode.
TEST(OnnxUnetErrors, CubicResizeIsRefusedNamingNodeAndMode) {
  nn::onnx::OnnxModel model(onnx_model("unet_cubic.onnx"));
  try {
    model.forward(Tensor::zeros({2, 3, 8, 8}));
    ADD_FAILURE() << "mode cubic ran";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    for (const char* piece :
         {"unet_cubic.onnx", "node '/up1/Resize' (Resize, opset 13)", "mode cubic is not supported"})
      EXPECT_NE(m.find(piece), std::string::npos) << "'" << piece << "' not in: " << m;
  }
}
