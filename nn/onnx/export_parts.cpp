// Layers shared by the exporters, written as the ONNX nodes that compute them.
#include "nn/onnx/export_parts.h"

#include <cmath>

namespace tandem::nn::onnx::detail {

std::string linear(GraphBuilder& b, const std::string& x, int64_t rank, const std::string& weight,
                   const std::string& bias) {
  if (rank == 2) {
    std::vector<std::string> in{x, weight};
    if (!bias.empty()) in.push_back(bias);
    return b.op("Gemm", in, {Attr::integer("transB", 1)});
  }
  // Gemm takes matrices only: [..., in] @ W^T [in, out]. The transpose of an initializer is folded
  // by onnxruntime; tandem's importer runs it as a view.
  const std::string wt = b.op("Transpose", {weight}, {Attr::integers("perm", {1, 0})});
  const std::string y = b.op("MatMul", {x, wt});
  return bias.empty() ? y : b.op("Add", {y, bias});
}

std::string layer_norm(GraphBuilder& b, const std::string& x, const std::string& scale, const std::string& bias,
                       int64_t dims, double eps) {
  return b.op("LayerNormalization", {x, scale, bias}, {Attr::integer("axis", -dims), Attr::real("epsilon", eps)});
}

std::string gelu(GraphBuilder& b, const std::string& x, bool tanh_approximation) {
  if (!tanh_approximation) {
    // Div, Erf, Add, Mul by x, Mul by 0.5: the chain OnnxModel::fuse_gelu recognises.
    const std::string e = b.op("Erf", {b.op("Div", {x, b.constant_scalar(static_cast<float>(std::sqrt(2.0)))})});
    const std::string s = b.op("Add", {e, b.constant_scalar(1.0f)});
    return b.op("Mul", {b.op("Mul", {x, s}), b.constant_scalar(0.5f)});
  }
  // The constants of tandem's kernels (kernels/cpu/gelu.h).
  const std::string cube = b.op("Mul", {b.op("Mul", {x, x}), x});
  const std::string inner = b.op("Add", {x, b.op("Mul", {cube, b.constant_scalar(0.044715f)})});
  const std::string t = b.op("Tanh", {b.op("Mul", {inner, b.constant_scalar(0.79788456080286535588f)})});
  const std::string half_x = b.op("Mul", {x, b.constant_scalar(0.5f)});
  return b.op("Mul", {half_x, b.op("Add", {t, b.constant_scalar(1.0f)})});
}

}  // namespace tandem::nn::onnx::detail
