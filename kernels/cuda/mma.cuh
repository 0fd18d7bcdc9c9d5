// One warp's tensor-core step, D[16x8] += A[16x16] B[16x8] with 16-bit A, B (bf16 or f16) and f32
// D: PTX's mma.sync.aligned.m16n8k16.row.col on the GPU (sm_80 and newer), and under the emulator a
// model of the same instruction over the same per-lane fragments, so a kernel written against these
// layouts is tested here. Lane l holds, with g = l / 4 and c = l % 4 (two 16-bit values per 32-bit
// register, the lower column or row in the low half):
//   A: a[0] = A[g][2c, 2c+1]     a[1] = A[g+8][2c, 2c+1]   a[2] = A[g][2c+8, 2c+9]   a[3] = A[g+8][2c+8, 2c+9]
//   B: b[0] = B[2c, 2c+1][g]     b[1] = B[2c+8, 2c+9][g]
//   D: d[0], d[1] = D[g][2c], D[g][2c+1]                 d[2], d[3] = D[g+8][2c], D[g+8][2c+1]
// D's layout over two neighbouring 8-column tiles is A's over one 16-column step: a product can feed
// the next product as its A without leaving registers (attention's P V).
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "kernels/cuda/mma.cuh needs sm_80 or newer (16-bit mma.sync.m16n8k16); set TANDEM_CUDA_ARCHS accordingly"
#endif

namespace tandem::TANDEM_CUDA_NS {

struct FragA {
  uint32_t r[4];
};
struct FragB {
  uint32_t r[2];
};
struct FragD {
  float r[4] = {0.f, 0.f, 0.f, 0.f};
};

// Two floats rounded to nearest even into T's 16-bit format: lo in bits 0-15, hi in 16-31.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  static_assert(std::is_same_v<T, bfloat16> || std::is_same_v<T, half>, "pack2: bf16 or f16");
#if defined(__CUDA_ARCH__)
  uint32_t r;
  if constexpr (std::is_same_v<T, bfloat16>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  if constexpr (std::is_same_v<T, bfloat16>)
    return uint32_t(float_to_bf16_bits(lo)) | uint32_t(float_to_bf16_bits(hi)) << 16;
  else
    return uint32_t(float_to_half_bits(lo)) | uint32_t(float_to_half_bits(hi)) << 16;
#endif
}

// Two 16-bit values into one register, a in the low half.
__device__ __forceinline__ uint32_t pair(uint16_t a, uint16_t b) { return uint32_t(a) | uint32_t(b) << 16; }

#if defined(TANDEM_SIMT_EMULATOR)
template <class T>
inline float widen(uint32_t reg, int half_index) {
  const uint16_t bits = uint16_t(reg >> (16 * half_index));
  if constexpr (std::is_same_v<T, bfloat16>) return bf16_bits_to_float(bits);
  else return half_bits_to_float(bits);
}
#endif

// d += a b over the warp; every lane of the warp calls it with its own fragments.
template <class T>
__device__ __forceinline__ void mma(FragD& d, const FragA& a, const FragB& b) {
  static_assert(std::is_same_v<T, bfloat16> || std::is_same_v<T, half>, "mma: bf16 or f16 operands");
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, bfloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d.r[0]), "+f"(d.r[1]), "+f"(d.r[2]), "+f"(d.r[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d.r[0]), "+f"(d.r[1]), "+f"(d.r[2]), "+f"(d.r[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
#elif defined(TANDEM_SIMT_EMULATOR)
  // The emulator gathers the warp's fragments and computes this lane's four outputs from the
  // layouts above (a sum in k order in f32; the hardware's order and rounding may differ in the
  // last bits, which is why tests compare with a tolerance).
  struct Operands {
    FragA a;
    FragB b;
  };
  Operands all[32];
  simt::warp_all_gather(Operands{a, b}, all, "mma.sync.m16n8k16");
  auto a_at = [&](int row, int k) {
    const Operands& o = all[(row % 8) * 4 + (k % 8) / 2];
    return widen<T>(o.a.r[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
  };
  auto b_at = [&](int k, int col) { return widen<T>(all[col * 4 + (k % 8) / 2].b.r[k >= 8 ? 1 : 0], k % 2); };
  const int lane = int(simt::lane_id()), g = lane / 4, c = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = 2 * c + i % 2;
    float sum = d.r[i];
    for (int k = 0; k < 16; ++k) sum += a_at(row, k) * b_at(k, col);
    d.r[i] = sum;
  }
#else
  (void)d, (void)a, (void)b;  // nvcc's host pass: device code has no body there
#endif
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: four 8x8 matrices of 16-bit values from shared
// memory in one instruction, lane l naming row l % 8 of matrix l / 8 (16 contiguous bytes, 16-byte
// aligned: `row` is that row's first element in `tile`). Lane l receives in r[i] matrix i's elements
// (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1), low half first; with Trans those of the transposed
// matrix, (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4). So a row-major tile gives A fragments and
// the B fragments of B[k][n] = tile[n][k] as they lie, and those of B[k][n] = tile[k][n] transposed,
// in a quarter of the 32-bit loads (an eighth of the 16-bit ones).
template <bool Trans, class S>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], S tile, int row) {
#if defined(__CUDA_ARCH__)
  const auto at = static_cast<uint32_t>(__cvta_generic_to_shared(tile + row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
#elif defined(TANDEM_SIMT_EMULATOR)
  int rows[32];
  simt::warp_all_gather(row, rows, "ldmatrix.sync.m8n8.x4");
  const int lane = int(simt::lane_id()), g = lane / 4, c = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int* m = rows + 8 * i;  // matrix i's row starts
    auto at = [&](int rr, int cc) { return uint16_t(tile[m[rr] + cc]); };
    r[i] = Trans ? pair(at(2 * c, g), at(2 * c + 1, g)) : pair(at(g, 2 * c), at(g, 2 * c + 1));
  }
#else
  (void)r, (void)tile, (void)row;
#endif
}

}  // namespace tandem::TANDEM_CUDA_NS
