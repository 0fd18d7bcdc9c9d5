// The value checks of a run config (names known, numbers in range) and config_error, which places a
// message at the line of the file that set the key.
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "nn/config/checks.h"
#include "nn/config/layer_specs.h"
#include "nn/model_registry.h"
#include "runtime/spelling.h"
#include "runtime/error.h"

namespace tandem::nn::config {

namespace {

// Calls fail and makes sure the error is raised even if fail returns.
[[noreturn]] void report(const ConfigFail& fail, const std::string& path, const std::string& what) {
  fail(path, what);
  throw ValueError(path + ": " + what);
}

std::string got(double v) { return fmt::format("got {}", v); }

// `v` must satisfy `ok`; otherwise "must be <rule>, got <v>".
void need(bool ok, const ConfigFail& fail, const std::string& path, const char* rule, double v) {
  if (!ok) report(fail, path, fmt::format("must be {}, {}", rule, got(v)));
}

// A registered model's numbers: each one declared, in range, whole where it must be.
void check_model_values(const ModelEntry& entry, const ModelConfig& model, const ConfigFail& fail) {
  for (const auto& [name, v] : model.values) {
    const std::string path = "model.parameters." + name;
    const ModelParameter* p = nullptr;
    std::vector<std::string> names;
    for (const ModelParameter& q : entry.parameters) {
      names.push_back(q.name);
      if (q.name == name) p = &q;
    }
    if (p == nullptr) {
      const std::string near = closest_spelling(name, names);
      report(fail, path, fmt::format("unknown key for model type {} (expected one of {}){}", entry.type,
                                     fmt::join(names, ", "), near.empty() ? "" : fmt::format("; did you mean '{}'?", near)));
    }
    if (!std::isfinite(v) || v < p->min || v > p->max)
      report(fail, path, fmt::format("must be in [{}, {}], got {}", p->min, p->max, v));
    if (p->integer && v != std::floor(v)) report(fail, path, fmt::format("must be a whole number, got {}", v));
  }
}

}  // namespace

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void check_model(const ModelConfig& model, const ConfigFail& fail) {
  const std::string type = lower(model.type);
  if (type == "mlp") {
    const std::string sizes = "model.parameters.layer_sizes";
    if (model.layer_sizes.empty())
      report(fail, sizes, "required key missing for model type mlp (the sizes of its linear layers, input first, "
                          "e.g. [784, 512, 10])");
    if (model.layer_sizes.size() < 2)
      report(fail, sizes, "needs at least 2 sizes (the input and the output), got 1");
    for (size_t i = 0; i < model.layer_sizes.size(); ++i)
      need(model.layer_sizes[i] >= 1, fail, fmt::format("{}[{}]", sizes, i), ">= 1",
           static_cast<double>(model.layer_sizes[i]));
    need(model.dropout >= 0.0 && model.dropout < 1.0, fail, "model.parameters.dropout", "in [0, 1)", model.dropout);
  } else if (type == "sequential") {
    if (model.layers.empty())
      report(fail, "model.parameters.layers",
             "required key missing for model type sequential (a list of layers, e.g. "
             "[{type: linear, in_features: 2, out_features: 1}])");
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const std::string at = fmt::format("model.parameters.layers[{}]", i);
      check_layer(model.layers[i], [&](const std::string& arg, const std::string& what) {
        report(fail, at + "." + (arg.empty() ? "type" : arg), what);
      });
    }
  } else if (type == "gpt") {
    const GPTConfig& g = model.gpt;
    const std::pair<const char*, int64_t> sizes[] = {{"n_layer", g.n_layer}, {"n_head", g.n_head},
                                                     {"n_embd", g.n_embd}, {"context", g.context},
                                                     {"vocab_size", g.vocab_size}};
    for (const auto& [key, value] : sizes)
      need(value >= 1, fail, fmt::format("model.parameters.{}", key), ">= 1", static_cast<double>(value));
    if (g.n_head >= 1 && g.n_embd % g.n_head != 0)
      report(fail, "model.parameters.n_head", fmt::format("must divide n_embd ({}), got {}", g.n_embd, g.n_head));
  } else if (type != "cnn") {
    const ModelEntry* entry = find_model_entry(type);
    if (entry == nullptr) report(fail, "model.type", unknown_model_type(model.type));
    check_model_values(*entry, model, fail);
  }
}

void check_loss(const LossConfig& loss, const ConfigFail& fail) {
  // A program may cast any integer into an enum; the file's words are checked as they are read.
  if (enum_name(loss.type)[0] == '?')
    report(fail, "loss.type", "not a loss type (expected mse, l1, cross_entropy or bce_with_logits)");
  if (enum_name(loss.reduction)[0] == '?')
    report(fail, "loss.parameters.reduction", "not a reduction (expected mean, sum or none)");
}

void check_optimizer(const OptimizerConfig& o, const ConfigFail& fail) {
  if (enum_name(o.type)[0] == '?') report(fail, "optimizer.type", "not an optimizer type (expected sgd, adam or adamw)");
  const std::string p = "optimizer.parameters.";
  need(o.learning_rate > 0.0 && std::isfinite(o.learning_rate), fail, p + "learning_rate", "> 0", o.learning_rate);
  need(o.weight_decay >= 0.0 && std::isfinite(o.weight_decay), fail, p + "weight_decay", ">= 0", o.weight_decay);
  if (o.type == OptimizerType::SGD) {
    need(o.momentum >= 0.0 && std::isfinite(o.momentum), fail, p + "momentum", ">= 0", o.momentum);
    need(o.dampening >= 0.0 && o.dampening <= 1.0, fail, p + "dampening", "in [0, 1]", o.dampening);
    if (o.nesterov && !(o.momentum > 0.0 && o.dampening == 0.0))
      report(fail, p + "nesterov",
             fmt::format("needs momentum > 0 and dampening 0 (got momentum {}, dampening {}); set them or drop "
                         "nesterov", o.momentum, o.dampening));
  } else {
    need(o.beta1 >= 0.0 && o.beta1 < 1.0, fail, p + "beta1", "in [0, 1)", o.beta1);
    need(o.beta2 >= 0.0 && o.beta2 < 1.0, fail, p + "beta2", "in [0, 1)", o.beta2);
    need(o.eps >= 0.0 && std::isfinite(o.eps), fail, p + "eps", ">= 0", o.eps);
  }
}

void check_schedule(const ScheduleConfig& s, const ConfigFail& fail) {
  const std::string p = "lr_scheduler.parameters.";
  auto whole = [](int64_t v) { return static_cast<double>(v); };
  if (s.type != ScheduleType::LinearWarmup)  // the warmup in front of the others (0: none)
    need(s.warmup_steps >= 0, fail, p + "warmup_steps", ">= 0 (0: no warmup)", whole(s.warmup_steps));
  switch (s.type) {
    case ScheduleType::Constant:
    case ScheduleType::Cosine:
      return;
    case ScheduleType::Step:
      need(s.step_size >= 1, fail, p + "step_size", ">= 1", whole(s.step_size));
      need(s.gamma > 0.0 && std::isfinite(s.gamma), fail, p + "gamma", "> 0", s.gamma);
      return;
    case ScheduleType::CosineAnnealing:
      need(s.t_max >= 1, fail, p + "T_max", ">= 1 (the steps to anneal over)", whole(s.t_max));
      need(s.eta_min >= 0.0 && std::isfinite(s.eta_min), fail, p + "eta_min", ">= 0", s.eta_min);
      return;
    case ScheduleType::LinearWarmup:
      need(s.warmup_steps >= 1, fail, p + "warmup_steps", ">= 1", whole(s.warmup_steps));
      need(s.start_factor > 0.0 && s.start_factor <= 1.0, fail, p + "start_factor", "in (0, 1]", s.start_factor);
      need(s.t_max >= 0, fail, p + "T_max", ">= 0 (0: constant after the warmup)", whole(s.t_max));
      need(s.eta_min >= 0.0 && std::isfinite(s.eta_min), fail, p + "eta_min", ">= 0", s.eta_min);
      if (s.t_max == 0 && s.eta_min != 0.0)
        report(fail, p + "eta_min", "applies to the cosine after the warmup: give T_max too, or drop eta_min");
      return;
  }
  report(fail, "lr_scheduler.type",
         "not a schedule type (expected constant, step, cosine, cosine_annealing or linear_warmup)");
}

void check_training(const RunConfig& c, const ConfigFail& fail) {
  need(c.grad_clip >= 0.0 && std::isfinite(c.grad_clip), fail, "training.grad_clip", ">= 0 (0: off)", c.grad_clip);
  need(c.accumulation_steps >= 1, fail, "training.accumulation_steps", ">= 1",
       static_cast<double>(c.accumulation_steps));
  if (enum_name(c.amp)[0] == '?') report(fail, "training.amp", "expected off, f16 or bf16");
  need(c.seed >= 0, fail, "training.seed", ">= 0", static_cast<double>(c.seed));
  need(c.ddp.bucket_cap_mb > 0.0 && std::isfinite(c.ddp.bucket_cap_mb), fail, "ddp.bucket_cap_mb", "> 0",
       c.ddp.bucket_cap_mb);
  need(c.ddp.first_bucket_mb > 0.0 && std::isfinite(c.ddp.first_bucket_mb), fail, "ddp.first_bucket_mb", "> 0",
       c.ddp.first_bucket_mb);
  need(c.ddp.zero_stage >= 0 && c.ddp.zero_stage <= 2, fail, "ddp.zero_stage", "0, 1 or 2",
       static_cast<double>(c.ddp.zero_stage));
}

void config_error(const RunConfig& config, const std::string& key_path, const std::string& what) {
  // The key's own line, else the nearest enclosing key the file wrote ("a.b[2].c" -> "a.b[2]" -> "a.b" -> "a").
  int line = 0;
  for (std::string p = key_path; !p.empty();) {
    auto it = config.key_lines.find(p);
    if (it != config.key_lines.end()) {
      line = it->second;
      break;
    }
    const size_t cut = p.find_last_of(".[");
    p = cut == std::string::npos ? std::string() : p.substr(0, cut);
  }
  const std::string where = line > 0 ? fmt::format("{}:{}", config.source, line) : config.source;
  throw ValueError(key_path.empty() ? fmt::format("{}: {}", where, what)
                                    : fmt::format("{}: {}: {}", where, key_path, what));
}

void validate(const RunConfig& config) {
  const ConfigFail fail = [&](const std::string& path, const std::string& what) { config_error(config, path, what); };
  check_model(config.model, fail);
  check_loss(config.loss, fail);
  check_optimizer(config.optimizer, fail);
  check_schedule(config.lr_scheduler, fail);
  check_training(config, fail);
}

}  // namespace tandem::nn::config
