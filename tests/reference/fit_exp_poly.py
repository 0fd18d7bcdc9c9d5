"""Coefficients of the degree-6 polynomial for 2^f, |f| <= 1/2, in kernels/cpu/gelu_avx512.cpp.

A least-squares fit of 2^f's relative error on 4,000 Chebyshev nodes (close to the minimax fit),
rounded to f32. Prints the coefficients (f^0 first) and the fit's largest relative error over
200,001 points, in f64 (the f32 evaluation adds its own rounding, which the C++ test bounds).
    /usr/bin/python3 tests/reference/fit_exp_poly.py
"""
import numpy as np

DEGREE, NODES = 6, 4000
f = np.cos(np.pi * (np.arange(NODES) + 0.5) / NODES) * 0.5
w = 2.0 ** -f  # weights: relative error
coef, *_ = np.linalg.lstsq(np.vander(f, DEGREE + 1, increasing=True) * w[:, None], 2.0 ** f * w, rcond=None)
coef = coef.astype(np.float32)
grid = np.linspace(-0.5, 0.5, 200001)
err = np.max(np.abs(np.polyval(coef[::-1].astype(np.float64), grid) / 2.0 ** grid - 1))
for c in coef:
    print(f"{c:.9g}f")
print(f"max relative error {err:.3g}")
