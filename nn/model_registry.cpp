// The model registry's table.
#include "nn/model_registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "nn/config/checks.h"
#include "nn/config/run_config.h"
#include "runtime/error.h"
#include "runtime/spelling.h"

namespace tandem::nn {

namespace {

// Function-local: entries register from static initialisers of other files, in any order.
std::vector<ModelEntry>& table() {
  static std::vector<ModelEntry> entries;
  return entries;
}

}  // namespace

const std::vector<ModelEntry>& model_entries() { return table(); }

const ModelEntry* find_model_entry(const std::string& type) {
  const std::string t = config::lower(type);
  for (const ModelEntry& e : table())
    if (e.type == t) return &e;
  return nullptr;
}

const ModelEntry& model_entry(const std::string& type) {
  if (const ModelEntry* e = find_model_entry(type)) return *e;
  throw ValueError(unknown_model_type(type));
}

std::string unknown_model_type(const std::string& type) {
  const std::vector<std::string> known = model_types();
  const std::string near = closest_spelling(config::lower(type), known);
  return fmt::format("unknown model type '{}' (expected {}){}", type, or_list(known),
                     near.empty() ? "" : fmt::format("; did you mean {}?", near));
}

std::vector<std::string> model_types(const std::string& dataset) {
  std::vector<std::string> out;
  for (const ModelEntry& e : table())
    if (dataset.empty() || e.dataset == dataset) out.push_back(e.type);
  std::sort(out.begin(), out.end());  // registration order depends on the link order
  return out;
}

void register_model(ModelEntry entry) {
  entry.type = config::lower(entry.type);
  TANDEM_CHECK(!entry.type.empty() && entry.build, "register_model: an entry needs a type and a builder");
  TANDEM_CHECK(find_model_entry(entry.type) == nullptr, "register_model: model type '{}' is registered twice",
               entry.type);
  for (const ModelParameter& p : entry.parameters)
    TANDEM_CHECK(p.min <= p.default_value && p.default_value <= p.max,
                 "register_model: {}'s parameter {} has its default {} outside [{}, {}]", entry.type, p.name,
                 p.default_value, p.min, p.max);
  table().push_back(std::move(entry));
}

ModelInput model_input(const config::ModelConfig& model) {
  const ModelEntry& e = model_entry(model.type);
  return e.input_of ? e.input_of(model) : e.input;
}

config::ModelConfig default_model_config(const std::string& type) {
  const ModelEntry& e = model_entry(type);
  config::ModelConfig c;
  c.type = e.type;
  if (e.app_defaults) e.app_defaults(c);
  return c;
}

}  // namespace tandem::nn

namespace tandem::nn::config {

double ModelConfig::value(const std::string& name) const {
  if (auto it = values.find(name); it != values.end()) return it->second;
  for (const ModelParameter& p : model_entry(type).parameters)
    if (p.name == name) return p.default_value;
  TANDEM_FAIL(Value, "model type {} has no parameter '{}'", type, name);
}

}  // namespace tandem::nn::config
