// Where Debian's packages put the data tandem's own apps, benches and tests read by default: the
// defaults of tandem-train's --data-dir and --text-dir. Internal (not installed): a program names its
// own data.
#pragma once

namespace tandem::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";  // fashion-mnist's IDX files
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";              // the fortunes package

}  // namespace tandem::data
