// RankReports over MPI: JSON text messages on a dup of MPI_COMM_WORLD; tag kReport while training,
// kLast for each rank's final report (after which rank 0 knows nothing more is coming).
#include "apps/common/rank_reports.h"

#include <nlohmann/json.hpp>

#include "apps/common/monitor_json.h"
#include "runtime/error.h"
#ifdef TANDEM_HAVE_MPI
#include <mpi.h>

#include "comm/mpi/mpi_check.h"
#endif

namespace tandem::app {

std::string rank_figures_to_json(const RankFigures& f) {
  nlohmann::json j{{"rank", f.rank},
                   {"host", f.host},
                   {"device", f.device},
                   {"step", f.step},
                   {"step_seconds", f.step_seconds},
                   {"rss_bytes", f.rss_bytes},
                   {"peak_rss_bytes", f.peak_rss_bytes},
                   {"cpu_user_seconds", f.cpu_user_s},
                   {"cpu_system_seconds", f.cpu_system_s},
                   {"gpu", f.gpu ? nlohmann::json(*f.gpu) : nlohmann::json()}};
  return j.dump();
}

RankFigures rank_figures_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  RankFigures f;
  f.rank = j.at("rank").get<int>();
  f.host = j.value("host", "");
  f.device = j.value("device", "");
  f.step = j.value("step", int64_t{0});
  f.step_seconds = j.value("step_seconds", 0.0);
  f.rss_bytes = j.value("rss_bytes", uint64_t{0});
  f.peak_rss_bytes = j.value("peak_rss_bytes", uint64_t{0});
  f.cpu_user_s = j.value("cpu_user_seconds", 0.0);
  f.cpu_system_s = j.value("cpu_system_seconds", 0.0);
  if (auto g = j.find("gpu"); g != j.end() && !g->is_null()) f.gpu = g->get<monitor::GpuStats>();
  return f;
}

#ifdef TANDEM_HAVE_MPI

namespace {
constexpr int kReport = 1, kLast = 2;
}

struct RankReports::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int size = 1;
  MPI_Request request = MPI_REQUEST_NULL;
  std::string in_flight;  // the buffer of the posted message, alive until it completes

  void receive_one(const MPI_Status& probed, std::vector<RankFigures>& out, int& last_seen) {
    int bytes = 0;
    MPI_CHECK(MPI_Get_count(&probed, MPI_CHAR, &bytes));
    std::string text(static_cast<size_t>(bytes), '\0');
    MPI_CHECK(MPI_Recv(text.data(), bytes, MPI_CHAR, probed.MPI_SOURCE, probed.MPI_TAG, comm, MPI_STATUS_IGNORE));
    if (probed.MPI_TAG == kLast) ++last_seen;
    out.push_back(rank_figures_from_json(text));
  }
};

RankReports::RankReports(int world_size) {
  int initialised = 0;
  MPI_CHECK(MPI_Initialized(&initialised));
  if (world_size <= 1 || !initialised) return;
  impl_ = std::make_unique<Impl>();
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm));
  MPI_CHECK(MPI_Comm_rank(impl_->comm, &rank_));
  MPI_CHECK(MPI_Comm_size(impl_->comm, &impl_->size));
  active_ = true;
}

RankReports::~RankReports() {
  // After finish() nothing is in flight. Without it (an error ended training) the job is being torn
  // down: a send still in flight is left to MPI_Abort or finalisation rather than waited on here.
  if (impl_ && impl_->comm != MPI_COMM_NULL && impl_->request == MPI_REQUEST_NULL) MPI_Comm_free(&impl_->comm);
}

void RankReports::post(const RankFigures& figures) {
  if (!active_ || rank_ == 0) return;
  if (impl_->request != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_CHECK(MPI_Test(&impl_->request, &done, MPI_STATUS_IGNORE));
    if (!done) return;  // rank 0 has not taken the last one yet: skip, never queue or wait
  }
  impl_->in_flight = rank_figures_to_json(figures);
  MPI_CHECK(MPI_Isend(impl_->in_flight.data(), static_cast<int>(impl_->in_flight.size()), MPI_CHAR, 0, kReport,
                      impl_->comm, &impl_->request));
}

std::vector<RankFigures> RankReports::drain() {
  std::vector<RankFigures> out;
  if (!active_ || rank_ != 0) return out;
  int unused = 0;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kReport, impl_->comm, &arrived, &status));
    if (!arrived) return out;
    impl_->receive_one(status, out, unused);
  }
}

std::vector<RankFigures> RankReports::finish(const RankFigures& last) {
  std::vector<RankFigures> out;
  if (!active_) return out;
  if (rank_ != 0) {
    if (impl_->request != MPI_REQUEST_NULL) MPI_CHECK(MPI_Wait(&impl_->request, MPI_STATUS_IGNORE));
    const std::string text = rank_figures_to_json(last);
    MPI_CHECK(MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, 0, kLast, impl_->comm));
  } else {
    // Each rank's messages arrive in the order sent (MPI's non-overtaking rule per tag), and its
    // last report follows its others: receive everything until every rank's last one is in.
    int last_seen = 0;
    while (last_seen < impl_->size - 1) {
      MPI_Status status;
      MPI_CHECK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, impl_->comm, &status));
      impl_->receive_one(status, out, last_seen);
    }
  }
  MPI_CHECK(MPI_Comm_free(&impl_->comm));
  active_ = false;
  return out;
}

#else  // without MPI there is one process and nothing to report

struct RankReports::Impl {};
RankReports::RankReports(int) {}
RankReports::~RankReports() = default;
void RankReports::post(const RankFigures&) {}
std::vector<RankFigures> RankReports::drain() { return {}; }
std::vector<RankFigures> RankReports::finish(const RankFigures&) { return {}; }

#endif

}  // namespace tandem::app
