// Shared windows (comm/mpi/shared_window.h): every rank's segment starts on a 64-byte boundary in
// every process, whatever sizes the ranks ask for, and every process addresses the same bytes of it.
// Open MPI packs the segments of a contiguous window back to back, so uneven sizes put the later
// segments off any boundary: a window taken without the padding fails here on any CPU.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "comm/mpi/shared_window.h"

namespace tandem::comm::test {
namespace {

// Every process on one node shares memory with every other (the shared-memory transport's case).
MPI_Comm node_comm() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  return node;
}

// Rank r asks for bytes_of(r); writes a pattern of its own into all of it; every rank then reads
// every segment through its own mapping.
void check_window(MPI_Comm comm, size_t (*bytes_of)(int), MPI_Info info) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  SharedWindow w = allocate_shared_window(comm, bytes_of(rank), info);
  ASSERT_EQ(w.segments.size(), static_cast<size_t>(size));
  EXPECT_EQ(w.bytes, bytes_of(rank));
  for (int r = 0; r < size; ++r)
    EXPECT_TRUE(is_shared_aligned(w.segments[static_cast<size_t>(r)]))
        << "rank " << rank << " maps rank " << r << "'s segment at " << static_cast<void*>(w.segments[r]);
  std::memset(w.segments[static_cast<size_t>(rank)], 0x40 + rank, bytes_of(rank));
  MPI_Barrier(comm);
  for (int r = 0; r < size; ++r) {
    const char* s = w.segments[static_cast<size_t>(r)];
    const size_t n = bytes_of(r);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += s[i] != static_cast<char>(0x40 + r);
    EXPECT_EQ(wrong, 0u) << "rank " << rank << " reads rank " << r << "'s segment (" << n << " bytes)";
  }
  MPI_Barrier(comm);  // nobody leaves (and frees nothing, but reuses the pattern) while a peer reads
}

size_t uneven(int r) { return 1 + 13 * static_cast<size_t>(r); }
size_t one_line_and_one(int r) { return 65 + static_cast<size_t>(r); }
size_t empty_on_odd_ranks(int r) { return r % 2 ? 0 : 100; }

TEST(CommMpiWindow, SegmentsAlignedInContiguousWindow) {
  MPI_Comm node = node_comm();
  check_window(node, uneven, MPI_INFO_NULL);
  check_window(node, one_line_and_one, MPI_INFO_NULL);
  check_window(node, empty_on_odd_ranks, MPI_INFO_NULL);
  MPI_Comm_free(&node);
}

TEST(CommMpiWindow, SegmentsAlignedInNoncontiguousWindow) {
  MPI_Comm node = node_comm();
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  check_window(node, uneven, info);
  MPI_Info_free(&info);
  MPI_Comm_free(&node);
}

}  // namespace
}  // namespace tandem::comm::test
