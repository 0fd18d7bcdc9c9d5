// checkpoint(): forward under NoGradGuard, one autograd node whose backward recomputes fn with
// the forward's RNG offset and autocast state, then runs a nested backward through it.
#include "runtime/checkpoint_activations.h"

#include <memory>
#include <optional>

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"

namespace tandem {

namespace {
class GradModeGuard {
 public:
  explicit GradModeGuard(bool on) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(on); }
  ~GradModeGuard() { GradMode::set_enabled(prev_); }

 private:
  bool prev_;
};
}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options) {
  Generator* gen = options.generator ? options.generator : &default_generator();
  if (!GradMode::is_enabled()) return fn(inputs);  // nothing to save: evaluation

  const uint64_t seed = gen->seed(), offset = gen->offset();
  const std::optional<DType> autocast = autocast_dtype();
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  // Fresh handles: an output that is an input (or a view of one) must not get our grad_fn.
  for (Tensor& o : outputs) o = o.detach();

  // A leaf that requires grad makes the node record even when no input requires grad.
  Tensor anchor = Tensor::zeros({}, DType::f32, inputs.empty() ? kCPU : inputs[0].device());
  anchor.set_requires_grad(true);
  std::vector<Tensor> node_inputs = inputs;
  node_inputs.push_back(anchor);

  std::vector<Tensor> saved;
  for (const Tensor& t : inputs) saved.push_back(t.detach());
  std::vector<bool> wants_grad;
  for (const Tensor& t : inputs) wants_grad.push_back(t.requires_grad());
  std::vector<Tensor> preserve = options.preserve;

  auto backward = [fn, saved, wants_grad, preserve, gen, seed, offset, autocast,
                   n_out = outputs.size()](const std::vector<Tensor>& grad_outputs) -> std::vector<Tensor> {
    std::vector<Tensor> x;
    for (size_t i = 0; i < saved.size(); ++i) {
      Tensor d = saved[i].detach();
      if (wants_grad[i]) d.set_requires_grad(true);
      x.push_back(d);
    }
    std::vector<Tensor> kept;
    for (const Tensor& p : preserve) kept.push_back(p.clone());
    // Recompute with the forward's RNG offset and autocast state, grad on.
    const uint64_t now_seed = gen->seed(), now_offset = gen->offset();
    gen->set_state(seed, offset);
    std::vector<Tensor> y;
    {
      GradModeGuard grad_on(true);
      std::optional<AutocastGuard> ac;
      ac.emplace(autocast.value_or(DType::f16), autocast.has_value());
      y = fn(x);
    }
    gen->set_state(now_seed, now_offset);
    for (size_t i = 0; i < preserve.size(); ++i) {
      Tensor p = preserve[i];
      p.copy_(kept[i]);
    }
    TANDEM_CHECK(y.size() == n_out, "checkpoint: the recompute returned {} outputs, the forward {}", y.size(), n_out);
    std::vector<Tensor> roots, grads;
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i].requires_grad()) {
        roots.push_back(y[i]);
        grads.push_back(grad_outputs[i]);
      }
    if (!roots.empty()) run_backward(roots, grads, /*retain_graph=*/false);
    std::vector<Tensor> out;
    for (size_t i = 0; i < x.size(); ++i) out.push_back(wants_grad[i] ? x[i].grad() : Tensor());
    out.push_back(Tensor());  // the anchor
    return out;
  };
  return record("CheckpointBackward", node_inputs, outputs, backward);
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options) {
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
                    std::vector<Tensor>{input}, options)[0];
}

}  // namespace tandem
