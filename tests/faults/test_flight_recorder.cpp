// FlightRecorder: the ring keeps the last N collectives in call order with their states, and an
// update of an entry already overwritten is dropped (not written into its successor).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <signal.h>

#include <nlohmann/json.hpp>

#include "comm/flight_recorder.h"
#include "runtime/env_settings.h"

namespace tandem::comm {
namespace {

TEST(FlightRecorder, KeepsTheLastNInCallOrderWithTheirStates) {
  FlightRecorder fr(4);
  for (int i = 0; i < 6; ++i) {
    uint64_t c = fr.enqueued(i % 2 ? "broadcast" : "allreduce", 10 + i, DType::f32);
    EXPECT_EQ(c, static_cast<uint64_t>(i));
    if (i < 5) fr.started(c, 100 + i);
    if (i < 4) fr.finished(c, i != 3);
  }
  fr.finished(0, true);  // overwritten by call 4: dropped
  auto j = nlohmann::json::parse(fr.json(1, 3));
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["size"], 3);
  ASSERT_EQ(j["entries"].size(), 4u);
  const char* states[] = {"completed", "failed", "started", "enqueued"};
  for (int k = 0; k < 4; ++k) {
    const auto& e = j["entries"][k];
    EXPECT_EQ(e["call"], 2 + k);
    EXPECT_EQ(e["state"], states[k]);
    EXPECT_EQ(e["bytes"], 4 * (12 + k));
    EXPECT_EQ(e["dtype"], "f32");
    EXPECT_EQ(e["name"], k % 2 ? "broadcast" : "allreduce");
  }
  EXPECT_EQ(j["entries"][2]["seq"], 104);
  EXPECT_EQ(j["entries"][3]["started_us"], 0);
}

TEST(FlightRecorder, DumpWritesToTheFlightDir) {
  std::string dir = ::testing::TempDir();
  std::string path;
  {
    env::ScopedValue flight_dir("TANDEM_FLIGHT_DIR", dir.c_str());
    FlightRecorder fr;
    fr.started(fr.enqueued("barrier", 0, DType::f32), 1);
    path = fr.dump(2, 4);
  }
  ASSERT_EQ(path, dir + "/tandem-flight-rank2.json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str());
  EXPECT_EQ(j["entries"][0]["name"], "barrier");
  EXPECT_EQ(j["entries"][0]["state"], "started");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem::comm

namespace tandem::comm {
namespace {

TEST(FlightRecorder, Sigusr1DumpsEveryIdentifiedRecorder) {
  std::string dir = ::testing::TempDir();
  env::ScopedValue flight_dir("TANDEM_FLIGHT_DIR", dir.c_str());
  std::string path = dir + "/tandem-flight-rank5.json";
  std::remove(path.c_str());
  FlightRecorder fr;
  fr.identify(5, 8);
  fr.started(fr.enqueued("allgather", 3, DType::i64), 7);
  ASSERT_EQ(::raise(SIGUSR1), 0);  // the process must survive it: the handler only wakes a thread
  std::string text;
  for (int i = 0; i < 500 && text.empty(); ++i) {  // the dumping thread writes it soon after
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    if (s.str().find("]}") != std::string::npos) text = s.str();
  }
  ASSERT_FALSE(text.empty()) << "no dump at " << path << " after SIGUSR1";
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["rank"], 5);
  EXPECT_EQ(j["entries"][0]["name"], "allgather");
  EXPECT_EQ(j["entries"][0]["seq"], 7);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem::comm
