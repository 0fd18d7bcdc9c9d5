// The registry entries of the models a run config describes with fields of its own (mlp, cnn,
// sequential, gpt): their builders, FLOP counts and tandem-train's defaults. Other models declare
// their entries in their own files (nn/models/).
#include <fmt/format.h>

#include "nn/config/layer_specs.h"
#include "nn/config/run_config.h"
#include "nn/layers.h"
#include "nn/model_registry.h"
#include "nn/models.h"
#include "runtime/ops/shape.h"

namespace tandem::nn::config {

namespace {

// TorchFort's mlp flattens [N, ...] inputs to [N, -1]. A Sequential that does so first keeps the
// children's names those of nn::make_mlp ("0.weight", "2.weight", ...), which a Flatten child would
// shift.
class FlattenedSequential final : public Sequential {
 public:
  Tensor forward(const Tensor& x) override { return Sequential::forward(x.dim() > 2 ? ops::flatten(x, 1, -1) : x); }
  std::string type_name() const override { return "FlattenedSequential"; }
  std::shared_ptr<Module> clone() const override {
    auto copy = std::make_shared<FlattenedSequential>(*this);
    copy->deep_copy_state();
    return copy;
  }
};

// mlp: as nn::make_mlp (same layers, names and draws from gen for its sizes), plus dropout.
std::shared_ptr<Module> build_mlp(const ModelConfig& model, Generator& gen) {
  std::shared_ptr<Sequential> mlp =
      model.flatten_non_batch_dims ? std::make_shared<FlattenedSequential>() : std::make_shared<Sequential>();
  const std::vector<int64_t>& sizes = model.layer_sizes;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    mlp->emplace_back<Linear>(sizes[i], sizes[i + 1], true, gen);
    if (i + 2 == sizes.size()) break;  // no activation after the output layer
    mlp->emplace_back<ReLU>();
    if (model.dropout > 0.0) mlp->emplace_back<Dropout>(model.dropout, default_generator());
  }
  return mlp;
}

ModelEntry mlp_entry() {
  ModelEntry e;
  e.type = "mlp";
  e.summary = "linear layers with ReLU between (tandem-train: 784-512-512-10 on Fashion-MNIST)";
  e.input = ModelInput::Flat;
  e.dataset = "fashion-mnist";
  e.build = build_mlp;
  e.flops_per_sample = [](const ModelConfig& m) {
    double forward = 0;
    for (size_t i = 0; i + 1 < m.layer_sizes.size(); ++i)
      forward += 2.0 * static_cast<double>(m.layer_sizes[i]) * static_cast<double>(m.layer_sizes[i + 1]);
    return 3.0 * forward;  // nn/models.h: backward = 2x forward
  };
  e.app_defaults = [](ModelConfig& m) {
    m.layer_sizes = {784, 512, 512, 10};
    m.flatten_non_batch_dims = false;  // a plain Sequential: nn::make_mlp's
  };
  return e;
}

ModelEntry cnn_entry() {
  ModelEntry e;
  e.type = "cnn";
  e.summary = "2 conv + BatchNorm + pool blocks and 2 linear layers on 28x28 images (Fashion-MNIST)";
  e.input = ModelInput::Image;
  e.dataset = "fashion-mnist";
  e.build = [](const ModelConfig&, Generator& gen) -> std::shared_ptr<Module> {
    auto cnn = make_cnn(gen);
    cnn->fuse_batchnorm_epilogues();  // same names and results, fewer passes over the activations
    return cnn;
  };
  e.flops_per_sample = [](const ModelConfig&) { return cnn_flops_per_sample(); };
  return e;
}

ModelEntry sequential_entry() {
  ModelEntry e;
  e.type = "sequential";
  e.summary = "the layers of model.parameters.layers in order (nn/config/layer_specs.h)";
  e.build = [](const ModelConfig& model, Generator& gen) -> std::shared_ptr<Module> {
    auto seq = std::make_shared<Sequential>();
    for (const LayerConfig& layer : model.layers) seq->push_back(make_layer(layer, gen));
    seq->fuse_batchnorm_epilogues();
    return seq;
  };
  return e;
}

ModelEntry gpt_entry() {
  ModelEntry e;
  e.type = "gpt";
  e.summary = "a GPT-2-style transformer (byte tokens, or a --tokenizer's) trained on next-token prediction";
  e.input = ModelInput::Tokens;
  e.dataset = "text";
  e.build = [](const ModelConfig& model, Generator& gen) -> std::shared_ptr<Module> {
    return std::make_shared<GPT>(model.gpt, gen);
  };
  return e;
}

}  // namespace

TANDEM_REGISTER_MODEL(mlp_entry);
TANDEM_REGISTER_MODEL(cnn_entry);
TANDEM_REGISTER_MODEL(sequential_entry);
TANDEM_REGISTER_MODEL(gpt_entry);

}  // namespace tandem::nn::config
