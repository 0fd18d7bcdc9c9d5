// permute and copy_block on the CUDA backend vs the CPU, bit for bit.
#include "runtime/backend/core.h"
#include "runtime/backend/shape.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class ShapeOps : public BackendTest {};

TEST_P(ShapeOps, PermuteAndCopyBlockMatchCpuExactly) {
  struct Case { Shape s; std::vector<int64_t> perm; };
  for (DType dt : {DType::f32, DType::f16, DType::i64, DType::u8})
    for (const Case& c : {Case{{}, {}}, Case{{0, 3}, {1, 0}}, Case{{1}, {0}}, Case{{7, 33}, {1, 0}},
                          Case{{2, 3, 5, 7}, {3, 1, 0, 2}}, Case{{33, 1, 9}, {2, 0, 1}},
                          // the last dim stays last: moved in packs of up to 16 bytes (odd: one at a time)
                          Case{{2, 3, 4, 16}, {2, 0, 1, 3}}, Case{{3, 5, 2}, {1, 0, 2}}, Case{{4, 6, 3}, {1, 0, 2}},
                          Case{{2, 7, 3, 64}, {2, 0, 1, 3}}}) {
      Tensor src = random_tensor(c.s, dt, 71, 0, 100);
      Shape out_shape;
      for (int64_t p : c.perm) out_shape.push_back(c.s[static_cast<size_t>(p)]);
      Tensor want = Tensor::empty(out_shape, dt), got = Tensor::empty(out_shape, dt, dev());
      kernels::permute(kCPU)(src, want, c.perm);
      kernels::permute(dev())(src.to(dev()), got, c.perm);
      expect_close(got, want, 0, std::string(dtype_name(dt)) + " permute " + shape_str(c.s));
    }
  Tensor src = random_tensor({5, 9}, DType::f32, 72);
  Tensor want = Tensor::zeros({5, 20}), got = Tensor::zeros({5, 20}, DType::f32, dev());
  kernels::copy_block(kCPU)(src, 2, 9, want, 3, 20, 5, 7);
  kernels::copy_block(dev())(src.to(dev()), 2, 9, got, 3, 20, 5, 7);
  expect_close(got, want, 0, "copy_block");
}

// A permute whose rows could go 16 bytes at a time but whose pointers are not aligned for it (views
// one element into their allocations) moves narrower elements and gives the same bits.
TEST_P(ShapeOps, PermuteOfMisalignedViewsMatchesCpu) {
  const Shape s{3, 4, 16};
  const std::vector<int64_t> perm{1, 0, 2};
  for (DType dt : {DType::f16, DType::f32}) {
    Tensor src = random_tensor(s, dt, 73, 0, 100), want = Tensor::empty({4, 3, 16}, dt);
    kernels::permute(kCPU)(src, want, perm);
    Tensor src_mem = Tensor::empty({shape_numel(s) + 1}, dt, dev()), dst_mem = Tensor::empty({shape_numel(s) + 1}, dt, dev());
    auto view = [&](Tensor& mem, const Shape& shape) {
      return Tensor::from_blob(static_cast<char*>(mem.data_ptr()) + mem.element_size(), shape, dt, dev(), nullptr);
    };
    Tensor src_view = view(src_mem, s), got = view(dst_mem, {4, 3, 16});
    kernels::copy(dev())(src, src_view);
    kernels::permute(dev())(src_view, got, perm);
    expect_close(got.to(kCPU), want, 0, std::string(dtype_name(dt)) + " misaligned permute");
  }
}

TANDEM_BACKEND_SUITE(ShapeOps);

}  // namespace
}  // namespace tandem::testing
