// The NCCL communicator under mpirun (TANDEM_CUDA=ON builds only): ring and native collectives on
// device buffers against values computed from the ranks. Skips, saying why, without a GPU.
#include <cuda_runtime.h>
#include <mpi.h>

#include <gtest/gtest.h>

#include "comm/mpi/mpi_comm.h"
#include "comm/nccl/nccl_comm.h"
#include "runtime/device_query.h"
#include "tests/comm/comm_test_util.h"
#include "tests/comm/mpi_test_env.h"

namespace tandem::comm::test {
namespace {

std::shared_ptr<Communicator> nccl_world(Options::Algo algo) {
  auto& c = held_communicators()["nccl/" + std::to_string(int(algo))];
  if (!c) {
    Options o;
    o.algo = algo;
    o.timeout_s = 60;
    o.segment_bytes = 64 * 1024;
    c = make_nccl_communicator(MPI_COMM_WORLD, o);
  }
  return c;
}

TEST(CommNccl, CollectivesOnDeviceBuffers) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: the NCCL communicator needs a GPU";
  if (local_size() > cuda::device_count()) {
    // Every rank sees the same counts, so all skip together; the factory's error is checked instead.
    EXPECT_THROW(make_nccl_communicator(MPI_COMM_WORLD), NotSupportedError);
    GTEST_SKIP() << local_size() << " ranks on this node share " << cuda::device_count() << " CUDA device(s)";
  }
  for (auto algo : {Options::Algo::Ring, Options::Algo::Native}) {
    auto c = nccl_world(algo);
    ASSERT_EQ(c->device().kind, DeviceKind::CUDA);
    const int n = c->size(), r = c->rank();
    for (DType t : all_dtypes())
      for (ReduceOp op : all_ops())
        for (int64_t count : {0, 1, 7, 4099, 300007}) {
          auto host = make_buffer(t, rank_values(t, r, count));
          void* dev = nullptr;
          ASSERT_EQ(cudaMalloc(&dev, host.size()), cudaSuccess);
          // The buffer must be ready before the call (nccl_comm.h): a cudaMemcpy from pageable memory
          // may return before its DMA lands, and the collective runs on a non-blocking stream that
          // does not wait for the legacy stream (seen on an H100: one f64 avg of 4099 read stale data).
          ASSERT_EQ(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          c->allreduce(dev, count, t, op)->wait();
          ASSERT_EQ(cudaMemcpy(host.data(), dev, host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
          ASSERT_EQ(cudaFree(dev), cudaSuccess);
          ASSERT_EQ(to_doubles(t, host.data(), count), expected_reduce(t, op, n, count))
              << dtype_name(t) << " " << reduce_op_name(op) << " count " << count << " algo " << int(algo);
        }
    c->barrier()->wait();
  }
}

}  // namespace
}  // namespace tandem::comm::test
