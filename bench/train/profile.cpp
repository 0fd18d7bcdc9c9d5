// Per-layer forward/backward timings.
#include "bench/train/profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/autograd.h"
#include "runtime/ops.h"

namespace tandem::bench {

namespace {

double median_ms(int repeats, const std::function<void()>& setup, const std::function<void()>& timed) {
  std::vector<double> ms;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms caches and allocator
    setup();
    auto t0 = std::chrono::steady_clock::now();
    timed();
    double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) ms.push_back(dt);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

void profile_layers(nn::Sequential& model, nn::Optimizer& opt, const Tensor& x, const Tensor& y, int repeats) {
  Tensor in = x;  // this layer's input (values from the layers before it)
  double total = 0;
  for (size_t i = 0; i < model.size(); ++i) {
    nn::Module& layer = model[i];
    const bool first = i == 0;  // the model input needs no gradient, as in training
    Tensor xin, out;
    double fwd = median_ms(
        repeats, [&] { xin = first ? in : in.detach().set_requires_grad(true); }, [&] { out = layer(xin); });
    Tensor grad_out = Tensor::ones(out.shape());
    double bwd = median_ms(
        repeats,
        [&] {
          opt.zero_grad();
          xin = first ? in : in.detach().set_requires_grad(true);
          out = layer(xin);
        },
        [&] {
          if (out.requires_grad()) out.backward(grad_out);
        });
    total += fwd + bwd;
    nlohmann::json j{{"layer", i},           {"type", layer.type_name()}, {"out_shape", out.shape()},
                     {"forward_ms", fwd},    {"backward_ms", bwd}};
    std::printf("%s\n", j.dump().c_str());
    NoGradGuard no_grad;
    in = layer(in.detach());
  }
  Tensor logits = in.detach().set_requires_grad(true), loss;
  double loss_ms = median_ms(
      repeats, [&] { loss = Tensor(); },
      [&] {
        loss = ops::cross_entropy(logits, y);
        loss.backward();
      });
  Tensor probe = model.forward(x);  // fills every parameter's gradient once for the optimizer
  ops::cross_entropy(probe, y).backward();
  double step_ms = median_ms(repeats, [] {}, [&] { opt.step(); });
  total += loss_ms + step_ms;
  nlohmann::json j{{"loss_forward_backward_ms", loss_ms}, {"optimizer_step_ms", step_ms}, {"sum_ms", total}};
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace tandem::bench
