// A job's files resolved inside the server's folders (see job_paths.h). The lexical checks come
// first so that the common mistakes get their own words; the real path decides in the end, since a
// name of plain components can still lead out through a symlink.
#include "apps/tandem-serve/job_paths.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "apps/tandem-serve/http_error.h"
#include "runtime/error.h"

namespace tandem::serve {

namespace fs = std::filesystem;

namespace {

// The fields that name files: which folder they are read from, and the server flag that gives it.
struct FileField {
  const char* name;
  const char* kind;    // what the file is, in messages
  const char* folder;  // the folder, in messages (never its path)
  std::string FileRoots::*root;
  const char* flag;
};
const FileField kFileFields[] = {
    {"model", "a model file", "the models folder", &FileRoots::models_dir, "--models-dir"},
    {"data", "an array file", "the data folder", &FileRoots::data_dir, "--data-dir"},
    {"val_data", "an array file", "the data folder", &FileRoots::data_dir, "--data-dir"},
};

template <class... Args>
[[noreturn]] void refuse(const std::string& field, fmt::format_string<Args...> what, Args&&... args) {
  throw HttpError(400, fmt::format("field '{}': {}", field, fmt::format(what, std::forward<Args>(args)...)), field);
}

// Why `given` is not a relative name of plain components; empty when it is one.
std::string lexical_problem(const std::string& given, const std::string& folder) {
  if (given.empty()) return "an empty file name";
  if (given.find('\0') != std::string::npos) return "a NUL byte in the file name";
  if (given.front() == '/') return fmt::format("'{}' is an absolute path; name the file relative to {}", given, folder);
  for (const auto& part : fs::path(given))
    if (part == "..") return fmt::format("'{}' has a '..' component; name a file inside {}", given, folder);
  return "";
}

// Whether `p` is `root` or lies inside it, both canonical, compared by whole components
// (/srv/models-x is not inside /srv/models, which a string prefix would say it is). The root
// itself ("." or "sub/..") is then refused for not being a file.
bool is_within(const fs::path& root, const fs::path& p) {
  auto q = p.begin();
  for (const auto& part : root) {
    if (part.empty()) continue;  // a trailing '/' (root "/" itself has none)
    if (q == p.end() || *q != part) return false;
    ++q;
  }
  return true;
}

}  // namespace

std::string canonical_folder(const std::string& flag, const std::string& dir) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  TANDEM_CHECK(!ec, "{} {}: {}", flag, dir, ec.message());
  TANDEM_CHECK(fs::is_directory(real, ec), "{} {}: not a folder", flag, dir);
  return real.string();
}

bool is_model_file(const std::string& model) {
  return model.size() > 5 && model.compare(model.size() - 5, 5, ".onnx") == 0;
}

std::string confined_file(const std::string& root, const std::string& given, const std::string& field,
                          const std::string& folder) {
  if (const std::string why = lexical_problem(given, folder); !why.empty()) refuse(field, "{}", why);
  std::error_code ec;
  const fs::path real = fs::canonical(fs::path(root) / given, ec);
  if (ec == std::errc::no_such_file_or_directory) refuse(field, "no file '{}' in {}", given, folder);
  // ELOOP, ENOTDIR, EACCES, ENAMETOOLONG: the code's words only (the exception's own text holds
  // the server's path).
  if (ec) refuse(field, "'{}' cannot be resolved in {}: {}", given, folder, ec.message());
  if (!is_within(root, real))
    refuse(field, "'{}' resolves outside {} (a symlink out of it); only files inside it are served", given, folder);
  if (!fs::is_regular_file(real, ec)) refuse(field, "'{}' in {} is not a file", given, folder);
  return real.string();
}

JobFiles resolve_job_files(const nlohmann::json& request, const FileRoots& roots) {
  JobFiles files;
  for (const FileField& f : kFileFields) {
    if (!request.contains(f.name)) continue;
    const std::string& given = request[f.name].get_ref<const std::string&>();
    if (std::string(f.name) == "model" && !is_model_file(given)) continue;  // a registered model
    const std::string& root = roots.*f.root;
    if (root.empty())
      refuse(f.name, "'{}' names {}, and this server takes none (it was started without {})", given, f.kind, f.flag);
    files[f.name] = confined_file(root, given, f.name, f.folder);
  }
  return files;
}

}  // namespace tandem::serve
