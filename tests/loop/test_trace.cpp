// The timeline: the library recorder (off records nothing; spans nest; the JSON parses), and a
// 2-rank tandem-train --trace run read back: one pid per rank, every span kind, forward, backward and
// optimizer in order on the compute track, the reducer's wait and copy-back inside backward, and each
// bucket's all-reduce launched inside backward (overlapped with it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/trace.h"

using namespace tandem;
using nlohmann::json;

TEST(Trace, OffRecordsNothingAndSpansNest) {
  trace::enable(false);
  { trace::TraceSpan s("ignored"); }
  EXPECT_TRUE(trace::take_events().empty());
  trace::enable(true);
  {
    trace::TraceSpan outer("outer");
    trace::TraceSpan inner("inner", 3);
  }
  trace::enable(false);
  auto ev = trace::take_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "inner");  // closed first
  EXPECT_EQ(ev[0].arg, 3);
  EXPECT_EQ(ev[1].name, "outer");
  EXPECT_LE(ev[1].ts_us, ev[0].ts_us);
  EXPECT_GE(ev[1].ts_us + ev[1].dur_us, ev[0].ts_us + ev[0].dur_us);
  std::string text = "[";
  for (const auto& line : trace::chrome_events(ev, 5)) text += (text.size() > 1 ? "," : "") + line;
  json j = json::parse(text + "]");
  EXPECT_EQ(j.size(), 5u);  // 3 metadata records + 2 spans
  for (const auto& e : j) EXPECT_EQ(e["pid"], 5);
}

#if defined(TANDEM_TRAIN_EXE) && defined(TANDEM_MPIEXEC)
namespace {

struct Span {
  std::string name;
  double begin, end;
  int tid;
};

bool inside(const Span& s, const Span& outer) { return s.begin >= outer.begin - 1e-3 && s.end <= outer.end + 1e-3; }

}  // namespace

TEST(Trace, TwoRankRunReadsBack) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/tandem_trace_test.json";
  const std::string cmd = fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 {} -np 2 {} "
      "--model mlp --batch-size 32 --max-steps 4 --epochs 1 --eval-batch-size 2000 --threads 1 --progress off "
      "--save {}/tandem_trace_ckpt --trace {} > {}/tandem_trace_test.log 2>&1",
      TANDEM_MPIEXEC, TANDEM_TRAIN_EXE, dir, path, dir);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  const json j = json::parse(in);
  std::map<int, std::vector<Span>> by_pid;
  std::set<int> named;
  for (const auto& e : j.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "process_name") named.insert(e["pid"].get<int>());
    if (e["ph"] != "X") continue;
    const double ts = e["ts"], dur = e["dur"];
    EXPECT_GE(dur, 0.0);
    by_pid[e["pid"].get<int>()].push_back({e["name"], ts, ts + dur, e["tid"].get<int>()});
  }
  EXPECT_EQ(named, (std::set<int>{0, 1}));
  ASSERT_EQ(by_pid.size(), 2u);
  for (auto& [pid, spans] : by_pid) {
    std::map<std::string, int> count;
    for (const Span& s : spans) ++count[s.name];
    for (const char* name : {"data", "forward", "backward", "optimizer", "allreduce", "allreduce_wait", "copy_back",
                             "evaluate", "checkpoint"})
      EXPECT_GT(count[name], 0) << "rank " << pid << " has no '" << name << "' span";
    EXPECT_EQ(count["forward"], 4);
    EXPECT_EQ(count["backward"], 4);
    EXPECT_EQ(count["optimizer"], 4);
    EXPECT_EQ(count["allreduce"] % 4, 0);  // every bucket every step
    std::vector<Span> backward;
    for (const Span& s : spans)
      if (s.name == "backward") backward.push_back(s);
    for (const Span& s : spans) {
      if (s.name == "allreduce_wait" || s.name == "copy_back") {
        bool in_some = false;
        for (const Span& b : backward) in_some |= inside(s, b);
        EXPECT_TRUE(in_some) << s.name << " at " << s.begin << " outside every backward on rank " << pid;
      }
      if (s.name == "allreduce") {
        EXPECT_EQ(s.tid, 1);  // the communication track: it overlaps the compute spans
        bool launched_in_backward = false;
        for (const Span& b : backward) launched_in_backward |= s.begin >= b.begin && s.begin <= b.end;
        EXPECT_TRUE(launched_in_backward) << "all-reduce at " << s.begin << " not launched in backward";
      }
    }
    // On the compute track, each step's forward, backward and optimizer follow one another.
    std::vector<Span> steps;
    for (const Span& s : spans)
      if (s.tid == 0 && (s.name == "forward" || s.name == "backward" || s.name == "optimizer")) steps.push_back(s);
    std::sort(steps.begin(), steps.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    for (size_t i = 0; i + 1 < steps.size(); ++i) EXPECT_LE(steps[i].end, steps[i + 1].begin + 1e-3);
  }
}
#endif
