// The NCCL transport's kernels (comm/nccl/nccl_kernels.cu: the ring's reduce, the average's divide,
// the f16/bf16 <-> f32 casts of its wide accumulation; what ZeRO's reduce_scatter_chunks runs on the
// GPUs) under the SIMT emulator, bit for bit against the same arithmetic on the host. The GPU build
// of the same source runs in test_parallel_ddp_nccl (with a GPU).
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "comm/nccl/nccl_kernels.h"
#include "runtime/ops.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

namespace nk = ::tandem::sim::nccl_kernels;
using comm::ReduceOp;

const Device kSim(DeviceKind::SIM, 0);

template <class T>
constexpr bool kArithmetic = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t> ||
                             std::is_same_v<T, int64_t>;

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  Tensor g = got.to(kCPU);
  ASSERT_EQ(g.dtype(), want.dtype()) << what;
  ASSERT_EQ(g.nbytes(), want.nbytes()) << what;
  EXPECT_EQ(std::memcmp(g.data_ptr(), want.data_ptr(), g.nbytes()), 0) << what;
}

TEST(NcclKernelsSim, ReduceMatchesTheHost) {
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
      for (int64_t n : edge_sizes()) {
        const std::string what = fmt::format("{} {} n={}", dtype_name(dt), comm::reduce_op_name(op), n);
        Tensor a = random_tensor({n}, dt, 1, -100, 100), b = random_tensor({n}, dt, 2, -100, 100);
        Tensor dst = a.to(kSim), src = b.to(kSim);
        nk::reduce(dst.data_ptr(), src.data_ptr(), n, dt, op, nullptr);
        Tensor want = a.clone();
        dispatch(dt, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (kArithmetic<T>) {
            T* w = static_cast<T*>(want.data_ptr());
            const T* y = static_cast<const T*>(b.data_ptr());
            for (int64_t i = 0; i < n; ++i)
              w[i] = op == ReduceOp::Sum ? T(w[i] + y[i]) : op == ReduceOp::Max ? std::max(w[i], y[i]) : std::min(w[i], y[i]);
          }
        });
        expect_same_bits(dst, want, what);
      }
}

TEST(NcclKernelsSim, DivideMatchesTheHost) {
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64})
    for (int divisor : {2, 3, 7})
      for (int64_t n : edge_sizes()) {
        Tensor a = random_tensor({n}, dt, 3, -1000, 1000);
        Tensor buf = a.to(kSim);
        nk::divide(buf.data_ptr(), n, dt, divisor, nullptr);
        // The kernel's T / T, element by element, on the host.
        Tensor want = a.clone();
        dispatch(dt, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (kArithmetic<T>) {
            T* p = static_cast<T*>(want.data_ptr());
            for (int64_t i = 0; i < n; ++i) p[i] = p[i] / static_cast<T>(divisor);
          }
        });
        expect_same_bits(buf, want, fmt::format("{} / {} n={}", dtype_name(dt), divisor, n));
      }
}

TEST(NcclKernelsSim, WidenAndNarrowMatchTheHostCasts) {
  for (DType low : {DType::f16, DType::bf16})
    for (int64_t n : edge_sizes()) {
      const std::string what = fmt::format("{} n={}", dtype_name(low), n);
      Tensor narrow = random_tensor({n}, low, 4, -300, 300);
      Tensor wide = Tensor::zeros({n}, DType::f32, kSim), src = narrow.to(kSim);
      nk::convert(wide.data_ptr(), DType::f32, src.data_ptr(), low, n, nullptr);
      expect_same_bits(wide, ops::cast(narrow, DType::f32), what + " widened");
      // Rounding to nearest even from values between the 16-bit ones.
      Tensor f = random_tensor({n}, DType::f32, 5, -300, 300);
      Tensor back = Tensor::zeros({n}, low, kSim), fs = f.to(kSim);
      nk::convert(back.data_ptr(), low, fs.data_ptr(), DType::f32, n, nullptr);
      expect_same_bits(back, ops::cast(f, low), what + " narrowed");
    }
}

TEST(NcclKernelsSim, RefusesWhatTheRingDoesNotAsk) {
  Tensor a = Tensor::zeros({4}, DType::f16, kSim), b = Tensor::zeros({4}, DType::f16, kSim);
  EXPECT_THROW(nk::reduce(a.data_ptr(), b.data_ptr(), 4, DType::f16, ReduceOp::Sum, nullptr), NotSupportedError);
  EXPECT_THROW(nk::divide(a.data_ptr(), 4, DType::f16, 2, nullptr), NotSupportedError);
  Tensor c = Tensor::zeros({4}, DType::f64, kSim);
  EXPECT_THROW(nk::convert(c.data_ptr(), DType::f64, a.data_ptr(), DType::f16, 4, nullptr), NotSupportedError);
}

}  // namespace
}  // namespace tandem::testing
