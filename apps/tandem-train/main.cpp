// tandem-train: trains the Fashion-MNIST mlp or cnn, or a GPT on text (apps/common/gpt_train.h), in
// one process, DDP under mpirun, or DataParallel, and reports test accuracy (validation loss),
// throughput, peak memory and a parameter hash (console lines from rank 0, JSON-lines metrics with
// --metrics).
#include <CLI/CLI.hpp>

#include "apps/common/array_data.h"
#include "apps/common/cli.h"
#include "apps/common/config_file.h"
#include "train/factory.h"
#include "apps/common/export_model.h"
#include "apps/common/gpt_train.h"
#include "train/host_memory.h"
#include "apps/common/loop_flags.h"
#include "train/lr_schedule.h"
#include "train/mode_auto.h"
#include "apps/common/run_services.h"
#include "train/threads.h"
#include "train/device_choice.h"
#include "train/train_features.h"
#include "nn/onnx/onnx_export.h"
#include "apps/common/rank_inputs.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/data/dataset.h"
#include "runtime/env_settings.h"
#ifdef TANDEM_HAVE_MPI
#include "comm/mpi/mpi_comm.h"
#endif

using namespace tandem;

namespace {

int run_training(app::TrainConfig cfg) {
  app::keep_freed_host_memory();
  const app::ThreadChoice threads = app::apply_threads(cfg.threads);  // before any parallel region
  env::check();                            // a bad TANDEM_* value stops the run here, before any kernel
  const char* cpu_isa = cpu_isa_in_use();
  const app::ModeDecision mode = app::decide_mode_here(cfg);  // --mode auto: single, dp or ddp, and why
  cfg.mode = mode.mode;
  cfg.devices = mode.devices;
  cfg.mode_reason = mode.reason;
  app::ParallelConfig pc{cfg.mode, cfg.devices, cfg.sync_bn, cfg.accumulation_steps, cfg.ddp};
  const monitor::DeviceChoice choice = app::resolve_device_choice(cfg);
  pc.device = choice.device;
  pc.device_reason = choice.reason;
  auto model = app::make_run_model(cfg);  // initialised on the CPU (the same weights on every device)
  // --save-onnx: a model the exporter cannot write fails now, on every rank, not after the training.
  if (!cfg.save_onnx.empty() && cfg.model.type != "onnx") {
    try {
      (void)nn::onnx::export_onnx(app::exported_model(*model));
    } catch (const NotSupportedError& e) {
      TANDEM_FAIL(NotSupported, "--save-onnx {}: model type {}: {}", cfg.save_onnx, cfg.model.type, e.what());
    }
  }
  model->to(pc.device);
  app::ParallelSetup ps = app::setup_parallel(pc, model);  // collective (ddp)
  if (cfg.global_batch_size > 0) cfg.batch_size = app::per_rank_batch(cfg.global_batch_size, ps.world_size());
  app::Logger log(ps.rank(), cfg.quiet);
  app::apply_loop_settings(cfg, ps, pc.device, log);  // --log-level, --memory-limit
  if (!mode.warning.empty()) log.warn("{}", mode.warning);
  app::log_environment(log);  // TANDEM_* typos warned about; the non-default settings at debug level
  log.info("mode {}: {}", enum_name(mode.mode), mode.reason);
  app::scale_lr_with_world(cfg, ps.world_size());  // --lr-scale-with-world
  log.info("tandem-train: model {} on {}, mode {} ({} rank{}), optimizer {} (lr {}, momentum {}, weight decay {}), "
           "{} epochs, batch {} per rank x {} accumulation, amp {}, {} thread{} ({}), CPU kernels {}",
           cfg.model.type, pc.device.str(), enum_name(cfg.mode), ps.world_size(), ps.world_size() > 1 ? "s" : "",
           enum_name(cfg.optimizer.type), cfg.optimizer.learning_rate, cfg.optimizer.momentum,
           cfg.optimizer.weight_decay, cfg.epochs, cfg.batch_size, cfg.accumulation_steps, enum_name(cfg.amp), threads.count,
           threads.count > 1 ? "s" : "", threads.reason, cpu_isa);
  const std::vector<Tensor> parameters = model->parameters();
  int64_t weights = 0;
  for (const Tensor& p : parameters) weights += p.numel();
  log.debug("model {}: {} parameters in {} tensors", cfg.model.type, weights, parameters.size());
  if (!cfg.config_path.empty())
    log.info("tandem-train: settings from {} under the command line's flags; lr schedule {}", cfg.config_path,
             enum_name(cfg.lr_scheduler.type));
  TANDEM_CHECK(cfg.loss.type == nn::config::LossType::CrossEntropy || !cfg.data_file.empty(),
               "--loss {}: the Fashion-MNIST classifiers train with cross_entropy; the other losses are for your "
               "arrays (--data)", enum_name(cfg.loss.type));
  TANDEM_CHECK(cfg.model.type != "gpt" || cfg.data_file.empty(),
               "--data: tandem-train's gpt trains on text (--text-dir); give another model for the arrays");
  if (cfg.model.type == "gpt") return app::train_gpt(cfg, ps, pc.device);  // text instead of Fashion-MNIST
  std::unique_ptr<data::BatchSource> train_batches, test_batches;
  const app::World world{ps.comm};
  if (!cfg.data_file.empty()) {  // the user's arrays
    const app::ArrayData arrays = app::open_array_data(cfg);
    app::check_arrays_fit(cfg, arrays, *ps.inner);
    train::ArraySelection none = arrays.train;
    none.count = 0;
    if (!arrays.val) cfg.eval = false;  // nothing to evaluate on
    train_batches = train::array_batches(cfg, arrays.train, world, true);
    test_batches = train::array_batches(cfg, arrays.val.value_or(none), world, false);
  } else {
    train_batches = app::Trainer::image_batches(cfg, data::load_fashion_mnist(cfg.data_dir, data::Split::Train), world,
                                                true);
    test_batches = app::Trainer::image_batches(cfg, data::load_fashion_mnist(cfg.data_dir, data::Split::Test), world,
                                               false);
  }
  auto optimizer = app::make_optimizer(cfg, ps.model->parameters());
  app::log_loop_options(log, cfg, ps, *optimizer);
  app::FullTrainer trainer(cfg, ps, std::move(optimizer), std::move(train_batches), std::move(test_batches));
  log.info("tandem-train: device {}", choice.reason);
  if (!cfg.resume_dir.empty()) trainer.resume(cfg.resume_dir);
  app::RunServices services(cfg, trainer, pc.device, log);  // progress, --trace, step records, SIGTERM, --status-port
  app::TrainResult r = trainer.fit();
  services.finish();
  ps.sync_params();  // ZeRO: the last step's parameters, gathered, for the export below
  if (!cfg.save_onnx.empty() && ps.rank() == 0) app::save_evaluated_onnx(trainer, *ps.inner, cfg.save_onnx, log);
  std::string hash = trainer.param_hash();
  if (r.evaluated && !r.classification)
    log.result("validation loss {:.6g} on {} samples ({} epochs, {} steps, {:.0f} samples/s, world size {}, "
               "param_hash {})",
               r.test_loss, r.test_samples, r.epochs, r.steps, r.samples_per_s, ps.world_size(), hash);
  else if (r.evaluated)
    log.result("test accuracy {:.4f} on {} test images ({} epochs, {} steps, {:.0f} samples/s, world size {}, "
               "param_hash {})",
               r.test_acc, r.test_samples, r.epochs, r.steps, r.samples_per_s, ps.world_size(), hash);
  else
    log.result("done: {} epochs, {} steps, {:.0f} samples/s, world size {} (no evaluation), param_hash {}", r.epochs,
               r.steps, r.samples_per_s, ps.world_size(), hash);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  app::TrainConfig cfg;
  CLI::App cli{"tandem-train: data-parallel training of a Fashion-MNIST classifier or a GPT on text (--model)", "tandem-train"};
  return app::run_guarded("tandem-train", [&] {
    // The model's defaults and a --config file, then the flags into the same settings. A bad file
    // fails here (exit 1), alike on every rank and before any communication; a bad flag is a usage
    // error (exit 2).
    // A rank on a node that cannot see an input file says so first (apps/common/rank_inputs.h).
    app::check_rank_inputs(app::rank_inputs_from_flags(argc, argv));
    app::apply_settings_before_flags(cfg, argc, argv);
    app::add_train_flags(cli, cfg);
    if (auto rc = app::parse_cli(cli, argc, argv)) return *rc;
    app::check_rank_inputs(app::rank_inputs_from_config(cfg));
#ifdef TANDEM_HAVE_MPI
    // A dead or desynchronised peer: end the whole job, or mpirun waits on the others forever.
    try {
      return run_training(cfg);
    } catch (const CommError& e) {
      comm::abort_job(std::string("tandem-train: communication error: ") + e.what());
    } catch (const Error& e) {
      if (app::resolve_mode(cfg.mode) == app::ParallelMode::DDP) comm::abort_job(std::string("tandem-train: error: ") + e.what());
      throw;
    }
#else
    return run_training(cfg);
#endif
  });
}
