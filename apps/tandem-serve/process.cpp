// Process launching and session bookkeeping through /proc (Linux).
#include "apps/tandem-serve/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace tandem::serve {

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
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    // The server's listening socket and client connections must not outlive it in the job.
    if (::close_range(3, ~0U, 0) != 0)
      for (int fd = 3; fd < 65536; ++fd) ::close(fd);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(args[0], args.data());
    const char msg[] = "tandem-serve: exec of the job's supervisor failed\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  int err = errno;
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) TANDEM_FAIL(IO, "fork failed: {}", std::strerror(err));
  return pid;
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
