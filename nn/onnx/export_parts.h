// What the exporters of tandem's models share: tandem's layers as ONNX nodes (a linear, a LayerNorm,
// both GELUs), and the two exporters that onnx_export.cpp picks between. Internal.
#pragma once
#include <string>

#include "nn/gpt.h"
#include "nn/layers/sequential.h"
#include "nn/onnx/onnx_builder.h"

namespace tandem::nn::onnx::detail {

// y = x W^T + b for x of rank `rank` (weight [out, in] as Linear keeps it): Gemm(transB) for a
// matrix, as torch.onnx writes nn.Linear; MatMul by the transposed weight then Add above that.
// `bias` "" for none. Initializer names, already added.
std::string linear(GraphBuilder& b, const std::string& x, int64_t rank, const std::string& weight,
                   const std::string& bias);
// LayerNormalization over the last `dims` dims.
std::string layer_norm(GraphBuilder& b, const std::string& x, const std::string& scale, const std::string& bias,
                       int64_t dims, double eps);
// GELU: exact, as x * 0.5 * (1 + erf(x / sqrt 2)) in the order nn.GELU() exports it (the pattern
// tandem's importer runs as one gelu); tanh, as 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
std::string gelu(GraphBuilder& b, const std::string& x, bool tanh_approximation);

// The graph of a Sequential (input "x", output "y") and of a GPT (input "ids", output "logits").
void export_sequential(const Sequential& model, GraphBuilder& b);
void export_gpt(const GPT& model, GraphBuilder& b);

}  // namespace tandem::nn::onnx::detail
