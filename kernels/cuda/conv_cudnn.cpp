// conv2d forward / backward_input / backward_weight of DeviceKind::CUDA through cuDNN's convolution
// API (cudnnConvolutionForward / BackwardData / BackwardFilter), built only with TANDEM_CUDA=ON.
// Descriptors and the chosen algorithms are cached per shape, so a steady-state step searches nothing.
// The bias goes through our own broadcast / reduction kernels (every dtype, deterministic): y starts as
// the broadcast bias and the convolution accumulates onto it (beta = 1); db = sum_to(dy).
// TANDEM_CONV=im2col selects the im2col + cuBLAS path of conv.cu instead (for comparison).
#include <cudnn.h>

#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/conv_im2col.h"
#include "runtime/backend/conv.h"
#include "runtime/backend/cuda/check.h"
#include "runtime/env_settings.h"
#include "runtime/backend/reduce.h"

namespace tandem::cuda {
namespace {

using kernels::Conv2dGeometry;

// Algorithms needing more workspace than this are passed over (the pool would have to grow for them).
constexpr size_t kMaxWorkspace = size_t(1) << 30;

// ---- the switch: cuDNN (default) or im2col + cuBLAS. Read once; a test flips it with env::ScopedValue.
bool use_im2col() {
  static const env::Switch conv("TANDEM_CONV");
  return conv.index() == 1;
}
// Algorithms come from cuDNN's heuristics (cudnnGet*_v7) by default: the same choice in every process,
// so reruns and a resumed run give the same bits. TANDEM_CUDNN_SEARCH=benchmark times them instead
// (cudnnFind*, like PyTorch's cudnn.benchmark): sometimes faster, but the winner, and so the
// rounding, can change from one process to the next.
bool heuristic_search() {
  static const env::Switch search("TANDEM_CUDNN_SEARCH");
  return search.index() == 0;
}

// ---- one cuDNN handle per device, bound to the device's stream; calls on it are serialised.
struct HandleSlot {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
};

HandleSlot& slot_for(Device device) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<HandleSlot>> slots;
  std::lock_guard<std::mutex> lock(mutex);
  const size_t i = static_cast<size_t>(device.index);
  if (slots.size() <= i) slots.resize(i + 1);
  if (!slots[i]) slots[i] = std::make_unique<HandleSlot>();
  return *slots[i];
}

// Locks the device's handle for one op, makes the device current and binds the handle to its stream.
class HandleLease {
 public:
  explicit HandleLease(Device device) : slot_(slot_for(device)), lock_(slot_.mutex) {
    Stream stream = stream_for(device);  // makes the device current
    if (!slot_.handle) CUDNN_CHECK(cudnnCreate(&slot_.handle));  // never destroyed: lives to exit
    CUDNN_CHECK(cudnnSetStream(slot_.handle, stream));
  }
  cudnnHandle_t get() const { return slot_.handle; }

 private:
  HandleSlot& slot_;
  std::lock_guard<std::mutex> lock_;
};

// ---- descriptors and algorithms of one (device, dtype, geometry)

cudnnDataType_t cudnn_type(DType dt) {
  switch (dt) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: TANDEM_FAIL(NotSupported, "conv2d on cuda does not support dtype {} (f32, f64, f16, bf16)", dtype_name(dt));
  }
}

int as_int(int64_t v, const char* what) {
  TANDEM_CHECK_KIND(NotSupported, v >= 0 && v <= INT_MAX, "conv2d on cuda: {} = {} does not fit cuDNN's int", what, v);
  return static_cast<int>(v);
}

// Which algorithm one direction uses, and with which math type and workspace.
template <class Algo>
struct Choice {
  bool chosen = false;
  Algo algo{};
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

struct Plan {
  DType dtype = DType::f32;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Choice<cudnnConvolutionFwdAlgo_t> fwd;
  Choice<cudnnConvolutionBwdDataAlgo_t> bwd_data;
  Choice<cudnnConvolutionBwdFilterAlgo_t> bwd_filter;

  Plan(DType dt, const Conv2dGeometry& g) : dtype(dt) {
    const cudnnDataType_t type = cudnn_type(dt);
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, as_int(g.n, "n"), as_int(g.c, "c"),
                                                  as_int(g.h, "h"), as_int(g.w, "w")));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, type, as_int(g.n, "n"), as_int(g.o, "o"),
                                                  as_int(g.ho, "ho"), as_int(g.wo, "wo")));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NCHW, as_int(g.o, "o"), as_int(g.c, "c"),
                                                  as_int(g.kh, "kh"), as_int(g.kw, "kw")));
    // Cross-correlation (what every framework calls convolution); 16-bit data computes in f32.
    const cudnnDataType_t compute = dt == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, as_int(g.ph, "ph"), as_int(g.pw, "pw"),
                                                       as_int(g.sh, "sh"), as_int(g.sw, "sw"), 1, 1,
                                                       CUDNN_CROSS_CORRELATION, compute));
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv, search_math()));
    int n = 0, c = 0, h = 0, wd = 0;  // cuDNN must agree with the geometry ops::conv2d computed
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd));
    TANDEM_CHECK(n == g.n && c == g.o && h == g.ho && wd == g.wo,
                 "conv2d on cuda: cuDNN computes output [{}, {}, {}, {}], the geometry says [{}, {}, {}, {}]", n, c,
                 h, wd, g.n, g.o, g.ho, g.wo);
  }
  ~Plan() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // f16/bf16: tensor cores with f32 accumulation. f32: plain FMA (no TF32), so results stay within
  // f32 rounding of the CPU. f64: the default.
  cudnnMathType_t search_math() const {
    if (is_low_precision(dtype)) return CUDNN_TENSOR_OP_MATH;
    if (dtype == DType::f32) return CUDNN_FMA_MATH;
    return CUDNN_DEFAULT_MATH;
  }
};

// Of the ranked results, the first that ran, fits the workspace cap and is deterministic (so two runs
// of one step give the same bits); failing that, the first that ran and fits.
// f32 keeps FMA math: a result offering tensor-op (TF32) math is passed over.
template <class Perf, class Algo>
Choice<Algo> pick(const Plan& plan, const Perf* perf, int count, const char* direction) {
  const bool fma_only = plan.search_math() == CUDNN_FMA_MATH;
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < count; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC) continue;
      if (fma_only && p.mathType != CUDNN_FMA_MATH && p.mathType != CUDNN_DEFAULT_MATH) continue;
      Choice<Algo> c;
      c.chosen = true;
      c.algo = p.algo;
      c.math = fma_only ? CUDNN_FMA_MATH : p.mathType;
      c.workspace = p.memory;
      return c;
    }
  TANDEM_FAIL(Backend, "conv2d on cuda: cuDNN offers no usable {} algorithm ({} tried); set TANDEM_CONV=im2col",
              direction, count);
}

using PlanKey = std::tuple<int, DType, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t>;

// The cached plan of this shape; created on first use. Plans live until exit.
Plan& plan_for(Device device, DType dt, const Conv2dGeometry& g) {
  static std::mutex mutex;
  static std::map<PlanKey, std::unique_ptr<Plan>> plans;
  const PlanKey key{device.index, dt, g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw};
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Plan>& p = plans[key];
  if (!p) p = std::make_unique<Plan>(dt, g);
  return *p;
}

// The three searches run once per plan, under the device's handle lease (which serialises them).
void choose_forward(cudnnHandle_t h, Plan& p) {
  if (p.fwd.chosen) return;
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  if (heuristic_search())
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
  else
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, p.x, p.w, p.conv, p.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                            &count, perf));
  p.fwd = pick<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(p, perf, count, "forward");
}

void choose_backward_data(cudnnHandle_t h, Plan& p) {
  if (p.bwd_data.chosen) return;
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int count = 0;
  if (heuristic_search())
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv, p.x,
                                                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
  else
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, p.w, p.y, p.conv, p.x,
                                                                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
  p.bwd_data = pick<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(p, perf, count, "backward-data");
}

void choose_backward_filter(cudnnHandle_t h, Plan& p) {
  if (p.bwd_filter.chosen) return;
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int count = 0;
  if (heuristic_search())
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, p.x, p.y, p.conv, p.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
  else
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, p.x, p.y, p.conv, p.w,
                                                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
  p.bwd_filter =
      pick<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(p, perf, count, "backward-filter");
}

// Stream-ordered workspace: allocated and freed on the device's stream around the one call using it.
class Workspace {
 public:
  Workspace(size_t nbytes, Device device) : device_(device), nbytes_(nbytes), ptr_(device_alloc(nbytes, device)) {}
  ~Workspace() { device_free(ptr_, device_); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const { return ptr_; }
  size_t size() const { return nbytes_; }

 private:
  Device device_;
  size_t nbytes_;
  void* ptr_;
};

// alpha / beta as cuDNN reads them: double for double data, float otherwise.
struct Scale {
  explicit Scale(DType dt, double v) : is_double(dt == DType::f64), f(static_cast<float>(v)), d(v) {}
  const void* ptr() const { return is_double ? static_cast<const void*>(&d) : &f; }
  bool is_double;
  float f;
  double d;
};

// cuDNN rejects zero-sized dimensions; those (trivial) cases take the im2col path, which handles them.
bool empty_geometry(const Conv2dGeometry& g) {
  return g.n == 0 || g.c == 0 || g.h == 0 || g.w == 0 || g.o == 0 || g.kh == 0 || g.kw == 0 || g.ho <= 0 || g.wo <= 0;
}

void conv_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2dGeometry& g) {
  if (use_im2col() || empty_geometry(g)) return conv2d_forward_im2col(x, w, b, y, g);
  const Device dev = x.device();
  check_on_device("conv2d", dev, {&x, &w, &b, &y});
  HandleLease h(dev);
  Plan& p = plan_for(dev, x.dtype(), g);
  choose_forward(h.get(), p);
  CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.fwd.math));
  Workspace ws(p.fwd.workspace, dev);
  if (b.defined()) kernels::expand(dev)(b.view({g.o, 1, 1}), y, 1.0);  // y = bias, then y += conv
  const Scale one(x.dtype(), 1.0), beta(x.dtype(), b.defined() ? 1.0 : 0.0);
  CUDNN_CHECK(cudnnConvolutionForward(h.get(), one.ptr(), p.x, x.data_ptr(), p.w, w.data_ptr(), p.conv,
                                             p.fwd.algo, ws.get(), ws.size(), beta.ptr(), p.y, y.data_ptr()));
}

void conv_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dGeometry& g) {
  if (use_im2col() || empty_geometry(g)) return conv2d_backward_input_im2col(dy, w, dx, g);
  const Device dev = dy.device();
  check_on_device("conv2d backward", dev, {&dy, &w, &dx});
  HandleLease h(dev);
  Plan& p = plan_for(dev, dy.dtype(), g);
  choose_backward_data(h.get(), p);
  CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.bwd_data.math));
  Workspace ws(p.bwd_data.workspace, dev);
  const Scale one(dy.dtype(), 1.0), zero(dy.dtype(), 0.0);
  CUDNN_CHECK(cudnnConvolutionBackwardData(h.get(), one.ptr(), p.w, w.data_ptr(), p.y, dy.data_ptr(), p.conv,
                                                  p.bwd_data.algo, ws.get(), ws.size(), zero.ptr(), p.x,
                                                  dx.data_ptr()));
}

void conv_backward_weight(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor& db, const Conv2dGeometry& g) {
  if (use_im2col() || empty_geometry(g)) return conv2d_backward_weight_im2col(x, dy, dw, db, g);
  const Device dev = x.device();
  check_on_device("conv2d backward", dev, {&x, &dy, &dw, &db});
  HandleLease h(dev);
  Plan& p = plan_for(dev, x.dtype(), g);
  choose_backward_filter(h.get(), p);
  CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.bwd_filter.math));
  Workspace ws(p.bwd_filter.workspace, dev);
  const Scale one(x.dtype(), 1.0), zero(x.dtype(), 0.0);
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(h.get(), one.ptr(), p.x, x.data_ptr(), p.y, dy.data_ptr(), p.conv,
                                                    p.bwd_filter.algo, ws.get(), ws.size(), zero.ptr(), p.w,
                                                    dw.data_ptr()));
  if (db.defined()) {
    Tensor db2 = db.view({g.o, 1});
    kernels::sum_to(dev)(dy.view({g.n, g.o, g.ho * g.wo}), db2, 1.0);
  }
}

TANDEM_REGISTER_KERNEL(kernels::conv2d_forward, DeviceKind::CUDA, conv_forward);
TANDEM_REGISTER_KERNEL(kernels::conv2d_backward_input, DeviceKind::CUDA, conv_backward_input);
TANDEM_REGISTER_KERNEL(kernels::conv2d_backward_weight, DeviceKind::CUDA, conv_backward_weight);

}  // namespace
}  // namespace tandem::cuda
