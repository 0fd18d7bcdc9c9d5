// A job request checked against the JobRequest schema of openapi.json (the one description of
// what a job may ask for: the whitelist of tandem-train's flags, their types and ranges), and the
// tandem-train arguments it becomes, one argv element per value: nothing passes through a shell.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/tandem-serve/job_paths.h"

namespace tandem::serve {

class JobSchema {
 public:
  // `openapi`: the whole document; its components.schemas.JobRequest is used.
  explicit JobSchema(const nlohmann::json& openapi);

  // Throws HttpError(400, ..., field) for a body that is not an object, an unknown field, a wrong
  // type, a value out of its enum, range, length or pattern (or none of its anyOf), ranks above
  // `max_ranks`, or a field without the one it needs (inputs without data, save_onnx without a
  // model file). Returns the request with ranks filled in (default 1). The files a request names
  // are checked apart, against the server's folders (resolve_job_files).
  nlohmann::json validate(const nlohmann::json& body, int max_ranks) const;

  // tandem-train's flags for a validated request: --max-steps=50, --no-eval, ...; `save` becomes a
  // folder inside job_dir and `save_onnx` a file there, `resume` one inside jobs_dir; the fields
  // naming files (model FILE.onnx, data, val_data) become their paths in `files`, which must hold
  // each (resolve_job_files; a Value error otherwise); --metrics and --metrics-every are added.
  static std::vector<std::string> train_args(const nlohmann::json& request, const JobFiles& files,
                                             const std::string& job_dir, const std::string& jobs_dir,
                                             const std::string& metrics_path);

  // The whole API description, as GET /openapi.json serves it (the one the server validates against).
  const std::string& document() const { return document_; }

 private:
  nlohmann::json properties_;
  std::string document_;
};

}  // namespace tandem::serve
