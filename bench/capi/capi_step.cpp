// The C API's cost per training step: tandem_train on the cnn (batch 64, SGD as tandem-train runs it)
// against the same step in C++ on the same model (forward, cross-entropy, backward, optimizer step),
// rounds alternating the two; prints one JSON line with the median step of each and their ratio.
//   OMP_NUM_THREADS=1 tandem-bench-capi [rounds] [steps per round]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "nn/config/run_config.h"
#include "runtime/autograd.h"
#include "runtime/ops/loss.h"
#include "runtime/random.h"
#include "tandem/tandem_c.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

namespace {

const char* kConfig =
    "model: {type: cnn}\n"
    "loss: {type: cross_entropy}\n"
    "optimizer: {type: sgd, parameters: {learning_rate: 0.05, momentum: 0.9, weight_decay: 0.0005}}\n"
    "training: {seed: 0}\n";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7, steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const std::string path = "/tmp/tandem-bench-capi.yaml";
  std::ofstream(path) << kConfig;
  const int64_t batch = 64;
  Generator gen(1);
  Tensor x = rand_uniform({batch, 1, 28, 28}, -1.0, 1.0, gen);
  std::vector<int64_t> classes(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) classes[static_cast<size_t>(i)] = (i * 7) % 10;
  Tensor y = Tensor::from_vector(classes, {batch});
  const int64_t xs[4] = {batch, 1, 28, 28}, ys[1] = {batch};

  tandem_model_t model = nullptr;
  if (tandem_model_create(&model, path.c_str(), "cpu") != TANDEM_SUCCESS) {
    std::fprintf(stderr, "tandem-bench-capi: %s\n", tandem_last_error());
    return 1;
  }
  nn::config::RunConfig cfg = nn::config::load_run_config(path);
  Generator init(0);
  auto net = nn::config::build_model(cfg.model, init);
  auto opt = nn::config::build_optimizer(cfg.optimizer, net->parameters());

  auto c_step = [&] {
    float loss = 0;
    if (tandem_train(model, x.data_ptr(), TANDEM_FLOAT32, 4, xs, y.data_ptr(), TANDEM_INT64, 1, ys, &loss) !=
        TANDEM_SUCCESS) {
      std::fprintf(stderr, "tandem-bench-capi: %s\n", tandem_last_error());
      std::exit(1);
    }
  };
  auto cpp_step = [&] {
    Tensor loss = nn::config::compute_loss(cfg.loss, net->forward(x), y);
    (void)loss.item();  // the C API reads the loss too
    loss.backward();
    opt->step();
    opt->zero_grad();
  };
  auto time_steps = [&](auto&& step) {
    auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) step();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / steps;
  };
  for (int s = 0; s < 3; ++s) c_step(), cpp_step();  // warm-up
  std::vector<double> c_ms, cpp_ms;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2) {
      c_ms.push_back(time_steps(c_step));
      cpp_ms.push_back(time_steps(cpp_step));
    } else {
      cpp_ms.push_back(time_steps(cpp_step));
      c_ms.push_back(time_steps(c_step));
    }
  }
  tandem_model_destroy(model);
  const double c = median(c_ms), cpp = median(cpp_ms);
  std::printf("{\"bench\":\"capi_step\",\"model\":\"cnn\",\"batch\":%lld,\"rounds\":%d,\"steps\":%d,"
              "\"capi_step_ms\":%.3f,\"cpp_step_ms\":%.3f,\"capi_over_cpp\":%.4f}\n",
              static_cast<long long>(batch), rounds, steps, c, cpp, c / cpp);
  return 0;
}
