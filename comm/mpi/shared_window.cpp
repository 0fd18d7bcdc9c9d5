// Shared windows with cache-line-aligned segments: the padding each rank takes, gathered.
#include "comm/mpi/shared_window.h"

#include "comm/mpi/mpi_check.h"
#include "runtime/error.h"

namespace tandem::comm {

SharedWindow allocate_shared_window(MPI_Comm comm, size_t bytes, MPI_Info info) {
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  SharedWindow w;
  w.bytes = bytes;
  void* mine = nullptr;
  // disp_unit 1: displacements (unused here) count bytes.
  MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes + kSharedAlign - 1), 1, info, comm, &mine, &w.win));
  // This rank's padding, from its own address of its own segment. Every process maps the window on
  // a page boundary, so the same padding aligns the segment in each of them; the check below says
  // so rather than trusting it.
  const uint64_t pad = (kSharedAlign - reinterpret_cast<uintptr_t>(mine) % kSharedAlign) % kSharedAlign;
  std::vector<uint64_t> pads(static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(&pad, 1, MPI_UINT64_T, pads.data(), 1, MPI_UINT64_T, comm));
  for (int r = 0; r < size; ++r) {
    MPI_Aint got = 0;
    int disp = 0;
    void* p = nullptr;
    MPI_CHECK(MPI_Win_shared_query(w.win, r, &got, &disp, &p));
    char* seg = static_cast<char*>(p) + pads[static_cast<size_t>(r)];
    TANDEM_CHECK_KIND(Comm, is_shared_aligned(seg) && static_cast<uint64_t>(got) >= pads[static_cast<size_t>(r)],
                      "shared window: rank {}'s segment at {} in rank {}'s mapping ({} bytes) is not {}-byte aligned "
                      "after the {} bytes of padding rank {} chose; the processes map the window at addresses that "
                      "differ within a page, which tandem's shared memory transport cannot use (set "
                      "TANDEM_COMM_SHM=0)",
                      r, p, rank, static_cast<long long>(got), kSharedAlign, pads[static_cast<size_t>(r)], r);
    w.segments.push_back(seg);
  }
  return w;
}

}  // namespace tandem::comm
