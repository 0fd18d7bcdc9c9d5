// JobRequest validation (the subset of JSON Schema that openapi.json's JobRequest uses: type,
// enum, minimum/maximum with OpenAPI 3.0's boolean exclusiveMinimum, maxLength, pattern, anyOf of
// those) and the tandem-train arguments of a request.
#include "apps/tandem-serve/job_schema.h"

#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "apps/tandem-serve/http_error.h"
#include "apps/tandem-serve/job_files.h"
#include "apps/tandem-serve/job_paths.h"
#include "runtime/error.h"

namespace tandem::serve {

namespace {

bool has_type(const nlohmann::json& v, const std::string& type) {
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "string") return v.is_string();
  return false;
}

// What is wrong with `v` against the schema `s` (its type already checked), as the end of a
// sentence that starts with the field's name; empty when nothing is.
std::string violation(const nlohmann::json& v, const nlohmann::json& s) {
  if (s.contains("enum")) {
    bool ok = false;
    for (const auto& e : s["enum"]) ok = ok || e == v;
    if (!ok) return fmt::format("must be one of {}, got {}", s["enum"].dump(), v.dump());
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum")) {
      const double lo = s["minimum"];
      const bool exclusive = s.value("exclusiveMinimum", false);
      if (exclusive ? !(x > lo) : !(x >= lo))
        return fmt::format("must be {} {}, got {}", exclusive ? ">" : ">=", lo, v.dump());
    }
    if (s.contains("maximum") && !(x <= s["maximum"].get<double>()))
      return fmt::format("must be <= {}, got {}", s["maximum"].get<double>(), v.dump());
  }
  if (v.is_string()) {
    const std::string& str = v.get_ref<const std::string&>();
    if (s.contains("maxLength") && str.size() > s["maxLength"].get<size_t>())
      return fmt::format("is longer than {} characters", s["maxLength"].get<size_t>());
    if (s.contains("pattern")) {
      // ECMAScript regexes, as JSON Schema's patterns are.
      static thread_local std::map<std::string, std::regex> cache;
      const std::string pat = s["pattern"];
      auto it = cache.find(pat);
      if (it == cache.end()) it = cache.emplace(pat, std::regex(pat, std::regex::ECMAScript)).first;
      if (!std::regex_search(str, it->second)) return fmt::format("does not match {}", pat);
    }
  }
  return "";
}

// anyOf: the value passes one of the alternatives (model: a registered name or a FILE.onnx). The
// message names each, by its enum or else its description.
std::string any_of_violation(const nlohmann::json& v, const nlohmann::json& alternatives) {
  std::vector<std::string> wanted;
  for (const auto& alt : alternatives) {
    if (violation(v, alt).empty()) return "";
    wanted.push_back(alt.contains("enum") ? "one of " + alt["enum"].dump() : alt.value("description", alt.dump()));
  }
  return fmt::format("must be {}, got {}", fmt::join(wanted, ", or "), v.dump());
}

void check_value(const std::string& name, const nlohmann::json& v, const nlohmann::json& s) {
  const std::string type = s.at("type");
  if (!has_type(v, type)) throw HttpError(400, fmt::format("field '{}' must be a{} {}, got {}", name,
                                                           type == "integer" ? "n" : "", type, v.dump()), name);
  std::string why = violation(v, s);
  if (why.empty() && s.contains("anyOf")) why = any_of_violation(v, s["anyOf"]);
  if (!why.empty()) throw HttpError(400, fmt::format("field '{}' {}", name, why), name);
}

// Whether field `name` with value `v` names a file in a server folder (job_paths.h): such a value
// reaches tandem-train only as the path resolve_job_files found, never as the client wrote it.
bool is_file_field(const std::string& name, const nlohmann::json& v) {
  return name == "data" || name == "val_data" || (name == "model" && is_model_file(v.get<std::string>()));
}

// A field that only means something beside another one ("val_fraction" without "data").
void check_needs(const nlohmann::json& req, const char* field, const char* needed) {
  if (req.contains(field) && !req.contains(needed))
    throw HttpError(400, fmt::format("field '{}' needs '{}'", field, needed), field);
}

}  // namespace

JobSchema::JobSchema(const nlohmann::json& openapi) : document_(openapi.dump(1)) {
  properties_ = openapi.at("components").at("schemas").at("JobRequest").at("properties");
  TANDEM_CHECK(properties_.is_object() && properties_.contains("ranks"), "openapi.json: JobRequest has no properties");
}

nlohmann::json JobSchema::validate(const nlohmann::json& body, int max_ranks) const {
  if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object of tandem-train's flags");
  for (const auto& [name, v] : body.items()) {
    if (!properties_.contains(name))
      throw HttpError(400, fmt::format("unknown field '{}' (not a flag a job may set; see /openapi.json)", name), name);
    check_value(name, v, properties_[name]);
  }
  nlohmann::json req = body;
  if (!req.contains("ranks")) req["ranks"] = 1;
  if (req["ranks"].get<int64_t>() > max_ranks)
    throw HttpError(400, fmt::format("field 'ranks': {} ranks can never run on this server's {} slots",
                                     req["ranks"].get<int64_t>(), max_ranks), "ranks");
  if (req.contains("save_every") && req["save_every"].get<int64_t>() > 0 && !req.contains("save"))
    throw HttpError(400, "field 'save_every' needs 'save'", "save_every");
  // tandem-train refuses these too (exit 2); refused here, they never take a slot.
  for (const char* with_data : {"val_data", "inputs", "labels", "val_fraction"}) check_needs(req, with_data, "data");
  if (req.contains("val_fraction") && req.contains("val_data"))
    throw HttpError(400, "field 'val_fraction': give either 'val_data' or 'val_fraction', not both", "val_fraction");
  if (req.contains("save_onnx") && !(req.contains("model") && is_model_file(req["model"].get<std::string>())))
    throw HttpError(400, "field 'save_onnx' writes a model imported from ONNX back: it needs 'model' to name a "
                         "FILE.onnx", "save_onnx");
  if (req.contains("save_onnx") && is_job_file(req["save_onnx"].get<std::string>()))
    throw HttpError(400, fmt::format("field 'save_onnx': {} would take the place of one of the job's own files",
                                     req["save_onnx"].get<std::string>()), "save_onnx");
  if (req.contains("save") && is_job_file(req["save"].get<std::string>()))
    throw HttpError(400,
                    fmt::format("field 'save': {} would take the place of one of the job's own files ({}); choose "
                                "another folder", req["save"].get<std::string>(), fmt::join(kJobFiles, ", ")),
                    "save");
  return req;
}

std::vector<std::string> JobSchema::train_args(const nlohmann::json& request, const JobFiles& files,
                                               const std::string& job_dir, const std::string& jobs_dir,
                                               const std::string& metrics_path) {
  std::vector<std::string> args;
  for (const auto& [name, v] : request.items()) {  // sorted by name: the same request, the same argv
    if (name == "ranks") continue;
    std::string flag = "--" + name;
    for (char& c : flag)
      if (c == '_') c = '-';
    if (auto file = files.find(name); file != files.end()) {
      args.push_back(flag + "=" + file->second);  // model, data, val_data: resolved in their folder
    } else if (is_file_field(name, v)) {
      TANDEM_FAIL(Value, "job field '{}' names a file that was not resolved (job_paths.h)", name);
    } else if (v.is_boolean()) {
      if (v.get<bool>()) args.push_back(flag);
    } else if (name == "save" || name == "save_onnx") {
      args.push_back(flag + "=" + job_dir + "/" + v.get<std::string>());
    } else if (name == "resume") {
      args.push_back(flag + "=" + jobs_dir + "/" + v.get<std::string>());
    } else if (name == "checkpoint_activations") {
      if (v.get<int64_t>() > 0) args.push_back(flag + "=" + v.dump());
    } else {
      // `--flag=value` in one element: a value can never be read as another flag.
      args.push_back(flag + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
    }
  }
  args.push_back("--metrics=" + metrics_path);
  if (!request.contains("metrics_every")) args.push_back("--metrics-every=5");
  return args;
}

}  // namespace tandem::serve
