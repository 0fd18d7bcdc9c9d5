// The non-finite loss guard of tandem-train and the training-loop faults of the reliability tests.
#include "train/nonfinite_guard.h"

#include <signal.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/autograd.h"
#include "runtime/fault.h"
#include "runtime/ops.h"

namespace tandem::train {

namespace {

class NonFiniteGuard final : public TrainerCallback {
 public:
  NonFiniteGuard(Trainer& t, bool stop, std::function<void()> skip_step)
      : stop_(stop),
        skip_step_(std::move(skip_step)),
        // Only the loss: under DDP the gradients may still be in flight there (finalised in the step).
        // Every rank's loss at its index, summed: all ranks see all losses (x + 0 keeps nan and inf).
        share_(t.agreement().add(static_cast<size_t>(t.world().size()),
                                 [&t](double* losses) { losses[t.world().rank()] = t.last_loss(); })) {}
  void after_backward(Trainer& t) override {
    const int n = t.world().size();
    const double* losses = t.agreement().sum(share_);
    std::vector<int> ranks;
    std::vector<double> bad;
    for (int i = 0; i < n; ++i)
      if (!std::isfinite(losses[static_cast<size_t>(i)])) {
        ranks.push_back(i);
        bad.push_back(losses[static_cast<size_t>(i)]);
      }
    if (ranks.empty()) return;
    const int64_t step = t.state().step + 1;  // the step being taken
    std::string what = fmt::format(
        "non-finite loss at step {} (epoch {}, batch {}): loss {} on rank(s) {} of {}", step, t.state().epoch + 1,
        t.state().batch_in_epoch, fmt::join(bad, ", "), fmt::join(ranks, ", "), n);
    if (stop_)
      TANDEM_FAIL(Value, "{}; stopped before its update, so the parameters (and every checkpoint written) are those "
                  "of step {} (--no-stop-on-nonfinite goes on)", what, step - 1);
    t.log().info("warning: {}; its update is skipped and training goes on (--no-stop-on-nonfinite)", what);
    skip_step_();
  }

 private:
  bool stop_;
  std::function<void()> skip_step_;
  size_t share_;
};

class RankFault final : public TrainerCallback {
 public:
  RankFault(int signal, int64_t step, int rank) : signal_(signal), step_(step), rank_(rank) {}
  void after_step(Trainer& t) override {
    if (t.state().step != step_ || t.world().rank() != rank_) return;
    fault::raise_now(signal_, fmt::format("rank {} {} after step {}", rank_,
                                          signal_ == SIGKILL ? "SIGKILL" : "SIGSTOP", step_));
  }

 private:
  int signal_;
  int64_t step_;
  int rank_;
};

}  // namespace

std::shared_ptr<TrainerCallback> make_nonfinite_guard(Trainer& t, bool stop, std::function<void()> skip_step) {
  return std::make_shared<NonFiniteGuard>(t, stop, std::move(skip_step));
}

void check_finite_parameters(const nn::Module& model, int64_t step) {
  for (const auto& [name, t] : model.state_dict()) {
    if (!is_floating(t.dtype())) continue;
    for (double v : t.to_vector<double>())
      TANDEM_CHECK(std::isfinite(v), "refusing to write a checkpoint at step {}: '{}' holds {} (the run went "
                   "non-finite; the last checkpoint on disk is the newest finite one)", step, name, v);
  }
}

data::Batch maybe_poison_batch(const data::Batch& batch, int64_t step, int rank) {
  if (!fault::armed("nan_batch")) return batch;
  const fault::Spec& s = *fault::spec();
  if (s.value("step", -1) != step || s.value("rank", rank) != rank) return batch;
  const bool inf = s.values.count("value") && s.values.at("value") == "inf";
  data::Batch out = batch;
  NoGradGuard no_grad;
  // inf: x * inf is inf (and nan where x is 0); both reach the loss.
  out.x = batch.x * (inf ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN());
  return out;
}

std::shared_ptr<TrainerCallback> make_rank_fault() {
  int signal = fault::armed("rank_kill") ? SIGKILL : fault::armed("rank_stop") ? SIGSTOP : 0;
  if (signal == 0) return nullptr;
  const fault::Spec& s = *fault::spec();
  return std::make_shared<RankFault>(signal, s.value("step", 1), static_cast<int>(s.value("rank", 1)));
}

}  // namespace tandem::train
