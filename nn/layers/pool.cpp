// Pooling modules over ops::max_pool2d / ops::avg_pool2d.
#include "nn/layers/pool.h"

#include "runtime/ops/conv.h"
#include "runtime/ops/pool.h"

namespace tandem::nn {

Tensor MaxPool2d::forward(const Tensor& x) { return ops::max_pool2d(x, {k_, k_}, {stride_, stride_}, {pad_, pad_}); }
Tensor AvgPool2d::forward(const Tensor& x) { return ops::avg_pool2d(x, {k_, k_}, {stride_, stride_}, {pad_, pad_}); }

}  // namespace tandem::nn
