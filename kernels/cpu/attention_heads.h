// The (batch, head) loop the CPU attention kernels share (f32/f64 in attention.cpp, bf16 on AMX
// tiles in attention_bf16.cpp): OpenMP across heads once the work pays for a parallel region.
#pragma once
#include <cstdint>

#include "kernels/cpu/lanes.h"
#include "runtime/backend/attention.h"

namespace tandem::kernels {

// f(bh, in, out, ld_in, ld_out) for each head bh: in / out are the offsets of its first row in the
// inputs (q, k, v and their gradients, before s's q/k/v offsets) and in the outputs (out, dout);
// ld_in / ld_out the row strides. Nothing runs for empty shapes (their tensors may have null data).
template <class F>
void for_each_head(const AttentionShape& s, F&& f) {
  if (s.heads() == 0 || s.t == 0) return;
  const HeadRows in = head_rows(s, s.ld_in), io = head_rows(s, s.ld_out);
#pragma omp parallel for schedule(static) if (s.heads() > 1 && s.heads() * s.t * s.d * s.t >= kParallelMinWork)
  for (int64_t bh = 0; bh < s.heads(); ++bh) f(bh, in.base(bh), io.base(bh), in.row, io.row);
}

}  // namespace tandem::kernels
