// cp.async (sm_80 and newer): 16-byte copies from global to shared memory that bypass registers and
// complete in the background, so a block loads its next tile while it computes on the current one.
// Copies are grouped by commits; cp_async_wait<N>() returns once every group but the newest N has
// landed for this thread (a __syncthreads after it makes all threads' copies visible). Under the
// emulator each copy lands at the wait that covers it and any access to its bytes before then fails,
// so a missing wait or barrier shows up in tests (runtime/backend/cuda/simt/simt.h).
#pragma once
#include <cstdint>

#include "kernels/cuda/common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "kernels/cuda/async_copy.cuh needs sm_80 or newer (cp.async); set TANDEM_CUDA_ARCHS accordingly"
#endif

namespace tandem::TANDEM_CUDA_NS {

// Copies 16 bytes at src to dst (16-byte aligned both), or zeros when !valid (src is then not read).
template <class S>
__device__ __forceinline__ void cp_async_16(S dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__)
  const auto at = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(at), "l"(src), "r"(valid ? 16 : 0) : "memory");
#elif defined(TANDEM_SIMT_EMULATOR)
  simt::cp_async_16(dst, src, valid);
#else
  (void)dst, (void)src, (void)valid;
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;" ::: "memory");
#elif defined(TANDEM_SIMT_EMULATOR)
  simt::cp_async_commit();
#endif
}

template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#elif defined(TANDEM_SIMT_EMULATOR)
  simt::cp_async_wait(Pending);
#endif
}

}  // namespace tandem::TANDEM_CUDA_NS
