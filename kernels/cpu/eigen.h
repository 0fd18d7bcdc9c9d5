// Eigen for the CPU kernels, included through here so that every file silences the same warning.
#pragma once

// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (_mm256_undefined_pd passed
// to _mm512_extractf64x4_pd) where Eigen's kernels are instantiated: a false positive, silenced
// for the files that instantiate Eigen.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
