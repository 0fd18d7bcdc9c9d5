// Built instead of comm/mpi/ when TANDEM_MPI=OFF: the MPI factory explains what is missing.
#include "comm/communicator.h"

namespace tandem::comm {

std::shared_ptr<Communicator> make_mpi_communicator(Options) {
  TANDEM_FAIL(NotSupported, "tandem was built without MPI (TANDEM_MPI=OFF); rebuild with -DTANDEM_MPI=ON "
              "or use make_local_group for in-process ranks");
}

}  // namespace tandem::comm
