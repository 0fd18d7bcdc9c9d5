// The job supervisor (see supervisor.h).
#include "apps/tandem-serve/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "runtime/serialization/atomic_file.h"

namespace tandem::serve {

int run_supervisor(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: tandem-serve %s EXIT_FILE CMD [ARGS...]\n", kSuperviseArg);
    return 2;
  }
  const std::string exit_file = argv[2];
  // The supervisor outlives a cancelled job's SIGTERM to record its end; only SIGKILL stops it.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &ign, nullptr);
  pid_t child = ::fork();
  if (child == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;  // ignored dispositions survive execv: give the job the defaults
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) sigaction(sig, &dfl, nullptr);
    ::execv(argv[3], argv + 3);
    std::fprintf(stderr, "tandem-serve: cannot run %s: %s\n", argv[3], std::strerror(errno));
    ::_exit(127);
  }
  if (child < 0) {
    std::fprintf(stderr, "tandem-serve: fork failed: %s\n", std::strerror(errno));
    return 1;
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  nlohmann::json rec;
  int code;
  if (WIFSIGNALED(status)) {
    rec["exit_code"] = nullptr;
    rec["signal"] = WTERMSIG(status);
    code = 128 + WTERMSIG(status);
  } else {
    code = WEXITSTATUS(status);
    rec["exit_code"] = code;
    rec["signal"] = nullptr;
  }
  rec["finished_at"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  try {
    serialization::write_file_atomic(exit_file, rec.dump() + "\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-serve: cannot write %s: %s\n", exit_file.c_str(), e.what());
  }
  return code;
}

}  // namespace tandem::serve
