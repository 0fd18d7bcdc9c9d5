// NonFiniteGuard: stops a run whose loss turned nan or inf (a bad batch, a diverging run) with a
// message naming the step, before that step's update reaches the parameters or a checkpoint.
#pragma once
#include <functional>
#include <memory>

#include "train/trainer.h"
#include "runtime/data/loader.h"

namespace tandem::train {

// After each step's backward (before the optimizer step), every rank's loss is checked and the
// verdict agreed over the ranks (8 bytes per rank in `t`'s step agreement), so all stop at the same
// step. With `stop` (the default; --no-stop-on-nonfinite clears it) the run fails with a ValueError
// naming the step, epoch, batch and ranks, the parameters still those of the step before; otherwise
// it logs the same line, calls `skip_step` (the trainer then leaves that step's update out, as a
// GradScaler does on an overflow) and goes on.
std::shared_ptr<TrainerCallback> make_nonfinite_guard(Trainer& t, bool stop, std::function<void()> skip_step);

// A checkpoint never holds a nan or inf parameter: a ValueError naming the step and the tensor.
void check_finite_parameters(const nn::Module& model, int64_t step);

// Fault injection (runtime/fault.h) for the tests: TANDEM_FAULT=nan_batch:step=S[:rank=R][:value=inf]
// returns the batch of step S with every input nan (inf: every input x inf), else `batch` itself.
data::Batch maybe_poison_batch(const data::Batch& batch, int64_t step, int rank);

// TANDEM_FAULT=rank_kill:step=S:rank=R (SIGKILL) or rank_stop:step=S:rank=R (SIGSTOP): rank R
// signals itself after optimizer step S. Null when TANDEM_FAULT names neither.
std::shared_ptr<TrainerCallback> make_rank_fault();

}  // namespace tandem::train
