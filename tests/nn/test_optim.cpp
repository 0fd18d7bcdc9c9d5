// Optimizers, LR schedules and clip_grad_norm against torch.optim reference values
// (tests/reference/make_optim.py -> optim_values.h), plus state save/restore and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "nn/optim.h"
#include "tests/reference/optim_values.h"

using namespace tandem;
using namespace tandem::nn;

namespace {

template <size_t N>
std::vector<double> row(const double (&a)[N]) { return std::vector<double>(a, a + N); }
template <size_t R, size_t C>
std::vector<double> row(const double (&a)[R][C]) { return std::vector<double>(&a[0][0], &a[0][0] + R * C); }
template <size_t S, size_t N>
std::vector<double> row(const double (&a)[S][N], size_t k) { return std::vector<double>(a[k], a[k] + N); }
template <size_t S, size_t R, size_t C>
std::vector<double> row(const double (&a)[S][R][C], size_t k) { return std::vector<double>(&a[k][0][0], &a[k][0][0] + R * C); }

template <class T>
Tensor param(const std::vector<T>& v, const Shape& shape, DType dtype) {
  Tensor t = Tensor::from_vector(v, shape, dtype);
  t.set_requires_grad(true);
  return t;
}

void expect_near(const Tensor& t, const std::vector<double>& want, double tol, const std::string& what) {
  std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " element " << i;
}

using MakeOpt = std::function<std::unique_ptr<Optimizer>(Tensor& p0, Tensor& p1)>;

// Runs kSteps steps with the reference gradients and compares the parameters after each step.
template <class Ref0, class Ref1>
void check_case(const MakeOpt& make, const Ref0& want0, const Ref1& want1, DType dtype, double tol,
                const std::string& name) {
  using namespace optim_ref;
  Tensor p0 = param(row(p0_init), {2, 3}, dtype), p1 = param(row(p1_init), {4}, dtype);
  auto opt = make(p0, p1);
  for (int k = 0; k < kSteps; ++k) {
    p0.set_grad(Tensor::from_vector(row(g0, k), {2, 3}, dtype));
    p1.set_grad(Tensor::from_vector(row(g1, k), {4}, dtype));
    opt->step();
    expect_near(p0, row(want0, k), tol, name + " p0 step " + std::to_string(k + 1));
    expect_near(p1, row(want1, k), tol, name + " p1 step " + std::to_string(k + 1));
  }
}

SGDOptions sgd(double lr, double momentum = 0, double dampening = 0, double wd = 0, bool nesterov = false) {
  SGDOptions o;
  o.lr = lr; o.momentum = momentum; o.dampening = dampening; o.weight_decay = wd; o.nesterov = nesterov;
  return o;
}
AdamOptions adam(double lr, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8, double wd = 0) {
  AdamOptions o;
  o.lr = lr; o.beta1 = b1; o.beta2 = b2; o.eps = eps; o.weight_decay = wd;
  return o;
}
template <class Opt, class O>
MakeOpt make(O o) {
  return [o](Tensor& a, Tensor& b) -> std::unique_ptr<Optimizer> { return std::make_unique<Opt>(std::vector<Tensor>{a, b}, o); };
}

struct Case {
  const char* name;
  MakeOpt make;
  const double (*want0)[2][3];
  const double (*want1)[4];
};

std::vector<Case> cases() {
  using namespace optim_ref;
  return {
      {"sgd_plain", make<SGD>(sgd(0.1)), sgd_plain_p0, sgd_plain_p1},
      {"sgd_momentum", make<SGD>(sgd(0.1, 0.9)), sgd_momentum_p0, sgd_momentum_p1},
      {"sgd_dampening_wd", make<SGD>(sgd(0.1, 0.9, 0.3, 0.01)), sgd_dampening_wd_p0, sgd_dampening_wd_p1},
      {"sgd_nesterov_wd", make<SGD>(sgd(0.05, 0.9, 0, 0.05, true)), sgd_nesterov_wd_p0, sgd_nesterov_wd_p1},
      {"adam", make<Adam>(adam(0.01)), adam_p0, adam_p1},
      {"adam_wd", make<Adam>(adam(0.01, 0.8, 0.95, 1e-6, 0.1)), adam_wd_p0, adam_wd_p1},
      {"adamw", make<AdamW>(adam(0.01, 0.9, 0.999, 1e-8, 0.1)), adamw_p0, adamw_p1},
      {"adamw_betas", make<AdamW>(adam(0.02, 0.5, 0.9, 1e-4, 0.5)), adamw_betas_p0, adamw_betas_p1},
  };
}

void run_case(const Case& c, DType dtype, double tol) {
  using namespace optim_ref;
  Tensor p0 = param(row(p0_init), {2, 3}, dtype), p1 = param(row(p1_init), {4}, dtype);
  auto opt = c.make(p0, p1);
  for (int k = 0; k < kSteps; ++k) {
    p0.set_grad(Tensor::from_vector(row(g0, k), {2, 3}, dtype));
    p1.set_grad(Tensor::from_vector(row(g1, k), {4}, dtype));
    opt->step();
    std::string at = std::string(c.name) + " " + dtype_name(dtype) + " step " + std::to_string(k + 1);
    expect_near(p0, std::vector<double>(&c.want0[k][0][0], &c.want0[k][0][0] + 6), tol, at + " p0");
    expect_near(p1, std::vector<double>(c.want1[k], c.want1[k] + 4), tol, at + " p1");
  }
}

}  // namespace

TEST(Optim, MatchesTorchFloat64) {
  for (const Case& c : cases()) run_case(c, DType::f64, 1e-12);
}

TEST(Optim, MatchesTorchFloat32) {
  for (const Case& c : cases()) run_case(c, DType::f32, 2e-6);
}

TEST(Optim, ParamGroupsKeepTheirOwnLrAndDecay) {
  using namespace optim_ref;
  auto groups = [](Tensor& a, Tensor& b, double lr0, double lr1) {
    std::vector<ParamGroup> g(2);
    g[0].params = {a};
    g[0].lr = lr0;
    g[1].params = {b};
    g[1].lr = lr1;
    g[1].weight_decay = 0.1;
    return g;
  };
  check_case([&](Tensor& a, Tensor& b) -> std::unique_ptr<Optimizer> {
    return std::make_unique<SGD>(groups(a, b, 0.1, 0.01), sgd(0.1, 0.9));
  }, sgd_groups_p0, sgd_groups_p1, DType::f64, 1e-12, "sgd_groups");
  check_case([&](Tensor& a, Tensor& b) -> std::unique_ptr<Optimizer> {
    return std::make_unique<Adam>(groups(a, b, 0.01, 0.05), adam(0.01));
  }, adam_groups_p0, adam_groups_p1, DType::f64, 1e-12, "adam_groups");
}

TEST(Optim, SkipsParametersWithoutGradient) {
  Tensor a = param(std::vector<double>{1, 2}, {2}, DType::f32), b = param(std::vector<double>{3, 4}, {2}, DType::f32);
  SGD opt({a, b}, sgd(0.5, 0.9));
  a.set_grad(Tensor::from_vector(std::vector<double>{1, 1}, {2}, DType::f32));
  opt.step();
  expect_near(a, {0.5, 1.5}, 1e-7, "a");
  expect_near(b, {3, 4}, 0, "b");
  NamedTensors st = opt.state_tensors();
  bool has_a = false, has_b = false;
  for (auto& [n, t] : st) {
    has_a |= n == "state.0.momentum_buffer";
    has_b |= n == "state.1.momentum_buffer";
  }
  EXPECT_TRUE(has_a);
  EXPECT_FALSE(has_b);
  opt.zero_grad();
  expect_near(a.grad(), {0, 0}, 0, "zeroed grad");
}

// Saving the state after 2 steps into a fresh optimizer and continuing gives bitwise the same
// parameters as the optimizer that never stopped.
TEST(Optim, StateRoundTripContinuesBitwise) {
  using namespace optim_ref;
  for (const Case& c : cases()) {
    Tensor a0 = param(row(p0_init), {2, 3}, DType::f32), a1 = param(row(p1_init), {4}, DType::f32);
    auto ref = c.make(a0, a1);
    Tensor b0, b1;
    std::unique_ptr<Optimizer> resumed;
    for (int k = 0; k < kSteps; ++k) {
      a0.set_grad(Tensor::from_vector(row(g0, k), {2, 3}, DType::f32));
      a1.set_grad(Tensor::from_vector(row(g1, k), {4}, DType::f32));
      ref->step();
      if (k == 1) {
        b0 = param(a0.to_vector<float>(), {2, 3}, DType::f32);
        b1 = param(a1.to_vector<float>(), {4}, DType::f32);
        resumed = c.make(b0, b1);
        resumed->load_state_tensors(ref->state_tensors());
        EXPECT_EQ(resumed->step_count(), 2) << c.name;
      } else if (k > 1) {
        b0.set_grad(Tensor::from_vector(row(g0, k), {2, 3}, DType::f32));
        b1.set_grad(Tensor::from_vector(row(g1, k), {4}, DType::f32));
        resumed->step();
        EXPECT_EQ(a0.to_vector<float>(), b0.to_vector<float>()) << c.name << " step " << k + 1;
        EXPECT_EQ(a1.to_vector<float>(), b1.to_vector<float>()) << c.name << " step " << k + 1;
      }
    }
  }
}

TEST(Optim, StateTensorsNamesAndTypes) {
  Tensor a = param(std::vector<double>{1, 2}, {2}, DType::f32);
  Adam opt({a}, adam(0.1));
  a.set_grad(Tensor::from_vector(std::vector<double>{1, -1}, {2}, DType::f32));
  opt.step();
  opt.step();
  NamedTensors st = opt.state_tensors();
  std::vector<std::string> names;
  for (auto& [n, t] : st) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"step", "param_groups.0.lr", "state.0.step", "state.0.exp_avg",
                                             "state.0.exp_avg_sq"}));
  EXPECT_EQ(st[0].second.dtype(), DType::i64);
  EXPECT_EQ(st[0].second.item(), 2);
  EXPECT_EQ(st[2].second.dtype(), DType::i64);
  EXPECT_EQ(st[2].second.item(), 2);
  EXPECT_EQ(st[1].second.item(), 0.1);
}

TEST(Optim, LoadErrorsNameTheEntry) {
  Tensor a = param(std::vector<double>{1, 2}, {2}, DType::f32);
  Adam opt({a}, adam(0.1));
  a.set_grad(Tensor::from_vector(std::vector<double>{1, -1}, {2}, DType::f32));
  opt.step();
  NamedTensors st = opt.state_tensors();
  auto expect_error = [&](NamedTensors s, const std::string& needle) {
    Adam other({param(std::vector<double>{0, 0}, {2}, DType::f32)}, adam(0.1));
    try {
      other.load_state_tensors(s);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  NamedTensors bad_shape = st;
  bad_shape[3].second = Tensor::zeros({3});
  expect_error(bad_shape, "state.0.exp_avg");
  NamedTensors extra = st;
  extra.emplace_back("state.7.exp_avg", Tensor::zeros({2}));
  expect_error(extra, "state.7.exp_avg");
  NamedTensors no_step(st.begin() + 1, st.end());
  expect_error(no_step, "'step'");
  NamedTensors partial(st.begin(), st.end() - 1);  // exp_avg without exp_avg_sq
  expect_error(partial, "state.0.exp_avg_sq");
  NamedTensors two_groups = st;
  two_groups.emplace_back("param_groups.1.lr", Tensor::scalar(0.1, DType::f64));
  expect_error(two_groups, "param_groups.1.lr");
  // A failed load changes nothing.
  Adam other({param(std::vector<double>{0, 0}, {2}, DType::f32)}, adam(0.1));
  other.set_lr(0.7);
  EXPECT_THROW(other.load_state_tensors(partial), ValueError);
  EXPECT_EQ(other.get_lr(), 0.7);
  EXPECT_EQ(other.state_tensors().size(), 2u);
}

TEST(Optim, RejectsBadArguments) {
  Tensor a = param(std::vector<double>{1, 2}, {2}, DType::f32);
  EXPECT_THROW(SGD({a}, sgd(0.1, 0.0, 0.0, 0.0, true)), ValueError);  // nesterov without momentum
  EXPECT_THROW(SGD({a}, sgd(-1.0)), ValueError);
  EXPECT_THROW(Adam({a}, adam(0.1, 1.0)), ValueError);
  EXPECT_THROW(SGD({a, a}, sgd(0.1)), ValueError);  // a parameter listed twice
}

// 16-bit parameters update with f32 math (one rounding at the store).
TEST(Optim, HalfAndBfloat16Parameters) {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor a = param(std::vector<double>{1.0, -2.0}, {2}, dt);
    SGD opt({a}, sgd(0.5, 0.9));
    a.set_grad(Tensor::from_vector(std::vector<double>{1.0, 1.0}, {2}, dt));
    opt.step();
    opt.step();  // buf = 0.9 + 1 = 1.9; p = p - 0.5 - 0.95
    expect_near(a, {-0.45, -3.45}, 1e-2, dtype_name(dt));
    Tensor b = param(std::vector<double>{1.0}, {1}, dt);
    Adam adam_opt({b}, adam(0.125));
    b.set_grad(Tensor::from_vector(std::vector<double>{3.0}, {1}, dt));
    adam_opt.step();  // first Adam step moves by lr * sign(g)
    expect_near(b, {0.875}, 1e-6, dtype_name(dt));
  }
}

TEST(Optim, SetAndGetLr) {
  Tensor a = param(std::vector<double>{1, 2}, {2}, DType::f32);
  SGD opt({a}, sgd(0.1));
  EXPECT_EQ(opt.get_lr(), 0.1);
  opt.set_lr(0.5);
  EXPECT_EQ(opt.get_lr(), 0.5);
  EXPECT_THROW(opt.get_lr(3), ValueError);
}

// ---- LR schedules ----
namespace {
template <size_t N>
void check_schedule(const std::function<std::shared_ptr<LRScheduler>(Optimizer&)>& make, const double (&want)[N],
                    const char* name) {
  Tensor a = param(std::vector<double>{0}, {1}, DType::f32);
  SGD opt({a}, sgd(0.1));
  auto s = make(opt);
  for (size_t k = 0; k < N; ++k) {
    EXPECT_NEAR(opt.get_lr(), want[k], 1e-12) << name << " epoch " << k;
    EXPECT_EQ(s->last_epoch(), static_cast<int64_t>(k));
    s->step();
  }
  // Restoring last_epoch into a fresh scheduler on a fresh optimizer gives the same lr.
  Tensor b = param(std::vector<double>{0}, {1}, DType::f32);
  SGD opt2({b}, sgd(0.1));
  auto s2 = make(opt2);
  s2->load_state_tensors(s->state_tensors());
  EXPECT_EQ(s2->last_epoch(), static_cast<int64_t>(N));
  EXPECT_DOUBLE_EQ(opt2.get_lr(), opt.get_lr()) << name;
}
}  // namespace

TEST(LRSchedule, StepLR) {
  check_schedule([](Optimizer& o) { return std::make_shared<StepLR>(o, 3, 0.5); }, optim_ref::lr_step_lr, "step");
}

TEST(LRSchedule, CosineAnnealingPastTMax) {
  check_schedule([](Optimizer& o) { return std::make_shared<CosineAnnealingLR>(o, 10, 0.001); },
                 optim_ref::lr_cosine, "cosine");
}

TEST(LRSchedule, LinearWarmupStandalone) {
  check_schedule([](Optimizer& o) { return std::make_shared<LinearWarmup>(o, 4, 0.25); },
                 optim_ref::lr_linear_warmup, "warmup");
}

TEST(LRSchedule, LinearWarmupThenCosine) {
  check_schedule([](Optimizer& o) {
    auto cosine = std::make_shared<CosineAnnealingLR>(o, 6, 0.0);
    return std::make_shared<LinearWarmup>(o, 4, 0.25, cosine);
  }, optim_ref::lr_warmup_cosine, "warmup+cosine");
}

TEST(LRSchedule, LoadRejectsUnknownEntry) {
  Tensor a = param(std::vector<double>{0}, {1}, DType::f32);
  SGD opt({a}, sgd(0.1));
  StepLR s(opt, 2);
  EXPECT_THROW(s.load_state_tensors({{"epoch", Tensor::scalar(1, DType::i64)}}), ValueError);
}

// ---- clip_grad_norm ----
namespace {
double clip_with(double max_norm, const double (&want0)[2][3], const double (&want1)[4], double want_total) {
  using namespace optim_ref;
  Tensor a = param(std::vector<double>(6, 0.0), {2, 3}, DType::f64), b = param(std::vector<double>{0, 0, 0, 0}, {4}, DType::f64);
  a.set_grad(Tensor::from_vector(row(g0, 0), {2, 3}, DType::f64));
  std::vector<double> gb = row(g1, 0);
  for (auto& v : gb) v *= 3;
  b.set_grad(Tensor::from_vector(gb, {4}, DType::f64));
  Tensor c = param(std::vector<double>{5}, {1}, DType::f64);  // no gradient: skipped
  double total = clip_grad_norm({a, c, b}, max_norm);
  EXPECT_NEAR(total, want_total, 1e-12);
  expect_near(a.grad(), std::vector<double>(&want0[0][0], &want0[0][0] + 6), 1e-12, "clipped g0");
  expect_near(b.grad(), row(want1), 1e-12, "clipped g1");
  return total;
}
}  // namespace

TEST(ClipGradNorm, ScalesWhenAboveMax) {
  double total = clip_with(1.0, optim_ref::clip_g0, optim_ref::clip_g1, optim_ref::clip_total);
  EXPECT_GT(total, 1.0);
}

TEST(ClipGradNorm, LeavesGradientsBelowMax) {
  double total = clip_with(100.0, optim_ref::noclip_g0, optim_ref::noclip_g1, optim_ref::noclip_total);
  EXPECT_LT(total, 100.0);
}

TEST(ClipGradNorm, Float32AndInfErrors) {
  Tensor a = param(std::vector<double>{0, 0}, {2}, DType::f32);
  a.set_grad(Tensor::from_vector(std::vector<double>{3, 4}, {2}, DType::f32));
  EXPECT_NEAR(clip_grad_norm({a}, 1.0), 5.0, 1e-6);
  expect_near(a.grad(), {0.6, 0.8}, 1e-6, "f32 clip");
  a.set_grad(Tensor::from_vector(std::vector<double>{INFINITY, 4}, {2}, DType::f32));
  EXPECT_THROW(clip_grad_norm({a}, 1.0), ValueError);
  Tensor no_grad = param(std::vector<double>{1}, {1}, DType::f32);
  EXPECT_EQ(clip_grad_norm({no_grad}, 1.0), 0.0);
}
