// Communicators shared by the MPI comm tests (made once, released before MPI_Finalize).
#pragma once
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi/mpi_comm.h"

namespace tandem::comm::test {

inline std::map<std::string, std::shared_ptr<Communicator>>& held_communicators() {
  static std::map<std::string, std::shared_ptr<Communicator>> m;
  return m;
}
inline void release_communicators() { held_communicators().clear(); }

// Rank 0's bytes equal every rank's bytes (collective over comm).
inline bool same_on_all_ranks(const void* p, size_t bytes, MPI_Comm comm = MPI_COMM_WORLD) {
  std::vector<char> root(static_cast<const char*>(p), static_cast<const char*>(p) + bytes);
  MPI_Bcast(root.data(), static_cast<int>(bytes), MPI_BYTE, 0, comm);
  int same = std::memcmp(root.data(), p, bytes) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

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
