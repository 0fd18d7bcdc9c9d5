// Ring all-reduce, reduce-scatter, all-gather, broadcast and barrier over a three-call transport.
#include "comm/ring.h"

#include <algorithm>

namespace tandem::comm {

namespace {
int mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }
// Up to this many bytes, power-of-two groups of more than 2 ranks use recursive doubling: fewer
// dependent hops matter more than bandwidth there (and much more with ranks sharing cores).
constexpr int64_t kDoublingMaxBytes = 32 * 1024;
// From this many bytes per rank up, the last all-gather step lands with non-temporal stores (where
// the transport copies): the buffer does not fit this rank's share of a 32 MB L3 shared by two
// ranks, so ordinary stores would first read every destination line and evict what is cached.
constexpr int64_t kUncachedMinBytes = 8 * 1024 * 1024;
}  // namespace

Ring::Ring(Transport& t, int64_t segment_bytes)
    : t_(t), segment_bytes_(segment_bytes > 0 ? segment_bytes : t.preferred_segment_bytes()) {}

void Ring::passes(char* buf, int64_t count, DType dtype, ReduceOp op, int q, bool do_rs, bool do_ag,
                  const OpInfo& info) {
  const int n = t_.size(), r = t_.rank();
  if (n == 1 || count == 0) return;
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const size_t esz = dtype_size(dtype);
  auto lo = [&](int c) { return count * c / n; };  // chunk c is [lo(c), lo(c+1))
  const int64_t seg = std::max<int64_t>(1, segment_bytes_ / static_cast<int64_t>(esz));
  const int64_t max_chunk = (count + n - 1) / n;
  const int m = static_cast<int>(std::max<int64_t>(1, (max_chunk + seg - 1) / seg));  // segments per chunk
  const int rs_rounds = do_rs ? (n - 1) * m : 0;
  const int rounds = rs_rounds + (do_ag ? (n - 1) * m : 0);
  const int owned = mod(q + 1, n);  // after reduce-scatter (or given, for all-gather alone)
  const bool fused = do_rs && t_.can_recv_reduce();
  // Only the last step: earlier all-gather steps forward what they receive, which must stay cached.
  const bool uncached_last = count * static_cast<int64_t>(esz) >= kUncachedMinBytes;
  char* tmp[2] = {nullptr, nullptr};
  if (do_rs && !fused) {
    size_t bytes = static_cast<size_t>(std::min(seg, max_chunk)) * esz;
    tmp[0] = static_cast<char*>(recv_tmp_[0].get(t_, bytes));
    tmp[1] = static_cast<char*>(recv_tmp_[1].get(t_, bytes));
  }

  // Round k = (phase, step s, segment j): which chunks move, and the segment's element range.
  struct Round { bool rs; int step, send_chunk, recv_chunk; int64_t send_off, recv_off, send_len, recv_len; };
  auto round = [&](int k) {
    Round x;
    x.rs = k < rs_rounds;
    int kk = x.rs ? k : k - rs_rounds;
    x.step = kk / m;
    int j = kk % m;
    int base = x.rs ? q : owned;
    x.send_chunk = mod(base - x.step, n);
    x.recv_chunk = mod(base - x.step - 1, n);
    auto seg_of = [&](int c, int64_t& off, int64_t& len) {
      off = lo(c) + j * seg;
      len = std::max<int64_t>(0, std::min(lo(c + 1), off + seg) - off);
    };
    seg_of(x.send_chunk, x.send_off, x.send_len);
    seg_of(x.recv_chunk, x.recv_off, x.recv_len);
    return x;
  };
  // Post round k: push its segment to the right neighbour, receive the left neighbour's.
  auto post = [&](int k) {
    Round x = round(k);
    if (x.send_len) t_.send(buf + x.send_off * esz, x.send_len * esz, right);
    if (x.recv_len) {
      // Reduce-scatter lands in a staging buffer (reduced in finish) or, where the transport can,
      // is reduced straight from the sender's memory; all-gather lands in place.
      if (x.rs && fused)
        t_.recv_reduce(buf + x.recv_off * esz, x.recv_len * esz, left, dtype, op);
      else if (!x.rs && uncached_last && x.step == n - 2)
        t_.recv_uncached(buf + x.recv_off * esz, x.recv_len * esz, left);
      else
        t_.recv(x.rs ? tmp[k % 2] : buf + x.recv_off * esz, x.recv_len * esz, left);
    }
  };
  // Finish round k once its data arrived: reduce the received partial sum into our chunk. On the
  // last reduce-scatter step the chunk is complete (divide for Avg before it is all-gathered).
  auto finish = [&](int k) {
    Round x = round(k);
    if (!x.rs || !x.recv_len) return;
    char* dst = buf + x.recv_off * esz;
    if (!fused) t_.reduce(dst, tmp[k % 2], x.recv_len, dtype, op);
    if (op == ReduceOp::Avg && x.step == n - 2) t_.divide(dst, x.recv_len, dtype, n);
  };

  // Pipeline: while round k's segment is reduced, round k+1's is in flight. Round k+1 only sends
  // data finished m rounds earlier, so with one segment per chunk (m == 1) reduce first.
  if (rounds == 0) return;
  post(0);
  for (int k = 0; k < rounds; ++k) {
    t_.wait(info);
    if (m == 1) {
      finish(k);
      if (k + 1 < rounds) post(k + 1);
    } else {
      if (k + 1 < rounds) post(k + 1);
      finish(k);
    }
  }
}

void Ring::recursive_doubling(char* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) {
  const int n = t_.size(), r = t_.rank();
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  char* theirs = static_cast<char*>(partner_.get(t_, bytes));
  for (int d = 1; d < n; d <<= 1) {
    // Exchange partial sums with the partner across bit d; both then hold mine + theirs.
    t_.send(buf, bytes, r ^ d);
    t_.recv(theirs, bytes, r ^ d);
    t_.wait(info);
    t_.reduce(buf, theirs, count, dtype, op);
  }
  if (op == ReduceOp::Avg) t_.divide(buf, count, dtype, n);
}

void Ring::allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) {
  allreduce_phases(buf, count, dtype, op, true, info);
}

void Ring::reduce_scatter_in_place(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) {
  allreduce_phases(buf, count, dtype, op, false, info);
}

void Ring::allgather_in_place(void* buf, int64_t count, DType dtype, const OpInfo& info) {
  // The all-gather phase alone, with the chunks of `count` elements of dtype (as allreduce cuts
  // them): rank r owns chunk r+1, i.e. q = r. No arithmetic: 16-bit data moves as it is.
  passes(static_cast<char*>(buf), count, dtype, ReduceOp::Sum, t_.rank(), false, true, info);
}

void Ring::allreduce_phases(void* buf, int64_t count, DType dtype, ReduceOp op, bool gather, const OpInfo& info) {
  const int n = t_.size();
  if (count == 0 || n == 1) return;  // a one-rank sum, max, min or average is the input itself
  const DType wdt = is_low_precision(dtype) ? DType::f32 : dtype;
  const bool doubling = n > 2 && (n & (n - 1)) == 0 && count * int64_t(dtype_size(wdt)) <= kDoublingMaxBytes;
  auto run = [&](char* data) {
    // Doubling leaves every rank the whole result: with or without `gather`, the same bits.
    if (doubling) return recursive_doubling(data, count, wdt, op, info);
    // Phase 1 (reduce-scatter): rank r ends owning the reduced chunk r+1.
    // Phase 2 (all-gather): the owned chunks travel once around the ring.
    passes(data, count, wdt, op, t_.rank(), true, gather, info);
  };
  if (wdt != dtype) {
    // f16/bf16: sum in f32 along the same fixed order, round once at the end.
    float* wide = static_cast<float*>(wide_.get(t_, static_cast<size_t>(count) * 4));
    t_.convert(wide, DType::f32, buf, dtype, count);
    run(reinterpret_cast<char*>(wide));
    t_.convert(buf, dtype, wide, DType::f32, count);
    return;
  }
  run(static_cast<char*>(buf));
}

void Ring::reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op,
                          const OpInfo& info) {
  const int n = t_.size(), r = t_.rank();
  if (recv_count == 0) return;
  const int64_t total = recv_count * n;
  const bool low = is_low_precision(dtype);
  const DType wdt = low ? DType::f32 : dtype;
  const size_t wsz = dtype_size(wdt);
  // Work on a copy (send is const); q = r-1 so that rank r ends owning chunk r.
  char* work = static_cast<char*>(work_.get(t_, static_cast<size_t>(total) * wsz));
  if (low)
    t_.convert(work, DType::f32, send, dtype, total);
  else
    t_.copy(work, send, static_cast<size_t>(total) * wsz);
  passes(work, total, wdt, op, mod(r - 1, n), true, false, info);
  char* mine = work + static_cast<size_t>(recv_count) * r * wsz;
  if (low)
    t_.convert(recv, dtype, mine, DType::f32, recv_count);
  else
    t_.copy(recv, mine, static_cast<size_t>(recv_count) * wsz);
}

void Ring::allgather(const void* send, void* recv, int64_t send_count, DType dtype, const OpInfo& info) {
  const int n = t_.size(), r = t_.rank();
  if (send_count == 0) return;
  const size_t esz = dtype_size(dtype);
  char* out = static_cast<char*>(recv);
  t_.copy(out + static_cast<size_t>(send_count) * r * esz, send, static_cast<size_t>(send_count) * esz);
  // All-gather alone: this rank owns chunk r, i.e. q = r-1. Moved as bytes (no arithmetic).
  passes(out, send_count * n * static_cast<int64_t>(esz), DType::u8, ReduceOp::Sum, mod(r - 1, n), false,
         true, info);
}

void Ring::broadcast(void* buf, int64_t count, DType dtype, int root, const OpInfo& info) {
  const int n = t_.size(), r = t_.rank();
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
  if (n == 1 || bytes == 0) return;
  // A pipelined chain root -> root+1 -> ... : segment j is forwarded while segment j+1 arrives.
  const int pos = mod(r - root, n);
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const int64_t seg = segment_bytes_;
  const int64_t m = (bytes + seg - 1) / seg;
  char* p = static_cast<char*>(buf);
  for (int64_t j = 0; j < m; ++j) {
    const int64_t off = j * seg, len = std::min(seg, bytes - off);
    if (pos > 0) t_.recv(p + off, static_cast<size_t>(len), left);
    t_.wait(info);  // segment j arrived (and segment j-1 went out)
    if (pos < n - 1) t_.send(p + off, static_cast<size_t>(len), right);
  }
  t_.wait(info);
}

void Ring::barrier(const OpInfo& info) {
  const int n = t_.size();
  if (n == 1) return;
  // One element per chunk: every rank hears (transitively) from every other before it leaves.
  // The token lives in transport memory (device memory for NCCL); its values do not matter.
  char* token = static_cast<char*>(token_.get(t_, static_cast<size_t>(n) * 4));
  passes(token, n, DType::i32, ReduceOp::Max, t_.rank(), true, true, info);
}

}  // namespace tandem::comm
