// StatusPublisher: per step a few clock reads, a snapshot of a few hundred bytes built and swapped
// in, and on rank 0 an MPI_Iprobe; host and GPU figures are read by the sampler's thread, never here.
#include "apps/common/status_publisher.h"

#include <algorithm>

namespace tandem::app {

void StatusBoard::publish(std::shared_ptr<const TrainingSnapshot> snapshot) {
  std::lock_guard<std::mutex> lock(mutex_);
  latest_.swap(snapshot);
  // the previous snapshot is released here, after the lock, when `snapshot` goes out of scope
}

std::shared_ptr<const TrainingSnapshot> StatusBoard::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

StatusPublisher::StatusPublisher(std::shared_ptr<StatusBoard> board, std::shared_ptr<const monitor::Sampler> sampler,
                                 std::shared_ptr<RankReports> reports, TrainingSnapshot job, Device device,
                                 int report_every)
    : board_(std::move(board)),
      sampler_(std::move(sampler)),
      reports_(std::move(reports)),
      job_(std::move(job)),
      device_(device),
      report_every_(std::max(report_every, 1)) {}

RankFigures StatusPublisher::own_figures(int64_t step) const {
  RankFigures f;
  f.rank = rank_;
  f.device = device_.str();
  f.step = step;
  f.step_seconds = recent_.empty() ? 0 : recent_sum_ / static_cast<double>(recent_.size());
  if (auto snap = sampler_ ? sampler_->latest() : nullptr) {
    f.host = snap->host.hostname;
    f.rss_bytes = snap->host.rss_bytes.value_or(0);
    f.peak_rss_bytes = snap->host.peak_rss_bytes.value_or(0);
    f.cpu_user_s = snap->host.cpu_user_s.value_or(0);
    f.cpu_system_s = snap->host.cpu_system_s.value_or(0);
    if (device_.kind == DeviceKind::CUDA)
      for (const monitor::GpuStats& g : snap->gpus)
        if (g.index == device_.index) f.gpu = g;
  }
  return f;
}

void StatusPublisher::take_reports(std::vector<RankFigures> reports) {
  const auto now = Clock::now();
  for (RankFigures& r : reports) {
    if (r.rank <= 0 || r.rank >= static_cast<int>(ranks_.size())) continue;
    received_[r.rank] = now;
    ranks_[r.rank] = std::move(r);
  }
}

void StatusPublisher::on_train_begin(Trainer& t) {
  rank_ = t.world().rank();
  begin_ = last_step_ = Clock::now();
  global_batch_ = t.config().batch_size * std::max<int64_t>(t.config().accumulation_steps, 1) * t.world().size();
  job_.world_size = t.world().size();
  job_.epochs = t.config().epochs;
  job_.total_steps = t.config().epochs * t.steps_per_epoch();
  if (t.config().max_steps > 0) job_.total_steps = std::min(job_.total_steps, t.config().max_steps);
  ranks_.assign(static_cast<size_t>(job_.world_size), RankFigures{});
  for (int r = 0; r < job_.world_size; ++r) ranks_[r].rank = r, ranks_[r].step = -1;  // not heard from yet
  received_.assign(ranks_.size(), begin_);
  job_.state = "running";
  if (rank_ == 0) publish(t);
}

void StatusPublisher::on_epoch_begin(Trainer&, int64_t) {
  last_step_ = Clock::now();  // evaluation between epochs is not a step
}

void StatusPublisher::after_step(Trainer& t) {
  const auto now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - last_step_).count();
  last_step_ = now;
  recent_.push_back(seconds);
  recent_sum_ += seconds;
  if (recent_.size() > kWindow) {
    recent_sum_ -= recent_.front();
    recent_.pop_front();
  }
  const int64_t step = t.state().step;
  if (rank_ != 0) {
    if (step % report_every_ == 0) reports_->post(own_figures(step));
  } else {
    take_reports(reports_->drain());
    publish(t);
  }
  own_seconds_ += std::chrono::duration<double>(Clock::now() - now).count();
  ++own_steps_;
}

void StatusPublisher::on_epoch_end(Trainer&, const EpochStats& stats) {
  if (stats.evaluated && stats.classification) test_accuracy_ = stats.test_acc;
}

void StatusPublisher::on_train_end(Trainer& t, const TrainResult&) {
  std::vector<RankFigures> last = reports_->finish(own_figures(t.state().step));
  if (rank_ != 0) return;
  take_reports(std::move(last));
  job_.state = "done";
  publish(t);
  if (own_steps_ > 0 && !recent_.empty()) {
    const double per_step = own_seconds_ / static_cast<double>(own_steps_);
    const double step = recent_sum_ / static_cast<double>(recent_.size());
    t.log().info("status: {:.2f} us per step on the training thread, {:.4f}% of a {:.2f} ms step", per_step * 1e6,
                 100.0 * per_step / step, step * 1e3);
  }
}

void StatusPublisher::publish(Trainer& t) {
  auto s = std::make_shared<TrainingSnapshot>(job_);
  const auto now = Clock::now();
  s->epoch = std::min(t.state().epoch + 1, job_.epochs);
  s->step = t.state().step;
  s->samples = s->step * global_batch_;
  s->loss = t.last_loss();
  s->lr = t.optimizer().get_lr();
  s->elapsed_seconds = std::chrono::duration<double>(now - begin_).count();
  if (!recent_.empty() && recent_sum_ > 0) {
    const double step_s = recent_sum_ / static_cast<double>(recent_.size());
    s->samples_per_second = static_cast<double>(global_batch_) / step_s;
    s->eta_seconds = static_cast<double>(std::max<int64_t>(job_.total_steps - s->step, 0)) * step_s;
  }
  s->test_accuracy = test_accuracy_;
  s->ranks = ranks_;
  s->ranks[0] = own_figures(s->step);
  for (size_t r = 1; r < s->ranks.size(); ++r)
    s->ranks[r].age_seconds = std::chrono::duration<double>(now - received_[r]).count();
  if (auto snap = sampler_ ? sampler_->latest() : nullptr) s->gpu_unavailable = snap->gpu_unavailable;
  if (own_steps_ > 0) s->status_seconds_per_step = own_seconds_ / static_cast<double>(own_steps_);
  board_->publish(std::move(s));
}

}  // namespace tandem::app
