// Built instead of comm/nccl/ when TANDEM_CUDA=OFF: the in-process NCCL factory explains what is missing.
#include "comm/communicator.h"

namespace tandem::comm {

std::vector<std::shared_ptr<Communicator>> make_nccl_local_group(const std::vector<Device>& devices, Options) {
  TANDEM_FAIL(NotSupported, "make_nccl_local_group on {}{}: tandem was built without CUDA (TANDEM_CUDA=OFF); rebuild "
              "with -DTANDEM_CUDA=ON, or use cpu devices (make_local_group)",
              devices.empty() ? std::string("no devices") : devices[0].str(), devices.size() > 1 ? ", ..." : "");
}

}  // namespace tandem::comm
