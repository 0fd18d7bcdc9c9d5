// The vectorised conversion loops between f32 and the 16-bit floats (convert_avx512.h, convert_avx2.h)
// and the one lookup of a dtype pair among them. convert_host takes one ISA's table once, so a call on
// a short span (batch norm converts plane by plane) costs a lookup, not a dispatch through each ISA.
#pragma once
#include <cstdint>

#include "runtime/dtype.h"

namespace tandem {

// src and dst hold n elements of the pair's types.
using ConvertLoop = void (*)(const void* src, void* dst, int64_t n);

// One ISA's loops (all null: none usable here).
struct ConvertLoops {
  ConvertLoop f32_to_f16 = nullptr, f16_to_f32 = nullptr, f32_to_bf16 = nullptr, bf16_to_f32 = nullptr;
};

// The loop for (src, dst), or null for another pair.
inline ConvertLoop loop_for(const ConvertLoops& l, DType s, DType d) {
  if (s == DType::f32) return d == DType::f16 ? l.f32_to_f16 : d == DType::bf16 ? l.f32_to_bf16 : nullptr;
  if (d == DType::f32) return s == DType::f16 ? l.f16_to_f32 : s == DType::bf16 ? l.bf16_to_f32 : nullptr;
  return nullptr;
}

}  // namespace tandem
