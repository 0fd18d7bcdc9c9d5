// What the importer refuses, and how it says so: an op it does not run (named with its node and
// opset, at load, never a wrong result later), a corrupt or missing file, a wrong input.
#include <gtest/gtest.h>

#include <string>

#include "nn/onnx/onnx_model.h"
#include "runtime/error.h"
#include "tests/onnx/onnx_test_util.h"

using namespace tandem;
using tandem::testing::onnx_model;

namespace {

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

void expect_has(const std::string& message, const std::string& piece) {
  EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
}

}  // namespace

TEST(OnnxErrors, UnsupportedOpIsRefusedAtLoadNamingNodeOpAndOpset) {
  const std::string m = error_of<ValueError>([] { nn::onnx::OnnxModel model(onnx_model("unsupported.onnx")); });
  expect_has(m, onnx_model("unsupported.onnx"));
  expect_has(m, "op CumSum (opset 13) is not supported by tandem");
  expect_has(m, "node '");
  expect_has(m, "Conv");  // the list of what it runs
}

TEST(OnnxErrors, CorruptAndMissingFiles) {
  expect_has(error_of<ValueError>([] { nn::onnx::OnnxModel model(onnx_model("corrupt.onnx")); }), "corrupt.onnx: not");
  expect_has(error_of<IOError>([] { nn::onnx::OnnxModel model(onnx_model("no-such.onnx")); }),
             "cannot open the ONNX model");
}

TEST(OnnxErrors, WrongInputsNameTheInput) {
  nn::onnx::OnnxModel model(onnx_model("cnn.onnx"));  // x [batch, 1, 8, 8]
  expect_has(error_of<ValueError>([&] { model.forward(Tensor::zeros({2, 1, 8, 7})); }),
             "input 'x' has shape [2, 1, 8, 7]; the model takes [-1, 1, 8, 8]");
  expect_has(error_of<ValueError>([&] { model.forward(Tensor::zeros({2, 1, 8, 8}, DType::f64)); }),
             "input 'x' is f64; the model takes f32");
  expect_has(error_of<ValueError>([&] { model.forward_many({}); }), "takes 1 input, got 0");
  nn::onnx::OnnxModel two(onnx_model("two_io.onnx"));
  expect_has(error_of<ValueError>([&] { two.forward(Tensor::zeros({2, 5})); }), "call forward_many");
  // Any batch, whatever size the export was traced with.
  EXPECT_EQ(model.forward(Tensor::zeros({7, 1, 8, 8})).shape(), (Shape{7, 5}));
}

TEST(OnnxErrors, FrozenNameThatMatchesNothingIsATypo) {
  nn::onnx::ImportOptions o;
  o.frozen = {"layer9."};
  expect_has(error_of<ValueError>([&] { nn::onnx::OnnxModel model(onnx_model("resnet.onnx"), o); }),
             "frozen 'layer9.' names no initializer");
}

// x[:, ::2] exports a Slice with step 2: refused at its first run naming the node and the steps, never
// sliced with step 1.
TEST(OnnxErrors, StridedSliceIsRefusedNamingTheNode) {
  nn::onnx::OnnxModel model(onnx_model("strided_slice.onnx"));
  const std::string m = error_of<ValueError>([&] { model.forward(Tensor::zeros({2, 4})); });
  expect_has(m, "strided_slice.onnx: node '");
  expect_has(m, "(Slice, opset 13): steps [2]: only step 1 is supported");
}

// The decoder's positions are an Embedding of 6 rows: a 7th token is an error naming the lookup,
// not a read past the table or a mask of the wrong size.
TEST(OnnxErrors, DecoderLongerThanItsPositionTable) {
  nn::onnx::OnnxModel model(onnx_model("decoder.onnx"));
  const std::string m = error_of<Error>([&] { model.forward(Tensor::zeros({1, 7}, DType::i64)); });
  expect_has(m, "6");
}

// unet_cubic.onnx is the U-Net with its Resize's mode set to cubic: refused, naming the node and the
// attribute, never run as another mode.
TEST(OnnxErrors, CubicResizeIsRefusedNamingNodeAndMode) {
  nn::onnx::OnnxModel model(onnx_model("unet_cubic.onnx"));
  const std::string m = error_of<ValueError>([&] { model.forward(Tensor::zeros({2, 3, 8, 8})); });
  expect_has(m, "unet_cubic.onnx");
  expect_has(m, "node '/up1/Resize' (Resize, opset 13)");
  expect_has(m, "mode cubic is not supported");
}
