// softmax/log_softmax and cross-entropy on the CUDA backend vs the CPU.
#include <cmath>
#include <limits>
#include <optional>

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/backend/loss.h"
#include "runtime/ops.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class LossOps : public BackendTest {};

TEST_P(LossOps, SoftmaxForwardBackwardMatchCpu) {
  struct Case { int64_t outer, n, inner; };
  for (DType dt : {DType::f32, DType::f64, DType::bf16})
    for (bool log : {false, true})
      for (Case c : {Case{1, 1, 1}, Case{3, 10, 1}, Case{2, 257, 1}, Case{4, 33, 3}, Case{0, 5, 1}, Case{2, 1000, 1}}) {
        Shape s{c.outer, c.n, c.inner};
        Tensor x = random_tensor(s, dt, 51, -5, 5), gy = random_tensor(s, dt, 52);
        Tensor y = Tensor::empty(s, dt), dy = Tensor::empty(s, dt, dev());
        kernels::softmax(kCPU)(x, y, c.outer, c.n, c.inner, log);
        kernels::softmax(dev())(x.to(dev()), dy, c.outer, c.n, c.inner, log);
        const double rtol = dt == DType::bf16 ? 1e-2 : 1e-5;
        std::string what = std::string(dtype_name(dt)) + (log ? " log_softmax " : " softmax ") + shape_str(s);
        expect_close(dy, y, rtol, what);
        Tensor gx = Tensor::empty(s, dt), dgx = Tensor::empty(s, dt, dev());
        kernels::softmax_backward(kCPU)(gy, y, gx, c.outer, c.n, c.inner, log);
        kernels::softmax_backward(dev())(gy.to(dev()), y.to(dev()), dgx, c.outer, c.n, c.inner, log);
        expect_close(dgx, gx, rtol * 10, what + " backward");
      }
}

// Every logits dtype, with the loss (and its gradient) in that dtype and, for 16-bit logits, in f32
// (autocast's loss of a 16-bit classifier).
TEST_P(LossOps, CrossEntropyForwardBackwardMatchCpu) {
  using ops::Reduction;
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const DType stat = dt == DType::f64 ? DType::f64 : DType::f32;
    for (DType ldt : {dt, stat}) {
      for (DType it : {DType::i64, DType::i32})
        for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
          for (auto [N, C] :
               std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 7}, {33, 10}, {3, 300}, {4, 9001}, {0, 4}}) {
            Tensor logits = random_tensor({N, C}, dt, 61, -4, 4);
            std::vector<int64_t> t(static_cast<size_t>(N));
            for (int64_t i = 0; i < N; ++i) t[static_cast<size_t>(i)] = (i * 7) % C;
            if (N > 2) t[1] = -100;  // ignored row
            Tensor target = Tensor::from_vector(t, {N}, it);
            Shape ls = red == Reduction::None ? Shape{N} : Shape{};
            Tensor loss = Tensor::empty(ls, ldt), lse = Tensor::empty({N}, stat);
            Tensor dloss = Tensor::empty(ls, ldt, dev()), dlse = Tensor::empty({N}, stat, dev());
            kernels::cross_entropy(kCPU)(logits, target, loss, lse, -100, red);
            kernels::cross_entropy(dev())(logits.to(dev()), target.to(dev()), dloss, dlse, -100, red);
            const double rtol = ldt == DType::bf16 ? 1e-2 : ldt == DType::f16 ? 2e-3 : 1e-5;
            std::string what = std::string(dtype_name(dt)) + " loss " + dtype_name(ldt) + " red " +
                               std::to_string(int(red)) + " N=" + std::to_string(N);
            expect_close(dlse, lse, 1e-5, what + " lse");
            expect_close(dloss, loss, rtol, what + " loss");
            Tensor g = random_tensor(ls, ldt, 62, 0.5, 2);
            Tensor gl = Tensor::empty({N, C}, dt), dgl = Tensor::empty({N, C}, dt, dev());
            kernels::cross_entropy_backward(kCPU)(g, logits, target, lse, gl, -100, red);
            kernels::cross_entropy_backward(dev())(g.to(dev()), logits.to(dev()), target.to(dev()), lse.to(dev()), dgl,
                                                   -100, red);
            // Same lse in: exact on SIM, but for rows of 64 classes or more, where the CPU's f32/f64
            // exponentials are Eigen's vectorised ones (an ulp or so from libm's).
            const bool vector_exp = C >= 64 && (dt == DType::f32 || dt == DType::f64);
            expect_close(dgl, gl, vector_exp ? ulps(dt) : tol(0, ulps(dt)), what + " backward");
          }
      if (ldt == dt && dt == stat) break;  // f32, f64: one loss dtype
    }
  }
}

// Rows wide enough that each thread reads several packs (and a scalar tail), read once on the device:
// a rising row (the max grows at every pack), a falling one, large logits, and the non-finite rules
// (-inf entries, a row of -inf, +inf, NaN, NaN with +inf) against the CPU's two passes.
TEST_P(LossOps, CrossEntropyWideAndNonFiniteRowsMatchCpu) {
  using ops::Reduction;
  const int64_t N = 9, C = 4099;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dt : {DType::f32, DType::bf16}) {
    std::vector<float> x = ops::cast(random_tensor({N, C}, dt, 64, -4, 4), DType::f32).to_vector<float>();
    auto at = [&](int64_t r, int64_t c) -> float& { return x[static_cast<size_t>(r * C + c)]; };
    for (int64_t c = 0; c < C; ++c) {
      at(1, c) = -8.f + 16.f * float(c) / float(C);  // rising
      at(2, c) = 8.f - 16.f * float(c) / float(C);   // falling
      at(8, c) *= 20.f;                              // exp(x - max) down to ~e^-160
      if (c % 5 == 0) at(3, c) = -inf;
      at(4, c) = -inf;
    }
    at(5, 2000) = inf;
    at(6, 17) = nan;
    at(7, 3) = nan;
    at(7, 4000) = inf;
    Tensor logits = ops::cast(Tensor::from_vector(x, {N, C}), dt);
    std::vector<int64_t> t{5, C - 1, 0, 1, 7, 2000, 3, 9, 100};
    Tensor target = Tensor::from_vector(t, {N});
    Tensor loss = Tensor::empty({N}, DType::f32), lse = Tensor::empty({N}, DType::f32);
    Tensor dloss = Tensor::empty({N}, DType::f32, dev()), dlse = Tensor::empty({N}, DType::f32, dev());
    kernels::cross_entropy(kCPU)(logits, target, loss, lse, -100, Reduction::None);
    kernels::cross_entropy(dev())(logits.to(dev()), target.to(dev()), dloss, dlse, -100, Reduction::None);
    const std::string what = std::string(dtype_name(dt)) + " wide rows";
    expect_close(dlse, lse, 1e-5, what + " lse");
    expect_close(dloss, loss, 1e-5, what + " loss");
    std::vector<float> l = lse.to_vector<float>();
    EXPECT_TRUE(std::isnan(l[6]) && std::isnan(l[7])) << l[6] << " " << l[7];
    EXPECT_EQ(l[4], -inf);
    EXPECT_EQ(l[5], inf);
    Tensor y = Tensor::empty({N, C}, dt), dy = Tensor::empty({N, C}, dt, dev());
    kernels::softmax(kCPU)(logits, y, N, C, 1, true);
    kernels::softmax(dev())(logits.to(dev()), dy, N, C, 1, true);
    expect_close(dy, y, dt == DType::bf16 ? 1e-2 : 1e-5, what + " log_softmax");
  }
}

// cross_entropy_with_grad: the loss and lse of cross_entropy and the gradient cross_entropy_backward
// makes for a loss gradient of 1, bit for bit on each backend (rows with ignored and wide ones, 8203
// taking the wide rows' 512 threads; i32/i64 targets, Sum and Mean, 16-bit logits with an f32
// loss); None is refused and a bad target throws as cross_entropy's does. Then through the op:
// loss.backward() (the gradient made in the forward) leaves in .grad what an explicit gradient of
// ones (the backward kernel) does.
TEST_P(LossOps, CrossEntropyWithGradEqualsTheLossThenItsBackward) {
  using ops::Reduction;
  for (Device d : {kCPU, dev()})
    for (DType dt : {DType::f32, DType::f64, DType::bf16})
      for (DType it : {DType::i64, DType::i32})
        for (Reduction red : {Reduction::Mean, Reduction::Sum})
          for (auto [N, C] :
               std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {33, 10}, {5, 4099}, {6, 8203}, {0, 4}}) {
            const DType ldt = dt == DType::f64 ? DType::f64 : DType::f32;
            const std::string what = d.str() + " " + dtype_name(dt) + " " + dtype_name(it) + " red " +
                                     std::to_string(int(red)) + " N=" + std::to_string(N) + " C=" + std::to_string(C);
            Tensor logits = random_tensor({N, C}, dt, 65, -4, 4).to(d);
            std::vector<int64_t> t(static_cast<size_t>(N));
            for (int64_t i = 0; i < N; ++i) t[static_cast<size_t>(i)] = (i * 7 + 3) % C;
            if (N > 2) t[1] = -100;
            Tensor target = Tensor::from_vector(t, {N}, it).to(d);
            Tensor loss = Tensor::empty({}, ldt, d), lse = Tensor::empty({N}, ldt, d);
            Tensor gl = Tensor::empty({N, C}, dt, d);
            kernels::cross_entropy(d)(logits, target, loss, lse, -100, red);
            kernels::cross_entropy_backward(d)(Tensor::ones({}, ldt, d), logits, target, lse, gl, -100, red);
            Tensor fl = Tensor::empty({}, ldt, d), flse = Tensor::empty({N}, ldt, d), fg = Tensor::empty({N, C}, dt, d);
            kernels::cross_entropy_with_grad(d)(logits, target, fl, flse, fg, -100, red);
            expect_close(fl, loss, 0, what + " loss");
            expect_close(flse, lse, 0, what + " lse");
            expect_close(fg, gl, 0, what + " gradient");
          }
  for (Device d : {kCPU, dev()}) {
    Tensor logits = random_tensor({4, 3}, DType::f32, 66).to(d), g = Tensor::empty({4, 3}, DType::f32, d);
    Tensor loss = Tensor::empty({}, DType::f32, d), lse = Tensor::empty({4}, DType::f32, d);
    Tensor bad = Tensor::from_vector(std::vector<int64_t>{0, 3, 1, 1}, {4}).to(d);
    EXPECT_THROW(kernels::cross_entropy_with_grad(d)(logits, bad, loss, lse, g, -100, ops::Reduction::Mean),
                 ValueError)
        << d.str();
    Tensor rows = Tensor::empty({4}, DType::f32, d);
    Tensor ok = Tensor::from_vector(std::vector<int64_t>{0, 2, 1, 1}, {4}).to(d);
    EXPECT_THROW(kernels::cross_entropy_with_grad(d)(logits, ok, rows, lse, g, -100, ops::Reduction::None), Error)
        << d.str();
  }
  for (Device d : {kCPU, dev()})
    for (bool autocast : {false, true}) {
      Tensor logits = random_tensor({37, 300}, autocast ? DType::bf16 : DType::f32, 67, -4, 4).to(d);
      std::vector<int64_t> t(37);
      for (int64_t i = 0; i < 37; ++i) t[static_cast<size_t>(i)] = (i * 11) % 300;
      Tensor target = Tensor::from_vector(t, {37}).to(d);
      auto grad_of = [&](bool implicit) {
        Tensor x = logits.clone().set_requires_grad();
        Tensor loss;
        {
          std::optional<AutocastGuard> guard;
          if (autocast) guard.emplace(DType::bf16);
          loss = ops::cross_entropy(x, target);
        }
        if (implicit) loss.backward();
        else loss.backward(Tensor::ones({}, loss.dtype(), d));
        return x.grad();
      };
      expect_close(grad_of(true), grad_of(false), 0, d.str() + (autocast ? " bf16" : " f32") + " loss.backward()");
    }
}

TEST_P(LossOps, CrossEntropyRejectsALossDtypeOtherThanTheLogitsOrF32) {
  Tensor logits = random_tensor({4, 3}, DType::f32, 1).to(dev());
  Tensor target = Tensor::from_vector(std::vector<int64_t>{0, 2, 1, 1}, {4}).to(dev());
  Tensor loss = Tensor::empty({}, DType::bf16, dev()), lse = Tensor::empty({4}, DType::f32, dev());
  EXPECT_THROW(kernels::cross_entropy(dev())(logits, target, loss, lse, -100, ops::Reduction::Mean), ValueError);
}

// Under autocast the device reads 16-bit logits as they are and writes an f32 loss; their gradient
// stays 16-bit. Values as the CPU's f32 path on the same (rounded) logits.
TEST_P(LossOps, CrossEntropyUnderAutocastKeepsSixteenBitLogitsOnTheDevice) {
  Tensor logits = random_tensor({6, 50}, DType::bf16, 63, -4, 4);
  Tensor target = Tensor::from_vector(std::vector<int64_t>{0, 49, 7, 3, 3, 20}, {6});
  Tensor x = logits.to(dev());
  x.set_requires_grad(true);
  Tensor loss;
  {
    AutocastGuard guard(DType::bf16);
    loss = ops::cross_entropy(x, target.to(dev()));
  }
  EXPECT_EQ(loss.dtype(), DType::f32);
  Tensor gx = grad({loss}, {x})[0];
  EXPECT_EQ(gx.dtype(), DType::bf16);
  Tensor x32 = ops::cast(logits, DType::f32);
  x32.set_requires_grad(true);
  Tensor want = ops::cross_entropy(x32, target);
  expect_close(loss.to(kCPU), want, 1e-5, "loss");
  expect_close(ops::cast(gx.to(kCPU), DType::f32), grad({want}, {x32})[0], 4 * ulps(DType::bf16), "dlogits");
}

TEST_P(LossOps, CrossEntropyRejectsAnOutOfRangeTarget) {
  Tensor logits = random_tensor({4, 3}, DType::f32, 1).to(dev());
  Tensor target = Tensor::from_vector(std::vector<int64_t>{0, 2, 3, 1}, {4}).to(dev());
  Tensor loss = Tensor::empty({}, DType::f32, dev()), lse = Tensor::empty({4}, DType::f32, dev());
  try {
    kernels::cross_entropy(dev())(logits, target, loss, lse, -100, ops::Reduction::Mean);
    FAIL() << "no error for target 3 with 3 classes";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("target 3 at row 2"), std::string::npos) << e.what();
  }
}

TANDEM_BACKEND_SUITE(LossOps);

}  // namespace
}  // namespace tandem::testing
