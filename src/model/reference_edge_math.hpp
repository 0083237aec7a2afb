// Per-edge math of the reference edge backend: geometry, Bessel basis and envelope, spherical harmonics and their
// gradient, radial MLP and tensor product (docs/model.md), one edge at a time.
#pragma once
#include <Kokkos_Core.hpp>

#include "kernels/common.hpp"
#include "kernels/sh.hpp"
#include "model/device_math.hpp"
#include "model/model_file.hpp"

namespace batmobile {
namespace model_detail {

constexpr double kPi = 3.14159265358979323846;

// The model's degree L is a runtime value; the kernel library's SH polynomials take it as a template argument.
template <class S>
KOKKOS_INLINE_FUNCTION void sh_unit_runtime_l(int L, const S& x, const S& y, const S& z, S* Y) {
  switch (L) {
    case 0: kernels::sh_unit<0, S>(x, y, z, Y); break;
    case 1: kernels::sh_unit<1, S>(x, y, z, Y); break;
    case 2: kernels::sh_unit<2, S>(x, y, z, Y); break;
    default: kernels::sh_unit<3, S>(x, y, z, Y); break;
  }
}

// Y_k of the unit vector u (already normalised in double by edge_geometry).
template <class T>
KOKKOS_INLINE_FUNCTION void sh_values(int L, const T* u, T* Y) {
  sh_unit_runtime_l<T>(L, u[0], u[1], u[2], Y);
}

// dY[k][a] = dY_k / du_a, treating the three unit-vector components as independent (the caller projects
// onto the tangent plane and divides by |r|); dual numbers seeded with the identity.
template <class T>
KOKKOS_INLINE_FUNCTION void sh_gradient(int L, const T* u, T (*dY)[3]) {
  using D3 = kernels::Dual3<T>;
  D3 Yd[kernels::num_sh(3)];
  sh_unit_runtime_l<D3>(L, D3(u[0], 1, 0, 0), D3(u[1], 0, 1, 0), D3(u[2], 0, 0, 1), Yd);
  for (int k = 0; k < kernels::num_sh(L); ++k)
    for (int a = 0; a < 3; ++a) dY[k][a] = Yd[k].d[a];
}

// Per-edge geometry and basis; derivatives only when requested.
template <class T>
struct EdgeGeom {
  T r[3], d, u_hat[3], B[kMaxNB], dB[kMaxNB], env, denv, Y[kMaxK];
};

template <class T, class D>
KOKKOS_INLINE_FUNCTION void edge_geometry(const D& md, const double* xi, const double* xj, bool with_grad,
                                          EdgeGeom<T>& g) {
  double r[3] = {xj[0] - xi[0], xj[1] - xi[1], xj[2] - xi[2]};
  double d = Kokkos::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  for (int a = 0; a < 3; ++a) {
    g.r[a] = T(r[a]);
    g.u_hat[a] = T(r[a] / d);
  }
  g.d = T(d);
  const T rc = md.r_c, dd = g.d;
  const T pref = Kokkos::sqrt(T(2) / rc);
  for (int n = 0; n < md.NB; ++n) {
    const T kn = T(n + 1) * T(kPi) / rc;
    const T s = Kokkos::sin(kn * dd), c = Kokkos::cos(kn * dd);
    g.B[n] = pref * s / dd;
    if (with_grad) g.dB[n] = pref * (kn * c / dd - s / (dd * dd));
  }
  const T x = dd / rc;
  if (x < T(1)) {
    const T x2 = x * x, x5 = x2 * x2 * x, x6 = x5 * x;
    g.env = T(1) - T(28) * x6 + T(48) * x6 * x - T(21) * x6 * x2;
    g.denv = (T(-168) * x5 + T(336) * x6 - T(168) * x6 * x) / rc;
  } else {
    g.env = 0;
    g.denv = 0;
  }
  sh_values<T>(md.L, g.u_hat, g.Y);
}

// Hidden pre-activation of the radial MLP only (when the output R0 comes from the per-edge cache).
template <class T, class D>
KOKKOS_INLINE_FUNCTION void radial_hidden(const D& md, int lb, const T* B, T* a1) {
  const T* W1 = &md.w(lb + md.o_W1);
  const T* b1 = &md.w(lb + md.o_b1);
  for (int h = 0; h < md.H; ++h) {
    T acc = b1[h];
    for (int n = 0; n < md.NB; ++n) acc += W1[h * md.NB + n] * B[n];
    a1[h] = acc;
  }
}

// Radial MLP: a1 = W1 B + b1 (pre-activation, H), R0 = W2 silu(a1) (2PC, without envelope).
template <class T, class D>
KOKKOS_INLINE_FUNCTION void radial_mlp(const D& md, int lb, const T* B, T* a1, T* R0) {
  radial_hidden<T>(md, lb, B, a1);
  T s1[kMaxH];
  for (int h = 0; h < md.H; ++h) s1[h] = silu(a1[h]);
  // axpy form over the contiguous rows of W2^T: vectorises without reassociating a reduction
  const T* W2t = &md.w(lb + md.o_W2t);
  const int out = 2 * md.P * md.C;
  for (int o = 0; o < out; ++o) R0[o] = 0;
  for (int h = 0; h < md.H; ++h) {
    const T sh = s1[h];
    const T* row = W2t + h * out;
    for (int o = 0; o < out; ++o) R0[o] += row[o] * sh;
  }
}

// Radial outputs of edge e in the adjoint passes: the row the forward pass cached when it was kept, else
// recomputed into R0; a1 (pre-activations, needed for the derivative) is filled either way.
template <class T, class D, class Cache>
KOKKOS_INLINE_FUNCTION const T* radial_outputs(const D& md, int lb, const T* B, T* a1, T* R0, bool cached,
                                               const Cache& rcache, int e) {
  if (cached) {
    radial_hidden<T>(md, lb, B, a1);
    return &rcache(e, 0);
  }
  radial_mlp<T>(md, lb, B, a1, R0);
  return R0;
}

// out[k3][c] += TP(hj, w)[k3][c] (w = P x C path weights, envelope already applied by the caller's scale).
template <class T, class D>
KOKKOS_INLINE_FUNCTION void tensor_product(const D& md, const T* hj, const T* w, T scale, const T* Y, T* out) {
  const int C = md.C;
  for (int n = 0; n < md.nnz; ++n) {
    const T cy = scale * md.cg_coef(n) * Y[md.cg_k2(n)];
    const T* hrow = hj + md.cg_k1(n) * C;
    const T* wrow = w + md.cg_path(n) * C;
    T* orow = out + md.cg_k3(n) * C;
    for (int c = 0; c < C; ++c) orow[c] += cy * wrow[c] * hrow[c];
  }
}

}  // namespace model_detail
}  // namespace batmobile
