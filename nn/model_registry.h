// The model registry: one entry per model type, declared in the type's own file. Everything that
// offers a choice of models reads it: tandem-train's --model, a run config's model.type (YAML, the C
// and Fortran API), tandem-serve's JobRequest.model, the FLOP counts of the benchmarks. Adding a model
// is its file (an entry made with TANDEM_REGISTER_MODEL) and its test.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "runtime/random.h"

namespace tandem::nn {

namespace config {
struct ModelConfig;
}

// What one sample of the model's input is.
enum class ModelInput {
  Flat,   // features [N, F] (Fashion-MNIST: 784 pixels)
  Image,  // images [N, C, H, W] (Fashion-MNIST: [N, 1, 28, 28])
  Tokens  // token ids [N, T] (int64)
};

// One number under model.parameters of a run config (a generic model's whole schema).
struct ModelParameter {
  std::string name;
  double default_value = 0;
  double min = 0, max = 1e12;  // inclusive
  bool integer = true;
  std::string doc;
};

struct ModelEntry {
  std::string type;     // model.type and --model, lower-case
  std::string summary;  // one line for --help and the docs
  ModelInput input = ModelInput::Flat;
  // What tandem-train trains it on: "fashion-mnist" (784 pixels, 10 classes), "text" (next-token
  // prediction) or "" (only through the library: the C API, the user's own program).
  std::string dataset;
  // model.parameters of a generic model (config::ModelConfig::values). mlp, cnn, sequential and gpt
  // keep their own fields and YAML readers (nn/config) and leave this empty.
  std::vector<ModelParameter> parameters;
  // The model of a checked config, its weights drawn from gen.
  std::function<std::shared_ptr<Module>(const config::ModelConfig&, Generator&)> build;
  // Forward + backward FLOPs of one sample (nn/models.h counts them); empty where unknown.
  std::function<double(const config::ModelConfig&)> flops_per_sample;
  // The input of one configured model where the type alone does not say (onnx: the file's first
  // input); empty: `input`.
  std::function<ModelInput(const config::ModelConfig&)> input_of;
  // tandem-train's shape when no run config describes one (mlp: 784-512-512-10); empty: the
  // parameters' defaults.
  std::function<void(config::ModelConfig&)> app_defaults;
};

// What the configured model takes (ModelEntry::input_of, else the entry's input).
ModelInput model_input(const config::ModelConfig& model);

// Every registered type, in the order of registration.
const std::vector<ModelEntry>& model_entries();
// The entry of `type` (any case); throws ValueError naming the known types ("did you mean ...").
const ModelEntry& model_entry(const std::string& type);
const ModelEntry* find_model_entry(const std::string& type);
// The types tandem-train can train on `dataset` ("fashion-mnist", "text"), or all types ("").
std::vector<std::string> model_types(const std::string& dataset = "");
// "unknown model type 'x' (expected a, b or c); did you mean b?": the message for a type not registered.
std::string unknown_model_type(const std::string& type);
// Adds an entry; throws for a duplicate type or an entry without a builder.
void register_model(ModelEntry entry);

// tandem-train's config of a registered type: its app_defaults, else its parameters' defaults.
config::ModelConfig default_model_config(const std::string& type);

namespace detail {
struct ModelRegistration {
  explicit ModelRegistration(ModelEntry (*make)()) { register_model(make()); }
};
}  // namespace detail

}  // namespace tandem::nn

// In a model's .cpp file (the library's, or a program's own): registers the entry that `make_entry`
// (a function returning nn::ModelEntry) describes, when the library or program loads.
#define TANDEM_REGISTER_MODEL(make_entry) \
  static const ::tandem::nn::detail::ModelRegistration tandem_model_registration_##make_entry{&make_entry}
