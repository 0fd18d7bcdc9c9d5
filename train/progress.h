// Rank 0's progress during training: on a terminal one live line redrawn with \r (epoch, step/total,
// loss, samples/s, ETA); otherwise (CI, a file) a plain line every N steps. A TrainerCallback.
#pragma once
#include <memory>

#include "train/trainer.h"

namespace tandem::train {

struct ProgressOptions {
  bool terminal = false;   // draw the live line (stdout is a terminal)
  int64_t every = 0;       // plain lines: every N optimizer steps (0: about ten per epoch)
  double redraw_s = 0.1;   // the live line: at most this often
};

// The progress of the run on rank 0 (nullptr elsewhere, when quiet or --progress off). --progress auto:
// the live line when stdout is a terminal and no launcher (mpirun gives ranks a pty), else lines.
std::shared_ptr<TrainerCallback> make_progress(const TrainConfig& cfg, int rank);
std::shared_ptr<TrainerCallback> make_progress(ProgressOptions options);

}  // namespace tandem::train
