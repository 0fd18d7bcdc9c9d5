// How each rank's figures reach rank 0 without a collective or a wait in the training step: every
// rank but 0 posts a small nonblocking message (MPI_Isend on a communicator of its own, dup'd at
// setup) every few steps, skipping a post while its previous one is still in flight; rank 0 takes
// whatever has arrived (MPI_Iprobe, then MPI_Recv of a message already there) at the end of its
// step. The training communicator and its progress thread are not involved: the messages travel
// on their own communicator, from the training thread (MPI_THREAD_MULTIPLE, or the only thread that
// calls MPI where the library runs its collectives inline).
#pragma once
#include "apps/common/engine.h"
#include <memory>
#include <vector>

#include "apps/common/status_snapshot.h"

namespace tandem::app {

class RankReports {
 public:
  // Collective over MPI_COMM_WORLD (MPI_Comm_dup) when `world_size` > 1 and MPI is initialised;
  // otherwise an object whose calls do nothing.
  explicit RankReports(int world_size);
  ~RankReports();
  RankReports(const RankReports&) = delete;
  RankReports& operator=(const RankReports&) = delete;

  bool active() const { return active_; }
  int rank() const { return rank_; }
  // Ranks > 0: posts `figures` unless the previous post is still in flight. Never waits.
  void post(const RankFigures& figures);
  // Rank 0: every report that has arrived so far, oldest first. Never waits for one.
  std::vector<RankFigures> drain();
  // At the end of training, every rank (not collective: ranks > 0 send a last report and wait for
  // their sends to complete; rank 0 receives until each rank's last report is in, returning all
  // that arrived). Afterwards nothing is in flight and the communicator is freed.
  std::vector<RankFigures> finish(const RankFigures& last);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool active_ = false;
  int rank_ = 0;
};

// RankFigures as the JSON the reports carry (and /status shows).
std::string rank_figures_to_json(const RankFigures& f);
RankFigures rank_figures_from_json(const std::string& text);

}  // namespace tandem::app
