// Process launching and session bookkeeping through /proc (Linux).
#include "apps/tandem-serve/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace tandem::serve {

namespace {

// The forked child's side of a launch: stdin, stdout and stderr from these descriptors, every other
// descriptor closed (the server's listening socket and client connections must not outlive it in
// the job), no signal blocked; then exec, or exit 127 saying `exec_failed` on stderr. Only
// async-signal-safe calls: a multi-threaded parent's child may make no others.
[[noreturn]] void exec_in_child(const std::vector<char*>& args, int in_fd, int out_fd, int err_fd,
                                const char* exec_failed) {
  ::dup2(in_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  if (::close_range(3, ~0U, 0) != 0)
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execv(args[0], args.data());
  (void)!::write(2, exec_failed, std::strlen(exec_failed));
  ::_exit(127);
}

}  // namespace

pid_t spawn_in_session(const std::vector<std::string>& argv, const std::string& log_path) {
  TANDEM_CHECK(!argv.empty(), "spawn_in_session: empty argv");
  // Everything the child needs is prepared before fork: after it, a multi-threaded parent's child
  // may only make async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) TANDEM_FAIL(IO, "cannot open the job log {}: {}", log_path, std::strerror(errno));
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    TANDEM_FAIL(IO, "cannot open /dev/null: {}", std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    exec_in_child(args, null_fd, log_fd, log_fd, "tandem-serve: exec of the job's supervisor failed\n");
  }
  int err = errno;
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) TANDEM_FAIL(IO, "fork failed: {}", std::strerror(err));
  return pid;
}

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s) {
  TANDEM_CHECK(!argv.empty(), "run_command: empty argv");
  CommandResult r;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) TANDEM_FAIL(IO, "pipe failed: {}", std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    TANDEM_FAIL(IO, "pipe failed: {}", std::strerror(err));
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = ::fork();
  if (pid == 0) exec_in_child(args, null_fd, out_pipe[1], err_pipe[1], "exec failed\n");
  const int fork_errno = errno;
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (null_fd >= 0) ::close(null_fd);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    TANDEM_FAIL(IO, "fork failed: {}", std::strerror(fork_errno));
  }
  // Both pipes read until they close (the command and whatever it left running ended) or the time is up.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        if (sinks[i]->size() < (1u << 20)) sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = !r.timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

namespace {

// Fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses).
bool read_stat(pid_t pid, pid_t& ppid, pid_t& sid, char& state) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  pid_t pgrp = 0;
  rest >> state >> ppid >> pgrp >> sid;
  return static_cast<bool>(rest);
}

}  // namespace

std::vector<pid_t> session_pids(pid_t sid) {
  std::vector<pid_t> out;
  if (sid <= 0) return out;
  DIR* dir = ::opendir("/proc");
  if (!dir) return out;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    pid_t ppid = 0, s = 0;
    char state = '?';
    // Zombies are gone for our purpose: they run nothing and only wait to be reaped.
    if (read_stat(static_cast<pid_t>(pid), ppid, s, state) && s == sid && state != 'Z')
      out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(dir);
  return out;
}

pid_t parent_pid(pid_t pid) {
  pid_t ppid = 0, sid = 0;
  char state = '?';
  return read_stat(pid, ppid, sid, state) ? ppid : 0;
}

bool process_matches(pid_t pid, const std::string& marker) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : cmdline)
    if (c == '\0') c = ' ';
  pid_t ppid = 0, sid = 0;
  char state = '?';
  return read_stat(pid, ppid, sid, state) && state != 'Z' && cmdline.find(marker) != std::string::npos;
}

int signal_all(const std::vector<pid_t>& pids, int sig) {
  int n = 0;
  for (pid_t p : pids)
    if (p > 0 && ::kill(p, sig) == 0) ++n;
  return n;
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) TANDEM_FAIL(IO, "cannot read /proc/self/exe: {}", std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

std::string default_tandem_train(const std::string& self_exe) {
  const std::filesystem::path dir = std::filesystem::path(self_exe).parent_path();
  const std::string beside = (dir / "tandem-train").string();
  const std::string build_tree = (dir.parent_path() / "tandem-train" / "tandem-train").string();
  for (const std::string& p : {beside, build_tree}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0) return p;
  }
  TANDEM_FAIL(Value, "tandem-train is neither beside tandem-serve ({}) nor in its build tree ({}): give "
              "--tandem-train PATH", beside, build_tree);
}

std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string d;
  while (std::getline(dirs, d, ':')) {
    std::string p = (d.empty() ? "." : d) + "/" + name;
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

}  // namespace tandem::serve
