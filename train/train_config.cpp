// tandem-train's defaults, over the run config's (TorchFort's) ones.
#include "train/train_config.h"

#include "nn/model_registry.h"
#include "runtime/data/default_dirs.h"

namespace tandem::train {

TrainConfig::TrainConfig() {
  model = nn::default_model_config("mlp");  // [784, 512, 512, 10]: Fashion-MNIST's classifier
  loss.type = nn::config::LossType::CrossEntropy;
  // SGD at lr 0.05, momentum 0.9, weight decay 5e-4 (the README's runs); torch's defaults for the rest.
  optimizer.type = nn::config::OptimizerType::SGD;
  optimizer.learning_rate = 0.05;
  optimizer.momentum = 0.9;
  optimizer.weight_decay = 5e-4;
  lr_scheduler.type = nn::config::ScheduleType::Cosine;  // per step, to 0 at the last step
  data_dir = data::kFashionMnistDir;
  gpt.text_dir = data::kFortunesDir;
}

void TrainConfig::apply_model_defaults(const std::string& type) {
  if (type != "gpt") return;
  batch_size = 8;
  eval_batch_size = 32;
  optimizer.type = nn::config::OptimizerType::AdamW;
  optimizer.learning_rate = 1e-3;
  optimizer.weight_decay = 0.1;
  lr_scheduler.warmup_steps = 50;
  grad_clip = 1.0;
}

}  // namespace tandem::train
