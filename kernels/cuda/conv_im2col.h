// The CUDA backend's im2col + GEMM convolution (kernels/cuda/conv.cu), callable by name: the SIM
// build registers it as its conv2d; the GPU build registers cuDNN (conv_cudnn.cpp), which falls back
// to these for empty shapes and under TANDEM_CONV=im2col.
#pragma once
#include "runtime/backend/conv.h"
#include "runtime/backend/cuda/platform.cuh"

namespace tandem::TANDEM_CUDA_NS {

void conv2d_forward_im2col(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                           const kernels::Conv2dGeometry& g);
void conv2d_backward_input_im2col(const Tensor& dy, const Tensor& w, Tensor& dx, const kernels::Conv2dGeometry& g);
void conv2d_backward_weight_im2col(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor& db,
                                   const kernels::Conv2dGeometry& g);

}  // namespace tandem::TANDEM_CUDA_NS
