// Real spherical harmonics l <= 3 (e3nn 0.6, component normalisation, polar axis y) and their gradient with
// respect to the unit-vector components, via forward-mode dual numbers so value and derivative share one formula.
#pragma once
#include <Kokkos_Core.hpp>

namespace batmobile {
namespace model_detail {

template <class T>
struct Dual {
  T v, d;
  KOKKOS_INLINE_FUNCTION Dual(T v_ = 0, T d_ = 0) : v(v_), d(d_) {}
};
template <class T>
KOKKOS_INLINE_FUNCTION Dual<T> operator+(Dual<T> a, Dual<T> b) { return {a.v + b.v, a.d + b.d}; }
template <class T>
KOKKOS_INLINE_FUNCTION Dual<T> operator-(Dual<T> a, Dual<T> b) { return {a.v - b.v, a.d - b.d}; }
template <class T>
KOKKOS_INLINE_FUNCTION Dual<T> operator*(Dual<T> a, Dual<T> b) { return {a.v * b.v, a.d * b.v + a.v * b.d}; }
template <class T>
KOKKOS_INLINE_FUNCTION Dual<T> operator*(T s, Dual<T> a) { return {s * a.v, s * a.d}; }

// Writes the (L+1)^2 components; S is T or Dual<T>; `one` is S(1).
template <class T, class S>
KOKKOS_INLINE_FUNCTION void sh_eval(int L, S x, S y, S z, S one, S* Y) {
  const T s3 = 1.7320508075688772, s5 = 2.23606797749979, s7 = 2.6457513110645907;
  Y[0] = one;
  if (L < 1) return;
  Y[1] = s3 * x;
  Y[2] = s3 * y;
  Y[3] = s3 * z;
  if (L < 2) return;
  const S y2 = y * y, x2z2 = x * x + z * z;
  const S s20 = s3 * (x * z), s24 = T(0.5) * s3 * (z * z - x * x);
  Y[4] = s5 * s20;
  Y[5] = s5 * (s3 * (x * y));
  Y[6] = s5 * (y2 - T(0.5) * x2z2);
  Y[7] = s5 * (s3 * (y * z));
  Y[8] = s5 * s24;
  if (L < 3) return;
  const T c56 = 0.9128709291752769, c38 = 0.6123724356957945;  // sqrt(5/6), sqrt(3/8)
  Y[9] = s7 * (c56 * (s20 * z + s24 * x));
  Y[10] = s7 * (s5 * (s20 * y));
  Y[11] = s7 * (c38 * ((T(4) * y2 - x2z2) * x));
  Y[12] = s7 * (T(0.5) * (y * (T(2) * y2 - T(3) * x2z2)));
  Y[13] = s7 * (c38 * (z * (T(4) * y2 - x2z2)));
  Y[14] = s7 * (s5 * (s24 * y));
  Y[15] = s7 * (c56 * (s24 * z - s20 * x));
}

template <class T>
KOKKOS_INLINE_FUNCTION void sh_values(int L, const T* u, T* Y) {
  sh_eval<T, T>(L, u[0], u[1], u[2], T(1), Y);
}

// dY[k][a] = dY_k / du_a, treating the three unit-vector components as independent.
template <class T>
KOKKOS_INLINE_FUNCTION void sh_gradient(int L, const T* u, T (*dY)[3]) {
  for (int a = 0; a < 3; ++a) {
    Dual<T> Yd[16];
    sh_eval<T, Dual<T>>(L, Dual<T>(u[0], a == 0), Dual<T>(u[1], a == 1), Dual<T>(u[2], a == 2), Dual<T>(1, 0), Yd);
    for (int k = 0; k < (L + 1) * (L + 1); ++k) dY[k][a] = Yd[k].d;
  }
}

}  // namespace model_detail
}  // namespace batmobile
