// --device auto across the ranks of a node (under mpirun, with the fake NVML): the ranks decide on
// local rank 0's figures, so they pick distinct GPUs even when each reads other free memory; a rank
// that sees other GPUs keeps its own figures and says so.
#include <dlfcn.h>
#include <mpi.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "comm/device_choice.h"
#include "runtime/env_settings.h"

using namespace tandem;

namespace {
constexpr unsigned long long GiB = 1ull << 30;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void set_free(int index, unsigned long long bytes) {
  void* h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  auto fn = reinterpret_cast<void (*)(int, unsigned long long)>(dlsym(h, "fake_nvml_set_free"));
  ASSERT_NE(fn, nullptr);
  fn(index, bytes);
  dlclose(h);
}
}  // namespace

TEST(NodeDevice, RanksDecideOnLocalRankZerosFigures) {
  env::ScopedValue nvml("TANDEM_NVML_LIBRARY", FAKE_NVML_PATH);  // before the first NVML use in this process
  unsetenv("CUDA_VISIBLE_DEVICES");
  const int rank = world_rank();
  monitor::query_gpus();  // opens the fake
  // Rank 1 reads other figures than rank 0 (memory taken on GPU 1 between the two reads).
  if (rank == 1) set_free(1, 5 * GiB);
  comm::NodeGpus n = comm::node_gpu_figures();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(n.local_rank, rank);  // one node
  EXPECT_EQ(n.local_size, size);
  EXPECT_EQ(n.note, "");
  ASSERT_EQ(n.gpus.size(), 3u);
  EXPECT_EQ(n.gpus[1].memory_free, 70 * GiB) << "rank " << rank << " did not take local rank 0's figures";
  const monitor::DeviceChoice c = monitor::choose_device(n.gpus, n.local_rank, n.local_size, 0);
  // Ranks in order of free memory: 70, 30, 10 GiB -> cuda:1, cuda:2, cuda:0.
  const int expected[] = {1, 2, 0};
  if (rank < 3) {
    EXPECT_EQ(c.device, Device(DeviceKind::CUDA, expected[rank])) << c.reason;
  }
  int mine = c.device.is_cpu() ? -1 - rank : c.device.index, all[8] = {};
  MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
  for (int a = 0; a < size; ++a)
    for (int b = a + 1; b < size; ++b) EXPECT_NE(all[a], all[b]) << "ranks " << a << " and " << b << " share a GPU";
  if (rank == 1) set_free(1, 70 * GiB);
}

TEST(NodeDevice, ARankSeeingOtherGpusKeepsItsOwnFigures) {
  const int rank = world_rank();
  if (rank == 1) setenv("CUDA_VISIBLE_DEVICES", "2,0", 1);
  if (rank == 1) set_free(2, 3 * GiB);
  comm::NodeGpus n = comm::node_gpu_figures();
  if (rank == 1) {
    ASSERT_EQ(n.gpus.size(), 2u);
    EXPECT_EQ(n.gpus[0].memory_free, 3 * GiB);  // its own reading
    EXPECT_NE(n.note.find("other GPUs than local rank 0"), std::string::npos) << n.note;
    set_free(2, 30 * GiB);
    unsetenv("CUDA_VISIBLE_DEVICES");
  } else {
    EXPECT_EQ(n.note, "");
    EXPECT_EQ(n.gpus.size(), 3u);
  }
}
