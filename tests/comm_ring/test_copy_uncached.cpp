// copy_uncached (the all-gather's non-temporal copy) against memcpy: every head/tail alignment and
// size around its 16-byte and 64-byte steps, and nothing written outside the destination.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "comm/transport.h"

namespace tandem::comm {
namespace {

TEST(CopyUncached, EqualsMemcpyAtEveryAlignmentAndSize) {
  std::vector<uint8_t> src(4096 + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  const std::vector<size_t> sizes = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4096};
  for (size_t size : sizes)
    for (size_t dst_off = 0; dst_off < 20; ++dst_off)
      for (size_t src_off : {size_t(0), size_t(3), size_t(16), size_t(33)}) {
        std::vector<uint8_t> dst(size + 64, 0xA5);
        copy_uncached(dst.data() + dst_off, src.data() + src_off, size);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dst_off && i < dst_off + size;
          const uint8_t want = inside ? src[src_off + i - dst_off] : uint8_t(0xA5);
          ASSERT_EQ(dst[i], want) << "size " << size << " dst_off " << dst_off << " src_off " << src_off
                                  << " byte " << i;
        }
      }
}

TEST(CopyUncached, LargeCopy) {
  const size_t n = (size_t(9) << 20) + 37;  // above the all-gather's threshold, odd length
  std::vector<uint8_t> src(n), dst(n + 1, 0);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  copy_uncached(dst.data() + 1, src.data(), n);
  EXPECT_EQ(dst[0], 0);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 1));
}

}  // namespace
}  // namespace tandem::comm
