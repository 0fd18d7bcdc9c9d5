// Multi-tensor kernels (Apex's multi_tensor_apply pattern): one call processes a list of tensors,
// split into fixed-size chunks that run in parallel (one CUDA block or one OpenMP iteration per
// chunk). Used by the GradScaler's fused unscale + inf/nan check and by the fused optimizers, with
// the unscale and the clip folded into the update as one gradient factor.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/backend/common/adam_step.h"
#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// Elements per chunk (Apex uses 65536).
constexpr int64_t kMultiTensorChunk = 65536;

struct TensorChunk {
  int32_t tensor;  // index into the list
  int64_t start;   // first element
  int64_t length;
};

// The chunks of a list of tensors, tensor by tensor, each split into kMultiTensorChunk pieces.
inline std::vector<TensorChunk> make_chunks(const std::vector<Tensor>& tensors, int64_t chunk = kMultiTensorChunk) {
  std::vector<TensorChunk> out;
  for (size_t t = 0; t < tensors.size(); ++t)
    for (int64_t s = 0; s < tensors[t].numel(); s += chunk)
      out.push_back({static_cast<int32_t>(t), s, std::min(chunk, tensors[t].numel() - s)});
  return out;
}

// found_inf: a one-element f32 tensor on the grads' device, set to 1 (never cleared) when any
// element is inf or nan. Each kernel checks every tensor of the list in the same pass.

// g *= inv_scale in place (in the math type of g's dtype), with the inf/nan check on the values read.
TANDEM_KERNEL(multi_tensor_unscale, void(const std::vector<Tensor>& grads, double inv_scale, Tensor& found_inf));
// Every element of every tensor of the list set to zero bits (an optimizer's zero_grad: one launch
// for all the gradients instead of one fill each).
TANDEM_KERNEL(multi_tensor_zero, void(const std::vector<Tensor>& tensors));
// Read-only pass: the inf/nan check and the sum of squares (f64, fixed chunk order) of the list.
TANDEM_KERNEL(multi_tensor_sum_squares_check,
              double(const std::vector<Tensor>& grads, Tensor& found_inf));

// One fused optimizer step over a list. For each i: g = grads[i] * grad_factor (the unscale and
// clip coefficient), the update in the math type runs on params[i] with its state; where
// model_params is non-empty, params are the f32 master weights and model_params[i] (f16/bf16)
// receives the rounded result. Grads have model_params' dtype then, params' otherwise.
// The step is skipped entirely when found_inf (if defined) holds a nonzero value.
struct MultiTensorAdamArgs {
  std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, model_params;
  std::vector<AdamHyper> hypers;  // per tensor (lr, weight decay and bias corrections may differ)
  double grad_factor = 1.0;
  Tensor found_inf;
};
struct MultiTensorSgdArgs {
  std::vector<Tensor> params, grads, momentum_bufs, model_params;  // bufs empty when momentum == 0
  std::vector<SgdHyper> hypers;
  double grad_factor = 1.0;
  Tensor found_inf;
};
TANDEM_KERNEL(multi_tensor_adam, void(const MultiTensorAdamArgs& args));
TANDEM_KERNEL(multi_tensor_sgd, void(const MultiTensorSgdArgs& args));

// dst[i] = src[i] converted, for each pair (equal numel, one device; every src of one floating dtype,
// every dst of another). Autocast's casts of a model's parameters: one launch instead of one each.
TANDEM_KERNEL(multi_tensor_cast, void(const std::vector<Tensor>& src, const std::vector<Tensor>& dst));
void check_multi_tensor_cast(const std::vector<Tensor>& src, const std::vector<Tensor>& dst);

// Checks shared by the backends: lists of equal length, matching numel, one device.
void check_multi_tensor_lists(const char* what, const std::vector<Tensor>& params,
                              const std::vector<const std::vector<Tensor>*>& others, size_t hypers);

}  // namespace tandem::kernels
