// FullTrainer: parallel modes, AMP, clipping, activation checkpointing, EMA, checkpoints, resume.
#include "train/train_features.h"

#include <cstring>

#include <fmt/format.h>

#include "train/checkpoint_broadcast.h"
#include "train/device_choice.h"
#include "train/factory.h"
#include "train/mode_auto.h"
#include "train/nonfinite_guard.h"
#include "train/zero_setup.h"
#include "comm/communicator.h"
#include "comm/device_choice.h"
#include "nn/checkpoint_sequential.h"
#include "nn/parallel/rank_memory.h"
#include "nn/parallel/zero_optimizer.h"
#include "runtime/autocast.h"
#include "runtime/device_query.h"
#include "runtime/memory_budget.h"
#include "runtime/trace.h"

namespace tandem::train {

namespace {

// A Sequential run through checkpoint_sequential. It registers the Sequential's children under
// their own names, so state_dict (and checkpoints) read exactly as the bare model's.
class CheckpointedSequential final : public nn::Module {
 public:
  CheckpointedSequential(std::shared_ptr<nn::Sequential> seq, int segments) : seq_(std::move(seq)), segments_(segments) {
    for (const auto& [name, child] : seq_->children()) register_module(name, child);
  }
  Tensor forward(const Tensor& x) override { return nn::checkpoint_sequential(*seq_, segments_, x); }
  std::string type_name() const override { return "CheckpointedSequential"; }
  const nn::Sequential& sequential() const { return *seq_; }
  std::shared_ptr<Module> clone() const override {
    return std::make_shared<CheckpointedSequential>(std::static_pointer_cast<nn::Sequential>(seq_->clone()), segments_);
  }

 private:
  std::shared_ptr<nn::Sequential> seq_;
  int segments_;
};

// EMA updates and periodic checkpoints after each optimizer step.
class StepHooks final : public TrainerCallback {
 public:
  StepHooks(FullTrainer& t, nn::EMA* ema, const nn::Module& inner, int64_t save_every)
      : ema_(ema), inner_(inner), save_every_(save_every) {
    (void)t;
  }
  void after_step(Trainer& t) override {
    if (ema_) {
      static_cast<FullTrainer&>(t).parallel().sync_params();  // ZeRO: the step's parameters, gathered
      ema_->update(inner_);
    }
    if (save_every_ > 0 && t.state().step % save_every_ == 0) static_cast<FullTrainer&>(t).save();
  }

 private:
  nn::EMA* ema_;
  const nn::Module& inner_;
  int64_t save_every_;
};

}  // namespace

ParallelMode resolve_mode(ParallelMode configured) {
  if (configured != ParallelMode::Auto) return configured;
  TrainConfig cfg;  // --mode auto without the devices flags: single or ddp (main.cpp decides dp)
  cfg.device = "cpu";
  return decide_mode_here(cfg).mode;
}

monitor::DeviceChoice resolve_device_choice(const TrainConfig& cfg) {
  if (resolve_mode(cfg.mode) == ParallelMode::DP) return {kCPU, "cpu: --mode dp places its replicas on --devices"};
  if (cfg.device == "cpu") return {kCPU, "cpu: --device cpu"};
  if (cfg.device == "auto") return comm::choose_node_device(memory::parse_size(cfg.min_free_memory));
  TANDEM_CHECK_KIND(NotSupported, cuda::device_count() > 0, "--device {}: {}", cfg.device, cuda::describe());
  if (cfg.device == "cuda") {
    Device d = comm::node_device();
    TANDEM_CHECK_KIND(NotSupported, !d.is_cpu(), "--device cuda: this node has more ranks than CUDA devices ({}); "
                      "start one rank per device, or use --device cpu", cuda::describe());
    return {d, d.str() + ": --device cuda (the local rank's GPU)"};
  }
  Device d = Device::parse(cfg.device);
  TANDEM_CHECK(d.kind == DeviceKind::CUDA && d.index < cuda::device_count(), "--device {}: {}", cfg.device,
               cuda::describe());
  return {d, d.str() + ": --device " + cfg.device};
}

int64_t per_rank_batch(int64_t global_batch, int world) {
  TANDEM_CHECK(global_batch % world == 0, "--global-batch-size {} cannot be kept on {} ranks: it is not a multiple of "
               "the world size (run on a divisor of {}, or choose another global batch)", global_batch, world,
               global_batch);
  return global_batch / world;
}

std::string param_hash(const nn::Module& model) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a offset basis
  for (const auto& [name, t] : model.state_dict()) {
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    // Values as f64 (exact for every dtype we hold), so the hash does not depend on the device.
    for (double v : t.to_vector<double>()) {
      uint64_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      for (int i = 0; i < 8; ++i) h = (h ^ ((bits >> (8 * i)) & 0xff)) * 1099511628211ull;
    }
  }
  return fmt::format("{:016x}", h);
}

namespace {
ZeroUse zero_use(const TrainConfig& cfg) { return {cfg.ddp.zero_stage}; }
}  // namespace

const nn::Module& exported_model(const nn::Module& model) {
  if (const auto* wrapped = dynamic_cast<const CheckpointedSequential*>(&model)) return wrapped->sequential();
  return model;
}

std::shared_ptr<nn::Module> make_run_model(const TrainConfig& cfg) {
  auto model = make_model(cfg);
  if (cfg.checkpoint_activations <= 0) return model;
  TANDEM_CHECK(cfg.mode != ParallelMode::DP, "--checkpoint-activations is not supported with --mode dp; use ddp or single");
  auto seq = std::dynamic_pointer_cast<nn::Sequential>(model);
  TANDEM_CHECK(seq, "--checkpoint-activations needs a Sequential model, got {}", model->type_name());
  return std::make_shared<CheckpointedSequential>(seq, cfg.checkpoint_activations);
}

FullTrainer::FullTrainer(const TrainConfig& cfg, ParallelSetup ps,
                         std::unique_ptr<nn::Optimizer> optimizer, data::Dataset train_set, data::Dataset test_set)
    : Trainer(cfg, ps.model, zero_optimizer(ps.ddp, zero_use(cfg), std::move(optimizer)), std::move(train_set),
              std::move(test_set), World{ps.comm}),
      ps_(std::move(ps)),
      precision_(cfg.amp, ps_.comm.get()) {
  init_features();
}

FullTrainer::FullTrainer(const TrainConfig& cfg, ParallelSetup ps, std::unique_ptr<nn::Optimizer> optimizer,
                         std::unique_ptr<data::BatchSource> train, std::unique_ptr<data::BatchSource> test)
    : Trainer(cfg, ps.model, zero_optimizer(ps.ddp, zero_use(cfg), std::move(optimizer)), std::move(train),
              std::move(test), World{ps.comm}),
      ps_(std::move(ps)),
      precision_(cfg.amp, ps_.comm.get()) {
  init_features();
}

void FullTrainer::init_features() {
  const TrainConfig& cfg = config();
  // tandem-train's flags say so as a usage error; a program that fills the config gets it here.
  TANDEM_CHECK(cfg.save_every == 0 || !cfg.save_dir.empty(),
               "save_every {} needs save_dir: the folder the checkpoints go to", cfg.save_every);
  if (cfg.ema_decay > 0) {
    nn::EMAOptions eo;
    eo.decay = cfg.ema_decay;
    ema_ = std::make_unique<nn::EMA>(*ps_.inner, eo);
  }
  add_callback(make_nonfinite_guard(*this, cfg.stop_on_nonfinite, [this] { skip_step_ = true; }));  // before StepHooks: no save after a bad step
  if (ema_ || cfg.save_every > 0)
    add_callback(std::make_shared<StepHooks>(*this, ema_.get(), *ps_.inner, cfg.save_every));
  if (auto fault = make_rank_fault()) add_callback(fault);  // TANDEM_FAULT=rank_kill|rank_stop (tests)
}

Tensor FullTrainer::forward_loss(const data::Batch& in) {
  const data::Batch batch = maybe_poison_batch(in, state().step + 1, world().rank());  // TANDEM_FAULT=nan_batch
  return precision_.forward([&] { return Trainer::forward_loss(batch); });
}

void FullTrainer::backward(const Tensor& loss) { precision_.backward(loss); }

void FullTrainer::optimizer_step() {
  ps_.before_optimizer_step();
  if (skip_step_) {  // a non-finite loss under --no-stop-on-nonfinite: no update, no optimizer state change
    skip_step_ = false;
    return;
  }
  precision_.update(optimizer(), ps_.ddp, ps_.model->parameters(), config().grad_clip);
}

std::shared_ptr<void> FullTrainer::micro_batch_scope(bool reduce) {
  auto scope = ps_.no_sync_unless(reduce);
  if (!scope) return nullptr;
  return std::make_shared<std::optional<nn::parallel::DistributedDataParallel::NoSync>>(std::move(scope));
}

std::shared_ptr<void> FullTrainer::evaluation_scope() {
  ps_.before_evaluation();
  if (!ema_) return nullptr;
  return std::make_shared<nn::EMA::Scope>(*ema_, *ps_.inner);
}

void FullTrainer::fill_done_record(nlohmann::json& record) {
  ps_.sync_params();
  record["param_hash"] = param_hash();
  record["mode"] = enum_name(resolve_mode(config().mode));
  auto params = ps_.inner->parameters();
  record["device"] = params.empty() ? std::string("cpu") : params.front().device().str();
  record["amp"] = enum_name(config().amp);
  record["device_reason"] = ps_.device_reason;
  record["accumulation_steps"] = config().accumulation_steps;
  // What this rank holds after the last step, split as ZeRO divides it (docs/zero.md).
  const nn::parallel::RankMemory mem =
      nn::parallel::rank_memory(*ps_.inner, optimizer(), ps_.ddp ? &ps_.ddp->reducer() : nullptr);
  record["zero_stage"] = ps_.ddp ? ps_.ddp->options().zero_stage : 0;
  record["param_bytes"] = mem.param_bytes;
  record["grad_bytes"] = mem.grad_bytes;
  record["optimizer_state_bytes"] = mem.optimizer_state_bytes;
  // The end of the run is always checkpointed when --save is given (unless that step just was).
  if (!config().save_dir.empty() && last_saved_step_ != state().step) save();
}

nn::TrainComponents FullTrainer::components() {
  nn::TrainComponents c;
  c.model = ps_.inner.get();
  c.optimizer = &optimizer();
  c.scaler = &precision_.scaler();
  c.scheduler = scheduler();
  c.ema = ema_.get();
  return c;
}

nn::TrainProgress FullTrainer::progress() {
  nn::TrainProgress p;
  p.step = state().step;
  p.epoch = state().epoch;
  p.global_batch = config().batch_size * world().size();
  p.sampler_position = state().batch_in_epoch * p.global_batch;
  p.world_size = world().size();
  p.strings = {{"model", config().model.type},
               {"amp", enum_name(config().amp)},
               {"mode", enum_name(resolve_mode(config().mode))}};
  return p;
}

void FullTrainer::barrier() {
  if (ps_.comm && ps_.comm->size() > 1) ps_.comm->barrier()->wait();
}

void FullTrainer::save() {
  trace::TraceSpan span("checkpoint");
  ps_.sync_params();
  // ZeRO: the shards' optimizer state gathered onto rank 0, in stage 0's layout (collective).
  if (auto* zero = dynamic_cast<nn::parallel::ZeroOptimizer*>(&optimizer())) zero->consolidate_state(0);
  if (world().rank() == 0) {
    check_finite_parameters(*ps_.inner, state().step);
    std::string path = nn::save_training_state(config().save_dir, components(), progress());
    log().info("checkpoint: step {} -> {}", state().step, path);
  }
  last_saved_step_ = state().step;
  barrier();  // nobody runs ahead (or exits) before the checkpoint is complete
}

void FullTrainer::resume(const std::string& path) {
  const int64_t global_batch = config().batch_size * world().size();
  // Rank 0 reads, every rank parses: works with or without a filesystem shared by the nodes.
  ps_.sync_params();  // nothing in flight may overwrite the loaded weights
  const serialization::LoadedCheckpoint ck = load_checkpoint_from_rank0(path, ps_.comm.get());
  // Another model's checkpoint is the likeliest mistake: say so before any of its consequences (a
  // different global batch, missing weights).
  const auto model = ck.state.strings.find("model");
  TANDEM_CHECK(model == ck.state.strings.end() || model->second == config().model.type,
               "--resume '{}': the checkpoint is of model {}, this run trains {}", ck.path, model->second,
               config().model.type);
  nn::TrainProgress p = nn::load_training_state(ck, components(), global_batch);
  TANDEM_CHECK(p.sampler_position % global_batch == 0,
               "--resume '{}': the checkpoint stopped at sample {} of its epoch, not a multiple of the global "
               "batch {}; resume with the batch size and world size it was written with",
               path, p.sampler_position, global_batch);
  state().step = p.step;
  state().epoch = p.epoch;
  state().batch_in_epoch = p.sampler_position / global_batch;
  last_saved_step_ = p.step;
  log().info("resumed from {}: step {}, epoch {}, batch {}", path, p.step, p.epoch + 1, state().batch_in_epoch);
}

}  // namespace tandem::train
