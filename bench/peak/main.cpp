// tandem-bench-peak: prints this machine's fp32 FMA peak (GFLOP/s per core and for --threads) as JSON;
// --dtype bf16: the peak of the bf16 products the CPU GEMM uses (AMX tiles or vdpbf16ps).
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/common/cli_checks.h"
#include "bench/common/peak.h"

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench-peak: fp32 FMA peak of this machine's cores"};
  int threads = 1, repeats = 5;
  double seconds = 1.0;
  std::string dtype = "fp32";
  app.add_option("--threads", threads, "threads running the kernel at once")->check(tandem::app::kPositive);
  app.add_option("--seconds", seconds, "total measuring time")->check(tandem::app::kPositive);
  app.add_option("--repeats", repeats, "timed repeats (the median is reported)")->check(tandem::app::kPositive);
  app.add_option("--dtype", dtype, "fp32, or bf16 (the CPU GEMM's bf16 products)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto peak = dtype == "bf16" ? tandem::bench::measure_bf16_peak(threads, seconds, repeats)
                              : tandem::bench::measure_fp32_peak(threads, seconds, repeats);
  nlohmann::json j{{"bench", "peak"},          {"dtype", dtype},          {"isa", peak.isa},
                   {"vector_floats", peak.vector_floats},
                   {"threads", peak.threads}, {"gflops_per_core", peak.gflops_per_thread},
                   {"gflops", peak.gflops},
                   {"gflops_cpu_time", peak.gflops_cpu_time}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
