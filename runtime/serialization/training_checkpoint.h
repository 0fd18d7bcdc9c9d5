// Training checkpoints: a directory per checkpoint holding model.safetensors (the weights, readable
// by Python's safetensors / PyTorch), state.safetensors (optimizer moments, scaler, LR schedule, EMA
// as tensors) and state.json (step, epoch, sampler position, RNG, scalars, and the size + CRC32 of
// the two tensor files). Layout under the user's DIR:
//   DIR/ckpt-00000100/{model.safetensors, state.safetensors, state.json}
//   DIR/latest            "ckpt-00000100": the last complete checkpoint
// Commit protocol: files go to DIR/.tmp-ckpt-*/ and are fsynced, the directory is renamed to its
// final name, DIR is fsynced, then `latest` is replaced atomically. A crash at any point leaves
// `latest` naming a complete checkpoint. Only rank 0 calls save_checkpoint (ranks hold equal state).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "runtime/serialization/safetensors.h"

namespace tandem::serialization {

struct TrainingState {
  int64_t step = 0;   // optimizer steps taken
  int64_t epoch = 0;  // the epoch in progress
  // Global samples of `epoch` already consumed (all ranks together): with the global batch kept,
  // any world size resumes at the same place in the (seed, epoch) permutation.
  int64_t sampler_position = 0;
  int64_t global_batch = 0;
  int64_t world_size = 1;     // informative: resuming with another world size is allowed
  uint64_t rng_seed = 0;      // default Generator (base seed; ranks may add their rank)
  uint64_t rng_offset = 0;    // Philox offset: equal on every rank (same number of draws per step)
  NamedTensors optimizer;     // Optimizer::state_tensors()
  NamedTensors scaler;        // GradScaler::state_dict()
  NamedTensors lr_schedule;   // LR schedule state as tensors (when it exposes them)
  NamedTensors ema;           // EMA shadow weights
  std::map<std::string, double> scalars;       // LR schedule counters, best metric, ...
  std::map<std::string, std::string> strings;  // configuration echo ("amp": "bf16", ...)
};

// Test hook: stop the write at a point as a crash would (the files already written stay).
enum class CrashPoint { None, BeforeRename, BeforeLatest };

struct CheckpointOptions {
  int keep_last = 2;  // complete checkpoints kept in DIR (older ones are removed after the commit)
  CrashPoint simulate_crash = CrashPoint::None;
};

// Writes a checkpoint of `model` (Module::state_dict()) and `state` into DIR; returns its directory.
std::string save_checkpoint(const std::string& dir, const NamedTensors& model, const TrainingState& state,
                            const CheckpointOptions& options = {});

struct LoadedCheckpoint {
  std::string path;  // the checkpoint directory actually read
  NamedTensors model;
  TrainingState state;
};

// `path` is a DIR with `latest`, or one checkpoint directory. Verifies sizes and CRC32s and parses
// every file; IOError naming the file on any problem.
LoadedCheckpoint load_checkpoint(const std::string& path);

// load_checkpoint in two steps, so that one process can read and others parse (a resume on
// several nodes without a shared filesystem: rank 0 reads, broadcasts the bytes, every rank parses).
struct CheckpointFiles {
  std::string path;  // the checkpoint directory (`latest` resolved)
  std::string state_json, model, state;  // the three files' bytes
};
CheckpointFiles read_checkpoint_files(const std::string& path);
LoadedCheckpoint parse_checkpoint(const CheckpointFiles& files);

// state.json alone: the TrainingState fields (no tensors) and each tensor file's recorded size and
// CRC32. IOError naming `json_path` on anything malformed (load_checkpoint's first step; fuzzed).
struct StateSidecar {
  TrainingState state;
  std::map<std::string, std::pair<uint64_t, uint32_t>> files;  // name -> (bytes, crc32)
};
StateSidecar parse_state_json(const std::string& text, const std::string& json_path);
bool has_checkpoint(const std::string& dir);

// Copies `loaded` values into the tensors of `target` (same names in any order, equal shapes and
// dtypes; devices may differ). Errors name `what`, the entry and `source`: a missing, unexpected,
// or mis-shaped entry is a ValueError that says what to change.
void copy_into(const NamedTensors& target, const NamedTensors& loaded, const std::string& what,
               const std::string& source);

}  // namespace tandem::serialization
