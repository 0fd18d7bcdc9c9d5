// The tensor-memory budget (--memory-limit): size parsing, accounting through Storage, and the typed
// OutOfMemoryError from the CPU allocator and the sim (emulated CUDA) device's, leaving the count as
// it was; freed tensors give their bytes back.
#include <gtest/gtest.h>

#include "runtime/memory_budget.h"
#include "runtime/tensor.h"
#include "tests/support/scoped_memory_limit.h"

using namespace tandem;

namespace {

// Sets a budget of `extra` bytes above what `d` holds now; removes it at scope exit.
struct BudgetGuard : tandem::testing::ScopedMemoryLimit {
  BudgetGuard(Device d, size_t extra) : ScopedMemoryLimit(d.kind, memory::in_use(d) + extra) {}
};

}  // namespace

TEST(MemoryBudget, ParsesSizesWithUnits) {
  EXPECT_EQ(memory::parse_size("96MB"), 96000000u);
  EXPECT_EQ(memory::parse_size("2GB"), 2000000000u);
  EXPECT_EQ(memory::parse_size("512KiB"), 512u * 1024);
  EXPECT_EQ(memory::parse_size("1.5GiB"), 1536u * 1024 * 1024);
  EXPECT_EQ(memory::parse_size("4096"), 4096u);
  EXPECT_EQ(memory::parse_size("10mib"), 10u * 1024 * 1024);
  EXPECT_EQ(memory::parse_size("12 MB"), 12000000u);  // the one grammar: spaces allowed, as --min-free-memory took
  for (const char* bad : {"", "MB", "96XB", "1.2.3MB", "-5MB", "+5MB", "1e30TB"})
    EXPECT_THROW(memory::parse_size(bad), ValueError) << bad;
}

void check_budget(Device d) {
  const size_t before = memory::in_use(d);
  {
    Tensor a = Tensor::zeros({1000}, DType::f32, d);  // 4000 bytes
    EXPECT_EQ(memory::in_use(d), before + 4000);
  }
  EXPECT_EQ(memory::in_use(d), before);  // given back
  BudgetGuard budget(d, 10000);
  Tensor a = Tensor::zeros({2000}, DType::f32, d);  // 8000 of 10000
  try {
    Tensor b = Tensor::zeros({1000}, DType::f32, d);  // 4000 more: over
    FAIL() << "no OutOfMemoryError on " << d.str();
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory on " + d.str()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--memory-limit"), std::string::npos) << e.what();
  }
  EXPECT_EQ(memory::in_use(d), before + 8000);  // the failed allocation is not counted
  Tensor c = Tensor::zeros({500}, DType::f32, d);  // 2000 more fits exactly
  EXPECT_EQ(memory::in_use(d), before + 10000);
  EXPECT_GE(memory::peak(d), before + 10000);
}

TEST(MemoryBudget, CpuAllocatorThrowsOutOfMemoryPastTheBudget) { check_budget(kCPU); }

TEST(MemoryBudget, SimDeviceThrowsOutOfMemoryPastTheBudget) { check_budget(Device::parse("sim:0")); }

TEST(MemoryBudget, OutOfMemoryIsABackendError) {
  BudgetGuard budget(kCPU, 16);
  EXPECT_THROW(Tensor::zeros({100}, DType::f32), BackendError);
}
