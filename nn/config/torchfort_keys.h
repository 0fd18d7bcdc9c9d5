// NVIDIA TorchFort's run-config keys that tandem reads but does not implement (from TorchFort's
// docs/api/config.rst), and what the parser does with each: ignores it with a warning, or refuses it.
// The supervised keys tandem implements are in run_config.h; docs/embedding.md has the whole table.
//
//   general: report_frequency, verbose, enable_wandb_hook,   read, type-checked, ignored: a warning for
//            enable_cuda_graphs                              each key set (kGeneral)
//   algorithm, actor, replay_buffer, rollout_buffer,         an RL config (torchfort_rl_*): refused, "reinforcement
//   policy_model, critic_model, actor_critic_model,          learning (TorchFort's torchfort_rl) is not supported"
//   policy_lr_scheduler, critic_lr_scheduler,                (kRlBlocks)
//   alpha_lr_scheduler
//   model / loss type torchscript (filename)                 refused: not supported
//   lr_scheduler type multistep (milestones, gamma),         refused: not supported
//     polynomial (total_iters, power),
//     linear (total_iters, start_factor, end_factor)
//   optimizer.parameters.amsgrad: true                       refused (false is accepted)
#pragma once

namespace tandem::nn::config::torchfort {

struct IgnoredKey {
  const char* key;
  bool flag;        // true or false; else an integer
  const char* why;  // what TorchFort does with it, or what tandem does instead
};

inline constexpr IgnoredKey kGeneral[] = {
    {"report_frequency", false, "TorchFort's report of the training loss every N steps"},
    {"verbose", true, "TorchFort's verbose output"},
    {"enable_wandb_hook", true, "tandem has no Weights & Biases hook"},
    {"enable_cuda_graphs", true, "tandem does not capture CUDA graphs"},
};

// The blocks only a reinforcement-learning config has (its optimizer, lr_scheduler and general blocks
// are the supervised ones).
inline constexpr const char* kRlBlocks[] = {
    "algorithm", "actor", "replay_buffer", "rollout_buffer", "policy_model", "critic_model", "actor_critic_model",
    "policy_lr_scheduler", "critic_lr_scheduler", "alpha_lr_scheduler",
};

}  // namespace tandem::nn::config::torchfort
