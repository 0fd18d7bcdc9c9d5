// What a tandem_model_t is: a model built from a run config with its optimizer, schedule, loss
// scaler and (distributed) communicator, and the step that trains it on caller-owned buffers. C++
// with exceptions; embed/c/c_api.cpp turns them into result codes.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/config/run_config.h"
#include "nn/module.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/optimizer.h"
#include "nn/parallel/ddp.h"
#include "nn/training_state.h"
#include "runtime/tensor.h"
#include "train/precision_step.h"

namespace tandem::embed {

// A caller's array as the C API describes it.
struct ArrayRef {
  const void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
};

// The device a model is put on: "cpu", "cuda" (cuda:<node rank> when distributed), "cuda:N", or
// "auto": a GPU when this process can have one of its own (distributed: one per rank of the node,
// cuda:<node rank>), else the CPU. NotSupportedError for a GPU that is not there.
Device pick_device(const std::string& name, bool distributed, int node_rank, int node_size);

class Session {
 public:
  // comm null: one process. device: "cpu", "cuda", "cuda:N", "auto". seed: the initialisation seed
  // (the config's training.seed unless tandem_set_seed gave one).
  Session(const std::string& config_file, const std::string& device, std::shared_ptr<comm::Communicator> comm,
          std::optional<uint64_t> seed);

  // One micro-batch: forward, loss, backward; the optimizer step every accumulation_steps calls.
  // Returns the micro-batch's loss. Several inputs go to the model's forward_many in order; with
  // several labels (one per output) the loss is the sum of the configured loss over the pairs.
  double train(const std::vector<ArrayRef>& inputs, const std::vector<ArrayRef>& labels);
  // Evaluation-mode forward; each output converted into its array of `outputs` (`data` written;
  // shapes must match, one array per model output).
  void inference(const std::vector<ArrayRef>& inputs, const std::vector<ArrayRef>& outputs);
  void save(const std::string& dir);
  // The model as ONNX (nn/onnx/onnx_export.h): an imported one with its trained initializers, mlp,
  // cnn, sequential and gpt exported; NotSupportedError naming any other type.
  void save_onnx(const std::string& path);
  void load(const std::string& path);
  int64_t step() const { return step_; }
  Device device() const { return device_; }

 private:
  // The caller's array as a tensor of `dtype` on the model's device: its memory itself where it is
  // already that (f32 on the device), else a converted copy.
  Tensor to_model(const ArrayRef& a, DType dtype) const;
  // Whether the model takes token ids (gpt), not f32 features.
  bool tokens_in() const;
  // The input as the model takes it: f32 features, or a gpt's token ids [batch, positions] as i64;
  // of several inputs, each floating one as f32 and each integer one as i64.
  Tensor model_input(const ArrayRef& input) const;
  std::vector<Tensor> model_inputs(const std::vector<ArrayRef>& inputs) const;
  nn::TrainComponents components();
  // ZeRO: the last step's parameters, gathered (DDP::sync_params), before anything reads or writes
  // them outside a forward through model_.
  void sync_params();
  // Runs `write` on rank 0 (every rank of a distributed model calls this) and makes its failure every
  // rank's error, so that no rank waits on one that gave up.
  void write_on_rank0(const std::string& what, const std::function<void()>& write);

  nn::config::RunConfig config_;
  Device device_ = kCPU;
  std::shared_ptr<comm::Communicator> comm_;
  std::shared_ptr<nn::Module> inner_;  // the bare model (checkpoints, inference)
  std::shared_ptr<nn::Module> model_;  // DDP over inner_, or inner_ itself
  nn::parallel::DistributedDataParallel* ddp_ = nullptr;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::unique_ptr<nn::LRScheduler> scheduler_;
  std::unique_ptr<train::PrecisionStep> precision_;  // autocast, loss scaling, the clipped update: the engine's
  bool tokens_in_ = false;  // the model takes token ids (a gpt, an ONNX model with an integer input)
  int64_t step_ = 0;   // optimizer steps
  int64_t micro_ = 0;  // micro-batches since the last optimizer step
};

}  // namespace tandem::embed
