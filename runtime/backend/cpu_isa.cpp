#include "runtime/backend/cpu_isa.h"

#include "runtime/env_settings.h"
#include "runtime/error.h"

namespace tandem {
namespace {

// TANDEM_CPU_ISA's index among its values (avx512, avx2, generic); throws for a bad value.
int read_variable() { return env::choice("TANDEM_CPU_ISA"); }

// Kernels ask from inside parallel regions, where a throw would end the process: a bad value counts
// as unset here, and is the error of cpu_isa_cap and cpu_isa_in_use, which the programs call first.
CpuIsa cap() {
  static const CpuIsa isa = [] {
    const int i = env::Switch("TANDEM_CPU_ISA").index_or_default();
    return i == 1 ? CpuIsa::avx2 : i == 2 ? CpuIsa::generic : CpuIsa::avx512;
  }();
  return isa;
}

}  // namespace

bool cpu_isa_allows(CpuIsa isa) { return static_cast<int>(isa) <= static_cast<int>(cap()); }

const char* cpu_isa_cap() {
  static const char* const kNames[] = {"avx512", "avx2", "generic"};
  return kNames[read_variable()];
}

bool cpu_isa_usable(CpuIsa isa) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                             cpu_isa_allows(CpuIsa::avx512);
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c") && cpu_isa_allows(CpuIsa::avx2);
  return isa == CpuIsa::avx512 ? avx512 : isa == CpuIsa::avx2 ? avx2 : true;
}

const char* cpu_isa_in_use() {
  read_variable();  // throws for a bad value
  if (cpu_isa_usable(CpuIsa::avx512)) return "avx512";
  return cpu_isa_usable(CpuIsa::avx2) ? "avx2" : "generic";
}

}  // namespace tandem
