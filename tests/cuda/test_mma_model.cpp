// The emulator's models of mma.sync.m16n8k16 and ldmatrix (kernels/cuda/mma.cuh) against PTX's
// fragment layouts written out independently here: fragments built element by element from
// row-major matrices, the product compared with a plain matrix product (small integers: exact in
// bf16, f16 and f32), and ldmatrix's registers compared with the same element-by-element fragments.
// On a GPU the attention tests check the instructions themselves through the same layouts.
#include "runtime/backend/cuda/simt/simt.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/mma.cuh"

namespace tandem::sim {
namespace {

#define LAUNCH(...) ::tandem::simt::launch(__FILE__, __LINE__, __VA_ARGS__)

template <class T>
uint16_t bits_of(float v) {
  if constexpr (std::is_same_v<T, bfloat16>) return float_to_bf16_bits(v);
  else return float_to_half_bits(v);
}

// d [16, 8] = a [16, 16] b [16, 8] + 1, all row-major; fragments by PTX's tables (g = lane / 4,
// c = lane % 4).
template <class T>
__global__ void mma_by_layout(const uint16_t* a, const uint16_t* b, float* d) {
  const int lane = int(threadIdx.x), g = lane / 4, c = lane % 4;
  auto A = [&](int r, int k) { return a[r * 16 + k]; };
  auto B = [&](int k, int n) { return b[k * 8 + n]; };
  const FragA fa{{pair(A(g, 2 * c), A(g, 2 * c + 1)), pair(A(g + 8, 2 * c), A(g + 8, 2 * c + 1)),
                  pair(A(g, 2 * c + 8), A(g, 2 * c + 9)), pair(A(g + 8, 2 * c + 8), A(g + 8, 2 * c + 9))}};
  const FragB fb{{pair(B(2 * c, g), B(2 * c + 1, g)), pair(B(2 * c + 8, g), B(2 * c + 9, g))}};
  FragD acc;
  for (float& x : acc.r) x = 1.f;
  mma<T>(acc, fa, fb);
  d[g * 8 + 2 * c] = acc.r[0];
  d[g * 8 + 2 * c + 1] = acc.r[1];
  d[(g + 8) * 8 + 2 * c] = acc.r[2];
  d[(g + 8) * 8 + 2 * c + 1] = acc.r[3];
}

template <class T>
void check_mma() {
  std::vector<uint16_t> a(256), b(128);
  std::vector<float> af(256), bf(128);
  for (int i = 0; i < 256; ++i) af[size_t(i)] = float((i * 7) % 11 - 5);
  for (int i = 0; i < 128; ++i) bf[size_t(i)] = float((i * 5) % 9 - 4);
  for (int i = 0; i < 256; ++i) a[size_t(i)] = bits_of<T>(af[size_t(i)]);
  for (int i = 0; i < 128; ++i) b[size_t(i)] = bits_of<T>(bf[size_t(i)]);
  std::vector<float> d(128, -1e9f);
  LAUNCH(mma_by_layout<T>, dim3(1), dim3(32), 0, a.data(), b.data(), d.data());
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      float want = 1.f;
      for (int k = 0; k < 16; ++k) want += af[size_t(r * 16 + k)] * bf[size_t(k * 8 + n)];
      EXPECT_EQ(d[size_t(r * 8 + n)], want) << "row " << r << " column " << n;
    }
}

TEST(MmaModel, ProductOfLayoutFragmentsIsTheMatrixProduct) {
  check_mma<bfloat16>();
  check_mma<half>();
}

// A 16 x 24 tile (pitch 24: rows stay 16-byte aligned) in dynamic shared memory, element (r, k) =
// r * 100 + k; ldmatrix's A fragment of rows 0-15, columns 8-23 and its B fragments (rows as B's
// columns, and transposed) against the tables. out[lane * 12 + ...]: the lane's 12 registers.
__global__ void ldmatrix_vs_layout(uint32_t* got, uint32_t* want) {
  constexpr int P = 24, k0 = 8;
  auto tile = dynamic_shared<uint16_t>();
  const int lane = int(threadIdx.x), g = lane / 4, c = lane % 4;
  for (int i = lane; i < 16 * P; i += 32) tile[i] = uint16_t(i / P * 100 + i % P);
  __syncwarp();
  auto at = [&](int r, int k) { return uint16_t(tile[r * P + k]); };
  uint32_t r[4];
  // A: matrices (rows 0-7 | 8-15) x (columns k0.. | k0+8..), lane l naming row l % 8 of matrix l / 8.
  ldmatrix_x4<false>(r, tile, ((lane & 7) + (lane >> 3 & 1) * 8) * P + k0 + (lane >> 4) * 8);
  const uint32_t a[4] = {pair(at(g, k0 + 2 * c), at(g, k0 + 2 * c + 1)), pair(at(g + 8, k0 + 2 * c), at(g + 8, k0 + 2 * c + 1)),
                         pair(at(g, k0 + 2 * c + 8), at(g, k0 + 2 * c + 9)),
                         pair(at(g + 8, k0 + 2 * c + 8), at(g + 8, k0 + 2 * c + 9))};
  for (int i = 0; i < 4; ++i) got[lane * 12 + i] = r[i], want[lane * 12 + i] = a[i];
  // B[k][n] = tile[n][k] for n in 0-7 and 8-15, k in k0..k0+15: registers as they lie.
  ldmatrix_x4<false>(r, tile, ((lane & 7) + (lane >> 4) * 8) * P + k0 + (lane >> 3 & 1) * 8);
  const uint32_t bn[4] = {pair(at(g, k0 + 2 * c), at(g, k0 + 2 * c + 1)), pair(at(g, k0 + 2 * c + 8), at(g, k0 + 2 * c + 9)),
                          pair(at(g + 8, k0 + 2 * c), at(g + 8, k0 + 2 * c + 1)),
                          pair(at(g + 8, k0 + 2 * c + 8), at(g + 8, k0 + 2 * c + 9))};
  for (int i = 0; i < 4; ++i) got[lane * 12 + 4 + i] = r[i], want[lane * 12 + 4 + i] = bn[i];
  // B[k][n] = tile[k][n] for k in 0-15, n in k0..k0+7 and k0+8..: transposed.
  ldmatrix_x4<true>(r, tile, ((lane & 7) + (lane >> 3 & 1) * 8) * P + k0 + (lane >> 4) * 8);
  const uint32_t bt[4] = {pair(at(2 * c, k0 + g), at(2 * c + 1, k0 + g)), pair(at(2 * c + 8, k0 + g), at(2 * c + 9, k0 + g)),
                          pair(at(2 * c, k0 + 8 + g), at(2 * c + 1, k0 + 8 + g)),
                          pair(at(2 * c + 8, k0 + 8 + g), at(2 * c + 9, k0 + 8 + g))};
  for (int i = 0; i < 4; ++i) got[lane * 12 + 8 + i] = r[i], want[lane * 12 + 8 + i] = bt[i];
}

TEST(MmaModel, LdmatrixGivesTheLayoutFragments) {
  std::vector<uint32_t> got(32 * 12, 0), want(32 * 12, 1);
  LAUNCH(ldmatrix_vs_layout, dim3(1), dim3(32), 16 * 24 * sizeof(uint16_t), got.data(), want.data());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << "lane " << i / 12 << " register " << i % 12;
}

// The model refuses a warp that is not whole: mma.sync and ldmatrix are .aligned, every lane calls.
__global__ void mma_in_half_a_warp(float* d) {
  FragD acc;
  if (threadIdx.x < 16) mma<bfloat16>(acc, FragA{{0, 0, 0, 0}}, FragB{{0, 0}});
  d[threadIdx.x] = acc.r[0];
}

TEST(MmaModel, AnMmaReachedByPartOfTheWarpIsReported) {
  std::vector<float> d(32);
  EXPECT_THROW(LAUNCH(mma_in_half_a_warp, dim3(1), dim3(32), 0, d.data()), simt::KernelError);
}

}  // namespace
}  // namespace tandem::sim
