// The message of the error a callable throws, for tests that check what an error says.
#pragma once
#include <string>

#include "runtime/error.h"

namespace tandem::testing {

// what() of the E that fn() throws; "" when it throws none (another exception type propagates).
template <typename E = Error, typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace tandem::testing
