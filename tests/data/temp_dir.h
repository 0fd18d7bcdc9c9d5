// A scratch directory for one test process, removed when the test ends.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tandem::testing {

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() / ("tandem-test-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(counter()++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

}  // namespace tandem::testing
