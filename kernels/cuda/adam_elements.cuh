// One tensor's Adam/AdamW update on the GPU, shared by the per-tensor kernel (optim.cu) and the
// multi-tensor one (multi_tensor_apply.cu): the per-element math is adam_step.h's; this is the walk
// over the elements, in 16-byte packs where every array allows (the update reads four arrays and
// writes three, so its time is their bytes).
#pragma once
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "runtime/backend/common/adam_step.h"

namespace tandem::TANDEM_CUDA_NS {

// Elements [0, n) of param p, grad g (times grad_factor), state m and v; `model`, when not null,
// receives the rounded params (f32 master weights of a 16-bit model). This thread takes elements
// (or packs) first, first + stride, ...
template <class T, class G>
__device__ __forceinline__ void adam_elements(T* __restrict__ p, const G* __restrict__ g, T* __restrict__ m,
                                              T* __restrict__ v, G* __restrict__ model, int64_t n,
                                              AdamHyper h, double grad_factor, int64_t first, int64_t stride) {
  using A = acc_t<T>;
  const bool scaled = grad_factor != 1.0;
  auto update = [&](T& pe, G ge, T& me, T& ve, G* oe) {
    A gv = static_cast<A>(to_acc(ge));
    if (scaled) gv = gv * static_cast<A>(grad_factor);
    A pv = to_acc(pe), mv = to_acc(me), vv = to_acc(ve);
    adam_update<A>(pv, gv, mv, vv, h);
    pe = from_acc<T>(pv);
    me = from_acc<T>(mv);
    ve = from_acc<T>(vv);
    if (oe) *oe = from_acc<G>(static_cast<float>(pv));
  };
  // V elements a step: 16 bytes of the wider type.
  constexpr int V = kPackWidth<T> < kPackWidth<G> ? kPackWidth<T> : kPackWidth<G>;
  int64_t head = 0;
  if (aligned_to(p, V * sizeof(T)) && aligned_to(m, V * sizeof(T)) && aligned_to(v, V * sizeof(T)) &&
      aligned_to(g, V * sizeof(G)) && (!model || aligned_to(model, V * sizeof(G)))) {
    using PT = Pack<T, V>;
    using PG = Pack<G, V>;
    for (int64_t i = first; i < n / V; i += stride) {
      PT pp = reinterpret_cast<PT*>(p)[i], mp = reinterpret_cast<PT*>(m)[i], vp = reinterpret_cast<PT*>(v)[i];
      const PG gp = reinterpret_cast<const PG*>(g)[i];
      PG op;
      for (int k = 0; k < V; ++k) update(pp.v[k], gp.v[k], mp.v[k], vp.v[k], model ? &op.v[k] : nullptr);
      reinterpret_cast<PT*>(p)[i] = pp;
      reinterpret_cast<PT*>(m)[i] = mp;
      reinterpret_cast<PT*>(v)[i] = vp;
      if (model) reinterpret_cast<PG*>(model)[i] = op;
    }
    head = n / V * V;
  }
  for (int64_t i = head + first; i < n; i += stride) update(p[i], g[i], m[i], v[i], model ? model + i : nullptr);
}

}  // namespace tandem::TANDEM_CUDA_NS
