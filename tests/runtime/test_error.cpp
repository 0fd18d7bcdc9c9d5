// What users read of an error: the message, no source location, for what they cause (a bad value,
// file, peer, or an unsupported request); a failed library call and an internal error keep
// "file:line: " in front. where() has the location of each, for debug logs.
#include <gtest/gtest.h>

#include <string>

#include "runtime/error.h"

namespace tandem {
namespace {

template <class E>
std::pair<std::string, std::string> caught(ErrorKind kind) {
  try {
    throw_error(kind, "/src/tandem/runtime/data/idx.cpp", 62, "cannot open x");
  } catch (const E& e) {
    return {e.what(), e.where()};
  } catch (...) {
  }
  return {"not thrown as expected", ""};
}

TEST(Error, UsersReadTheMessageWithoutSourceLocation) {
  for (auto [what, where] : {caught<ValueError>(ErrorKind::Value), caught<IOError>(ErrorKind::IO),
                             caught<CommError>(ErrorKind::Comm), caught<NotSupportedError>(ErrorKind::NotSupported)}) {
    EXPECT_EQ(what, "cannot open x");
    EXPECT_EQ(where, "runtime/data/idx.cpp:62");
  }
  auto [backend, at] = caught<BackendError>(ErrorKind::Backend);
  EXPECT_EQ(backend, "runtime/data/idx.cpp:62: cannot open x");  // a failed call: where it was made
  EXPECT_EQ(at, "runtime/data/idx.cpp:62");
  auto [internal, _] = caught<Error>(ErrorKind::Internal);
  EXPECT_EQ(internal, "runtime/data/idx.cpp:62: cannot open x");  // a bug of ours: where to look
  try {
    TANDEM_CHECK(1 + 1 == 3, "{} is not {}", 2, 3);
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "2 is not 3");
    EXPECT_NE(e.where().find("test_error.cpp:"), std::string::npos) << e.where();
  }
}

}  // namespace
}  // namespace tandem
