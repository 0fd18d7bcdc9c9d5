// The sequential layers of a run config: one table of argument specs (PyTorch's names, tandem's
// constructors), the checks every LayerConfig goes through, and the construction.
#include "nn/config/layer_specs.h"

#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "nn/config/checks.h"
#include "nn/layers.h"
#include "runtime/error.h"

namespace tandem::nn::config {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Kind { Int, Number, Bool, Shape, Word };  // Shape: a list of ints; Word: an index into words

struct ArgSpec {
  std::string name;
  Kind kind = Kind::Int;
  bool required = false;
  double fallback = 0.0;  // the value when not given
  double min = -kInf, max = kInf;
  bool min_open = false, max_open = false;  // exclusive bounds
  std::vector<std::string> words;
  std::string default_text;  // the default as the docs say it, where the fallback is a stand-in
};

ArgSpec arg(const char* name, Kind kind, bool required, double fallback = 0.0, double min = -kInf) {
  ArgSpec a;
  a.name = name;
  a.kind = kind;
  a.required = required;
  a.fallback = fallback;
  a.min = min;
  return a;
}
ArgSpec req_int(const char* name, double min) { return arg(name, Kind::Int, true, 0.0, min); }
ArgSpec opt_int(const char* name, double fallback, double min = -kInf) {
  return arg(name, Kind::Int, false, fallback, min);
}
ArgSpec opt_bool(const char* name, bool fallback) { return arg(name, Kind::Bool, false, fallback ? 1.0 : 0.0); }
ArgSpec opt_num(const char* name, double fallback, double min, bool min_open, double max = kInf,
                bool max_open = false) {
  ArgSpec a = arg(name, Kind::Number, false, fallback, min);
  a.min_open = min_open;
  a.max = max;
  a.max_open = max_open;
  return a;
}
// A pool's stride: 0 stands for "the kernel size", PyTorch's default (stride=None).
ArgSpec pool_stride() {
  ArgSpec a = opt_int("stride", 0, 1);
  a.default_text = "kernel_size";
  return a;
}
ArgSpec opt_word(const char* name, std::vector<std::string> words) {
  ArgSpec a = arg(name, Kind::Word, false, 0.0);  // the first word is the default
  a.words = std::move(words);
  return a;
}

class Args;
using Make = std::shared_ptr<Module> (*)(const Args&, Generator&);

struct LayerSpec {
  std::string type;
  std::vector<ArgSpec> args;
  Make make;
};

// A checked layer's arguments by name, falling back to the spec's defaults.
class Args {
 public:
  Args(const LayerConfig& layer, const LayerSpec& spec) : layer_(layer), spec_(spec) {}
  double d(const std::string& name) const {
    const std::vector<double>* v = given(name);
    return v ? v->front() : spec(name).fallback;
  }
  int64_t i(const std::string& name) const { return static_cast<int64_t>(d(name)); }
  bool b(const std::string& name) const { return d(name) != 0.0; }
  Shape shape(const std::string& name) const {
    const std::vector<double>* v = given(name);
    Shape s;
    if (v)
      for (double x : *v) s.push_back(static_cast<int64_t>(x));
    return s;
  }

 private:
  const std::vector<double>* given(const std::string& name) const {
    for (const auto& [n, v] : layer_.args)
      if (n == name) return &v;
    return nullptr;
  }
  const ArgSpec& spec(const std::string& name) const {
    for (const ArgSpec& a : spec_.args)
      if (a.name == name) return a;
    TANDEM_FAIL(Value, "layer {}: no argument '{}' in its spec", spec_.type, name);  // a bug in the table
  }
  const LayerConfig& layer_;
  const LayerSpec& spec_;
};

const std::vector<LayerSpec>& specs() {
  static const std::vector<LayerSpec> table = {
      {"linear",
       {req_int("in_features", 1), req_int("out_features", 1), opt_bool("bias", true)},
       [](const Args& a, Generator& g) -> std::shared_ptr<Module> {
         return std::make_shared<Linear>(a.i("in_features"), a.i("out_features"), a.b("bias"), g);
       }},
      {"conv2d",
       {req_int("in_channels", 1), req_int("out_channels", 1), req_int("kernel_size", 1), opt_int("stride", 1, 1),
        opt_int("padding", 0, 0), opt_bool("bias", true)},
       [](const Args& a, Generator& g) -> std::shared_ptr<Module> {
         return std::make_shared<Conv2d>(a.i("in_channels"), a.i("out_channels"), a.i("kernel_size"), a.i("stride"),
                                         a.i("padding"), a.b("bias"), g);
       }},
      {"relu", {}, [](const Args&, Generator&) -> std::shared_ptr<Module> { return std::make_shared<ReLU>(); }},
      {"gelu",
       {opt_word("approximate", {"none", "tanh"})},
       [](const Args& a, Generator&) -> std::shared_ptr<Module> {
         return std::make_shared<GELU>(a.i("approximate") == 1);
       }},
      {"dropout",
       {opt_num("p", 0.5, 0.0, false, 1.0, true)},
       [](const Args& a, Generator&) -> std::shared_ptr<Module> {
         return std::make_shared<Dropout>(a.d("p"), default_generator());  // outlives the module
       }},
      {"batchnorm1d",
       {req_int("num_features", 1), opt_num("eps", 1e-5, 0.0, true), opt_num("momentum", 0.1, 0.0, false, 1.0),
        opt_bool("affine", true)},
       [](const Args& a, Generator&) -> std::shared_ptr<Module> {
         return std::make_shared<BatchNorm1d>(a.i("num_features"), a.d("eps"), a.d("momentum"), a.b("affine"));
       }},
      {"batchnorm2d",
       {req_int("num_features", 1), opt_num("eps", 1e-5, 0.0, true), opt_num("momentum", 0.1, 0.0, false, 1.0),
        opt_bool("affine", true)},
       [](const Args& a, Generator&) -> std::shared_ptr<Module> {
         return std::make_shared<BatchNorm2d>(a.i("num_features"), a.d("eps"), a.d("momentum"), a.b("affine"));
       }},
      {"layernorm",
       {arg("normalized_shape", Kind::Shape, true, 0.0, 1.0), opt_num("eps", 1e-5, 0.0, true),
        opt_bool("elementwise_affine", true)},
       [](const Args& a, Generator&) -> std::shared_ptr<Module> {
         return std::make_shared<LayerNorm>(a.shape("normalized_shape"), a.d("eps"), a.b("elementwise_affine"));
       }},
      {"maxpool2d",
       {req_int("kernel_size", 1), pool_stride(), opt_int("padding", 0, 0)},
       [](const Args& a, Generator&) -> std::shared_ptr<Module> {
         return std::make_shared<MaxPool2d>(a.i("kernel_size"), a.i("stride"), a.i("padding"));
       }},
      {"avgpool2d",
       {req_int("kernel_size", 1), pool_stride(), opt_int("padding", 0, 0)},
       [](const Args& a, Generator&) -> std::shared_ptr<Module> {
         return std::make_shared<AvgPool2d>(a.i("kernel_size"), a.i("stride"), a.i("padding"));
       }},
      {"flatten",
       {opt_int("start_dim", 1), opt_int("end_dim", -1)},
       [](const Args& a, Generator&) -> std::shared_ptr<Module> {
         return std::make_shared<Flatten>(a.i("start_dim"), a.i("end_dim"));
       }},
      {"embedding",
       {req_int("num_embeddings", 1), req_int("embedding_dim", 1)},
       [](const Args& a, Generator& g) -> std::shared_ptr<Module> {
         return std::make_shared<Embedding>(a.i("num_embeddings"), a.i("embedding_dim"), g);
       }},
      {"identity", {}, [](const Args&, Generator&) -> std::shared_ptr<Module> { return std::make_shared<Identity>(); }},
  };
  return table;
}

const LayerSpec* find_spec(const std::string& type) {
  const std::string t = lower(type);
  for (const LayerSpec& s : specs())
    if (s.type == t) return &s;
  return nullptr;
}

const ArgSpec* find_arg(const LayerSpec& spec, const std::string& name) {
  for (const ArgSpec& a : spec.args)
    if (a.name == name) return &a;
  return nullptr;
}

std::string arg_list(const LayerSpec& spec) {
  if (spec.args.empty()) return "none: " + spec.type + " takes no arguments";
  std::string s;
  for (const ArgSpec& a : spec.args) s += (s.empty() ? "" : ", ") + a.name;
  return s;
}

std::string required_list(const LayerSpec& spec) {
  std::vector<std::string> names;
  for (const ArgSpec& a : spec.args)
    if (a.required) names.push_back(a.name);
  std::string s;
  for (size_t k = 0; k < names.size(); ++k) s += (k == 0 ? "" : k + 1 == names.size() ? " and " : ", ") + names[k];
  return s;
}

std::string range_text(const ArgSpec& a) {
  if (a.max == kInf) return fmt::format("{} {}", a.min_open ? ">" : ">=", a.min);
  if (a.min == -kInf) return fmt::format("{} {}", a.max_open ? "<" : "<=", a.max);
  return fmt::format("in {}{}, {}{}", a.min_open ? "(" : "[", a.min, a.max, a.max_open ? ")" : "]");
}

std::string words_text(const ArgSpec& a) {
  std::string s;
  for (const std::string& w : a.words) s += (s.empty() ? "" : ", ") + w;
  return s;
}

bool is_integer(double v) { return std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15; }

// The problem with one argument's values, or "" when they are fine.
std::string value_problem(const LayerSpec& spec, const ArgSpec& a, const std::vector<double>& values) {
  if (values.empty()) return "has no value";
  if (a.kind != Kind::Shape && values.size() > 1) {
    bool equal = true;
    for (double v : values) equal = equal && v == values.front();
    // A square kernel written as PyTorch's pair (kernel_size: [3, 3]) is the one list a scalar takes.
    if (a.kind != Kind::Int || !equal)
      return a.kind == Kind::Int ? fmt::format("tandem's {} is square: give one integer (or a list of equal ones), "
                                               "got a list of {} different values", spec.type, values.size())
                                 : fmt::format("expected one value, got a list of {}", values.size());
  }
  for (double v : values) {
    switch (a.kind) {
      case Kind::Bool:
        if (v != 0.0 && v != 1.0) return fmt::format("expected true or false, got {}", v);
        continue;
      case Kind::Word:
        if (!is_integer(v) || v < 0 || v >= static_cast<double>(a.words.size()))
          return fmt::format("expected one of {}", words_text(a));
        continue;
      case Kind::Int:
      case Kind::Shape:
        if (!is_integer(v))
          return fmt::format("expected {}, got {}", a.kind == Kind::Int ? "an integer" : "a list of integers", v);
        break;
      case Kind::Number:
        if (!std::isfinite(v)) return fmt::format("expected a finite number, got {}", v);
        break;
    }
    const bool low = a.min_open ? v <= a.min : v < a.min;
    const bool high = a.max_open ? v >= a.max : v > a.max;
    if (low || high) return fmt::format("must be {}, got {}", range_text(a), v);
  }
  return "";
}

[[noreturn]] void report(const LayerFail& fail, const std::string& arg, const std::string& what) {
  fail(arg, what);
  throw ValueError(arg.empty() ? what : arg + ": " + what);  // fail must throw; never leave it unreported
}

}  // namespace

std::optional<std::string> canonical_layer_type(const std::string& type) {
  const LayerSpec* s = find_spec(type);
  if (!s) return std::nullopt;
  return s->type;
}

std::string layer_type_list() {
  std::string s;
  for (const LayerSpec& spec : specs()) s += (s.empty() ? "" : ", ") + spec.type;
  return s;
}

double layer_arg_word(const std::string& type, const std::string& arg, const std::string& word,
                      const LayerFail& fail) {
  const LayerSpec* spec = find_spec(type);
  if (!spec) report(fail, "", fmt::format("unknown layer type '{}' (expected one of {})", type, layer_type_list()));
  const ArgSpec* a = find_arg(*spec, arg);
  if (!a) report(fail, arg, fmt::format("unknown argument of {} (expected {})", spec->type, arg_list(*spec)));
  if (a->kind != Kind::Word) {
    const char* want = a->kind == Kind::Bool     ? "true or false"
                       : a->kind == Kind::Int    ? "an integer"
                       : a->kind == Kind::Number ? "a number"
                                                 : "a list of integers";
    report(fail, arg, fmt::format("expected {}, got a string ('{}')", want, word));
  }
  for (size_t k = 0; k < a->words.size(); ++k)
    if (lower(word) == a->words[k]) return static_cast<double>(k);
  report(fail, arg, fmt::format("expected one of {}, got '{}'", words_text(*a), word));
}

void check_layer(const LayerConfig& layer, const LayerFail& fail) {
  const LayerSpec* spec = find_spec(layer.type);
  if (!spec)
    report(fail, "", fmt::format("unknown layer type '{}' (expected one of {})", layer.type, layer_type_list()));
  for (size_t k = 0; k < layer.args.size(); ++k) {
    const auto& [name, values] = layer.args[k];
    const ArgSpec* a = find_arg(*spec, name);
    if (!a) report(fail, name, fmt::format("unknown argument of {} (expected {})", spec->type, arg_list(*spec)));
    for (size_t j = 0; j < k; ++j)
      if (layer.args[j].first == name) report(fail, name, "given twice; keep one");
    std::string problem = value_problem(*spec, *a, values);
    if (!problem.empty()) report(fail, name, problem);
  }
  for (const ArgSpec& a : spec->args) {
    if (!a.required) continue;
    bool given = false;
    for (const auto& [name, values] : layer.args) given = given || name == a.name;
    if (!given)
      report(fail, a.name, fmt::format("required key missing ({} needs {})", spec->type, required_list(*spec)));
  }
}

std::shared_ptr<Module> make_layer(const LayerConfig& layer, Generator& gen) {
  const LayerSpec* spec = find_spec(layer.type);
  TANDEM_CHECK(spec, "make_layer: unknown layer type '{}' (expected one of {})", layer.type, layer_type_list());
  return spec->make(Args(layer, *spec), gen);
}

std::string layer_table_markdown() {
  std::string s = "| layer | argument | takes | default |\n|---|---|---|---|\n";
  for (const LayerSpec& spec : specs()) {
    if (spec.args.empty()) s += fmt::format("| `{}` | (none) | | |\n", spec.type);
    for (size_t k = 0; k < spec.args.size(); ++k) {
      const ArgSpec& a = spec.args[k];
      const bool bounded = a.min != -kInf || a.max != kInf;
      std::string takes;
      switch (a.kind) {
        case Kind::Int: takes = bounded ? "integer " + range_text(a) : "integer"; break;
        case Kind::Number: takes = bounded ? "number " + range_text(a) : "number"; break;
        case Kind::Bool: takes = "true or false"; break;
        case Kind::Shape: takes = "integer or list of integers, each " + range_text(a); break;
        case Kind::Word: takes = "one of " + words_text(a); break;
      }
      std::string fallback = a.required                ? "required"
                             : !a.default_text.empty() ? "`" + a.default_text + "`"
                             : a.kind == Kind::Bool    ? (a.fallback != 0.0 ? "true" : "false")
                             : a.kind == Kind::Word    ? a.words.front()
                                                       : fmt::format("{}", a.fallback);
      s += fmt::format("| {} | `{}` | {} | {} |\n", k == 0 ? "`" + spec.type + "`" : "", a.name, takes, fallback);
    }
  }
  return s;
}

}  // namespace tandem::nn::config
