// The tiles of C that the CPU GEMM's Eigen path computes, one single-threaded Eigen product each.
// Eigen's own threading chooses its blocking, and so each element's order of additions, by the
// thread count; ours cuts C by a grid that depends on m, n and k only and lets the thread count decide
// only which thread computes which tile, so the bits are the same at any --threads.
#pragma once
#include <algorithm>
#include <cstdint>

namespace tandem::kernels {

struct GemmTiles {
  int64_t tile_m = 0, tile_n = 0;  // a tile's rows and columns (the last row or column of tiles may be smaller)
  int64_t rows = 0, cols = 0;      // tiles down M and across N
  int64_t count() const { return rows * cols; }
};

// The dimension with the larger tiles is cut into twice as many pieces (each rounded up to a multiple of
// 64) while the pieces keep at least 256 rows or columns (the last one at least 128) and 4 MFLOP, and
// the tiles number at most 32. Each tile packs its own rows of A and columns of B, and edges that are
// not whole vector panels take Eigen's slower remainder paths: tiles of 64 x 64 made tandem-train's
// mlp 16% slower on one thread, tiles of 256 and more cost 0-3% with Eigen's AVX2 kernels
// (docs/cpu-kernels.md). The price of the fixed grid: a C smaller than 512 x 512 has fewer tiles, so
// it keeps fewer threads busy, than Eigen's own threading would.
inline GemmTiles gemm_tiles(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kAlign = 64, kMinEdge = 256, kMinLast = 128, kMaxTiles = 32;
  constexpr double kMinTileFlops = 4.0 * (1 << 20);
  auto tile_of = [](int64_t dim, int64_t pieces) {
    return std::min(dim, ((dim + pieces - 1) / pieces + kAlign - 1) / kAlign * kAlign);
  };
  auto count = [](int64_t dim, int64_t tile) { return (dim + tile - 1) / tile; };
  const int64_t mm = std::max<int64_t>(m, 1), nn = std::max<int64_t>(n, 1);
  int64_t pm = 1, pn = 1;  // pieces asked of each dimension (rounding may give fewer)
  for (;;) {
    const int64_t tm = tile_of(mm, pm), tn = tile_of(nn, pn);
    const bool split_m = tm >= tn;  // the larger tiles' dimension (M on a tie)
    const int64_t dim = split_m ? mm : nn, pieces = 2 * (split_m ? pm : pn);
    const int64_t tile = tile_of(dim, pieces), last = dim - (count(dim, tile) - 1) * tile;
    const int64_t other = split_m ? tn : tm;
    if (tile < kMinEdge || last < kMinLast) break;
    if (2.0 * double(tile) * double(other) * double(k) < kMinTileFlops) break;
    if (count(dim, tile) * count(split_m ? nn : mm, other) > kMaxTiles) break;
    (split_m ? pm : pn) = pieces;
  }
  GemmTiles t;
  t.tile_m = tile_of(mm, pm);
  t.tile_n = tile_of(nn, pn);
  t.rows = count(mm, t.tile_m);
  t.cols = count(nn, t.tile_n);
  return t;
}

}  // namespace tandem::kernels
