// Checkpoint directories: write, commit atomically, prune, load with validation.
#include "runtime/serialization/training_checkpoint.h"

#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/fault.h"
#include "runtime/serialization/atomic_file.h"
#include "runtime/serialization/json_integer.h"

namespace tandem::serialization {

using nlohmann::json;

namespace {
constexpr const char* kFormat = "tandem-checkpoint";
constexpr int kVersion = 1;
const char* const kGroups[] = {"optimizer", "scaler", "lr_schedule", "ema"};

NamedTensors* group(TrainingState& s, const std::string& g) {
  if (g == "optimizer") return &s.optimizer;
  if (g == "scaler") return &s.scaler;
  if (g == "lr_schedule") return &s.lr_schedule;
  return &s.ema;
}
const NamedTensors* group(const TrainingState& s, const std::string& g) {
  return group(const_cast<TrainingState&>(s), g);
}

uint32_t crc32_of(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {  // zlib takes uInt lengths
    uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

std::string join(const std::string& a, const std::string& b) { return a + "/" + b; }

void write_in(const std::string& dir, const std::string& name, const std::string& bytes) {
  write_file_atomic(join(dir, name), bytes);
}
}  // namespace

std::string save_checkpoint(const std::string& dir, const NamedTensors& model, const TrainingState& state,
                            const CheckpointOptions& options) {
  TANDEM_CHECK(options.keep_last >= 1, "save_checkpoint: keep_last must be >= 1, got {}", options.keep_last);
  make_directories(dir);
  std::string model_bytes = safetensors_bytes(model, {{"format", "pt"}});
  NamedTensors state_tensors;
  for (const char* g : kGroups)
    for (const auto& [name, t] : *group(state, g)) state_tensors.emplace_back(std::string(g) + "." + name, t);
  std::string state_bytes = safetensors_bytes(state_tensors, {{"format", "tandem-state"}});

  json j = {{"format", kFormat},
            {"version", kVersion},
            {"step", state.step},
            {"epoch", state.epoch},
            {"sampler_position", state.sampler_position},
            {"global_batch", state.global_batch},
            {"world_size", state.world_size},
            {"rng", {{"seed", state.rng_seed}, {"offset", state.rng_offset}}},
            {"scalars", state.scalars},
            {"strings", state.strings},
            {"files",
             {{"model.safetensors", {{"bytes", model_bytes.size()}, {"crc32", crc32_of(model_bytes)}}},
              {"state.safetensors", {{"bytes", state_bytes.size()}, {"crc32", crc32_of(state_bytes)}}}}}};

  // 1. Everything into a private temporary directory, each file fsynced. A failure here (a full
  // disk) removes the temporary and names the directory; earlier checkpoints are never touched.
  static std::atomic<uint64_t> counter{0};
  std::string base = fmt::format("ckpt-{:08d}", state.step);
  std::string tmp = join(dir, fmt::format(".tmp-{}-{}-{}", base, ::getpid(), counter++));
  try {
    remove_all(tmp);
    make_directories(tmp);
    fault::kill_point("ckpt_write", "tmp_dir");
    write_in(tmp, "model.safetensors", model_bytes);
    fault::kill_point("ckpt_write", "after_model");
    write_in(tmp, "state.safetensors", state_bytes);
    write_in(tmp, "state.json", j.dump(2) + "\n");
    fsync_directory(tmp);
    fault::kill_point("ckpt_write", "after_state");
  } catch (const IOError& e) {
    remove_all(tmp);
    TANDEM_FAIL(IO, "saving the checkpoint of step {} into '{}' failed; the checkpoints already there are "
                "intact: {}", state.step, dir, e.what());
  }
  if (options.simulate_crash == CrashPoint::BeforeRename) return tmp;

  // 2. Give it its final name (a fresh one if a checkpoint of this step exists already).
  std::string name = base;
  for (int i = 1; path_exists(join(dir, name)); ++i) name = fmt::format("{}.{}", base, i);
  commit_temp_file(tmp, join(dir, name));  // rename + fsync(dir)
  fault::kill_point("ckpt_write", "after_rename");
  if (options.simulate_crash == CrashPoint::BeforeLatest) return join(dir, name);

  // 3. Publish it.
  try {
    write_in(dir, "latest", name + "\n");
  } catch (const IOError& e) {
    TANDEM_FAIL(IO, "publishing the checkpoint of step {} in '{}' failed ('latest' still names the previous "
                "one, which is intact): {}", state.step, dir, e.what());
  }
  fault::kill_point("ckpt_write", "after_latest");

  // 4. Prune: older complete checkpoints beyond keep_last, and temporaries of crashed writes.
  std::vector<std::string> ckpts;
  for (const std::string& e : list_directory(dir)) {
    if (e.rfind("ckpt-", 0) == 0 && e != name) ckpts.push_back(e);
    if (e.rfind(".tmp-", 0) == 0 && e.find(fmt::format("-{}-", ::getpid())) == std::string::npos) remove_all(join(dir, e));
  }
  // Names sort by step (zero-padded); keep the newest keep_last - 1 besides the one just written.
  int excess = static_cast<int>(ckpts.size()) - (options.keep_last - 1);
  for (int i = 0; i < excess; ++i) remove_all(join(dir, ckpts[static_cast<size_t>(i)]));
  fsync_directory(dir);
  return join(dir, name);
}

bool has_checkpoint(const std::string& dir) {
  return path_exists(join(dir, "latest")) || path_exists(join(dir, "state.json"));
}

namespace {

// The integer field `key` of `j` (json_integer.h: a float or an out-of-range number is an IOError).
template <class T>
T integer_field(const json& j, const char* key, const std::string& json_path) {
  return json_integer<T>(j.at(key), fmt::format("'{}': field \"{}\"", json_path, key));
}

}  // namespace

StateSidecar parse_state_json(const std::string& text, const std::string& json_path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  TANDEM_CHECK_KIND(IO, !j.is_discarded() && j.is_object(), "'{}' is not valid JSON (truncated?)", json_path);
  StateSidecar out;
  try {  // json's value() and get() throw on a field of the wrong type ({"format": 1}): all in here
    TANDEM_CHECK_KIND(IO, j.value("format", "") == kFormat, "'{}' is not a tandem checkpoint (format \"{}\")",
                      json_path, j.value("format", ""));
    const int64_t version = j.contains("version") ? integer_field<int64_t>(j, "version", json_path) : 0;
    TANDEM_CHECK_KIND(IO, version == kVersion, "'{}' has version {}, this build reads version {}", json_path,
                      version, kVersion);
    for (const char* f : {"model.safetensors", "state.safetensors"}) {
      const json& meta = j.at("files").at(f);
      out.files[f] = {integer_field<uint64_t>(meta, "bytes", json_path), integer_field<uint32_t>(meta, "crc32", json_path)};
    }
    TrainingState& s = out.state;
    s.step = integer_field<int64_t>(j, "step", json_path);
    s.epoch = integer_field<int64_t>(j, "epoch", json_path);
    s.sampler_position = integer_field<int64_t>(j, "sampler_position", json_path);
    s.global_batch = integer_field<int64_t>(j, "global_batch", json_path);
    s.world_size = integer_field<int64_t>(j, "world_size", json_path);
    s.rng_seed = integer_field<uint64_t>(j.at("rng"), "seed", json_path);
    s.rng_offset = integer_field<uint64_t>(j.at("rng"), "offset", json_path);
    s.scalars = j.at("scalars").get<std::map<std::string, double>>();
    s.strings = j.at("strings").get<std::map<std::string, std::string>>();
  } catch (const json::exception& e) {
    TANDEM_FAIL(IO, "'{}' is missing a field or has one of the wrong type: {}", json_path, e.what());
  }
  return out;
}

CheckpointFiles read_checkpoint_files(const std::string& path) {
  std::string ckpt = path;
  if (!path_exists(join(path, "state.json"))) {
    std::string latest_path = join(path, "latest");
    TANDEM_CHECK_KIND(IO, path_exists(latest_path),
                      "'{}' is not a checkpoint: it has neither 'latest' nor 'state.json' (pass the --save "
                      "directory of an earlier run, or one of its ckpt-* directories)", path);
    std::string name = read_file(latest_path);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    TANDEM_CHECK_KIND(IO, !name.empty() && name.find('/') == std::string::npos,
                      "'{}' does not name a checkpoint directory", latest_path);
    ckpt = join(path, name);
  }
  CheckpointFiles f;
  f.path = ckpt;
  f.state_json = read_file(join(ckpt, "state.json"));
  f.model = read_file(join(ckpt, "model.safetensors"));
  f.state = read_file(join(ckpt, "state.safetensors"));
  return f;
}

LoadedCheckpoint load_checkpoint(const std::string& path) { return parse_checkpoint(read_checkpoint_files(path)); }

LoadedCheckpoint parse_checkpoint(const CheckpointFiles& files) {
  const std::string& ckpt = files.path;
  std::string json_path = join(ckpt, "state.json");
  StateSidecar sidecar = parse_state_json(files.state_json, json_path);
  LoadedCheckpoint out;
  out.path = ckpt;
  out.state = std::move(sidecar.state);
  std::map<std::string, const std::string*> bytes{{"model.safetensors", &files.model},
                                                 {"state.safetensors", &files.state}};
  for (const auto& [f, data] : bytes) {
    std::string file = join(ckpt, f);
    const auto& [want_bytes, want_crc] = sidecar.files.at(f);
    TANDEM_CHECK_KIND(IO, data->size() == want_bytes, "'{}' has {} bytes, state.json recorded {} (truncated?)",
                      file, data->size(), want_bytes);
    TANDEM_CHECK_KIND(IO, crc32_of(*data) == want_crc, "'{}' fails its CRC32 check (corrupt file)", file);
  }
  out.model = parse_safetensors(files.model, join(ckpt, "model.safetensors")).tensors;
  std::string state_file = join(ckpt, "state.safetensors");
  for (auto& [name, t] : parse_safetensors(files.state, state_file).tensors) {
    size_t dot = name.find('.');
    std::string g = dot == std::string::npos ? "" : name.substr(0, dot);
    bool known = false;
    for (const char* k : kGroups) known = known || g == k;
    TANDEM_CHECK_KIND(IO, known, "'{}': entry \"{}\" belongs to no known group (optimizer, scaler, lr_schedule, ema)",
                      state_file, name);
    group(out.state, g)->emplace_back(name.substr(dot + 1), t);
  }
  return out;
}

void copy_into(const NamedTensors& target, const NamedTensors& loaded, const std::string& what,
               const std::string& source) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [n, t] : loaded) by_name[n] = &t;
  std::set<std::string> used;
  for (const auto& [name, dst] : target) {
    auto it = by_name.find(name);
    TANDEM_CHECK(it != by_name.end(), "{} from '{}': entry \"{}\" is missing (the checkpoint was written for a "
                 "different model or configuration)", what, source, name);
    const Tensor& src = *it->second;
    TANDEM_CHECK(src.shape() == dst.shape(), "{} from '{}': entry \"{}\" has shape {} in the checkpoint but {} here",
                 what, source, name, shape_str(src.shape()), shape_str(dst.shape()));
    TANDEM_CHECK(src.dtype() == dst.dtype(), "{} from '{}': entry \"{}\" has dtype {} in the checkpoint but {} here",
                 what, source, name, dtype_name(src.dtype()), dtype_name(dst.dtype()));
    used.insert(name);
  }
  for (const auto& [n, t] : loaded)
    TANDEM_CHECK(used.count(n), "{} from '{}': unexpected entry \"{}\" (the checkpoint was written for a different "
                 "model or configuration)", what, source, n);
  for (const auto& [name, dst] : target) {
    Tensor d = dst;
    d.copy_(*by_name[name]);
  }
}

}  // namespace tandem::serialization
