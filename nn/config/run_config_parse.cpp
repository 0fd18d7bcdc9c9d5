// YAML text -> RunConfig with yaml-cpp: every key must be known where it is written, every value of
// the type its key takes, and each key's line is recorded; validate() (run_config_check.cpp) then
// checks the values. Every error reads "<file>:<line>: <key path>: <what>".
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "nn/config/checks.h"
#include "nn/config/layer_specs.h"
#include "nn/config/torchfort_keys.h"
#include "nn/model_registry.h"
#include "runtime/error.h"
#include "runtime/spelling.h"

namespace tandem::nn::config {

namespace {

[[noreturn]] void fail_at(const std::string& source, int line, const std::string& path, const std::string& what) {
  const std::string where = line > 0 ? fmt::format("{}:{}", source, line) : source;
  throw ValueError(path.empty() ? fmt::format("{}: {}", where, what) : fmt::format("{}: {}: {}", where, path, what));
}

int line_of(const YAML::Node& n, int fallback) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? fallback : m.line + 1;  // yaml-cpp counts from 0
}

// YAML's numbers: decimal integers and floats (1e-3, .5), and .inf / .nan (rejected later as not finite).
std::optional<double> parse_number(const std::string& s) {
  const std::string l = lower(s);
  if (l == ".inf" || l == "+.inf") return std::numeric_limits<double>::infinity();
  if (l == "-.inf") return -std::numeric_limits<double>::infinity();
  if (l == ".nan") return std::numeric_limits<double>::quiet_NaN();
  if (s.empty()) return std::nullopt;
  // strtod would also take "inf", "nan" and hex floats, which YAML reads as strings.
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'))
      return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

// The words yaml-cpp reads as booleans, and 0 / 1, which TorchFort's own files write (amsgrad: 0).
std::optional<bool> parse_bool(const std::string& s) {
  const std::string l = lower(s);
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  return std::nullopt;
}

bool plain(const YAML::Node& n) { return n.Tag() != "!"; }  // "!": a quoted scalar

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar:
      if (plain(n) && parse_number(n.Scalar())) return fmt::format("a number ({})", n.Scalar());
      if (plain(n) && parse_bool(n.Scalar())) return fmt::format("a boolean ({})", n.Scalar());
      return fmt::format("a string ('{}')", n.Scalar());
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// One mapping of the file: its keys with their lines, read through typed getters that fail at the
// key's line. `line` is where the mapping's own key was written (0: the document).
class Block {
 public:
  Block(RunConfig& out, const YAML::Node& node, std::string block_path, int line)
      : out_(out), path_(std::move(block_path)), line_(line) {
    if (!node.IsDefined() || node.IsNull()) return;  // `parameters:` with nothing under it: no keys
    if (!node.IsMap())
      fail_at(out_.source, line_of(node, line_), path_,
              fmt::format("expected a mapping (key: value lines), got {}", describe(node)));
    for (auto it = node.begin(); it != node.end(); ++it) {
      const int key_line = line_of(it->first, line_);
      if (!it->first.IsScalar()) fail_at(out_.source, key_line, path_, "a key must be a plain word");
      const std::string key = it->first.Scalar();
      for (const Entry& e : entries_)
        if (e.key == key)
          fail_at(out_.source, key_line, path(key), fmt::format("given twice (first at line {})", e.line));
      entries_.push_back({key, it->second, key_line});
      out_.key_lines[path(key)] = key_line;
    }
  }

  // Fails at the first key not in `allowed`; `owner` says whose keys these are ("optimizer type adam").
  void only(const std::vector<std::string>& allowed, const std::string& owner = "") const {
    for (const Entry& e : entries_) {
      bool known = false;
      for (const std::string& a : allowed) known = known || a == e.key;
      if (known) continue;
      const std::string of = owner.empty() ? "" : " for " + owner;
      if (allowed.empty()) fail(e, fmt::format("unknown key ({} takes no parameters)", owner.empty() ? path_ : owner));
      const std::string hint = closest_spelling(e.key, allowed);  // a typo, not a different word
      fail(e, fmt::format("unknown key{} (expected one of {}){}", of, join(allowed),
                          hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
    }
  }

  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::vector<std::string> keys() const {  // in file order
    std::vector<std::string> k;
    for (const Entry& e : entries_) k.push_back(e.key);
    return k;
  }
  std::string path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  int line() const { return line_; }
  int line(const std::string& key) const { return find(key)->line; }

  [[noreturn]] void missing(const std::string& key, const std::string& hint = "") const {
    fail_at(out_.source, line_, path(key), "required key missing" + (hint.empty() ? "" : " (" + hint + ")"));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { fail(*find(key), what); }
  void warn(const std::string& key, const std::string& what) const {
    out_.warnings.push_back(fmt::format("{}:{}: {}: {}", out_.source, line(key), path(key), what));
  }

  Block block(const std::string& key) const {
    const Entry* e = find(key);
    return e ? Block(out_, e->value, path(key), e->line) : Block(out_, YAML::Node(), path(key), line_);
  }
  const YAML::Node& node(const std::string& key) const { return find(key)->value; }

  bool get(const std::string& key, double& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    out = number(*e, e->value, "a number");
    return true;
  }
  bool get(const std::string& key, int64_t& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    out = integer(*e, e->value);
    return true;
  }
  bool get(const std::string& key, bool& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    std::optional<bool> b = e->value.IsScalar() ? parse_bool(e->value.Scalar()) : std::nullopt;
    if (!b) fail(*e, fmt::format("expected true or false, got {}", describe(e->value)));
    out = *b;
    return true;
  }
  // A word (a type name, a reduction): a scalar, compared case-insensitively by the caller.
  bool get(const std::string& key, std::string& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    if (!e->value.IsScalar() || e->value.Scalar().empty())
      fail(*e, fmt::format("expected a word, got {}", describe(e->value)));
    out = e->value.Scalar();
    return true;
  }
  bool get(const std::string& key, std::vector<std::string>& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    if (!e->value.IsSequence()) fail(*e, fmt::format("expected a list of names, got {}", describe(e->value)));
    out.clear();
    for (size_t i = 0; i < e->value.size(); ++i) {
      const YAML::Node item = e->value[i];
      if (!item.IsScalar() || item.Scalar().empty())
        fail(*e, fmt::format("item {}: expected a name, got {}", i, describe(item)));
      out.push_back(item.Scalar());
    }
    return true;
  }
  bool get(const std::string& key, std::vector<int64_t>& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    if (!e->value.IsSequence()) fail(*e, fmt::format("expected a list of integers, got {}", describe(e->value)));
    out.clear();
    for (size_t i = 0; i < e->value.size(); ++i) {
      const YAML::Node item = e->value[i];
      const std::string at = fmt::format("{}[{}]", path(key), i);
      out_.key_lines[at] = line_of(item, e->line);
      out.push_back(integer(Entry{at, item, line_of(item, e->line)}, item, true));
    }
    return true;
  }

 private:
  struct Entry {
    std::string key;  // or, for a list item, its full path (see fail)
    YAML::Node value;
    int line;
  };

  const Entry* find(const std::string& key) const {
    for (const Entry& e : entries_)
      if (e.key == key) return &e;
    return nullptr;
  }
  [[noreturn]] void fail(const Entry& e, const std::string& what) const {
    fail_at(out_.source, e.line, e.key.find('[') != std::string::npos ? e.key : path(e.key), what);
  }
  double number(const Entry& e, const YAML::Node& v, const char* want) const {
    std::optional<double> x = v.IsScalar() ? parse_number(v.Scalar()) : std::nullopt;
    if (!x) fail(e, fmt::format("expected {}, got {}", want, describe(v)));
    if (!std::isfinite(*x)) fail(e, fmt::format("expected a finite number, got {}", v.Scalar()));
    return *x;
  }
  // Integers may be written as whole floats (TorchFort's T_max is a float: 100.0, 1e3).
  int64_t integer(const Entry& e, const YAML::Node& v, bool in_list = false) const {
    const double x = number(e, v, in_list ? "an integer (in a list of integers)" : "an integer");
    if (x != std::floor(x) || std::fabs(x) > 9.0e15) fail(e, fmt::format("expected an integer, got {}", v.Scalar()));
    return static_cast<int64_t>(x);
  }

  RunConfig& out_;
  std::string path_;
  int line_;
  std::vector<Entry> entries_;
};

// The word at `key` lower-cased, or a missing-key error naming the choices.
std::string type_of(const Block& b, const std::string& choices) {
  std::string type;
  if (!b.get("type", type)) b.missing("type", choices);
  return lower(type);
}

// The enum `key` names (in any case), or a failure naming the choices; `what` says which kind of word
// ("loss type") and `extra` may explain more about a word tandem refuses.
template <class E>
bool get_word(const Block& b, const std::string& key, E& out, const std::string& what) {
  std::string word;
  if (!b.get(key, word)) return false;
  const std::optional<E> v = enum_value<E>(lower(word));
  if (!v) b.fail(key, fmt::format("unknown {} '{}' (expected {})", what, word, or_list(enum_words<E>())));
  out = *v;
  return true;
}

// TorchFort's general block: accepted so that its files load, type-checked, and otherwise ignored,
// each key it sets with a warning that says so and why.
void parse_general(const Block& g) {
  std::vector<std::string> keys;
  for (const torchfort::IgnoredKey& k : torchfort::kGeneral) keys.push_back(k.key);
  g.only(keys);
  for (const torchfort::IgnoredKey& k : torchfort::kGeneral) {
    int64_t number = 0;
    bool flag = false;
    if (k.flag ? g.get(k.key, flag) : g.get(k.key, number))
      g.warn(k.key, fmt::format("TorchFort's key, ignored: tandem does not act on it ({})", k.why));
  }
}

void refuse_rl(const Block& top) {
  for (const std::string& key : top.keys())
    for (const char* rl : torchfort::kRlBlocks)
      if (key == rl)
        top.fail(key, "reinforcement learning (TorchFort's torchfort_rl) is not supported: this is an RL config's "
                      "block; tandem trains supervised models (model, loss, optimizer, lr_scheduler)");
}

LayerConfig parse_layer(RunConfig& out, const YAML::Node& node, const std::string& path, int line) {
  if (!node.IsMap())
    fail_at(out.source, line, path,
            fmt::format("expected a layer ({{type: linear, in_features: 2, out_features: 1}}), got {}",
                        describe(node)));
  const Block b(out, node, path, line);
  LayerConfig layer;
  layer.line = line;
  std::string type;
  if (!b.get("type", type)) b.missing("type", "one of " + layer_type_list());
  std::optional<std::string> canonical = canonical_layer_type(type);
  if (!canonical) b.fail("type", fmt::format("unknown layer type '{}' (expected one of {})", type, layer_type_list()));
  layer.type = *canonical;
  // The arguments stand beside the type ({type: linear, in_features: 2}), or under parameters: as
  // TorchFort writes its blocks ({type: linear, parameters: {in_features: 2}}); one or the other.
  const bool nested = b.has("parameters");
  if (nested)
    for (const std::string& key : b.keys())
      if (key != "type" && key != "parameters")
        b.fail(key, fmt::format("a layer's arguments go either beside its type or under parameters:, not both; "
                                "move {} under parameters:", key));
  const Block args = nested ? b.block("parameters") : b;
  const LayerFail at = [&](const std::string& arg, const std::string& what) {
    if (arg.empty()) fail_at(out.source, b.line("type"), b.path("type"), what);
    fail_at(out.source, args.has(arg) ? args.line(arg) : args.line(), args.path(arg), what);
  };
  // Arguments in file order: numbers, booleans (1/0), lists of numbers, or a word the layer knows.
  for (const std::string& key : args.keys()) {
    if (key == "type" && !nested) continue;
    const YAML::Node& v = args.node(key);
    std::vector<double> values;
    auto scalar = [&](const YAML::Node& s) {
      if (std::optional<double> x = parse_number(s.Scalar())) return *x;
      if (std::optional<bool> x = parse_bool(s.Scalar())) return *x ? 1.0 : 0.0;
      return layer_arg_word(layer.type, key, s.Scalar(), at);
    };
    if (v.IsScalar()) {
      values.push_back(scalar(v));
    } else if (v.IsSequence() && v.size() > 0) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].IsScalar() || !parse_number(v[i].Scalar()))
          args.fail(key, fmt::format("expected a number or a list of numbers, got {} in the list", describe(v[i])));
        values.push_back(*parse_number(v[i].Scalar()));
      }
    } else {
      args.fail(key, fmt::format("expected a number or a list of numbers, got {}{}", describe(v),
                                 v.IsMap() ? " (a layer is written {type: linear, in_features: 2, out_features: 1}"
                                             " or {type: linear, parameters: {in_features: 2, out_features: 1}})"
                                           : ""));
    }
    layer.args.emplace_back(key, std::move(values));
  }
  check_layer(layer, at);
  return layer;
}

void parse_model(RunConfig& out, const Block& m) {
  m.only({"type", "parameters"});
  ModelConfig& model = out.model;
  const std::string type = type_of(m, or_list(model_types()));
  if (type != model.type) model = ModelConfig{};  // another model: nothing of the base's carries over
  model.type = type;
  const Block p = m.block("parameters");
  if (model.type == "mlp") {
    p.only({"layer_sizes", "dropout", "flatten_non_batch_dims"}, "model type mlp");
    if (!p.get("layer_sizes", model.layer_sizes) && model.layer_sizes.empty())
      p.missing("layer_sizes", "the sizes of the mlp's linear layers, input first, e.g. [784, 512, 10]");
    p.get("dropout", model.dropout);
    p.get("flatten_non_batch_dims", model.flatten_non_batch_dims);
  } else if (model.type == "cnn") {
    p.only({}, "model type cnn");  // the fixed Fashion-MNIST cnn of nn::make_cnn
  } else if (model.type == "sequential") {
    p.only({"layers"}, "model type sequential");
    if (!p.has("layers") && !model.layers.empty()) return;  // the base's layers
    if (!p.has("layers"))
      p.missing("layers", "a list of layers, e.g. [{type: linear, in_features: 2, out_features: 1}]");
    const YAML::Node& layers = p.node("layers");
    if (!layers.IsSequence() || layers.size() == 0)
      p.fail("layers", fmt::format("expected a list of layers ({{type: linear, in_features: 2, out_features: 1}}, "
                                   "{{type: relu}}, ...), got {}", layers.IsSequence() ? "an empty list"
                                                                                       : describe(layers)));
    model.layers.clear();
    for (size_t i = 0; i < layers.size(); ++i) {
      const std::string path = fmt::format("{}[{}]", p.path("layers"), i);
      const int line = line_of(layers[i], p.line("layers"));
      out.key_lines[path] = line;
      model.layers.push_back(parse_layer(out, layers[i], path, line));
    }
  } else if (model.type == "gpt") {
    p.only({"n_layer", "n_head", "n_embd", "context", "vocab_size"}, "model type gpt");
    p.get("n_layer", model.gpt.n_layer);
    p.get("n_head", model.gpt.n_head);
    p.get("n_embd", model.gpt.n_embd);
    p.get("context", model.gpt.context);
    p.get("vocab_size", model.gpt.vocab_size);
  } else if (model.type == "onnx") {
    p.only({"filename", "frozen"}, "model type onnx");
    if (!p.get("filename", model.filename) && model.filename.empty())
      p.missing("filename", "the .onnx file, e.g. filename: model.onnx");
    // Relative to the config file, wherever the program runs (a file given as text: the working folder).
    if (p.has("filename") && !model.filename.empty() && model.filename[0] != '/' && out.source != "<string>") {
      const size_t slash = out.source.find_last_of('/');
      if (slash != std::string::npos) model.filename = out.source.substr(0, slash + 1) + model.filename;
    }
    p.get("frozen", model.frozen);
  } else if (model.type == "torchscript") {
    m.fail("type", "TorchScript models are not supported; export to ONNX (torch.onnx.export) and give type: onnx "
                   "with parameters: {filename: model.onnx}, or describe the layers with type: sequential");
  } else if (const ModelEntry* entry = find_model_entry(model.type)) {
    // A registered model: its numbers, declared by its entry (checked by validate()).
    std::vector<std::string> names;
    for (const ModelParameter& q : entry->parameters) names.push_back(q.name);
    p.only(names, "model type " + model.type);
    for (const std::string& name : names)
      if (double v = 0; p.get(name, v)) model.values[name] = v;
  } else {
    m.fail("type", unknown_model_type(model.type));
  }
}

void parse_loss(RunConfig& out, const Block& l) {
  l.only({"type", "parameters"});
  if (!l.has("type")) l.missing("type", "mse, l1 or cross_entropy");
  std::string word;
  if (l.get("type", word) && lower(word) == "torchscript")
    l.fail("type", "TorchScript losses are not supported (expected mse, l1 or cross_entropy)");
  get_word(l, "type", out.loss.type, "loss type");
  const Block p = l.block("parameters");
  p.only({"reduction"}, std::string("loss type ") + enum_name(out.loss.type));
  get_word(p, "reduction", out.loss.reduction, "reduction");
}

void parse_optimizer(RunConfig& out, const Block& o) {
  o.only({"type", "parameters", "general"});
  OptimizerConfig& opt = out.optimizer;
  if (!o.has("type")) o.missing("type", "sgd, adam or adamw");
  const OptimizerType before = opt.type;
  get_word(o, "type", opt.type, "optimizer type");
  const std::string owner = std::string("optimizer type ") + enum_name(opt.type);
  const Block p = o.block("parameters");
  if (opt.type == OptimizerType::SGD) {
    p.only({"learning_rate", "momentum", "dampening", "weight_decay", "nesterov", "fused"}, owner);
    p.get("momentum", opt.momentum);
    p.get("dampening", opt.dampening);
    p.get("nesterov", opt.nesterov);
  } else {
    p.only({"learning_rate", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "fused"}, owner);
    p.get("beta1", opt.beta1);
    p.get("beta2", opt.beta2);
    p.get("eps", opt.eps);
    bool amsgrad = false;
    if (p.get("amsgrad", amsgrad) && amsgrad)
      p.fail("amsgrad", "not supported (tandem's Adam has no AMSGrad variant); set it to false or remove it");
    // torch.optim.AdamW's default where the file switches to adamw; the file may override it.
    if (opt.type == OptimizerType::AdamW && before != OptimizerType::AdamW) opt.weight_decay = 1e-2;
  }
  p.get("learning_rate", opt.learning_rate);
  p.get("weight_decay", opt.weight_decay);
  p.get("fused", opt.fused);

  // TorchFort keeps accumulation and clipping here; they are the training block's settings.
  const Block g = o.block("general");
  g.only({"grad_accumulation_steps", "max_grad_norm"}, "optimizer.general (TorchFort's)");
  auto alias = [&](const std::string& key, const std::string& training_path) {
    if (!g.has(key)) return false;
    if (out.sets(training_path))
      g.fail(key, fmt::format("also given as {} (line {}); keep one", training_path, out.key_lines[training_path]));
    out.key_lines[training_path] = g.line(key);
    return true;
  };
  if (alias("grad_accumulation_steps", "training.accumulation_steps"))
    g.get("grad_accumulation_steps", out.accumulation_steps);
  if (alias("max_grad_norm", "training.grad_clip")) g.get("max_grad_norm", out.grad_clip);
}

void parse_schedule(RunConfig& out, const Block& s) {
  s.only({"type", "parameters"});
  ScheduleConfig& sc = out.lr_scheduler;
  std::string word;
  if (!s.get("type", word)) s.missing("type", or_list(enum_words<ScheduleType>()));
  const std::string type = lower(word);
  if (type == "multistep" || type == "polynomial" || type == "linear")
    s.fail("type", fmt::format("TorchFort's {} schedule is not supported (expected {}{})", type,
                               or_list(enum_words<ScheduleType>()),
                               type == "linear" ? "; linear_warmup ramps up from start_factor to 1 and then holds "
                                                  "or anneals, it does not decay linearly"
                                                : ""));
  ScheduleType t = sc.type;
  get_word(s, "type", t, "schedule type");
  if (t != sc.type) sc = ScheduleConfig{};  // another schedule: nothing of the base's carries over
  sc.type = t;
  const Block p = s.block("parameters");
  const std::string owner = "schedule type " + type;
  switch (sc.type) {
    case ScheduleType::Constant:
    case ScheduleType::Cosine:
      p.only({"warmup_steps"}, owner);
      break;
    case ScheduleType::Step:
      p.only({"step_size", "gamma", "warmup_steps"}, owner);
      if (!p.get("step_size", sc.step_size) && sc.step_size < 1) p.missing("step_size", "the steps between two decays");
      p.get("gamma", sc.gamma);
      break;
    case ScheduleType::CosineAnnealing:
      p.only({"T_max", "eta_min"}, owner);
      if (!p.get("T_max", sc.t_max) && sc.t_max < 1) p.missing("T_max", "the steps to anneal over");
      p.get("eta_min", sc.eta_min);
      break;
    case ScheduleType::LinearWarmup:
      p.only({"warmup_steps", "start_factor", "T_max", "eta_min"}, owner);
      if (!p.get("warmup_steps", sc.warmup_steps) && sc.warmup_steps < 1)
        p.missing("warmup_steps", "the steps from start_factor to 1");
      p.get("start_factor", sc.start_factor);
      p.get("T_max", sc.t_max);
      p.get("eta_min", sc.eta_min);
      break;
  }
  p.get("warmup_steps", sc.warmup_steps);
}

void parse_training(RunConfig& out, const Block& t) {
  t.only({"grad_clip", "accumulation_steps", "amp", "seed"});
  t.get("grad_clip", out.grad_clip);
  t.get("accumulation_steps", out.accumulation_steps);
  get_word(t, "amp", out.amp, "amp setting");
  t.get("seed", out.seed);
}

void parse_ddp(RunConfig& out, const Block& d) {
  d.only({"bucket_cap_mb", "first_bucket_mb", "gradient_as_bucket_view", "static_graph", "find_unused_parameters",
          "broadcast_buffers"});
  d.get("bucket_cap_mb", out.ddp.bucket_cap_mb);
  d.get("first_bucket_mb", out.ddp.first_bucket_mb);
  d.get("gradient_as_bucket_view", out.ddp.gradient_as_bucket_view);
  d.get("static_graph", out.ddp.static_graph);
  d.get("find_unused_parameters", out.ddp.find_unused_parameters);
  d.get("broadcast_buffers", out.ddp.broadcast_buffers);
}

// The line of a syntax error. yaml-cpp reports a construct left open (an unclosed [ or {) where the
// text ended, often the empty line after the last; the last line with text is where to look.
int syntax_error_line(const std::string& text, const YAML::Mark& mark) {
  if (mark.is_null()) return 0;
  if (mark.pos < 0 || static_cast<size_t>(mark.pos) < text.size()) return mark.line + 1;
  const size_t last = text.find_last_not_of(" \t\r\n");
  if (last == std::string::npos) return mark.line + 1;
  int line = 1;
  for (size_t i = 0; i < last; ++i) line += text[i] == '\n';
  return line;
}

// Counts the documents the parser reports (and where the second starts); ignores their content.
class DocumentCounter final : public YAML::EventHandler {
 public:
  int documents = 0, second_line = 0;
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents == 2) second_line = mark.line + 1;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Each warning on stderr once per process: a program may load its file more than once.
void report_warnings(const RunConfig& config) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  const std::lock_guard<std::mutex> lock(mutex);
  for (const std::string& w : config.warnings)
    if (reported.insert(w).second) std::fprintf(stderr, "tandem: warning: %s\n", w.c_str());
}

}  // namespace

RunConfig parse_run_config(const std::string& yaml_text, const std::string& source) {
  return parse_run_config_onto(RunConfig{}, yaml_text, source);
}

RunConfig parse_run_config_onto(RunConfig base, const std::string& yaml_text, const std::string& source) {
  RunConfig out = std::move(base);
  out.source = source;
  YAML::Node root;
  DocumentCounter counter;
  try {
    // Not YAML::LoadAll: on some malformed text (",e\x7f", found by fuzz_run_config) yaml-cpp 0.7's
    // parser reports one empty document after another and LoadAll never returns. Count at most two.
    std::istringstream in(yaml_text);
    YAML::Parser parser(in);
    for (int i = 0; i < 2 && parser.HandleNextDocument(counter); ++i) {
    }
    if (counter.documents == 1) root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    fail_at(source, syntax_error_line(yaml_text, e.mark), "", "YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    fail_at(source, 0, "", std::string("YAML error: ") + e.what());
  }
  if (counter.documents > 1)
    fail_at(source, counter.second_line, "", "holds more than one YAML document; a run config is one");
  if (root.IsDefined() && !root.IsNull() && !root.IsMap())
    fail_at(source, line_of(root, 1), "",
            fmt::format("expected a mapping of blocks (model, loss, optimizer, lr_scheduler, training, ddp), got {}",
                        describe(root)));
  try {
    const Block top(out, root, "", 0);
    refuse_rl(top);
    top.only({"general", "model", "loss", "optimizer", "lr_scheduler", "training", "ddp"}, "a run config");
    if (!top.has("model")) top.missing("model", "e.g. model: {type: mlp, parameters: {layer_sizes: [784, 512, 10]}}");
    parse_general(top.block("general"));
    parse_model(out, top.block("model"));
    if (top.has("loss")) parse_loss(out, top.block("loss"));
    if (top.has("training")) parse_training(out, top.block("training"));  // before optimizer.general's aliases
    if (top.has("optimizer")) parse_optimizer(out, top.block("optimizer"));
    if (top.has("lr_scheduler")) parse_schedule(out, top.block("lr_scheduler"));
    if (top.has("ddp")) parse_ddp(out, top.block("ddp"));
  } catch (const YAML::Exception& e) {  // not expected: the reads above check types before converting
    fail_at(source, e.mark.is_null() ? 0 : e.mark.line + 1, "", std::string("YAML error: ") + e.what());
  }
  validate(out);
  report_warnings(out);
  return out;
}

RunConfig load_run_config(const std::string& path) { return load_run_config_onto(RunConfig{}, path); }

RunConfig load_run_config_onto(RunConfig base, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw ValueError(fmt::format("{}: cannot open the config file: {}", path, std::strerror(errno)));
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw ValueError(fmt::format("{}: cannot read the config file: {}", path, std::strerror(err)));
  return parse_run_config_onto(std::move(base), text, path);
}

}  // namespace tandem::nn::config
