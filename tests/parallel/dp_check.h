// The DataParallel check shared by the cpu:k and cuda:k tests.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/optim.h"
#include "nn/parallel/data_parallel.h"
#include "tests/parallel/parallel_util.h"

namespace tandem::testing {

// DataParallel over `devices` against the same model trained alone on devices[0], for a few SGD or
// Adam steps (to 1e-5 relative); then the replicas equal the module, each on its own device.
inline void check_dp_matches_single(const std::vector<Device>& devices, int64_t batch, bool adam) {
  const Device first = devices[0];
  auto ref = small_mlp(31);
  ref->to(first);
  auto model = small_mlp(31);
  model->to(first);
  nn::parallel::DataParallel dp(model, devices);
  std::unique_ptr<nn::Optimizer> opt, opt_ref;
  if (adam) {
    nn::AdamOptions o;
    o.lr = 1e-2;
    opt = std::make_unique<nn::Adam>(dp.parameters(), o);
    opt_ref = std::make_unique<nn::Adam>(ref->parameters(), o);
  } else {
    nn::SGDOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    opt = std::make_unique<nn::SGD>(dp.parameters(), o);
    opt_ref = std::make_unique<nn::SGD>(ref->parameters(), o);
  }
  const std::string what = "DataParallel over " + std::to_string(devices.size()) + " device(s) from " + first.str();
  for (int step = 0; step < 4; ++step) {
    Batch b = make_batch(200 + static_cast<uint64_t>(step), {batch, 12}, 5);
    // Even steps scatter from the host, odd ones from devices[0] (device-to-device copies on GPUs).
    Tensor x = step % 2 ? b.x.to(first) : b.x, y = b.y.to(first);
    opt_ref->zero_grad();
    Tensor loss_ref = ops::cross_entropy(ref->forward(b.x.to(first)), y);
    loss_ref.backward();
    opt_ref->step();

    opt->zero_grad();
    Tensor out = dp.forward(x);
    ASSERT_EQ(out.shape(), (Shape{batch, 5}));
    ASSERT_EQ(out.device(), first);
    Tensor loss = ops::cross_entropy(out, y);
    EXPECT_NEAR(loss.item(), loss_ref.item(), 1e-5 * std::abs(loss_ref.item()) + 1e-6) << what << " step " << step;
    loss.backward();
    opt->step();
  }
  expect_same_parameters(*model, *ref, 1e-5, what);
  // Replicas catch up over the group (a broadcast) at the next forward.
  dp.sync_replicas();
  {
    NoGradGuard no_grad;
    dp.forward(make_batch(1, {batch, 12}, 5).x);
  }
  for (size_t k = 1; k < dp.num_replicas(); ++k) {
    expect_same_parameters(*dp.replica(k), *model, 0.0, "replica " + std::to_string(k));
    for (auto& [n, p] : dp.replica(k)->named_parameters()) EXPECT_EQ(p.device(), devices[k]) << n;
  }
}

}  // namespace tandem::testing
