// start_trace / finish_trace: the clock origin after a barrier, per-rank parts merged by rank 0.
#include "train/trace_run.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/trace.h"

namespace tandem::train {

namespace {

void barrier(const ParallelSetup& ps) {
  if (ps.comm && ps.comm->size() > 1) ps.comm->barrier()->wait();
}

std::string part_path(const std::string& path, int rank) { return path + ".rank" + std::to_string(rank); }

}  // namespace

void start_trace(const std::string& path, const ParallelSetup& ps) {
  if (path.empty()) return;
  trace::set_pid(ps.rank());
  // Every rank leaves the barrier within microseconds of the others (one node: the same steady
  // clock; across nodes the barrier's exit skew bounds the alignment error).
  barrier(ps);
  trace::set_origin();
  trace::enable(true);
}

void finish_trace(const std::string& path, const ParallelSetup& ps, const Logger& log) {
  if (path.empty()) return;
  trace::enable(false);
  trace::flush(part_path(path, ps.rank()));
  barrier(ps);
  if (ps.rank() == 0) {
    nlohmann::json merged = {{"traceEvents", nlohmann::json::array()}, {"displayTimeUnit", "ms"}};
    size_t spans = 0;
    for (int r = 0; r < ps.world_size(); ++r) {
      const std::string part = part_path(path, r);
      std::ifstream in(part);
      TANDEM_CHECK_KIND(IO, in.good(), "--trace: rank {}'s part '{}' is missing", r, part);
      nlohmann::json j = nlohmann::json::parse(in);
      for (auto& e : j["traceEvents"]) {
        spans += e["ph"] == "X";
        merged["traceEvents"].push_back(std::move(e));
      }
      std::remove(part.c_str());
    }
    std::ofstream out(path, std::ios::trunc);
    out << merged.dump() << "\n";
    TANDEM_CHECK_KIND(IO, out.good(), "--trace: cannot write '{}'", path);
    log.info("trace: {} spans of {} rank{} -> {} (open in https://ui.perfetto.dev or chrome://tracing)", spans,
             ps.world_size(), ps.world_size() > 1 ? "s" : "", path);
  }
  barrier(ps);
}

}  // namespace tandem::train
