// EMA of weights: the averaging rule against hand-computed values, update every k steps, buffers
// copied, low-precision parameters averaged in f32, swap in/out for evaluation, state round trip.
#include <gtest/gtest.h>

#include "nn/ema.h"
#include "nn/layers.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
std::shared_ptr<Sequential> net() {
  Generator g(1);
  auto s = std::make_shared<Sequential>();
  s->emplace_back<Linear>(2, 2, true, g);
  s->emplace_back<BatchNorm1d>(2);
  return s;
}
void set_all(Module& m, float v) {
  for (auto& p : m.parameters()) p.fill_(v);
}
}  // namespace

TEST(EMA, AveragesEveryKSteps) {
  auto m = net();
  set_all(*m, 1.0f);
  EMAOptions o;
  o.decay = 0.75;
  o.every = 2;
  EMA ema(*m, o);
  set_all(*m, 5.0f);
  ema.update(*m);  // step 1: skipped
  EXPECT_EQ(ema.num_updates(), 0);
  EXPECT_EQ(ema.shadow()[0].second.to_vector<float>()[0], 1.0f);
  ema.update(*m);  // step 2: 0.75*1 + 0.25*5 = 2
  EXPECT_EQ(ema.shadow()[0].second.to_vector<float>()[0], 2.0f);
  set_all(*m, 10.0f);
  ema.update(*m);
  ema.update(*m);  // 0.75*2 + 0.25*10 = 4
  EXPECT_EQ(ema.shadow()[0].second.to_vector<float>()[3], 4.0f);
  EXPECT_EQ(ema.num_updates(), 2);
  EXPECT_EQ(ema.steps(), 4);
}

TEST(EMA, BuffersAreCopiedAndLowPrecisionAveragedInF32) {
  auto m = net();
  m->to(DType::bf16);
  set_all(*m, 1.0f);
  EMAOptions o;
  o.decay = 0.999;
  EMA ema(*m, o);
  EXPECT_EQ(ema.shadow()[0].second.dtype(), DType::f32);
  set_all(*m, 2.0f);
  Tensor rm = m->named_buffers()[0].second;
  rm.fill_(3.0);
  ema.update(*m);
  // 0.999 + 0.002 = 1.001: representable in f32 to 1e-7, would round away in bf16.
  EXPECT_NEAR(ema.shadow()[0].second.to_vector<float>()[0], 1.001f, 1e-6);
  bool found = false;
  for (auto& [n, t] : ema.shadow())
    if (n == m->named_buffers()[0].first) {
      found = true;
      EXPECT_EQ(t.to_vector<float>()[0], 3.0f);
    }
  EXPECT_TRUE(found);
}

TEST(EMA, ScopeSwapsInAndOut) {
  auto m = net();
  set_all(*m, 1.0f);
  EMA ema(*m, {0.5, 1});
  set_all(*m, 3.0f);
  ema.update(*m);  // 2
  {
    EMA::Scope s(ema, *m);
    EXPECT_EQ(m->parameters()[0].to_vector<float>()[0], 2.0f);
  }
  EXPECT_EQ(m->parameters()[0].to_vector<float>()[0], 3.0f);
  NamedTensors st = ema.state_tensors();
  EMA other(*m, {0.5, 1});
  other.load_state_tensors(st);
  EXPECT_EQ(other.shadow()[0].second.to_vector<float>()[0], 2.0f);
  EXPECT_EQ(other.steps(), 1);
  st.pop_back();
  EXPECT_THROW(other.load_state_tensors(st), ValueError);
}
