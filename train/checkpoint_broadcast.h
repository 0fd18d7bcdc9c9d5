// Resume on several nodes: rank 0 reads the checkpoint and broadcasts its bytes, so the other
// ranks need neither a shared filesystem nor a copy of it (and never read a stale copy of their own).
#pragma once
#include <string>

#include "comm/communicator.h"
#include "runtime/serialization/training_checkpoint.h"

namespace tandem::train {

// Collective over `comm` (null or one rank: a plain read). Rank 0 reads `path` (latest resolved);
// every rank returns the parsed checkpoint. When rank 0 cannot read it, every rank throws an
// IOError (rank 0 its own, the others one naming the path and rank 0), none waits for a deadline.
serialization::LoadedCheckpoint load_checkpoint_from_rank0(const std::string& path, comm::Communicator* comm);

}  // namespace tandem::train
