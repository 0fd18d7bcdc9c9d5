// The transport under the ring algorithms: post a send, post a receive, wait for both (with a
// deadline). Plus the memory operations the algorithms need on the transport's memory (host
// loops by default; device kernels for NCCL), and what a deadline error needs to name the ranks.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace tandem::comm {

using Clock = std::chrono::steady_clock;

// The collective being run: named in every error.
struct OpInfo {
  const char* name = "";  // "allreduce", ...
  uint64_t seq = 0;       // this communicator's collective sequence number (1, 2, ...)
  Clock::time_point deadline;
  double timeout_s = 0;
  const char* phase = "";  // a step of a composite collective, named at the end of its errors
};

class Transport {
 public:
  virtual ~Transport();
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // ---- the three calls ----
  // Posts sending `bytes` at src to peer; src must stay unchanged until wait() returns.
  virtual void send(const void* src, size_t bytes, int peer) = 0;
  // Posts receiving `bytes` from peer into dst; dst holds them once wait() returns.
  virtual void recv(void* dst, size_t bytes, int peer) = 0;
  // A receive whose data is not read again soon (the last all-gather step of a buffer larger than
  // this rank's share of the cache): a transport that copies it may store it around the cache
  // (non-temporal stores: no read-for-ownership of dst, no eviction of what is cached).
  virtual void recv_uncached(void* dst, size_t bytes, int peer) { recv(dst, bytes, peer); }
  // Optional fused receive: dst[i] = op(dst[i], received[i]) straight from the sender's memory
  // (shared memory), no staging copy. Only called where can_recv_reduce() is true.
  virtual bool can_recv_reduce() const { return false; }
  virtual void recv_reduce(void* /*dst*/, size_t /*bytes*/, int /*peer*/, DType /*dtype*/, ReduceOp /*op*/) {
    TANDEM_FAIL(Internal, "this transport has no fused receive-reduce");
  }
  // Waits for everything posted, until op.deadline; then throws CommError naming the op, the peers
  // still outstanding and the ranks that have not started this collective.
  virtual void wait(const OpInfo& op) = 0;

  // Called after the last step of each operation: a transport that only queued the work (NCCL on
  // a stream) waits for it here, until op.deadline. Host transports are done already.
  virtual void complete(const OpInfo& /*op*/) {}
  // The thread that issues the collectives is blocked until they complete (true), or runs again
  // (false): a transport that waits for its peers by sleeping may spin meanwhile.
  virtual void set_caller_waiting(bool /*waiting*/) {}

  // The ring's segment (one pipelined message) when Options::segment_bytes is 0.
  virtual int64_t preferred_segment_bytes() const { return 1024 * 1024; }

  // ---- diagnosis ----
  // Records that this rank started collective `seq` (others read it when they time out).
  virtual void announce(uint64_t /*seq*/) {}
  // Ranks known not to have started collective `seq` yet; empty when unknown.
  virtual std::vector<int> lagging_ranks(uint64_t /*seq*/) { return {}; }
  // A transport over some of the job's ranks (the hierarchy's node and rail) reports its deadlines
  // in the job's terms: `job`'s rank and size, `job`'s missing ranks (every live rank of the job
  // reaches a deadline in some step of the same collective) and its peers by their rank in `job`
  // (job_ranks[r] for its rank r).
  void report_as(Transport* job, std::vector<int> job_ranks) {
    job_ = job;
    job_ranks_ = std::move(job_ranks);
  }

  // ---- memory the algorithms work on (host by default) ----
  virtual void* alloc(size_t bytes);
  virtual void free(void* p);
  virtual void copy(void* dst, const void* src, size_t bytes);
  virtual void upload(void* dst, const void* host_src, size_t bytes) { copy(dst, host_src, bytes); }
  virtual void download(void* host_dst, const void* src, size_t bytes) { copy(host_dst, src, bytes); }
  // dst[i] = op(dst[i], src[i]) for dtype in {f32, f64, i32, i64} (Avg sums).
  virtual void reduce(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op);
  virtual void divide(void* buf, int64_t n, DType dtype, int divisor);
  // Element conversion between any two supported dtypes (f16/bf16 <-> f32, round to nearest even).
  virtual void convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n);

 protected:
  // The CommError of a missed deadline; `waiting_on` are the peers whose messages did not complete.
  [[noreturn]] void deadline_error(const OpInfo& op, const std::vector<int>& waiting_on);

 private:
  Transport* job_ = nullptr;
  std::vector<int> job_ranks_;
};

// A persistent buffer in a transport's memory, grown on demand and reused across calls.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { reset(); }
  void* get(Transport& t, size_t bytes);
  void reset();

 private:
  Transport* owner_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

std::string ranks_str(const std::vector<int>& ranks);  // "1, 3" or "none"

// The host arithmetic of every reduction, so that all algorithms round alike: out[i] =
// op(mine[i], incoming[i]) for f32, f64, i32, i64 (Avg sums; out may alias either input), and
// buf[i] = buf[i] / divisor.
void reduce_elements(void* out, const void* mine, const void* incoming, int64_t n, DType dtype, ReduceOp op);
void divide_elements(void* buf, int64_t n, DType dtype, int divisor);
// memcpy with non-temporal stores where the CPU has them (x86): dst is written around the cache.
// Ends with a store fence, so the bytes are visible to other cores like memcpy's.
void copy_uncached(void* dst, const void* src, size_t bytes);

}  // namespace tandem::comm
