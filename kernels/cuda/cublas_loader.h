// cuBLAS and cuBLASLt opened on first use (dlopen) rather than linked: libcublas needs libcublasLt, whose loading
// alone (relocations and static data) costs every process ~140 MB of resident memory, a CPU-only run
// included. GPU build only; the emulated build has no cuBLAS.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

namespace tandem::cuda {

// The cuBLAS entry points the backend calls, with cuBLAS's own signatures.
struct CublasApi {
  using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long, const void*,
                                                  cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                  long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  GemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
};

// Opens libcublas.so.<major of the headers> once; throws a BackendError naming the library and the
// loader's message when it cannot be opened or lacks a symbol.
const CublasApi& cublas();

// The cuBLASLt entry points (GEMMs with fused epilogues: bias, GELU, bias gradient).
struct CublasLtApi {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

// Opens libcublasLt.so.<major> once (libcublas has already loaded it), as cublas() does.
const CublasLtApi& cublaslt();

}  // namespace tandem::cuda
