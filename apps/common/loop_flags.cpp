// Flags bound to nn::config::ScheduleConfig, nn::config::OptimizerConfig and nn::parallel::DDPOptions.
#include "apps/common/loop_flags.h"

#include "apps/common/cli_checks.h"
#include "train/logging.h"
#include "runtime/memory_budget.h"

namespace tandem::app {

void add_loop_flags(CLI::App& app, TrainConfig& cfg) {
  add_enum_option(app, "--log-level", cfg.log_level,
                  "trace, debug, info (rank 0), warn (every rank, stderr), error or off; results always print");
  add_enum_option(app, "--progress", cfg.progress,
                  "rank 0's progress: auto (a live bar when stdout is a terminal and not under mpirun, else lines), "
                  "bar, lines or off");
  app.add_option("--progress-every", cfg.progress_every,
                 "when stdout is not a terminal: a progress line every N steps (0: about ten per epoch)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--trace", cfg.trace_path,
                 "write a Chrome trace JSON of every rank's spans (data, forward, backward, each bucket's "
                 "allreduce, optimizer, evaluate, checkpoint) to FILE");
  app.add_option("--memory-limit", cfg.memory_limit,
                 "tensor-memory budget of the run's device, e.g. 96MB, 2GB, 512MiB; past it a step runs out of "
                 "memory and is redone with half the micro-batch (and twice the accumulation)")
      ->check([](const std::string& v) -> std::string {
        try {
          memory::parse_size(v);
          return "";
        } catch (const Error& e) {
          return fmt::format("'{}' is not a size: give a number with a unit, e.g. 96MB, 2GB, 512KiB", v);
        }
      });
}

void apply_loop_settings(const TrainConfig& cfg, const ParallelSetup& ps, Device device, const Logger& log) {
  logging::configure(cfg.log_level, ps.rank(), ps.world_size());
  if (cfg.memory_limit.empty()) return;
  const size_t bytes = memory::parse_size(cfg.memory_limit);
  // --mode dp keeps the model on the CPU until it places replicas on --devices.
  const DeviceKind kind = cfg.mode == ParallelMode::DP && cfg.devices.rfind("cuda", 0) == 0 ? DeviceKind::CUDA : device.kind;
  memory::set_limit(kind, bytes);
  log.info("memory limit: {} of tensor memory per {} device ({} in use now on {})", memory::format_size(bytes),
           device_kind_name(kind), memory::format_size(memory::in_use(device)), device.str());
}

void add_schedule_flags(CLI::App& app, TrainConfig& cfg) {
  app.add_option("--lr-step-size", cfg.lr_scheduler.step_size, "--lr-schedule step: optimizer steps between lr drops")
      ->check(kPositive);
  app.add_option("--lr-gamma", cfg.lr_scheduler.gamma, "--lr-schedule step: factor of each drop")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--warmup-steps", cfg.lr_scheduler.warmup_steps,
                 "linear warmup over N optimizer steps (lr x (s+1)/(N+1)) before the schedule")
      ->check(kNonNegative)
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
  app.add_option("--zero", cfg.ddp.zero_stage,
                 "ddp: ZeRO stage: 0 replicates the optimizer state (plain DDP), 1 shards it over the ranks "
                 "(buckets reduce-scattered, parameters all-gathered after the step), 2 also frees the gradients "
                 "outside each rank's shard; the weights stay bitwise those of stage 0 (docs/zero.md)")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
}

void log_loop_options(const Logger& log, const TrainConfig& cfg, const ParallelSetup& ps, const nn::Optimizer& opt) {
  const nn::config::ScheduleConfig& s = cfg.lr_scheduler;
  std::string schedule = enum_name(s.type);
  if (s.type == nn::config::ScheduleType::Step)
    schedule += fmt::format(" (x{} every {} steps)", s.gamma, s.step_size);
  if (s.warmup_steps > 0 && s.type != nn::config::ScheduleType::LinearWarmup)
    schedule = fmt::format("{} warmup steps, then {}", s.warmup_steps, schedule);
  log.info("optimizer {} at peak lr {}{}; lr schedule {}", opt.type_name(), opt.get_lr(),
           cfg.lr_scale_with_world ? fmt::format(" (x{} ranks: linear scaling)", ps.world_size()) : std::string(),
           schedule);
  if (ps.ddp) {
    const nn::parallel::DDPOptions& o = ps.ddp->options();
    auto on = [](bool b) { return b ? "on" : "off"; };
    log.info("ddp: buckets {} MiB (first {}), find_unused_parameters {}, gradient_as_bucket_view {}, static_graph {}, "
             "broadcast_buffers {}, zero_stage {}",
             o.bucket_cap_mb, o.first_bucket_mb, on(o.find_unused_parameters), on(o.gradient_as_bucket_view),
             on(o.static_graph), on(o.broadcast_buffers), o.zero_stage);
  }
}

}  // namespace tandem::app
