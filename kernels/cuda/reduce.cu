// Reduction kernels of the CUDA backend: sum_to (split blocks per output, a block reduction over the
// summed dims, or column sums for the [rows, cols] -> [cols] of bias gradients), its adjoint expand,
// and argmax. Integer sums accumulate in 64 bits and wrap to the storage type at the end, which gives
// the CPU's wrapped result exactly.
#include <mutex>
#include <vector>

#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/strided_gather.cuh"
#include "runtime/backend/elementwise.h"
#include "runtime/env_settings.h"
#include "runtime/backend/reduce.h"

namespace tandem::TANDEM_CUDA_NS {

namespace {
constexpr int64_t kArrivalGroups = int64_t(1) << 16;  // column groups of 32: sums of up to 2M columns

__global__ void zero_arrivals_kernel(unsigned* __restrict__ arrivals, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) arrivals[i] = 0;
}
}  // namespace

unsigned* column_arrivals(Device dev, int64_t groups) {
  static const bool two_pass = env::choice("TANDEM_COLUMN_SUMS") == 1;
  if (two_pass || groups > kArrivalGroups) return nullptr;
  static std::mutex mutex;
  // By device index, kept for the process: never destroyed, so that the arrays stay reachable from
  // it at exit (LeakSanitizer checks after static destructors).
  static auto* const arrays = new std::vector<unsigned*>;
  Stream stream = stream_for(dev);
  std::lock_guard<std::mutex> lock(mutex);
  if (arrays->size() <= static_cast<size_t>(dev.index)) arrays->resize(static_cast<size_t>(dev.index) + 1, nullptr);
  unsigned*& a = (*arrays)[static_cast<size_t>(dev.index)];
  if (!a) {
    a = static_cast<unsigned*>(device_alloc(kArrivalGroups * sizeof(unsigned), dev));
    // Zeroed on the stream every column sum runs on, so before any of them.
    TANDEM_LAUNCH(zero_arrivals_kernel, grid_for(kArrivalGroups, kBlock), kBlock, 0, stream, a, kArrivalGroups);
  }
  return a;
}

namespace {

constexpr int kMaxDims = 8;

// Index space split into kept dims (one output each) and summed dims, with source strides.
struct SumPlan {
  int keep_rank, red_rank;
  int64_t keep_size[kMaxDims], keep_stride[kMaxDims];
  int64_t red_size[kMaxDims], red_stride[kMaxDims];
};

// Sums split blockIdx.x of every output's items (grid y strides over outputs): into part[o * splits
// + split], or, with one split (part null), scaled straight into dst[o].
template <class T>
__global__ void sum_to_kernel(const T* __restrict__ src, T* __restrict__ dst, sum_acc_t<T>* __restrict__ part,
                              int64_t outputs, int64_t per_output, int64_t splits, SumPlan p, acc_t<T> scale) {
  using S = sum_acc_t<T>;
  const SplitRange range = split_range(per_output, blockIdx.x, splits);
  for (int64_t o = blockIdx.y; o < outputs; o += gridDim.y) {
    const int64_t base = offset_of(o, p.keep_rank, p.keep_size, p.keep_stride);
    S acc = S(0);
    for (int64_t r = range.begin + threadIdx.x; r < range.end; r += blockDim.x)
      acc += static_cast<S>(to_acc(src[base + offset_of(r, p.red_rank, p.red_size, p.red_stride)]));
    acc = block_sum(acc);
    if (threadIdx.x != 0) continue;
    if (part) part[o * splits + blockIdx.x] = acc;
    else dst[o] = from_acc<T>(static_cast<acc_t<T>>(static_cast<acc_t<T>>(acc) * scale));
  }
}

// A scaled broadcast: strided_gather's plan (dst's dims, the source stride of each, 0 where
// broadcast), each element times scale (scale 1 is strided_gather's copy of bits).
template <class T, bool Fast>
__global__ void expand_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n, GatherPlan p, acc_t<T> scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = from_acc<T>(static_cast<acc_t<T>>(to_acc(src[gather_offset<Fast>(i, p)]) * scale));
}

template <class T>
__global__ void argmax_kernel(const T* __restrict__ src, int64_t* __restrict__ dst, int64_t outer, int64_t n,
                              int64_t inner) {
  using X = acc_t<T>;
  for (int64_t row = blockIdx.x; row < outer * inner; row += gridDim.x) {
    const int64_t o = row / inner, i = row % inner;
    const T* s = src + o * n * inner + i;
    ArgMax<X> best{X(0), -1};
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) best = argmax_combine(best, ArgMax<X>{to_acc(s[k * inner]), k});
    best = block_argmax(best);
    if (threadIdx.x == 0) dst[row] = best.index;
  }
}

// Threads per block for reductions of `per_output` items: a multiple of 32, at most 256.
unsigned reduce_threads(int64_t per_output) {
  int64_t t = (per_output + 31) / 32 * 32;
  return static_cast<unsigned>(t < 32 ? 32 : (t > 256 ? 256 : t));
}

void sum_to(const Tensor& src, Tensor& dst, double scale) {
  check_on_device("sum_to", src.device(), {&src, &dst});
  const int64_t outputs = dst.numel();
  if (outputs == 0) return;
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (src.numel() == 0) {
      TANDEM_LAUNCH(fill_kernel<T>, grid_for(outputs, kBlock), kBlock, 0, stream_for(dst.device()),
                    static_cast<T*>(dst.data_ptr()), outputs, scalar_as<T>(0.0));
      return;
    }
    kernels::BroadcastPlan plan = kernels::broadcast_plan(src.shape(), {src.shape(), dst.shape()});
    SumPlan p{};
    int64_t per_output = 1;
    for (size_t d = 0; d < plan.sizes.size(); ++d) {
      const bool summed = plan.strides[1][d] == 0;
      int& rank = summed ? p.red_rank : p.keep_rank;
      TANDEM_CHECK(rank < kMaxDims, "sum_to: more than {} dims after merging {} -> {}", kMaxDims,
                   shape_str(src.shape()), shape_str(dst.shape()));
      (summed ? p.red_size : p.keep_size)[rank] = plan.sizes[d];
      (summed ? p.red_stride : p.keep_stride)[rank] = plan.strides[0][d];
      ++rank;
      if (summed) per_output *= plan.sizes[d];
    }
    using S = sum_acc_t<T>;
    const Device dev = src.device();
    if (p.keep_rank == 1 && p.red_rank == 1 && p.keep_stride[0] == 1 && p.red_stride[0] == p.keep_size[0]) {
      // Leading rows summed, contiguous columns kept: the coalesced column sums.
      launch_column_sums(dev, static_cast<const T*>(src.data_ptr()), p.red_size[0], p.keep_size[0],
                         static_cast<T*>(dst.data_ptr()), static_cast<acc_t<T>>(scale));
      return;
    }
    const int64_t splits = reduction_splits(outputs, per_output);
    const dim3 grid(static_cast<unsigned>(splits), grid_for(outputs, 1));
    // Partial sums (splits > 1) in the accumulation type, as raw device bytes.
    Tensor part = splits > 1 ? Tensor::empty({outputs * splits * static_cast<int64_t>(sizeof(S))}, DType::u8, dev)
                             : Tensor();
    S* part_ptr = splits > 1 ? static_cast<S*>(part.data_ptr()) : nullptr;
    TANDEM_LAUNCH(sum_to_kernel<T>, grid, reduce_threads(per_output / splits), 0, stream_for(dev),
                  static_cast<const T*>(src.data_ptr()), static_cast<T*>(dst.data_ptr()), part_ptr, outputs,
                  per_output, splits, p, static_cast<acc_t<T>>(scale));
    if (splits > 1)
      TANDEM_LAUNCH(sum_splits_to_kernel<T>, grid_for(outputs, kBlock), kBlock, 0, stream_for(dev),
                    static_cast<const S*>(part_ptr), static_cast<T*>(dst.data_ptr()), outputs, splits, splits,
                    int64_t(1), static_cast<acc_t<T>>(scale), false);
  }, "sum_to");
}

void expand(const Tensor& src, Tensor& dst, double scale) {
  check_on_device("expand", src.device(), {&src, &dst});
  const int64_t n = dst.numel();
  if (n == 0) return;
  kernels::BroadcastPlan plan = kernels::broadcast_plan(dst.shape(), {dst.shape(), src.shape()});
  TANDEM_CHECK(plan.sizes.size() <= kGatherMaxDims, "expand: more than {} dims after merging", kGatherMaxDims);
  GatherPlan p;
  p.rank = static_cast<int>(plan.sizes.size());
  for (int d = 0; d < p.rank; ++d) {
    p.size[d] = plan.sizes[d];
    p.stride[d] = plan.strides[1][d];
  }
  // scale 1: a copy of bits (a bias broadcast before a GEMM), up to 16 bytes a thread.
  if (scale == 1.0)
    return strided_gather(src.data_ptr(), dst.data_ptr(), src.element_size(), p, stream_for(src.device()));
  const bool fast = set_fast_divmods(p, n);
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = fast ? expand_kernel<T, true> : expand_kernel<T, false>;
    TANDEM_LAUNCH(kernel, grid_for(n, kBlock), kBlock, 0, stream_for(src.device()),
                  static_cast<const T*>(src.data_ptr()), static_cast<T*>(dst.data_ptr()), n, p,
                  static_cast<acc_t<T>>(scale));
  }, "expand");
}

void argmax(const Tensor& src, Tensor& dst, int64_t outer, int64_t n, int64_t inner) {
  check_on_device("argmax", src.device(), {&src, &dst});
  TANDEM_CHECK(dst.dtype() == DType::i64, "argmax: dst must be i64, got {}", dtype_name(dst.dtype()));
  TANDEM_CHECK(n >= 1, "argmax over an empty dim");
  const int64_t rows = outer * inner;
  if (rows == 0) return;
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, uint8_t>) {
      TANDEM_FAIL(NotSupported, "argmax does not support dtype u8");
    } else {
      TANDEM_LAUNCH(argmax_kernel<T>, grid_for(rows, 1), reduce_threads(n), 0, stream_for(src.device()),
                    static_cast<const T*>(src.data_ptr()), static_cast<int64_t*>(dst.data_ptr()), outer, n, inner);
    }
  }, "argmax");
}

TANDEM_REGISTER_KERNEL(kernels::sum_to, kKind, sum_to);
TANDEM_REGISTER_KERNEL(kernels::expand, kKind, expand);
TANDEM_REGISTER_KERNEL(kernels::argmax, kKind, argmax);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
