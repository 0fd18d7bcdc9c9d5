// What the status machinery costs, piece by piece (JSON lines): the training thread's share per
// step (a TrainingSnapshot of a 2-rank job copied into a shared_ptr and swapped onto the board, as
// StatusPublisher::publish does; the rank report's JSON), and the other threads' work (one sampler
// sample: /proc and NVML; formatting /status and /metrics). TANDEM_NVML_LIBRARY may name a fake
// NVML on a machine without a GPU.
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "apps/common/rank_reports.h"
#include "apps/common/status_publisher.h"
#include "apps/common/status_server.h"
#include "runtime/monitor/sampler.h"

using namespace tandem;

namespace {

template <typename Fn>
double seconds_per_call(int calls, Fn&& fn) {
  fn();  // warm
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

void report(const char* what, const char* thread, double s) {
  fmt::print("{{\"bench\":\"status\",\"what\":\"{}\",\"thread\":\"{}\",\"us_per_call\":{:.3f}}}\n", what, thread,
             s * 1e6);
}

}  // namespace

int main() {
  const monitor::Snapshot sample = monitor::sample_now();
  app::TrainingSnapshot job;
  job.model = "mlp";
  job.mode = "ddp";
  job.world_size = 2;
  job.device_reason = "cuda:1 (NVIDIA H100 80GB HBM3): 70.0 GiB free of 80.0 GiB, rank 0 of 2 on this node";
  job.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    job.ranks[r].rank = r;
    job.ranks[r].host = sample.host.hostname;
    job.ranks[r].device = fmt::format("cuda:{}", r);
    if (!sample.gpus.empty()) job.ranks[r].gpu = sample.gpus[0];
  }
  app::StatusBoard board;
  volatile double sink = 0;
  report("publish snapshot (per step)", "training", seconds_per_call(100000, [&] {
           auto s = std::make_shared<app::TrainingSnapshot>(job);
           s->step += 1;
           board.publish(std::move(s));
         }));
  report("rank report JSON (every 5 steps, ranks > 0)", "training", seconds_per_call(20000, [&] {
           sink = sink + static_cast<double>(app::rank_figures_to_json(job.ranks[1]).size());
         }));
  report(sample.gpus.empty() ? "sample: /proc only (no NVML)" : "sample: /proc and NVML", "sampler",
         seconds_per_call(2000, [&] { sink = sink + static_cast<double>(monitor::sample_now().gpus.size()); }));
  report("format /status", "http", seconds_per_call(20000, [&] {
           sink = sink + static_cast<double>(app::status_json(*board.latest(), &sample).size());
         }));
  report("format /metrics", "http", seconds_per_call(20000, [&] {
           sink = sink + static_cast<double>(app::status_metrics(*board.latest()).size());
         }));
  return sink < 0;
}
