// export_onnx and save_onnx: which exporter writes a model, and the file.
#include "nn/onnx/onnx_export.h"

#include "nn/onnx/export_parts.h"
#include "nn/onnx/onnx_model.h"
#include "runtime/error.h"
#include "runtime/serialization/atomic_file.h"

namespace tandem::nn::onnx {

std::string export_onnx(const Module& model) {
  GraphBuilder b("model " + model.type_name());
  if (auto* gpt = dynamic_cast<const GPT*>(&model)) {
    detail::export_gpt(*gpt, b);
  } else if (auto* seq = dynamic_cast<const Sequential*>(&model)) {
    detail::export_sequential(*seq, b);
  } else {
    TANDEM_FAIL(NotSupported, "model {}: ONNX export writes a Sequential of tandem's layers (mlp, cnn, sequential), "
                "a GPT or an imported ONNX model", model.type_name());
  }
  return b.finish();
}

void save_onnx(const Module& model, const std::string& path) {
  if (auto* imported = dynamic_cast<const OnnxModel*>(&model)) {
    imported->save_onnx(path);  // its own graph, with the trained initializers
    return;
  }
  serialization::write_file_atomic(path, export_onnx(model));
}

}  // namespace tandem::nn::onnx
