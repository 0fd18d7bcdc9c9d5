// The GEMM algorithm search of TANDEM_GEMM_SEARCH=benchmark (gemm.cu): times the candidate algorithms
// cuBLASLt's heuristic offers for one matmul and returns the fastest. GPU build only (the emulated
// build has no cuBLASLt); internal to the CUDA backend.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "runtime/device.h"

namespace tandem::cuda {

// One cublasLtMatmul, D = C in place (alpha op(A) op(B) + beta C, then the descriptor's epilogue),
// all but the algorithm fixed.
struct LtMatmulCall {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  const void* alpha = nullptr;
  const void* a = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr;
  const void* b = nullptr;
  cublasLtMatrixLayout_t b_layout = nullptr;
  const void* beta = nullptr;
  void* c = nullptr;  // C and D
  cublasLtMatrixLayout_t c_layout = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;

  cublasStatus_t run(const cublasLtMatmulAlgo_t& algo) const;
};

// The index of the fastest of `count` candidates (the heuristic's answers, best guess first), each
// run once and then timed twice over a few calls on the call's stream, the host waiting for each
// timing. Candidates whose state is not SUCCESS, that need more workspace than the call has, or
// that fail to launch are passed over; 0 when none ran. The timing writes D: where the real call
// reads C (c_bytes > 0: beta != 0, or C is also an input), D and C go to scratch memory of c_bytes
// on `device` instead, freed after. `verbose`: one line to stderr, `what` and the times.
int fastest_candidate(const LtMatmulCall& call, const cublasLtMatmulHeuristicResult_t* candidates, int count,
                      size_t c_bytes, Device device, bool verbose, const std::string& what);

}  // namespace tandem::cuda
