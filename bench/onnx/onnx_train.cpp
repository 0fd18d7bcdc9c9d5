// Training steps per second of a model imported from ONNX, on synthetic batches: random inputs of
// the model's input shape (the batch given), random class labels, cross entropy, SGD with momentum.
// Prints one JSON line. For the comparison with PyTorch on the same model, on one thread:
//   tandem-bench-onnx --model resnet18.onnx --batch 32 --threads 1
//   bench/onnx/torch_resnet18.py train --batch 32 --threads 1
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "nn/init.h"
#include "nn/onnx/onnx_model.h"
#include "nn/optim/sgd.h"
#include "runtime/ops/loss.h"
#include "runtime/random.h"
#include "runtime/threads.h"

using namespace tandem;

int main(int argc, char** argv) {
  std::string path;
  int64_t batch = 32, steps = 20, warmup = 3, classes = 10;
  int threads = 1;
  CLI::App app{"tandem-bench-onnx: training steps/s of an imported ONNX model on synthetic data"};
  app.add_option("--model", path, "the .onnx file")->required()->check(CLI::ExistingFile);
  app.add_option("--batch", batch, "samples per step");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--classes", classes, "the model's outputs (labels drawn below this)");
  app.add_option("--threads", threads, "CPU threads");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);

  nn::onnx::OnnxModel model(path);
  const std::vector<nn::onnx::OnnxModel::TensorSpec> inputs = model.inputs();  // kept: dims is a member
  Shape shape;
  for (int64_t d : inputs.at(0).dims) shape.push_back(d < 0 ? batch : d);
  shape[0] = batch;
  Generator gen(0);
  Tensor x = Tensor::zeros(shape);
  nn::init::normal_(x, 0.0, 1.0, gen);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i) % classes;
  const Tensor y = Tensor::from_vector(labels, {batch});
  nn::SGDOptions o;
  o.lr = 0.01;
  o.momentum = 0.9;
  nn::SGD opt(model.parameters(), o);
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = ops::cross_entropy(model.forward(x), y);
    loss.backward();
    opt.step();
    return loss.item();
  };
  for (int64_t s = 0; s < warmup; ++s) step();
  const auto t0 = std::chrono::steady_clock::now();
  double last = 0;
  for (int64_t s = 0; s < steps; ++s) last = step();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"bench\":\"onnx_train\",\"model\":\"%s\",\"batch\":%lld,\"threads\":%d,\"steps\":%lld,"
              "\"steps_per_s\":%.4f,\"loss\":%.4f}\n",
              path.c_str(), static_cast<long long>(batch), threads, static_cast<long long>(steps),
              static_cast<double>(steps) / secs, last);
  return 0;
}
