// What tandem-serve reads from a request before it touches any state, as pure functions (the
// routes call them; fuzz/fuzz_serve.cpp fuzzes them): the route rules and the id in a path, and
// the JSON body of POST /jobs.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::serve {

// Deepest nesting a request body may have: a job request is one flat object. Deeper bodies are a
// 400 before anything walks them (nlohmann's dump, used in error messages, recurses per level).
constexpr int kMaxBodyDepth = 8;

struct Route {
  int status = 0;       // 0: a known path with an allowed method; 404: no such path; 405: another method
  std::string allow;    // the path's methods ("GET, HEAD, DELETE") when it is known
  std::optional<int64_t> id;  // the number in /jobs/{id}... and /gpus/{index}
};

// The rule for `path` (already URL-decoded) and `method`.
Route check_route(const std::string& path, const std::string& method);

// The number a route captured ([0-9]{1,9} or shorter): leading zeros allowed, never throws for those.
int64_t path_number(const std::string& digits);

// The request body as JSON: HttpError(400) when it is not valid JSON, holds a number beyond a
// double's range, or nests deeper than kMaxBodyDepth.
nlohmann::json parse_body(const std::string& body);

}  // namespace tandem::serve
