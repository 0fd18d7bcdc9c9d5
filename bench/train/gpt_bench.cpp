// The GPT training-step benchmark.
#include "bench/train/gpt_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#ifdef TANDEM_HAVE_CUDA
#include "kernels/cuda/backend.h"
#endif
#include "bench/common/peak.h"
#include "nn/config/run_config.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/parallel/rank_memory.h"
#include "runtime/autocast.h"
#include "runtime/device_query.h"
#include "runtime/error.h"
#include "runtime/ops.h"

namespace tandem::bench {

void finish(Device device) {
#ifdef TANDEM_HAVE_CUDA
  if (device.kind == DeviceKind::CUDA) cuda::synchronize(device);
#else
  (void)device;
#endif
}

namespace {

// Dense bf16 tensor-core peaks from NVIDIA's datasheets (without sparsity), TFLOP/s.
double datasheet_bf16_tflops(const std::string& name) {
  struct Entry {
    const char* key;
    double tflops;
  };
  // Order matters: the first key found in the name wins.
  static const Entry table[] = {{"H200", 989.4}, {"H100 PCIe", 756.0}, {"H100", 989.4}, {"A100", 312.0},
                                {"L40S", 362.05}, {"A10", 125.0}};
  for (const auto& e : table)
    if (name.find(e.key) != std::string::npos) return e.tflops;
  return 0;
}

}  // namespace

int run_gpt_bench(const GptBenchOptions& o) {
  omp_set_num_threads(o.threads);
  nn::GPTConfig cfg = nn::GPTConfig::preset(o.size);
  if (o.context > 0) cfg.context = o.context;
  cfg.fused_mlp = o.fused_mlp;
  cfg.fused_add_norm = o.fused_add_norm;
  const int64_t t = cfg.context;
  const Device device = o.device == "cuda" ? cuda::default_device(/*insist=*/true) : Device::parse(o.device);
  Generator gen(0);
  nn::GPT model(cfg, gen);
  model.to(device);
  // AdamW with tandem-train's groups: decay on >= 2-dim parameters.
  nn::config::OptimizerConfig oc;
  oc.type = nn::config::OptimizerType::AdamW;
  oc.learning_rate = 1e-4;
  oc.weight_decay = 0.1;
  oc.fused = o.fused_adamw;  // nn::FusedAdamW
  std::unique_ptr<nn::Optimizer> opt =
      nn::config::build_optimizer(oc, model.parameters(), nn::config::DecayOn::Matrices);
  // Random tokens (the step's cost does not depend on them).
  std::vector<int64_t> ids(static_cast<size_t>(o.batch * (t + 1)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 2654435761u) % 50257 % cfg.vocab_size);
  std::vector<int64_t> xs, ys;
  for (int64_t b = 0; b < o.batch; ++b) {
    auto row = ids.begin() + b * (t + 1);
    xs.insert(xs.end(), row, row + t);
    ys.insert(ys.end(), row + 1, row + t + 1);
  }
  Tensor x = Tensor::from_vector(xs, {o.batch, t}).to(device), y = Tensor::from_vector(ys, {o.batch * t}).to(device);

  // Where the host is when each phase's work has been handed to the device (on a GPU the kernels
  // run behind it; a wait inside a phase shows in that phase): forward, backward, optimizer, and
  // then the wait for the device. A wait near zero means the host, not the GPU, set the pace.
  using Clock = std::chrono::steady_clock;
  std::vector<double> phase_ms[4];
  bool timed = false;
  auto step = [&] {
    const auto t0 = Clock::now();
    opt->zero_grad();
    Tensor loss;
    {
      std::optional<AutocastGuard> autocast;
      if (o.amp != "off") autocast.emplace(o.amp == "bf16" ? DType::bf16 : DType::f16);
      Tensor logits = model(x);
      loss = ops::cross_entropy(ops::reshape(logits, {-1, cfg.vocab_size}), y);
    }
    const auto t1 = Clock::now();
    loss.backward();
    const auto t2 = Clock::now();
    opt->step();
    const auto t3 = Clock::now();
    finish(device);
    const auto t4 = Clock::now();
    if (timed) {
      const Clock::time_point at[] = {t0, t1, t2, t3, t4};
      for (int p = 0; p < 4; ++p) phase_ms[p].push_back(1e3 * std::chrono::duration<double>(at[p + 1] - at[p]).count());
    }
  };
  for (int64_t i = 0; i < o.warmup; ++i) step();
  std::vector<double> step_s;
  const double c0 = process_cpu_seconds();
#ifdef TANDEM_HAVE_CUDA
  if (o.profile_timed && device.kind == DeviceKind::CUDA) cuda::profiler_start();
#endif
  timed = true;
  for (int64_t i = 0; i < o.steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    step_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
#ifdef TANDEM_HAVE_CUDA
  if (o.profile_timed && device.kind == DeviceKind::CUDA) cuda::profiler_stop();
#endif
  const double cpu = process_cpu_seconds() - c0;
  std::sort(step_s.begin(), step_s.end());
  const double median = step_s[step_s.size() / 2];
  const double tokens = static_cast<double>(o.batch * t);
  const double tokens_per_s = tokens / median, flops_per_token = cfg.flops_per_token(t);
  nlohmann::json j{{"model", "gpt"},
                   {"gpt_size", o.size},
                   {"n_layer", cfg.n_layer},
                   {"n_head", cfg.n_head},
                   {"n_embd", cfg.n_embd},
                   {"context", t},
                   {"vocab", cfg.vocab_size},
                   {"params", cfg.num_parameters()},
                   {"device", device.str()},
                   {"amp", o.amp},
                   {"batch", o.batch},
                   {"fused_adamw", o.fused_adamw},
                   {"fused_mlp", o.fused_mlp},
                   {"fused_add_norm", o.fused_add_norm},
                   {"steps", o.steps},
                   {"threads", o.threads},
                   {"tokens_per_s", tokens_per_s},
                   {"tokens_per_cpu_s", tokens * static_cast<double>(o.steps) / cpu},
                   {"step_ms_median", 1e3 * median},
                   {"flops_per_token", flops_per_token},
                   {"tflops", tokens_per_s * flops_per_token / 1e12}};
  // The bytes this process holds, as tandem-train's done record names them (docs/zero.md).
  const nn::parallel::RankMemory mem = nn::parallel::rank_memory(model, *opt, nullptr);
  j["param_bytes"] = mem.param_bytes;
  j["grad_bytes"] = mem.grad_bytes;
  j["optimizer_state_bytes"] = mem.optimizer_state_bytes;
  const char* phase_names[] = {"host_forward_ms", "host_backward_ms", "host_optimizer_ms", "wait_ms"};
  for (int p = 0; p < 4; ++p) {
    std::sort(phase_ms[p].begin(), phase_ms[p].end());
    j[phase_names[p]] = phase_ms[p][phase_ms[p].size() / 2];
  }
  if (device.is_cpu()) {
    // Under --amp bf16 the GEMMs multiply bf16 (AMX tiles or vdpbf16ps): mfu against that peak.
    const PeakResult peak = o.amp == "bf16" ? measure_bf16_peak(o.threads) : measure_fp32_peak(o.threads);
    const double tokens_per_cpu_s = tokens * static_cast<double>(o.steps) / cpu;
    j["peak_gflops"] = peak.gflops;
    j["peak_isa"] = peak.isa;
    j["gemm_isa"] = gemm_isa(o.amp);
    j["peak"] = o.amp == "bf16" && peak.isa.find("bf16") != std::string::npos ? peak.isa + " products, measured"
                                                                               : std::string("fp32 FMA, measured");
    j["mfu"] = tokens_per_s * flops_per_token / (peak.gflops * 1e9);
    j["mfu_cpu_time"] = tokens_per_cpu_s * flops_per_token / (peak.gflops_cpu_time * 1e9);
  } else if (device.kind == DeviceKind::CUDA) {
    const std::string name = cuda::device_info(device.index).name;
    const double peak = o.peak_tflops > 0 ? o.peak_tflops : datasheet_bf16_tflops(name);
    j["gpu"] = name;
    j["peak_tflops"] = peak;
    j["peak"] = o.peak_tflops > 0 ? "given" : "datasheet dense bf16";
    j["mfu"] = peak > 0 ? nlohmann::json(tokens_per_s * flops_per_token / (peak * 1e12)) : nlohmann::json();
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace tandem::bench
