// Eigen for the CPU kernels, included through here so that every file silences the same warning.
#pragma once

// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (_mm256_undefined_pd passed
// to _mm512_extractf64x4_pd) where Eigen's kernels are instantiated: a false positive, silenced
// for the files that instantiate Eigen.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The library is built with EIGEN_DONT_PARALLELIZE (CMakeLists.txt): Eigen's threaded product picks
// its blocking by the thread count, so its bits would depend on --threads. The GEMM threads over
// tiles of its own instead (gemm_tiles.h), and Eigen's products elsewhere (attention's tiles) run
// inside our parallel loops. Defined for the whole target, so every file instantiates the same Eigen.
#ifndef EIGEN_DONT_PARALLELIZE
#error "kernels/cpu/eigen.h: build with EIGEN_DONT_PARALLELIZE (the tandem target defines it)"
#endif
#include <Eigen/Core>
