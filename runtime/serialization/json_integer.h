// An integer read from parsed JSON strictly: nlohmann's get<T>() casts a float such as 6.7e61 to T,
// which is undefined behaviour when it does not fit (the state_json fuzzer found one), and takes 2.5
// as 2. Readers of files that a person or another program may have written use this instead.
#pragma once
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace tandem::serialization {

// `v` as T; IOError "<what> is <v>, not an integer in [min, max]" for a float, a non-number, a
// negative number for an unsigned T or one outside T's range.
template <class T>
T json_integer(const nlohmann::json& v, std::string_view what) {
  static_assert(std::is_integral_v<T> && sizeof(T) <= sizeof(int64_t));
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(u);
  } else if (v.is_number_integer() && std::is_signed_v<T>) {
    const int64_t i = v.get<int64_t>();  // negative here: json keeps non-negative integers unsigned
    if (i >= static_cast<int64_t>(std::numeric_limits<T>::min())) return static_cast<T>(i);
  }
  TANDEM_FAIL(IO, "{} is {}, not an integer in [{}, {}]", what, v.dump(), std::numeric_limits<T>::min(),
              std::numeric_limits<T>::max());
}

}  // namespace tandem::serialization
