// Fashion-MNIST training under autocast: test accuracy per epoch for --amp off|f16|bf16 (f16 with
// the GradScaler), plain or fused Adam, optional gradient checkpointing. One JSON line per epoch.
//   tandem-bench-amp-train --model cnn --amp bf16 --epochs 5 [--fused] [--checkpoint-activations]
#include <chrono>
#include <cstdio>
#include <optional>

#include <CLI/CLI.hpp>

#include "runtime/data/default_dirs.h"
#include "train/precision_step.h"
#include "nn/checkpoint_sequential.h"
#include "nn/models.h"
#include "nn/optim/adam.h"
#include "nn/optim/fused_adam.h"
#include "runtime/autocast.h"
#include "runtime/data/dataset.h"
#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/ops.h"

using namespace tandem;

int main(int argc, char** argv) {
  std::string model_name = "cnn";
  nn::config::Amp amp_mode = nn::config::Amp::Off;
  int64_t epochs = 5, batch = 128, limit = 0;
  double lr = 1e-3;
  bool fused = false, ckpt = false;
  CLI::App app{"Fashion-MNIST under autocast"};
  app.add_option("--model", model_name)->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--amp", amp_mode, "off | f16 | bf16")
      ->transform(CLI::CheckedTransformer(enum_map<nn::config::Amp>(), CLI::ignore_case));
  app.add_option("--epochs", epochs);
  app.add_option("--batch", batch);
  app.add_option("--lr", lr);
  app.add_option("--limit", limit, "train on the first N samples only (0: all)");
  app.add_flag("--fused", fused, "FusedAdam");
  app.add_flag("--checkpoint-activations", ckpt);
  CLI11_PARSE(app, argc, argv);

  train::PrecisionStep amp(amp_mode);
  manual_seed(0);
  Generator init(0);
  auto model = nn::make_model(model_name, init);
  const data::Layout layout = model_name == "cnn" ? data::Layout::Image : data::Layout::Flat;
  data::Dataset train = data::load_fashion_mnist(data::kFashionMnistDir, data::Split::Train);
  data::Dataset test = data::load_fashion_mnist(data::kFashionMnistDir, data::Split::Test);
  if (limit > 0) {
    train.images = train.images.narrow0(0, limit);
    train.labels = train.labels.narrow0(0, limit);
  }
  data::LoaderOptions lo;
  lo.batch_size = batch;
  lo.layout = layout;
  data::BatchLoader loader(train, std::make_shared<data::RandomSampler>(train.size(), 0), lo);
  data::BatchLoader test_loader(test, std::make_shared<data::SequentialSampler>(test.size()), lo);

  nn::AdamOptions ao;
  ao.lr = lr;
  std::unique_ptr<nn::Optimizer> opt;
  if (fused) opt = std::make_unique<nn::FusedAdam>(model->parameters(), ao);
  else opt = std::make_unique<nn::Adam>(model->parameters(), ao);
  nn::GradScaler& scaler = amp.scaler();
  int64_t skipped = 0;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    auto t0 = std::chrono::steady_clock::now();
    model->train();
    loader.set_epoch(epoch);
    double loss_sum = 0;
    for (int64_t b = 0; b < loader.num_batches(); ++b) {
      data::Batch bt = loader.batch(b);
      Tensor loss;
      {
        std::optional<AutocastGuard> ac;
        if (amp.dtype()) ac.emplace(*amp.dtype());
        Tensor logits = ckpt ? nn::checkpoint_sequential(static_cast<nn::Sequential&>(*model), 3, bt.x)
                             : model->forward(bt.x);
        loss = ops::cross_entropy(logits, bt.y);
      }
      loss_sum += loss.item();
      scaler.scale(loss).backward();
      if (!scaler.step(*opt)) ++skipped;
      scaler.update();
      opt->zero_grad();
    }
    model->eval();
    int64_t correct = 0;
    {
      NoGradGuard ng;
      test_loader.set_epoch(0);
      for (int64_t b = 0; b < test_loader.num_batches(); ++b) {
        data::Batch bt = test_loader.batch(b);
        std::optional<AutocastGuard> ac;
        if (amp.dtype()) ac.emplace(*amp.dtype());
        auto pred = ops::argmax(model->forward(bt.x), 1).to_vector<int64_t>();
        auto y = bt.y.to_vector<int64_t>();
        for (size_t i = 0; i < y.size(); ++i) correct += pred[i] == y[i];
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"bench\":\"amp_train\",\"model\":\"%s\",\"amp\":\"%s\",\"fused\":%s,\"epoch\":%lld,"
                "\"train_loss\":%.4f,\"test_acc\":%.4f,\"scale\":%g,\"skipped_steps\":%lld,\"seconds\":%.1f}\n",
                model_name.c_str(), enum_name(amp_mode), fused ? "true" : "false", static_cast<long long>(epoch + 1),
                loss_sum / static_cast<double>(loader.num_batches()), double(correct) / double(test.size()),
                scaler.get_scale(), static_cast<long long>(skipped), secs);
    std::fflush(stdout);
  }
}
