// Fused multi-tensor optimizers against the per-tensor ones: bitwise equal in f32 (plain, with
// a folded power-of-two unscale, with clipping), master weights equal an f32 reference, state
// names interchange with the unfused optimizers, and the chunking covers tensors past one chunk.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>

#include "nn/amp/grad_scaler.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/fused_adam.h"
#include "nn/optim/fused_sgd.h"
#include "nn/optim/sgd.h"
#include "runtime/backend/multi_tensor.h"
#include "runtime/random.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
// Shapes include one past a chunk (65536 elements) so chunk boundaries are exercised.
std::vector<Shape> shapes(bool large) {
  std::vector<Shape> s = {{7, 5}, {5}, {1}, {33, 17}, {3, 3, 3, 3}};
  if (large) s.push_back({70001});
  return s;
}

std::vector<Tensor> make_params(const std::vector<Shape>& sh, DType dtype, uint64_t seed) {
  std::vector<Tensor> out;
  Generator gen(seed);
  for (const auto& s : sh) {
    Tensor t = rand_uniform(s, -1.0, 1.0, gen, dtype);
    t.set_requires_grad(true);
    out.push_back(t);
  }
  return out;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const auto& p : ps) {
    Tensor c = p.clone();
    c.set_requires_grad(true);
    out.push_back(c);
  }
  return out;
}

// Sets the same fresh gradients (times `factor`) on both lists; the third parameter gets none
// at step 1 (parameters without a gradient are skipped).
void set_grads(std::vector<Tensor>& a, std::vector<Tensor>& b, uint64_t seed, int step, double factor = 1.0) {
  Generator gen(seed);
  for (size_t i = 0; i < a.size(); ++i) {
    if (i == 2 && step == 1) continue;
    Tensor g = rand_normal(a[i].shape(), 0.0, factor, gen, a[i].dtype());
    a[i].set_grad(g.clone());
    if (b[i].dtype() == g.dtype()) b[i].set_grad(g.clone());
    else {
      Tensor gb = Tensor::empty(g.shape(), b[i].dtype());
      gb.copy_(g);
      b[i].set_grad(gb);
    }
  }
}

void expect_bitwise(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].nbytes(), b[i].nbytes());
    EXPECT_EQ(std::memcmp(a[i].data_ptr(), b[i].data_ptr(), a[i].nbytes()), 0) << what << ": tensor " << i;
  }
}

void expect_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double rtol, const char* what) {
  for (size_t i = 0; i < a.size(); ++i) {
    auto va = a[i].to_vector<double>(), vb = b[i].to_vector<double>();
    for (size_t k = 0; k < va.size(); ++k)
      ASSERT_NEAR(va[k], vb[k], rtol * (1.0 + std::abs(va[k]))) << what << ": tensor " << i << " element " << k;
  }
}

using Make = std::function<std::unique_ptr<Optimizer>(const std::vector<Tensor>&, const FusedOptions*)>;

std::vector<std::pair<std::string, Make>> optimizers() {
  SGDOptions sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-3;
  SGDOptions nesterov = sgd;
  nesterov.nesterov = true;
  SGDOptions plain;
  plain.lr = 0.1;
  AdamOptions adam;
  adam.lr = 1e-2;
  adam.weight_decay = 1e-2;
  auto sgd_of = [](SGDOptions o) -> Make {
    return [o](const std::vector<Tensor>& p, const FusedOptions* f) -> std::unique_ptr<Optimizer> {
      if (f) return std::make_unique<FusedSGD>(p, o, *f);
      return std::make_unique<SGD>(p, o);
    };
  };
  return {{"sgd_momentum", sgd_of(sgd)},
          {"sgd_nesterov", sgd_of(nesterov)},
          {"sgd_plain", sgd_of(plain)},
          {"adam",
           [adam](const std::vector<Tensor>& p, const FusedOptions* f) -> std::unique_ptr<Optimizer> {
             if (f) return std::make_unique<FusedAdam>(p, adam, *f);
             return std::make_unique<Adam>(p, adam);
           }},
          {"adamw", [adam](const std::vector<Tensor>& p, const FusedOptions* f) -> std::unique_ptr<Optimizer> {
             if (f) return std::make_unique<FusedAdamW>(p, adam, *f);
             return std::make_unique<AdamW>(p, adam);
           }}};
}
}  // namespace

TEST(FusedOptim, EqualsUnfusedBitwise) {
  for (auto& [name, make] : optimizers()) {
    SCOPED_TRACE(name);
    auto ref = make_params(shapes(true), DType::f32, 1);
    auto fus = clones(ref);
    FusedOptions fo;
    auto opt_ref = make(ref, nullptr);
    auto opt_fus = make(fus, &fo);
    for (int step = 1; step <= 3; ++step) {
      set_grads(ref, fus, 100 + step, step);
      opt_ref->step();
      optimizer_step(*opt_fus);
    }
    expect_bitwise(ref, fus, "params");
    // State names and values interchange with the unfused optimizer.
    NamedTensors sr = opt_ref->state_tensors(), sf = opt_fus->state_tensors();
    ASSERT_EQ(sr.size(), sf.size());
    for (size_t i = 0; i < sr.size(); ++i) {
      EXPECT_EQ(sr[i].first, sf[i].first);
      EXPECT_EQ(std::memcmp(sr[i].second.data_ptr(), sf[i].second.data_ptr(), sr[i].second.nbytes()), 0)
          << sr[i].first;
    }
  }
}

TEST(FusedOptim, FoldedUnscaleAndClipEqualUnfused) {
  // Small tensors: per-chunk partial sums equal per-tensor sums, so even the clip is bitwise.
  for (bool large : {false, true}) {
    for (auto& [name, make] : optimizers()) {
      SCOPED_TRACE(name + (large ? " large" : " small"));
      auto ref = make_params(shapes(large), DType::f32, 2);
      auto fus = clones(ref);
      FusedOptions fo;
      fo.max_grad_norm = 0.5;
      auto opt_ref = make(ref, nullptr);
      auto opt_fus = make(fus, &fo);
      GradScaler sr, sf;
      for (int step = 1; step <= 3; ++step) {
        set_grads(ref, fus, 200 + step, step, sr.get_scale());
        sr.unscale_(*opt_ref);
        clip_grad_norm(ref, 0.5);
        EXPECT_TRUE(sr.step(*opt_ref));
        sr.update();
        EXPECT_TRUE(sf.step(*opt_fus));  // unscale + clip folded into the fused update
        sf.update();
      }
      if (large) expect_close(ref, fus, 1e-6, "params");
      else expect_bitwise(ref, fus, "params");
      EXPECT_GT(static_cast<FusedOptimizer&>(*opt_fus).last_grad_norm(), 0.5);
    }
  }
}

TEST(FusedOptim, MasterWeightsMatchAnF32Reference) {
  for (DType low : {DType::f16, DType::bf16}) {
    for (auto& [name, make] : optimizers()) {
      SCOPED_TRACE(name + " " + dtype_name(low));
      auto ref = make_params(shapes(false), DType::f32, 3);  // f32 reference = the master weights
      std::vector<Tensor> model;
      for (auto& r : ref) {
        Tensor m = Tensor::empty(r.shape(), low);
        m.copy_(r);
        m.set_requires_grad(true);
        model.push_back(m);
        r.copy_(m);  // the master starts from the low-precision model's values
      }
      FusedOptions fo;
      fo.master_weights = true;
      auto opt_ref = make(ref, nullptr);
      auto opt_fus = make(model, &fo);
      auto& fused = static_cast<FusedOptimizer&>(*opt_fus);
      ASSERT_TRUE(fused.has_master_weights());
      for (int step = 1; step <= 3; ++step) {
        // The reference sees the low-precision gradients widened to f32.
        set_grads(model, ref, 300 + step, step);
        opt_ref->step();
        fused.step();
      }
      std::vector<Tensor> masters;
      for (size_t i = 0; i < model.size(); ++i) masters.push_back(fused.param_groups()[0].params[i]);
      expect_bitwise(ref, masters, "masters");
      for (size_t i = 0; i < model.size(); ++i) {
        Tensor rounded = Tensor::empty(ref[i].shape(), low);
        rounded.copy_(ref[i]);
        EXPECT_EQ(std::memcmp(rounded.data_ptr(), model[i].data_ptr(), rounded.nbytes()), 0) << "model " << i;
      }
      // Save and restore into a fresh fused optimizer (master copies included).
      NamedTensors state = fused.state_tensors();
      std::vector<Tensor> model2;
      for (auto& m : model) {
        Tensor c = Tensor::zeros(m.shape(), low);
        c.set_requires_grad(true);
        model2.push_back(c);
      }
      auto opt2 = make(model2, &fo);
      opt2->load_state_tensors(state);
      expect_bitwise(model, model2, "model restored from master state");
      set_grads(model, model2, 400, 2);
      fused.step();
      static_cast<FusedOptimizer&>(*opt2).step();
      expect_bitwise(model, model2, "a step after restore");
    }
  }
}

TEST(FusedOptim, SkipsWhenFoundInf) {
  auto ps = make_params(shapes(false), DType::f32, 4);
  auto before = clones(ps);
  AdamOptions o;
  FusedAdam opt(ps, o);
  GradScaler scaler;
  set_grads(ps, before, 500, 2);
  ps[3].grad().data<float>()[7] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(scaler.step(opt));
  EXPECT_TRUE(scaler.found_inf());
  expect_bitwise(ps, before, "params untouched by a skipped step");
  EXPECT_EQ(opt.step_count(), 0);
}

TEST(MultiTensor, UnscaleChecksEveryChunk) {
  std::vector<Tensor> grads = {Tensor::full({70001}, 4.0), Tensor::full({3}, 8.0, DType::f16),
                               Tensor::full({5}, 2.0, DType::bf16)};
  Tensor found = Tensor::zeros({1});
  kernels::multi_tensor_unscale(kCPU)(grads, 0.25, found);
  EXPECT_EQ(found.item(), 0.0);
  EXPECT_EQ(grads[0].to_vector<float>()[70000], 1.0f);
  EXPECT_EQ(grads[1].to_vector<float>()[2], 2.0f);
  EXPECT_EQ(grads[2].to_vector<float>()[4], 0.5f);
  grads[0].data<float>()[69999] = std::nanf("");  // in the second chunk
  kernels::multi_tensor_unscale(kCPU)(grads, 1.0, found);
  EXPECT_EQ(found.item(), 1.0);
  Tensor found2 = Tensor::zeros({1});
  double s = kernels::multi_tensor_sum_squares_check(kCPU)({grads[1], grads[2]}, found2);
  EXPECT_EQ(s, 3 * 4.0 + 5 * 0.25);
  EXPECT_EQ(found2.item(), 0.0);
}
