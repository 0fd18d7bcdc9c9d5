// The one error reporter of tandem: typed exceptions carrying file:line, and the CHECK macros.
// Library code throws; only apps/ catches and exits.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace tandem {

// Base of every error tandem throws. what() is the message a user reads: a bad argument, file,
// configuration, an unsupported request or a lost peer says what and why, no source location; a
// failed library call and an internal error (a bug of ours) start with "file:line: ". where() keeps
// the location of each for debug logs ("runtime/tensor.cpp:210"; empty where none was given).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string where = "")
      : std::runtime_error(message), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};
class ValueError : public Error { using Error::Error; };       // bad argument: shape, dtype, flag
class BackendError : public Error { using Error::Error; };     // a CUDA/cuBLAS/cuDNN/NCCL/MPI call failed
class IOError : public Error { using Error::Error; };          // missing, truncated or corrupt file
class CommError : public Error { using Error::Error; };        // dead rank, deadline, desync
class NotSupportedError : public Error { using Error::Error; };  // backend X does not support Y

enum class ErrorKind { Value, Backend, IO, Comm, NotSupported, Internal };

[[noreturn]] void throw_error(ErrorKind kind, const char* file, int line, const std::string& message);

// Reports a failed library call: "<file>:<line>: <call> failed: <library error string>".
[[noreturn]] void throw_call_error(const char* call, const char* file, int line,
                                   const std::string& library_message);

}  // namespace tandem

// TANDEM_CHECK(cond, "fmt {}", args...): throws ValueError with file:line when cond is false.
#define TANDEM_CHECK(cond, ...)                                                          \
  do {                                                                                   \
    if (!(cond))                                                                         \
      ::tandem::throw_error(::tandem::ErrorKind::Value, __FILE__, __LINE__,              \
                            ::fmt::format(__VA_ARGS__));                                 \
  } while (0)

#define TANDEM_CHECK_KIND(kind, cond, ...)                                               \
  do {                                                                                   \
    if (!(cond))                                                                         \
      ::tandem::throw_error(::tandem::ErrorKind::kind, __FILE__, __LINE__,               \
                            ::fmt::format(__VA_ARGS__));                                 \
  } while (0)

#define TANDEM_FAIL(kind, ...)                                                           \
  ::tandem::throw_error(::tandem::ErrorKind::kind, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
