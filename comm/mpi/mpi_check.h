// MPI_CHECK(call): throws BackendError "<file>:<line>: <call> failed: <MPI error string>".
#pragma once
#include <mpi.h>

#include <string>

#include "runtime/error.h"

namespace tandem::comm {
inline std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}
}  // namespace tandem::comm

#define MPI_CHECK(call)                                                                       \
  do {                                                                                        \
    int mpi_check_rc_ = (call);                                                               \
    if (mpi_check_rc_ != MPI_SUCCESS)                                                         \
      ::tandem::throw_call_error(#call, __FILE__, __LINE__,                                   \
                                 ::tandem::comm::mpi_error_string(mpi_check_rc_));            \
  } while (0)
