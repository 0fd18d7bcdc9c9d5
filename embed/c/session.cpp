// The model behind a tandem_model_t: built from the run config, trained one micro-batch per call.
#include "embed/c/session.h"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "nn/model_registry.h"
#include "nn/onnx/onnx_export.h"
#include "nn/parallel/zero_optimizer.h"
#include "train/precision_step.h"
#include "train/zero_setup.h"
#include "runtime/autograd.h"
#include "runtime/device_query.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/shape.h"
#include "runtime/serialization/training_checkpoint.h"

namespace tandem::embed {
Device pick_device(const std::string& name, bool distributed, int node_rank, int node_size) {
  if (name != "auto") {
    Device d = name == "cuda" ? Device(DeviceKind::CUDA, distributed ? node_rank : 0) : Device::parse(name);
    TANDEM_CHECK(d.kind == DeviceKind::CPU || d.kind == DeviceKind::CUDA,
                 "device '{}': expected cpu, cuda, cuda:N or auto", name);
    if (d.kind == DeviceKind::CUDA)
      TANDEM_CHECK_KIND(NotSupported, d.index < cuda::device_count(), "device {}: {}", d.str(), cuda::describe());
    return d;
  }
  const int gpus = cuda::device_count();
  if (gpus == 0) return kCPU;
  if (!distributed) return Device(DeviceKind::CUDA, 0);
  return node_size <= gpus ? Device(DeviceKind::CUDA, node_rank) : kCPU;
}

Session::Session(const std::string& config_file, const std::string& device, std::shared_ptr<comm::Communicator> comm,
                 std::optional<uint64_t> seed)
    : config_(nn::config::load_run_config(config_file)), comm_(std::move(comm)) {
  device_ = comm_ ? comm_->device() : pick_device(device, false, 0, 1);
  Generator init(seed ? *seed : static_cast<uint64_t>(config_.seed));
  inner_ = nn::config::build_model(config_.model, init);
  tokens_in_ = nn::model_input(config_.model) == nn::ModelInput::Tokens;  // once: onnx reads its file
  inner_->to(device_);
  model_ = inner_;
  if (comm_) {
    auto ddp = std::make_shared<nn::parallel::DistributedDataParallel>(inner_, comm_, config_.ddp);  // collective
    ddp_ = ddp.get();
    model_ = ddp;
  }
  // A GPT decays its matrices and embeddings only, as tandem-train's does.
  optimizer_ = nn::config::build_optimizer(config_.optimizer, model_->parameters(),
                                           tokens_in() ? nn::config::DecayOn::Matrices : nn::config::DecayOn::All);
  // ddp.zero_stage: this rank's shard of the optimizer.
  optimizer_ = train::zero_optimizer(ddp_, {config_.ddp.zero_stage}, std::move(optimizer_));
  scheduler_ = nn::config::build_scheduler(config_.lr_scheduler, *optimizer_);
  precision_ = std::make_unique<train::PrecisionStep>(config_.amp, comm_.get());
  model_->train();
}

Tensor Session::to_model(const ArrayRef& a, DType dtype) const {
  const int where = cuda::pointer_device(a.data);
  const Device at = where < 0 ? kCPU : Device(DeviceKind::CUDA, where);
  TANDEM_CHECK(at.is_cpu() || at == device_, "an array in {} memory was passed to a model on {}; pass host memory "
               "or memory of the model's device", at.str(), device_.str());
  // Read-only use: the tensor over the caller's memory is never written (ops allocate their outputs).
  Tensor view = Tensor::from_blob(const_cast<void*>(a.data), a.shape, a.dtype, at, nullptr);
  Tensor t = view.dtype() == dtype ? view : ops::cast(view, dtype);
  return t.to(device_);
}

bool Session::tokens_in() const { return tokens_in_; }

Tensor Session::model_input(const ArrayRef& input) const {
  if (!tokens_in()) return to_model(input, DType::f32);
  TANDEM_CHECK(!is_floating(input.dtype) && input.shape.size() == 2,
               "input: a gpt model takes token ids, int32 or int64 of shape [batch, positions], got {} of shape {}",
               dtype_name(input.dtype), shape_str(input.shape));
  return to_model(input, DType::i64);
}

std::vector<Tensor> Session::model_inputs(const std::vector<ArrayRef>& inputs) const {
  TANDEM_CHECK(!inputs.empty(), "inputs: the list is empty");
  if (inputs.size() == 1) return {model_input(inputs[0])};
  std::vector<Tensor> out;
  for (const ArrayRef& a : inputs) out.push_back(to_model(a, is_floating(a.dtype) ? DType::f32 : DType::i64));
  return out;
}

double Session::train(const std::vector<ArrayRef>& inputs, const std::vector<ArrayRef>& labels) {
  const bool classes = config_.loss.type == nn::config::LossType::CrossEntropy;
  std::vector<Tensor> targets;
  for (const ArrayRef& label : labels) {
    TANDEM_CHECK(classes || is_floating(label.dtype), "label: loss {} needs float32 or float64 labels, got {}",
                 enum_name(config_.loss.type), dtype_name(label.dtype));
    TANDEM_CHECK(!classes || !is_floating(label.dtype), "label: cross_entropy needs class indices (int32 or int64), "
                 "got {}", dtype_name(label.dtype));
    targets.push_back(to_model(label, classes ? DType::i64 : DType::f32));
  }
  TANDEM_CHECK(!targets.empty(), "labels: the list is empty");
  const std::vector<Tensor> x = model_inputs(inputs);
  const bool last_micro = micro_ + 1 >= config_.accumulation_steps;
  std::optional<nn::parallel::DistributedDataParallel::NoSync> no_sync;
  if (ddp_ && !last_micro) no_sync.emplace(ddp_->no_sync());  // reduce only with the last micro-batch
  Tensor loss = precision_->forward([&] {
    const std::vector<Tensor> out = model_->forward_many(x);
    TANDEM_CHECK(out.size() == targets.size(), "the model gives {} outputs and {} labels were given: one label per "
                 "output", out.size(), targets.size());
    Tensor sum = nn::config::compute_loss(config_.loss, out[0], targets[0]);
    for (size_t j = 1; j < out.size(); ++j) sum = sum + nn::config::compute_loss(config_.loss, out[j], targets[j]);
    return sum;
  });
  TANDEM_CHECK(loss.numel() == 1, "loss reduction '{}' gives {} values; training needs mean or sum",
               enum_name(config_.loss.reduction), loss.numel());
  const double value = loss.item();
  // The accumulated gradient is the mean over the micro-batches of an optimizer step.
  Tensor scaled = config_.accumulation_steps > 1 ? loss * (1.0 / static_cast<double>(config_.accumulation_steps))
                                                 : loss;
  precision_->backward(scaled);
  no_sync.reset();
  if (!last_micro) {
    ++micro_;
    return value;
  }
  micro_ = 0;
  if (ddp_) ddp_->finalize();
  precision_->update(*optimizer_, ddp_, model_->parameters(), config_.grad_clip);
  optimizer_->zero_grad();
  if (scheduler_) scheduler_->step();
  ++step_;
  return value;
}

void Session::sync_params() {
  if (ddp_) ddp_->sync_params();
}

void Session::inference(const std::vector<ArrayRef>& inputs, const std::vector<ArrayRef>& outputs) {
  sync_params();  // inner_ runs without DDP's forward
  const std::vector<Tensor> x = model_inputs(inputs);
  std::vector<Tensor> y;
  {
    NoGradGuard no_grad;
    inner_->eval();
    try {
      y = inner_->forward_many(x);
    } catch (...) {
      inner_->train();
      throw;
    }
    inner_->train();
  }
  TANDEM_CHECK(y.size() == outputs.size(), "the model gives {} outputs and {} output arrays were given", y.size(),
               outputs.size());
  for (size_t j = 0; j < y.size(); ++j) {
    const ArrayRef& o = outputs[j];
    TANDEM_CHECK(y[j].shape() == o.shape, "output{}: the model gives shape {} for this input, the output array has "
                 "shape {}", y.size() > 1 ? " " + std::to_string(j) : std::string(), shape_str(y[j].shape()),
                 shape_str(o.shape));
    void* out = const_cast<void*>(o.data);  // an output array: the caller's to write
    const int where = cuda::pointer_device(out);
    const Device at = where < 0 ? kCPU : Device(DeviceKind::CUDA, where);
    Tensor dst = Tensor::from_blob(out, o.shape, o.dtype, at, nullptr);
    dst.copy_(y[j]);
  }
}

nn::TrainComponents Session::components() {
  nn::TrainComponents c;
  c.model = inner_.get();
  c.optimizer = optimizer_.get();
  c.scaler = &precision_->scaler();
  c.scheduler = scheduler_.get();
  return c;
}

void Session::save(const std::string& dir) {
  sync_params();
  // ZeRO: the shards' optimizer state gathered onto rank 0 (collective: every rank saves).
  if (auto* zero = dynamic_cast<nn::parallel::ZeroOptimizer*>(optimizer_.get())) zero->consolidate_state(0);
  TANDEM_CHECK(micro_ == 0, "save_checkpoint after {} of {} micro-batches of a step: save between optimizer steps",
               micro_, config_.accumulation_steps);
  nn::TrainProgress p;
  p.step = step_;
  p.world_size = comm_ ? comm_->size() : 1;
  p.strings = {{"api", "c"}, {"config", config_.source}};
  write_on_rank0(fmt::format("checkpoint '{}'", dir), [&] { nn::save_training_state(dir, components(), p); });
}

void Session::save_onnx(const std::string& path) {
  sync_params();
  // An imported model writes its own graph back; mlp, cnn, sequential and gpt are exported; any
  // other type is a NotSupportedError that names it.
  write_on_rank0(fmt::format("ONNX file '{}'", path), [&] {
    try {
      nn::onnx::save_onnx(*inner_, path);
    } catch (const NotSupportedError& e) {
      TANDEM_FAIL(NotSupported, "tandem_save_onnx: model type {}: {}", config_.model.type, e.what());
    }
  });
}

void Session::write_on_rank0(const std::string& what, const std::function<void()>& write) {
  if (!comm_) {
    write();
    return;
  }
  // Rank 0 writes, then tells every rank whether it could: a write that failed (a bad folder, a
  // full disk) is an error on every rank at once, not a rank 0 that returns while the others wait
  // out the communicator's deadline in a barrier it never joins. Every rank returns once the
  // file is complete (rank 0 broadcasts after writing).
  std::exception_ptr failure;
  if (comm_->rank() == 0) {
    try {
      write();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  Tensor written = Tensor::full({1}, failure ? 0.0 : 1.0, DType::f32, comm_->device());
  comm_->broadcast(written, 0)->wait();
  if (failure) std::rethrow_exception(failure);
  TANDEM_CHECK_KIND(IO, written.item() == 1.0, "{}: rank 0 could not write it (its tandem_last_error() says why)",
                    what);
}

void Session::load(const std::string& path) {
  sync_params();  // nothing in flight may overwrite the loaded weights
  nn::TrainProgress p = nn::load_training_state(path, components());
  step_ = p.step;
  micro_ = 0;
  optimizer_->zero_grad();
}

}  // namespace tandem::embed
