// The files every rank of tandem-train reads itself, and the check that this rank sees them (issue
// 51 item 4). On several nodes each of these must be on a filesystem shared by the nodes, at the
// same path on each (or copied to each): --config, --model FILE.onnx (or the config's model
// filename), --data, --val-data, --data-dir (Fashion-MNIST), --text-dir, --tokenizer, --init-from.
// --resume's checkpoint is not among them: rank 0 reads it and broadcasts it
// (train/checkpoint_broadcast.h). A rank that cannot see one fails at start, before any
// communication, with a message naming the files, its rank and host, and what to do; the launcher
// then ends the job (mpirun and srun --kill-on-bad-exit end it when a rank exits non-zero).
#pragma once
#include <string>
#include <vector>

#include "apps/common/engine.h"
#include "train/train_config.h"

namespace tandem::app {

struct RankInput {
  std::string flag;  // "--data", "model.filename (--config)"
  std::string path;
};

// The input files and folders named on the command line (before --config is read: the first file
// a rank opens is that one).
std::vector<RankInput> rank_inputs_from_flags(int argc, char** argv);
// Those the settings name that the flags may not: the config file's ONNX model, and the
// Fashion-MNIST folder when it is what the run trains on.
std::vector<RankInput> rank_inputs_from_config(const TrainConfig& cfg);

// ValueError when this rank cannot read (or, for a folder, list) one of `inputs`, naming every
// such input, the rank of the launcher's variables (comm/launcher_env.h) and this host. A job of
// one process is left to the readers' own errors.
void check_rank_inputs(const std::vector<RankInput>& inputs);

}  // namespace tandem::app
