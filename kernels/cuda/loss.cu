// Softmax / log_softmax (forward and backward) and the fused cross-entropy (log-softmax + NLL,
// forward and backward) of the CUDA backend: one block per row, block reductions for max and sums.
// Formulas as kernels/cpu/loss.cpp; only the order of the sums differs.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/backend/dtype_dispatch.h"
#include "runtime/env_settings.h"
#include "runtime/backend/loss.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

// Threads of a row's block: up to 256, and 512 for rows of kWideRow elements or more (a vocabulary:
// GPT-2's 50,304 logits). Cross-entropy and its fused gradient launch the same count, so that their
// lse and loss are the same bits.
constexpr int64_t kWideRow = 8192;
unsigned row_threads(int64_t n) {
  if (n >= kWideRow) return 512;
  int64_t t = (n + 31) / 32 * 32;
  return static_cast<unsigned>(t < 32 ? 32 : (t > 256 ? 256 : t));
}

// Packs a thread fetches before it uses any, in the contiguous row loops below: one at a time, a
// thread's running max and sum (or its stores) waited on each load in turn, one 16-byte load in flight
// a thread. The values are used in the order the one-at-a-time loop used them.
constexpr int kRowBatch = 4;

// f(i, pack i) for a thread's packs i = threadIdx.x, + blockDim.x, ... below `packs`, kRowBatch
// fetched at a time, in that order.
template <class T, int V, class F>
__device__ __forceinline__ void for_row_packs(const Pack<T, V>* __restrict__ x, int64_t packs, F&& f) {
  const int64_t step = blockDim.x;
  int64_t i = threadIdx.x;
  for (; i + (kRowBatch - 1) * step < packs; i += kRowBatch * step) {
    Pack<T, V> p[kRowBatch];
    TANDEM_UNROLL
    for (int u = 0; u < kRowBatch; ++u) p[u] = x[i + u * step];
    TANDEM_UNROLL
    for (int u = 0; u < kRowBatch; ++u) f(i + u * step, p[u]);
  }
  for (; i < packs; i += step) f(i, x[i]);
}

// o[k] = f(k, x[k]) over a contiguous row, in 16-byte packs where both rows are aligned to them.
template <class T, class F>
__device__ __forceinline__ void map_row(const T* __restrict__ x, T* __restrict__ o, int64_t n, F&& f) {
  constexpr int V = kPackWidth<T>;
  int64_t start = 0;
  if (V > 1 && aligned16(x) && aligned16(o)) {
    const int64_t packs = n / V;
    for_row_packs(reinterpret_cast<const Pack<T, V>*>(x), packs, [&](int64_t i, const Pack<T, V>& in) {
      Pack<T, V> out;
      for (int k = 0; k < V; ++k) out.v[k] = f(i * V + k, in.v[k]);
      reinterpret_cast<Pack<T, V>*>(o)[i] = out;
    });
    start = packs * V;
  }
  for (int64_t k = start + threadIdx.x; k < n; k += blockDim.x) o[k] = f(k, x[k]);
}

// One thread's share of a contiguous row read once (a vocabulary-wide row is read from memory once,
// not twice): the running max and the sum of exp(x - max), rescaled when the max grows (once per pack
// of values, not per value). Nothing is tested per value: fmax skips NaN, so the max is that of the
// values that are not NaN; a NaN makes the sum NaN; a -inf adds exp(-inf) = 0 (the shift is 0 while
// the max is -inf, so -inf - -inf never occurs). Once the max is +inf the sum is meaningless (inf -
// inf), which the row's combine below knows from the max alone.
template <class X>
struct OnlineMaxSum {
  X max = X(-INFINITY), sum = X(0);

  template <int V>
  __device__ __forceinline__ void add(const X (&v)[V]) {
    X pack_max = v[0];
    for (int k = 1; k < V; ++k) pack_max = std::fmax(pack_max, v[k]);
    if (pack_max > max) {  // never for a pack of NaNs
      sum *= std::exp(max - pack_max);  // exp(-inf) = 0 while only -inf (or NaN) was seen
      max = pack_max;
    }
    const X shift = max == X(-INFINITY) ? X(0) : max;
    for (int k = 0; k < V; ++k) sum += std::exp(v[k] - shift);
  }
};

// Whether a contiguous row holds a NaN: only asked when the row holds +inf, where the online sum
// cannot tell (a rare row, read a second time).
template <class T>
__device__ bool row_has_nan(const T* x, int64_t n) {
  int nan = 0;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) nan |= std::isnan(to_acc(x[k]));
  return block_sum(nan) != 0;
}

// Max over the row and sum of exp(x - max), with the CPU's rules (kernels/cpu/loss.cpp): NaNs do not
// take part in the max but make the sum NaN; a +inf, or a row of -inf, forces the max to 0 (the sum
// is then exp(x) summed: +inf, or 0). Contiguous rows are read once (OnlineMaxSum), strided ones in
// two passes; the results differ from the two passes only in the sums' rounding.
template <class T, class X>
__device__ void row_max_sum(const T* x, int64_t n, int64_t stride, X& max, X& sum) {
  if (stride == 1) {
    constexpr int V = kPackWidth<T>;
    OnlineMaxSum<X> t;
    int64_t start = 0;
    if (V > 1 && aligned16(x)) {
      const int64_t packs = n / V;
      for_row_packs(reinterpret_cast<const Pack<T, V>*>(x), packs, [&](int64_t, const Pack<T, V>& p) {
        X v[V];
        for (int k = 0; k < V; ++k) v[k] = X(to_acc(p.v[k]));
        t.add(v);
      });
      start = packs * V;
    }
    for (int64_t k = start + threadIdx.x; k < n; k += blockDim.x) {
      const X v[1] = {X(to_acc(x[k]))};
      t.add(v);
    }
    const X m = block_reduce(t.max, MaxOp{}, X(-INFINITY));  // no thread's max is NaN
    if (m == X(INFINITY)) {
      max = X(0);
      sum = row_has_nan(x, n) ? X(NAN) : X(INFINITY);
      return;
    }
    // A thread whose max is -inf has a sum of 0, or NaN: added as it is.
    const X s = block_sum(t.max == X(-INFINITY) ? t.sum : t.sum * std::exp(t.max - m));
    max = m == X(-INFINITY) ? X(0) : m;
    sum = s;  // NaN if a NaN was seen; 0 for a row of -inf
    return;
  }
  X m = -INFINITY;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m = std::fmax(m, X(to_acc(x[k * stride])));
  m = block_reduce(m, MaxOp{}, X(-INFINITY));
  if (std::isinf(m)) m = X(0);
  X s = X(0);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) s += std::exp(X(to_acc(x[k * stride])) - m);
  max = m;
  sum = block_sum(s);
}

template <class T>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t n, int64_t inner,
                               bool log) {
  using X = acc_t<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = (row / inner) * n * inner + row % inner;
    X m, s;
    row_max_sum(x + base, n, inner, m, s);
    if (log) {
      const X log_sum = std::log(s);
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
        y[base + k * inner] = from_acc<T>((X(to_acc(x[base + k * inner])) - m) - log_sum);
    } else {
      const X inv = X(1) / s;
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
        y[base + k * inner] = from_acc<T>(std::exp(X(to_acc(x[base + k * inner])) - m) * inv);
    }
  }
}

template <class T>
__global__ void softmax_backward_kernel(const T* __restrict__ gy, const T* __restrict__ y, T* __restrict__ gx,
                                        int64_t rows, int64_t n, int64_t inner, bool log) {
  using X = acc_t<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = (row / inner) * n * inner + row % inner;
    X dot = X(0);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const int64_t i = base + k * inner;
      dot += log ? X(to_acc(gy[i])) : X(to_acc(gy[i])) * X(to_acc(y[i]));
    }
    dot = block_sum(dot);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const int64_t i = base + k * inner;
      const X g = to_acc(gy[i]), o = to_acc(y[i]);
      gx[i] = from_acc<T>(log ? g - std::exp(o) * dot : o * (g - dot));
    }
  }
}

// One block: the total (or mean over non-ignored rows) of the row losses.
template <class L, class X, class I>
__global__ void cross_entropy_reduce_kernel(const X* __restrict__ row_loss, const I* __restrict__ target,
                                            int64_t N, int64_t ignore_index, bool mean, L* __restrict__ loss) {
  X total = X(0);
  long long count = 0;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x) {
    total += row_loss[r];
    count += static_cast<int64_t>(target[r]) != ignore_index;
  }
  total = block_sum(total);
  count = block_sum(count);
  if (threadIdx.x == 0) loss[0] = from_acc<L>(mean ? total / X(count) : total);
}

template <class T, class X>
__global__ void row_loss_to_output_kernel(const X* __restrict__ row_loss, T* __restrict__ loss, int64_t N) {
  for (int64_t i = global_thread(); i < N; i += grid_threads()) loss[i] = from_acc<T>(row_loss[i]);
}

template <class I>
__global__ void count_kept_kernel(const I* __restrict__ target, int64_t N, int64_t ignore_index, long long* count) {
  long long c = 0;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x) c += static_cast<int64_t>(target[r]) != ignore_index;
  c = block_sum(c);
  if (threadIdx.x == 0) *count = c;
}

// A row's gradient: (exp(x - l) - onehot(t)) * g, zeros for an ignored row.
template <class T, class X>
__device__ __forceinline__ void gradient_row(const T* x, T* o, int64_t C, int64_t t, int64_t ignore_index, X l, X g) {
  map_row(x, o, C, [&](int64_t c, T v) {
    if (t == ignore_index) return from_acc<T>(X(0));
    const T e = from_acc<T>(std::exp(X(to_acc(v)) - l) * g);
    return c == t ? from_acc<T>(X(to_acc(e)) - g) : e;  // rounded first, as the CPU does
  });
}

template <class T, class L, class I>
__global__ void cross_entropy_backward_kernel(const L* __restrict__ grad_loss, const T* __restrict__ logits,
                                              const I* __restrict__ target, const acc_t<T>* __restrict__ lse,
                                              const long long* __restrict__ count, T* __restrict__ grad_logits,
                                              int64_t N, int64_t C, int64_t ignore_index, int reduction) {
  using X = acc_t<T>;
  const bool none = reduction == static_cast<int>(ops::Reduction::None);
  X scale = none ? X(1) : X(to_acc(grad_loss[0]));
  if (reduction == static_cast<int>(ops::Reduction::Mean)) scale /= X(*count);
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const X g = none ? X(to_acc(grad_loss[r])) : scale;
    gradient_row(logits + r * C, grad_logits + r * C, C, static_cast<int64_t>(target[r]), ignore_index, lse[r], g);
  }
}

// Per row: lse, the row's loss (0 when ignored); a bad target records its row in *bad (+1). With
// grad_logits (cross_entropy_with_grad), also the backward kernel's gradient row for a loss
// gradient of 1, from the row just read (its second read comes mostly from the cache): scale 1
// (Sum) or, with `count` (Mean), 1 / *count, as the backward kernel makes it.
template <class T, class I>
__global__ void cross_entropy_rows_kernel(const T* __restrict__ logits, const I* __restrict__ target, int64_t N,
                                          int64_t C, int64_t ignore_index, acc_t<T>* __restrict__ lse,
                                          acc_t<T>* __restrict__ row_loss, long long* __restrict__ bad,
                                          T* __restrict__ grad_logits, const long long* __restrict__ count) {
  using X = acc_t<T>;
  X scale = X(1);
  if (grad_logits && count) scale /= X(*count);
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const T* x = logits + r * C;
    X m, s;
    row_max_sum(x, C, 1, m, s);  // every thread gets the row's max and sum
    const X l = m + std::log(s);
    const int64_t t = static_cast<int64_t>(target[r]);
    if (threadIdx.x == 0) {
      lse[r] = l;
      X loss = X(0);
      if (t != ignore_index) {
        if (t < 0 || t >= C) atomicMax(bad, static_cast<long long>(r + 1));
        else loss = (m - X(to_acc(x[t]))) + std::log(s);
      }
      row_loss[r] = loss;
    }
    if (grad_logits && (t == ignore_index || (t >= 0 && t < C)))
      gradient_row(x, grad_logits + r * C, C, t, ignore_index, l, scale);
  }
}

// Blocks of cross_entropy_rows_kernel. With the gradient a block reads each of its rows twice (the
// max and sum, then the gradient): at most kRowsInFlightBytes of rows are then read at once, so
// that the second read finds its row in L2 (50 MB on an H100 or H200, 40 on an A100). With a block
// for every row (up to 8,192) ~1,000 of GPT-2's 100 KB bf16 rows were read at once, ~100 MB, and
// the second read came from memory: 2.45 GB moved for 0.82 GB of logits (Nsight Compute, H100). The
// grid does not change a row's arithmetic. TANDEM_CE_ROWS=all (read once) gives every row a block
// again, for A/B runs on a GPU.
constexpr int64_t kRowsInFlightBytes = int64_t(24) << 20;
bool all_rows_in_flight() {
  static const bool all = env::choice("TANDEM_CE_ROWS") == 1;
  return all;
}
unsigned rows_grid(int64_t rows, int64_t row_bytes, bool read_twice) {
  const unsigned all = grid_for(rows, 1);
  if (!read_twice || row_bytes <= 0 || all_rows_in_flight()) return all;
  const int64_t fit = kRowsInFlightBytes / row_bytes;
  return fit < 1 ? 1u : (fit < int64_t(all) ? static_cast<unsigned>(fit) : all);
}

void softmax(const Tensor& x, Tensor& y, int64_t outer, int64_t n, int64_t inner, bool log) {
  check_on_device("softmax", x.device(), {&x, &y});
  const int64_t rows = outer * inner;
  if (rows == 0 || n == 0) return;
  dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<acc_t<T>>)
    TANDEM_LAUNCH(softmax_kernel<T>, grid_for(rows, 1), row_threads(n), 0, stream_for(x.device()),
                  static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), rows, n, inner, log);
  });
}

void softmax_backward(const Tensor& gy, const Tensor& y, Tensor& gx, int64_t outer, int64_t n, int64_t inner,
                      bool log) {
  check_on_device("softmax_backward", y.device(), {&gy, &y, &gx});
  const int64_t rows = outer * inner;
  if (rows == 0 || n == 0) return;
  dispatch_floating(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<acc_t<T>>)
    TANDEM_LAUNCH(softmax_backward_kernel<T>, grid_for(rows, 1), row_threads(n), 0, stream_for(y.device()),
                  static_cast<const T*>(gy.data_ptr()), static_cast<const T*>(y.data_ptr()),
                  static_cast<T*>(gx.data_ptr()), rows, n, inner, log);
  });
}

// cross_entropy, and with grad_logits defined (Sum or Mean) cross_entropy_with_grad: the rows in one
// kernel either way, then the loss; throws for a target outside [0, C) that is not ignore_index.
void run_cross_entropy(const char* what, const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& lse,
                       Tensor& grad_logits, int64_t ignore_index, ops::Reduction reduction) {
  const Device dev = logits.device();
  check_on_device(what, dev, {&logits, &target, &loss, &lse, &grad_logits});
  const bool with_grad = grad_logits.defined();
  TANDEM_CHECK(!with_grad || reduction != ops::Reduction::None, "{}: needs a Sum or Mean reduction", what);
  const int64_t N = logits.size(0), C = logits.size(1);
  dispatch_floating(logits.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    using X = acc_t<T>;
    if constexpr (std::is_floating_point_v<X>) kernels::with_loss_type<T>(loss.dtype(), [&](auto ltag) {
      dispatch_index_type(target, "cross_entropy: target", [&](auto itag) {
        using L = decltype(ltag);
        using I = decltype(itag);
        Stream stream = stream_for(dev);
        Tensor row_loss = Tensor::empty({N}, dtype_v<X>, dev);
        Tensor bad = Tensor::zeros({1}, DType::i64, dev);
        const I* pt = static_cast<const I*>(target.data_ptr());
        // A Mean loss's gradient divides by the rows kept (count_kept_kernel, as the backward's).
        Tensor count;
        if (with_grad && reduction == ops::Reduction::Mean) {
          count = Tensor::empty({1}, DType::i64, dev);
          TANDEM_LAUNCH(count_kept_kernel<I>, 1, 256, 0, stream, pt, N, ignore_index,
                        static_cast<long long*>(count.data_ptr()));
        }
        if (N > 0)
          TANDEM_LAUNCH(cross_entropy_rows_kernel<T, I>, rows_grid(N, C * int64_t(sizeof(T)), with_grad),
                        row_threads(C), 0, stream,
                        static_cast<const T*>(logits.data_ptr()), pt, N, C, ignore_index,
                        static_cast<X*>(lse.data_ptr()), static_cast<X*>(row_loss.data_ptr()),
                        static_cast<long long*>(bad.data_ptr()),
                        with_grad ? static_cast<T*>(grad_logits.data_ptr()) : nullptr,
                        count.defined() ? static_cast<const long long*>(count.data_ptr()) : nullptr);
        if (reduction == ops::Reduction::None) {
          if (N > 0)
            TANDEM_LAUNCH(row_loss_to_output_kernel<L, X>, grid_for(N, kBlock), kBlock, 0, stream,
                          static_cast<const X*>(row_loss.data_ptr()), static_cast<L*>(loss.data_ptr()), N);
        } else {
          TANDEM_LAUNCH(cross_entropy_reduce_kernel<L, X, I>, 1, 256, 0, stream,
                        static_cast<const X*>(row_loss.data_ptr()), pt, N, ignore_index,
                        reduction == ops::Reduction::Mean, static_cast<L*>(loss.data_ptr()));
        }
        const int64_t bad_row = static_cast<int64_t>(bad.item()) - 1;  // waits for the kernels
        if (bad_row >= 0) {
          int64_t t = target.narrow0(bad_row, 1).to(kCPU).to_vector<int64_t>()[0];
          TANDEM_FAIL(Value, "cross_entropy: target {} at row {} is outside [0, {}) and is not ignore_index ({})", t,
                      bad_row, C, ignore_index);
        }
      });
    });
  });
}

void cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& lse, int64_t ignore_index,
                   ops::Reduction reduction) {
  Tensor no_grad;
  run_cross_entropy("cross_entropy", logits, target, loss, lse, no_grad, ignore_index, reduction);
}

void cross_entropy_with_grad(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& lse,
                             Tensor& grad_logits, int64_t ignore_index, ops::Reduction reduction) {
  TANDEM_CHECK(grad_logits.defined(), "cross_entropy_with_grad: grad_logits is undefined");
  run_cross_entropy("cross_entropy_with_grad", logits, target, loss, lse, grad_logits, ignore_index, reduction);
}

void cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& target, const Tensor& lse,
                            Tensor& grad_logits, int64_t ignore_index, ops::Reduction reduction) {
  const Device dev = logits.device();
  check_on_device("cross_entropy_backward", dev, {&grad_loss, &logits, &target, &lse, &grad_logits});
  const int64_t N = logits.size(0), C = logits.size(1);
  if (N == 0 || C == 0) return;
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using X = acc_t<T>;
    if constexpr (std::is_floating_point_v<X>) kernels::with_loss_type<T>(grad_loss.dtype(), [&](auto ltag) {
      dispatch_index_type(target, "cross_entropy: target", [&](auto itag) {
        using L = decltype(ltag);
        using I = decltype(itag);
        Stream stream = stream_for(dev);
        const I* pt = static_cast<const I*>(target.data_ptr());
        Tensor count = Tensor::empty({1}, DType::i64, dev);
        TANDEM_LAUNCH(count_kept_kernel<I>, 1, 256, 0, stream, pt, N, ignore_index,
                      static_cast<long long*>(count.data_ptr()));
        TANDEM_LAUNCH(cross_entropy_backward_kernel<T, L, I>, grid_for(N, 1), row_threads(C), 0, stream,
                      static_cast<const L*>(grad_loss.data_ptr()), static_cast<const T*>(logits.data_ptr()), pt,
                      static_cast<const X*>(lse.data_ptr()), static_cast<const long long*>(count.data_ptr()),
                      static_cast<T*>(grad_logits.data_ptr()), N, C, ignore_index, static_cast<int>(reduction));
      });
    });
  });
}

TANDEM_REGISTER_KERNEL(kernels::softmax, kKind, softmax);
TANDEM_REGISTER_KERNEL(kernels::softmax_backward, kKind, softmax_backward);
TANDEM_REGISTER_KERNEL(kernels::cross_entropy, kKind, cross_entropy);
TANDEM_REGISTER_KERNEL(kernels::cross_entropy_backward, kKind, cross_entropy_backward);
TANDEM_REGISTER_KERNEL(kernels::cross_entropy_with_grad, kKind, cross_entropy_with_grad);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
