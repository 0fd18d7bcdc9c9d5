// resmlp: an MLP with residual blocks, h + Linear(ReLU(Linear(h))), on flat features. The example of
// a model added to tandem through the registry alone: this file, and its test (tests/models).
#include "nn/config/run_config.h"
#include "nn/layers.h"
#include "nn/model_registry.h"
#include "runtime/ops/elementwise.h"

namespace tandem::nn {

namespace {

// Children "input" (Linear in -> hidden), "block0".."blockN-1" (Sequential Linear-ReLU-Linear on
// hidden), "output" (Linear hidden -> out). forward reaches them through the registry (children()),
// so that a clone runs its own.
class ResMLP final : public Cloneable<ResMLP> {
 public:
  ResMLP(int64_t in, int64_t hidden, int64_t blocks, int64_t out, Generator& gen) {
    register_module("input", std::make_shared<Linear>(in, hidden, true, gen));
    for (int64_t b = 0; b < blocks; ++b) {
      auto block = std::make_shared<Sequential>();
      block->emplace_back<Linear>(hidden, hidden, true, gen);
      block->emplace_back<ReLU>();
      block->emplace_back<Linear>(hidden, hidden, true, gen);
      register_module("block" + std::to_string(b), block);
    }
    register_module("output", std::make_shared<Linear>(hidden, out, true, gen));
  }

  Tensor forward(const Tensor& x) override {
    const auto& c = children();
    Tensor h = ops::relu(c.front().second->forward(x));
    for (size_t b = 1; b + 1 < c.size(); ++b) h = ops::relu(ops::add(h, c[b].second->forward(h)));
    return c.back().second->forward(h);
  }
  std::string type_name() const override { return "ResMLP"; }
};

int64_t whole(const config::ModelConfig& m, const char* name) { return static_cast<int64_t>(m.value(name)); }

ModelEntry resmlp_entry() {
  ModelEntry e;
  e.type = "resmlp";
  e.summary = "an MLP of residual blocks (x + Linear(ReLU(Linear(x)))) on flat features";
  e.input = ModelInput::Flat;
  e.dataset = "fashion-mnist";
  e.parameters = {{"in_features", 784, 1, 1 << 24, true, "input features (Fashion-MNIST: 784 pixels)"},
                  {"hidden", 256, 1, 1 << 16, true, "width of the residual stream"},
                  {"blocks", 2, 0, 1024, true, "residual blocks"},
                  {"out_features", 10, 1, 1 << 24, true, "outputs (Fashion-MNIST: 10 classes)"}};
  e.build = [](const config::ModelConfig& m, Generator& gen) -> std::shared_ptr<Module> {
    return std::make_shared<ResMLP>(whole(m, "in_features"), whole(m, "hidden"), whole(m, "blocks"),
                                    whole(m, "out_features"), gen);
  };
  e.flops_per_sample = [](const config::ModelConfig& m) {
    const double in = m.value("in_features"), h = m.value("hidden"), out = m.value("out_features");
    return 3.0 * 2.0 * (in * h + m.value("blocks") * 2.0 * h * h + h * out);  // GEMMs; backward 2x forward
  };
  return e;
}

}  // namespace

TANDEM_REGISTER_MODEL(resmlp_entry);

}  // namespace tandem::nn
