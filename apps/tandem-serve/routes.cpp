// The routes of tandem-serve.
#include "apps/tandem-serve/routes.h"

#include <unistd.h>

#include <fmt/format.h>

#include "apps/tandem-serve/assets.h"
#include "apps/common/loopback.h"
#include "apps/common/monitor_json.h"
#include "apps/tandem-serve/http_error.h"
#include "apps/tandem-serve/auth.h"
#include "apps/tandem-serve/request.h"
#include "runtime/monitor/prometheus.h"
#include "tandem/version.h"

namespace tandem::serve {

namespace {

constexpr const char* kJson = "application/json";

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Replacing invalid UTF-8 (a parse error quotes the client's bytes): the reply stays JSON.
  res.set_content(body.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", kJson);
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& field = "") {
  send_json(res, status, {{"error", message}, {"field", field.empty() ? nlohmann::json() : nlohmann::json(field)}});
}

std::string status_text(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 414: return "URI too long";
    case 416: return "range not satisfiable";
    case 500: return "internal error";
    default: return fmt::format("HTTP status {}", status);
  }
}

bool is_reading(const std::string& method) { return method == "GET" || method == "HEAD"; }

// The job as GET /jobs/{id} shows it: its record and what its metrics file and log say.
nlohmann::json job_view(const Job& j, const JobStore& store) {
  nlohmann::json v = to_json(j);
  MetricsSummary m = store.summarize_metrics(j.id);
  v["progress"] = m.progress;
  v["last_metrics"] = m.last_metrics;
  v["result"] = m.result;
  const bool bad = j.state == JobState::Failed || j.state == JobState::Lost;
  v["errors"] = store.error_lines(j.id, 10, bad);
  const std::string url = store.status_url(j.id);
  v["status_url"] = url.empty() || is_final(j.state) ? nlohmann::json() : nlohmann::json(url);
  return v;
}

// Every GPU this process sees (runtime/monitor); an empty array without NVML or GPUs.
nlohmann::json gpus_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : monitor::query_gpus()) out.push_back(g);
  return out;
}

int64_t path_id(const httplib::Request& req) { return path_number(req.matches[1].str()); }

Job find_job(ApiContext& ctx, const httplib::Request& req) {
  auto j = ctx.jobs.get(path_id(req));
  if (!j) throw HttpError(404, fmt::format("no job {}", req.matches[1].str()));
  return *j;
}

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string prometheus_text(ApiContext& ctx) {
  monitor::PrometheusWriter w;
  ManagerStats s = ctx.jobs.stats();
  w.family("tandem_serve_jobs", "gauge", "Jobs known to the server, by state");
  for (const auto& [st, n] : s.by_state) w.sample("tandem_serve_jobs", {{"state", state_name(st)}}, n);
  w.family("tandem_serve_jobs_submitted_total", "counter", "Jobs submitted since the server started");
  w.sample("tandem_serve_jobs_submitted_total", {}, static_cast<double>(s.submitted));
  w.family("tandem_serve_jobs_started_total", "counter", "Jobs launched since the server started");
  w.sample("tandem_serve_jobs_started_total", {}, static_cast<double>(s.started));
  w.family("tandem_serve_jobs_finished_total", "counter", "Jobs that reached a final state since the server started");
  for (JobState st : kAllStates)
    if (is_final(st))
      w.sample("tandem_serve_jobs_finished_total", {{"state", state_name(st)}},
               static_cast<double>(s.finished.count(st) ? s.finished.at(st) : 0));
  w.family("tandem_serve_slots", "gauge", "Ranks the server runs at once (--slots)");
  w.sample("tandem_serve_slots", {}, s.slots);
  w.family("tandem_serve_slots_used", "gauge", "Ranks of the running jobs");
  w.sample("tandem_serve_slots_used", {}, s.slots_used);
  w.family("tandem_serve_http_responses_total", "counter", "HTTP responses since the server started, by status code");
  {
    std::lock_guard<std::mutex> lock(ctx.counters_mu);
    for (const auto& [code, n] : ctx.responses)
      w.sample("tandem_serve_http_responses_total", {{"code", std::to_string(code)}}, static_cast<double>(n));
  }
  monitor::write_gpu_metrics(w, monitor::query_gpus(), hostname());
  return w.str();
}

// Wraps a handler: HttpError and JSON errors become JSON error responses.
template <class F>
httplib::Server::Handler guarded(F f) {
  return [f](const httplib::Request& req, httplib::Response& res) {
    try {
      f(req, res);
    } catch (const HttpError& e) {
      send_error(res, e.status(), e.what(), e.field());
    }
  };
}

// The checks made on a request's line and headers, before httplib reads its body: the route, the
// token, and a body it can bound. A refusal here answers without reading the body (main.cpp serves
// one request per connection, so what is left unread is never taken for a next request).
httplib::Server::HandlerResponse check_before_body(ApiContext& ctx, const httplib::Request& req,
                                                   httplib::Response& res) {
  const Route route = check_route(req.path, req.method);
  if (route.status == 404) {
    send_error(res, 404, fmt::format("no such path: {}", req.path));
    return httplib::Server::HandlerResponse::Handled;
  }
  if (route.status == 405) {
    res.set_header("Allow", route.allow);
    send_error(res, 405, fmt::format("{} is not allowed on {}; allowed: {}", req.method, req.path, route.allow));
    return httplib::Server::HandlerResponse::Handled;
  }
  // The page itself is static and holds no data; it asks for the token when one is needed. Reads
  // on a loopback server need none when they come by a loopback name (see apps/common/loopback.h).
  const bool page = req.path == "/" || req.path == "/dashboard.js";
  const bool open_read = is_reading(req.method) &&
                         (page || (ctx.loopback && app::is_loopback_host(req.get_header_value("Host"))));
  if (!open_read && !bearer_matches(req.get_header_value("Authorization"), ctx.token)) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"tandem-serve\"");
    const bool foreign_name = ctx.loopback && is_reading(req.method);  // a read refused for its Host only
    send_error(res, 401, req.has_header("Authorization") ? "wrong bearer token"
                         : foreign_name ? fmt::format("this call by the name '{}' needs 'Authorization: Bearer "
                                                      "<token>' (by a loopback name, 127.0.0.1 or localhost, none)",
                                                      req.get_header_value("Host"))
                                        : "this call needs 'Authorization: Bearer <token>'");
    return httplib::Server::HandlerResponse::Handled;
  }
  // httplib bounds a body by its Content-Length (413 past --max-body-bytes) but reads a chunked
  // one, or inflates a compressed one, without a limit: neither is taken.
  if (req.has_header("Transfer-Encoding")) {
    send_error(res, 411, "send the body with a Content-Length, not a Transfer-Encoding");
    return httplib::Server::HandlerResponse::Handled;
  }
  const std::string encoding = req.get_header_value("Content-Encoding");
  if (!encoding.empty() && encoding != "identity") {
    send_error(res, 415, fmt::format("Content-Encoding {} is not accepted; send the body uncompressed", encoding));
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

}  // namespace

void install_routes(httplib::Server& server, ApiContext& ctx) {
  server.set_pre_routing_handler(
      [&ctx](const httplib::Request& req, httplib::Response& res) { return check_before_body(ctx, req, res); });

  server.set_error_handler([&ctx](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;  // our own JSON error
    if (res.status == 413)
      send_error(res, 413, fmt::format("request body larger than {} bytes", ctx.config.max_body_bytes));
    else
      send_error(res, res.status, status_text(res.status));
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, "internal error: " + what);
  });
  server.set_logger([&ctx](const httplib::Request&, const httplib::Response& res) {
    std::lock_guard<std::mutex> lock(ctx.counters_mu);
    ++ctx.responses[res.status];
  });

  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    auto page = asset("dashboard/index.html");
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  server.Get("/dashboard.js", [](const httplib::Request&, httplib::Response& res) {
    auto js = asset("dashboard/dashboard.js");
    res.set_content(js.data(), js.size(), "text/javascript; charset=utf-8");
  });
  server.Get("/openapi.json", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.schema.document(), kJson);
  });
  server.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    ManagerStats s = ctx.jobs.stats();
    int jobs = 0;
    for (const auto& [st, n] : s.by_state) jobs += n;
    send_json(res, 200, {{"status", "ok"}, {"version", tandem::version()}, {"jobs", jobs}, {"slots", s.slots},
                         {"slots_used", s.slots_used}});
  });
  server.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(ctx), monitor::kPrometheusContentType);
  });
  server.Get("/gpus", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, gpus_json()); });
  server.Get(R"(/gpus/([0-9]{1,4}))", guarded([](const httplib::Request& req, httplib::Response& res) {
    const int64_t id = path_number(req.matches[1].str());
    for (const auto& g : gpus_json())
      if (g["index"] == id) return send_json(res, 200, g);
    throw HttpError(404, fmt::format("no GPU {}", id));
  }));

  server.Post("/jobs", guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json request = ctx.schema.validate(parse_body(req.body), ctx.jobs.slots());
    Job j = ctx.jobs.submit(request);
    res.set_header("Location", "/jobs/" + j.id_str());
    send_json(res, 201, {{"id", j.id_str()}, {"state", state_name(j.state)}});
  }));
  server.Get("/jobs", [&ctx](const httplib::Request&, httplib::Response& res) {
    nlohmann::json out = nlohmann::json::array();
    for (const Job& j : ctx.jobs.list()) out.push_back(job_view(j, ctx.jobs.store()));
    send_json(res, 200, out);
  });
  server.Get(R"(/jobs/([0-9]{1,9}))", guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200, job_view(find_job(ctx, req), ctx.jobs.store()));
  }));
  server.Delete(R"(/jobs/([0-9]{1,9}))", guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 202, job_view(ctx.jobs.cancel(path_id(req)), ctx.jobs.store()));
  }));
  server.Get(R"(/jobs/([0-9]{1,9})/metrics)", guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
    Job j = find_job(ctx, req);
    // Whole lines only: a line being appended right now waits for the next poll.
    std::string text = read_tail(ctx.jobs.store().metrics_path(j.id), 64 << 20);
    if (auto nl = text.rfind('\n'); nl != std::string::npos) text.resize(nl + 1);
    else text.clear();
    res.set_content(text, "application/x-ndjson");
  }));
  server.Get(R"(/jobs/([0-9]{1,9})/log)", guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
    Job j = find_job(ctx, req);
    res.set_content(read_tail(ctx.jobs.store().log_path(j.id), 16 << 20), "text/plain; charset=utf-8");
  }));
}

}  // namespace tandem::serve
