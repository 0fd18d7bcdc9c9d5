// GEMM for the CUDA backend: cuBLAS strided-batched GEMM (tensor-op math for f16/bf16, f32
// accumulation) on the device's stream. A GEMM with an epilogue (bias, GELU, a bias gradient, GELU's
// backward; see GemmArgs) runs as one cuBLASLt matmul with the matching fused epilogue (GELU's
// backward with its column sums: the matmul with DGELU, then our sums; see gemm); where
// cuBLASLt has no algorithm for the case, the product and then our epilogue kernels below.
// TANDEM_GEMM_SEARCH=benchmark runs every product of batch 1 through cuBLASLt with an algorithm
// timed among the heuristic's candidates (search_way). Under the emulator the CPU GEMM stands in for
// cuBLAS and the epilogue kernels run after it.
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gelu.cuh"
#include "runtime/env_settings.h"
#include "runtime/backend/gemm.h"
#ifndef TANDEM_SIMT_EMULATOR
#include "kernels/cuda/cublas_loader.h"
#include "kernels/cuda/gemm_search.h"
#include "runtime/backend/cuda/check.h"

#include <array>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#endif

namespace tandem::TANDEM_CUDA_NS {
namespace {

void check_args(const kernels::GemmArgs& a) {
  TANDEM_CHECK(a.m >= 0 && a.n >= 0 && a.k >= 0 && a.batch >= 0, "gemm: negative size m={} n={} k={} batch={}",
               a.m, a.n, a.k, a.batch);
  TANDEM_CHECK(is_floating(a.dtype), "gemm does not support dtype {}", dtype_name(a.dtype));
  kernels::check_gemm_epilogue(a);
}

// ---- The epilogue as kernels of its own (the emulator; cases cuBLASLt does not fuse) ----

// C[i, j] (+ bias[j]) -> pre[i, j] -> gelu, on C as the product left it (rounded to T, as the CPU).
template <class T>
__global__ void epilogue_kernel(T* __restrict__ c, int64_t ldc, int64_t m, int64_t n, const T* __restrict__ bias,
                                T* __restrict__ pre, bool gelu) {
  for (int64_t e = global_thread(); e < m * n; e += grid_threads()) {
    const int64_t i = e / n, j = e % n, at = i * ldc + j;
    acc_t<T> v = to_acc(c[at]);
    if (bias) v += to_acc(bias[j]);
    if (pre) pre[at] = from_acc<T>(v);
    if (gelu) v = gelu_tanh(v);
    c[at] = from_acc<T>(v);
  }
}

// sums[i] = sum over p < k of op(A)[i, p], or (add) sums[i] plus that: a thread per row of op(A)
// (consecutive threads read consecutive elements when A is stored transposed, the bias-gradient
// case). Out is T, or acc_t<T> (GemmArgs::sums_add).
template <class T, class Out>
__global__ void a_row_sums_kernel(const T* __restrict__ a, int64_t lda, bool trans_a, int64_t m, int64_t k,
                                  Out* __restrict__ sums, bool add) {
  for (int64_t i = global_thread(); i < m; i += grid_threads()) {
    acc_t<T> s = 0;
    for (int64_t p = 0; p < k; ++p) s += to_acc(trans_a ? a[p * lda + i] : a[i * lda + p]);
    sums[i] = add ? from_acc<Out>(to_acc(sums[i]) + s) : from_acc<Out>(s);
  }
}

// C[i, j] = C[i, j] * gelu'(pre[i, j]), on C as the product left it (rounded to T, as the CPU).
template <class T>
__global__ void dgelu_kernel(T* __restrict__ c, int64_t ldc, int64_t m, int64_t n, const T* __restrict__ pre) {
  for (int64_t e = global_thread(); e < m * n; e += grid_threads()) {
    const int64_t i = e / n, j = e % n, at = i * ldc + j;
    c[at] = from_acc<T>(gelu_tanh_grad(to_acc(c[at]), to_acc(pre[at])));
  }
}

// GELU's backward on C in place and the column sums of its result, in one pass over C and pre: the
// values are dgelu_kernel's (rounded to T) and they are summed as rounded, as the CPU sums them.
template <class T>
struct DGeluColumnSum {
  T* c;
  const T* pre;
  int64_t cols;  // C is dense (check_gemm_epilogue: c_col_sums needs ldc == n)
  __device__ __forceinline__ sum_acc_t<T> operator()(int64_t m, int64_t j) const {
    const int64_t at = m * cols + j;
    const T v = from_acc<T>(gelu_tanh_grad(to_acc(c[at]), to_acc(pre[at])));
    c[at] = v;
    return static_cast<sum_acc_t<T>>(to_acc(v));
  }
};

// The epilogue on C after the product (a.has_epilogue()).
void run_epilogue_kernels(Device device, const kernels::GemmArgs& a) {
  dispatch_floating(a.dtype, "gemm epilogue", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_type_v<T>) {
      if (a.a_row_sums) {
        if (a.m == 0) return;
        if (a.trans_a && a.lda == a.m && a.k > 0) {  // op(A) = A^T of a dense [k, m]: its column sums
          launch_epilogue_sums<T>(device, ColumnSumOf<T>{static_cast<const T*>(a.a), a.m}, a.k, a.m, a.a_row_sums,
                                  a.sums_add);
        } else {
          with_epilogue_sums_out<T>(a.a_row_sums, a.sums_add, [&](auto* out) {
            TANDEM_LAUNCH((a_row_sums_kernel<T, std::remove_pointer_t<decltype(out)>>), grid_for(a.m, kBlock), kBlock,
                          0, stream_for(device), static_cast<const T*>(a.a), a.lda, a.trans_a, a.m, a.k, out,
                          a.sums_add);
          });
        }
      } else if (a.dgelu_pre) {
        if (a.n == 0) return;
        if (a.m == 0) {  // no rows: the sums are zeros (nothing to add)
          if (a.c_col_sums && !a.sums_add)
            TANDEM_LAUNCH(fill_kernel<T>, grid_for(a.n, kBlock), kBlock, 0, stream_for(device),
                          static_cast<T*>(a.c_col_sums), a.n, from_acc<T>(acc_t<T>(0)));
          return;
        }
        if (a.c_col_sums)
          launch_epilogue_sums<T>(device,
                                  DGeluColumnSum<T>{static_cast<T*>(a.c), static_cast<const T*>(a.dgelu_pre), a.n},
                                  a.m, a.n, a.c_col_sums, a.sums_add);
        else
          TANDEM_LAUNCH(dgelu_kernel<T>, grid_for(a.m * a.n, kBlock), kBlock, 0, stream_for(device),
                        static_cast<T*>(a.c), a.ldc, a.m, a.n, static_cast<const T*>(a.dgelu_pre));
      } else if (a.m * a.n > 0) {
        TANDEM_LAUNCH(epilogue_kernel<T>, grid_for(a.m * a.n, kBlock), kBlock, 0, stream_for(device),
                      static_cast<T*>(a.c), a.ldc, a.m, a.n, static_cast<const T*>(a.bias), static_cast<T*>(a.pre),
                      a.gelu);
      }
    }
  });
}

kernels::GemmArgs product_only(const kernels::GemmArgs& a) {
  kernels::GemmArgs p = a;
  p.bias = p.dgelu_pre = nullptr;
  p.pre = p.a_row_sums = p.c_col_sums = nullptr;
  p.gelu = false;
  return p;
}

#ifdef TANDEM_SIMT_EMULATOR

void gemm(Device device, const kernels::GemmArgs& args) {
  TANDEM_CHECK(device.kind == kKind, "gemm: expected a sim device, got {}", device.str());
  check_args(args);
  kernels::gemm(kCPU)(kCPU, product_only(args));  // sim memory is host memory
  if (args.has_epilogue()) run_epilogue_kernels(device, args);
}

#else

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f64: return CUDA_R_64F;
    default: TANDEM_FAIL(NotSupported, "gemm does not support dtype {}", dtype_name(dtype));
  }
}

// C's type: A's and B's, or f32 for wide_c (bf16/f16 operands, f32 output: a cuBLAS-listed pairing).
cudaDataType_t c_cuda_type(const kernels::GemmArgs& a) { return a.wide_c ? CUDA_R_32F : cuda_type(a.dtype); }

// alpha and beta in the scale type (f64 for f64 GEMMs, f32 otherwise), as the host pointers cuBLAS
// and cuBLASLt read.
struct Scales {
  explicit Scales(const kernels::GemmArgs& a)
      : f64(a.dtype == DType::f64), a32(static_cast<float>(a.alpha)), b32(static_cast<float>(a.beta)),
        a64(a.alpha), b64(a.beta) {}
  const void* alpha() const { return f64 ? static_cast<const void*>(&a64) : &a32; }
  const void* beta() const { return f64 ? static_cast<const void*>(&b64) : &b32; }
  bool f64;
  float a32, b32;
  double a64, b64;
};

cublasHandle_t handle_for(Device device) {
  static std::mutex mutex;
  static std::vector<cublasHandle_t> handles;
  Stream stream = stream_for(device);  // makes the device current
  std::lock_guard<std::mutex> lock(mutex);
  if (handles.size() <= static_cast<size_t>(device.index)) handles.resize(static_cast<size_t>(device.index) + 1, nullptr);
  cublasHandle_t& h = handles[static_cast<size_t>(device.index)];
  if (!h) {
    CUBLAS_CHECK(cuda::cublas().create(&h));
    CUBLAS_CHECK(cuda::cublas().set_math_mode(h, CUBLAS_DEFAULT_MATH));
  }
  CUBLAS_CHECK(cuda::cublas().set_stream(h, stream));
  return h;
}

// cuBLAS's classic API takes int sizes (its strides are long long): a larger one is an error, never
// a wrapped size. A GPT-2 step's largest is B*T = 65536 rows; this takes 2^31.
int cublas_int(int64_t v, const char* what) {
  TANDEM_CHECK_KIND(NotSupported, v <= INT_MAX, "GEMM on cuda: {} = {} does not fit cuBLAS's int", what, v);
  return static_cast<int>(v);
}

void cublas_product(Device device, const kernels::GemmArgs& a) {
  if (a.m == 0 || a.n == 0 || a.batch == 0) return;
  const int m = cublas_int(a.m, "m"), n = cublas_int(a.n, "n"), k = cublas_int(a.k, "k");
  const int lda = cublas_int(a.lda, "lda"), ldb = cublas_int(a.ldb, "ldb"), ldc = cublas_int(a.ldc, "ldc");
  const int batch = cublas_int(a.batch, "batch");
  cublasHandle_t h = handle_for(device);
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  cublasOperation_t op_a = a.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = a.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t type = cuda_type(a.dtype), c_type = c_cuda_type(a);
  const cublasComputeType_t compute = a.dtype == DType::f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const Scales scales(a);
  CUBLAS_CHECK(cuda::cublas().gemm_strided_batched_ex(h, op_b, op_a, n, m, k, scales.alpha(), a.b, type, ldb,
                                                      a.stride_b, a.a, type, lda, a.stride_a, scales.beta(), a.c,
                                                      c_type, ldc, a.stride_c, batch, compute, CUBLAS_GEMM_DEFAULT));
}

// ---- cuBLASLt: one matmul with the epilogue fused ----

constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;  // what cuBLAS asks for on Hopper

// How a GEMM's algorithm is chosen; TANDEM_GEMM_SEARCH, read once:
//   "heuristic" (default): cuBLAS's own choice for a product, cuBLASLt's heuristic's first answer for
//     a product with an epilogue: the same algorithm in every process, so reruns give the same bits;
//   "benchmark": every product of batch 1 runs through cuBLASLt (one without an epilogue too), and the
//     first call of each shape times up to kSearchCandidates of the heuristic's answers on the device
//     and keeps the fastest for the process (as TANDEM_CUDNN_SEARCH=benchmark does for convolutions:
//     faster where the heuristic's first guess is not the best, but the winner, and so the rounding,
//     can change from one process to the next; DDP's ranks still end every step with the same weights,
//     their gradients being reduced);
//   "benchmark-verbose": the same, each search's result on a line to stderr.
enum class Search { Heuristic, Benchmark, BenchmarkVerbose };  // in the order of the values in env_settings.cpp
Search search_way() {
  static const auto way = static_cast<Search>(env::choice("TANDEM_GEMM_SEARCH"));
  return way;
}
constexpr int kSearchCandidates = 16;

// Descriptors and the heuristic's algorithm for one GEMM shape, made once and kept for the process.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool supported = false;  // false: cuBLASLt has no algorithm for it; the fallback runs
};

struct LtDevice {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<std::array<int64_t, 16>, LtPlan> plans;
};

// The largest power of two (at most 16) dividing p's address: cuBLASLt picks algorithms by it.
int64_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  for (int64_t b = 16; b > 1; b /= 2)
    if (v % static_cast<uintptr_t>(b) == 0) return b;
  return 1;
}

cublasLtEpilogue_t lt_epilogue(const kernels::GemmArgs& a) {
  if (!a.has_epilogue()) return CUBLASLT_EPILOGUE_DEFAULT;  // a searched plain product
  if (a.a_row_sums) return CUBLASLT_EPILOGUE_BGRADB;  // our op(A) is cuBLAS's B (the operands swap)
  // Our C [m, n] is cuBLAS's D [n, m]: its bias gradient (over D's columns) is our column sums.
  if (a.dgelu_pre) return CUBLASLT_EPILOGUE_DGELU;  // its column sums are ours (gemm), never DGELU_BGRAD
  if (a.gelu) {
    if (a.pre) return a.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    return a.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  }
  return CUBLASLT_EPILOGUE_BIAS;
}

template <class V>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
  CUBLAS_CHECK(cuda::cublaslt().desc_set(desc, attr, &value, sizeof(value)));
}

// The epilogue's vector (bias, or a bias gradient it writes) and its [m, n] auxiliary matrix (GELU's
// input: written by the forward, read by the backward).
const void* epilogue_vector(const kernels::GemmArgs& a) {
  return a.a_row_sums ? a.a_row_sums : a.c_col_sums ? a.c_col_sums : a.bias;
}
const void* epilogue_aux(const kernels::GemmArgs& a) { return a.pre ? a.pre : a.dgelu_pre; }

// The per-call pointers of the epilogue (the plan's descriptor is reused across calls).
void set_epilogue_pointers(cublasLtMatmulDesc_t desc, const kernels::GemmArgs& a) {
  if (const void* vector = epilogue_vector(a)) set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vector);
  if (const void* aux = epilogue_aux(a)) set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
}

// Whether the matmul reads C where it writes D: beta != 0, or C is also one of its inputs. A search
// then times into scratch memory, not into C.
bool reads_c(const kernels::GemmArgs& a) {
  const void* c = a.c;
  return a.beta != 0 || c == a.a || c == a.b || c == a.dgelu_pre || c == a.bias;
}

// The shape as the search's verbose line names it.
std::string describe(const kernels::GemmArgs& a) {
  return std::string(dtype_name(a.dtype)) + (a.wide_c ? "->f32" : "") + " m=" + std::to_string(a.m) +
         " n=" + std::to_string(a.n) + " k=" + std::to_string(a.k) + (a.trans_a ? " A^T" : "") +
         (a.trans_b ? " B^T" : "") + " epilogue=" + std::to_string(static_cast<int>(lt_epilogue(a))) +
         (a.beta != 0 ? " beta=" + std::to_string(a.beta) : "");
}

LtPlan make_plan(const LtDevice& dev, const kernels::GemmArgs& a, Device device, Stream stream) {
  const CublasLtApi& lt = cuda::cublaslt();
  const cudaDataType_t type = cuda_type(a.dtype);
  const bool f64 = a.dtype == DType::f64;
  LtPlan plan;
  CUBLAS_CHECK(lt.desc_create(&plan.desc, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, f64 ? CUDA_R_64F : CUDA_R_32F));
  // Column-major, operands swapped (see cublas_product): cuBLAS's A is our B, its B our A.
  const int32_t trans_a = a.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_b = a.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, trans_a);
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, trans_b);
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(lt_epilogue(a)));
  if (epilogue_vector(a)) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(type));
  if (epilogue_aux(a)) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<int64_t>(a.ldc));
  set_epilogue_pointers(plan.desc, a);  // the heuristic reads their alignment
  // Stored shapes, column-major: our B [k, n] (or [n, k]) is [n, k] (or [k, n]); our A likewise.
  const uint64_t m = static_cast<uint64_t>(a.m), n = static_cast<uint64_t>(a.n), k = static_cast<uint64_t>(a.k);
  CUBLAS_CHECK(lt.layout_create(&plan.a, type, a.trans_b ? k : n, a.trans_b ? n : k, a.ldb));
  CUBLAS_CHECK(lt.layout_create(&plan.b, type, a.trans_a ? m : k, a.trans_a ? k : m, a.lda));
  CUBLAS_CHECK(lt.layout_create(&plan.c, c_cuda_type(a), n, m, a.ldc));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(lt.preference_create(&pref));
  const uint64_t workspace = kLtWorkspaceBytes;
  CUBLAS_CHECK(lt.preference_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  const Search way = search_way();
  std::array<cublasLtMatmulHeuristicResult_t, kSearchCandidates> results{};
  int found = 0;
  // No algorithm (NOT_SUPPORTED, or none returned) is an answer, not an error: the fallback runs.
  const cublasStatus_t status = lt.heuristic(dev.handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                                             way == Search::Heuristic ? 1 : kSearchCandidates, results.data(), &found);
  CUBLAS_CHECK(lt.preference_destroy(pref));
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(status);
  plan.supported = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (!plan.supported) return plan;
  int chosen = 0;
  if (way != Search::Heuristic && found > 1) {
    const Scales scales(a);
    const LtMatmulCall call{dev.handle, plan.desc, scales.alpha(), a.b, plan.a, a.a, plan.b, scales.beta(),
                            a.c, plan.c, dev.workspace, kLtWorkspaceBytes, stream};
    const size_t c_bytes =
        reads_c(a) ? static_cast<size_t>(a.m * a.ldc) * (a.wide_c ? sizeof(float) : dtype_size(a.dtype)) : 0;
    chosen = fastest_candidate(call, results.data(), found, c_bytes, device, way == Search::BenchmarkVerbose,
                               describe(a));
  }
  plan.algo = results[static_cast<size_t>(chosen)].algo;
  return plan;
}

// Runs the GEMM with its epilogue through cuBLASLt; false when cuBLASLt has no algorithm for it.
bool lt_gemm(Device device, const kernels::GemmArgs& a) {
  // GELU's stored input needs a leading dimension that is a multiple of 8 (cuBLASLt's rule). f64
  // stays on our kernels: cuBLASLt's f64 GELU differs from tanh's by ~1e-10 (seen on an H200).
  if ((epilogue_aux(a) && a.ldc % 8 != 0) || a.dtype == DType::f64) return false;
  static std::mutex mutex;
  static std::vector<LtDevice> devices;
  Stream stream = stream_for(device);  // makes the device current
  std::lock_guard<std::mutex> lock(mutex);
  if (devices.size() <= static_cast<size_t>(device.index)) devices.resize(static_cast<size_t>(device.index) + 1);
  LtDevice& dev = devices[static_cast<size_t>(device.index)];
  if (!dev.handle) {
    CUBLAS_CHECK(cuda::cublaslt().create(&dev.handle));
    dev.workspace = device_alloc(kLtWorkspaceBytes, device);  // kept for the process
  }
  const std::array<int64_t, 16> key{static_cast<int64_t>(a.dtype), a.wide_c, a.trans_a, a.trans_b, a.m, a.n, a.k,
                                    a.lda, a.ldb, a.ldc, static_cast<int64_t>(lt_epilogue(a)), alignment(a.a),
                                    alignment(a.b), alignment(a.c), alignment(epilogue_vector(a)),
                                    alignment(epilogue_aux(a))};
  auto it = dev.plans.find(key);
  if (it == dev.plans.end()) it = dev.plans.emplace(key, make_plan(dev, a, device, stream)).first;
  const LtPlan& plan = it->second;
  if (!plan.supported) return false;
  set_epilogue_pointers(plan.desc, a);
  const Scales scales(a);
  CUBLAS_CHECK(cuda::cublaslt().matmul(dev.handle, plan.desc, scales.alpha(), a.b, plan.a, a.a, plan.b, scales.beta(),
                                       a.c, plan.c, a.c, plan.c, &plan.algo, dev.workspace, kLtWorkspaceBytes, stream));
  return true;
}

// GELU's backward with its column sums (the MLP's c_fc bias gradient; [8192, 3072] in each of GPT-2
// 124M's 12 layers at batch 8): cuBLASLt's DGELU epilogue in the product, then our column sums of
// the result; where cuBLASLt has no algorithm, cuBLAS's product and then DGeluColumnSum's one pass.
// GPT-2 124M bf16 steps at batch 8 / 16 (docs/transformers.md, 2026-11-27): on an H100 22.3 / 39.6
// ms, the fallback forced 22.5 / 40.4, cuBLASLt's DGELU_BGRAD (its sums a kernel of their own at
// ~0.18 ms a layer) 23.4 / 41.9; on an H200 19.8 / 35.6, 19.9 / 36.7, 20.9 / 37.9. The switch that
// kept the other two ways (TANDEM_GEMM_DGELU) is retired.

// A product without an epilogue: cuBLAS's, or with the search on (batch 1) a searched cuBLASLt matmul
// (cuBLAS where cuBLASLt has no algorithm for it).
void product(Device device, const kernels::GemmArgs& a) {
  if (search_way() != Search::Heuristic && a.batch == 1 && a.m > 0 && a.n > 0 && a.k > 0 && lt_gemm(device, a)) return;
  cublas_product(device, a);
}

void gemm(Device device, const kernels::GemmArgs& a) {
  TANDEM_CHECK(device.kind == kKind, "gemm: expected a cuda device, got {}", device.str());
  check_args(a);
  if (!a.has_epilogue()) return product(device, a);
  if (a.m == 0 && a.c_col_sums) return run_epilogue_kernels(device, a);  // the sums of no rows: zeros
  if (a.m == 0 || (a.n == 0 && !a.a_row_sums)) return;
  const bool can_lt = a.n > 0 && a.k > 0;
  // cuBLASLt's bias-gradient epilogues write the operands' dtype: sums added into an f32 .grad
  // (sums_add) are ours.
  if (a.dgelu_pre && a.c_col_sums) {
    // GELU's backward by cuBLASLt, the column sums by us; else both after the product.
    kernels::GemmArgs dgelu = a;
    dgelu.c_col_sums = nullptr;
    if (can_lt && lt_gemm(device, dgelu)) {
      dispatch_floating(a.dtype, "gemm dgelu sums", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (is_floating_type_v<T>)
          launch_epilogue_sums<T>(device, ColumnSumOf<T>{static_cast<const T*>(a.c), a.n}, a.m, a.n, a.c_col_sums,
                                  a.sums_add);
      });
      return;
    }
  } else if (!(a.wide_c && a.a_row_sums) && !a.sums_add && can_lt && lt_gemm(device, a)) {
    // wide_c (an f32 C beside 16-bit operands, a weight gradient into .grad) with a bias gradient
    // stays off cuBLASLt: the product by cuBLAS and the sums by our column sums (as fast as
    // cuBLASLt's BGRADB kernel on an H100), not a cuBLASLt epilogue beside an f32 C, which is not a
    // combination to count on.
    return;
  }
  product(device, product_only(a));
  run_epilogue_kernels(device, a);
}

#endif

TANDEM_REGISTER_KERNEL(kernels::gemm, kKind, gemm);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
