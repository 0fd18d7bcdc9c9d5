// The AMX tile configuration the CPU's tile code shares (the GEMM's micro-kernel, the benchmarks'
// bf16 peak): every tile 16 rows of 64 bytes. Compiled for AMX by a target attribute, with internal
// linkage: call only where the CPU has AMX and Linux granted the tile state (avx512::has_amx()).
#pragma once
#include <immintrin.h>

#include <cstdint>

#define TANDEM_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace tandem::kernels {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

constexpr TileConfig every_tile_16_by_64() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}

// A constant in memory, not a local: GCC 12 does not count _tile_loadconfig as reading its operand,
// so it dropped the stores filling a local configuration (once amx_begin was a function of its own,
// not inlined into the GEMM's loop, it kept only the palette byte: every tile 0 rows, and the first
// tilezero raised #UD, SIGILL, on an H100 host's Sapphire Rapids).
alignas(64) constexpr TileConfig kTileConfig = every_tile_16_by_64();
static_assert(kTileConfig.palette == 1 && kTileConfig.rows[7] == 16 && kTileConfig.colsb[7] == 64 &&
              kTileConfig.rows[8] == 0);

// The configuration belongs to the thread: load it before the thread's first tile instruction and
// release the tiles after its last (amx_end), so an idle thread carries no tile state (8 KB) through
// context switches.
TANDEM_AMX inline void amx_begin() { _tile_loadconfig(&kTileConfig); }

TANDEM_AMX inline void amx_end() { _tile_release(); }

}  // namespace
}  // namespace tandem::kernels
