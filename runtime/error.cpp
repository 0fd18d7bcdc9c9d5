// The error reporter: throws the exception of the given kind, its location in where() (and in the
// message of a failed call or an internal error).
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
  std::string where = fmt::format("{}:{}", short_path(file), line);
  // What users cause and read: the message alone (the location stays in where()).
  switch (kind) {
    case ErrorKind::Value: throw ValueError(message, where);
    case ErrorKind::IO: throw IOError(message, where);
    case ErrorKind::Comm: throw CommError(message, where);
    case ErrorKind::NotSupported: throw NotSupportedError(message, where);
    case ErrorKind::Backend: throw BackendError(where + ": " + message, where);
    case ErrorKind::Internal: break;
  }
  throw Error(where + ": " + message, where);
}

void throw_call_error(const char* call, const char* file, int line, const std::string& library_message) {
  throw_error(ErrorKind::Backend, file, line, fmt::format("{} failed: {}", call, library_message));
}

}  // namespace tandem
