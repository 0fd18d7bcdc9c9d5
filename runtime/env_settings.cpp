#include "runtime/env_settings.h"

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "runtime/error.h"
#include "runtime/memory_budget.h"
#include "runtime/spelling.h"

extern char** environ;

namespace tandem::env {
namespace {

using K = Kind;
using U = Use;

// Every TANDEM_* variable tandem reads: users' settings, then the GPU A/B switches, then those of
// the tests, the emulator and the scripts. docs/environment.md is markdown_table() of this.
const std::vector<Variable> kVariables = {
    {"TANDEM_CPU_ISA", K::Choice, {"avx512", "avx2", "generic"}, "avx512",
     "the widest instruction set the CPU kernels may use: avx2 takes every path of a CPU without AVX-512 "
     "(our AVX2+FMA GEMM; the suite's `_avx2` tests), generic every path of a CPU without AVX2/FMA (Eigen's "
     "GEMM, the compiler's loops); tandem-bench-peak measures the peak of the same ISA", U::General},
    {"TANDEM_CPU_GEMM", K::Choice, {"auto", "eigen", "avx512"}, "auto",
     "the CPU GEMM: auto (AMX tiles, else AVX-512, else Eigen, as the CPU allows), eigen (Eigen's), avx512 "
     "(our AVX-512 kernel, not the AMX tiles)", U::General},
    {"TANDEM_HOST_CACHE", K::Size, {}, "1GiB",
     "freed CPU blocks of 64 KiB or more kept for reuse, at most this many bytes; 0 turns the cache off", U::General},
    {"TANDEM_GEMM_SEARCH", K::Choice, {"heuristic", "benchmark", "benchmark-verbose"}, "heuristic",
     "cuBLASLt's algorithm for each GEMM shape: the heuristic's first (the same bits in every process), or the "
     "fastest of up to 16 timed at the shape's first call (-verbose: each search on stderr); not yet timed on a GPU",
     U::General},
    {"TANDEM_CONV", K::Choice, {"cudnn", "im2col"}, "cudnn",
     "GPU convolutions through cuDNN, or im2col and cuBLAS", U::General},
    {"TANDEM_CUDNN_SEARCH", K::Choice, {"heuristic", "benchmark"}, "heuristic",
     "cuDNN's convolution algorithms: its heuristics' choice (reproducible), or timed (cudnnFind*, like "
     "PyTorch's cudnn.benchmark)", U::General},
    {"TANDEM_COMM_TIMEOUT", K::Number, {}, "300",
     "seconds a collective waits for its peers before a CommError names the ranks it waits for", U::General},
    {"TANDEM_COMM_ALGO", K::Choice, {"auto", "ring", "hierarchical", "native"}, "auto",
     "the MPI communicator's all-reduce: hierarchical where the job spans nodes with the same number (2 or more) "
     "of ranks on each, else the flat ring (auto); tandem's flat ring (recursive doubling for small buffers on "
     "power-of-two worlds); the hierarchy (shared memory inside a node, a ring across nodes); or MPI's own",
     U::General},
    {"TANDEM_COMM_SHM", K::Flag, {}, "on",
     "shared-memory channels between the ranks of one node (off: MPI carries everything)", U::General},
    {"TANDEM_COMM_CMA", K::Flag, {}, "on",
     "large transfers between ranks of one node read straight from the peer's memory (process_vm_readv)",
     U::General},
    {"TANDEM_DEBUG_DESYNC", K::Flag, {}, "off",
     "each collective first checks that every rank makes the same call with the same size (a CommError if "
     "not)", U::General},
    {"TANDEM_FLIGHT_DIR", K::Path, {}, ".",
     "the folder of the flight recorders' dumps (tandem-flight-rank<R>.json)", U::General},
    {"TANDEM_NVML_LIBRARY", K::Path, {}, "libnvidia-ml.so.1",
     "the NVML library the GPU monitor opens", U::General},
    {"TANDEM_GRAD_SINK", K::Choice, {"on", "leaves", "off"}, "on",
     "gradients added straight into leaves' .grad and into the residual stream's gradient (on), into "
     "leaves' .grad only (leaves), or neither (off)", U::GpuAb},
    {"TANDEM_CE_GRAD", K::Choice, {"forward", "backward"}, "forward",
     "cross-entropy's gradient made in its forward for loss.backward(), or always in its backward",
     U::GpuAb},
    {"TANDEM_COLUMN_SUMS", K::Choice, {"one-launch", "two-pass"}, "one-launch",
     "the GPU column sums (bias gradients) finish in their last block, or in a second launch", U::GpuAb},
    {"TANDEM_ATTENTION_FORWARD_ROWS", K::Choice, {"16", "32"}, "16",
     "rows a warp owns in the GPU attention forward (32: head dimensions up to 64)", U::GpuAb},
    {"TANDEM_CE_ROWS", K::Choice, {"l2", "all"}, "l2",
     "GPU cross-entropy keeps at most 24 MB of rows in flight (their second read from L2), or gives every row "
     "a block", U::GpuAb},
    {"TANDEM_ADAM", K::Choice, {"multi-tensor", "per-tensor"}, "multi-tensor",
     "Adam/AdamW on a GPU in two multi-tensor launches, or a launch a parameter", U::GpuAb},
    {"TANDEM_FAULT", K::Text, {}, "",
     "a fault injected for the reliability tests: name[:stage][:key=value]... (docs/reliability.md)",
     U::Testing},
    {"TANDEM_SIMT_ORDER", K::Choice, {"forward", "reverse", "shuffle"}, "forward",
     "the order in which the SIMT emulator runs a launch's blocks and a block's threads", U::Testing},
    {"TANDEM_SIM_LAUNCHES", K::Path, {}, "",
     "a file the emulator writes at exit: its launches and host waits counted by call site "
     "(scripts/sim-launches)", U::Testing},
    {"TANDEM_UPDATE_DOCS", K::Flag, {}, "off",
     "the docs tests rewrite the generated tables in docs/ instead of failing", U::Testing},
    {"TANDEM_TEST_STRESS", K::Number, {}, "3000",
     "iterations of test_comm_mpi_shared's stress test", U::Testing},
    {"TANDEM_TEST_RANKS_PER_NODE", K::Number, {}, "",
     "the MPI communicator's hierarchy takes each run of this many consecutive ranks as a node instead of "
     "MPI_Comm_split_type's nodes (one host simulating several: test_comm_hier)", U::Testing},
};

// Switches a GPU run has decided: setting one is warned about (unknown_variables), not an error.
const std::vector<std::pair<const char*, const char*>> kRetired = {
    {"TANDEM_GEMM_DGELU",
     "retired: GELU's backward runs cuBLASLt's DGELU epilogue and then our column sums, faster than "
     "DGELU_BGRAD on an H100 and an H200 (docs/transformers.md)"},
};

constexpr const char* kOn[] = {"1", "on", "true"};
constexpr const char* kOff[] = {"0", "off", "false"};

// What one variable was read as. `index` is written last (release) and read first (acquire): the
// Choice's or Flag's index, kUnread before the first read, kBad for a value its kind rejects.
constexpr int kUnread = -2, kBad = -1;
struct State {
  std::atomic<int> index{kUnread};
  bool set = false;
  std::string raw, error;
  std::optional<size_t> size;
  std::optional<double> number;
};

State* states() {
  static const std::unique_ptr<State[]> s(new State[kVariables.size()]);
  return s.get();
}
std::mutex& read_mutex() {
  static std::mutex m;
  return m;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string best = closest_spelling(word, candidates);
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

bool is_one_of(const std::string& v, const char* const (&words)[3]) {
  for (const char* w : words)
    if (v == w) return true;
  return false;
}

// Parses `s.raw` as v's kind into s; returns the index to publish.
int parse(const Variable& v, State& s) {
  const std::string& raw = s.raw;
  switch (v.kind) {
    case K::Flag: {
      const int fallback = std::strcmp(v.fallback, "on") == 0 ? 1 : 0;
      if (!s.set) return fallback;
      if (is_one_of(raw, kOn)) return 1;
      if (is_one_of(raw, kOff)) return 0;
      std::vector<std::string> all(std::begin(kOn), std::end(kOn));
      all.insert(all.end(), std::begin(kOff), std::end(kOff));
      s.error = fmt::format("{}={}: expected on or off (1, on, true / 0, off, false){}", v.name, raw,
                            did_you_mean(raw, all));
      return kBad;
    }
    case K::Choice: {
      if (!s.set) return 0;
      std::vector<std::string> names(v.values.begin(), v.values.end());
      for (size_t i = 0; i < names.size(); ++i)
        if (raw == names[i]) return static_cast<int>(i);
      s.error = fmt::format("{}={}: expected {}{}", v.name, raw, or_list(names), did_you_mean(raw, names));
      return kBad;
    }
    case K::Size:
      if (!s.set) return 0;
      try {
        s.size = memory::parse_size(raw);
      } catch (const ValueError& e) {
        s.error = fmt::format("{}={}: not a size ({})", v.name, raw, e.what());
        return kBad;
      }
      return 0;
    case K::Number: {
      if (!s.set) return 0;
      char* end = nullptr;
      errno = 0;
      const double x = std::strtod(raw.c_str(), &end);
      if (end == raw.c_str() || *end != '\0' || errno != 0 || !std::isfinite(x) || x <= 0) {
        s.error = fmt::format("{}={}: expected a positive number", v.name, raw);
        return kBad;
      }
      s.number = x;
      return 0;
    }
    case K::Path:
    case K::Text: return 0;
  }
  return 0;
}

// (Re)reads variable `slot` from the environment.
void read(size_t slot) {
  const Variable& v = kVariables[slot];
  State& s = states()[slot];
  const char* text = std::getenv(v.name);
  s.set = text != nullptr && *text != '\0';
  s.raw = s.set ? text : "";
  s.error.clear();
  s.size.reset();
  s.number.reset();
  s.index.store(parse(v, s), std::memory_order_release);
}

size_t slot_of(const char* name) {
  for (size_t i = 0; i < kVariables.size(); ++i)
    if (std::strcmp(kVariables[i].name, name) == 0) return i;
  TANDEM_FAIL(Internal, "{} is not declared in runtime/env_settings.cpp", name);
}

// The state of `slot`, read at its first use; throws for a bad value.
const State& loaded(size_t slot, bool throw_if_bad = true) {
  State& s = states()[slot];
  if (s.index.load(std::memory_order_acquire) == kUnread) {
    std::lock_guard<std::mutex> lock(read_mutex());
    if (s.index.load(std::memory_order_relaxed) == kUnread) read(slot);
  }
  if (throw_if_bad && s.index.load(std::memory_order_acquire) == kBad) TANDEM_FAIL(Value, "{}", s.error);
  return s;
}

const State& loaded_as(const char* name, std::initializer_list<Kind> kinds) {
  const size_t slot = slot_of(name);
  bool ok = false;
  for (Kind k : kinds) ok = ok || kVariables[slot].kind == k;
  TANDEM_CHECK_KIND(Internal, ok, "{} is declared as {}, not read as one", name, kind_name(kVariables[slot].kind));
  return loaded(slot);
}

bool is_default(const Variable& v, const State& s) {
  if (!s.set) return true;
  const int index = s.index.load(std::memory_order_acquire);
  switch (v.kind) {
    case K::Flag: return index == (std::strcmp(v.fallback, "on") == 0 ? 1 : 0);
    case K::Choice: return index == 0;
    case K::Size: return s.size && *s.size == memory::parse_size(v.fallback);
    case K::Number: return s.number && *s.number == std::strtod(v.fallback, nullptr);
    case K::Path:
    case K::Text: return s.raw == v.fallback;
  }
  return false;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case K::Flag: return "on/off";
    case K::Choice: return "choice";
    case K::Size: return "size";
    case K::Number: return "number";
    case K::Path: return "path";
    case K::Text: return "text";
  }
  return "?";
}

const std::vector<Variable>& variables() { return kVariables; }

bool flag(const char* name) { return loaded_as(name, {K::Flag}).index.load(std::memory_order_relaxed) == 1; }

int choice(const char* name) { return loaded_as(name, {K::Choice}).index.load(std::memory_order_relaxed); }

std::optional<size_t> size(const char* name) { return loaded_as(name, {K::Size}).size; }

std::optional<double> number(const char* name) { return loaded_as(name, {K::Number}).number; }

std::optional<std::string> text(const char* name) {
  const State& s = loaded_as(name, {K::Path, K::Text});
  return s.set ? std::optional<std::string>(s.raw) : std::nullopt;
}

bool is_set(const char* name) { return loaded(slot_of(name), false).set; }

Switch::Switch(const char* name) : slot_(slot_of(name)) {
  const Kind k = kVariables[slot_].kind;
  TANDEM_CHECK_KIND(Internal, k == K::Choice || k == K::Flag, "{} is a {}, not a switch", name, kind_name(k));
}

int Switch::index() const { return loaded(slot_).index.load(std::memory_order_relaxed); }

int Switch::index_or_default() const noexcept {
  try {
    const int i = loaded(slot_, false).index.load(std::memory_order_relaxed);
    if (i != kBad) return i;
  } catch (...) {
  }
  const Variable& v = kVariables[slot_];
  return v.kind == K::Flag && std::strcmp(v.fallback, "on") == 0 ? 1 : 0;
}

void check() {
  std::vector<std::string> errors;
  for (size_t i = 0; i < kVariables.size(); ++i) {
    const State& s = loaded(i, false);
    if (s.index.load(std::memory_order_acquire) == kBad) errors.push_back(s.error);
  }
  if (errors.empty()) return;
  std::string all;
  for (const std::string& e : errors) all += (all.empty() ? "" : "; ") + e;
  TANDEM_FAIL(Value, "{}", all);
}

std::vector<std::pair<std::string, std::string>> non_default() {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < kVariables.size(); ++i) {
    const State& s = loaded(i, false);
    if (!is_default(kVariables[i], s)) out.emplace_back(kVariables[i].name, s.raw);
  }
  return out;
}

std::vector<std::string> unknown_variables() {
  std::vector<std::string> names;
  for (const Variable& v : kVariables) names.emplace_back(v.name);
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    if (entry.rfind("TANDEM_", 0) != 0) continue;
    const std::string name = entry.substr(0, entry.find('='));
    bool known = false;
    for (const std::string& n : names) known = known || n == name;
    if (known) continue;
    std::string line;
    for (const auto& [retired, why] : kRetired)
      if (name == retired) line = fmt::format("{} is no longer read: {}", name, why);
    if (line.empty())
      line = fmt::format("{} is not a variable tandem reads{}; docs/environment.md lists them", name,
                         did_you_mean(name, names));
    out.push_back(line);
  }
  return out;
}

std::string markdown_table() {
  std::string out = "| Variable | Kind | Values | Default | Use | What it does |\n|---|---|---|---|---|---|\n";
  for (const Variable& v : kVariables) {
    std::string values;
    if (v.kind == K::Choice)
      for (const char* value : v.values) values += fmt::format("{}`{}`", values.empty() ? "" : ", ", value);
    else if (v.kind == K::Flag)
      values = "`1`, `on`, `true` / `0`, `off`, `false`";
    else if (v.kind == K::Size)
      values = "a size (`512MiB`, `2GB`, `0`)";
    else if (v.kind == K::Number)
      values = "a positive number";
    const std::string fallback = *v.fallback ? fmt::format("`{}`", v.fallback) : "unset";
    const char* use = v.use == U::GpuAb ? "GPU A/B, pending a GPU run" : v.use == U::Testing ? "tests" : "users";
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", v.name, kind_name(v.kind), values, fallback, use, v.doc);
  }
  return out;
}

ScopedValue::ScopedValue(const char* name, const char* value) : name_(name) {
  const size_t slot = slot_of(name);
  if (const char* old = std::getenv(name)) before_ = old;
  if (value) ::setenv(name, value, 1);
  else ::unsetenv(name);
  std::lock_guard<std::mutex> lock(read_mutex());
  read(slot);
}

ScopedValue::~ScopedValue() {
  if (before_) ::setenv(name_.c_str(), before_->c_str(), 1);
  else ::unsetenv(name_.c_str());
  std::lock_guard<std::mutex> lock(read_mutex());
  read(slot_of(name_.c_str()));
}

}  // namespace tandem::env
