// The resampling ops on the CUDA backend against the CPU: conv_transpose2d (conv2d's kernel tables with
// the roles turned round, output_padding included) and Resize's matrix products, forward and backward.
#include "nn/onnx/onnx_op_parts.h"
#include "runtime/autograd.h"
#include "runtime/ops/conv.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class ResampleOps : public BackendTest {};

// y and the gradients of sum(y * r) for inputs `in` on `device`, all brought back to the CPU.
template <class F>
std::vector<Tensor> run_with_grads(F&& f, const std::vector<Tensor>& in, const Tensor& r, Device device) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : in) {
    Tensor l = t.to(device);
    l.set_requires_grad(true);
    leaves.push_back(l);
  }
  Tensor y = f(leaves);
  std::vector<Tensor> out{y.detach().to(kCPU)};
  for (const Tensor& g : grad({y}, leaves, {r.to(device)})) out.push_back(g.to(kCPU));
  return out;
}

TEST_P(ResampleOps, ConvTransposeMatchesCpu) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = random_tensor({2, 3, 4, 5}, dt, 401, -1, 1), w = random_tensor({3, 4, 3, 2}, dt, 402, -1, 1);
    Tensor b = random_tensor({4}, dt, 403, -1, 1), r = random_tensor({2, 4, 8, 10}, dt, 404, -1, 1);
    auto f = [](const std::vector<Tensor>& t) {
      return ops::conv_transpose2d(t[0], t[1], t[2], {2, 2}, {1, 0}, {1, 0});
    };
    const std::vector<Tensor> want = run_with_grads(f, {x, w, b}, r, kCPU);
    const std::vector<Tensor> got = run_with_grads(f, {x, w, b}, r, dev());
    const char* names[] = {"y", "dx", "dw", "db"};
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(got[i], want[i], tol(dt == DType::f64 ? 1e-12 : 1e-5, 1e-4),
                   std::string(names[i]) + " " + dtype_name(dt));
  }
}

TEST_P(ResampleOps, ResizeMatchesCpu) {
  using nn::onnx::detail::ResizeCoord;
  nn::onnx::detail::ResizeRule rule;
  rule.linear = true;
  rule.coord = ResizeCoord::HalfPixel;
  Tensor x = random_tensor({2, 3, 4, 5}, DType::f32, 405, -1, 1);
  Tensor r = random_tensor({2, 3, 8, 10}, DType::f32, 406, -1, 1);
  auto f = [&](const std::vector<Tensor>& t) {
    return nn::onnx::detail::resize_spatial(t[0], rule, {2, 3, 8, 10}, {1, 1, 2, 2});
  };
  const std::vector<Tensor> want = run_with_grads(f, {x}, r, kCPU), got = run_with_grads(f, {x}, r, dev());
  expect_close(got[0], want[0], tol(1e-6, 1e-5), "y");
  expect_close(got[1], want[1], tol(1e-6, 1e-5), "dx");
}

TANDEM_BACKEND_SUITE(ResampleOps);

}  // namespace
}  // namespace tandem::testing
