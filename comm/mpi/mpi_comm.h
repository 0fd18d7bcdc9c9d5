// MPI-specific communicator entry points: bootstrap from a host code's MPI_Comm, the node-local
// rank, and the job-wide abort that keeps mpirun from hanging after a CommError.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>

#include "comm/communicator.h"

namespace tandem::comm {

// Wraps a host code's communicator (MPI_COMM_WORLD, a split one, ...). The communicator is
// duplicated (MPI_Comm_dup), so our traffic never mixes with the host's. Threads: with
// MPI_THREAD_MULTIPLE, collectives run on a progress thread (async Work, overlapping the caller);
// with a lower thread level they run on the calling thread inside the call (Work completes at once),
// and the host must not call MPI concurrently with them.
std::shared_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, Options = {});

// MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is already initialised (then MPI_Finalize at exit).
void ensure_mpi_initialised();

// The rank of this process among the ranks of `comm` on the same node
// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), and how many there are.
int local_rank(MPI_Comm comm = MPI_COMM_WORLD);
int local_size(MPI_Comm comm = MPI_COMM_WORLD);

// What an MPI communicator chose and has moved (for benchmarks and tests): its all-reduce
// ("ring", "hierarchical" or "native"; ring includes the direct sum over make_buffer memory), the
// nodes it sees, its ranks per node (0 where the nodes differ), and the bytes this rank's own
// algorithms have sent to ranks on other nodes since it was made (what MPI's collectives move,
// Algo::Native, is not counted). ValueError for a communicator not made by make_mpi_communicator.
struct MpiTraffic {
  std::string allreduce;
  int nodes = 1;
  int ranks_per_node = 1;
  uint64_t cross_node_bytes = 0;
};
MpiTraffic mpi_traffic(const Communicator& c);

// Ends the whole job after an unrecoverable error (a CommError: peers may sit in a collective that
// will never finish): prints `why` to stderr and calls MPI_Abort(MPI_COMM_WORLD, code).
[[noreturn]] void abort_job(const std::string& why, int code = 1);

}  // namespace tandem::comm
