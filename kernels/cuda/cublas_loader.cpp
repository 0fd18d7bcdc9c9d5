// Opens cuBLAS and cuBLASLt on first use: see cublas_loader.h.
#include "kernels/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

#include "runtime/error.h"

namespace tandem::cuda {
namespace {

// The cuBLAS overload we resolve by name (the header also has an inline one taking cudaDataType).
static_assert(std::is_same_v<decltype(static_cast<CublasApi::GemmStridedBatchedEx>(&cublasGemmStridedBatchedEx)),
                             CublasApi::GemmStridedBatchedEx>);

template <class F>
void resolve(void* lib, const char* library, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) {
    const char* why = dlerror();
    TANDEM_FAIL(Backend, "{} has no symbol {}: {}", library, name, why ? why : "not found");
  }
}

void* open_library(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    TANDEM_FAIL(Backend, "cannot open {} (cuBLAS {}, needed for GEMM on a GPU): {}; put CUDA's library folder on "
                "LD_LIBRARY_PATH", library, CUBLAS_VER_MAJOR, why ? why : "unknown error");
  }
  return lib;
}

CublasApi open_cublas() {
  const std::string library = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* lib = open_library(library);
  CublasApi api;
  resolve(lib, library.c_str(), "cublasCreate_v2", api.create);
  resolve(lib, library.c_str(), "cublasSetStream_v2", api.set_stream);
  resolve(lib, library.c_str(), "cublasSetMathMode", api.set_math_mode);
  resolve(lib, library.c_str(), "cublasGetStatusString", api.status_string);
  resolve(lib, library.c_str(), "cublasGemmStridedBatchedEx", api.gemm_strided_batched_ex);
  return api;  // the library stays open for the life of the process
}

CublasLtApi open_cublaslt() {
  const std::string library = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* lib = open_library(library);
  const char* name = library.c_str();
  CublasLtApi api;
  resolve(lib, name, "cublasLtCreate", api.create);
  resolve(lib, name, "cublasLtMatmulDescCreate", api.desc_create);
  resolve(lib, name, "cublasLtMatmulDescDestroy", api.desc_destroy);
  resolve(lib, name, "cublasLtMatmulDescSetAttribute", api.desc_set);
  resolve(lib, name, "cublasLtMatrixLayoutCreate", api.layout_create);
  resolve(lib, name, "cublasLtMatrixLayoutDestroy", api.layout_destroy);
  resolve(lib, name, "cublasLtMatmulPreferenceCreate", api.preference_create);
  resolve(lib, name, "cublasLtMatmulPreferenceDestroy", api.preference_destroy);
  resolve(lib, name, "cublasLtMatmulPreferenceSetAttribute", api.preference_set);
  resolve(lib, name, "cublasLtMatmulAlgoGetHeuristic", api.heuristic);
  resolve(lib, name, "cublasLtMatmul", api.matmul);
  return api;
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = open_cublaslt();
  return api;
}

const CublasApi& cublas() {
  static const CublasApi api = open_cublas();  // thread-safe; a failed open throws again next time
  return api;
}

}  // namespace tandem::cuda
