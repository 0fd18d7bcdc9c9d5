// Flags bound to nn::config::ScheduleConfig, nn::config::OptimizerConfig and nn::parallel::DDPOptions.
#include "apps/common/loop_flags.h"

namespace tandem::app {

void add_schedule_flags(CLI::App& app, TrainConfig& cfg) {
  app.add_option("--lr-step-size", cfg.schedule.step_size, "--lr-schedule step: optimizer steps between lr drops")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr-gamma", cfg.schedule.gamma, "--lr-schedule step: factor of each drop")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup-steps", cfg.schedule.warmup_steps,
                 "linear warmup over N optimizer steps (lr x (s+1)/(N+1)) before the schedule")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--lr-scale-with-world", cfg.lr_scale_with_world,
               "linear scaling rule: the peak lr times the world size (the global batch grows with it)");
  app.add_flag("--fused", cfg.optimizer.fused, "the fused multi-tensor optimizer (one pass over all parameters)");
}

void add_ddp_flags(CLI::App& app, TrainConfig& cfg) {
  app.add_flag("--find-unused-parameters", cfg.ddp.find_unused_parameters,
               "ddp: search each forward's graph for parameters that get no gradient (reduced as zeros)");
  app.add_flag("--gradient-as-bucket-view", cfg.ddp.gradient_as_bucket_view,
               "ddp: gradients live in the bucket buffers (no copy in or out)");
  app.add_flag("--static-graph", cfg.ddp.static_graph,
               "ddp: the set of used parameters is the same every step (found once, then checked)");
  app.add_flag_callback("--no-broadcast-buffers", [&cfg] { cfg.ddp.broadcast_buffers = false; },
                        "ddp: do not broadcast rank 0's buffers (BatchNorm statistics) before each forward");
}

void log_loop_options(const Logger& log, const TrainConfig& cfg, const ParallelSetup& ps, const nn::Optimizer& opt) {
  std::string schedule = cfg.lr_scheduler ? cfg.lr_scheduler->type : cfg.lr_schedule;
  if (!cfg.lr_scheduler && cfg.lr_schedule == "step")
    schedule += fmt::format(" (x{} every {} steps)", cfg.schedule.gamma, cfg.schedule.step_size);
  if (cfg.schedule.warmup_steps > 0) schedule = fmt::format("{} warmup steps, then {}", cfg.schedule.warmup_steps, schedule);
  log.info("optimizer {} at peak lr {}{}; lr schedule {}", opt.type_name(), opt.get_lr(),
           cfg.lr_scale_with_world ? fmt::format(" (x{} ranks: linear scaling)", ps.world_size()) : std::string(),
           schedule);
  if (ps.ddp) {
    const nn::parallel::DDPOptions& o = ps.ddp->options();
    auto on = [](bool b) { return b ? "on" : "off"; };
    log.info("ddp: buckets {} MiB (first {}), find_unused_parameters {}, gradient_as_bucket_view {}, static_graph {}, "
             "broadcast_buffers {}",
             o.bucket_cap_mb, o.first_bucket_mb, on(o.find_unused_parameters), on(o.gradient_as_bucket_view),
             on(o.static_graph), on(o.broadcast_buffers));
  }
}

}  // namespace tandem::app
