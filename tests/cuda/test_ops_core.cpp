// fill, copy, cast, axpy and the allocator on the CUDA backend vs the CPU backend.
#include "runtime/backend/core.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class CoreOps : public BackendTest {};

TEST_P(CoreOps, CopyRoundTripsEveryDtypeAndSize) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8})
    for (int64_t n : edge_sizes()) {
      Tensor host = random_tensor({n}, dt, 1, 0, 100);
      Tensor d = host.to(dev());
      EXPECT_EQ(d.device(), dev());
      Tensor d2 = d.clone();
      expect_close(d2.to(kCPU), host, 0, std::string(dtype_name(dt)) + " n=" + std::to_string(n));
    }
}

// Host -> device copies go through a ring of pinned staging slots (2 MB each, 8 of them): copies
// larger than a slot, larger than the whole ring, and more small copies than there are slots queued
// back to back, all read back afterwards.
TEST_P(CoreOps, HostCopiesThroughTheStagingRingRoundTrip) {
  std::vector<Tensor> host, on_device;
  // f32: 6 MiB (three slots), 36 MiB and 20 bytes (more than the ring), then small ones.
  for (int64_t n : {int64_t(3) << 19, (int64_t(9) << 20) + 5, int64_t(1), int64_t(1000)})
    host.push_back(random_tensor({n}, DType::f32, static_cast<uint32_t>(n), -100, 100));
  for (int i = 0; i < 12; ++i) host.push_back(random_tensor({4096 + i}, DType::f32, 100 + i, -100, 100));
  for (const Tensor& h : host) on_device.push_back(h.to(dev()));
  for (size_t i = 0; i < host.size(); ++i) expect_close(on_device[i].to(kCPU), host[i], 0, "copy " + std::to_string(i));
}

TEST_P(CoreOps, FillMatchesCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8})
    for (int64_t n : edge_sizes()) {
      Tensor d = Tensor::full({n}, 3.14159, dt, dev());
      expect_close(d, Tensor::full({n}, 3.14159, dt), 0, dtype_name(dt));
    }
}

TEST_P(CoreOps, CastMatchesCpuForEveryDtypePair) {
  const std::vector<DType> all{DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8};
  for (DType from : all)
    for (DType to : all)
      for (int64_t n : {0, 1, 33, 1000}) {
        Tensor host = random_tensor({n}, from, 7, 0, 200);
        Tensor want = Tensor::empty({n}, to);
        want.copy_(host);
        Tensor got = Tensor::empty({n}, to, dev());
        got.copy_(host.to(dev()));  // converts on the device
        expect_close(got, want, 0, std::string(dtype_name(from)) + "->" + dtype_name(to));
      }
}

TEST_P(CoreOps, AxpyMatchesCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32})
    for (int64_t n : edge_sizes()) {
      Tensor a = random_tensor({n}, dt, 3), b = random_tensor({n}, dt, 4);
      Tensor da = a.to(dev()), db = b.to(dev());
      kernels::axpy(kCPU)(a, b, 0.75);
      kernels::axpy(dev())(da, db, 0.75);
      expect_close(da, a, tol(0, ulps(dt)), dtype_name(dt));
    }
}

// A 16-bit gradient added to a wider one (autocast's parameters): each element widened exactly, the
// sum in the destination's type; on the CPU against adding the widened copy.
TEST_P(CoreOps, AxpyWidensANarrowerSource) {
  for (DType narrow : {DType::f16, DType::bf16, DType::f32})
    for (DType wide : {DType::f32, DType::f64})
      for (int64_t n : edge_sizes()) {
        if (narrow == wide) continue;
        SCOPED_TRACE(std::string(dtype_name(narrow)) + " into " + dtype_name(wide));
        Tensor a = random_tensor({n}, wide, 3), b = random_tensor({n}, narrow, 4);
        Tensor widened = Tensor::empty({n}, wide);
        widened.copy_(b);
        Tensor want = a.clone();
        kernels::axpy(kCPU)(want, widened, 0.75);
        Tensor cpu = a.clone();
        kernels::axpy(kCPU)(cpu, b, 0.75);
        expect_close(cpu, want, 0, "cpu");
        Tensor da = a.to(dev());
        kernels::axpy(dev())(da, b.to(dev()), 0.75);
        expect_close(da, want, tol(0, ulps(wide)), "device");
      }
  Tensor i = Tensor::zeros({4}, DType::i32, dev()), f = Tensor::zeros({4}, DType::f32, dev());
  EXPECT_THROW(kernels::axpy(dev())(f, i, 1.0), Error) << "an integer source is not widened";
  EXPECT_THROW(kernels::axpy(kCPU)(f, Tensor::zeros({5}), 1.0), Error) << "numel differs";
}

// out = a + alpha * src into another tensor (the residual stream plus a 16-bit branch): axpy's values,
// a and src untouched; misaligned views take the one-element path.
TEST_P(CoreOps, AxpyOutEqualsAxpyOnACopy) {
  for (auto [wide, narrow] : {std::pair{DType::f32, DType::bf16}, std::pair{DType::f32, DType::f16},
                              std::pair{DType::f32, DType::f32}, std::pair{DType::f64, DType::f32}})
    for (int64_t n : edge_sizes())
      for (int64_t offset : {0, 1}) {
        SCOPED_TRACE(std::string(dtype_name(narrow)) + " into " + dtype_name(wide) + " n " + std::to_string(n) +
                     " offset " + std::to_string(offset));
        Tensor a = random_tensor({n + offset}, wide, 5), b = random_tensor({n + offset}, narrow, 6);
        Tensor want = a.clone();
        kernels::axpy(kCPU)(want, b, -0.5);
        Tensor cpu = Tensor::empty({n + offset}, wide);
        kernels::axpy_out(kCPU)(a, b, -0.5, cpu);
        expect_close(cpu, want, 0, "cpu");
        Tensor da = a.to(dev()), db = b.to(dev()), dout = Tensor::zeros({n + offset}, wide, dev());
        const auto tail = [&](const Tensor& t) {  // elements [offset, n + offset): a view
          return Tensor::from_blob(static_cast<char*>(t.data_ptr()) + offset * t.element_size(), {n}, t.dtype(),
                                   t.device(), nullptr);
        };
        Tensor vo = tail(dout);
        kernels::axpy_out(dev())(tail(da), tail(db), -0.5, vo);
        std::vector<double> got = dout.to(kCPU).to_vector<double>(), exp = want.to_vector<double>();
        if (offset) exp[0] = 0;  // outside the view: untouched
        expect_close(Tensor::from_vector(got, {n + offset}, DType::f64), Tensor::from_vector(exp, {n + offset}, DType::f64),
                     tol(0, ulps(wide)), "device");
        expect_close(da, a, 0, "a untouched");
      }
  Tensor f = Tensor::zeros({4}, DType::f32, dev()), d = Tensor::zeros({4}, DType::f64, dev());
  EXPECT_THROW(kernels::axpy_out(dev())(d, f, 1.0, f), Error) << "a's dtype differs from out's";
  Tensor four = Tensor::zeros({4});
  EXPECT_THROW(kernels::axpy_out(kCPU)(Tensor::zeros({5}), Tensor::zeros({4}), 1.0, four), Error) << "a's numel differs";
}

TEST_P(CoreOps, DeviceMemoryIsNotHostMemoryOnCuda) {
  Tensor t = Tensor::zeros({5}, DType::f32, dev());
  EXPECT_EQ(t.device().is_host_addressable(), emulated());
}

TEST(CudaDiscovery, ReportsCleanlyWithoutADevice) {
  int n = cuda::device_count();
  EXPECT_GE(n, 0);
  std::string d = cuda::describe();
  if (n == 0) {
    EXPECT_NE(d.find("no CUDA device"), std::string::npos) << d;
    EXPECT_EQ(cuda::default_device(), kCPU);
    EXPECT_THROW(cuda::default_device(true), NotSupportedError);
  } else {
    EXPECT_EQ(cuda::default_device().kind, DeviceKind::CUDA);
  }
}

TANDEM_BACKEND_SUITE(CoreOps);

}  // namespace
}  // namespace tandem::testing
