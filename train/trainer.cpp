// The train loop: epochs, steps, evaluation, logging and metrics.
#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <numeric>

#include "train/lr_schedule.h"
#include "nn/config/run_config.h"
#include "nn/model_registry.h"
#include "nn/parallel/distributed_sampler.h"
#include "runtime/autograd.h"
#include "runtime/env_settings.h"
#include "runtime/memory_budget.h"
#include "runtime/ops.h"
#include "runtime/trace.h"

namespace tandem::train {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Rows [begin, end) every epoch: this rank's evaluation shard.
class RangeSampler final : public data::Sampler {
 public:
  RangeSampler(int64_t begin, int64_t end) : begin_(begin), end_(end) {}
  std::vector<int64_t> indices(int64_t) const override {
    std::vector<int64_t> idx(static_cast<size_t>(end_ - begin_));
    std::iota(idx.begin(), idx.end(), begin_);
    return idx;
  }

 private:
  int64_t begin_, end_;
};

}  // namespace

void World::sum(std::vector<double>& values) const {
  if (!comm || comm->size() == 1 || values.empty()) return;
  // In the communicator's memory: a device communicator (nccl) reduces device memory only.
  Tensor t = Tensor::from_vector(values, {static_cast<int64_t>(values.size())}, DType::f64, comm->device());
  comm->allreduce(t, comm::ReduceOp::Sum)->wait();
  values = t.to_vector<double>();
}

Trainer::Trainer(TrainConfig config, std::shared_ptr<nn::Module> model, std::unique_ptr<nn::Optimizer> optimizer,
                 data::Dataset train_set, data::Dataset test_set, World world)
    : Trainer(config, std::move(model), std::move(optimizer), image_batches(config, std::move(train_set), world, true),
              image_batches(config, std::move(test_set), world, false), world) {}

std::unique_ptr<data::BatchSource> Trainer::image_batches(const TrainConfig& config, data::Dataset set,
                                                          const World& world, bool train) {
  data::LoaderOptions opt;
  opt.batch_size = train ? config.batch_size : config.eval_batch_size;
  opt.layout = nn::model_input(config.model) == nn::ModelInput::Image ? data::Layout::Image : data::Layout::Flat;
  const int64_t n = set.size();
  return std::make_unique<data::BatchLoader>(std::move(set), sampler(config, n, world, train), opt);
}

std::shared_ptr<const data::Sampler> Trainer::sampler(const TrainConfig& config, int64_t n, const World& world,
                                                      bool train) {
  if (!train) {
    // Evaluation: contiguous unpadded shards, so the summed counts cover every test sample once.
    auto shard = nn::parallel::eval_shard(n, world.size(), world.rank());
    return std::make_shared<RangeSampler>(shard.begin, shard.end);
  }
  // Training order: a seeded permutation per epoch; with several ranks each takes its shard of it.
  if (world.size() > 1) {
    nn::parallel::DistributedSamplerOptions so;
    so.seed = config.seed;
    return std::make_shared<nn::parallel::DistributedSampler>(n, world.size(), world.rank(), so);
  }
  return std::make_shared<data::RandomSampler>(n, config.seed);
}

Trainer::Trainer(TrainConfig config, std::shared_ptr<nn::Module> model, std::unique_ptr<nn::Optimizer> optimizer,
                 std::unique_ptr<data::BatchSource> train, std::unique_ptr<data::BatchSource> test, World world)
    : config_(std::move(config)),
      model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      world_(std::move(world)),
      train_loader_(std::move(train)),
      test_loader_(std::move(test)),
      log_(world_.rank(), config_.quiet),
      metrics_(config_.metrics_path, world_.rank() == 0) {
  TANDEM_CHECK(model_ && optimizer_, "Trainer needs a model and an optimizer");
  TANDEM_CHECK(train_loader_ && test_loader_, "Trainer needs training and evaluation batches");
  // Batches go where the parameters are (DataParallel scatters them from there itself).
  if (auto params = model_->parameters(); !params.empty()) input_device_ = params.front().device();

  train_loader_->set_epoch(0);
  int64_t total = config_.epochs * steps_per_epoch();
  if (config_.max_steps > 0) total = std::min(total, config_.max_steps);
  scheduler_ = make_lr_schedule(config_, *optimizer_, total);

  // Out-of-memory recovery needs every rank's verdict after each attempt of a step wherever memory can
  // run out: under --memory-limit, or on a GPU (or the emulated one). From the config, so that every
  // rank decides alike; elsewhere with several ranks no rank pays for it (trainer_step.cpp). One rank
  // always recovers (its share costs nothing: no collective).
  if (world_.size() == 1 || !config_.memory_limit.empty() || input_device_.kind != DeviceKind::CPU)
    oom_share_ = agreement_.add(1, [this](double* failed) { failed[0] = attempt_failed_ ? 1.0 : 0.0; });
}

data::Batch Trainer::load(const data::BatchSource& loader, int64_t b) const {
  data::Batch batch = loader.batch(b);
  return batch.x.device() == input_device_ ? batch : batch.to(input_device_);
}

namespace {

// Sequence models' logits [B, T, V] and targets [B, T] as [B*T, V] and [B*T]: a loss per token.
void flatten_tokens(Tensor& logits, Tensor& target) {
  if (logits.dim() != 3) return;
  logits = ops::reshape(logits, {-1, logits.size(2)});
  target = ops::reshape(target, {-1});
}

}  // namespace

Tensor batch_output(nn::Module& model, const data::Batch& batch) {
  std::vector<Tensor> out = model.forward_many(batch.inputs());
  TANDEM_CHECK(out.size() == 1, "the model gives {} outputs; training with one label array needs one", out.size());
  return out[0];
}

Tensor Trainer::forward_loss(const data::Batch& batch) {
  // config.loss: cross_entropy on logits [B, C] and classes [B] (or per token: [B, T, V] and [B, T]),
  // or a loss between an output and a target of one shape (the user's arrays).
  Tensor loss = nn::config::compute_loss(config_.loss, batch_output(*model_, batch), batch.y);
  TANDEM_CHECK(loss.numel() == 1, "loss reduction '{}' gives {} values; training needs mean or sum",
               enum_name(config_.loss.reduction), loss.numel());
  return loss;
}

void Trainer::backward(const Tensor& loss) { loss.backward(); }

void Trainer::optimizer_step() { optimizer_->step(); }

int64_t Trainer::steps_per_epoch() const {
  const int64_t accum = std::max<int64_t>(config_.accumulation_steps, 1);
  return (train_loader_->num_batches() + accum - 1) / accum;
}

bool Trainer::train_epoch(EpochStats& stats) {
  model_->train();
  train_loader_->set_epoch(state_.epoch);
  const int64_t nb = train_loader_->num_batches();
  const int64_t accum = std::max<int64_t>(config_.accumulation_steps, 1);
  double loss_sum = 0, samples = 0;
  double t0 = now_s();
  bool more = true;
  // One optimizer step per group of `accum` batches; batch_in_epoch stays on group boundaries, so a
  // checkpoint taken after a step resumes at the next group.
  for (int64_t g = state_.batch_in_epoch; g < nb; g += accum) {
    if ((config_.max_steps > 0 && state_.step >= config_.max_steps) || stop_) {
      more = false;
      break;
    }
    const int64_t group_end = std::min(g + accum, nb);
    const GroupResult r = train_group(g, group_end);  // forward + backward, out-of-memory recovery, agreement
    loss_sum += r.loss_sum;
    samples += r.samples;
    for (auto& cb : callbacks_) cb->after_backward(*this);
    {
      trace::TraceSpan span("optimizer");
      try {
        optimizer_step();
      } catch (const OutOfMemoryError& e) {
        // Nothing to recover by halving: the state is made at the first step, as large as the parameters.
        throw_out_of_memory(__FILE__, __LINE__,
                            fmt::format("out of memory in the optimizer step of step {} (its state, as large as "
                                        "the parameters, is made at the first step; a smaller micro-batch cannot "
                                        "make room for it: give more memory): {}",
                                        state_.step + 1, e.what()));
      }
    }
    if (scheduler_) scheduler_->step();
    ++state_.step;
    state_.batch_in_epoch = group_end;
    for (auto& cb : callbacks_) cb->after_step(*this);
  }
  if (config_.max_steps > 0 && state_.step >= config_.max_steps) more = false;
  double seconds = now_s() - t0;
  std::vector<double> totals{loss_sum, samples};
  world_.sum(totals);
  stats.epoch = state_.epoch + 1;
  stats.steps = state_.step;
  stats.samples = static_cast<int64_t>(totals[1]);
  stats.train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
  stats.train_seconds = seconds;
  stats.samples_per_s = seconds > 0 ? totals[1] / seconds : 0.0;
  stats.lr = optimizer_->get_lr();
  return more && !stop_;
}

EvalResult Trainer::evaluate() {
  trace::TraceSpan span("evaluate");
  auto scope = evaluation_scope();
  NoGradGuard no_grad;
  bool was_training = model_->is_training();
  model_->eval();
  test_loader_->set_epoch(0);
  const bool classes = config_.loss.type == nn::config::LossType::CrossEntropy;
  double correct = 0, loss_sum = 0, samples = 0;
  for (int64_t b = 0; b < test_loader_->num_batches(); ++b) {
    data::Batch batch = load(*test_loader_, b);
    Tensor out = batch_output(*model_, batch), target = batch.y;
    if (!classes) {  // a regression: the mean loss only (per element, as training's mean)
      nn::config::LossConfig mean_loss{config_.loss.type, ops::Reduction::Mean};
      loss_sum += nn::config::compute_loss(mean_loss, out, target).item() * static_cast<double>(batch.size());
      samples += static_cast<double>(batch.size());
      continue;
    }
    flatten_tokens(out, target);
    loss_sum += ops::cross_entropy(out, target, -100, ops::Reduction::Sum).item();
    auto pred = ops::argmax(out, 1).to_vector<int64_t>();
    auto truth = target.to_vector<int64_t>();  // copies to the host where on a device
    for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == truth[i];
    samples += static_cast<double>(truth.size());
  }
  model_->train(was_training);
  std::vector<double> totals{correct, loss_sum, samples};
  world_.sum(totals);
  EvalResult r;
  r.classification = classes;
  r.samples = static_cast<int64_t>(totals[2]);
  r.accuracy = totals[2] > 0 ? totals[0] / totals[2] : 0.0;
  r.loss = totals[2] > 0 ? totals[1] / totals[2] : 0.0;
  return r;
}

TrainResult Trainer::fit() {
  TrainResult result;
  for (auto& cb : callbacks_) cb->on_train_begin(*this);
  log_.info("training {} on {} ({} process{}), {} steps per epoch, batch {} per process", config_.model.type,
            train_loader_->describe(), world_.size(), world_.size() > 1 ? "es" : "", steps_per_epoch(),
            config_.batch_size);
  while (state_.epoch < config_.epochs) {
    for (auto& cb : callbacks_) cb->on_epoch_begin(*this, state_.epoch);
    EpochStats stats;
    bool more = train_epoch(stats);
    if (config_.eval) {
      EvalResult ev = evaluate();
      stats.evaluated = true;
      stats.test_acc = ev.accuracy;
      stats.test_loss = ev.loss;
      stats.test_samples = ev.samples;
      stats.classification = ev.classification;
      result.evaluated = true;
      result.test_acc = ev.accuracy;
      result.test_loss = ev.loss;
      result.test_samples = ev.samples;
      result.classification = ev.classification;
    }
    const std::string test = !stats.evaluated          ? "test_acc -"
                             : stats.classification ? fmt::format("test_acc {:.4f}", stats.test_acc)
                                                    : fmt::format("test_loss {:.6g}", stats.test_loss);
    log_.info("epoch {}/{}  train_loss {:.4f}  {}  samples/s {:.0f}  lr {:.4g}  ({:.1f} s)", stats.epoch,
              config_.epochs, stats.train_loss, test, stats.samples_per_s, stats.lr, stats.train_seconds);
    nlohmann::json rec{{"event", "epoch"},          {"epoch", stats.epoch},
                       {"steps", stats.steps},      {"samples", stats.samples},
                       {"train_loss", stats.train_loss}, {"samples_per_s", stats.samples_per_s},
                       {"epoch_time_s", stats.train_seconds}, {"lr", stats.lr}};
    if (stats.evaluated) {
      if (stats.classification) rec["test_acc"] = stats.test_acc;
      rec["test_loss"] = stats.test_loss;
      rec["test_samples"] = stats.test_samples;
    }
    metrics_.write(rec);
    for (auto& cb : callbacks_) cb->on_epoch_end(*this, stats);
    result.history.push_back(stats);
    result.samples += stats.samples;
    result.train_seconds += stats.train_seconds;
    if (state_.batch_in_epoch < batches_per_epoch()) break;  // stopped mid-epoch: the state stays there
    ++state_.epoch;
    state_.batch_in_epoch = 0;
    if (!more) break;
  }
  result.epochs = static_cast<int64_t>(result.history.size());
  result.steps = state_.step;
  result.samples_per_s = result.train_seconds > 0 ? static_cast<double>(result.samples) / result.train_seconds : 0;
  nlohmann::json done{{"event", "done"},
                      {"model", config_.model.type},
                      {"world_size", world_.size()},
                      {"epochs", result.epochs},
                      {"steps", result.steps},
                      {"test_acc", result.evaluated && result.classification ? nlohmann::json(result.test_acc)
                                                                             : nlohmann::json()},
                      {"train_samples_per_s", result.samples_per_s},
                      {"peak_rss_mb", peak_rss_mb()}};
  if (stop_) done["stopped"] = true;  // request_stop() ended it before the last step (e.g. SIGTERM)
  fill_done_record(done);
  done["env"] = nlohmann::json::object();  // the TANDEM_* settings not at their defaults
  for (const auto& [name, value] : env::non_default()) done["env"][name] = value;
  done["micro_batch_size"] = micro_batch_size();
  done["accumulation_steps"] = effective_accumulation_steps();  // in force at the end
  done["oom_recoveries"] = oom_recoveries_;
  if (!config_.mode_reason.empty()) done["mode_reason"] = config_.mode_reason;
  done["peak_tensor_mb"] = static_cast<double>(memory::peak(input_device_)) / 1e6;  // all tensors of the device
  metrics_.write(done);
  for (auto& cb : callbacks_) cb->on_train_end(*this, result);
  return result;
}

}  // namespace tandem::train
