// The files a job names on the server: its model (`model`: a FILE.onnx in --models-dir) and its
// arrays (`data`, `val_data` in --data-dir), resolved to real paths that must lie inside those
// folders. A client names a file by its path relative to the folder, never by the server's path.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::serve {

// The folders a server takes files from, as canonical paths; empty: none (a job naming such a file
// is refused).
struct FileRoots {
  std::string models_dir;  // --models-dir
  std::string data_dir;    // --data-dir
};

// A job's fields that name files, each with its absolute real path (the field's value was relative).
using JobFiles = std::map<std::string, std::string>;

// The canonical path of a server folder `dir` given by `flag`; runtime errors (the server does not
// start) when it does not exist or is not a folder.
std::string canonical_folder(const std::string& flag, const std::string& dir);

// Whether a `model` value names a file rather than a registered model: it ends in .onnx, as
// tandem-train's --model tells them apart (apps/common/config_file.h).
bool is_model_file(const std::string& model);

// The real path of `given` (relative, as the client sent it) inside the canonical folder `root`.
// HttpError(400, ..., field) for an empty name, an absolute path, a '..' component, a NUL byte, a
// path that does not exist or cannot be resolved, one whose real path (symlinks followed) leaves
// `root`, or one that is not a regular file. `folder` names the folder in messages ("the models
// folder"): they quote `given`, never `root`, which is the server's business.
std::string confined_file(const std::string& root, const std::string& given, const std::string& field,
                          const std::string& folder);

// Every file a validated request names, resolved under `roots`; HttpError(400) as confined_file
// does, or when the server has no folder for a field (no --models-dir, no --data-dir).
JobFiles resolve_job_files(const nlohmann::json& request, const FileRoots& roots);

}  // namespace tandem::serve
