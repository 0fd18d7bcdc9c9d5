// The GPT on the CUDA backend against the CPU: the whole model through nn::GPT, runtime/ops and the
// autograd engine with every tensor on the device, in f32 and under bf16 autocast. Each of its paths
// has its own test; this is their composition as a training step runs them: the residual adds fused
// with the LayerNorms, the token-major attention kernels, cross-entropy's gradient made in its
// forward, gradients added straight into .grad (and, the second time, added to what is there), the
// position table's slice, the token ids checked on the host.
#include <cmath>
#include <optional>
#include <string>

#include "kernels/cpu/attention_bf16.h"
#include "nn/gpt.h"
#include "runtime/autocast.h"
#include "runtime/ops.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class GptOps : public BackendTest {};

// |got - want| / |want| over all elements (2-norms), got on any device.
double relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    diff += (g[i] - w[i]) * (g[i] - w[i]);
    norm += w[i] * w[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

TEST_P(GptOps, LossAndGradientsOfTwoBackwardsMatchCpu) {
  const nn::GPTConfig cfg = nn::GPTConfig::preset("tiny");  // 2 layers, 2 heads, width 32, context 16
  const int64_t batch = 3, t = cfg.context;
  const Tensor all = random_tensor({batch, t + 1}, DType::i64, 301, 0, 256);  // token ids in [0, 256)
  std::vector<int64_t> v = all.to_vector<int64_t>(), xs, ys;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < t; ++i) {
      xs.push_back(v[static_cast<size_t>(b * (t + 1) + i)]);
      ys.push_back(v[static_cast<size_t>(b * (t + 1) + i + 1)]);
    }
  const Tensor x = Tensor::from_vector(xs, {batch, t}), y = Tensor::from_vector(ys, {batch * t});
  for (bool amp : {false, true}) {
    SCOPED_TRACE(amp ? "bf16 autocast" : "f32");
    // f32: the devices differ in summation orders only (seen under the emulator: ~4e-7). bf16: also
    // in where 16-bit values round; the emulator's GEMMs are the CPU's, so there only the other
    // kernels' rounding differs: ~2e-5 seen where the CPU's bf16 attention runs on AMX tiles and
    // rounds its probabilities to bf16 as the device kernels do, ~7e-3 where it keeps them f32 (an
    // AMD EPYC). A GPU's cuBLAS rounds its own way.
    const double sim_bf16_tol = kernels::attention_bf16_on_tiles() ? 2e-4 : 2e-2;
    const double tol = !amp ? 2e-5 : dev().kind == DeviceKind::SIM ? sim_bf16_tol : 5e-2;
    Generator g_cpu(7), g_dev(7);
    nn::GPT on_cpu(cfg, g_cpu), on_dev(cfg, g_dev);
    on_dev.to(dev());
    auto loss_of = [&](nn::GPT& model, Device d) {
      std::optional<AutocastGuard> autocast;
      if (amp) autocast.emplace(DType::bf16);
      Tensor logits = model(x.to(d));
      return ops::cross_entropy(ops::reshape(logits, {-1, cfg.vocab_size}), y.to(d));
    };
    for (int pass = 0; pass < 2; ++pass) {  // the second adds into the .grad the first made
      Tensor want = loss_of(on_cpu, kCPU), got = loss_of(on_dev, dev());
      EXPECT_EQ(got.device(), dev());
      EXPECT_LT(std::abs(got.item() - want.item()), tol * std::abs(want.item())) << "loss, pass " << pass;
      want.backward();
      got.backward();
    }
    const auto cpu_params = on_cpu.named_parameters(), dev_params = on_dev.named_parameters();
    ASSERT_EQ(cpu_params.size(), dev_params.size());
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      const auto& [name, p] = cpu_params[i];
      const Tensor& q = dev_params[i].second;
      ASSERT_EQ(dev_params[i].first, name);
      ASSERT_TRUE(q.grad().defined()) << name;
      EXPECT_EQ(q.grad().device(), dev()) << name;
      EXPECT_LT(relative_error(q.grad(), p.grad()), tol) << name << "'s gradient after two backwards";
    }
  }
}

TANDEM_BACKEND_SUITE(GptOps);

}  // namespace
}  // namespace tandem::testing
