// Why a job failed, in the words of tandem-train and of mpirun: each rank's own error lines, read
// from its stderr (mpirun's --output-filename), deduplicated over the ranks with the ranks named,
// and mpirun's notice of a rank that died; Open MPI's boxed boilerplate is left out.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tandem::serve {

// tandem-train's error messages in `text` (a rank's stderr, or a whole log), in order, each once:
//  - a run-time error: the line from "tandem-train: error: " (or "unexpected error: ") on, whatever
//    precedes it ("tandem: aborting the job: ...");
//  - a command-line error: a "tandem-train: ..." line that CLI11's "Run with --help for more
//    information." follows, or a blank line and the usage ("Usage: ...").
std::vector<std::string> train_error_lines(const std::string& text);

// What mpirun's log says about ranks that ended badly: "rank 1 was killed by signal 9 (Killed)" for each "mpirun noticed that process rank ... exited on signal ..." notice, and, when
// `exit_codes`, "rank 0 exited with code 2" for its "The first process to do so was" box.
std::vector<std::string> mpirun_rank_reports(const std::string& log, bool exit_codes);

// Messages of numbered ranks, one line per distinct message in order of first appearance, its
// ranks in front: "rank 1: m", "ranks 0, 1: m", "ranks 0-7: m". Rank -1 (unknown): the message alone.
std::vector<std::string> merge_by_rank(const std::vector<std::pair<int, std::string>>& messages);

}  // namespace tandem::serve
