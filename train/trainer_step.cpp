// One optimizer step's forward and backward over its micro-batches, and the out-of-memory recovery:
// on OutOfMemoryError (a --memory-limit budget, or a full GPU) the step's tensors are dropped, the
// micro-batch halves and the accumulation doubles, so the step sees the same samples and the same
// global batch, and the step is redone; every rank takes the decision together.
#include <algorithm>

#include "train/trainer.h"
#include "runtime/autograd.h"
#include "runtime/memory_budget.h"
#include "runtime/ops.h"
#include "runtime/trace.h"

namespace tandem::train {

namespace {

// Micro-batches of at most `micro` samples that a loader batch of `n` samples splits into.
int64_t pieces(int64_t n, int64_t micro) { return (n + micro - 1) / micro; }

// The model's buffers and a copy of each: a failed attempt's forward has already moved BatchNorm's
// running statistics, and the redone step must start from where the step began.
using Snapshot = std::vector<std::pair<Tensor, Tensor>>;
void snapshot_buffers(const nn::Module& model, Snapshot& out) {
  NoGradGuard no_grad;
  for (auto& [name, t] : model.named_buffers())
    if (t.defined()) out.emplace_back(t, t.clone());
}
void restore_buffers(Snapshot& saved) {
  NoGradGuard no_grad;
  for (auto& [t, copy] : saved) t.copy_(copy);
}

}  // namespace

int64_t Trainer::effective_accumulation_steps() const {
  return std::max<int64_t>(config_.accumulation_steps, 1) * pieces(config_.batch_size, micro_batch_size());
}

Trainer::GroupResult Trainer::attempt_group(int64_t g, int64_t group_end) {
  const int64_t micro = micro_batch_size();
  // The loader's batches in order, each cut into micro-batches in order: the very micro-batches a
  // run with --batch-size `micro` would load (the sampler's order does not depend on the batch size).
  const int64_t batch = config_.batch_size, total = train_loader_->num_samples();
  int64_t count = 0;
  for (int64_t b = g; b < group_end; ++b) count += pieces(std::min(batch, total - b * batch), micro);
  const double batches = static_cast<double>(group_end - g);
  optimizer_->zero_grad();
  GroupResult r;
  int64_t k = 0;
  for (int64_t b = g; b < group_end; ++b) {
    const data::Batch whole = [&] {
      trace::TraceSpan span("data");
      return load(*train_loader_, b);
    }();
    for (int64_t off = 0; off < whole.size(); off += micro, ++k) {
      const int64_t n = std::min(micro, whole.size() - off);
      // The step's gradient is the mean over its loader batches of each one's mean loss, as without
      // a cut: a piece of n samples weighs n / (its batch's size), not 1 / (the pieces), which
      // differ where the pieces do (batch 5 in pieces of 3 and 2; an epoch's short last batch).
      const double weight = static_cast<double>(n) / static_cast<double>(whole.size()) / batches;
      const data::Batch part = n == whole.size() ? whole : whole.narrow(off, n);
      auto scope = micro_batch_scope(k + 1 == count);
      Tensor loss;
      {
        trace::TraceSpan span("forward");
        loss = forward_loss(part);
      }
      const double l = loss.item();
      r.loss += l * weight;
      r.loss_sum += l * static_cast<double>(n);
      r.samples += static_cast<double>(n);
      trace::TraceSpan span("backward");
      backward(weight == 1.0 ? loss : loss * weight);
    }
  }
  return r;
}

Trainer::GroupResult Trainer::train_group(int64_t g, int64_t group_end) {
  for (;;) {
    std::string error;
    GroupResult r;
    Snapshot saved;
    try {
      snapshot_buffers(*model_, saved);
      r = attempt_group(g, group_end);
    } catch (const OutOfMemoryError& e) {
      error = e.what();  // the step's tensors (graph, activations) are gone with the unwound frames
    }
    // Nothing bounds memory here (the CPU without --memory-limit, several ranks: no oom_share_), so a
    // failure cannot be agreed on: end the run.
    if (!error.empty() && !oom_share_)
      throw_out_of_memory(__FILE__, __LINE__,
                          error + " (give --memory-limit to recover from out-of-memory on the CPU with several ranks)");
    // Every rank agrees: a rank that failed first issues the collectives its peers' reduction waits
    // for, with gradients that are thrown away.
    if (!error.empty()) complete_failed_step();
    attempt_failed_ = !error.empty();
    if (error.empty()) last_loss_ = r.loss;  // the non-finite guard's share reads it
    // The step's one agreement (every feature's share; none with no share). After a failed attempt
    // the other shares are read by nobody: the retry agrees again.
    if (!agreement_.empty()) agreement_.agree(world_);
    const double failed = oom_share_ ? agreement_.sum(*oom_share_)[0] : 0.0;
    if (failed == 0) return r;
    restore_buffers(saved);  // every rank: the healthy ones' forwards moved them too

    const int64_t micro = micro_batch_size();
    if (!error.empty()) log_.warn("step {}: {}", state_.step + 1, error);
    if (micro <= 1)
      throw_out_of_memory(__FILE__, __LINE__,
                          fmt::format("out of memory in step {} at micro-batch size 1 ({} of {} ranks failed): "
                                      "nothing smaller to try; use --checkpoint-activations or --amp, or give more "
                                      "memory (--memory-limit)",
                                      state_.step + 1, static_cast<int64_t>(failed), world_.size()));
    const int64_t accum_before = effective_accumulation_steps();
    micro_batch_ = (micro + 1) / 2;
    ++oom_recoveries_;
    optimizer_->zero_grad();  // partial (or garbage, reduced) gradients of the failed attempt
    log_.info("out of memory in step {} ({} of {} rank{}): micro-batch {} -> {}, accumulation {} -> {} (the same {} "
              "samples per rank and step); kept for the rest of the run",
              state_.step + 1, static_cast<int64_t>(failed), world_.size(), world_.size() > 1 ? "s" : "", micro,
              micro_batch_, accum_before, effective_accumulation_steps(),
              config_.batch_size * std::max<int64_t>(config_.accumulation_steps, 1));
  }
}

}  // namespace tandem::train
