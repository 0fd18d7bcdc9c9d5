// Training-state save/load over the checkpoint directory format.
#include "nn/training_state.h"

#include "runtime/autograd.h"

namespace tandem::nn {

using serialization::TrainingState;

std::string save_training_state(const std::string& dir, const TrainComponents& c, const TrainProgress& p,
                                const serialization::CheckpointOptions& options) {
  TANDEM_CHECK(c.model && c.optimizer, "save_training_state: the model and the optimizer are required");
  Generator& gen = c.generator ? *c.generator : default_generator();
  TrainingState s;
  s.step = p.step;
  s.epoch = p.epoch;
  s.sampler_position = p.sampler_position;
  s.global_batch = p.global_batch;
  s.world_size = p.world_size;
  s.rng_seed = gen.seed();
  s.rng_offset = gen.offset();
  s.optimizer = c.optimizer->state_tensors();
  if (c.scaler) s.scaler = c.scaler->state_dict();
  if (c.scheduler) s.lr_schedule = c.scheduler->state_tensors();
  if (c.ema) s.ema = c.ema->state_tensors();
  s.strings = p.strings;
  s.strings["optimizer"] = c.optimizer->type_name();
  return serialization::save_checkpoint(dir, c.model->state_dict(), s, options);
}

namespace {
// Runs a component's loader, naming the checkpoint and the component in any error.
template <class F>
void load_part(const std::string& path, const char* what, F&& f) {
  try {
    f();
  } catch (const ValueError& e) {
    TANDEM_FAIL(Value, "checkpoint '{}': cannot restore the {}: {}", path, what, e.what());
  }
}

void check_presence(const std::string& path, const char* what, bool here, bool in_ckpt, const char* flag) {
  TANDEM_CHECK(here == in_ckpt, "checkpoint '{}' {} {} state but this run {} one; resume with the same {} setting",
               path, in_ckpt ? "has" : "has no", what, here ? "has" : "has no", flag);
}
}  // namespace

TrainProgress load_training_state(const std::string& path, const TrainComponents& c, int64_t expected_global_batch) {
  return load_training_state(serialization::load_checkpoint(path), c, expected_global_batch);
}

TrainProgress load_training_state(const serialization::LoadedCheckpoint& ck, const TrainComponents& c,
                                  int64_t expected_global_batch) {
  TANDEM_CHECK(c.model && c.optimizer, "load_training_state: the model and the optimizer are required");
  const TrainingState& s = ck.state;
  if (expected_global_batch > 0 && s.global_batch > 0)
    TANDEM_CHECK(s.global_batch == expected_global_batch, "checkpoint '{}' was trained with global batch {}, this "
                 "run uses {}; keep the global batch (batch per rank x ranks) to resume exactly", ck.path,
                 s.global_batch, expected_global_batch);
  auto it = s.strings.find("optimizer");
  if (it != s.strings.end())
    TANDEM_CHECK(it->second == c.optimizer->type_name(), "checkpoint '{}' holds {} state, this run uses {}",
                 ck.path, it->second, c.optimizer->type_name());
  // Scaler state is saved even when disabled (bf16): accept its presence either way then.
  if (c.scaler && c.scaler->is_enabled()) check_presence(ck.path, "GradScaler", true, !s.scaler.empty(), "--amp");
  check_presence(ck.path, "EMA", c.ema != nullptr, !s.ema.empty(), "--ema");
  check_presence(ck.path, "LR schedule", c.scheduler != nullptr, !s.lr_schedule.empty(), "schedule");

  NoGradGuard no_grad;
  serialization::copy_into(c.model->state_dict(), ck.model, "model weights", ck.path + "/model.safetensors");
  load_part(ck.path, "optimizer", [&] { c.optimizer->load_state_tensors(s.optimizer); });
  if (c.scaler && !s.scaler.empty()) load_part(ck.path, "GradScaler", [&] { c.scaler->load_state_dict(s.scaler); });
  if (c.scheduler) load_part(ck.path, "LR schedule", [&] { c.scheduler->load_state_tensors(s.lr_schedule); });
  if (c.ema) load_part(ck.path, "EMA", [&] { c.ema->load_state_tensors(s.ema); });
  Generator& gen = c.generator ? *c.generator : default_generator();
  gen.set_state(gen.seed(), s.rng_offset);

  TrainProgress p;
  p.step = s.step;
  p.epoch = s.epoch;
  p.sampler_position = s.sampler_position;
  p.global_batch = s.global_batch;
  p.world_size = s.world_size;
  p.strings = s.strings;
  return p;
}

}  // namespace tandem::nn
