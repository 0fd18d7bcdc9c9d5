// Layer norm forward for the CUDA backend, and the residual add fused before it (add_layer_norm):
// a block a row, or a warp a row up to kWarpRowMax elements, with the row in a lane's registers up
// to kRowElements a lane (layer_norm_common.cuh has what the backward shares).
#include "kernels/cuda/layer_norm_common.cuh"

namespace tandem::TANDEM_CUDA_NS {
namespace {

template <class T, class Y, class S>
__global__ void ln_forward_kernel(const T* __restrict__ x, Y* __restrict__ y, int64_t M, int64_t D, S eps,
                                  const S* __restrict__ weight, const S* __restrict__ bias, S* __restrict__ mean,
                                  S* __restrict__ rstd) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const T* in = x + m * D;
    S sum = S(0);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) sum += static_cast<S>(to_acc(in[d]));
    sum = block_sum(sum);
    const S mu = D ? sum / static_cast<S>(D) : S(0);
    S sq = S(0);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const S v = static_cast<S>(to_acc(in[d])) - mu;
      sq += v * v;
    }
    sq = block_sum(sq);
    const S r = S(1) / std::sqrt(sq / static_cast<S>(D > 1 ? D : 1) + eps);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
      y[m * D + d] = from_acc<Y>((static_cast<S>(to_acc(in[d])) - mu) * r * (weight ? weight[d] : S(1)) +
                                 (bias ? bias[d] : S(0)));
    if (threadIdx.x == 0) {
      mean[m] = mu;
      rstd[m] = r;
    }
  }
}

// Per-pack steps of the warp-per-row forward kernels below, so that both make each row's values by
// the same operations in the same order.
// p += b, rounded to T (x + branch, as axpy_out adds).
template <class T, class R, int V>
__device__ __forceinline__ void add_branch_pack(Pack<T, V>& p, const Pack<R, V>& b) {
  for (int k = 0; k < V; ++k) p.v[k] = from_acc<T>(to_acc(p.v[k]) + cast_one<R, acc_t<T>>(b.v[k]));
}
template <class S, class T, int V>
__device__ __forceinline__ void add_pack_sum(S& sum, const Pack<T, V>& p) {
  for (int k = 0; k < V; ++k) sum += static_cast<S>(to_acc(p.v[k]));
}
template <class S, class T, int V>
__device__ __forceinline__ void add_pack_squares(S& sq, const Pack<T, V>& p, S mu) {
  for (int k = 0; k < V; ++k) {
    const S v = static_cast<S>(to_acc(p.v[k])) - mu;
    sq += v * v;
  }
}
// y's pack i: (x - mu) * r * weight + bias.
template <class Y, class S, class T, int V>
__device__ __forceinline__ Pack<Y, V> normalized_pack(const Pack<T, V>& p, int64_t i, S mu, S r,
                                                      const S* __restrict__ weight, const S* __restrict__ bias) {
  Pack<Y, V> o;
  for (int k = 0; k < V; ++k) {
    const int64_t d = i * V + k;
    o.v[k] = from_acc<Y>((static_cast<S>(to_acc(p.v[k])) - mu) * r * (weight ? weight[d] : S(1)) +
                         (bias ? bias[d] : S(0)));
  }
  return o;
}

// With kAdd (add_layer_norm_forward) the row is x + branch (R: x's type or y's narrower one), added
// as axpy_out adds, written to `sum` and normalised from there (its later passes read the row the
// lane wrote); without, branch and sum are null. For rows that ln_forward_row_kernel does not keep
// in registers: longer than 32 kRowElements, or not in packs.
template <class T, class Y, class S, int V, class R = T, bool kAdd = false>
__global__ void ln_forward_warp_kernel(const T* __restrict__ x, Y* __restrict__ y, int64_t M, int64_t D, S eps,
                                       const S* __restrict__ weight, const S* __restrict__ bias,
                                       S* __restrict__ mean, S* __restrict__ rstd, const R* __restrict__ branch,
                                       T* __restrict__ sum_out) {
  using P = Pack<T, V>;
  const int lane = int(threadIdx.x % 32), warps = int(blockDim.x / 32);
  const int64_t packs = D / V;
  for (int64_t m = int64_t(blockIdx.x) * warps + threadIdx.x / 32; m < M; m += int64_t(gridDim.x) * warps) {
    const P* in = reinterpret_cast<const P*>(x + m * D);
    S sum = S(0);
    if constexpr (kAdd) {
      const Pack<R, V>* br = reinterpret_cast<const Pack<R, V>*>(branch + m * D);
      P* row = reinterpret_cast<P*>(sum_out + m * D);
      for (int64_t i = lane; i < packs; i += 32) {
        P p = in[i];
        add_branch_pack<T, R, V>(p, br[i]);
        row[i] = p;
        add_pack_sum(sum, p);
      }
      in = row;
    } else {
      for (int64_t i = lane; i < packs; i += 32) add_pack_sum(sum, in[i]);
    }
    const S mu = D ? warp_reduce(sum, SumOp{}) / static_cast<S>(D) : S(0);
    S sq = S(0);
    for (int64_t i = lane; i < packs; i += 32) add_pack_squares(sq, in[i], mu);
    const S r = S(1) / std::sqrt(warp_reduce(sq, SumOp{}) / static_cast<S>(D > 1 ? D : 1) + eps);
    Pack<Y, V>* out = reinterpret_cast<Pack<Y, V>*>(y + m * D);
    for (int64_t i = lane; i < packs; i += 32) out[i] = normalized_pack<Y>(in[i], i, mu, r, weight, bias);
    if (lane == 0) {
      mean[m] = mu;
      rstd[m] = r;
    }
  }
}

// ln_forward_warp_kernel for rows of at most kRowElements elements a lane (D <= 1024): a lane
// loads its packs of the row (and of the branch) at once and keeps them in registers, so the row is
// read once and its loads are in flight together; the loop above reads it three times (the sum it
// wrote, with kAdd, back from L2), a pack at a time. The same values, bit for bit.
constexpr int kRowElements = 32;

template <class T, class Y, class S, int V, class R = T, bool kAdd = false>
__global__ void ln_forward_row_kernel(const T* __restrict__ x, Y* __restrict__ y, int64_t M, int64_t D, S eps,
                                      const S* __restrict__ weight, const S* __restrict__ bias, S* __restrict__ mean,
                                      S* __restrict__ rstd, const R* __restrict__ branch, T* __restrict__ sum_out) {
  using P = Pack<T, V>;
  constexpr int J = kRowElements / V;
  const int lane = int(threadIdx.x % 32), warps = int(blockDim.x / 32);
  const int64_t packs = D / V;
  for (int64_t m = int64_t(blockIdx.x) * warps + threadIdx.x / 32; m < M; m += int64_t(gridDim.x) * warps) {
    const P* in = reinterpret_cast<const P*>(x + m * D);
    P row[J]{};
    TANDEM_UNROLL
    for (int j = 0; j < J; ++j)
      if (lane + 32 * j < packs) row[j] = in[lane + 32 * j];
    if constexpr (kAdd) {
      const Pack<R, V>* br = reinterpret_cast<const Pack<R, V>*>(branch + m * D);
      Pack<R, V> b[J]{};
      TANDEM_UNROLL
      for (int j = 0; j < J; ++j)
        if (lane + 32 * j < packs) b[j] = br[lane + 32 * j];
      TANDEM_UNROLL
      for (int j = 0; j < J; ++j)
        if (lane + 32 * j < packs) {
          add_branch_pack<T, R, V>(row[j], b[j]);
          reinterpret_cast<P*>(sum_out + m * D)[lane + 32 * j] = row[j];
        }
    }
    S sum = S(0);
    TANDEM_UNROLL
    for (int j = 0; j < J; ++j)
      if (lane + 32 * j < packs) add_pack_sum(sum, row[j]);
    const S mu = D ? warp_reduce(sum, SumOp{}) / static_cast<S>(D) : S(0);
    S sq = S(0);
    TANDEM_UNROLL
    for (int j = 0; j < J; ++j)
      if (lane + 32 * j < packs) add_pack_squares(sq, row[j], mu);
    const S r = S(1) / std::sqrt(warp_reduce(sq, SumOp{}) / static_cast<S>(D > 1 ? D : 1) + eps);
    Pack<Y, V>* out = reinterpret_cast<Pack<Y, V>*>(y + m * D);
    TANDEM_UNROLL
    for (int j = 0; j < J; ++j)
      if (lane + 32 * j < packs) out[lane + 32 * j] = normalized_pack<Y>(row[j], lane + 32 * j, mu, r, weight, bias);
    if (lane == 0) {
      mean[m] = mu;
      rstd[m] = r;
    }
  }
}


// ln_forward, and with `branch` defined add_ln_forward's one pass (the caller has checked that the
// rows go a warp each and that the branch has x's dtype or y's): the row is x + branch, written to
// `sum` and normalised from there.
void ln_forward_rows(const Tensor& x, const Tensor& branch, const Tensor& weight, const Tensor& bias, double eps,
                     Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  dispatch_norm_types(x.dtype(), "layer_norm", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const DType sd = dtype_v<S>;
    const int64_t M = mean.numel(), D = M ? x.numel() / M : 0;
    if (M == 0) return;
    Tensor w = as_stat(weight, sd), b = as_stat(bias, sd), ms = stat_out(mean, sd), rs = stat_out(rstd, sd);
    with_narrow<T>(y.dtype(), [&](auto yt) {
      using Y = decltype(yt);
      // R: the branch's element type; kAdd: whether there is one.
      auto launch_warps = [&](auto rt, auto add) {
        using R = decltype(rt);
        T* sum_rows = sum.defined() ? static_cast<T*>(sum.data_ptr()) : nullptr;
        const int width = row_pack_width<T>(D, {x.data_ptr(), y.data_ptr(), ptr_or_null<R>(branch), sum_rows});
        with_pack_width<T>(width, [&](auto v) {
          constexpr int V = decltype(v)::value;
          constexpr bool A = decltype(add)::value;
          // Rows in packs and up to kRowElements a lane: in registers (a row of single elements in
          // registers took up to 207 of them).
          auto kernel = ln_forward_warp_kernel<T, Y, S, V, R, A>;
          if constexpr (V > 1)
            if (D <= 32 * kRowElements) kernel = ln_forward_row_kernel<T, Y, S, V, R, A>;
          TANDEM_LAUNCH(kernel, grid_for(M, kRowWarps), kRowWarps * 32, 0, stream_for(x.device()),
                        static_cast<const T*>(x.data_ptr()), static_cast<Y*>(y.data_ptr()), M, D, static_cast<S>(eps),
                        ptr_or_null<S>(w), ptr_or_null<S>(b), static_cast<S*>(ms.data_ptr()),
                        static_cast<S*>(rs.data_ptr()), ptr_or_null<R>(branch), sum_rows);
        });
      };
      if (branch.defined()) {
        if (branch.dtype() == x.dtype()) launch_warps(T{}, std::true_type{});
        else if constexpr (!std::is_same_v<Y, T>) launch_warps(Y{}, std::true_type{});
      } else if (D <= kWarpRowMax) {
        launch_warps(T{}, std::false_type{});
      } else {
        TANDEM_LAUNCH(ln_forward_kernel<T, Y, S>, grid_for(M, 1), threads_for(D), 0, stream_for(x.device()),
                      static_cast<const T*>(x.data_ptr()), static_cast<Y*>(y.data_ptr()), M, D, static_cast<S>(eps),
                      ptr_or_null<S>(w), ptr_or_null<S>(b), static_cast<S*>(ms.data_ptr()),
                      static_cast<S*>(rs.data_ptr()));
      }
    });
    store_stat(ms, mean);
    store_stat(rs, rstd);
  });
}

void ln_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& y, Tensor& mean,
                Tensor& rstd) {
  check_on_device("layer_norm", x.device(), {&x, &weight, &bias, &y, &mean, &rstd});
  kernels::check_layer_norm_output_dtype("layer_norm", x.dtype(), y.dtype());
  Tensor none;
  ln_forward_rows(x, none, weight, bias, eps, none, y, mean, rstd);
}

// One launch where the rows go a warp each and the branch has x's dtype or y's; else the add, then
// ln_forward (the same values).
void add_ln_forward(const Tensor& x, const Tensor& branch, const Tensor& weight, const Tensor& bias, double eps,
                    Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  check_on_device("add_layer_norm", x.device(), {&x, &branch, &weight, &bias, &sum, &y, &mean, &rstd});
  kernels::check_add_layer_norm("add_layer_norm", x, branch, sum);
  kernels::check_layer_norm_output_dtype("add_layer_norm", x.dtype(), y.dtype());
  const int64_t M = mean.numel(), D = M ? x.numel() / M : 0;
  if (M > 0 && D <= kWarpRowMax && (branch.dtype() == x.dtype() || branch.dtype() == y.dtype())) {
    ln_forward_rows(x, branch, weight, bias, eps, sum, y, mean, rstd);
    return;
  }
  kernels::axpy_out(x.device())(x, branch, 1.0, sum);
  ln_forward(sum, weight, bias, eps, y, mean, rstd);
}

TANDEM_REGISTER_KERNEL(kernels::layer_norm_forward, kKind, ln_forward);
TANDEM_REGISTER_KERNEL(kernels::add_layer_norm_forward, kKind, add_ln_forward);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
