// Training flags and their parsing.
#include "apps/common/cli.h"

#include <iostream>

namespace tandem::app {

void add_train_flags(CLI::App& app, TrainConfig& cfg) {
  app.add_option("--model", cfg.model, "model: mlp (784-512-512-10) or cnn (2 conv + 2 linear)")
      ->check(CLI::IsMember({"mlp", "cnn"}))
      ->capture_default_str();
  app.add_option("--epochs", cfg.epochs, "epochs over the training set")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", cfg.batch_size, "samples per step and process")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", cfg.lr, "peak learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--momentum", cfg.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--optimizer", cfg.optimizer, "sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))
      ->capture_default_str();
  app.add_option("--weight-decay", cfg.weight_decay, "L2 (sgd, adam) or decoupled (adamw) weight decay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--lr-schedule", cfg.lr_schedule, "cosine (per step, down to 0) or constant")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  app.add_option("--seed", cfg.seed, "seed of initialisation and shuffling")->capture_default_str();
  app.add_option("--threads", cfg.threads, "Eigen/OpenMP threads (0: OpenMP's default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-steps", cfg.max_steps, "stop after this many steps (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag_callback("--no-eval", [&cfg] { cfg.eval = false; }, "skip the test-set evaluation");
  app.add_option("--eval-batch-size", cfg.eval_batch_size, "samples per evaluation batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--data-dir", cfg.data_dir, "folder with the Fashion-MNIST IDX files")->capture_default_str();
  app.add_option("--metrics", cfg.metrics_path, "write JSON-lines metrics to FILE");
  app.add_flag("--quiet", cfg.quiet, "no per-epoch lines");
}

std::optional<int> parse_cli(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": " << e.what() << "\n\n" << app.help();
    return 2;
  }
  return std::nullopt;
}

}  // namespace tandem::app
