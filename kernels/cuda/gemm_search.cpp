// TANDEM_GEMM_SEARCH=benchmark's timing of cuBLASLt's candidate algorithms (gemm_search.h).
#include "kernels/cuda/gemm_search.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/cublas_loader.h"
#include "runtime/backend/cuda/check.h"

namespace tandem::cuda {
namespace {

constexpr int kRounds = 2;        // every candidate timed once per round; its best round counts
constexpr int kCallsATiming = 3;  // calls between the two events of one timing

// Two timing events, destroyed on every way out.
struct EventPair {
  EventPair() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  cudaEvent_t start = nullptr, stop = nullptr;
};

// Scratch device memory for D and C while timing, freed (stream-ordered) on every way out.
struct Scratch {
  Scratch(size_t bytes, Device device) : device(device), ptr(bytes ? device_alloc(bytes, device) : nullptr) {}
  ~Scratch() {
    if (ptr) device_free(ptr, device);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Device device;
  void* ptr;
};

}  // namespace

cublasStatus_t LtMatmulCall::run(const cublasLtMatmulAlgo_t& algo) const {
  return cuda::cublaslt().matmul(handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, c, c_layout, &algo,
                                 workspace, workspace_bytes, stream);
}

int fastest_candidate(const LtMatmulCall& call, const cublasLtMatmulHeuristicResult_t* candidates, int count,
                      size_t c_bytes, Device device, bool verbose, const std::string& what) {
  Scratch scratch(c_bytes, device);
  LtMatmulCall timed = call;
  if (scratch.ptr) timed.c = scratch.ptr;
  EventPair events;
  constexpr float kNotRun = std::numeric_limits<float>::infinity();
  std::vector<float> ms(static_cast<size_t>(count), kNotRun);
  std::vector<bool> usable(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i)
    usable[i] = candidates[i].state == CUBLAS_STATUS_SUCCESS && candidates[i].workspaceSize <= call.workspace_bytes &&
                timed.run(candidates[i].algo) == CUBLAS_STATUS_SUCCESS;  // its warm-up call
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < count; ++i) {
      if (!usable[i]) continue;
      CUDA_CHECK(cudaEventRecord(events.start, call.stream));
      bool launched = true;
      for (int r = 0; r < kCallsATiming && launched; ++r) launched = timed.run(candidates[i].algo) == CUBLAS_STATUS_SUCCESS;
      CUDA_CHECK(cudaEventRecord(events.stop, call.stream));
      CUDA_CHECK(cudaEventSynchronize(events.stop));
      if (!launched) {
        usable[i] = false;
        ms[i] = kNotRun;
        continue;
      }
      float elapsed = 0;
      CUDA_CHECK(cudaEventElapsedTime(&elapsed, events.start, events.stop));
      ms[i] = std::min(ms[i], elapsed / kCallsATiming);
    }
  }
  int best = 0;
  for (int i = 1; i < count; ++i)
    if (ms[i] < ms[best]) best = i;
  if (verbose) {
    int timed_count = 0;
    for (int i = 0; i < count; ++i) timed_count += usable[i] ? 1 : 0;
    std::fprintf(stderr, "tandem: gemm search %s: candidate %d of %d (%d timed) %.4f ms, the heuristic's first %.4f ms\n",
                 what.c_str(), best, count, timed_count, static_cast<double>(ms[best]), static_cast<double>(ms[0]));
  }
  return best;
}

}  // namespace tandem::cuda
