// Multi-tensor kernels of the CUDA backend (Apex's multi_tensor_apply): the host packs up to
// kMaxTensors tensor addresses and kMaxBlocks (tensor, chunk) pairs into one by-value kernel
// argument and launches one block per chunk; a list longer than that takes several launches.
// Kernels: the GradScaler's unscale + inf/nan check, the sum of squares + check (clipping), and the
// fused SGD/Adam updates with the gradient factor folded in. Per-element math: adam_step.h.
#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "kernels/cuda/adam_elements.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/backend/common/adam_step.h"
#include "runtime/backend/dtype_dispatch.h"
#include "runtime/backend/multi_tensor.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

#ifdef TANDEM_SIMT_EMULATOR
// Small chunks and lists under the emulator: chunk boundaries and multi-launch splits get tested.
constexpr int64_t kChunk = 1024;
constexpr int kMaxTensors = 4;
constexpr int kMaxBlocks = 8;
#else
// A GPT-2's 148 parameters (124M elements, ~1,900 chunks) in two launches of the fused optimizers:
// 96 blocks a launch (the 4 KB argument limit before CUDA 12.1) left a third of an H100's SMs idle
// in each of ~20 launches. The by-value argument of depth 5 is ~24 KB (the limit is 32,764 bytes on
// sm_70 and later with CUDA 12.1 or newer).
constexpr int64_t kChunk = kernels::kMultiTensorChunk;
constexpr int kMaxTensors = 160;
constexpr int kMaxBlocks = 1024;
#endif

// One launch's worth of work, passed by value. D: tensors per entry (param, grad, state, ...).
template <int D>
struct ListMeta {
  void* addr[D][kMaxTensors];
  int64_t numel[kMaxTensors];
  int32_t index[kMaxTensors];  // position in the caller's list (hyperparameters)
  int32_t block_tensor[kMaxBlocks];
  int32_t block_chunk[kMaxBlocks];  // chunk number over the whole list (sum-of-squares partials)
  int64_t block_start[kMaxBlocks];
};
static_assert(sizeof(ListMeta<5>) <= 32764, "a launch's list must fit a kernel's argument (32,764 bytes)");

// Splits the list into launches; launch_fn(meta, blocks) issues one.
template <int D, class F>
void for_each_launch(const std::vector<std::array<void*, D>>& ptrs, const std::vector<int64_t>& numels, F&& launch_fn) {
  ListMeta<D> m{};
  int nt = 0, nb = 0;
  int32_t chunk_no = 0;
  auto flush = [&] {
    if (nb > 0) launch_fn(m, nb);
    nt = nb = 0;
  };
  auto add = [&](size_t t) {
    for (int d = 0; d < D; ++d) m.addr[d][nt] = ptrs[t][static_cast<size_t>(d)];
    m.numel[nt] = numels[t];
    m.index[nt] = static_cast<int32_t>(t);
    return nt++;
  };
  for (size_t t = 0; t < ptrs.size(); ++t) {
    if (numels[t] == 0) continue;
    if (nt == kMaxTensors) flush();
    int slot = add(t);
    for (int64_t start = 0; start < numels[t]; start += kChunk) {
      if (nb == kMaxBlocks) {
        flush();
        slot = add(t);
      }
      m.block_tensor[nb] = slot;
      m.block_chunk[nb] = chunk_no++;
      m.block_start[nb] = start;
      ++nb;
    }
  }
  flush();
}

int64_t count_chunks(const std::vector<int64_t>& numels) {
  int64_t n = 0;
  for (int64_t k : numels) n += (k + kChunk - 1) / kChunk;
  return n;
}

// x - x is 0 for finite x and NaN for inf and NaN (no libm call: the same code on GPU and emulator).
template <class A>
__device__ __forceinline__ bool finite(A v) { return v - v == A(0); }

__device__ __forceinline__ int64_t chunk_length(int64_t numel, int64_t start) {
  return numel - start < kChunk ? numel - start : kChunk;
}

template <class T>
__global__ void unscale_kernel(ListMeta<1> m, double inv_scale, float* found_inf) {
  const int slot = m.block_tensor[blockIdx.x];
  const int64_t start = m.block_start[blockIdx.x];
  const int64_t len = chunk_length(m.numel[slot], start);
  T* g = static_cast<T*>(m.addr[0][slot]) + start;
  using A = acc_t<T>;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    A v = to_acc(g[i]);
    if (!finite(v)) *found_inf = 1.0f;
    g[i] = from_acc<T>(static_cast<A>(v * static_cast<A>(inv_scale)));
  }
}

// U: an unsigned type of the elements' size (zero bits are zero in every dtype); 16-byte stores
// where the chunk is aligned to them (chunks start at multiples of kChunk elements).
template <class U>
__global__ void zero_kernel(ListMeta<1> m) {
  const int slot = m.block_tensor[blockIdx.x];
  const int64_t start = m.block_start[blockIdx.x];
  const int64_t len = chunk_length(m.numel[slot], start);
  U* x = static_cast<U*>(m.addr[0][slot]) + start;
  constexpr int V = kPackWidth<U>;
  int64_t head = 0;
  if (aligned16(x)) {
    const Pack<U, V> zero{};
    for (int64_t i = threadIdx.x; i < len / V; i += blockDim.x) reinterpret_cast<Pack<U, V>*>(x)[i] = zero;
    head = len / V * V;
  }
  for (int64_t i = head + threadIdx.x; i < len; i += blockDim.x) x[i] = U(0);
}

// D = 2: source, destination; converted as the single-tensor cast does (cast_elements).
template <class S, class D>
__global__ void cast_chunk_kernel(ListMeta<2> m) {
  const int slot = m.block_tensor[blockIdx.x];
  const int64_t start = m.block_start[blockIdx.x];
  const S* src = static_cast<const S*>(m.addr[0][slot]) + start;
  D* dst = static_cast<D*>(m.addr[1][slot]) + start;
  constexpr int V = kCastWidth<S, D>;
  cast_elements(src, dst, chunk_length(m.numel[slot], start),
                aligned_to(src, V * sizeof(S)) && aligned_to(dst, V * sizeof(D)), threadIdx.x, blockDim.x);
}

template <class T>
__global__ void sum_squares_kernel(ListMeta<1> m, double* partial, float* found_inf) {
  const int slot = m.block_tensor[blockIdx.x];
  const int64_t start = m.block_start[blockIdx.x];
  const int64_t len = chunk_length(m.numel[slot], start);
  const T* g = static_cast<const T*>(m.addr[0][slot]) + start;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    double v = static_cast<double>(to_acc(g[i]));
    if (!finite(v)) *found_inf = 1.0f;
    s += v * v;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[m.block_chunk[blockIdx.x]] = s;
}

// D = 5: param, grad, exp_avg, exp_avg_sq, model (null unless master weights).
template <class T, class G>
__global__ void adam_kernel(ListMeta<5> m, const AdamHyper* hypers, double grad_factor, const float* found_inf) {
  if (found_inf && *found_inf != 0.0f) return;
  const int slot = m.block_tensor[blockIdx.x];
  const int64_t start = m.block_start[blockIdx.x];
  const int64_t len = chunk_length(m.numel[slot], start);
  T* p = static_cast<T*>(m.addr[0][slot]) + start;
  const G* g = static_cast<const G*>(m.addr[1][slot]) + start;
  T* mo = static_cast<T*>(m.addr[2][slot]) + start;
  T* v = static_cast<T*>(m.addr[3][slot]) + start;
  G* out = m.addr[4][slot] ? static_cast<G*>(m.addr[4][slot]) + start : nullptr;
  adam_elements(p, g, mo, v, out, len, hypers[m.index[slot]], grad_factor, threadIdx.x, blockDim.x);
}

// D = 4: param, grad, momentum buffer (null without momentum), model (null unless master weights).
template <class T, class G>
__global__ void sgd_kernel(ListMeta<4> m, const SgdHyper* hypers, double grad_factor, const float* found_inf) {
  if (found_inf && *found_inf != 0.0f) return;
  const int slot = m.block_tensor[blockIdx.x];
  const int64_t start = m.block_start[blockIdx.x];
  const int64_t len = chunk_length(m.numel[slot], start);
  using A = acc_t<T>;
  T* p = static_cast<T*>(m.addr[0][slot]) + start;
  const G* g = static_cast<const G*>(m.addr[1][slot]) + start;
  T* b = m.addr[2][slot] ? static_cast<T*>(m.addr[2][slot]) + start : nullptr;
  G* out = m.addr[3][slot] ? static_cast<G*>(m.addr[3][slot]) + start : nullptr;
  const SgdHyper h = hypers[m.index[slot]];
  const bool scaled = grad_factor != 1.0;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    A gv = static_cast<A>(to_acc(g[i]));
    if (scaled) gv = gv * static_cast<A>(grad_factor);
    A pv = to_acc(p[i]), bv = b ? to_acc(b[i]) : A(0);
    sgd_update<A>(pv, gv, bv, h);
    p[i] = from_acc<T>(pv);
    if (b) b[i] = from_acc<T>(bv);
    if (out) out[i] = from_acc<G>(static_cast<float>(pv));
  }
}

float* found_ptr(const Tensor& found_inf, Device device) {
  if (!found_inf.defined()) return nullptr;
  TANDEM_CHECK(found_inf.numel() == 1 && found_inf.dtype() == DType::f32 && found_inf.device() == device,
               "multi_tensor: found_inf must be a one-element f32 tensor on {}", device.str());
  return static_cast<float*>(found_inf.data_ptr());
}

// A copy of a host array in device memory, freed (stream-ordered) at scope exit.
template <class H>
struct DeviceArray {
  H* ptr = nullptr;
  Device device;
  DeviceArray(const std::vector<H>& host, Device dev) : device(dev) {
    const size_t bytes = std::max<size_t>(1, host.size()) * sizeof(H);
    ptr = static_cast<H*>(device_alloc(bytes, dev));
    if (!host.empty()) copy_bytes(ptr, dev, host.data(), kCPU, host.size() * sizeof(H));
  }
  ~DeviceArray() { device_free(ptr, device); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

// The tensors among `tensors` (all on `dev`) that `pick` selects, as one-pointer lists for
// for_each_launch. False when there are none.
template <class Pick>
bool gather_where(const std::vector<Tensor>& tensors, Pick&& pick, Device dev, const char* what,
                  std::vector<std::array<void*, 1>>& ptrs, std::vector<int64_t>& numels) {
  for (const Tensor& t : tensors)
    if (pick(t)) {
      check_on_device(what, dev, {&t});
      ptrs.push_back({t.data_ptr()});
      numels.push_back(t.numel());
    }
  return !ptrs.empty();
}
bool gather_dtype(const std::vector<Tensor>& tensors, DType dtype, Device dev, const char* what,
                  std::vector<std::array<void*, 1>>& ptrs, std::vector<int64_t>& numels) {
  return gather_where(tensors, [dtype](const Tensor& t) { return t.dtype() == dtype; }, dev, what, ptrs, numels);
}

void zero(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) return;
  const Device dev = tensors[0].device();
  auto run = [&](auto tag) {
    using U = decltype(tag);
    std::vector<std::array<void*, 1>> ptrs;
    std::vector<int64_t> numels;
    const auto same_size = [](const Tensor& t) { return t.element_size() == sizeof(U); };
    if (!gather_where(tensors, same_size, dev, "multi_tensor_zero", ptrs, numels)) return;
    for_each_launch<1>(ptrs, numels, [&](const ListMeta<1>& m, int blocks) {
      TANDEM_LAUNCH(zero_kernel<U>, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream_for(dev), m);
    });
  };
  run(uint8_t{});
  run(uint16_t{});
  run(uint32_t{});
  run(uint64_t{});
}

void cast(const std::vector<Tensor>& src, const std::vector<Tensor>& dst) {
  kernels::check_multi_tensor_cast(src, dst);
  if (src.empty()) return;
  const Device dev = src[0].device();
  std::vector<std::array<void*, 2>> ptrs;
  std::vector<int64_t> numels;
  for (size_t i = 0; i < src.size(); ++i) {
    check_on_device("multi_tensor_cast", dev, {&src[i], &dst[i]});
    ptrs.push_back({src[i].data_ptr(), dst[i].data_ptr()});
    numels.push_back(src[i].numel());
  }
  dispatch_floating_pair(src[0].dtype(), dst[0].dtype(), "multi_tensor_cast", [&](auto st, auto dt) {
    using S = decltype(st);
    using D = decltype(dt);
    for_each_launch<2>(ptrs, numels, [&](const ListMeta<2>& m, int blocks) {
      TANDEM_LAUNCH(cast_chunk_kernel<S, D>, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream_for(dev), m);
    });
  });
}

// Groups of tensors sharing a dtype go through one kernel instantiation each.
void unscale(const std::vector<Tensor>& grads, double inv_scale, Tensor& found_inf) {
  if (grads.empty()) return;
  const Device dev = grads[0].device();
  float* found = found_ptr(found_inf, dev);
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    std::vector<std::array<void*, 1>> ptrs;
    std::vector<int64_t> numels;
    if (!gather_dtype(grads, dt, dev, "multi_tensor_unscale", ptrs, numels)) continue;
    dispatch_floating(dt, "multi_tensor_unscale", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (is_floating_type_v<T>) for_each_launch<1>(ptrs, numels, [&](const ListMeta<1>& m, int blocks) {
        TANDEM_LAUNCH(unscale_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream_for(dev), m,
                      inv_scale, found);
      });
    });
  }
}

double sum_squares_check(const std::vector<Tensor>& grads, Tensor& found_inf) {
  if (grads.empty()) return 0.0;
  const Device dev = grads[0].device();
  float* found = found_ptr(found_inf, dev);
  double total = 0.0;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    std::vector<std::array<void*, 1>> ptrs;
    std::vector<int64_t> numels;
    if (!gather_dtype(grads, dt, dev, "multi_tensor_sum_squares_check", ptrs, numels)) continue;
    const int64_t chunks = count_chunks(numels);
    Tensor partial = Tensor::zeros({chunks}, DType::f64, dev);
    dispatch_floating(dt, "multi_tensor_sum_squares_check", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (is_floating_type_v<T>) for_each_launch<1>(ptrs, numels, [&](const ListMeta<1>& m, int blocks) {
        TANDEM_LAUNCH(sum_squares_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream_for(dev),
                      m, static_cast<double*>(partial.data_ptr()), found);
      });
    });
    // Partials added on the host in chunk order: deterministic.
    for (double s : partial.to_vector<double>()) total += s;
  }
  return total;
}

void adam(const kernels::MultiTensorAdamArgs& a) {
  kernels::check_multi_tensor_lists("multi_tensor_adam", a.params, {&a.grads, &a.exp_avgs, &a.exp_avg_sqs,
                                    &a.model_params}, a.hypers.size());
  if (a.params.empty()) return;
  const Device dev = a.params[0].device();
  const float* found = found_ptr(a.found_inf, dev);
  const bool master = !a.model_params.empty();
  // One instantiation per (param dtype, grad dtype) pair present.
  std::vector<std::pair<DType, DType>> kinds;
  for (size_t i = 0; i < a.params.size(); ++i) {
    std::pair<DType, DType> k{a.params[i].dtype(), a.grads[i].dtype()};
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  }
  for (auto [pd, gd] : kinds) {
    std::vector<std::array<void*, 5>> ptrs;
    std::vector<int64_t> numels;
    std::vector<AdamHyper> sub;  // indexed like ptrs (ListMeta::index)
    for (size_t i = 0; i < a.params.size(); ++i) {
      if (a.params[i].dtype() != pd || a.grads[i].dtype() != gd) continue;
      ptrs.push_back({a.params[i].data_ptr(), a.grads[i].data_ptr(), a.exp_avgs[i].data_ptr(),
                      a.exp_avg_sqs[i].data_ptr(), master ? a.model_params[i].data_ptr() : nullptr});
      numels.push_back(a.params[i].numel());
      sub.push_back(a.hypers[i]);
    }
    DeviceArray<AdamHyper> hypers(sub, dev);
    dispatch_floating_pair(pd, gd, "multi_tensor_adam", [&](auto pt, auto gt) {
      using T = decltype(pt);
      using G = decltype(gt);
      for_each_launch<5>(ptrs, numels, [&](const ListMeta<5>& m, int blocks) {
        TANDEM_LAUNCH(adam_kernel<T, G>, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream_for(dev), m,
                      static_cast<const AdamHyper*>(hypers.ptr), a.grad_factor, found);
      });
    });
  }
}

void sgd(const kernels::MultiTensorSgdArgs& a) {
  kernels::check_multi_tensor_lists("multi_tensor_sgd", a.params, {&a.grads, &a.momentum_bufs, &a.model_params},
                                    a.hypers.size());
  if (a.params.empty()) return;
  const Device dev = a.params[0].device();
  const float* found = found_ptr(a.found_inf, dev);
  const bool master = !a.model_params.empty(), momentum = !a.momentum_bufs.empty();
  std::vector<std::pair<DType, DType>> kinds;
  for (size_t i = 0; i < a.params.size(); ++i) {
    std::pair<DType, DType> k{a.params[i].dtype(), a.grads[i].dtype()};
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  }
  for (auto [pd, gd] : kinds) {
    std::vector<std::array<void*, 4>> ptrs;
    std::vector<int64_t> numels;
    std::vector<SgdHyper> sub;
    for (size_t i = 0; i < a.params.size(); ++i) {
      if (a.params[i].dtype() != pd || a.grads[i].dtype() != gd) continue;
      ptrs.push_back({a.params[i].data_ptr(), a.grads[i].data_ptr(),
                      momentum ? a.momentum_bufs[i].data_ptr() : nullptr,
                      master ? a.model_params[i].data_ptr() : nullptr});
      numels.push_back(a.params[i].numel());
      sub.push_back(a.hypers[i]);
    }
    DeviceArray<SgdHyper> hypers(sub, dev);
    dispatch_floating_pair(pd, gd, "multi_tensor_sgd", [&](auto pt, auto gt) {
      using T = decltype(pt);
      using G = decltype(gt);
      for_each_launch<4>(ptrs, numels, [&](const ListMeta<4>& m, int blocks) {
        TANDEM_LAUNCH(sgd_kernel<T, G>, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream_for(dev), m,
                      static_cast<const SgdHyper*>(hypers.ptr), a.grad_factor, found);
      });
    });
  }
}

TANDEM_REGISTER_KERNEL(kernels::multi_tensor_zero, kKind, zero);
TANDEM_REGISTER_KERNEL(kernels::multi_tensor_cast, kKind, cast);
TANDEM_REGISTER_KERNEL(kernels::multi_tensor_unscale, kKind, unscale);
TANDEM_REGISTER_KERNEL(kernels::multi_tensor_sum_squares_check, kKind, sum_squares_check);
TANDEM_REGISTER_KERNEL(kernels::multi_tensor_adam, kKind, adam);
TANDEM_REGISTER_KERNEL(kernels::multi_tensor_sgd, kKind, sgd);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
