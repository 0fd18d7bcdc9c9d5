// Crash-safe writes through temp file + fsync + rename + directory fsync (POSIX).
#include "runtime/serialization/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/error.h"

namespace tandem::serialization {

namespace fs = std::filesystem;

namespace {
std::string errno_text() { return std::strerror(errno); }

void write_all(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      std::string why = errno_text();
      ::close(fd);
      TANDEM_FAIL(IO, "writing '{}' failed: {} (is the disk full?)", path, why);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}
}  // namespace

std::string parent_directory(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

std::string write_temp_file(const std::string& path, std::string_view data) {
  // Unique per process and call, so concurrent writers never share a temporary.
  static std::atomic<uint64_t> counter{0};
  std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) TANDEM_FAIL(IO, "cannot create '{}': {}", temp, errno_text());
  try {
    write_all(fd, data.data(), data.size(), temp);
  } catch (const IOError&) {
    ::unlink(temp.c_str());  // a partial temporary on a full disk would only keep it full
    throw;
  }
  if (::fsync(fd) != 0) {
    std::string why = errno_text();
    ::close(fd);
    ::unlink(temp.c_str());
    TANDEM_FAIL(IO, "fsync of '{}' failed: {}", temp, why);
  }
  if (::close(fd) != 0) TANDEM_FAIL(IO, "closing '{}' failed: {}", temp, errno_text());
  return temp;
}

void commit_temp_file(const std::string& temp_path, const std::string& path) {
  if (::rename(temp_path.c_str(), path.c_str()) != 0)
    TANDEM_FAIL(IO, "renaming '{}' to '{}' failed: {}", temp_path, path, errno_text());
  fsync_directory(parent_directory(path));
}

void write_file_atomic(const std::string& path, std::string_view data) {
  commit_temp_file(write_temp_file(path, data), path);
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) TANDEM_FAIL(IO, "cannot open '{}': {}", path, errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string why = errno_text();
    ::close(fd);
    TANDEM_FAIL(IO, "cannot stat '{}': {}", path, why);
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::string why = r < 0 ? errno_text() : std::string("unexpected end of file");
      ::close(fd);
      TANDEM_FAIL(IO, "reading '{}' failed: {}", path, why);
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return out;
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) TANDEM_FAIL(IO, "cannot open directory '{}' to fsync it: {}", dir, errno_text());
  int rc = ::fsync(fd);
  std::string why = rc != 0 ? errno_text() : "";
  ::close(fd);
  if (rc != 0) TANDEM_FAIL(IO, "fsync of directory '{}' failed: {}", dir, why);
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) TANDEM_FAIL(IO, "cannot create directory '{}': {}", dir, ec.message());
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

void remove_all(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) TANDEM_FAIL(IO, "cannot remove '{}': {}", path, ec.message());
}

std::vector<std::string> list_directory(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) TANDEM_FAIL(IO, "cannot list directory '{}': {}", dir, ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tandem::serialization
