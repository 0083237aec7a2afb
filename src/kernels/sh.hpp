// Real spherical harmonics, l <= 3, e3nn 0.6 convention: "component" normalisation (sum_m Y^l_m^2 = 2l+1,
// Y^0 = 1), polar axis y, index k(l, m) = l*l + m + l. Straight-line polynomials of the unit vector.
//
// Public API (namespace batmobile::kernels), all KOKKOS_INLINE_FUNCTION, L a compile-time degree (0..3):
//   sh_unit<L>(x, y, z, Y)        Y[0..(L+1)^2) for a unit vector (x, y, z); S may be T or Dual3<T>
//   sh<L>(r, Y)                   Y of r / |r| for an unnormalised vector r[3]
//   sh_grad<L>(r, Y, dY)          also dY[k][a] = d Y_k / d r_a (gradient w.r.t. the unnormalised vector)
//   sh_vjp<L>(r, gY, gr)          gr[a] += sum_k gY[k] d Y_k / d r_a (the adjoint used by the force kernels)
//   sh_vjp_unit<L>(u, inv_d, gY, gr)  the same for r = u / inv_d with the unit vector u and 1 / |r| known
//   sh_parity<L>(Y)               Y of u -> Y of -u in place: Y_l(-u) = (-1)^l Y_l(u), exact; applied to gY of -u it
//                                 gives minus the gY of u with the same unit-vector gradient (sh_vjp_unit is odd in u)
//   ComputeSH<T, L, Device>       batched functor: Y(e, k) of edge vectors r(e, 3) (bench "sh" op); with
//                                 tag Backward it computes gr(e, a) = sum_k gY(e, k) dY_k/dr_a
#pragma once
#include "common.hpp"

namespace batmobile {
namespace kernels {

template <int L, class S>
KOKKOS_INLINE_FUNCTION void sh_unit(const S& x, const S& y, const S& z, S* Y) {
  static_assert(L >= 0 && L <= 3, "spherical harmonics implemented for l <= 3");
  using T = typename ScalarOf<S>::type;
  Y[0] = S(T(1));
  if constexpr (L >= 1) {
    const T s3 = T(1.7320508075688772);
    Y[1] = s3 * x;
    Y[2] = s3 * y;
    Y[3] = s3 * z;
  }
  if constexpr (L >= 2) {
    const T s15 = T(3.872983346207417), s5 = T(2.23606797749979);
    const S x2z2 = x * x + z * z;
    Y[4] = s15 * (x * z);
    Y[5] = s15 * (x * y);
    Y[6] = s5 * (y * y - T(0.5) * x2z2);
    Y[7] = s15 * (y * z);
    Y[8] = (T(0.5) * s15) * (z * z - x * x);
    if constexpr (L >= 3) {
      // Derived from e3nn's recursion Y3 ~ CG(2,1,3) Y2 x; harmonic, component-normalised.
      const T a = T(2.091650066335189);   // sqrt(630) / 12
      const T b = T(10.246950765959598);  // sqrt(105)
      const T c = T(1.620185174601965);   // sqrt(168) / 8
      const T d = T(1.3228756555322954);  // sqrt(7) / 2
      const S q = T(4) * (y * y) - x2z2;
      Y[9] = a * (x * (T(3) * (z * z) - x * x));
      Y[10] = b * (x * y * z);
      Y[11] = c * (x * q);
      Y[12] = d * (y * (T(2) * (y * y) - T(3) * x2z2));
      Y[13] = c * (z * q);
      Y[14] = (T(0.5) * b) * (y * (z * z - x * x));
      Y[15] = a * (z * (z * z - T(3) * (x * x)));
    }
  }
}

// Negates the odd-l components (l = 1: k = 1..3, l = 3: k = 9..15).
template <int L, class T>
KOKKOS_INLINE_FUNCTION void sh_parity(T* Y) {
  for (int k = 1; k < (L + 1) * (L + 1); ++k)
    if (k < 4 || k >= 9) Y[k] = -Y[k];
}

template <int L, class T>
KOKKOS_INLINE_FUNCTION void sh(const T* r, T* Y) {
  const T inv = T(1) / sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  sh_unit<L, T>(r[0] * inv, r[1] * inv, r[2] * inv, Y);
}

// Gradient w.r.t. the unnormalised vector: dY/dr = (I - u u^T) / |r| . dY/du, computed exactly by
// evaluating the polynomials on dual numbers seeded with the columns of (I - u u^T) / |r|.
template <int L, class T>
KOKKOS_INLINE_FUNCTION void sh_grad(const T* r, T* Y, T (*dY)[3]) {
  const T inv = T(1) / sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  const T u[3] = {r[0] * inv, r[1] * inv, r[2] * inv};
  Dual3<T> ud[3];
  for (int a = 0; a < 3; ++a) {
    ud[a].v = u[a];
    for (int b = 0; b < 3; ++b) ud[a].d[b] = ((a == b ? T(1) : T(0)) - u[a] * u[b]) * inv;
  }
  Dual3<T> Yd[num_sh(L)];
  sh_unit<L, Dual3<T>>(ud[0], ud[1], ud[2], Yd);
  for (int k = 0; k < num_sh(L); ++k) {
    Y[k] = Yd[k].v;
    for (int b = 0; b < 3; ++b) dY[k][b] = Yd[k].d[b];
  }
}

// gu[a] += sum_k gY[k] dP_k/du_a for the polynomials P of sh_unit (u taken as unconstrained): reverse mode
// written out by hand, ~4x fewer operations than the dual numbers of sh_grad (the fused adjoints call it per edge
// and channel). Checked against sh_grad in test_sh_cg.
template <int L, class T>
KOKKOS_INLINE_FUNCTION void sh_unit_vjp(T x, T y, T z, const T* gY, T* gu) {
  static_assert(L >= 0 && L <= 3, "spherical harmonics implemented for l <= 3");
  if constexpr (L >= 1) {
    const T s3 = T(1.7320508075688772);
    gu[0] += s3 * gY[1];
    gu[1] += s3 * gY[2];
    gu[2] += s3 * gY[3];
  }
  if constexpr (L >= 2) {
    const T s15 = T(3.872983346207417), s5 = T(2.23606797749979);
    // Y4 = s15 x z, Y5 = s15 x y, Y6 = s5 (y^2 - (x^2 + z^2) / 2), Y7 = s15 y z, Y8 = s15 (z^2 - x^2) / 2
    gu[0] += s15 * (z * gY[4] + y * gY[5] - x * gY[8]) - s5 * x * gY[6];
    gu[1] += s15 * (x * gY[5] + z * gY[7]) + T(2) * s5 * y * gY[6];
    gu[2] += s15 * (x * gY[4] + y * gY[7] + z * gY[8]) - s5 * z * gY[6];
  }
  if constexpr (L >= 3) {
    const T a = T(2.091650066335189), b = T(10.246950765959598), c = T(1.620185174601965),
            d = T(1.3228756555322954);
    const T xx = x * x, yy = y * y, zz = z * z, x2z2 = xx + zz, q = T(4) * yy - x2z2;
    // Y9 = a x (3 z^2 - x^2), Y10 = b x y z, Y11 = c x q, Y12 = d y (2 y^2 - 3 (x^2 + z^2)), Y13 = c z q,
    // Y14 = b y (z^2 - x^2) / 2, Y15 = a z (z^2 - 3 x^2); q = 4 y^2 - x^2 - z^2
    gu[0] += T(3) * a * (zz - xx) * gY[9] + b * y * z * gY[10] + c * (q - T(2) * xx) * gY[11] -
             T(6) * d * x * y * gY[12] - T(2) * c * x * z * gY[13] - b * x * y * gY[14] - T(6) * a * x * z * gY[15];
    gu[1] += b * x * z * gY[10] + T(8) * c * x * y * gY[11] + T(3) * d * (T(2) * yy - x2z2) * gY[12] +
             T(8) * c * y * z * gY[13] + T(0.5) * b * (zz - xx) * gY[14];
    gu[2] += T(6) * a * x * z * gY[9] + b * x * y * gY[10] - T(2) * c * x * z * gY[11] - T(6) * d * y * z * gY[12] +
             c * (q - T(2) * zz) * gY[13] + b * y * z * gY[14] + T(3) * a * (zz - xx) * gY[15];
  }
}

// dY/dr = (I - u u^T) / |r| . dP/du, so gr = (gu - u (u . gu)) / |r| with gu = (dP/du)^T gY.
template <int L, class T>
KOKKOS_INLINE_FUNCTION void sh_vjp_unit(const T* u, T inv_d, const T* gY, T* gr) {
  T gu[3] = {T(0), T(0), T(0)};
  sh_unit_vjp<L, T>(u[0], u[1], u[2], gY, gu);
  const T ug = u[0] * gu[0] + u[1] * gu[1] + u[2] * gu[2];
  for (int b = 0; b < 3; ++b) gr[b] += (gu[b] - u[b] * ug) * inv_d;
}

template <int L, class T>
KOKKOS_INLINE_FUNCTION void sh_vjp(const T* r, const T* gY, T* gr) {
  const T inv = T(1) / sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  const T u[3] = {r[0] * inv, r[1] * inv, r[2] * inv};
  sh_vjp_unit<L, T>(u, inv, gY, gr);
}

// Batched SH of edge vectors (benchmark op and a reusable building block).
template <class T, int L, class Device>
struct ComputeSH {
  struct Backward {};
  using View2 = Kokkos::View<T**, Kokkos::LayoutRight, Device>;
  Kokkos::View<const T* [3], Kokkos::LayoutRight, Device> r;  // (E, 3) edge vectors
  View2 Y;                                                   // (E, K) output (forward)
  Kokkos::View<const T**, Kokkos::LayoutRight, Device> gY;   // (E, K) upstream gradient (backward)
  Kokkos::View<T* [3], Kokkos::LayoutRight, Device> gr;       // (E, 3) output (backward)

  KOKKOS_INLINE_FUNCTION void operator()(const int e) const {
    const T v[3] = {r(e, 0), r(e, 1), r(e, 2)};
    T y[num_sh(L)];
    sh<L, T>(v, y);
    for (int k = 0; k < num_sh(L); ++k) Y(e, k) = y[k];
  }
  KOKKOS_INLINE_FUNCTION void operator()(Backward, const int e) const {
    const T v[3] = {r(e, 0), r(e, 1), r(e, 2)};
    T g[num_sh(L)];
    for (int k = 0; k < num_sh(L); ++k) g[k] = gY(e, k);
    T out[3] = {0, 0, 0};
    sh_vjp<L, T>(v, g, out);
    for (int b = 0; b < 3; ++b) gr(e, b) = out[b];
  }
};

}  // namespace kernels
}  // namespace batmobile
