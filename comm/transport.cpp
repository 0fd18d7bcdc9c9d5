// Host defaults of the transport's memory operations, and the deadline error.
#include "comm/transport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "comm/extremum.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tandem::comm {

Transport::~Transport() = default;

std::string ranks_str(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  return fmt::format("{}", fmt::join(ranks, ", "));
}

void Transport::deadline_error(const OpInfo& op, const std::vector<int>& waiting_on) {
  Transport& t = job_ ? *job_ : *this;
  std::vector<int> peers = waiting_on;
  if (job_)
    for (int& r : peers) r = job_ranks_[static_cast<size_t>(r)];
  const std::string phase = *op.phase ? fmt::format(" (in {})", op.phase) : "";
  if (op.seq == 0)  // point-to-point: only the peer is known
    TANDEM_FAIL(Comm, "rank {} of {}: {} with rank(s) {} missed its deadline of {} s{}; the peer died or "
                "never posted the matching call. The communicator is now unusable.",
                t.rank(), t.size(), op.name, ranks_str(peers), op.timeout_s, phase);
  std::vector<int> missing = t.lagging_ranks(op.seq);
  TANDEM_FAIL(Comm,
              "rank {} of {}: {} (collective #{}) missed its deadline of {} s; missing ranks (never "
              "arrived at #{}): {}; still waiting on messages from/to ranks: {}{}. A rank died, skipped "
              "the collective or called a different one (set TANDEM_DEBUG_DESYNC=1 to check). The "
              "communicator is now unusable; end the job (MPI: tandem::comm::abort_job / MPI_Abort).",
              t.rank(), t.size(), op.name, op.seq, op.timeout_s, op.seq, ranks_str(missing),
              ranks_str(peers), phase);
}

void* Transport::alloc(size_t bytes) {
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  TANDEM_CHECK_KIND(Backend, p, "comm scratch: cannot allocate {} bytes", bytes);
  std::memset(p, 0, bytes);  // fault the pages in now, not during a collective
  return p;
}
void Transport::free(void* p) { std::free(p); }
void Transport::copy(void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) std::memcpy(dst, src, bytes);
}

namespace {
// out may alias mine or incoming (the loops read element i before writing it).
template <class T>
void reduce_loop(T* out, const T* mine, const T* incoming, int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      for (int64_t i = 0; i < n; ++i) out[i] = mine[i] + incoming[i];
      break;
    case ReduceOp::Max:
      for (int64_t i = 0; i < n; ++i) out[i] = max_of(mine[i], incoming[i]);
      break;
    case ReduceOp::Min:
      for (int64_t i = 0; i < n; ++i) out[i] = min_of(mine[i], incoming[i]);
      break;
  }
}
}  // namespace

void reduce_elements(void* out, const void* mine, const void* incoming, int64_t n, DType dtype, ReduceOp op) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16> || std::is_same_v<T, uint8_t>)
      TANDEM_FAIL(Internal, "comm reduce called on {} (16-bit sums go through f32)", dtype_name(dtype));
    else
      reduce_loop(static_cast<T*>(out), static_cast<const T*>(mine), static_cast<const T*>(incoming), n, op);
  });
}

void divide_elements(void* buf, int64_t n, DType dtype, int divisor) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16> || std::is_same_v<T, uint8_t>) {
      TANDEM_FAIL(Internal, "comm divide called on {}", dtype_name(dtype));
    } else {
      T* p = static_cast<T*>(buf);
      const T d = static_cast<T>(divisor);
      for (int64_t i = 0; i < n; ++i) p[i] = p[i] / d;
    }
  });
}

void copy_uncached(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Up to dst's next 16-byte boundary with memcpy, then 64 bytes per iteration streamed.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
    const __m128i* in = reinterpret_cast<const __m128i*>(s);
    __m128i a = _mm_loadu_si128(in), b = _mm_loadu_si128(in + 1), c = _mm_loadu_si128(in + 2),
            e = _mm_loadu_si128(in + 3);
    __m128i* out = reinterpret_cast<__m128i*>(d);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, e);
  }
  std::memcpy(d, s, bytes);
  _mm_sfence();  // streamed stores are weakly ordered: make them visible before what follows
#else
  std::memcpy(dst, src, bytes);
#endif
}

void Transport::reduce(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op) {
  reduce_elements(dst, dst, src, n, dtype, op);
}

void Transport::divide(void* buf, int64_t n, DType dtype, int divisor) { divide_elements(buf, n, dtype, divisor); }

void Transport::convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n) {
  convert_host(src, src_dtype, dst, dst_dtype, n);
}

void* Scratch::get(Transport& t, size_t bytes) {
  if (ptr_ && bytes <= bytes_ && owner_ == &t) return ptr_;
  reset();
  size_t grown = std::max(bytes, bytes_ + bytes_ / 2);
  ptr_ = t.alloc(grown);
  bytes_ = grown;
  owner_ = &t;
  return ptr_;
}

void Scratch::reset() {
  if (ptr_) owner_->free(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  owner_ = nullptr;
}

}  // namespace tandem::comm
