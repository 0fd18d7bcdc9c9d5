// tandem-bench-train --model gpt: the GPT's training step (AdamW, decay groups as tandem-train)
// on random tokens, as JSON: tokens/s and model FLOPs utilisation.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/device.h"

namespace tandem::bench {

// Waits for the work queued on `device` (a no-op on the CPU, whose ops return finished).
void finish(Device device);

struct GptBenchOptions {
  std::string size = "small";  // tiny | small | gpt2-124m (nn::GPTConfig::preset)
  int64_t batch = 8;
  int64_t context = 0;         // 0: the preset's context
  int64_t steps = 20, warmup = 3;
  int threads = 1;
  std::string device = "cpu", amp = "off";
  double peak_tflops = 0;      // GPU: the dense peak to divide by (0: the datasheet's bf16 figure by name)
  bool fused_adamw = false;    // nn::FusedAdamW (one multi-tensor pass) instead of nn::AdamW
  bool fused_mlp = true;       // nn::GPTConfig::fused_mlp (--no-fuse: false)
  bool fused_add_norm = true;  // nn::GPTConfig::fused_add_norm (--no-fuse-norm: false)
  bool profile_timed = false;  // on a GPU: the profiler's range covers the timed steps only
};

// Prints one JSON line. mfu = tokens_per_s * flops_per_token / peak, flops_per_token from
// nn::GPTConfig::flops_per_token (6 * params without wpe + 12 * n_layer * T * n_embd); the peak is
// the fp32 FMA peak measured in the same run on the CPU, a datasheet dense bf16 figure on a GPU.
int run_gpt_bench(const GptBenchOptions& o);

}  // namespace tandem::bench
