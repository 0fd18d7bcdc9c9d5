// The CPU GEMM on one shape and element type, through each of its paths (TANDEM_CPU_GEMM: the best
// this CPU has, the AVX-512 kernels without AMX, Eigen), interleaved round by round so that the
// host's noise falls on all of them alike. One JSON line per path: median ms and GFLOP/s, by the wall
// clock and by the process's CPU time (a shared machine's time-slicing left out), and gemm_isa, the
// kernel that ran (kernels::cpu_f32_gemm_isa, or the bf16 path).
//   OMP_NUM_THREADS=1 tandem-bench-gemm --m 1024 --n 768 --k 256 --dtype bf16 --reps 30
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <omp.h>

#include "apps/common/cli_checks.h"
#include "kernels/cpu/gemm_avx512.h"
#include "runtime/backend/gemm.h"
#include "runtime/env_settings.h"
#include "runtime/ops.h"

using namespace tandem;

int main(int argc, char** argv) {
  int64_t m = 1024, n = 768, k = 256;
  bool ta = false, tb = false;
  int reps = 30;
  std::string dtype = "bf16", paths = "auto,avx512,eigen";
  CLI::App app{"CPU GEMM C = A B on each path"};
  app.add_option("--m", m);
  app.add_option("--n", n);
  app.add_option("--k", k);
  app.add_flag("--trans-a", ta, "A stored [k, m]");
  app.add_flag("--trans-b", tb, "B stored [n, k]");
  app.add_option("--dtype", dtype)->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--reps", reps)->check(tandem::app::kPositive);
  app.add_option("--paths", paths, "comma-separated: auto (the best this CPU has), avx512, eigen");
  CLI11_PARSE(app, argc, argv);

  const DType dt = dtype == "bf16" ? DType::bf16 : DType::f32;
  Generator gen(0);
  const Tensor a = ops::cast(rand_normal({ta ? k : m, ta ? m : k}, 0, 1, gen), dt);
  const Tensor b = ops::cast(rand_normal({tb ? n : k, tb ? k : n}, 0, 1, gen), dt);
  Tensor c = Tensor::zeros({m, n}, dt);
  kernels::GemmArgs g;
  g.dtype = dt;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.data_ptr();
  g.lda = ta ? m : k;
  g.b = b.data_ptr();
  g.ldb = tb ? k : n;
  g.c = c.data_ptr();
  g.ldc = n;

  std::vector<std::string> names;
  for (size_t p = 0; p <= paths.size();) {
    const size_t e = std::min(paths.find(',', p), paths.size());
    names.push_back(paths.substr(p, e - p));
    p = e + 1;
  }
  // Through env::ScopedValue: the kernels read the variable once and keep it (a setenv alone would be
  // unseen, and every path would be the first one).
  std::unique_ptr<env::ScopedValue> pinned;
  auto select = [&](const std::string& name) {
    pinned.reset();
    if (name != "auto") pinned = std::make_unique<env::ScopedValue>("TANDEM_CPU_GEMM", name.c_str());
  };
  auto cpu_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  };
  std::vector<std::vector<double>> ms(names.size()), cms(names.size());
  std::vector<std::string> isa(names.size());
  for (int r = -1; r < reps; ++r)  // round -1 warms every path up
    for (size_t i = 0; i < names.size(); ++i) {
      select(names[i]);
      isa[i] = dt == DType::f32 || std::string(kernels::cpu_bf16_gemm_path()) == "fp32" ? kernels::cpu_f32_gemm_isa()
                                                                                      : kernels::cpu_bf16_gemm_path();
      const double c0 = cpu_ms();
      const auto t0 = std::chrono::steady_clock::now();
      kernels::gemm(kCPU)(kCPU, g);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 0) ms[i].push_back(t), cms[i].push_back(cpu_ms() - c0);
    }
  pinned.reset();
  for (size_t i = 0; i < names.size(); ++i) {
    std::sort(ms[i].begin(), ms[i].end());
    std::sort(cms[i].begin(), cms[i].end());
    const double med = ms[i][ms[i].size() / 2], cmed = cms[i][cms[i].size() / 2];
    std::printf("{\"bench\":\"gemm\",\"path\":\"%s\",\"gemm_isa\":\"%s\",\"dtype\":\"%s\",\"m\":%ld,\"n\":%ld,"
                "\"k\":%ld,\"trans_a\":%s,\"trans_b\":%s,\"threads\":%d,\"reps\":%d,\"ms_median\":%.4f,"
                "\"gflops\":%.1f,\"gflops_cpu_time\":%.1f}\n",
                names[i].c_str(), isa[i].c_str(), dtype.c_str(), static_cast<long>(m), static_cast<long>(n),
                static_cast<long>(k), ta ? "true" : "false", tb ? "true" : "false", omp_get_max_threads(), reps, med,
                2.0 * m * n * k / (med * 1e6), 2.0 * m * n * k / (cmed * 1e6));
  }
  return 0;
}
