// Pins the CPU GEMM's path (TANDEM_CPU_GEMM: "eigen", "avx512") for a scope; the GEMM reads the
// variable at each call. Restores the value it found, so a whole test binary run under
// TANDEM_CPU_GEMM=... keeps that setting outside the scope.
#pragma once
#include <cstdlib>
#include <string>

namespace tandem::testing {

class CpuGemmPath {
 public:
  explicit CpuGemmPath(const char* path) {
    if (const char* v = std::getenv("TANDEM_CPU_GEMM")) {
      before_ = v;
      had_ = true;
    }
    ::setenv("TANDEM_CPU_GEMM", path, 1);
  }
  ~CpuGemmPath() {
    if (had_) ::setenv("TANDEM_CPU_GEMM", before_.c_str(), 1);
    else ::unsetenv("TANDEM_CPU_GEMM");
  }
  CpuGemmPath(const CpuGemmPath&) = delete;
  CpuGemmPath& operator=(const CpuGemmPath&) = delete;

 private:
  std::string before_;
  bool had_ = false;
};

}  // namespace tandem::testing
