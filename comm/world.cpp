// make_world_communicator, node_device and launcher_world_size / launcher_local_size: the one place
// that picks MPI or NCCL for a device and reads the launcher's view of the job.
#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#include "comm/communicator.h"
#include "comm/device_choice.h"
#include "runtime/device_query.h"
#include "runtime/error.h"
#ifdef TANDEM_HAVE_MPI
#include "comm/mpi/mpi_comm.h"
#endif
#if defined(TANDEM_HAVE_MPI) && defined(TANDEM_HAVE_CUDA)
#include "comm/nccl/nccl_comm.h"
#endif

namespace tandem::comm {

std::shared_ptr<Communicator> make_world_communicator(Device device, Options opts) {
  if (device.is_cpu()) return make_mpi_communicator(opts);
  TANDEM_CHECK_KIND(NotSupported, device.kind == DeviceKind::CUDA,
                    "make_world_communicator: no world communicator for {} tensors", device.str());
#if defined(TANDEM_HAVE_MPI) && defined(TANDEM_HAVE_CUDA)
  ensure_mpi_initialised();
  auto c = make_nccl_communicator(MPI_COMM_WORLD, opts, device.index);
  TANDEM_CHECK(c->device() == device,
               "make_world_communicator: the NCCL communicator of this rank uses {} but the "
               "tensors are on {}; place the model with node_device()",
               c->device().str(), device.str());
  return c;
#else
  TANDEM_FAIL(NotSupported, "make_world_communicator: {} needs a build with TANDEM_CUDA=ON and TANDEM_MPI=ON",
              device.str());
#endif
}

Device node_device() {
  if (cuda::device_count() == 0) return kCPU;
#ifdef TANDEM_HAVE_MPI
  if (launcher_world_size() > 1) {
    ensure_mpi_initialised();
    return device_by_local_rank(local_rank(), local_size());
  }
#endif
  return Device(DeviceKind::CUDA, 0);
}

namespace {
// The first of the launcher's variables that is set, as a count of at least 1; 1 when none is.
int launcher_count(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (const char* v = std::getenv(name); v && *v) return std::max(1, std::atoi(v));
  return 1;
}
}  // namespace

int launcher_world_size() { return launcher_count({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}); }
int launcher_local_size() { return launcher_count({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}); }

}  // namespace tandem::comm
