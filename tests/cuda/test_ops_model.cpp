// Op level on the CUDA backend: a small conv net's forward and backward through runtime/ops and the
// autograd engine, with every tensor on the device, against the same net on the CPU. This runs the
// backend's host code (allocation, copies, scratch, dispatch) together with its kernels.
#include "runtime/autograd.h"
#include "runtime/ops.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class ModelOps : public BackendTest {};

struct Net {
  Tensor conv_w, conv_b, ln_w, ln_b, fc_w, fc_b;
};

Net make_net(Device d) {
  Net n;
  n.conv_w = random_tensor({4, 2, 3, 3}, DType::f32, 201, -0.5, 0.5).to(d).set_requires_grad();
  n.conv_b = random_tensor({4}, DType::f32, 202, -0.1, 0.1).to(d).set_requires_grad();
  n.ln_w = random_tensor({36}, DType::f32, 203, 0.8, 1.2).to(d).set_requires_grad();
  n.ln_b = random_tensor({36}, DType::f32, 204, -0.1, 0.1).to(d).set_requires_grad();
  n.fc_w = random_tensor({5, 36}, DType::f32, 205, -0.3, 0.3).to(d).set_requires_grad();
  n.fc_b = random_tensor({5}, DType::f32, 206, -0.1, 0.1).to(d).set_requires_grad();
  return n;
}

// x [3, 2, 7, 7] -> conv 3x3 pad 1 -> gelu -> max pool 2 -> [3, 4, 3, 3] -> flatten -> layer norm
// -> dropout-free linear -> softmax cross-entropy against fixed targets.
Tensor loss_of(const Net& n, const Tensor& x, const Tensor& target) {
  Tensor h = ops::conv2d(x, n.conv_w, n.conv_b, {1, 1}, {1, 1});
  h = ops::gelu(h);
  h = ops::max_pool2d(h, {2, 2});
  h = ops::flatten(h, 1);
  h = ops::layer_norm(h, 1, n.ln_w, n.ln_b);
  h = ops::linear(ops::tanh(h), n.fc_w, n.fc_b);
  return ops::cross_entropy(h, target) + ops::mean(ops::mul(h, h)) * 0.01;
}

TEST_P(ModelOps, ForwardAndBackwardMatchCpu) {
  Tensor x = random_tensor({3, 2, 7, 7}, DType::f32, 207);
  Tensor target = Tensor::from_vector(std::vector<int64_t>{1, 4, 0}, {3});
  Net cpu = make_net(kCPU), dev_net = make_net(dev());
  Tensor l_cpu = loss_of(cpu, x, target);
  Tensor l_dev = loss_of(dev_net, x.to(dev()), target.to(dev()));
  EXPECT_EQ(l_dev.device(), dev());
  expect_close(l_dev, l_cpu, 1e-5, "loss");
  l_cpu.backward();
  l_dev.backward();
  const std::vector<std::pair<const char*, std::pair<Tensor, Tensor>>> params{
      {"conv_w", {cpu.conv_w, dev_net.conv_w}}, {"conv_b", {cpu.conv_b, dev_net.conv_b}},
      {"ln_w", {cpu.ln_w, dev_net.ln_w}},       {"ln_b", {cpu.ln_b, dev_net.ln_b}},
      {"fc_w", {cpu.fc_w, dev_net.fc_w}},       {"fc_b", {cpu.fc_b, dev_net.fc_b}}};
  for (const auto& [name, pair] : params) {
    ASSERT_TRUE(pair.second.grad().defined()) << name;
    EXPECT_EQ(pair.second.grad().device(), dev()) << name;
    expect_close(pair.second.grad(), pair.first.grad(), 1e-4, std::string(name) + " grad");
  }
}

// The cnn's fused block: on the CPU the batch-norm kernels apply relu and the max pool themselves;
// a device without those fused tables runs the epilogue as the separate ops. Both must agree.
TEST_P(ModelOps, BatchNormEpilogueMatchesCpu) {
  ops::BatchNormEpilogue e;
  e.relu = true;
  e.max_pool = true;
  e.pool_kernel = {2, 2};
  Tensor x = random_tensor({4, 3, 7, 6}, DType::f32, 211);
  Tensor dy = random_tensor({4, 3, 3, 3}, DType::f32, 212, -1, 1);
  auto run = [&](Device d) {
    Tensor xl = x.to(d).set_requires_grad();
    Tensor w = random_tensor({3}, DType::f32, 213, 0.5, 1.5).to(d).set_requires_grad();
    Tensor b = random_tensor({3}, DType::f32, 214, -1.0, 0.0).to(d).set_requires_grad();
    Tensor rm = Tensor::zeros({3}, DType::f32, d), rv = Tensor::ones({3}, DType::f32, d);
    Tensor y = ops::batch_norm(xl, w, b, rm, rv, true, 0.1, 1e-5, e);
    auto g = grad({y}, {xl, w, b}, {dy.to(d)});
    return std::vector<Tensor>{y, g[0], g[1], g[2], rm, rv};
  };
  auto cpu = run(kCPU), dev_out = run(dev());
  const char* what[] = {"y", "dx", "dw", "db", "running_mean", "running_var"};
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(dev_out[i].device(), dev()) << what[i];
    expect_close(dev_out[i], cpu[i], 1e-4, what[i]);
  }
}

TANDEM_BACKEND_SUITE(ModelOps);

}  // namespace
}  // namespace tandem::testing
