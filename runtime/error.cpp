// The error reporter: formats "file:line: message" and throws the exception of the given kind.
#include "runtime/error.h"

namespace tandem {

namespace {
// Paths in messages are relative to the source root: shorter and identical on every machine.
const char* short_path(const char* file) {
  std::string_view path(file);
  for (const char* top : {"/runtime/", "/kernels/", "/nn/", "/comm/", "/embed/", "/apps/", "/tests/", "/bench/"}) {
    auto pos = path.rfind(top);
    if (pos != std::string_view::npos) return file + pos + 1;
  }
  return file;
}
}  // namespace

void throw_error(ErrorKind kind, const char* file, int line, const std::string& message) {
  std::string text = fmt::format("{}:{}: {}", short_path(file), line, message);
  switch (kind) {
    case ErrorKind::Value: throw ValueError(text);
    case ErrorKind::Backend: throw BackendError(text);
    case ErrorKind::IO: throw IOError(text);
    case ErrorKind::Comm: throw CommError(text);
    case ErrorKind::NotSupported: throw NotSupportedError(text);
    case ErrorKind::Internal: break;
  }
  throw Error(text);
}

void throw_call_error(const char* call, const char* file, int line, const std::string& library_message) {
  throw_error(ErrorKind::Backend, file, line, fmt::format("{} failed: {}", call, library_message));
}

}  // namespace tandem
