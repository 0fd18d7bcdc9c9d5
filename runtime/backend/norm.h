// Normalisation kernel tables. Batch norm is split into the stages of PyTorch's CUDA path so that
// SyncBatchNorm can all-reduce between them: stats -> (merge across ranks) -> finalize -> apply;
// backward: reduce -> (all-reduce sum_dy, sum_dy_xmu) -> elemt.
//
// Conventions for every table here: tensors contiguous on one device; x, y, dx, dy share a floating
// dtype. "stat" tensors (mean, m2, invstd, rstd, sum_dy, sum_dy_xmu) have the statistics dtype:
// f64 for f64 input, f32 otherwise (f16/bf16 compute in f32). Parameters (weight, bias, running
// stats, their gradients) have x's dtype or the statistics dtype. An undefined optional tensor means
// "absent" (weight: 1, bias: 0, output: not computed). Outputs are fully overwritten.
#pragma once
#include <cstdint>

#include "runtime/backend/pool.h"
#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// x is [N, C] or [N, C, H, W] (any rank >= 2: dims after C are flattened); per channel c the count
// is N * (numel / (N * C)).

// (1) Per-channel statistics of x: mean [C] and M2 [C] = sum((x - mean)^2) (Welford / Chan merge,
// kernels/common/welford.h), both stat dtype.
TANDEM_KERNEL(batch_norm_stats, void(const Tensor& x, Tensor& mean, Tensor& m2));
// (1b) invstd [C] = 1 / sqrt(m2 / count + eps). When running_mean/running_var are defined, also
// updates them in place: running_mean = (1 - momentum) running_mean + momentum mean,
// running_var = (1 - momentum) running_var + momentum m2 / (count - 1) (unbiased, as PyTorch).
// Eval: pass (running_mean, running_var, count = 1) as (mean, m2) with undefined running tensors.
TANDEM_KERNEL(batch_norm_finalize, void(const Tensor& mean, const Tensor& m2, int64_t count, double eps,
                                        double momentum, Tensor& invstd, Tensor& running_mean,
                                        Tensor& running_var));
// (2) y = (x - mean[c]) * invstd[c] * weight[c] + bias[c]
TANDEM_KERNEL(batch_norm_apply, void(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                     const Tensor& weight, const Tensor& bias, Tensor& y));
// (3) Backward reduction per channel: sum_dy = sum(dy), sum_dy_xmu = sum(dy * (x - mean));
// grad_weight = sum_dy_xmu * invstd and grad_bias = sum_dy when those are defined.
TANDEM_KERNEL(batch_norm_backward_reduce,
              void(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                   Tensor& sum_dy, Tensor& sum_dy_xmu, Tensor& grad_weight, Tensor& grad_bias));
// (4) dx = (dy - sum_dy / count - (x - mean) * invstd^2 * sum_dy_xmu / count) * invstd * weight,
// count being the total (all ranks') count per channel. With sum_dy and sum_dy_xmu undefined the
// statistics are constants (eval): dx = dy * invstd * weight.
TANDEM_KERNEL(batch_norm_backward_elemt,
              void(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                   const Tensor& weight, const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count,
                   Tensor& dx));

// Optional fused training paths (a backend may leave them empty; ops::batch_norm then composes the
// stages above). Each channel's data is visited twice back to back, so on CPU the second pass hits
// the cache. Forward: mean, m2 and invstd as stages (1) and (1b) compute them (running stats are not
// touched) and y as stage (2). Backward: dx (when defined) as stage (4) with the batch's own sums;
// grad_weight / grad_bias as stage (3).
// The epilogue fuses what follows a BatchNorm in the cnn: relu, then a max pool, applied to each
// [h, w] plane right after it is normalised (still in cache). Forward: y = max_pool(relu(stage (2))),
// argmax as max_pool2d_forward gives it, except ~i where relu made the pooled output zero. Backward:
// dy (pooled shape) is scattered through argmax as max_pool2d_backward does (dropping ~i), or without
// a pool masked where relu's output is not positive (the mask recomputed from x, weight and bias),
// as relu's backward does; then stages (3) and (4). So a BatchNorm-ReLU-MaxPool block reads and
// writes its activations once each way, not three times.
// Dtypes: x, y, dy and dx share one. With `widened` (autocast's batch norm of a 16-bit activation)
// that one is f16 or bf16, and the kernels compute what the f32 kernels give for x and dy cast to
// f32, rounding y and dx to the 16-bit dtype once: the cast, the f32 op and the cast back, bit for
// bit, without the casts' whole-tensor passes (each plane is widened or rounded while in cache).
struct BatchNormEpilogue {
  bool relu = false;
  bool max_pool = false;  // x is [N, C, H, W]; y, dy and argmax are [N, C, Ho, Wo] by `pool`
  Pool2dGeometry pool;
  bool widened = false;
};
TANDEM_KERNEL(batch_norm_forward_fused,
              void(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const BatchNormEpilogue& epi,
                   Tensor& y, Tensor& argmax, Tensor& mean, Tensor& m2, Tensor& invstd));
TANDEM_KERNEL(batch_norm_backward_fused,
              void(const Tensor& dy, const Tensor& argmax, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                   const Tensor& weight, const Tensor& bias, const BatchNormEpilogue& epi, Tensor& dx,
                   Tensor& grad_weight, Tensor& grad_bias));

// Layer norm: x viewed as [M, D] (D = the normalised trailing dims); weight/bias [D] optional.
// y = (x - mean[m]) * rstd[m] * weight + bias, mean/rstd [M] stat dtype (saved for backward),
// rstd = 1 / sqrt(biased var + eps). y has x's dtype, or f16/bf16 for f32 x (a LayerNorm feeding a
// low-precision op: computed in f32, rounded once on store).
TANDEM_KERNEL(layer_norm_forward, void(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                       Tensor& y, Tensor& mean, Tensor& rstd));
// A residual add and the LayerNorm of its result in one pass (a pre-LayerNorm transformer's
// x + branch, then the next LayerNorm): sum = x + branch, then layer_norm_forward of sum into y.
// branch has x's shape and dtype, or f16/bf16 for f32 x (an autocast branch, widened as it is
// read); sum has x's dtype. The same values as the add (one rounding in x's dtype) and then
// layer_norm_forward, bit for bit, with one read of the sum fewer.
TANDEM_KERNEL(add_layer_norm_forward,
              void(const Tensor& x, const Tensor& branch, const Tensor& weight, const Tensor& bias, double eps,
                   Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd));
// Which of layer_norm_backward's outputs are added to instead of written (gradient_sink): dx, the
// input's gradient summed so far (x + f(LayerNorm(x)), a residual stream: no dx tensor and no pass
// adding it; each element is summed in the statistics' dtype and rounded once), and the parameters'
// (their .grad, which must then have the statistics' dtype: f64 for f64 x, else f32).
// add_layer_norm's backward: dx = `residual` + the computed dx (the sum's gradient from its other
// consumers, x's dtype; not with `dx`), element by element as a separate add would, and, when
// `dx_narrow` is defined (f16/bf16 for f32 x), dx rounded to its dtype written there too: the
// branch's gradient, as a cast of dx would make it.
struct LayerNormGradAdds {
  bool dx = false;
  bool params = false;
  Tensor residual;
  Tensor dx_narrow;
};

// dx [M, D] in x's dtype, dweight [D], dbias [D]: each computed only when defined; dy has y's dtype.
// dweight/dbias sum over M in a fixed order (deterministic).
TANDEM_KERNEL(layer_norm_backward,
              void(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                   const Tensor& weight, Tensor& dx, Tensor& dweight, Tensor& dbias, LayerNormGradAdds adds));

// Whether a LayerNorm of x's dtype may take or give dtype y (its output y or dy, add_layer_norm's
// branch): x's own, or f16/bf16 for f32.
constexpr bool layer_norm_dtype_fits(DType x, DType y) { return y == x || (x == DType::f32 && is_low_precision(y)); }
// Throws unless y (or dy) may have dtype y for a LayerNorm of x (layer_norm_dtype_fits).
void check_layer_norm_output_dtype(const char* what, DType x, DType y);
// Throws unless add_layer_norm_forward's branch and sum fit x (see there).
void check_add_layer_norm(const char* what, const Tensor& x, const Tensor& branch, const Tensor& sum);
// Throws unless LayerNormGradAdds' residual and dx_narrow fit x and dx (see there).
void check_layer_norm_dx_extras(const char* what, const Tensor& x, const Tensor& dx, const LayerNormGradAdds& adds);

}  // namespace tandem::kernels
