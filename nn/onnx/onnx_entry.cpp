// The model registry's onnx entry: model: {type: onnx, parameters: {filename: FILE, frozen: [...]}}
// (TorchFort's layout for a model file) in a run config, for the C and Fortran API and programs.
#include "nn/config/run_config.h"
#include "nn/model_registry.h"
#include "nn/onnx/onnx_graph.h"
#include "nn/onnx/onnx_model.h"
#include "runtime/error.h"

namespace tandem::nn {

namespace {

ModelEntry onnx_entry() {
  ModelEntry e;
  e.type = "onnx";
  e.summary = "a model exported to ONNX (torch.onnx.export): parameters.filename, parameters.frozen";
  e.input = ModelInput::Flat;  // whatever the graph takes; tandem-train does not offer it yet
  e.dataset = "";
  // Images where the first input is [N, C, H, W], token ids where it is integer, else features.
  e.input_of = [](const config::ModelConfig& m) {
    TANDEM_CHECK(!m.filename.empty(), "model type onnx needs parameters.filename (the .onnx file)");
    const onnx::Graph g = onnx::read_graph(m.filename);
    TANDEM_CHECK(!g.inputs.empty(), "{}: the model has no inputs", m.filename);
    const onnx::ValueInfo& x = g.inputs.front();
    if (!is_floating(x.dtype)) return ModelInput::Tokens;
    return x.dims.size() == 4 ? ModelInput::Image : ModelInput::Flat;
  };
  // The generator is not used: the weights are the file's.
  e.build = [](const config::ModelConfig& m, Generator&) -> std::shared_ptr<Module> {
    TANDEM_CHECK(!m.filename.empty(), "model type onnx needs parameters.filename (the .onnx file)");
    onnx::ImportOptions o;
    o.frozen = m.frozen;
    return std::make_shared<onnx::OnnxModel>(m.filename, o);
  };
  return e;
}

}  // namespace

TANDEM_REGISTER_MODEL(onnx_entry);

}  // namespace tandem::nn
