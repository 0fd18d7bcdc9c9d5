// The NCCL communicator (built only with TANDEM_CUDA=ON): device buffers on cuda:<local rank>,
// bootstrapped over MPI (rank 0 makes the ncclUniqueId, MPI_Bcast sends it). The in-process group
// over several GPUs of one process (ncclCommInitAll) is comm::make_nccl_local_group in
// comm/communicator.h; both are the same communicator class over different initialisations. Algo::Ring runs our
// ring over grouped ncclSend/ncclRecv; Algo::Native runs ncclAllReduce and friends.
// Buffers passed in must be ready: the collectives run on the communicator's own stream, so
// synchronise the stream that produced them (or record and wait an event) before calling.
#pragma once
#include <mpi.h>

#include "comm/communicator.h"

namespace tandem::comm {

// Every rank of `comm` must call it. Device: cuda:`device`, or cuda:<local rank> (MPI_Comm_split_type
// SHARED) when `device` is -1 (--device auto may place ranks by free memory instead; NCCL refuses
// two ranks of one communicator on one GPU). Throws NotSupportedError when no CUDA device is
// visible or a node has more ranks than devices.
std::shared_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, Options = {}, int device = -1);

}  // namespace tandem::comm
