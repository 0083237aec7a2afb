// Radial mode 3 (opt-in, float kernels): the radial MLP of a layer, R(d) = W2 . silu(W1 . B(d) + b1)
// (docs/model.md, without the envelope, which the kernels keep analytic), tabulated as cubic Hermite pieces on
// NI uniform intervals of [0, r_c], so that the fused kernels read each chunk's radial outputs from the table (one
// 16-byte load and a Horner step per output) instead of evaluating the hidden layer and the [2PC x H] GEMM.
// The pieces match R and dR/dd of the MLP at every node (evaluated here in double), so the interpolant is C1 and
// its own derivative gives the forces: energy and forces stay consistent. Accuracy for the bundled water model
// (python/tools/radial_table_error.py, d in [0.5 A, r_c]): max |error| / max |R| 1.9e-8 at 1,024 intervals,
// of dR/dd 1.8e-6 (512: 3.0e-7 and 1.4e-5). Opt-in (ModelOptions::radial_mode = 3): on the H200 it was no faster
// than the tensor-core GEMM (radial mode 2); the figures are in docs/performance.md.
//
// API (namespace batmobile::kernels):
//   radial_table_coefficients(NB, H, ncol, r_c, W1, b1, W2, NI)   host, double: NI * ncol * 4 coefficients,
//       [(k * ncol + col) * 4 + j] = c_j of interval k, output column col (W2's row col), with t = d / h - k in
//       [0, 1], h = r_c / NI:  R = c0 + t (c1 + t (c2 + t c3)),  dR/dd = (c1 + t (2 c2 + 3 t c3)) / h.
//       W1 (H, NB), b1 (H), W2 (ncol, H), row-major as in the model file.
//   radial_table_locate(d, inv_h, NI, &t)   interval k of distance d (returned) and t in [0, 1] (d clamped to the table)
//   radial_table_piece(c, t, inv_h, &dR)    R and dR/dd of one piece from its coefficients c[0..3]
//   radial_table_eval(coef, ncol, NI, inv_h, col, d, &dR)   both for column col of a coefficient array.
#pragma once
#include <Kokkos_Core.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace batmobile {
namespace kernels {

inline std::vector<double> radial_table_coefficients(int NB, int H, int ncol, double r_c,
                                                     const std::vector<double>& W1, const std::vector<double>& b1,
                                                     const std::vector<double>& W2, int NI) {
  if (NI < 1 || NB < 1 || H < 1 || ncol < 1 || !(r_c > 0))
    throw std::invalid_argument("radial_table_coefficients: bad sizes");
  if (W1.size() != size_t(H) * NB || b1.size() != size_t(H) || W2.size() != size_t(ncol) * H)
    throw std::invalid_argument("radial_table_coefficients: W1, b1, W2 sizes");
  const double pi = 3.14159265358979323846, pref = std::sqrt(2.0 / r_c), h = r_c / NI;
  // R and dR/dd of every column at the nodes d_k = k h
  std::vector<double> val(size_t(NI + 1) * ncol), der(size_t(NI + 1) * ncol);
  std::vector<double> B(NB), dB(NB), s(H), ds(H);
  for (int k = 0; k <= NI; ++k) {
    const double d = k * h;
    for (int n = 0; n < NB; ++n) {
      const double kn = (n + 1) * pi / r_c;
      if (d > 0) {
        B[n] = pref * std::sin(kn * d) / d;
        dB[n] = pref * (kn * d * std::cos(kn * d) - std::sin(kn * d)) / (d * d);
      } else {  // sin(kn d) / d -> kn, its derivative -> 0
        B[n] = pref * kn;
        dB[n] = 0;
      }
    }
    for (int u = 0; u < H; ++u) {
      double a = b1[u], da = 0;
      for (int n = 0; n < NB; ++n) {
        a += W1[size_t(u) * NB + n] * B[n];
        da += W1[size_t(u) * NB + n] * dB[n];
      }
      const double sig = 1.0 / (1.0 + std::exp(-a));
      s[u] = a * sig;
      ds[u] = sig * (1.0 + a * (1.0 - sig)) * da;
    }
    for (int col = 0; col < ncol; ++col) {
      double r = 0, dr = 0;
      for (int u = 0; u < H; ++u) {
        r += W2[size_t(col) * H + u] * s[u];
        dr += W2[size_t(col) * H + u] * ds[u];
      }
      val[size_t(k) * ncol + col] = r;
      der[size_t(k) * ncol + col] = dr;
    }
  }
  // cubic Hermite on t in [0, 1]: p(0) = v0, p(1) = v1, p'(0) = h g0, p'(1) = h g1
  std::vector<double> coef(size_t(NI) * ncol * 4);
  for (int k = 0; k < NI; ++k)
    for (int col = 0; col < ncol; ++col) {
      const double v0 = val[size_t(k) * ncol + col], v1 = val[size_t(k + 1) * ncol + col];
      const double g0 = h * der[size_t(k) * ncol + col], g1 = h * der[size_t(k + 1) * ncol + col];
      double* c = &coef[(size_t(k) * ncol + col) * 4];
      c[0] = v0;
      c[1] = g0;
      c[2] = 3 * (v1 - v0) - 2 * g0 - g1;
      c[3] = 2 * (v0 - v1) + g0 + g1;
    }
  return coef;
}

template <class T>
KOKKOS_INLINE_FUNCTION int radial_table_locate(T d, T inv_h, int NI, T* t) {
  const T x = d * inv_h;
  int k = int(x);
  k = k < 0 ? 0 : (k > NI - 1 ? NI - 1 : k);
  const T f = x - T(k);
  *t = f < T(0) ? T(0) : (f > T(1) ? T(1) : f);  // d beyond r_c (the envelope is 0 there) or below 0
  return k;
}

template <class T>
KOKKOS_INLINE_FUNCTION T radial_table_piece(const T* c, T t, T inv_h, T* dR) {
  *dR = (c[1] + t * (T(2) * c[2] + T(3) * t * c[3])) * inv_h;
  return c[0] + t * (c[1] + t * (c[2] + t * c[3]));
}

// R(d) and dR/dd of column col from a coefficient array (NI ncol 4 values, contiguous).
template <class T>
KOKKOS_INLINE_FUNCTION T radial_table_eval(const T* coef, int ncol, int NI, T inv_h, int col, T d, T* dR) {
  T t;
  const int k = radial_table_locate(d, inv_h, NI, &t);
  return radial_table_piece(coef + (size_t(k) * ncol + col) * 4, t, inv_h, dR);
}

}  // namespace kernels
}  // namespace batmobile
