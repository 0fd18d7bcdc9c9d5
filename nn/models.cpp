// The mlp and cnn of tandem-train, and their FLOP counts.
#include "nn/models.h"

#include "nn/config/run_config.h"
#include "nn/layers.h"
#include "nn/model_registry.h"

namespace tandem::nn {

std::shared_ptr<Sequential> make_mlp(Generator& gen) {
  auto m = std::make_shared<Sequential>();
  m->emplace_back<Linear>(784, 512, true, gen);
  m->emplace_back<ReLU>();
  m->emplace_back<Linear>(512, 512, true, gen);
  m->emplace_back<ReLU>();
  m->emplace_back<Linear>(512, 10, true, gen);
  return m;
}

std::shared_ptr<Sequential> make_cnn(Generator& gen) {
  auto m = std::make_shared<Sequential>();
  m->emplace_back<Conv2d>(1, 32, 3, 1, 1, true, gen);
  m->emplace_back<BatchNorm2d>(32);
  m->emplace_back<ReLU>();
  m->emplace_back<MaxPool2d>(2);
  m->emplace_back<Conv2d>(32, 64, 3, 1, 1, true, gen);
  m->emplace_back<BatchNorm2d>(64);
  m->emplace_back<ReLU>();
  m->emplace_back<MaxPool2d>(2);
  m->emplace_back<Flatten>();
  m->emplace_back<Linear>(3136, 128, true, gen);
  m->emplace_back<ReLU>();
  m->emplace_back<Linear>(128, 10, true, gen);
  return m;
}

std::shared_ptr<Sequential> make_model(const std::string& name, Generator& gen) {
  if (name == "mlp") return make_mlp(gen);
  if (name == "cnn") return make_cnn(gen);
  TANDEM_FAIL(Value, "unknown model '{}'; choose mlp or cnn", name);
}

namespace {
double gemm(double m, double n, double k) { return 2.0 * m * n * k; }
// A conv as its im2col GEMM for one sample: [Ho*Wo, Cin*k*k] @ [Cin*k*k, Cout].
double conv(double ho, double wo, double cin, double cout, double k) { return gemm(ho * wo, cout, cin * k * k); }
}  // namespace

double cnn_flops_per_sample() {
  const double forward = conv(28, 28, 1, 32, 3) + conv(14, 14, 32, 64, 3) + gemm(1, 128, 3136) + gemm(1, 10, 128);
  return 3.0 * forward;  // forward + backward (2x forward)
}

double model_flops_per_sample(const std::string& name) {
  const ModelEntry& e = model_entry(name);
  TANDEM_CHECK(static_cast<bool>(e.flops_per_sample), "model_flops_per_sample: model type {} has no FLOP count", e.type);
  return e.flops_per_sample(default_model_config(name));
}

}  // namespace tandem::nn
