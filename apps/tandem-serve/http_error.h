// HttpError: a request refused with a status, a message and (where one is to blame) a field; the
// routes turn it into {"error": message, "field": field}.
#pragma once
#include <stdexcept>
#include <string>

namespace tandem::serve {

class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message, std::string field = "")
      : std::runtime_error(message), status_(status), field_(std::move(field)) {}
  int status() const { return status_; }
  const std::string& field() const { return field_; }

 private:
  int status_;
  std::string field_;
};

}  // namespace tandem::serve
