// The processes of a job: launching its supervisor in a session of its own, and finding,
// signalling and recognising the processes of that session later (also after a server restart,
// when they are no longer our children).
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

namespace tandem::serve {

// fork + execv of argv (argv[0] a path) in a new session (setsid: its pid is also its process
// group and session id), stdin from /dev/null, stdout and stderr appended to log_path, no other
// descriptor inherited. Never a shell. Returns the pid; IOError when fork fails.
pid_t spawn_in_session(const std::vector<std::string>& argv, const std::string& log_path);

// What a command run to its end printed and how it ended.
struct CommandResult {
  int exit_code = -1;  // -1: killed (by a signal, or at the timeout) or could not be run
  bool timed_out = false;
  std::string out, err;
};
// fork + execv of argv (argv[0] a path), stdin from /dev/null, stdout and stderr captured (each up
// to 1 MiB), no other descriptor inherited; killed after timeout_s. Never a shell.
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s);

// The pids of every process whose session id is `sid` (from /proc/<pid>/stat).
std::vector<pid_t> session_pids(pid_t sid);
// The parent pid of `pid`, or 0 when it is gone.
pid_t parent_pid(pid_t pid);
// Whether `pid` is alive and its command line contains `marker` (guards against a reused pid).
bool process_matches(pid_t pid, const std::string& marker);
// kill(sig) to each pid; gone ones are skipped. Returns how many were signalled.
int signal_all(const std::vector<pid_t>& pids, int sig);

// The path of this process's executable (/proc/self/exe).
std::string self_executable();
// The tandem-train that goes with tandem-serve at `self_exe`: the one beside it (both installed
// into PREFIX/bin), else the build tree's (apps/tandem-serve/../tandem-train/tandem-train).
// ValueError naming both places when neither is executable.
std::string default_tandem_train(const std::string& self_exe);
// `name` when it holds a slash, else its first match in PATH; empty when none is executable.
std::string find_executable(const std::string& name);

}  // namespace tandem::serve
