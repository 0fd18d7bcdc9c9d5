// Layer norm backward for the CUDA backend: dx a warp a row, and up to 1,024 columns dx and the
// parameters' column sums in one pass over x and dy (layer_norm_common.cuh has what the forward
// shares).
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/layer_norm_common.cuh"

namespace tandem::TANDEM_CUDA_NS {
namespace {


// Adds pack i of a row (x and dy packs) to the lane's sums of LayerNorm's dx row means: sg of
// g = dy * weight, sgx of g * xhat.
template <class T, class DY, class S, int V>
__device__ __forceinline__ void add_row_means_pack(const Pack<T, V>& xp, const Pack<DY, V>& dp, int64_t i, S mu, S r,
                                                   const S* __restrict__ weight, S& sg, S& sgx) {
  for (int k = 0; k < V; ++k) {
    const S g = static_cast<S>(to_acc(dp.v[k])) * (weight ? weight[i * V + k] : S(1));
    sg += g;
    sgx += g * (static_cast<S>(to_acc(xp.v[k])) - mu) * r;
  }
}

// a = mean(g), bb = mean(g * xhat) over the warp's row from each lane's sums sg and sgx.
template <class S>
__device__ __forceinline__ void finish_row_means(S sg, S sgx, int64_t D, S& a, S& bb) {
  const S inv_d = S(1) / static_cast<S>(D);
  a = warp_reduce(sg, SumOp{}) * inv_d;
  bb = warp_reduce(sgx, SumOp{}) * inv_d;
}

// The two row means of LayerNorm's dx, over a warp's row in packs of V: a = mean(g) and
// bb = mean(g * xhat), g = dy * weight. Every lane gets both.
template <class T, class DY, class S, int V>
__device__ __forceinline__ void row_means(const Pack<T, V>* xi, const Pack<DY, V>* di, int64_t packs, int lane, S mu,
                                          S r, const S* __restrict__ weight, int64_t D, S& a, S& bb) {
  S sg = S(0), sgx = S(0);
  for (int64_t i = lane; i < packs; i += 32) add_row_means_pack<T, DY, S, V>(xi[i], di[i], i, mu, r, weight, sg, sgx);
  finish_row_means(sg, sgx, D, a, bb);
}

// One pack of dx = r * (g - a - xhat * bb), g = dy * weight, for pack i of a row; each element's
// dy and xhat also go to on_element(k, dy, xhat) (the one-pass kernel's parameter sums).
template <class T, class DY, class S, int V, class F>
__device__ __forceinline__ Pack<T, V> dx_pack(const Pack<T, V>& xp, const Pack<DY, V>& dp, int64_t i, S mu, S r, S a,
                                              S bb, const S* __restrict__ weight, F&& on_element) {
  Pack<T, V> o;
  for (int k = 0; k < V; ++k) {
    const S xhat = (static_cast<S>(to_acc(xp.v[k])) - mu) * r, dyv = static_cast<S>(to_acc(dp.v[k]));
    const S g = dyv * (weight ? weight[i * V + k] : S(1));
    o.v[k] = from_acc<T>(r * (g - a - xhat * bb));
    on_element(k, dyv, xhat);
  }
  return o;
}

// Where a dx row goes: written, or added to `base`'s row (the sum so far in dx itself, or
// add_layer_norm's residual) as a separate pass adding the stored dx would (the same bits), and
// also rounded into `narrow`'s row (add_layer_norm's branch gradient, as a cast would round it).
template <class T, class N>
struct DxRows {
  T* dx;
  const T* base;  // may be dx: no __restrict__
  N* narrow;
};

// Pack i of a dx row's base (see DxRows), read before the row's dx is stored (the base may be dx
// itself); unread without one.
template <class T, class N, int V>
__device__ __forceinline__ Pack<T, V> dx_base_pack(const DxRows<T, N>& rows, int64_t row, int64_t i) {
  Pack<T, V> sum{};
  if (rows.base) sum = reinterpret_cast<const Pack<T, V>*>(rows.base + row)[i];
  return sum;
}

// Stores pack i of a dx row (see DxRows), `sum` its base's pack where it has one.
template <class T, class N, int V>
__device__ __forceinline__ void store_dx_pack(const DxRows<T, N>& rows, int64_t row, int64_t i, const Pack<T, V>& dx,
                                              const Pack<T, V>& sum) {
  Pack<T, V> out = dx;
  if (rows.base)
    for (int k = 0; k < V; ++k) out.v[k] = from_acc<T>(add_unfused(to_acc(sum.v[k]), to_acc(dx.v[k])));
  reinterpret_cast<Pack<T, V>*>(rows.dx + row)[i] = out;
  if (rows.narrow) {
    Pack<N, V> n;
    for (int k = 0; k < V; ++k) n.v[k] = cast_one<T, N>(out.v[k]);
    reinterpret_cast<Pack<N, V>*>(rows.narrow + row)[i] = n;
  }
}

template <class T, class DY, class S, int V>
__global__ void ln_backward_dx_warp_kernel(const DY* __restrict__ dy, const T* __restrict__ x, DxRows<T, DY> dx,
                                           int64_t M, int64_t D, const S* __restrict__ mean,
                                           const S* __restrict__ rstd, const S* __restrict__ weight) {
  using P = Pack<T, V>;
  const int lane = int(threadIdx.x % 32), warps = int(blockDim.x / 32);
  const int64_t packs = D / V;
  for (int64_t m = int64_t(blockIdx.x) * warps + threadIdx.x / 32; m < M; m += int64_t(gridDim.x) * warps) {
    const P* xi = reinterpret_cast<const P*>(x + m * D);
    const Pack<DY, V>* di = reinterpret_cast<const Pack<DY, V>*>(dy + m * D);
    const S mu = mean[m], r = rstd[m];
    S a, bb;
    row_means<T, DY, S, V>(xi, di, packs, lane, mu, r, weight, D, a, bb);
    for (int64_t i = lane; i < packs; i += 32) {
      const Pack<T, V> d = dx_pack<T, DY, S, V>(xi[i], di[i], i, mu, r, a, bb, weight, [](int, S, S) {});
      store_dx_pack<T, DY, V>(dx, m * D, i, d, dx_base_pack<T, DY, V>(dx, m * D, i));
    }
  }
}

// dx as ln_backward_dx_warp_kernel, and in the same pass over x and dy the weight's and bias's
// gradient terms (dy * xhat, dy) summed per column: a lane keeps its columns' sums over the rows its
// warp visits; the block's warps add theirs in warp order in shared memory; block b writes row b of
// part [blocks, 2D] (the weight's D columns, then the bias's), which ln_params_from_blocks_kernel
// sums in block order. The grid, and so the order, depends on M alone. Saves the second read of x
// and dy that ln_backward_params_kernel makes.
//
// A lane holds its J packs of the row (lane, lane + 32, ...: D <= 32 J V) in registers: x and dy
// are loaded once, all J packs at a time, and the dx pass reads them there. The loop-over-the-row
// form (one pack at a time, reloaded for dx) kept 125 registers for [8192, 768] f32 rows on an
// H100, two blocks an SM, and its dx pass (in its SASS) waited on each pack's load of the residual
// in turn: 1.21 ms for GPT-2's 25 LayerNorms at batch 8, 1.73 TB/s. J is the smallest of 2, 4, 6, 8
// that holds the row (8 where V is 1), so the registers follow the row (159 for GPT-2's f32 rows, no
// spills: one block an SM, each warp with its whole row's loads in flight). The sums are the loop
// form's, in its order.
constexpr int kFusedMaxPacks = 8;     // a lane's packs at most
constexpr int kFusedMaxElements = 32;  // and its elements: D <= 1024
constexpr int kFusedMaxBlocks = 256;

// The J of a row of `packs` packs of V (0: too long for the one-pass kernel).
inline int fused_lane_packs(int64_t packs, int V) {
  const int64_t need = (packs + 31) / 32;
  if (need > kFusedMaxPacks || need * V > kFusedMaxElements) return 0;
  if (V == 1) return kFusedMaxPacks;  // rows that cannot take packs: one instantiation
  return need <= 2 ? 2 : need <= 4 ? 4 : need <= 6 ? 6 : 8;
}

template <class T, class DY, class S, int V, int J>
__global__ void __launch_bounds__(kRowWarps * 32)
    ln_backward_fused_warp_kernel(const DY* __restrict__ dy, const T* __restrict__ x, DxRows<T, DY> dx, int64_t M,
                                  int64_t D, const S* __restrict__ mean, const S* __restrict__ rstd,
                                  const S* __restrict__ weight, S* __restrict__ part) {
  using P = Pack<T, V>;
  using PD = Pack<DY, V>;
  TANDEM_SHARED(S[32 * J * V], sum_w);
  TANDEM_SHARED(S[32 * J * V], sum_b);
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32), warps = int(blockDim.x / 32);
  const int64_t packs = D / V;
  S aw[J][V], ab[J][V];
  TANDEM_UNROLL
  for (int j = 0; j < J; ++j)
    TANDEM_UNROLL
    for (int k = 0; k < V; ++k) aw[j][k] = ab[j][k] = S(0);
  for (int64_t m = int64_t(blockIdx.x) * warps + warp; m < M; m += int64_t(gridDim.x) * warps) {
    const P* xi = reinterpret_cast<const P*>(x + m * D);
    const PD* di = reinterpret_cast<const PD*>(dy + m * D);
    P xr[J]{};
    PD dr[J]{};
    P base[J]{};  // the dx rows' base packs: read with x and dy, before any of the row's dx is stored
    TANDEM_UNROLL
    for (int j = 0; j < J; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < packs) {
        xr[j] = xi[i];
        dr[j] = di[i];
        base[j] = dx_base_pack<T, DY, V>(dx, m * D, i);
      }
    }
    const S mu = mean[m], r = rstd[m];
    S sg = S(0), sgx = S(0);
    TANDEM_UNROLL
    for (int j = 0; j < J; ++j)
      if (lane + 32 * j < packs) add_row_means_pack<T, DY, S, V>(xr[j], dr[j], lane + 32 * j, mu, r, weight, sg, sgx);
    S a, bb;
    finish_row_means(sg, sgx, D, a, bb);
    TANDEM_UNROLL
    for (int j = 0; j < J; ++j) {
      const int64_t i = lane + 32 * j;
      if (i >= packs) continue;
      const P d = dx_pack<T, DY, S, V>(xr[j], dr[j], i, mu, r, a, bb, weight, [&](int k, S dyv, S xhat) {
        aw[j][k] += dyv * xhat;
        ab[j][k] += dyv;
      });
      store_dx_pack<T, DY, V>(dx, m * D, i, d, base[j]);
    }
  }
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) sum_w[d] = sum_b[d] = S(0);
  __syncthreads();
  for (int w = 0; w < warps; ++w) {
    if (w == warp)
      TANDEM_UNROLL
      for (int j = 0; j < J; ++j) {
        const int64_t i = lane + 32 * int64_t(j);
        if (i >= packs) continue;
        for (int k = 0; k < V; ++k) {
          sum_w[i * V + k] += aw[j][k];
          sum_b[i * V + k] += ab[j][k];
        }
      }
    __syncthreads();
  }
  S* row = part + int64_t(blockIdx.x) * 2 * D;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    row[d] = sum_w[d];
    row[D + d] = sum_b[d];
  }
}

// dweight[c] and dbias[c] from part [rows, 2D] (ln_backward_fused_warp_kernel's per-block sums):
// column sums as reduce.cuh's (32 columns a block, kColumnRowLanes row lanes each adding its rows in
// order, then the lanes in order), written or (add) added to. Either output may be null.
template <class S>
__global__ void ln_params_from_blocks_kernel(const S* __restrict__ part, int64_t rows, int64_t D,
                                             S* __restrict__ dweight, S* __restrict__ dbias, bool add) {
  TANDEM_SHARED(S[kColumnRowLanes][33], lanes);
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  // A lane's rows threadIdx.y, + kColumnRowLanes, ... added in order (four loads issued at a time).
  const int64_t first = threadIdx.y, count = rows > first ? (rows - first + kColumnRowLanes - 1) / kColumnRowLanes : 0;
  S acc = c < 2 * D && count > 0 ? sum_in_order(part + first * 2 * D + c, count, kColumnRowLanes * 2 * D) : S(0);
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < 2 * D) {
    for (int l = 1; l < kColumnRowLanes; ++l) acc += lanes[l][threadIdx.x];
    S* out = c < D ? (dweight ? dweight + c : nullptr) : (dbias ? dbias + (c - D) : nullptr);
    if (out) *out = add ? *out + acc : acc;
  }
}


// f(std::integral_constant<int, J>) for the J of fused_lane_packs (packs of V): those that fit.
template <int V, class F>
void with_lane_packs(int J, F&& f) {
  if constexpr (V == 1) {
    f(std::integral_constant<int, kFusedMaxPacks>{});
  } else {
    if (J == 2) return f(std::integral_constant<int, 2>{});
    if constexpr (4 * V <= kFusedMaxElements)
      if (J == 4) return f(std::integral_constant<int, 4>{});
    if constexpr (8 * V <= kFusedMaxElements) {
      if (J == 6) return f(std::integral_constant<int, 6>{});
      if (J == 8) return f(std::integral_constant<int, 8>{});
    }
    TANDEM_FAIL(Internal, "layer_norm backward: no one-pass kernel for {} packs of {} a lane", J, V);
  }
}

template <class T, class S>
__global__ void ln_backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x, T* dx, int64_t M, int64_t D,
                                      const S* __restrict__ mean, const S* __restrict__ rstd,
                                      const S* __restrict__ weight, const T* base) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const T* xi = x + m * D;
    const T* di = dy + m * D;
    const S mu = mean[m], r = rstd[m];
    S sg = S(0), sgx = S(0);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const S w = weight ? weight[d] : S(1);
      sg += static_cast<S>(to_acc(di[d])) * w;
      sgx += static_cast<S>(to_acc(di[d])) * w * (static_cast<S>(to_acc(xi[d])) - mu) * r;
    }
    sg = block_sum(sg);
    sgx = block_sum(sgx);
    const S inv_d = S(1) / static_cast<S>(D), a = sg * inv_d, bb = sgx * inv_d;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const S xhat = (static_cast<S>(to_acc(xi[d])) - mu) * r;
      const T v = from_acc<T>(r * (static_cast<S>(to_acc(di[d])) * (weight ? weight[d] : S(1)) - a - xhat * bb));
      dx[m * D + d] = base ? from_acc<T>(add_unfused(to_acc(base[m * D + d]), to_acc(v))) : v;
    }
  }
}

// dweight and dbias sum over all M rows, a column each. One thread per column over every row left
// 3 blocks for GPT-2's 768 columns and cost more than all its GEMMs (84 of 236 ms a step on an H100),
// so they are column sums as in reduce.cuh: row splits of 32-column blocks, the block's row lanes
// added in order, then the splits in order (sum_splits_to_kernel). The order depends on M and D alone.
template <class T, class S>
__global__ void ln_backward_params_kernel(const T* __restrict__ dy, const T* __restrict__ x, int64_t M, int64_t D,
                                          int64_t splits, const S* __restrict__ mean, const S* __restrict__ rstd,
                                          S* __restrict__ part_w, S* __restrict__ part_b) {
  TANDEM_SHARED(S[kColumnRowLanes][33], sw);
  TANDEM_SHARED(S[kColumnRowLanes][33], sb);
  const int64_t d = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const SplitRange r = split_range(M, blockIdx.y, splits);
  S w = S(0), b = S(0);
  if (d < D)
    for (int64_t m = r.begin + threadIdx.y; m < r.end; m += kColumnRowLanes) {
      const S g = static_cast<S>(to_acc(dy[m * D + d]));
      w += g * (static_cast<S>(to_acc(x[m * D + d])) - mean[m]) * rstd[m];
      b += g;
    }
  sw[threadIdx.y][threadIdx.x] = w;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && d < D) {
    for (int l = 1; l < kColumnRowLanes; ++l) {
      w += sw[l][threadIdx.x];
      b += sb[l][threadIdx.x];
    }
    part_w[d * splits + blockIdx.y] = w;
    part_b[d * splits + blockIdx.y] = b;
  }
}

void ln_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                 Tensor& dx, Tensor& dweight, Tensor& dbias, kernels::LayerNormGradAdds adds) {
  const Device dev = x.device();
  check_on_device("layer_norm backward", dev, {&dy, &x, &mean, &rstd, &weight, &dx, &dweight, &dbias});
  dispatch_norm_types(x.dtype(), "layer_norm backward", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const DType sd = dtype_v<S>;
    const int64_t M = mean.numel(), D = M ? x.numel() / M : (dweight.defined() ? dweight.numel() : 0);
    kernels::check_layer_norm_output_dtype("layer_norm backward", x.dtype(), dy.dtype());
    Tensor ms = as_stat(mean, sd), rs = as_stat(rstd, sd), w = as_stat(weight, sd);
    const bool params = (dweight.defined() || dbias.defined()) && D > 0;
    for (const Tensor* p : {&dweight, &dbias})  // added to in place: no stat-dtype scratch between
      TANDEM_CHECK(!adds.params || !p->defined() || p->dtype() == sd,
                   "layer_norm backward: parameter gradients added to must be {}, got {}", dtype_name(sd),
                   dtype_name(p->dtype()));
    kernels::check_layer_norm_dx_extras("layer_norm backward", x, dx, adds);
    const void* base = adds.dx ? dx.data_ptr() : adds.residual.defined() ? adds.residual.data_ptr() : nullptr;
    // The warp kernels round dx into a narrow copy of dy's dtype as they store it; any other copy is
    // a cast after them.
    const bool narrow_in_kernel = adds.dx_narrow.defined() && adds.dx_narrow.dtype() == dy.dtype() &&
                                  dy.dtype() != x.dtype() && M > 0 && D <= kWarpRowMax;
    void* narrow = narrow_in_kernel ? adds.dx_narrow.data_ptr() : nullptr;
    auto rows = [&](auto dyt) {
      using DY = decltype(dyt);
      return DxRows<T, DY>{dx.defined() ? static_cast<T*>(dx.data_ptr()) : nullptr, static_cast<const T*>(base),
                           static_cast<DY*>(narrow)};
    };
    auto narrow_after = [&] {
      if (adds.dx_narrow.defined() && !narrow_in_kernel && M > 0) kernels::cast(dev)(dx, adds.dx_narrow);
    };
    // The dx kernels' pack width: every row they read or write aligned to it.
    const int vw = row_pack_width<T>(D, {dy.data_ptr(), x.data_ptr(), dx.defined() ? dx.data_ptr() : nullptr, base,
                                         narrow});
    const int lane_packs = dx.defined() && params && M > 0 ? fused_lane_packs(D / vw, vw) : 0;
    if (lane_packs > 0) {  // everything in one pass
      Tensor gw = stat_out(dweight, sd), gb = stat_out(dbias, sd);
      const int64_t blocks = std::min<int64_t>(grid_for(M, kRowWarps), kFusedMaxBlocks);
      Tensor part = Tensor::empty({blocks * 2 * D}, sd, dev);
      with_narrow<T>(dy.dtype(), [&](auto dyt) {
        using DY = decltype(dyt);
        with_pack_width<T>(vw, [&](auto v) {
          constexpr int V = decltype(v)::value;
          auto launch = [&](auto j) {
            TANDEM_LAUNCH((ln_backward_fused_warp_kernel<T, DY, S, V, decltype(j)::value>),
                          dim3(static_cast<unsigned>(blocks)), kRowWarps * 32, 0, stream_for(dev),
                          static_cast<const DY*>(dy.data_ptr()), static_cast<const T*>(x.data_ptr()), rows(DY{}), M,
                          D, ptr_or_null<S>(ms), ptr_or_null<S>(rs), ptr_or_null<S>(w),
                          static_cast<S*>(part.data_ptr()));
          };
          with_lane_packs<V>(lane_packs, launch);
        });
      });
      narrow_after();
      TANDEM_LAUNCH(ln_params_from_blocks_kernel<S>, dim3(static_cast<unsigned>((2 * D + 31) / 32)),
                    dim3(32, kColumnRowLanes), 0, stream_for(dev), static_cast<const S*>(part.data_ptr()), blocks, D,
                    gw.defined() ? static_cast<S*>(gw.data_ptr()) : nullptr,
                    gb.defined() ? static_cast<S*>(gb.data_ptr()) : nullptr, adds.params);
      store_stat(gw, dweight);
      store_stat(gb, dbias);
      return;
    }
    // The one-pass and warp dx kernels read a narrower dy as it is; the block-per-row dx kernel and
    // the parameters' column sums read a copy in x's dtype, made only when one of them runs.
    const bool warp_dx = dx.defined() && M > 0 && D <= kWarpRowMax, block_dx = dx.defined() && M > 0 && !warp_dx;
    const Tensor dy_x = (block_dx || params) && dy.dtype() != x.dtype() ? as_stat(dy, x.dtype()) : dy;
    if (warp_dx) {
      with_narrow<T>(dy.dtype(), [&](auto dyt) {
        using DY = decltype(dyt);
        with_pack_width<T>(vw, [&](auto v) {
          TANDEM_LAUNCH(ln_backward_dx_warp_kernel<T, DY, S, decltype(v)::value>, grid_for(M, kRowWarps),
                        kRowWarps * 32, 0, stream_for(dev), static_cast<const DY*>(dy.data_ptr()),
                        static_cast<const T*>(x.data_ptr()), rows(DY{}), M, D, ptr_or_null<S>(ms), ptr_or_null<S>(rs),
                        ptr_or_null<S>(w));
        });
      });
    } else if (block_dx) {
      TANDEM_LAUNCH(ln_backward_dx_kernel<T, S>, grid_for(M, 1), threads_for(D), 0, stream_for(dev),
                    static_cast<const T*>(dy_x.data_ptr()), static_cast<const T*>(x.data_ptr()),
                    static_cast<T*>(dx.data_ptr()), M, D, ptr_or_null<S>(ms), ptr_or_null<S>(rs), ptr_or_null<S>(w),
                    static_cast<const T*>(base));
    }
    narrow_after();
    if (params) {
      Tensor gw = stat_out(dweight, sd), gb = stat_out(dbias, sd);
      const int64_t splits = column_splits(M, D);
      Tensor pw = Tensor::empty({D * splits}, sd, dev), pb = Tensor::empty({D * splits}, sd, dev);
      TANDEM_LAUNCH(ln_backward_params_kernel<T, S>, dim3(static_cast<unsigned>((D + 31) / 32), static_cast<unsigned>(splits)),
                    dim3(32, kColumnRowLanes), 0, stream_for(dev), static_cast<const T*>(dy_x.data_ptr()),
                    static_cast<const T*>(x.data_ptr()), M, D, splits, ptr_or_null<S>(ms), ptr_or_null<S>(rs),
                    static_cast<S*>(pw.data_ptr()), static_cast<S*>(pb.data_ptr()));
      if (gw.defined())
        TANDEM_LAUNCH(sum_splits_to_kernel<S>, grid_for(D, kBlock), kBlock, 0, stream_for(dev),
                      static_cast<const S*>(pw.data_ptr()), static_cast<S*>(gw.data_ptr()), D, splits, splits,
                      int64_t(1), S(1), adds.params);
      if (gb.defined())
        TANDEM_LAUNCH(sum_splits_to_kernel<S>, grid_for(D, kBlock), kBlock, 0, stream_for(dev),
                      static_cast<const S*>(pb.data_ptr()), static_cast<S*>(gb.data_ptr()), D, splits, splits,
                      int64_t(1), S(1), adds.params);
      store_stat(gw, dweight);
      store_stat(gb, dbias);
    }
  });
}

TANDEM_REGISTER_KERNEL(kernels::layer_norm_backward, kKind, ln_backward);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
