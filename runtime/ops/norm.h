// Normalisation: batch norm (with its fused epilogue and the building blocks SyncBatchNorm uses), layer norm.
#pragma once
#include <array>
#include <optional>

#include "runtime/tensor.h"

namespace tandem::ops {

// What batch_norm applies to its output after normalising, in this order: relu, then
// max_pool2d(x, pool_kernel, pool_stride, pool_padding). The result equals the separate ops bit for
// bit; in training on CPU they run inside batch norm's kernels, plane by plane while each plane is in
// cache, and the backward recomputes relu's mask from x instead of keeping the intermediate tensors.
struct BatchNormEpilogue {
  bool relu = false;
  bool max_pool = false;
  std::array<int64_t, 2> pool_kernel{{1, 1}}, pool_stride{{0, 0}}, pool_padding{{0, 0}};
};

// The epilogue as separate ops on a batch norm's output y (what batch_norm runs where it cannot fuse).
Tensor batch_norm_epilogue(const Tensor& y, const BatchNormEpilogue& epilogue);

// x [N, C, ...]. training: normalise with batch statistics and update running_mean/var in place
// (momentum, unbiased variance, as PyTorch); eval: use the running statistics. weight/bias [C] optional.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum = 0.1, double eps = 1e-5,
                  const BatchNormEpilogue& epilogue = {});
// Normalises over the last `normalized_dims` dimensions; weight/bias have those dims' shape (optional).
// out_dtype: the output's dtype when not the (autocast) input's: f16 or bf16 for an f32 input, for a
// LayerNorm that feeds a low-precision op (computed in f32, rounded once; its gradient comes back in
// that dtype and reaches x in x's).
Tensor layer_norm(const Tensor& x, int64_t normalized_dims, const Tensor& weight, const Tensor& bias,
                  double eps = 1e-5, std::optional<DType> out_dtype = std::nullopt);

// x + branch, and the LayerNorm of that sum, in one pass: a pre-LayerNorm transformer's residual
// add and the LayerNorm after it. branch has x's shape, and x's dtype or (an autocast branch into
// an f32 residual stream) f16/bf16. sum has x's dtype; y is layer_norm(sum, ...). The values of
// add(x, branch) and then layer_norm, bit for bit, gradients included: in backward the sum's
// gradient from its other consumers and the LayerNorm's dx are added as the kernel writes dx,
// and the branch's narrower gradient is rounded from it in the same pass (no [M, D] dx, add or
// cast of their own). Other dtypes, shapes or autocast casts run the two ops.
struct AddLayerNorm {
  Tensor sum, y;
};
AddLayerNorm add_layer_norm(const Tensor& x, const Tensor& branch, int64_t normalized_dims, const Tensor& weight,
                            const Tensor& bias, double eps = 1e-5, std::optional<DType> out_dtype = std::nullopt);

// ---- Batch-norm building blocks (not differentiable: they record nothing), for SyncBatchNorm,
// which all-reduces between them. x is [N, C] or [N, C, H, W]; "stat" tensors are [C] of
// batch_norm_stat_dtype(x.dtype()) (f64 for f64, else f32). batch_norm composes them as
//   s = batch_norm_stats(x); invstd = batch_norm_invstd(s.mean, s.m2, s.count, ...);
//   y = batch_norm_apply(x, s.mean, invstd, weight, bias);
//   backward: r = batch_norm_backward_reduce(dy, x, s.mean, invstd, weight, bias);
//   dx = batch_norm_backward_elemt(dy, x, s.mean, invstd, weight, r.sum_dy, r.sum_dy_xmu, s.count).
// SyncBN merges the per-rank (count, mean, m2) with welford_merge (runtime/backend/common/welford.h) before
// batch_norm_invstd, and all-reduces sum_dy / sum_dy_xmu before batch_norm_backward_elemt, passing the
// total count.
DType batch_norm_stat_dtype(DType x_dtype);

struct BatchNormStats {
  Tensor mean;        // [C] stat dtype
  Tensor m2;          // [C] stat dtype: sum over the channel of (x - mean)^2
  int64_t count = 0;  // values per channel: N * H * W
};
BatchNormStats batch_norm_stats(const Tensor& x);
// invstd [C] = 1 / sqrt(m2 / count + eps). When running_mean/running_var are defined, also updates
// them in place with momentum and the unbiased variance m2 / (count - 1).
Tensor batch_norm_invstd(const Tensor& mean, const Tensor& m2, int64_t count, double eps,
                         Tensor running_mean = Tensor(), Tensor running_var = Tensor(), double momentum = 0.1);
// y = (x - mean) * invstd * weight + bias (weight/bias optional).
Tensor batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                        const Tensor& bias);
struct BatchNormBackwardSums {
  Tensor sum_dy;       // [C] stat dtype: sum(dy)
  Tensor sum_dy_xmu;   // [C] stat dtype: sum(dy * (x - mean))
  Tensor grad_weight;  // [C] weight's dtype = sum_dy_xmu * invstd; defined when `weight` is
  Tensor grad_bias;    // [C] bias's dtype = sum_dy; defined when `bias` is
};
BatchNormBackwardSums batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                                 const Tensor& invstd, const Tensor& weight, const Tensor& bias);
// dx from the (all-reduced) sums and the total count per channel; with sum_dy/sum_dy_xmu undefined
// the statistics are treated as constants (eval): dx = dy * invstd * weight.
Tensor batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                 const Tensor& weight, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                                 int64_t count);

}  // namespace tandem::ops
