// The CUDA multi-tensor kernels (kernels/cuda/multi_tensor_apply.cu) under the SIMT emulator
// against the CPU ones: unscale + check, sum of squares, fused SGD/Adam (plain, folded factor,
// bf16 model with f32 masters, skipped on found_inf), with lists long enough to split into
// several chunks and launches; FusedAdam end to end on a sim device, and nn::Adam there (its
// multi-tensor step) against the per-parameter kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "nn/optim/adam.h"
#include "nn/optim/fused_adam.h"
#include "runtime/backend/multi_tensor.h"
#include "runtime/backend/optim.h"
#include "runtime/random.h"

using namespace tandem;

namespace {
const Device kSim{DeviceKind::SIM, 0};

std::vector<Tensor> randoms(const std::vector<Shape>& shapes, DType dt, uint64_t seed, double lo = -1, double hi = 1) {
  Generator g(seed);
  std::vector<Tensor> out;
  for (const auto& s : shapes) out.push_back(rand_uniform(s, lo, hi, g, dt));
  return out;
}
std::vector<Tensor> to_sim(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (const auto& t : v) out.push_back(t.to(kSim));
  return out;
}
void expect_same(const std::vector<Tensor>& cpu, const std::vector<Tensor>& sim, const char* what) {
  for (size_t i = 0; i < cpu.size(); ++i) {
    Tensor s = sim[i].to(kCPU);
    EXPECT_EQ(std::memcmp(cpu[i].data_ptr(), s.data_ptr(), cpu[i].nbytes()), 0) << what << " tensor " << i;
  }
}
// The update kernels may contract a*b+c into FMAs differently from the CPU loop (g++ and nvcc
// both contract by default in C++), so their results are compared to a few ulps.
void expect_close(const std::vector<Tensor>& cpu, const std::vector<Tensor>& sim, const char* what) {
  for (size_t i = 0; i < cpu.size(); ++i) {
    auto c = cpu[i].to_vector<double>(), s = sim[i].to(kCPU).to_vector<double>();
    for (size_t k = 0; k < c.size(); ++k)
      ASSERT_NEAR(s[k], c[k], 1e-6 * (std::abs(c[k]) + 1e-3)) << what << " tensor " << i << " element " << k;
  }
}
// Nine tensors, two of them past one emulated chunk (1024): several launches of <= 4 tensors.
const std::vector<Shape> kShapes = {{3000}, {7, 5}, {1}, {33, 17}, {2500}, {4}, {9, 9}, {0}, {129}};
}  // namespace

// Every element of every tensor zeroed, for each element size (f64, f32, bf16, u8), on both backends;
// the sizes cross chunks and launches, and memory next to the tensors is left alone.
TEST(MultiTensorSim, ZeroClearsEveryTensorOnBothBackends) {
  for (Device dev : {kCPU, kSim}) {
    std::vector<Tensor> list;
    for (DType dt : {DType::f64, DType::f32, DType::bf16})
      for (Tensor& t : randoms(kShapes, dt, 7)) list.push_back(t.to(dev));
    Tensor bytes = Tensor::full({1031}, 7.0, DType::u8, dev);
    // A view into the middle of a larger buffer: its neighbours must survive.
    Tensor outer = randoms({{40}}, DType::f32, 8)[0].to(dev);
    Tensor inner = Tensor::from_blob(static_cast<float*>(outer.data_ptr()) + 3, {30}, DType::f32, dev, nullptr);
    list.push_back(bytes);
    list.push_back(inner);
    const std::vector<float> before = outer.to(kCPU).to_vector<float>();
    kernels::multi_tensor_zero(dev)(list);
    for (size_t i = 0; i < list.size(); ++i)
      for (double v : list[i].to(kCPU).to_vector<double>()) ASSERT_EQ(v, 0.0) << dev.str() << " tensor " << i;
    const std::vector<float> after = outer.to(kCPU).to_vector<float>();
    for (size_t k = 0; k < after.size(); ++k)
      if (k < 3 || k >= 33) {
        EXPECT_EQ(after[k], before[k]) << dev.str() << " neighbour " << k;
      }
  }
}

// Each pair cast as the single-tensor cast does it, on both backends, f32 <-> bf16/f16 and f64 -> f32;
// a destination that is a view at an odd element offset (no 16-byte packs) leaves its neighbours.
TEST(MultiTensorSim, CastMatchesTheSingleTensorCast) {
  const std::vector<std::pair<DType, DType>> pairs{
      {DType::f32, DType::bf16}, {DType::f32, DType::f16}, {DType::bf16, DType::f32}, {DType::f64, DType::f32}};
  for (auto [from, to] : pairs)
    for (Device dev : {kCPU, kSim}) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to) + " on " + dev.str());
      std::vector<Tensor> src = randoms(kShapes, from, 9, -300, 300), dst;
      for (Tensor& t : src) {
        t = t.to(dev);
        dst.push_back(Tensor::empty(t.shape(), to, dev));
      }
      Tensor outer = Tensor::full({40}, 5.0, to, dev);
      const size_t esize = outer.element_size();
      src.push_back(randoms({{30}}, from, 10)[0].to(dev));
      dst.push_back(Tensor::from_blob(static_cast<char*>(outer.data_ptr()) + 3 * esize, {30}, to, dev, nullptr));
      kernels::multi_tensor_cast(dev)(src, dst);
      for (size_t i = 0; i < src.size(); ++i) {
        Tensor want = Tensor::empty(src[i].shape(), to);
        want.copy_(src[i].to(kCPU));  // the single-tensor cast, on the CPU
        Tensor got = dst[i].to(kCPU);
        EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()), 0) << "pair " << i;
      }
      std::vector<double> o = outer.to(kCPU).to_vector<double>();
      for (size_t k = 0; k < o.size(); ++k) {
        if (k < 3 || k >= 33) {
          EXPECT_EQ(o[k], 5.0) << "neighbour " << k;
        }
      }
    }
  Tensor a = Tensor::zeros({4}), b = Tensor::zeros({4}, DType::bf16), c = Tensor::zeros({4}, DType::f16);
  EXPECT_THROW(kernels::multi_tensor_cast(kCPU)({a, a}, {b, c}), Error) << "two destination dtypes";
  EXPECT_THROW(kernels::multi_tensor_cast(kSim)({a.to(kSim)}, {Tensor::zeros({5}, DType::bf16, kSim)}), Error)
      << "numel differs";
}

TEST(MultiTensorSim, UnscaleAndSumSquaresMatchCpu) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto cpu = randoms(kShapes, dt, 1, -100, 100);
    auto sim = to_sim(cpu);
    Tensor fc = Tensor::zeros({1}), fs = Tensor::zeros({1}, DType::f32, kSim);
    double sc = kernels::multi_tensor_sum_squares_check(kCPU)(cpu, fc);
    double ss = kernels::multi_tensor_sum_squares_check(kSim)(sim, fs);
    EXPECT_NEAR(ss, sc, 1e-12 * sc);
    kernels::multi_tensor_unscale(kCPU)(cpu, 1.0 / 1024, fc);
    kernels::multi_tensor_unscale(kSim)(sim, 1.0 / 1024, fs);
    expect_same(cpu, sim, "unscaled");
    EXPECT_EQ(fs.item(), 0.0);
    Tensor bad = sim[4].to(kCPU);
    bad.data_ptr();
    std::vector<double> v = bad.to_vector<double>();
    v[2400] = std::numeric_limits<double>::infinity();  // in the third chunk of tensor 4
    sim[4].copy_(Tensor::from_vector(v, bad.shape(), dt));
    kernels::multi_tensor_unscale(kSim)(sim, 1.0, fs);
    EXPECT_EQ(fs.item(), 1.0);
    Tensor fs2 = Tensor::zeros({1}, DType::f32, kSim);
    kernels::multi_tensor_sum_squares_check(kSim)(sim, fs2);
    EXPECT_EQ(fs2.item(), 1.0);
  }
}

TEST(MultiTensorSim, AdamAndSgdMatchCpu) {
  for (bool master : {false, true}) {
    SCOPED_TRACE(master ? "bf16 model, f32 masters" : "f32");
    const DType gd = master ? DType::bf16 : DType::f32;
    auto params = randoms(kShapes, DType::f32, 2);
    auto grads = randoms(kShapes, gd, 3);
    auto m = randoms(kShapes, DType::f32, 4, 0, 0.1), v = randoms(kShapes, DType::f32, 5, 0, 0.1);
    std::vector<Tensor> model;
    if (master)
      for (auto& p : params) model.push_back(Tensor::zeros(p.shape(), gd));
    kernels::MultiTensorAdamArgs a{params, grads, m, v, model, {}, 0.25, Tensor()};
    for (size_t i = 0; i < params.size(); ++i)
      a.hypers.push_back(adam_hyper(1e-2 * (1 + i), 0.9, 0.999, 1e-8, i % 2 ? 0.01 : 0.0, i % 3 == 0, 1 + i));
    kernels::MultiTensorAdamArgs s{to_sim(params), to_sim(grads), to_sim(m), to_sim(v), to_sim(model), a.hypers,
                                   0.25, Tensor::zeros({1}, DType::f32, kSim)};
    kernels::multi_tensor_adam(kCPU)(a);
    kernels::multi_tensor_adam(kSim)(s);
    expect_close(a.params, s.params, "adam params");
    expect_close(a.exp_avgs, s.exp_avgs, "adam exp_avg");
    expect_close(a.exp_avg_sqs, s.exp_avg_sqs, "adam exp_avg_sq");
    if (master) expect_close(a.model_params, s.model_params, "adam model");

    kernels::MultiTensorSgdArgs b{a.params, grads, m, model, {}, 1.0, Tensor()};
    for (size_t i = 0; i < params.size(); ++i) {
      SgdHyper h;
      h.lr = 0.1;
      h.momentum = 0.9;
      h.nesterov = i % 2;
      h.weight_decay = 1e-3;
      b.hypers.push_back(h);
    }
    kernels::MultiTensorSgdArgs t{s.params, s.grads, s.exp_avgs, s.model_params, b.hypers, 1.0, Tensor()};
    kernels::multi_tensor_sgd(kCPU)(b);
    kernels::multi_tensor_sgd(kSim)(t);
    expect_close(b.params, t.params, "sgd params");
    expect_close(b.momentum_bufs, t.momentum_bufs, "sgd momentum");
  }
}

TEST(MultiTensorSim, FoundInfSkipsTheUpdateOnDevice) {
  auto params = to_sim(randoms(kShapes, DType::f32, 6));
  auto before = params;
  std::vector<Tensor> snapshot;
  for (auto& p : params) snapshot.push_back(p.to(kCPU));
  kernels::MultiTensorSgdArgs t{params, to_sim(randoms(kShapes, DType::f32, 7)), {}, {}, {}, 1.0,
                                Tensor::ones({1}, DType::f32, kSim)};
  t.hypers.resize(params.size());
  kernels::multi_tensor_sgd(kSim)(t);
  expect_same(snapshot, params, "untouched");
}

TEST(MultiTensorSim, FusedAdamOnSimEqualsAdamOnCpu) {
  auto cpu = randoms(kShapes, DType::f32, 8);
  auto sim = to_sim(cpu);
  for (auto* list : {&cpu, &sim})
    for (auto& p : *list) p.set_requires_grad(true);
  nn::AdamOptions o;
  o.lr = 1e-2;
  nn::Adam ref(cpu, o);
  nn::FusedAdam fused(sim, o);
  for (int step = 0; step < 3; ++step) {
    auto g = randoms(kShapes, DType::f32, 100 + step);
    for (size_t i = 0; i < cpu.size(); ++i) {
      cpu[i].set_grad(g[i]);
      sim[i].set_grad(g[i].to(kSim));
    }
    ref.step();
    fused.step();
  }
  expect_close(cpu, sim, "params");
}

// nn::Adam / AdamW on a device update all their parameters through multi-tensor launches: the same
// bits as the per-parameter kernel called for each in turn, with two groups (their own lr and weight
// decay), a parameter without a gradient (skipped, its state never made) and three steps (the bias
// corrections move).
TEST(MultiTensorSim, AdamOnADeviceEqualsThePerParameterKernel) {
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "AdamW" : "Adam");
    auto params = to_sim(randoms(kShapes, DType::f32, 20));
    for (auto& p : params) p.set_requires_grad(true);
    std::vector<Tensor> ref;
    for (auto& p : params) ref.push_back(p.to(kCPU).to(kSim));
    nn::AdamOptions o;
    o.lr = 1e-2;
    nn::ParamGroup first{{params.begin(), params.begin() + 5}, 1e-2, 0.1};
    nn::ParamGroup second{{params.begin() + 5, params.end()}, 3e-3, 0.0};
    std::unique_ptr<nn::Optimizer> opt;
    if (decoupled) opt = std::make_unique<nn::AdamW>(std::vector<nn::ParamGroup>{first, second}, o);
    else opt = std::make_unique<nn::Adam>(std::vector<nn::ParamGroup>{first, second}, o);
    std::vector<Tensor> m, v;
    for (auto& p : ref) {
      m.push_back(Tensor::zeros(p.shape(), p.dtype(), kSim));
      v.push_back(Tensor::zeros(p.shape(), p.dtype(), kSim));
    }
    const size_t no_grad = 2;
    for (int step = 1; step <= 3; ++step) {
      auto g = to_sim(randoms(kShapes, DType::f32, 200 + step));
      for (size_t i = 0; i < params.size(); ++i) {
        if (i == no_grad) continue;
        params[i].set_grad(g[i]);
        const double lr = i < 5 ? 1e-2 : 3e-3, wd = i < 5 ? 0.1 : 0.0;
        kernels::optim_adam_step(kSim)(ref[i], g[i], m[i], v[i],
                                       adam_hyper(lr, o.beta1, o.beta2, o.eps, wd, decoupled, step));
      }
      opt->step();
    }
    std::vector<Tensor> ref_host;
    for (auto& r : ref) ref_host.push_back(r.to(kCPU));
    expect_same(ref_host, params, "params");
    const nn::NamedTensors state = opt->state_tensors();
    auto find = [&](const std::string& name) {
      for (const auto& [n, t] : state)
        if (n == name) return t;
      return Tensor();
    };
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string at = "state." + std::to_string(i) + ".";
      if (i == no_grad) {
        EXPECT_FALSE(find(at + "exp_avg").defined()) << "parameter " << i << " has no gradient";
        continue;
      }
      expect_same({m[i].to(kCPU)}, {find(at + "exp_avg")}, "exp_avg");
      expect_same({v[i].to(kCPU)}, {find(at + "exp_avg_sq")}, "exp_avg_sq");
      EXPECT_EQ(find(at + "step").item(), 3.0) << "parameter " << i;
    }
  }
}
