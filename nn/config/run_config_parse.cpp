// YAML text -> RunConfig with yaml-cpp: every key must be known where it is written, every value of
// the type its key takes, and each key's line is recorded; validate() (run_config_check.cpp) then
// checks the values. Every error reads "<file>:<line>: <key path>: <what>".
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "nn/config/checks.h"
#include "nn/config/yaml_block.h"
#include "nn/config/torchfort_keys.h"
#include "runtime/error.h"
#include "runtime/spelling.h"

namespace tandem::nn::config {

namespace {

using namespace yaml;


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

void parse_loss(RunConfig& out, const Block& l) {
  l.only({"type", "parameters"});
  if (!l.has("type")) l.missing("type", "mse, l1, cross_entropy or bce_with_logits");
  std::string word;
  if (l.get("type", word) && lower(word) == "torchscript")
    l.fail("type", "TorchScript losses are not supported (expected mse, l1, cross_entropy or bce_with_logits)");
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
          "broadcast_buffers", "zero_stage"});
  d.get("bucket_cap_mb", out.ddp.bucket_cap_mb);
  d.get("first_bucket_mb", out.ddp.first_bucket_mb);
  d.get("gradient_as_bucket_view", out.ddp.gradient_as_bucket_view);
  d.get("static_graph", out.ddp.static_graph);
  d.get("find_unused_parameters", out.ddp.find_unused_parameters);
  d.get("broadcast_buffers", out.ddp.broadcast_buffers);
  int64_t zero_stage = out.ddp.zero_stage;
  if (d.get("zero_stage", zero_stage)) out.ddp.zero_stage = static_cast<int>(zero_stage);
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
