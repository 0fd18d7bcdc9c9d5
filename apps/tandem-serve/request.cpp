// Route rules (a known path with another method is a 405, not a 404), path numbers and the body's
// JSON, kept free of the server so that they can be fuzzed.
#include "apps/tandem-serve/request.h"

#include <regex>
#include <vector>

#include <fmt/format.h>

#include "apps/tandem-serve/http_error.h"

namespace tandem::serve {

namespace {

struct PathRule {
  std::regex path;  // group 1, where there is one: the id
  const char* allow;
};

const std::vector<PathRule>& path_rules() {
  static const std::vector<PathRule> rules = {
      {std::regex("^/$"), "GET, HEAD"},
      {std::regex("^/dashboard\\.js$"), "GET, HEAD"},
      {std::regex("^/health$"), "GET, HEAD"},
      {std::regex("^/jobs$"), "GET, HEAD, POST"},
      {std::regex("^/jobs/([0-9]{1,9})$"), "GET, HEAD, DELETE"},
      {std::regex("^/jobs/([0-9]{1,9})/(metrics|log)$"), "GET, HEAD"},
      {std::regex("^/gpus$"), "GET, HEAD"},
      {std::regex("^/gpus/([0-9]{1,4})$"), "GET, HEAD"},
      {std::regex("^/metrics$"), "GET, HEAD"},
      {std::regex("^/openapi\\.json$"), "GET, HEAD"},
  };
  return rules;
}

}  // namespace

Route check_route(const std::string& path, const std::string& method) {
  Route route;
  route.status = 404;
  for (const auto& r : path_rules()) {
    std::smatch m;
    if (!std::regex_match(path, m, r.path)) continue;
    route.allow = r.allow;
    if (m.size() > 1) route.id = path_number(m[1].str());
    // A method is one whole entry of the list ("GET", never "GET, HEAD").
    route.status = (", " + route.allow + ",").find(", " + method + ",") == std::string::npos ? 405 : 0;
    return route;
  }
  return route;
}

int64_t path_number(const std::string& digits) {
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
    throw HttpError(404, fmt::format("not a number in the path: '{}'", digits));
  return std::stoll(digits);
}

nlohmann::json parse_body(const std::string& body) {
  bool too_deep = false;
  auto depth_guard = [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxBodyDepth) too_deep = true;
    return !too_deep;  // false drops the value: the rest of the body is skipped, not built
  };
  nlohmann::json body_json;
  try {
    body_json = nlohmann::json::parse(body, depth_guard);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number beyond a double (1e400): both the client's.
    throw HttpError(400, fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (too_deep) throw HttpError(400, fmt::format("the body nests deeper than {} levels", kMaxBodyDepth));
  return body_json;
}

}  // namespace tandem::serve
