// tandem's own models as ONNX files (opset 17), for onnxruntime or any other runtime, and for
// tandem's importer (nn::onnx::OnnxModel reads them back with the same parameter names).
//
// - A Sequential of nn/layers (the mlp, the cnn, a run config's `sequential` stack): Linear, Conv2d,
//   BatchNorm1d/2d (with a fused ReLU/MaxPool2d epilogue written out as its nodes), ReLU, GELU,
//   Dropout, MaxPool2d, AvgPool2d, Flatten, LayerNorm, Embedding, Identity, nested Sequentials.
// - A GPT: token ids [batch, sequence] (sequence 1..context) -> logits [batch, sequence, vocab].
// - An OnnxModel: its own file with the trained weights (OnnxModel::save_onnx).
// The graph is the model's forward in plain ONNX ops (fused tandem ops written as what they compute);
// BatchNormalization and Dropout are the standard nodes, which other runtimes run in inference form
// (running statistics, no dropout) and tandem's importer per train()/eval(). Initializers carry the
// state_dict names ("0.weight", "1.running_mean", "h.0.attn.c_attn.weight"); dim 0 is "batch".
#pragma once
#include <string>

#include "nn/module.h"

namespace tandem::nn::onnx {

// The model's ONNX file as bytes. NotSupportedError naming the type for a model (or a layer inside a
// Sequential) the exporter does not write.
std::string export_onnx(const Module& model);
// The same, written atomically to `path` (IOError naming it where it cannot be written); an
// OnnxModel writes its own file back.
void save_onnx(const Module& model, const std::string& path);

}  // namespace tandem::nn::onnx
