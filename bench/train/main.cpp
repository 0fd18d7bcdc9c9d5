// tandem-bench-train: training-step throughput of the mlp or cnn on synthetic data, as JSON:
// samples/s, GFLOP/s (forward + backward FLOPs from nn::model_flops_per_sample) and the fraction
// of the fp32 FMA peak measured in-process on the same number of threads (peak_isa: the ISA of that
// peak, the widest the CPU kernels may use; gemm_isa: the GEMM's kernel, bench::gemm_isa). samples/s
// comes from the median step time; the *_cpu_time figures use process CPU time (for a machine shared with others).
// --device cuda times the step on the GPU (each step ends with a stream synchronisation; no CPU peak).
// --model gpt --gpt-size tiny|small|gpt2-124m: tokens/s and mfu instead (bench/train/gpt_bench.h).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/common/cli_checks.h"
#include "train/host_memory.h"
#ifdef TANDEM_HAVE_CUDA
#include "kernels/cuda/backend.h"
#endif
#include "bench/common/peak.h"
#include "bench/train/gpt_bench.h"
#include "bench/train/profile.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "nn/parallel/rank_memory.h"
#include "runtime/autocast.h"
#include "runtime/device_query.h"
#include "runtime/error.h"
#include "runtime/ops.h"

using namespace tandem;

using bench::finish;

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench-train: training throughput against the fp32 peak", "tandem-bench-train"};
  std::string model = "mlp";
  int64_t batch = 128, steps = 50, warmup = 5;
  int threads = 1;
  bool profile = false;
  bool no_fuse = false;
  std::string device_name = "cpu", amp = "off";
  app.add_option("--model", model, "mlp, cnn or gpt")->check(CLI::IsMember({"mlp", "cnn", "gpt"}))->capture_default_str();
  bench::GptBenchOptions gpt;
  app.add_option("--gpt-size", gpt.size, "gpt: tiny, small (tandem-train's default) or gpt2-124m")
      ->check(CLI::IsMember({"tiny", "small", "gpt2-124m"}))
      ->capture_default_str();
  app.add_option("--context", gpt.context, "gpt: tokens per sequence (0: the size's context)")
      ->check(tandem::app::kNonNegative);
  app.add_option("--peak-tflops", gpt.peak_tflops, "gpt on a GPU: the peak for mfu (default: datasheet dense bf16)");
  app.add_flag("--fused-adamw", gpt.fused_adamw, "gpt: the fused multi-tensor AdamW (as torch_gpt.py --fused-adamw)");
  app.add_flag("--profile-timed", gpt.profile_timed,
               "gpt on a GPU: open the profiler's range (ncu/nsys --profile-from-start off) for the timed steps only");
  app.add_option("--batch-size", batch, "samples per step")->check(tandem::app::kPositive)->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->check(tandem::app::kPositive)->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->check(tandem::app::kNonNegative)->capture_default_str();
  app.add_option("--threads", threads, "Eigen/OpenMP threads")->check(tandem::app::kPositive)->capture_default_str();
  app.add_option("--device", device_name, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--amp", amp, "autocast: off, bf16 or f16")
      ->check(CLI::IsMember({"off", "bf16", "f16"}))
      ->capture_default_str();
  app.add_flag("--no-fuse", no_fuse,
               "keep separate ops (for A/B runs): the cnn's BatchNorm, ReLU and MaxPool2d; the gpt's MLP as "
               "linear_gelu then linear");
  bool no_fuse_norm = false;
  app.add_flag("--no-fuse-norm", no_fuse_norm,
               "the gpt's residual adds and the LayerNorms after them as separate ops (for A/B runs)");
  app.add_flag("--profile", profile, "also time every layer's forward and backward (JSON lines first)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tandem-bench-train: %s\n\n%s", e.what(), app.help().c_str());
    return 2;
  }
  try {
    app::keep_freed_host_memory();  // as tandem-train does
    if (model == "gpt") {
      gpt.batch = app.count("--batch-size") ? batch : 8;
      gpt.steps = app.count("--steps") ? steps : 20;
      gpt.warmup = app.count("--warmup") ? warmup : 3;
      gpt.threads = threads;
      gpt.device = device_name;
      gpt.fused_mlp = !no_fuse;
      gpt.fused_add_norm = !no_fuse_norm;
      gpt.amp = amp;
      return bench::run_gpt_bench(gpt);
    }
    omp_set_num_threads(threads);
    Generator gen(0);
    const Device device = device_name == "cuda" ? cuda::default_device(/*insist=*/true) : Device::parse(device_name);
    auto net = nn::make_model(model, gen);
    if (!no_fuse) net->fuse_batchnorm_epilogues();  // as tandem-train runs it
    net->to(device);
    nn::SGDOptions so;
    so.lr = 0.01;
    so.momentum = 0.9;
    nn::SGD opt(net->parameters(), so);
    Shape in_shape = model == "cnn" ? Shape{batch, 1, 28, 28} : Shape{batch, 784};
    Tensor x = rand_normal(in_shape, 0.0, 1.0, gen);
    std::vector<int64_t> labels(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = (i * 7) % 10;
    Tensor y = Tensor::from_vector(labels, {batch}).to(device);
    x = x.to(device);

    auto step = [&] {
      opt.zero_grad();
      Tensor loss;
      {
        std::optional<AutocastGuard> autocast;
        if (amp != "off") autocast.emplace(amp == "bf16" ? DType::bf16 : DType::f16);
        loss = ops::cross_entropy((*net)(x), y);
      }
      loss.backward();
      opt.step();
      finish(device);
    };
    for (int64_t i = 0; i < warmup; ++i) step();
    TANDEM_CHECK(!profile || device.is_cpu(), "--profile times CPU layers only");
    if (profile) bench::profile_layers(*net, opt, x, y, 10);
    // Per-step wall times (their median resists other processes on a shared machine) and the
    // CPU time of all steps (insensitive to time-sharing; pairs with the peak's CPU-time figure).
    std::vector<double> step_s;
    double c0 = bench::process_cpu_seconds();
    auto t_all = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < steps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      step();
      step_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
    double cpu = bench::process_cpu_seconds() - c0;
    std::sort(step_s.begin(), step_s.end());
    double median_step = step_s[step_s.size() / 2];

    const double flops = nn::model_flops_per_sample(model);
    double samples_per_s = static_cast<double>(batch) / median_step;
    double gflops = flops * samples_per_s / 1e9;
    double gflops_cpu = flops * static_cast<double>(batch * steps) / cpu / 1e9;
    // The bytes this process holds, as tandem-train's done record names them (docs/zero.md).
    const nn::parallel::RankMemory mem = nn::parallel::rank_memory(*net, opt, nullptr);
    const nlohmann::json memory{{"param_bytes", mem.param_bytes},
                                {"grad_bytes", mem.grad_bytes},
                                {"optimizer_state_bytes", mem.optimizer_state_bytes}};
    if (!device.is_cpu()) {
      nlohmann::json j{{"model", model},
                       {"batch", batch},
                       {"steps", steps},
                       {"device", device.str()},
                       {"amp", amp},
                       {"samples_per_s", samples_per_s},
                       {"step_ms_median", 1e3 * median_step},
                       {"step_ms_mean", 1e3 * wall / static_cast<double>(steps)},
                       {"gflops", gflops}};
      j.update(memory);
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    // Under --amp bf16 the GEMMs multiply bf16 (AMX tiles or vdpbf16ps): the fraction of that peak.
    const bench::PeakResult peak = amp == "bf16" ? bench::measure_bf16_peak(threads) : bench::measure_fp32_peak(threads);
    nlohmann::json j{{"model", model},
                     {"device", device.str()},
                     {"amp", amp},
                     {"batch", batch},
                     {"steps", steps},
                     {"threads", threads},
                     {"samples_per_s", samples_per_s},
                     {"step_ms_median", 1e3 * median_step},
                     {"step_ms_mean", 1e3 * wall / static_cast<double>(steps)},
                     {"gflops", gflops},
                     {"peak_gflops", peak.gflops},
                     {"peak_isa", peak.isa},
                     {"gemm_isa", bench::gemm_isa(amp)},
                     {"fraction_of_peak", gflops / peak.gflops},
                     {"gflops_cpu_time", gflops_cpu},
                     {"samples_per_cpu_s", static_cast<double>(batch * steps) / cpu},
                     {"peak_gflops_cpu_time", peak.gflops_cpu_time},
                     {"fraction_of_peak_cpu_time", gflops_cpu / peak.gflops_cpu_time}};
    j.update(memory);
    std::printf("%s\n", j.dump().c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "tandem-bench-train: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
