// The HTTP API of tandem-serve (the paths of openapi.json) on a cpp-httplib server: routing,
// 405 for a known path with another method, the bearer-token rule, JSON errors, request counters.
#pragma once
#include <map>
#include <mutex>
#include <string>

#include <httplib.h>

#include "apps/tandem-serve/job_manager.h"
#include "apps/tandem-serve/job_schema.h"
#include "apps/tandem-serve/serve_config.h"

namespace tandem::serve {

struct ApiContext {
  const ServeConfig& config;
  JobManager& jobs;
  const JobSchema& schema;
  std::string token;
  bool loopback = true;  // bound to a loopback address: reading calls need no token
  // Responses by status code, for /metrics.
  std::mutex counters_mu;
  std::map<int, int64_t> responses;
};

void install_routes(httplib::Server& server, ApiContext& ctx);

}  // namespace tandem::serve
