// Communicators shared by the MPI comm tests (made once, released before MPI_Finalize).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "comm/mpi/mpi_comm.h"

namespace tandem::comm::test {

inline std::map<std::string, std::shared_ptr<Communicator>>& held_communicators() {
  static std::map<std::string, std::shared_ptr<Communicator>> m;
  return m;
}
inline void release_communicators() { held_communicators().clear(); }

// The world communicator for algo/segment size; tests use a short deadline so a bug fails fast.
// shared_memory=false forces MPI point-to-point even on one node.
inline Communicator& world(Options::Algo algo = Options::Algo::Ring, int64_t segment_bytes = 4096,
                           bool shared_memory = true) {
  std::string key = std::to_string(int(algo)) + "/" + std::to_string(segment_bytes) + "/" + std::to_string(shared_memory);
  auto& c = held_communicators()[key];
  if (!c) {
    Options o;
    o.algo = algo;
    o.segment_bytes = segment_bytes;
    o.timeout_s = 60;
    o.shared_memory = shared_memory;
    c = make_mpi_communicator(MPI_COMM_WORLD, o);
  }
  return *c;
}

}  // namespace tandem::comm::test
