// The progress callback: rates and ETA from the epoch's own clock, drawn through logging.h's
// status line (terminal) or logged as plain info lines.
#include "train/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "comm/launcher_env.h"
#include "train/logging.h"

namespace tandem::train {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string duration_str(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const auto t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

class Progress final : public TrainerCallback {
 public:
  explicit Progress(ProgressOptions o) : o_(o) {}

  void on_epoch_begin(Trainer& t, int64_t epoch) override {
    epoch_ = epoch;
    t0_ = now_s();
    last_draw_ = 0;
    first_step_ = t.state().step;
    // The steps of this epoch before the resume point (if any) are not counted in its rate.
    steps_in_epoch_ = t.steps_per_epoch();
    done_in_epoch_ = t.state().batch_in_epoch / std::max<int64_t>(t.config().accumulation_steps, 1);
  }

  void after_step(Trainer& t) override {
    const int64_t steps = t.state().step - first_step_;  // steps this epoch since on_epoch_begin
    const int64_t in_epoch = done_in_epoch_ + steps;
    const double now = now_s(), elapsed = now - t0_;
    const TrainConfig& c = t.config();
    // Samples per step, all ranks: micro-batches x their size (the same after an OOM recovery).
    const double per_step = static_cast<double>(c.batch_size * std::max<int64_t>(c.accumulation_steps, 1) *
                                                t.world().size());
    const double rate = elapsed > 0 ? per_step * static_cast<double>(steps) / elapsed : 0.0;
    int64_t total = c.epochs * steps_in_epoch_;
    if (c.max_steps > 0) total = std::min(total, c.max_steps);
    const double eta = steps > 0 ? elapsed / static_cast<double>(steps) * static_cast<double>(total - t.state().step) : -1;
    const bool last = in_epoch >= steps_in_epoch_ || t.state().step >= total;
    const std::string text = fmt::format("epoch {}/{}  step {}/{}  loss {:.4f}  samples/s {:.0f}  eta {}", epoch_ + 1,
                                         c.epochs, in_epoch, steps_in_epoch_, t.last_loss(), rate, duration_str(eta));
    if (o_.terminal) {
      if (!last && now - last_draw_ < o_.redraw_s) return;
      last_draw_ = now;
      const int width = 28;
      const auto filled = static_cast<int>(width * in_epoch / std::max<int64_t>(steps_in_epoch_, 1));
      logging::draw_status_line(fmt::format("[{}{}] {}", std::string(static_cast<size_t>(filled), '#'),
                                            std::string(static_cast<size_t>(width - filled), '.'), text));
      return;
    }
    const int64_t every = o_.every > 0 ? o_.every : std::max<int64_t>(steps_in_epoch_ / 10, 1);
    if (in_epoch % every == 0 || last) t.log().info("{}", text);
  }

  void on_train_end(Trainer&, const TrainResult&) override {
    if (o_.terminal) logging::end_status_line();
  }

 private:
  ProgressOptions o_;
  int64_t epoch_ = 0, first_step_ = 0, steps_in_epoch_ = 0, done_in_epoch_ = 0;
  double t0_ = 0, last_draw_ = 0;
};

}  // namespace

std::shared_ptr<TrainerCallback> make_progress(ProgressOptions options) { return std::make_shared<Progress>(options); }

std::shared_ptr<TrainerCallback> make_progress(const TrainConfig& cfg, int rank) {
  if (rank != 0 || cfg.quiet || !logging::enabled(logging::Level::info)) return nullptr;
  ProgressOptions o;
  // mpirun hands each rank a pseudo-terminal whatever its own stdout is: lines there, unless asked.
  const bool launched = comm::launcher_env().launcher != "none";
  o.terminal = cfg.progress == ProgressStyle::Bar ||
               (cfg.progress == ProgressStyle::Auto && !launched && isatty(fileno(stdout)) != 0);
  if (cfg.progress == ProgressStyle::Off) return nullptr;
  o.every = cfg.progress_every;
  return make_progress(o);
}

}  // namespace tandem::train
