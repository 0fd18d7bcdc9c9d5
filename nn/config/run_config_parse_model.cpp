// The model block of a run config: its type, and each type's keys (mlp, cnn, sequential and its
// layers, gpt, onnx, a registered model's numbers) onto the config's model.
#include <fmt/format.h>

#include "nn/config/layer_specs.h"
#include "nn/config/yaml_block.h"
#include "nn/model_registry.h"
#include "runtime/spelling.h"

namespace tandem::nn::config::yaml {

namespace {

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

}  // namespace

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

}  // namespace tandem::nn::config::yaml
