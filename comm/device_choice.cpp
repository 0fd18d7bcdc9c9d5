// choose_node_device: the GPUs' free memory from NVML, local rank 0's figures broadcast over the
// node's ranks, then monitor::choose_device.
#include "comm/device_choice.h"

#include <cstdlib>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "comm/communicator.h"
#include "runtime/device_query.h"
#include "runtime/monitor/gpu_monitor.h"
#ifdef TANDEM_HAVE_MPI
#include "comm/mpi/mpi_check.h"
#include "comm/mpi/mpi_comm.h"
#endif

namespace tandem::comm {

namespace {

constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

// "uuid free\n" per GPU: what a rank needs of local rank 0's view to decide as it does.
std::string encode(const std::vector<monitor::GpuStats>& gpus) {
  std::string out;
  for (const auto& g : gpus) out += fmt::format("{} {}\n", g.uuid.empty() ? "-" : g.uuid, g.memory_free.value_or(kUnknown));
  return out;
}

// Takes local rank 0's free memory where this rank sees the same GPUs in the same order; false where not.
bool adopt(const std::string& root, std::vector<monitor::GpuStats>& gpus) {
  std::istringstream in(root);
  std::vector<std::pair<std::string, uint64_t>> rows;
  std::string uuid;
  uint64_t free = 0;
  while (in >> uuid >> free) rows.emplace_back(uuid, free);
  if (rows.size() != gpus.size()) return false;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].first == "-" || rows[i].first != gpus[i].uuid) return false;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].second == kUnknown) gpus[i].memory_free.reset();
    else gpus[i].memory_free = rows[i].second;
  }
  return true;
}

}  // namespace

Device device_by_local_rank(int local_rank, int local_size) {
  // NCCL needs a GPU of its own per rank: more ranks on this node than GPUs train on the CPU.
  if (local_size > cuda::device_count()) return kCPU;
  return Device(DeviceKind::CUDA, local_rank);
}

NodeGpus node_gpu_figures() {
  NodeGpus n;
  n.gpus = monitor::query_gpus();
#ifdef TANDEM_HAVE_MPI
  // Every rank of the job takes this path (a collective split), whatever its node has.
  if (launcher_world_size() > 1) {
    ensure_mpi_initialised();
    MPI_Comm node = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &n.local_rank));
    MPI_CHECK(MPI_Comm_size(node, &n.local_size));
    std::string root = encode(n.gpus);
    int bytes = static_cast<int>(root.size());
    MPI_CHECK(MPI_Bcast(&bytes, 1, MPI_INT, 0, node));
    root.resize(static_cast<size_t>(bytes));
    MPI_CHECK(MPI_Bcast(root.data(), bytes, MPI_CHAR, 0, node));
    MPI_CHECK(MPI_Comm_free(&node));
    if (n.local_rank != 0 && !adopt(root, n.gpus))
      n.note = " (this rank sees other GPUs than local rank 0: its own figures)";
  }
#endif
  return n;
}

monitor::DeviceChoice choose_node_device(uint64_t min_free_bytes) {
  // NVML numbers GPUs in PCI bus order, CUDA fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: on
  // a node of mixed GPUs the two would disagree on which cuda:N has the free memory. Ask CUDA for
  // NVML's order unless the user chose one; it takes effect where CUDA has not started yet (here,
  // in tandem-train: this is its first device query).
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/0);
  NodeGpus n = node_gpu_figures();
  const std::vector<monitor::GpuStats>& gpus = n.gpus;
  const int cuda_devices = cuda::device_count();
  if (cuda_devices == 0) return {kCPU, "cpu: " + cuda::describe()};
  if (gpus.empty() || static_cast<int>(gpus.size()) != cuda_devices) {
    const std::string why = gpus.empty() ? monitor::gpu_unavailable_reason()
                                         : fmt::format("NVML shows {} GPUs, CUDA {}", gpus.size(), cuda_devices);
    const Device d = device_by_local_rank(n.local_rank, n.local_size);
    return {d, fmt::format("{}: by local rank {} of {}, free memory not used ({})", d.str(), n.local_rank,
                           n.local_size, why)};
  }
  monitor::DeviceChoice c = monitor::choose_device(gpus, n.local_rank, n.local_size, min_free_bytes);
  c.reason += n.note;
  return c;
}

}  // namespace tandem::comm
