// Checks for numeric flags whose errors a person can read. CLI11 2.1's PositiveNumber and
// NonNegativeNumber are ranges up to the largest double and say "--lr: Value -1 not in range
// 0.000000 to 1797693134862315708...", 309 digits of it; these say "--lr: must be > 0, got -1".
#pragma once
#include "apps/common/engine.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "nn/config/checks.h"
#include "runtime/enum_names.h"
#include "runtime/spelling.h"

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

// A flag bound to an enum field, spelt with the enum's words (runtime/enum_names.h) in any case;
// `only`: the values this flag offers (empty: all). A word it does not offer is a usage error
// "--amp: f8 not in off, f16 or bf16"; the help shows the words and the field's value as the default.
template <class E>
CLI::Option* add_enum_option(CLI::App& app, const std::string& name, E& field, const std::string& help,
                             const std::vector<E>& only = {}) {
  std::vector<std::string> words;
  for (const std::string& w : enum_words<E>())
    if (only.empty() || std::find(only.begin(), only.end(), *enum_value<E>(w)) != only.end()) words.push_back(w);
  auto offered = [words](const std::string& w) {
    return std::find(words.begin(), words.end(), nn::config::lower(w)) != words.end();
  };
  std::string list;
  for (const std::string& w : words) list += (list.empty() ? "" : "|") + w;
  return app
      .add_option_function<std::string>(
          name, [&field](const std::string& w) { field = *enum_value<E>(nn::config::lower(w)); }, help)
      ->check(CLI::Validator(
          [offered, words](std::string& w) { return offered(w) ? std::string() : w + " not in " + or_list(words); },
          ""))
      ->type_name(list)
      ->default_str(enum_name(field));
}

}  // namespace tandem::app
