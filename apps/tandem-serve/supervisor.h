// The job supervisor: tandem-serve re-executed as `tandem-serve __supervise EXIT_FILE CMD ARGS...`,
// the leader of a job's session. It runs CMD (mpirun ...) as its child, waits for it and writes
// how it ended to EXIT_FILE, atomically, as {"exit_code":c,"signal":s,"finished_at":t}. That file
// is how a restarted server, which cannot waitpid() a process it did not start, learns the result;
// a session that is gone without it is a lost job.
#pragma once
#include <string>

namespace tandem::serve {

inline constexpr const char* kSuperviseArg = "__supervise";

// main() of the supervisor mode: argv[1] == kSuperviseArg. Returns CMD's exit code (128 + signal
// when it was killed).
int run_supervisor(int argc, char** argv);

}  // namespace tandem::serve
