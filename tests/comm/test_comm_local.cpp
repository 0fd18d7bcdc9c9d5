// The in-process backend: 1-4 members driven by one thread each, every collective and dtype against
// values computed from the ranks, bitwise equality across members and reruns, deadline and desync.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/executor.h"
#include "tests/comm/comm_test_util.h"

namespace tandem::comm::test {
namespace {

// Runs body(comm) on one thread per member; rethrows the first failure.
void run_group(int n, const Options& o, const std::function<void(Communicator&)>& body) {
  auto group = make_local_group(n, o);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(*group[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

Options small_segments() {
  Options o;
  o.segment_bytes = 1024;
  o.timeout_s = 30;
  return o;
}

TEST(CommLocal, MembersKnowTheirRankAndDevice) {
  auto g = make_local_group(3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(g[r]->rank(), r);
    EXPECT_EQ(g[r]->size(), 3);
    EXPECT_EQ(g[r]->device(), Device(DeviceKind::CPU, r));
    EXPECT_EQ(g[r]->backend_name(), "local");
  }
}

TEST(CommLocal, AllreduceEveryDtypeOpAndSize) {
  for (int n = 1; n <= 4; ++n)
    run_group(n, small_segments(), [&](Communicator& c) {
      for (DType t : all_dtypes())
        for (ReduceOp op : all_ops())
          for (int64_t count : {0, 1, 2, 3, 7, 13, 64, 1000, 4099}) {
            auto buf = make_buffer(t, rank_values(t, c.rank(), count));
            c.allreduce(buf.data(), count, t, op)->wait();
            auto want = expected_reduce(t, op, n, count);
            ASSERT_EQ(to_doubles(t, buf.data(), count), want)
                << n << " members, " << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
          }
    });
}

TEST(CommLocal, BitwiseIdenticalAcrossMembersAndReruns) {
  for (int n = 2; n <= 4; ++n) {
    std::vector<std::vector<char>> results(static_cast<size_t>(n) * 2);
    run_group(n, small_segments(), [&](Communicator& c) {
      for (int run = 0; run < 2; ++run) {
        auto v = random_floats(20011, 5u + c.rank());
        std::vector<double> dv(v.begin(), v.end());
        auto b = make_buffer(DType::bf16, dv);
        c.allreduce(b.data(), 20011, DType::bf16, ReduceOp::Sum)->wait();
        results[c.rank() * 2 + run] = b;
      }
    });
    for (auto& r : results) EXPECT_EQ(r, results[0]) << n << " members";
  }
}

TEST(CommLocal, ReduceScatterAllgatherBroadcastBarrier) {
  for (int n = 1; n <= 4; ++n)
    run_group(n, small_segments(), [&](Communicator& c) {
      const int r = c.rank();
      for (DType t : all_dtypes())
        for (int64_t count : {0, 1, 5, 777}) {
          auto send = make_buffer(t, rank_values(t, r, count * n));
          std::vector<char> recv(static_cast<size_t>(count) * dtype_size(t) + 1);
          c.reduce_scatter(send.data(), recv.data(), count, t, ReduceOp::Sum)->wait();
          ASSERT_EQ(to_doubles(t, recv.data(), count), expected_reduce(t, ReduceOp::Sum, n, count, count * r));

          auto mine = make_buffer(t, rank_values(t, r, count));
          std::vector<char> all(static_cast<size_t>(count * n) * dtype_size(t) + 1);
          c.allgather(mine.data(), all.data(), count, t)->wait();
          auto got = to_doubles(t, all.data(), count * n);
          for (int q = 0; q < n; ++q) {
            auto want = to_doubles(t, make_buffer(t, rank_values(t, q, count)).data(), count);
            ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + count * q));
          }

          const int root = n - 1;
          auto b = make_buffer(t, rank_values(t, r, count));
          c.broadcast(b.data(), count, t, root)->wait();
          ASSERT_EQ(to_doubles(t, b.data(), count), to_doubles(t, make_buffer(t, rank_values(t, root, count)).data(), count));
          c.barrier()->wait();
        }
    });
}

TEST(CommLocal, SendRecvAndAsyncIssueFromOneThread) {
  // All members' collectives issued from ONE thread, then waited: the progress threads run them.
  auto g = make_local_group(4, small_segments());
  std::vector<std::vector<float>> bufs(4, std::vector<float>(3001));
  std::vector<WorkPtr> works;
  for (int r = 0; r < 4; ++r) {
    std::fill(bufs[r].begin(), bufs[r].end(), float(r));
    works.push_back(g[r]->allreduce(bufs[r].data(), 3001, DType::f32, ReduceOp::Max));
  }
  for (auto& w : works) w->wait();
  for (auto& b : bufs) EXPECT_EQ(b[1234], 3.0f);
  std::vector<int64_t> a(100, 42), z(100, 0);
  auto ws = g[1]->send(a.data(), 100, DType::i64, 3);
  auto wr = g[3]->recv(z.data(), 100, DType::i64, 1);
  wr->wait();
  ws->wait();
  EXPECT_EQ(z, a);
}

// Max and Min give every rank the same bits in whatever order partial results meet (4 ranks and a
// small buffer: recursive doubling, which combines mine with theirs on one side of each pair and
// theirs with mine on the other): a NaN on any rank wins, Max's zero is +0 and Min's -0.
TEST(CommLocal, MaxAndMinAreTheSameBitsOnEveryRank) {
  auto g = make_local_group(4);
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    std::vector<std::vector<float>> bufs(4);
    for (int r = 0; r < 4; ++r)  // a NaN on rank 1; -0 and +0 by turns; -1.5, 1.5, 0.5, -0.5
      bufs[r] = {r == 1 ? NAN : float(r), r % 2 ? 0.0f : -0.0f, float(r * 3 % 4) - 1.5f};
    std::vector<WorkPtr> works;
    for (int r = 0; r < 4; ++r) works.push_back(g[r]->allreduce(bufs[r].data(), 3, DType::f32, op));
    for (auto& w : works) w->wait();
    for (int r = 1; r < 4; ++r)
      EXPECT_EQ(std::memcmp(bufs[r].data(), bufs[0].data(), 3 * sizeof(float)), 0)
          << reduce_op_name(op) << " on rank " << r << ": " << bufs[r][0] << " " << bufs[r][1] << " vs rank 0's "
          << bufs[0][0] << " " << bufs[0][1];
    EXPECT_TRUE(std::isnan(bufs[0][0])) << reduce_op_name(op);
    EXPECT_EQ(std::signbit(bufs[0][1]), op == ReduceOp::Min) << reduce_op_name(op);
    EXPECT_EQ(bufs[0][2], op == ReduceOp::Max ? 1.5f : -1.5f);
  }
}

TEST(CommLocal, SkippedCollectiveGivesDeadlineError) {
  Options o = small_segments();
  o.timeout_s = 0.5;
  std::vector<std::string> msgs(3);
  auto g = make_local_group(3, o);
  std::vector<std::thread> th;
  for (int r = 0; r < 3; ++r)
    th.emplace_back([&, r] {
      std::vector<float> v(100, 1.0f);
      g[r]->allreduce(v.data(), 100, DType::f32, ReduceOp::Sum)->wait();
      if (r == 1) return;  // skips collective #2
      try {
        g[r]->allreduce(v.data(), 100, DType::f32, ReduceOp::Sum)->wait();
      } catch (const CommError& e) {
        msgs[r] = e.what();
      }
    });
  for (auto& t : th) t.join();
  for (int r : {0, 2}) {
    EXPECT_NE(msgs[r].find("allreduce (collective #2) missed its deadline"), std::string::npos) << msgs[r];
    EXPECT_NE(msgs[r].find("missing ranks (never arrived at #2): 1;"), std::string::npos) << msgs[r];
  }
}

TEST(CommLocal, DesyncCheckNamesTheRank) {
  Options o = small_segments();
  o.debug_desync = true;
  std::vector<std::string> msgs(3);
  run_group(3, o, [&](Communicator& c) {
    std::vector<float> v(10, 1.0f);
    WorkPtr w = c.rank() == 2 ? c.allgather(v.data(), v.data(), 0, DType::f32)
                              : c.allreduce(v.data(), 10, DType::f32, ReduceOp::Sum);
    try {
      w->wait();
    } catch (const CommError& e) {
      msgs[c.rank()] = e.what();
    }
  });
  for (auto& m : msgs) {
    EXPECT_NE(m.find("ranks 2 differ"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 2: #1 allgather(count=0"), std::string::npos) << m;
  }
}

// The executor without a thread (MPI below MPI_THREAD_MULTIPLE): work runs inside submit(); an
// error is kept for wait() and breaks the executor for later work.
TEST(CommExecutor, InlineModeRunsInsideSubmitAndKeepsErrors) {
  auto ex = std::make_shared<Executor>(/*use_thread=*/false);
  int ran = 0;
  WorkPtr a = ex->submit([&] { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(a->is_completed());
  WorkPtr b = ex->submit([&] { TANDEM_FAIL(Comm, "boom"); });
  EXPECT_TRUE(b->is_completed());
  EXPECT_THROW(b->wait(), CommError);
  EXPECT_TRUE(ex->broken());
  WorkPtr c = ex->submit([&] { ++ran; });
  EXPECT_THROW(c->wait(), CommError);
  EXPECT_EQ(ran, 1);
  ex->shutdown();
}

TEST(CommExecutor, ThreadedModeRunsInOrderAndWaitCanSteal) {
  auto ex = std::make_shared<Executor>(/*use_thread=*/true);
  std::vector<int> order;
  std::vector<WorkPtr> works;
  for (int i = 0; i < 50; ++i) works.push_back(ex->submit([&order, i] { order.push_back(i); }));
  works.back()->wait();
  for (auto& w : works) EXPECT_TRUE(w->is_completed());
  std::vector<int> want(50);
  for (int i = 0; i < 50; ++i) want[i] = i;
  EXPECT_EQ(order, want);
  ex->shutdown();
}

// The wait hook tells the transport when the caller blocks on running work (its core is then free
// for a progress thread to spin on) and when it runs again. Here the running work can only finish
// once the hook has said "waiting": without the call, it would time out and record so.
TEST(CommExecutor, WaitHookBracketsTheCallersBlockedWait) {
  auto ex = std::make_shared<Executor>(/*use_thread=*/true);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> calls;
  ex->set_wait_hook([&](bool waiting) {
    std::lock_guard<std::mutex> lk(mu);
    calls.push_back(waiting);
    cv.notify_all();
  });
  std::atomic<bool> started{false};
  bool released_by_hook = false;
  WorkPtr w = ex->submit([&] {
    started = true;
    std::unique_lock<std::mutex> lk(mu);
    released_by_hook = cv.wait_for(lk, std::chrono::seconds(30), [&] { return !calls.empty(); });
  });
  while (!started) std::this_thread::yield();  // running on the progress thread
  w->wait();
  EXPECT_TRUE(released_by_hook);
  EXPECT_EQ(calls, (std::vector<bool>{true, false}));
  w->wait();  // complete already: no blocking, no call
  EXPECT_EQ(calls.size(), 2u);
  ex->shutdown();
}

}  // namespace
}  // namespace tandem::comm::test
