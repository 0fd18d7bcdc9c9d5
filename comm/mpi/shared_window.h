// Windows of MPI_Win_allocate_shared memory whose every segment starts on a cache line, in every
// process that maps them. The one place where shared windows are made and their segments found.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem::comm {

// The alignment of every segment: a cache line, and the largest alignas() of the types that live
// in shared memory (the channel headers, the arrivals, the doorbells).
constexpr size_t kSharedAlign = 64;

struct SharedWindow {
  MPI_Win win = MPI_WIN_NULL;
  std::vector<char*> segments;  // rank r's segment, kSharedAlign-aligned, as mapped into this process
  size_t bytes = 0;             // usable bytes of this rank's segment (what it asked for)
};

// Collective over comm (whose ranks share one node); each rank may ask for a different size.
// MPI promises no alignment for a segment (disp_unit is a unit of displacement, not an alignment;
// Open MPI packs the segments of a contiguous window back to back), so each rank asks for
// kSharedAlign - 1 bytes more, starts its segment at the next boundary and gathers every rank's
// offset: all processes then address the same bytes, whatever address their mapping got. Throws
// CommError when a segment cannot be aligned in some process (a mapping not on a page boundary).
// The window is never freed here: MPI_Win_free is collective, and a rank whose peers failed must
// not block in it, so windows stay until MPI_Finalize.
SharedWindow allocate_shared_window(MPI_Comm comm, size_t bytes, MPI_Info info = MPI_INFO_NULL);

inline bool is_shared_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kSharedAlign == 0;
}

}  // namespace tandem::comm
