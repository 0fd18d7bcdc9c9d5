// The value checks of each block of a run config, written once and shared by validate() (errors at
// the file's lines, through config_error) and the builders (errors naming the key path).
#pragma once
#include <functional>
#include <string>

#include "nn/config/run_config.h"

namespace tandem::nn::config {

// Reports the key at fault ("optimizer.parameters.learning_rate") and what to change. Must throw.
using ConfigFail = std::function<void(const std::string& key_path, const std::string& what)>;

void check_model(const ModelConfig& model, const ConfigFail& fail);
void check_loss(const LossConfig& loss, const ConfigFail& fail);
void check_optimizer(const OptimizerConfig& optimizer, const ConfigFail& fail);
void check_schedule(const ScheduleConfig& schedule, const ConfigFail& fail);
// The training and ddp blocks.
void check_training(const RunConfig& config, const ConfigFail& fail);

// Lower-case ASCII: type names are matched case-insensitively (TorchFort writes MSE and L1).
std::string lower(std::string s);

}  // namespace tandem::nn::config
