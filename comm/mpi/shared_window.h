// Every rank's segment of an MPI_Win_allocate_shared window, as mapped into this process.
#pragma once
#include <mpi.h>

#include <vector>

#include "comm/mpi/mpi_check.h"

namespace tandem::comm {

inline std::vector<char*> shared_segments(MPI_Win win, int size) {
  std::vector<char*> out;
  for (int r = 0; r < size; ++r) {
    MPI_Aint bytes = 0;
    int disp = 0;
    void* p = nullptr;
    MPI_CHECK(MPI_Win_shared_query(win, r, &bytes, &disp, &p));
    out.push_back(static_cast<char*>(p));
  }
  return out;
}

}  // namespace tandem::comm
