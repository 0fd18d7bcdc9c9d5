// Helpers of the run-config tests: the line a text holds a snippet on, and a check that a call
// throws ValueError with a message holding every expected piece.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace tandem::testing {

// The 1-based line of the first occurrence of `needle` in `text` (0 when absent), counted here, apart
// from yaml-cpp, so a wrong line in a message shows.
inline int line_in(const std::string& text, const std::string& needle) {
  const size_t pos = text.find(needle);
  if (pos == std::string::npos) return 0;
  int line = 1;
  for (size_t i = 0; i < pos; ++i) line += text[i] == '\n';
  return line;
}

// The ValueError message of `body`, or a test failure when it throws nothing or something else.
inline std::string value_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const ValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a ValueError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a ValueError, nothing was thrown";
  return "";
}

inline void expect_contains(const std::string& message, const std::vector<std::string>& pieces) {
  for (const std::string& p : pieces)
    EXPECT_NE(message.find(p), std::string::npos) << "'" << p << "' not in: " << message;
}

}  // namespace tandem::testing
