// A temporary directory for a test, removed with everything in it at scope exit.
#pragma once
#include <cstdlib>
#include <string>

#include "runtime/serialization/atomic_file.h"

namespace tandem {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tandem-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    if (!p) throw std::runtime_error("mkdtemp failed");
    path = p;
  }
  ~TempDir() {
    try {
      serialization::remove_all(path);
    } catch (...) {
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace tandem
