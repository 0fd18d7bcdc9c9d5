// One vectorised conversion loop between f32 and a 16-bit float (convert_avx512.h, convert_avx2.h):
// src and dst hold n elements of the pair's types. convert_host looks one up once per dtype pair, so
// a call on a short span (batch norm converts plane by plane) costs a table load, not a dispatch.
#pragma once
#include <cstdint>

namespace tandem {

using ConvertLoop = void (*)(const void* src, void* dst, int64_t n);

}  // namespace tandem
