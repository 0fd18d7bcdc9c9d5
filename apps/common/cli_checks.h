// Checks for numeric flags whose errors a person can read. CLI11 2.1's PositiveNumber and
// NonNegativeNumber are ranges up to the largest double and say "--lr: Value -1 not in range
// 0.000000 to 1797693134862315708...", 309 digits of it; these say "--lr: must be > 0, got -1".
#pragma once
#include "apps/common/engine.h"
#include <cmath>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

namespace tandem::app {

// A finite number > 0 (or >= 0 with `zero_allowed`); the option's own type is converted after.
inline CLI::Validator number_at_least_zero(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v))
          return "'" + text + "' is not a finite number";
        if (zero_allowed ? v >= 0 : v > 0) return {};
        return std::string(zero_allowed ? "must be >= 0" : "must be > 0") + ", got " + text;
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

inline const CLI::Validator kPositive = number_at_least_zero(false);
inline const CLI::Validator kNonNegative = number_at_least_zero(true);

}  // namespace tandem::app
