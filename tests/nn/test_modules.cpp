// nn modules: parameter names/shapes/counts, state_dict round trip and load errors, clone
// independence, train/eval, initialisation statistics, and forwards/gradients against torch.nn
// reference values (tests/reference/make_nn.py -> nn_values.h).
#include <gtest/gtest.h>

#include <cmath>

#include "nn/init.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "runtime/autograd.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/reduce.h"
#include "tests/reference/nn_values.h"
#include "tests/support/error_of.h"

using namespace tandem;
using namespace tandem::nn;
using tandem::testing::error_of;

namespace {

template <size_t N>
Tensor ref(const double (&a)[N], const Shape& shape, DType dtype = DType::f64) {
  return Tensor::from_vector(std::vector<double>(a, a + N), shape, dtype);
}

template <size_t N>
void expect_near(const Tensor& t, const double (&want)[N], double tol, const std::string& what) {
  ASSERT_TRUE(t.defined()) << what;
  std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), N) << what;
  for (size_t i = 0; i < N; ++i) EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
}

std::vector<std::string> names_of(const NamedTensors& nt) {
  std::vector<std::string> out;
  for (auto& [n, t] : nt) out.push_back(n);
  return out;
}

int64_t count(const Module& m) {
  int64_t n = 0;
  for (auto& p : m.parameters()) n += p.numel();
  return n;
}

// sum(y * r): a scalar whose gradient w.r.t. y is r.
Tensor weighted_sum(const Tensor& y, const Tensor& r) { return ops::sum(ops::mul(y, r)); }

}  // namespace

// ---- structure ----
TEST(Modules, MlpNamesShapesCount) {
  Generator gen(1);
  auto mlp = make_mlp(gen);
  EXPECT_EQ(names_of(mlp->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}));
  auto params = mlp->named_parameters();
  EXPECT_EQ(params[0].second.shape(), (Shape{512, 784}));
  EXPECT_EQ(params[1].second.shape(), (Shape{512}));
  EXPECT_EQ(params[4].second.shape(), (Shape{10, 512}));
  EXPECT_EQ(count(*mlp), 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10);
  EXPECT_TRUE(mlp->named_buffers().empty());
  for (auto& p : mlp->parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ((*mlp)[1].type_name(), "ReLU");
}

TEST(Modules, CnnNamesBuffersCountAndShapes) {
  Generator gen(1);
  auto cnn = make_cnn(gen);
  EXPECT_EQ(names_of(cnn->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias", "5.weight",
                                      "5.bias", "9.weight", "9.bias", "11.weight", "11.bias"}));
  EXPECT_EQ(names_of(cnn->named_buffers()),
            (std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked", "5.running_mean",
                                      "5.running_var", "5.num_batches_tracked"}));
  EXPECT_EQ(count(*cnn), (32 * 9 + 32) + 64 + (64 * 32 * 9 + 64) + 128 + (3136 * 128 + 128) + (128 * 10 + 10));
  EXPECT_EQ(cnn->state_dict().size(), 18u);
  Tensor y = cnn->forward(Tensor::zeros({2, 1, 28, 28}));
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
  Tensor nbt = cnn->named_buffers()[2].second;
  EXPECT_EQ(nbt.dtype(), DType::i64);
  EXPECT_EQ(nbt.item(), 1);
}

TEST(Modules, ModelFlopsAndNames) {
  EXPECT_EQ(model_flops_per_sample("mlp"), 4012032.0);
  EXPECT_EQ(model_flops_per_sample("cnn"), 25446912.0);
  Generator gen(0);
  EXPECT_NE(error_of([&] { make_model("resnet", gen); }).find("resnet"), std::string::npos);
  EXPECT_THROW(model_flops_per_sample("x"), ValueError);
}

TEST(Modules, SequentialOrderAndNames) {
  Generator gen(3);
  Sequential s{std::make_shared<Linear>(4, 3, true, gen), std::make_shared<ReLU>()};
  s.push_back(std::make_shared<Linear>(3, 2, false, gen));
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(names_of(s.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));
  Tensor y = s.forward(Tensor::ones({5, 4}));
  EXPECT_EQ(y.shape(), (Shape{5, 2}));
  EXPECT_THROW(s.at(7), ValueError);
  EXPECT_THROW(Sequential().forward(y), ValueError);
}

TEST(Modules, FusingBatchNormEpiloguesKeepsNamesAndResults) {
  Generator g1(4), g2(4);
  auto plain = make_cnn(g1), fused = make_cnn(g2);
  EXPECT_EQ(fused->fuse_batchnorm_epilogues(), 2);
  EXPECT_EQ(fused->fuse_batchnorm_epilogues(), 0) << "fusing twice changes nothing";
  for (size_t i : {2, 3, 6, 7}) EXPECT_EQ((*fused)[i].type_name(), "Identity") << i;
  EXPECT_EQ((*fused)[10].type_name(), "ReLU") << "a ReLU after a Linear stays";
  auto* bn = dynamic_cast<BatchNormBase*>(fused->at(1).get());
  ASSERT_NE(bn, nullptr);
  EXPECT_TRUE(bn->epilogue().relu && bn->epilogue().max_pool);
  EXPECT_EQ(bn->epilogue().pool_kernel[0], 2);
  auto sp = plain->state_dict(), sf = fused->state_dict();
  ASSERT_EQ(sp.size(), sf.size());
  for (size_t i = 0; i < sp.size(); ++i) EXPECT_EQ(sp[i].first, sf[i].first);
  // A few SGD steps from the same initialisation: the same bits, then the same eval output.
  SGDOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  SGD opt_p(plain->parameters(), o), opt_f(fused->parameters(), o);
  Generator gx(7);
  for (int step = 0; step < 3; ++step) {
    Tensor x = rand_normal({6, 1, 28, 28}, 0, 1, gx);
    Tensor y = Tensor::from_vector(std::vector<int64_t>{1, 3, 5, 7, 9, 0}, {6});
    for (auto* pair : {&opt_p, &opt_f}) pair->zero_grad();
    ops::cross_entropy(plain->forward(x), y).backward();
    ops::cross_entropy(fused->forward(x), y).backward();
    opt_p.step();
    opt_f.step();
  }
  sp = plain->state_dict();
  sf = fused->state_dict();
  for (size_t i = 0; i < sp.size(); ++i)
    EXPECT_EQ(sp[i].second.to_vector<double>(), sf[i].second.to_vector<double>()) << sp[i].first;
  plain->eval();
  fused->eval();
  Tensor x = rand_normal({3, 1, 28, 28}, 0, 1, gx);
  EXPECT_EQ(plain->forward(x).to_vector<float>(), fused->forward(x).to_vector<float>());
  // Nested Sequentials are fused too; a BatchNorm without a ReLU after it is left alone.
  Sequential outer{std::make_shared<Sequential>(Sequential{std::make_shared<BatchNorm2d>(3), std::make_shared<ReLU>()}),
                   std::make_shared<BatchNorm2d>(3), std::make_shared<MaxPool2d>(2)};
  EXPECT_EQ(outer.fuse_batchnorm_epilogues(), 1);
  EXPECT_EQ(outer[2].type_name(), "MaxPool2d");
}

// ---- state_dict ----
TEST(Modules, StateDictRoundTrip) {
  Generator g1(1), g2(2);
  auto a = make_cnn(g1), b = make_cnn(g2);
  a->forward(Tensor::ones({2, 1, 28, 28}));  // moves running stats away from their init
  EXPECT_NE(a->state_dict()[0].second.to_vector<float>(), b->state_dict()[0].second.to_vector<float>());
  b->load_state_dict(a->state_dict());
  auto sa = a->state_dict(), sb = b->state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_FALSE(sa[i].second.is_same(sb[i].second)) << "values are copied, not shared";
    EXPECT_EQ(sa[i].second.to_vector<double>(), sb[i].second.to_vector<double>()) << sa[i].first;
  }
  a->eval();
  b->eval();
  Generator gx(9);
  Tensor x = rand_normal({3, 1, 28, 28}, 0, 1, gx);
  EXPECT_EQ(a->forward(x).to_vector<float>(), b->forward(x).to_vector<float>());
}

TEST(Modules, LoadErrorsNameTheEntry) {
  Generator gen(1);
  auto m = make_mlp(gen);
  NamedTensors st = m->state_dict();
  NamedTensors missing(st.begin() + 1, st.end());
  EXPECT_NE(error_of([&] { m->load_state_dict(missing); }).find("0.weight"), std::string::npos);
  NamedTensors wrong = st;
  wrong[3].second = Tensor::zeros({7});
  std::string e = error_of([&] { m->load_state_dict(wrong); });
  EXPECT_NE(e.find("2.bias"), std::string::npos) << e;
  EXPECT_NE(e.find("[7]"), std::string::npos) << e;
  NamedTensors extra = st;
  extra.emplace_back("9.weight", Tensor::zeros({1}));
  EXPECT_NE(error_of([&] { m->load_state_dict(extra); }).find("9.weight"), std::string::npos);
  EXPECT_NO_THROW(m->load_state_dict(missing, /*strict=*/false));
  NamedTensors dtype = st;
  dtype[0].second = Tensor::zeros({512, 784}, DType::f64);
  EXPECT_NE(error_of([&] { m->load_state_dict(dtype); }).find("0.weight"), std::string::npos);
}

// ---- clone, train/eval ----
TEST(Modules, CloneIsIndependent) {
  Generator gen(5);
  auto cnn = make_cnn(gen);
  cnn->eval();
  auto copy = cnn->clone();
  EXPECT_FALSE(copy->is_training());
  auto so = cnn->state_dict(), sc = copy->state_dict();
  ASSERT_EQ(so.size(), sc.size());
  for (size_t i = 0; i < so.size(); ++i) {
    EXPECT_EQ(so[i].first, sc[i].first);
    EXPECT_FALSE(so[i].second.is_same(sc[i].second)) << so[i].first;
    EXPECT_NE(so[i].second.data_ptr(), sc[i].second.data_ptr()) << so[i].first;
    EXPECT_EQ(so[i].second.to_vector<double>(), sc[i].second.to_vector<double>()) << so[i].first;
  }
  for (auto& p : copy->parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_FALSE(p.grad().defined());
  }
  // Changing the copy leaves the original alone, in parameters and in buffers.
  std::vector<float> before = so[0].second.to_vector<float>();
  sc[0].second.fill_(7.0);
  copy->train();
  copy->forward(Tensor::ones({2, 1, 28, 28}));
  EXPECT_EQ(so[0].second.to_vector<float>(), before);
  EXPECT_EQ(cnn->named_buffers()[2].second.item(), 0);
  EXPECT_EQ(copy->named_buffers()[2].second.item(), 1);
  EXPECT_FALSE(cnn->is_training());
  // The clone's Sequential children are new modules.
  EXPECT_NE(&(*static_cast<Sequential&>(*copy).at(0)), &(*cnn->at(0)));
}

TEST(Modules, TrainEvalSwitchesDropoutAndBatchNorm) {
  Generator gen(2);
  Sequential s{std::make_shared<Dropout>(0.5, gen), std::make_shared<BatchNorm1d>(4)};
  s.eval();
  EXPECT_FALSE(s[0].is_training());
  EXPECT_FALSE(s[1].is_training());
  Tensor x = Tensor::full({8, 4}, 3.0);
  // eval: dropout is identity, BN uses running stats (0, 1): y = x / sqrt(1 + eps)
  std::vector<float> y = s.forward(x).to_vector<float>();
  for (float v : y) EXPECT_NEAR(v, 3.0 / std::sqrt(1.0 + 1e-5), 1e-5);
  s.train();
  EXPECT_TRUE(s[0].is_training());
  Dropout d(0.5, gen);
  std::vector<float> z = d.forward(Tensor::ones({1000})).to_vector<float>();
  int zeros = 0;
  for (float v : z) {
    EXPECT_TRUE(v == 0.0f || std::fabs(v - 2.0f) < 1e-6);
    zeros += v == 0.0f;
  }
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
}

TEST(Modules, SmallLayersForward) {
  Generator gen(4);
  Embedding emb(6, 3, gen);
  Tensor idx = Tensor::from_vector(std::vector<int64_t>{5, 0, 5, 2}, {2, 2});
  Tensor e = emb.forward(idx);
  EXPECT_EQ(e.shape(), (Shape{2, 2, 3}));
  std::vector<float> w = emb.param("weight").to_vector<float>(), ev = e.to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(ev[j], w[5 * 3 + j]);
    EXPECT_EQ(ev[3 + j], w[j]);
    EXPECT_EQ(ev[9 + j], w[2 * 3 + j]);
  }
  EXPECT_THROW(emb.forward(Tensor::zeros({2})), ValueError);  // f32 indices
  Tensor x = Tensor::from_vector(std::vector<double>{-1, 0, 0.5, 2}, {1, 1, 2, 2});
  EXPECT_EQ(ReLU().forward(x).to_vector<float>(), (std::vector<float>{0, 0, 0.5f, 2}));
  std::vector<float> g = GELU().forward(x).to_vector<float>();
  EXPECT_NEAR(g[0], -0.15865525, 1e-6);  // x * Phi(x) at -1
  std::vector<float> gt = GELU(true).forward(x).to_vector<float>();
  EXPECT_NEAR(gt[0], -0.15880801, 1e-6);  // tanh approximation at -1
  EXPECT_EQ(Flatten().forward(x).shape(), (Shape{1, 4}));
  EXPECT_EQ(MaxPool2d(2).forward(x).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(AvgPool2d(2).forward(x).to_vector<float>(), (std::vector<float>{0.375f}));
  EXPECT_THROW(Linear(3, 2, true, gen).forward(Tensor::zeros({4, 5})), ValueError);
  EXPECT_THROW(Conv2d(3, 2, 3, 1, 0, true, gen).forward(Tensor::zeros({1, 2, 5, 5})), ValueError);
  EXPECT_THROW(BatchNorm2d(3).forward(Tensor::zeros({2, 3})), ValueError);
}

// ---- initialisation ----
TEST(Init, LinearAndConvBoundsAndStatistics) {
  Generator gen(11);
  Linear lin(1000, 300, true, gen);
  const double bound = 1.0 / std::sqrt(1000.0);
  std::vector<float> w = lin.param("weight").to_vector<float>();
  double mean = 0, sq = 0;
  for (float v : w) {
    EXPECT_LE(std::fabs(v), bound);
    mean += v;
    sq += double(v) * v;
  }
  mean /= w.size();
  double var = sq / w.size() - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02 * bound);
  EXPECT_NEAR(var, bound * bound / 3.0, 0.02 * bound * bound / 3.0);  // U(-b, b) variance b^2/3
  for (float v : lin.param("bias").to_vector<float>()) EXPECT_LE(std::fabs(v), bound);
  Conv2d conv(16, 8, 3, 1, 1, true, gen);
  const double cb = 1.0 / std::sqrt(16.0 * 9.0);
  double maxw = 0;
  for (float v : conv.param("weight").to_vector<float>()) maxw = std::max(maxw, double(std::fabs(v)));
  EXPECT_LE(maxw, cb);
  EXPECT_GT(maxw, 0.9 * cb);  // fills the range
  for (float v : conv.param("bias").to_vector<float>()) EXPECT_LE(std::fabs(v), cb);
}

TEST(Init, EmbeddingNormalAndNormDefaults) {
  Generator gen(12);
  Embedding emb(500, 64, gen);
  std::vector<float> w = emb.param("weight").to_vector<float>();
  double mean = 0, sq = 0;
  for (float v : w) { mean += v; sq += double(v) * v; }
  mean /= w.size();
  double sd = std::sqrt(sq / w.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sd, 1.0, 0.02);
  BatchNorm2d bn(5);
  EXPECT_EQ(bn.param("weight").to_vector<float>(), std::vector<float>(5, 1.0f));
  EXPECT_EQ(bn.param("bias").to_vector<float>(), std::vector<float>(5, 0.0f));
  EXPECT_EQ(bn.buffer("running_mean").to_vector<float>(), std::vector<float>(5, 0.0f));
  EXPECT_EQ(bn.buffer("running_var").to_vector<float>(), std::vector<float>(5, 1.0f));
  EXPECT_EQ(bn.buffer("num_batches_tracked").item(), 0);
  LayerNorm ln({3, 4});
  EXPECT_EQ(ln.param("weight").shape(), (Shape{3, 4}));
  EXPECT_EQ(ln.param("bias").to_vector<float>(), std::vector<float>(12, 0.0f));
}

TEST(Init, DeterministicPerSeed) {
  Generator a(42), b(42), c(43);
  auto ma = make_mlp(a), mb = make_mlp(b), mc = make_mlp(c);
  auto sa = ma->state_dict(), sb = mb->state_dict(), sc = mc->state_dict();
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].second.to_vector<float>(), sb[i].second.to_vector<float>()) << sa[i].first;
    EXPECT_NE(sa[i].second.to_vector<float>(), sc[i].second.to_vector<float>()) << sa[i].first;
  }
  // Each weight and bias is its own draw: the layers differ from one another.
  EXPECT_NE(sa[0].second.to_vector<float>()[0], sa[2].second.to_vector<float>()[0]);
}

// ---- against torch.nn ----
namespace {
// Loads reference weights into `m` (converted to f64), runs forward on x and backward of
// sum(y * r); compares y and the parameter gradients.
template <size_t NY, size_t NW, size_t NB>
void check_module(Module& m, const Tensor& x, const Tensor& r, const double (&y)[NY], const double (&gw)[NW],
                  const double (&gb)[NB], const NamedTensors& weights, const std::string& what) {
  m.to(DType::f64);
  NamedTensors state = m.state_dict();
  for (auto& w : weights)
    for (auto& s : state)
      if (s.first == w.first) s.second = w.second;
  m.load_state_dict(state);
  Tensor out = m.forward(x);
  expect_near(out, y, 1e-10, what + " forward");
  weighted_sum(out, r).backward();
  expect_near(m.param("weight").grad(), gw, 1e-10, what + " weight grad");
  expect_near(m.param("bias").grad(), gb, 1e-10, what + " bias grad");
}
}  // namespace

TEST(Reference, Linear) {
  using namespace nn_ref;
  Generator gen(0);
  Linear m(5, 3, true, gen);
  check_module(m, ref(linear_x, {4, 5}), ref(linear_r, {4, 3}), linear_y, linear_grad_weight, linear_grad_bias,
               {{"weight", ref(linear_weight, {3, 5})}, {"bias", ref(linear_bias, {3})}}, "Linear");
}

TEST(Reference, Conv2dPadded) {
  using namespace nn_ref;
  Generator gen(0);
  Conv2d m(2, 3, 3, 1, 1, true, gen);
  check_module(m, ref(conv_x, {2, 2, 5, 5}), ref(conv_r, {2, 3, 5, 5}), conv_y, conv_grad_weight, conv_grad_bias,
               {{"weight", ref(conv_weight, {3, 2, 3, 3})}, {"bias", ref(conv_bias, {3})}}, "Conv2d pad 1");
}

TEST(Reference, Conv2dStrided) {
  using namespace nn_ref;
  Generator gen(0);
  Conv2d m(2, 4, 3, 2, 0, true, gen);
  check_module(m, ref(conv_s2_x, {2, 2, 7, 7}), ref(conv_s2_r, {2, 4, 3, 3}), conv_s2_y, conv_s2_grad_weight,
               conv_s2_grad_bias, {{"weight", ref(conv_s2_weight, {4, 2, 3, 3})}, {"bias", ref(conv_s2_bias, {4})}},
               "Conv2d stride 2");
}

TEST(Reference, BatchNorm2dTrainThenEval) {
  using namespace nn_ref;
  BatchNorm2d m(3);
  check_module(m, ref(bn_train_x, {4, 3, 2, 3}), ref(bn_train_r, {4, 3, 2, 3}), bn_train_y, bn_train_grad_weight,
               bn_train_grad_bias, {{"weight", ref(bn_train_weight, {3})}, {"bias", ref(bn_train_bias, {3})}},
               "BatchNorm2d train");
  expect_near(m.buffer("running_mean"), bn_train_after_running_mean, 1e-10, "running_mean");
  expect_near(m.buffer("running_var"), bn_train_after_running_var, 1e-10, "running_var");
  EXPECT_EQ(m.buffer("num_batches_tracked").item(), 1);
  m.eval();
  expect_near(m.forward(ref(bn_eval_x, {2, 3, 2, 2})), bn_eval_y, 1e-10, "BatchNorm2d eval");
  EXPECT_EQ(m.buffer("num_batches_tracked").item(), 1);
}

TEST(Reference, LayerNorm) {
  using namespace nn_ref;
  LayerNorm m({6});
  check_module(m, ref(ln_x, {3, 6}), ref(ln_r, {3, 6}), ln_y, ln_grad_weight, ln_grad_bias,
               {{"weight", ref(ln_weight, {6})}, {"bias", ref(ln_bias, {6})}}, "LayerNorm");
}

// ---- modules + optimizer ----
// A small MLP fits a fixed batch with each optimizer (modules, autograd, optimizers, clipping).
TEST(Modules, SmallMlpFitsAFixedBatch) {
  for (int which = 0; which < 3; ++which) {
    Generator gen(7);
    Sequential mlp{std::make_shared<Linear>(20, 32, true, gen), std::make_shared<ReLU>(),
                   std::make_shared<Linear>(32, 5, true, gen)};
    Tensor x = rand_normal({40, 20}, 0, 1, gen);
    std::vector<int64_t> labels(40);
    for (int i = 0; i < 40; ++i) labels[i] = i % 5;
    Tensor y = Tensor::from_vector(labels, {40});
    std::unique_ptr<Optimizer> opt;
    if (which == 0) {
      SGDOptions o;
      o.lr = 0.1;
      o.momentum = 0.9;
      opt = std::make_unique<SGD>(mlp.parameters(), o);
    } else {
      AdamOptions o;
      o.lr = 0.01;
      if (which == 1) opt = std::make_unique<Adam>(mlp.parameters(), o);
      else opt = std::make_unique<AdamW>(mlp.parameters(), o);
    }
    CosineAnnealingLR sched(*opt, 60);
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
      opt->zero_grad();
      Tensor loss = ops::cross_entropy(mlp.forward(x), y);
      loss.backward();
      clip_grad_norm(mlp.parameters(), 5.0);
      opt->step();
      sched.step();
      (step == 0 ? first : last) = loss.item();
    }
    EXPECT_LT(last, 0.1 * first) << opt->type_name();
  }
}

TEST(Modules, ToAnotherCpuDevice) {
  Generator gen(8);
  auto mlp = make_mlp(gen);
  Tensor x = rand_normal({4, 784}, 0, 1, gen);
  std::vector<float> y0 = mlp->forward(x).to_vector<float>();
  Tensor w = mlp->parameters()[0];
  mlp->to(Device(DeviceKind::CPU, 1));
  EXPECT_EQ(w.device(), Device(DeviceKind::CPU, 1));  // existing handles see the move
  Tensor x1 = x.to(Device(DeviceKind::CPU, 1));
  std::vector<float> y1 = mlp->forward(x1).to_vector<float>();
  EXPECT_EQ(y0, y1);
  // The optimizer keeps its state on the parameters' device.
  SGDOptions o;
  o.momentum = 0.9;
  SGD opt(mlp->parameters(), o);
  ops::sum(mlp->forward(x1)).backward();
  opt.step();
  for (auto& [n, t] : opt.state_tensors())
    if (n.find("momentum_buffer") != std::string::npos) {
      EXPECT_EQ(t.device(), Device(DeviceKind::CPU, 1)) << n;
    }
  EXPECT_EQ(opt.state_tensors().size(), 2u + 6u);
}
