// make_world_communicator, node_device and launcher_world_size / launcher_local_size: the one place
// that picks MPI or NCCL for a device and reads the launcher's view of the job.
#include <algorithm>

#include "comm/communicator.h"
#include "comm/device_choice.h"
#include "comm/launcher_env.h"
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

int launcher_world_size() { return launcher_env().world_size; }
int launcher_local_size() { return launcher_env().local_size; }

}  // namespace tandem::comm
