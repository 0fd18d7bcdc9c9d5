// BatchNorm layers over ops::batch_norm; num_batches_tracked is counted on the buffer's device.
#include "nn/layers/batch_norm.h"

#include "runtime/autograd.h"
#include "runtime/backend/core.h"
#include "runtime/ops/norm.h"

namespace tandem::nn {

BatchNormBase::BatchNormBase(int64_t num_features, double eps, double momentum, bool affine)
    : c_(num_features), eps_(eps), momentum_(momentum), affine_(affine) {
  TANDEM_CHECK(num_features > 0, "BatchNorm: num_features {} must be > 0", num_features);
  if (affine_) {
    register_parameter("weight", Tensor::ones({c_}));
    register_parameter("bias", Tensor::zeros({c_}));
  }
  register_buffer("running_mean", Tensor::zeros({c_}));
  register_buffer("running_var", Tensor::ones({c_}));
  register_buffer("num_batches_tracked", Tensor::zeros({}, DType::i64));
}

Tensor BatchNormBase::forward(const Tensor& x) {
  TANDEM_CHECK(accepts_dim(x.dim()) && x.size(1) == c_, "{}({}): input has shape {}; expected {} with C = {}",
               type_name(), c_, shape_str(x.shape()), expected_shape(), c_);
  Tensor w = affine_ ? param("weight") : Tensor(), b = affine_ ? param("bias") : Tensor();
  Tensor y = ops::batch_norm(x, w, b, buffer("running_mean"), buffer("running_var"), is_training(), momentum_, eps_,
                             epilogue_);
  if (is_training()) {
    NoGradGuard no_grad;
    Tensor& count = buffer("num_batches_tracked");
    kernels::axpy(count.device())(count, Tensor::ones({}, DType::i64, count.device()), 1.0);
  }
  return y;
}

std::shared_ptr<Module> BatchNorm1d::clone() const {
  auto copy = std::make_shared<BatchNorm1d>(*this);
  copy->deep_copy_state();
  return copy;
}

std::shared_ptr<Module> BatchNorm2d::clone() const {
  auto copy = std::make_shared<BatchNorm2d>(*this);
  copy->deep_copy_state();
  return copy;
}

}  // namespace tandem::nn
