// Which tandem_result_t a BackendError is: the library whose call failed.
#pragma once
#include <string_view>

#include "tandem/tandem_c.h"

namespace tandem::embed {

// A failed call's message reads "<file>:<line>: <call> failed: <why>" (runtime/error.h); the call
// decides, not the file: comm/nccl/nccl_comm.cpp's CUDA calls are CUDA errors.
inline tandem_result_t backend_result(std::string_view message) {
  const size_t at = message.find(": ");
  const std::string_view call = at == std::string_view::npos ? message : message.substr(at + 2);
  if (call.substr(0, 4) == "MPI_") return TANDEM_MPI_ERROR;
  if (call.substr(0, 4) == "nccl") return TANDEM_NCCL_ERROR;
  return TANDEM_CUDA_ERROR;
}

}  // namespace tandem::embed
