// The fuzzed entry point of tandem-serve's request handling: what an untrusted client sends, up to
// the argv a job becomes, without a server or a process (apps/tandem-serve/request.h, job_schema.h).
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "apps/tandem-serve/auth.h"
#include "apps/tandem-serve/http_error.h"
#include "apps/tandem-serve/job_files.h"
#include "apps/tandem-serve/job_paths.h"
#include "apps/tandem-serve/job_schema.h"
#include "apps/tandem-serve/request.h"
#include "fuzz/fuzz_inputs.h"

namespace tandem::fuzz {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error("tandem-serve fuzz invariant broken: " + what);
}

const serve::JobSchema& schema() {
  static const serve::JobSchema s = [] {
    std::ifstream in(TANDEM_SERVE_OPENAPI);
    require(in.good(), std::string("cannot read ") + TANDEM_SERVE_OPENAPI);
    return serve::JobSchema(nlohmann::json::parse(in));
  }();
  return s;
}

// A folder value (save, resume) became `prefix/<value>`: relative, no "." or ".." or empty parts.
void require_inside(const std::string& arg, const std::string& flag, const std::string& prefix) {
  require(arg.rfind(flag + prefix + "/", 0) == 0, arg + " is not under " + prefix);
  const std::string rel = arg.substr(flag.size() + prefix.size() + 1);
  size_t start = 0;
  while (true) {
    const size_t end = std::min(rel.find('/', start), rel.size());
    const std::string part = rel.substr(start, end - start);
    require(!part.empty() && part != "." && part != "..", arg + " leaves " + prefix);
    if (end == rel.size()) break;
    start = end + 1;
  }
}

void check_job_body(const std::string& body_text) {
  const std::string job_dir = "/state/jobs/7", jobs_dir = "/state/jobs";
  nlohmann::json request;
  serve::JobFiles files;
  try {
    request = schema().validate(serve::parse_body(body_text), 64);
    // A server without --models-dir and --data-dir: a request naming a file is refused (400).
    files = serve::resolve_job_files(request, serve::FileRoots{});
  } catch (const serve::HttpError& e) {
    require(e.status() == 400 && *e.what(), "a refused body must be a 400 with a message");
    return;
  }
  require(files.empty(), "a file resolved without a folder");
  // An accepted request is accepted again unchanged (the server stores it and rereads it).
  require(schema().validate(request, 64) == request, "validate is not idempotent");
  const auto args = serve::JobSchema::train_args(request, files, job_dir, jobs_dir, "/state/jobs/7/metrics.jsonl");
  for (const std::string& a : args) {
    // One element per flag, never a value that execve truncates or tandem-train reads as a flag.
    require(a.size() > 2 && a.rfind("--", 0) == 0 && a.find('\0') == std::string::npos, "bad argv element " + a);
    require(a.find_first_of("\n\r") == std::string::npos, "a line break in argv element " + a);
    if (a.rfind("--save=", 0) == 0) {
      require_inside(a, "--save=", job_dir);
      require(!serve::is_job_file(a.substr(std::string("--save=").size() + job_dir.size() + 1)),
              a + " takes the place of one of the job's own files");
    }
    if (a.rfind("--resume=", 0) == 0) require_inside(a, "--resume=", jobs_dir);
    if (a.rfind("--save-onnx=", 0) == 0) require_inside(a, "--save-onnx=", job_dir);
    require(a.rfind("--data=", 0) != 0 && a.rfind("--val-data=", 0) != 0, "an array file without a folder: " + a);
  }
}

}  // namespace

// Input: a request line "METHOD PATH" (the path as the server sees it, URL-decoded), a newline,
// and the body, which goes through POST /jobs' parsing, validation and argv building whatever the
// line says (so that every input exercises the schema); the body is also an Authorization value.
void parse_serve_request_input(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string line = in.substr(0, nl), body = nl == std::string::npos ? "" : in.substr(nl + 1);
  const size_t sp = line.find(' ');
  const std::string method = line.substr(0, sp), path = sp == std::string::npos ? "" : line.substr(sp + 1);

  const serve::Route route = serve::check_route(path, method);
  require(route.status == 0 || route.status == 404 || route.status == 405, "route status");
  require((route.status == 404) == route.allow.empty(), "a known path names its methods");
  if (route.id) require(*route.id >= 0 && *route.id <= 999999999, "path id out of range");
  if (route.status == 0) require(method == "GET" || method == "HEAD" || method == "POST" || method == "DELETE", "method " + method);

  check_job_body(body);

  const std::string token = "0123456789abcdef0123456789abcdef";
  require(serve::bearer_matches(body, token) == (body == "Bearer " + token), "bearer_matches");
}

}  // namespace tandem::fuzz
