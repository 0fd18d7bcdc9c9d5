// Differentiable elementwise ops with NumPy/PyTorch broadcasting, scalar ops and activations.
#pragma once
#include "runtime/tensor.h"

namespace tandem::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor rsub(double s, const Tensor& a);  // s - a
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);

Tensor relu(const Tensor& a);
Tensor gelu(const Tensor& a, bool tanh_approximation = false);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);

// cond ? a : b elementwise, the three broadcast together (NumPy): cond u8 (nonzero is true), a and b
// of one dtype and device. A select: the branch not taken never leaks into the result or its gradient
// (masked_fill's -inf, torch.where). Gradients: g where cond holds to a, elsewhere to b; none to cond.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace tandem::ops

namespace tandem {
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator+(const Tensor& a, double s) { return ops::add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return ops::add(a, -s); }
inline Tensor operator*(const Tensor& a, double s) { return ops::mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return ops::mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return ops::mul(a, 1.0 / s); }
inline Tensor operator-(const Tensor& a) { return ops::neg(a); }
}  // namespace tandem
