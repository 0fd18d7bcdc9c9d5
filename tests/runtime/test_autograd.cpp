// The autograd engine on a host-side test op (square), independent of any backend op.
#include <gtest/gtest.h>

#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/tensor.h"

using namespace tandem;

namespace {
// y = x * x elementwise, on host data, f64.
Tensor square(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  const double* a = x.data<double>();
  double* b = y.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] * a[i];
  return record("square", {x}, y, [x](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor dx = Tensor::empty(x.shape(), DType::f64);
    for (int64_t i = 0; i < x.numel(); ++i) dx.data<double>()[i] = 2 * x.data<double>()[i] * g[0].data<double>()[i];
    return {dx};
  });
}
// sum of all elements into a scalar.
Tensor total(const Tensor& x) {
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += x.data<double>()[i];
  Shape shape = x.shape();
  return record("total", {x}, Tensor::scalar(s, DType::f64), [shape](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{Tensor::full(shape, g[0].item(), DType::f64)};
  });
}
// square whose backward adds 2x * g into x's gradient sink itself when the engine offers one (as
// a weight gradient's GEMM with beta 1 does); `offered` records whether it did.
Tensor square_into_sink(const Tensor& x, bool* offered, SinkOf which = SinkOf::AnyInput) {
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = x.data<double>()[i] * x.data<double>()[i];
  return record("square_into_sink", {x}, y, [x, offered, which](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor sink = gradient_sink(0, which);
    *offered = sink.defined();
    Tensor dx = sink.defined() ? sink : Tensor::zeros(x.shape(), DType::f64);
    for (int64_t i = 0; i < x.numel(); ++i) dx.data<double>()[i] += 2 * x.data<double>()[i] * g[0].data<double>()[i];
    return {sink.defined() ? Tensor() : dx};
  });
}
// Counts a leaf's grad-ready hook calls and keeps element 1 of the gradient the last call saw.
struct HookLog {
  int calls = 0;
  double seen = 0;
};
void log_hook(Tensor& x, HookLog& log) {
  x.add_grad_ready_hook([&log](Tensor& t) {
    ++log.calls;
    log.seen = t.grad().to_vector<double>()[1];
  });
}
Tensor leaf(std::vector<double> v) {
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST(Autograd, ChainAndAccumulation) {
  Tensor x = leaf({1, 2, 3});
  Tensor loss = total(square(square(x)));  // sum x^4 -> grad 4x^3
  loss.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 32, 108}));
  total(square(x)).backward();  // accumulates 2x
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 36, 114}));
}

TEST(Autograd, DiamondSumsBothPaths) {
  Tensor x = leaf({3});
  Tensor y = square(x);
  Tensor a = total(y), b = total(y);
  // Two roots sharing y: gradient 2 * 2x.
  run_backward({a, b}, {Tensor(), Tensor()}, false);
  EXPECT_EQ(x.grad().item(), 12.0);
}

TEST(Autograd, GradReadyHookFiresOncePerBackwardAfterAccumulation) {
  Tensor x = leaf({1, 2});
  HookLog log;
  log_hook(x, log);
  Tensor y = square(x);
  run_backward({total(y), total(y)}, {Tensor(), Tensor()}, false);
  EXPECT_EQ(log.calls, 1);
  EXPECT_EQ(log.seen, 8.0);
}

TEST(Autograd, SecondBackwardThroughFreedGraphIsAnError) {
  Tensor x = leaf({1});
  Tensor loss = total(square(x));
  loss.backward();
  try {
    loss.backward();
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
  Tensor l2 = total(square(x));
  l2.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_NO_THROW(l2.backward());
}

TEST(Autograd, GradientShapeMismatchIsAnError) {
  Tensor x = leaf({1, 2});
  Tensor bad = record("bad", {x}, Tensor::scalar(0.0, DType::f64), [](const std::vector<Tensor>&) {
    return std::vector<Tensor>{Tensor::zeros({3}, DType::f64)};
  });
  try {
    bad.backward();
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("bad"), std::string::npos) << m;
    EXPECT_NE(m.find("[3]"), std::string::npos) << m;
  }
  Tensor y = square(x);
  EXPECT_THROW(y.backward(), ValueError);                                     // not a scalar
  EXPECT_THROW(y.backward(Tensor::ones({3}, DType::f64)), ValueError);       // wrong shape
}

TEST(Autograd, NoGradRecordsNothingAndGradLeavesDotGradAlone) {
  Tensor x = leaf({2});
  {
    NoGradGuard ng;
    EXPECT_FALSE(square(x).requires_grad());
  }
  auto g = grad({total(square(x))}, {x});
  EXPECT_EQ(g[0].item(), 4.0);
  EXPECT_FALSE(x.grad().defined());
}

// A backward adding into the sink (the leaf's .grad, made when it has none) loses nothing beside a
// gradient arriving the usual way, and the leaf's hook still fires once, after both parts.
TEST(Autograd, GradientSinkIsTheLeafsGradAndHooksFireAfterEveryPart) {
  Tensor x = leaf({1, 2});
  HookLog log;
  log_hook(x, log);
  bool offered = false;
  for (int round = 1; round <= 2; ++round) {
    log.calls = 0;
    // The sink's part (2x, recorded last so it runs first) and the usual part (2x) of one backward.
    Tensor loss_a = total(square(x)), loss_b = total(square_into_sink(x, &offered));
    run_backward({loss_a, loss_b}, {Tensor(), Tensor()}, false);
    EXPECT_TRUE(offered);
    EXPECT_EQ(log.calls, 1);
    EXPECT_EQ(log.seen, 8.0 * round);  // 4x, accumulated over the rounds
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4.0 * round, 8.0 * round}));
  }
  // Only the sink's part: the first backward has no .grad yet; the sink is made as zeros.
  Tensor z = leaf({3});
  total(square_into_sink(z, &offered)).backward();
  EXPECT_TRUE(offered);
  EXPECT_EQ(z.grad().item(), 6.0);
}

// a + b on f64 host data whose backward hands the same tensor to both inputs (as an add does).
Tensor add_sharing_gradient(const Tensor& a, const Tensor& b) {
  Tensor y = Tensor::empty(a.shape(), DType::f64);
  for (int64_t i = 0; i < a.numel(); ++i) y.data<double>()[i] = a.data<double>()[i] + b.data<double>()[i];
  return record("add_sharing_gradient", {a, b}, y, [](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {g[0], g[0]};
  });
}

// No sink in grad() (it leaves .grad alone) nor for an input that no gradient has reached yet.
TEST(Autograd, GradientSinkOnlyForLeavesUnderBackward) {
  Tensor x = leaf({3});
  bool offered = true;
  auto g = grad({total(square_into_sink(x, &offered))}, {x});
  EXPECT_FALSE(offered);
  EXPECT_EQ(g[0].item(), 6.0);
  EXPECT_FALSE(x.grad().defined());
  offered = true;
  total(square_into_sink(square(x), &offered)).backward();  // d(x^4) = 4x^3
  EXPECT_FALSE(offered);
  EXPECT_EQ(x.grad().item(), 108.0);
}

// An interior input's sink is the gradient summed there so far (a residual stream's, added before
// its LayerNorm runs): added into in place, nothing lost, and only where the engine alone holds it.
TEST(Autograd, GradientSinkForAnInteriorInputIsTheSumSoFar) {
  Tensor x = leaf({2, 3});
  Tensor h = square(x);
  bool offered = false;
  // total(h) is recorded last and runs first: h's gradient holds its ones when the sink's square runs.
  Tensor loss_b = total(square_into_sink(h, &offered)), loss_a = total(h);
  run_backward({loss_a, loss_b}, {Tensor(), Tensor()}, false);
  EXPECT_TRUE(offered);
  // d/dx (x^2 + x^4) = 2x + 4x^3
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4 + 32, 6 + 108}));

  // A closure asking for leaves' sinks only is not offered it.
  Tensor u = leaf({2, 3});
  Tensor hu = square(u);
  offered = true;
  Tensor lu = total(square_into_sink(hu, &offered, SinkOf::Leaf)), lv = total(hu);
  run_backward({lv, lu}, {Tensor(), Tensor()}, false);
  EXPECT_FALSE(offered);
  EXPECT_EQ(u.grad().to_vector<double>(), (std::vector<double>{36, 114}));

  // grad() offers no interior sink either.
  Tensor y = leaf({2, 3});
  Tensor hy = square(y);
  offered = true;
  Tensor lb = total(square_into_sink(hy, &offered)), la = total(hy);
  auto g = grad({la, lb}, {y});
  EXPECT_FALSE(offered);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{36, 114}));
}

// is_implicit_root_gradient: true in the closure of the root of loss.backward() (and of grad()
// without output gradients), for the ones the engine made; false for a caller's ones, and for a
// node that gets its gradient from another node.
TEST(Autograd, ImplicitRootGradientIsTheEnginesOnes) {
  auto seen_by = [](std::vector<int>* seen) {
    return [seen](const Tensor& x) {
      return record("probe", {x}, Tensor::full(x.shape(), x.item(), DType::f64), [seen](const std::vector<Tensor>& g) {
        seen->push_back(is_implicit_root_gradient(g[0]) ? 1 : 0);
        return std::vector<Tensor>{g[0].clone()};
      });
    };
  };
  std::vector<int> seen;
  auto probe = seen_by(&seen);
  Tensor x = leaf({3});
  probe(x).backward();
  probe(x).backward(Tensor::full({1}, 1.0, DType::f64));
  grad({probe(x)}, {x});
  // probe(probe(x)): the outer one is the root, the inner one gets the outer one's gradient.
  probe(probe(x)).backward();
  EXPECT_EQ(seen, (std::vector<int>{1, 0, 1, 1, 0}));
  EXPECT_FALSE(is_implicit_root_gradient(Tensor::scalar(1.0, DType::f64)));  // outside any backward
}

// Refused where another holder could see the write: one gradient tensor handed to two inputs, or
// the caller's own gradient given to backward for a root.
TEST(Autograd, InteriorSinkRefusedWhenTheSumIsShared) {
  Tensor x = leaf({2, 3}), z = leaf({5, 7});
  Tensor hx = square(x), hz = square(z);
  bool offered = true;
  // add_sharing_gradient runs first and gives hx and hz the same tensor (ones).
  Tensor lb = total(square_into_sink(hx, &offered)), la = total(add_sharing_gradient(hx, hz));
  run_backward({la, lb}, {Tensor(), Tensor()}, false);
  EXPECT_FALSE(offered);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{36, 114}));
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{10, 14}));  // ones, not ones + 4x^3

  Tensor w = leaf({2, 3});
  Tensor hw = square(w);
  const Tensor given = Tensor::from_vector<double>({1, 1}, {2});
  offered = true;
  Tensor sunk = square_into_sink(hw, &offered);
  run_backward({hw, sunk}, {given, given}, false);
  EXPECT_FALSE(offered);
  EXPECT_EQ(given.to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{2 * 2 * (1 + 2 * 4), 2 * 3 * (1 + 2 * 9)}));
}
