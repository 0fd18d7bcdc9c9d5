// Pins the CPU GEMM's path (TANDEM_CPU_GEMM: "eigen", "avx512") for a scope: the variable is set
// and read again (env::ScopedValue), then restored, so a whole test binary run under
// TANDEM_CPU_GEMM=... keeps that setting outside the scope.
#pragma once
#include "runtime/env_settings.h"

namespace tandem::testing {

class CpuGemmPath {
 public:
  explicit CpuGemmPath(const char* path) : value_("TANDEM_CPU_GEMM", path) {}

 private:
  env::ScopedValue value_;
};

}  // namespace tandem::testing
