// tandem-bench-peak: prints this machine's fp32 FMA peak (GFLOP/s per core and for --threads) as JSON.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/common/peak.h"

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench-peak: fp32 FMA peak of this machine's cores"};
  int threads = 1, repeats = 5;
  double seconds = 1.0;
  app.add_option("--threads", threads, "threads running the kernel at once")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "total measuring time")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed repeats (the median is reported)")->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto peak = tandem::bench::measure_fp32_peak(threads, seconds, repeats);
  nlohmann::json j{{"bench", "peak"},          {"isa", peak.isa},         {"vector_floats", peak.vector_floats},
                   {"accumulators", 12},       {"threads", peak.threads}, {"gflops_per_core", peak.gflops_per_thread},
                   {"gflops", peak.gflops},
                   {"gflops_cpu_time", peak.gflops_cpu_time}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
