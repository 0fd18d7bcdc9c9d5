// The causal band of a small product (small_gemm_f32) whose rows and columns, or rows and products,
// are queries and keys: row i of C pairs with index i + shift of the other axis, and nothing past
// (or, for k_begin, before) that index is needed. The attention's tiles that cross the diagonal
// skip about a third of a diagonal 32 x 32 block's work this way. Internal to kernels/cpu.
#pragma once
#include <algorithm>
#include <cstdint>

namespace tandem::kernels {

struct SmallGemmBand {
  enum class Kind {
    none,
    cols,     // C(i, j) is needed for j <= i + shift only; entries past that may or may not be written
    k_end,    // A(i, p) is zero for p > i + shift: those products are skipped
    k_begin,  // A(i, p) is zero for p < i + shift: those products are skipped
  };
  Kind kind = Kind::none;
  int64_t shift = 0;

  // What the rows [r0, r1) of a product [m, n] x k need: columns [0, n_end) (before the walk rounds
  // them up to its tiles), products [k_begin, k_end) (k_begin >= k_end: none).
  struct Span {
    int64_t n_end, k_begin, k_end;
  };
  Span span(int64_t r0, int64_t r1, int64_t n, int64_t k) const {
    Span s{n, 0, k};
    if (kind == Kind::cols) s.n_end = std::clamp<int64_t>(r1 + shift, 0, n);
    if (kind == Kind::k_end) s.k_end = std::clamp<int64_t>(r1 + shift, 0, k);
    if (kind == Kind::k_begin) s.k_begin = std::clamp<int64_t>(r0 + shift, 0, k);
    return s;
  }
};

}  // namespace tandem::kernels
