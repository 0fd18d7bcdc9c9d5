// ZeroOptimizer: the shard of each bucket as views of the parameters, the shard's optimizer, and
// the all-gather of the updated parameters through the buckets.
#include "nn/parallel/zero_optimizer.h"

#include <algorithm>
#include <unordered_map>

#include "nn/optim/fused_optimizer.h"
#include "nn/parallel/reducer.h"
#include "runtime/autograd.h"

namespace tandem::nn::parallel {

ZeroOptimizer::ZeroOptimizer(DistributedDataParallel& ddp, std::unique_ptr<Optimizer> full)
    : Optimizer({}), ddp_(ddp), stage_(ddp.options().zero_stage) {
  TANDEM_CHECK(full != nullptr, "ZeroOptimizer: no optimizer given");
  TANDEM_CHECK(stage_ == 1 || stage_ == 2,
               "ZeroOptimizer: DistributedDataParallel has zero_stage {}; construct it with zero_stage 1 or 2",
               stage_);
  TANDEM_CHECK(full->step_count() == 0,
               "ZeroOptimizer: optimizer {} has taken {} steps already; give it before its first step (its state "
               "is rebuilt on this rank's shard)",
               full->type_name(), full->step_count());
  auto* fused = dynamic_cast<const FusedOptimizer*>(full.get());
  if (fused)
    TANDEM_CHECK(fused->fused_options().max_grad_norm == 0.0,
                 "ZeroOptimizer: {} clips the gradient norm inside its step (max_grad_norm {}), over the gradients "
                 "it sees: a shard's, not the global norm; ZeRO with clipping is not supported yet",
                 full->type_name(), fused->fused_options().max_grad_norm);
  Reducer& reducer = ddp.reducer();
  const std::vector<Tensor>& params = reducer.params();
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].impl()] = i;

  // Each bucket's shard, cut at the parameters it spans: (param, offset in it, length).
  std::vector<std::vector<Piece>> of_param(params.size());
  const auto& buckets = reducer.bucket_indices();
  for (size_t b = 0; b < buckets.size(); ++b) {
    auto [lo, hi] = reducer.shard_range(b);
    for (size_t i : buckets[b]) {
      const int64_t begin = reducer.slot_offset(i), end = begin + params[i].numel();
      const int64_t a = std::max(lo, begin), z = std::min(hi, end);
      if (a < z) of_param[i].push_back({i, b, a - begin, z - a});
    }
  }

  NoGradGuard no_grad;
  full_index_.assign(params.size(), SIZE_MAX);
  std::vector<ParamGroup> shard_groups;
  size_t k = 0;
  for (const ParamGroup& g : full->param_groups()) {
    ParamGroup sg = g;
    sg.params.clear();
    for (const Tensor& group_param : g.params) {
      // A fused optimizer with master weights holds f32 copies of 16-bit parameters in its groups:
      // the shard is cut from the model's own tensor (the shard's optimizer makes its masters anew,
      // from the same values).
      const Tensor& p = fused ? fused->model_params().at(k) : group_param;
      ++k;
      model_params_.push_back(p);
      auto it = index.find(p.impl());
      // Not reduced by DDP (requires no grad): it never has a gradient, so no optimizer updates it.
      if (it == index.end()) continue;
      full_index_[it->second] = model_params_.size() - 1;
      for (const Piece& piece : of_param[it->second]) {
        // A flat view of the parameter's elements, its gradient a view of the shard's.
        const int64_t lo = reducer.shard_range(piece.bucket).first;
        Tensor view = p.detach().view({-1}).narrow0(piece.offset, piece.length);
        view.set_name(p.name());
        const int64_t in_shard = reducer.slot_offset(piece.param) + piece.offset - lo;
        view.set_grad(reducer.shard_grad(piece.bucket).narrow0(in_shard, piece.length));
        sg.params.push_back(view);
        pieces_.push_back(piece);
        shard_numel_ += piece.length;
      }
    }
    shard_groups.push_back(std::move(sg));
  }
  for (const ParamGroup& g : shard_groups) add_param_group(g);
  inner_ = full->with_groups(std::move(shard_groups));
}

std::string ZeroOptimizer::type_name() const { return inner_->type_name(); }

void ZeroOptimizer::update(const ParamGroup&, size_t, Tensor&, const Tensor&) {
  TANDEM_FAIL(NotSupported, "ZeroOptimizer updates through step(), not per parameter");
}

void ZeroOptimizer::zero_grad() {
  zero_grads(model_params_);
  // The shards' gradients (the inner optimizer's): at stage 1 views of buckets that the parameters'
  // all-gather may still be filling, zeroed as each arrives.
  ddp_.reducer().zero_shard_grads();
}

void ZeroOptimizer::wait_params() { ddp_.sync_params(); }

void ZeroOptimizer::step() {
  wait_params();  // two steps without a forward between them: the first one's gather is done
  // The schedule sets the lr on these groups; the shard's optimizer has the same groups.
  auto& inner_groups = inner_->param_groups();
  for (size_t g = 0; g < groups_.size(); ++g) {
    inner_groups[g].lr = groups_[g].lr;
    inner_groups[g].weight_decay = groups_[g].weight_decay;
  }
  // find_unused_parameters / static_graph: a parameter that stage 0 leaves without a gradient is not
  // stepped (no moment decay, no weight decay), so its pieces go without one for this step.
  const Reducer& reducer = ddp_.reducer();
  std::vector<std::pair<Tensor, Tensor>> hidden;
  size_t k = 0;
  for (auto& g : groups_)  // the shard views: the tensors whose gradients the optimizer reads
    for (Tensor& p : g.params) {
      if (!reducer.has_grad(pieces_[k++].param)) {
        hidden.emplace_back(p, p.grad());
        p.set_grad(Tensor());
      }
    }
  inner_->step();
  for (auto& [p, grad] : hidden) p.set_grad(grad);
  ++step_count_;
  // The updated chunks spread to every rank, asynchronously: waited for at the next forward
  // (DistributedDataParallel::sync_params).
  ddp_.reducer().start_param_gather();
}

}  // namespace tandem::nn::parallel
