// Training flags and their parsing.
#include "apps/common/cli.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <string>
#include <vector>

#include "apps/common/cli_checks.h"
#include "apps/common/config_file.h"
#include "apps/common/gpt_cli.h"
#include "apps/common/loop_flags.h"
#include "apps/common/operations.h"
#include "nn/model_registry.h"
#include "runtime/spelling.h"
#include "tandem/version.h"

namespace tandem::app {

namespace {

// The registered models tandem-train has data for (nn/model_registry.h).
std::vector<std::string> trainable_model_types() {
  std::vector<std::string> types = nn::model_types("fashion-mnist");
  for (const std::string& t : nn::model_types("text")) types.push_back(t);
  return types;
}

std::string model_flag_help() {
  std::string help = "model (a --config file sets a model's own parameters), or a FILE.onnx exported from PyTorch "
                     "(docs/onnx.md; its input [N, 784] or [N, 1, 28, 28] for Fashion-MNIST):";
  for (const std::string& t : trainable_model_types()) {
    const nn::ModelEntry& e = nn::model_entry(t);
    help += fmt::format("\n  {} - {} [{}]", t, e.summary, e.dataset == "text" ? "text of --text-dir" : e.dataset);
  }
  return help;
}

}  // namespace

void add_train_flags(CLI::App& app, TrainConfig& cfg) {
  // Read before the flags (apply_settings_before_flags); declared here for --help and the usage check.
  app.add_option("--config", cfg.config_path,
                 "a run-config YAML file (model, loss, optimizer, lr_scheduler, training and ddp blocks, "
                 "TorchFort's layout); flags given on the command line override it");
  // A registered type, or a FILE.onnx (apply_settings_before_flags has already read it into cfg.model).
  const std::vector<std::string> types = trainable_model_types();
  app.add_option_function<std::string>(
         "--model", [&cfg](const std::string& m) { if (!is_onnx_file(m)) cfg.model.type = m; }, model_flag_help())
      ->check([types](const std::string& m) -> std::string {
        if (is_onnx_file(m) || std::find(types.begin(), types.end(), m) != types.end()) return "";
        return m + " not in " + or_list(types) + " or a FILE.onnx";
      })
      ->type_name("TYPE|FILE.onnx")
      ->default_str(cfg.model.type == "onnx" ? cfg.model.filename : cfg.model.type);
  app.add_option("--epochs", cfg.epochs, "epochs over the training set")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--batch-size", cfg.batch_size, "samples per step and process")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--global-batch-size", cfg.global_batch_size,
                 "samples per step over all ranks (sets --batch-size to this / ranks; keeps a resume on another "
                 "world size exact)")
      ->check(kPositive);
  app.add_option("--lr", cfg.optimizer.learning_rate, "peak learning rate")->check(kPositive)->capture_default_str();
  app.add_option("--momentum", cfg.optimizer.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  add_enum_option(app, "--optimizer", cfg.optimizer.type, "sgd, adam or adamw");
  app.add_option("--weight-decay", cfg.optimizer.weight_decay, "L2 (sgd, adam) or decoupled (adamw) weight decay")
      ->check(kNonNegative)
      ->capture_default_str();
  using nn::config::ScheduleType;
  add_enum_option(app, "--lr-schedule", cfg.lr_scheduler.type,
                  "cosine (per step, down to 0), step (x --lr-gamma every --lr-step-size steps) or constant (a "
                  "--config file may give cosine_annealing or linear_warmup)",
                  {ScheduleType::Cosine, ScheduleType::Step, ScheduleType::Constant});
  add_schedule_flags(app, cfg);
  app.add_option("--seed", cfg.seed, "seed of initialisation and shuffling")->check(kNonNegative)->capture_default_str();
  app.add_option("--device", cfg.device,
                 "auto (cuda:<local rank> where each rank on the node has a GPU, else cpu), cpu, cuda or cuda:N")
      ->check([](const std::string& d) -> std::string {
        if (d == "auto" || d == "cpu" || d == "cuda" || d.rfind("cuda:", 0) == 0) return "";
        return "must be auto, cpu, cuda or cuda:N";
      })
      ->capture_default_str();
  app.add_option("--threads", cfg.threads, "Eigen/OpenMP threads (0: OpenMP's default)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--max-steps", cfg.max_steps, "stop after this many steps (0: no limit)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_flag_callback("--no-eval", [&cfg] { cfg.eval = false; }, "skip the test-set evaluation");
  app.add_option("--eval-batch-size", cfg.eval_batch_size, "samples per evaluation batch")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--data-dir", cfg.data_dir, "folder with the Fashion-MNIST IDX files")->capture_default_str();
  // The user's arrays (docs/data.md) instead of Fashion-MNIST.
  CLI::Option* data = app.add_option("--data", cfg.data_file,
                                     "train on your arrays: FILE.npy, .npz, .h5 or .hdf5 (read by rows, each rank "
                                     "its own), with --inputs and --labels naming them")
                          ->check(CLI::ExistingFile);
  app.add_option("--inputs", cfg.data_inputs, "with --data: the model's input arrays, in order (x,mask)")
      ->delimiter(',')
      ->needs(data)
      ->capture_default_str();
  app.add_option("--labels", cfg.data_labels, "with --data: the array of labels or targets")
      ->needs(data)
      ->capture_default_str();
  CLI::Option* val = app.add_option("--val-data", cfg.val_data_file,
                                    "with --data: validation arrays of the same names in FILE")
                         ->check(CLI::ExistingFile)
                         ->needs(data);
  app.add_option("--val-fraction", cfg.val_fraction, "with --data: validate on the last fraction F of its rows")
      ->check(CLI::Range(0.0, 0.9))
      ->needs(data)
      ->excludes(val);
  add_enum_option(app, "--loss", cfg.loss.type,
                  "cross_entropy (labels: class indices; accuracy reported) or, with --data, mse, l1 or "
                  "bce_with_logits (targets of the output's shape; the validation loss reported)");
  app.add_option("--metrics", cfg.metrics_path, "write JSON-lines metrics to FILE");
  app.add_option("--metrics-every", cfg.metrics_every, "with --metrics: a step record every N steps (0: epochs only)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_flag("--quiet", cfg.quiet, "no per-epoch lines");
  add_loop_flags(app, cfg);
  app.set_version_flag("--version", std::string(app.get_name()) + " " + tandem::version(), "print the version and exit");

  add_enum_option(app, "--mode", cfg.mode,
                  "auto (ddp under mpirun with > 1 rank, dp for several GPUs in one process or --devices, else "
                  "single; the choice and its reason are logged), single, ddp (one process per rank under mpirun) "
                  "or dp (--devices)");
  app.add_option("--devices", cfg.devices,
                 "dp: comma-separated devices of one kind, e.g. cpu:0,cpu:1 or cuda:0,cuda:1");
  app.add_flag("--sync-bn", cfg.sync_bn, "ddp: BatchNorm statistics over all ranks (SyncBatchNorm)");
  app.add_option("--bucket-cap-mb", cfg.ddp.bucket_cap_mb, "ddp: gradient bucket size in MiB")
      ->check(kPositive)
      ->capture_default_str();
  add_ddp_flags(app, cfg);
  app.add_option("--accumulation-steps", cfg.accumulation_steps, "micro-batches per optimizer step")
      ->check(kPositive)
      ->capture_default_str();
  add_enum_option(app, "--amp", cfg.amp, "mixed precision: off, f16 (with loss scaling) or bf16");
  app.add_option("--grad-clip", cfg.grad_clip, "clip the global gradient norm to this (0: off)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_flag("--checkpoint-activations{2}", cfg.checkpoint_activations,
               "recompute activations in backward (checkpoint_sequential; =N: N segments, default 2)");
  app.add_option("--ema", cfg.ema_decay, "keep an EMA of the weights with this decay and evaluate with it")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--save", cfg.save_dir, "write checkpoints to DIR/step-N");
  app.add_option("--save-every", cfg.save_every, "steps between checkpoints (0: only at the end)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--resume", cfg.resume_dir, "continue from a checkpoint folder (DIR/step-N)");
  app.add_option("--save-onnx", cfg.save_onnx,
                 "write the trained model as ONNX to this file at the end (rank 0): a --model FILE.onnx with its "
                 "trained weights, or mlp, cnn, sequential and gpt exported (docs/onnx.md)");
  app.add_flag_callback("--no-stop-on-nonfinite", [&cfg] { cfg.stop_on_nonfinite = false; },
                        "log a nan/inf loss and go on (default: stop with an error naming the step)");
  add_operations_flags(app, cfg);
  add_gpt_flags(app, cfg);

  // Combinations that make no sense are usage errors (exit 2), not run-time failures.
  app.final_callback([&app, &cfg] {
    check_gpt_flags(app, cfg);
    if (cfg.lr_scheduler.type == nn::config::ScheduleType::Step && cfg.lr_scheduler.step_size < 1)
      throw CLI::ValidationError("--lr-schedule step", "needs --lr-step-size N (optimizer steps), N > 0");
    if (cfg.mode == ParallelMode::DP && cfg.devices.empty())
      throw CLI::ValidationError("--mode dp", "needs --devices, e.g. --devices cpu:0,cpu:1 or cuda:0,cuda:1");
    if (!cfg.devices.empty() && (cfg.mode == ParallelMode::Single || cfg.mode == ParallelMode::DDP))
      throw CLI::ValidationError("--devices", "only applies to --mode dp");
    if (cfg.sync_bn && cfg.mode != ParallelMode::DDP && cfg.mode != ParallelMode::Auto)
      throw CLI::ValidationError("--sync-bn", "only applies to --mode ddp");
    if (!cfg.devices.empty() && cfg.device != "auto" && cfg.device != "cpu")
      throw CLI::ValidationError("--device", "--mode dp places replicas with --devices; leave --device out");
    if (cfg.save_every > 0 && cfg.save_dir.empty())
      throw CLI::ValidationError("--save-every", "needs --save DIR");
  });
}

namespace {

// "; did you mean --max-steps?" for each argument the parser left over that looks like a misspelt
// flag (at most two edits from a real one); empty when none does.
std::string misspelt_flags(const CLI::App& app) {
  std::vector<std::string> flags;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
    for (const std::string& n : o->get_snames()) flags.push_back("-" + n);
  }
  std::string hints;
  for (const std::string& arg : app.remaining()) {
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string flag = arg.substr(0, arg.find('='));  // --max-step=5 names --max-step
    if (const std::string near = closest_spelling(flag, flags); !near.empty() && near != flag)
      hints += "; did you mean " + near + "?";
  }
  return hints;
}

}  // namespace

std::optional<int> parse_cli(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line and a pointer, not the page of usage above which the reason scrolled away.
    std::cerr << app.get_name() << ": " << e.what() << misspelt_flags(app) << "\n"
              << "Run with --help for more information.\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace tandem::app
