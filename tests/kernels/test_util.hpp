// Independent double-precision references and helpers for the kernel tests (host only).
#pragma once
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/batmobile_kernels.hpp"

namespace bt {
using namespace batmobile::kernels;
using Dev = Kokkos::DefaultExecutionSpace::device_type;

// Dense CG[l1,l2,l3] from the checked-in sparse table (zero for absent paths).
struct DenseCG {
  std::vector<double> data[4][4][4];
  DenseCG() {
    for (int p = 0; p < cg::kNumPaths; ++p) {
      const auto& P = cg::kPaths[p];
      auto& d = data[P.l1][P.l2][P.l3];
      d.assign((2 * P.l1 + 1) * (2 * P.l2 + 1) * (2 * P.l3 + 1), 0.0);
      for (int k = P.offset; k < P.offset + P.count; ++k) {
        const auto& e = cg::kEntries[k];
        d[(e.i1 * (2 * P.l2 + 1) + e.i2) * (2 * P.l3 + 1) + e.i3] = e.value;
      }
    }
  }
  bool has(int a, int b, int c) const { return !data[a][b][c].empty(); }
  double operator()(int l1, int l2, int l3, int i1, int i2, int i3) const {
    const auto& d = data[l1][l2][l3];
    if (d.empty()) return 0.0;
    return d[(i1 * (2 * l2 + 1) + i2) * (2 * l3 + 1) + i3];
  }
};
inline const DenseCG& dense_cg() {
  static DenseCG c;
  return c;
}

// Host SH in double written independently of sh.hpp: spherical coordinates with polar axis y,
// real SH from associated Legendre functions (no Condon-Shortley phase here, sign fixed below), component
// normalisation. For m > 0: cos(m phi) terms, m < 0: sin(|m| phi) terms, with phi measured in the z-x plane
// (phi = atan2(x, z)) as in e3nn's y-polar convention.
inline double assoc_legendre(int l, int m, double t) {  // P_l^m(t) without (-1)^m, m >= 0
  double pmm = 1.0, s = std::sqrt(std::max(0.0, 1 - t * t));
  for (int k = 1; k <= m; ++k) pmm *= (2 * k - 1) * s;
  if (l == m) return pmm;
  double pm1 = t * (2 * m + 1) * pmm;
  if (l == m + 1) return pm1;
  double pl = 0;
  for (int ll = m + 2; ll <= l; ++ll) {
    pl = ((2 * ll - 1) * t * pm1 - (ll + m - 1) * pmm) / (ll - m);
    pmm = pm1;
    pm1 = pl;
  }
  return pl;
}
inline double fact(int n) { return n <= 1 ? 1.0 : n * fact(n - 1); }
inline std::vector<double> sh_reference(int L, const double* r) {
  const double d = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  const double x = r[0] / d, y = r[1] / d, z = r[2] / d;
  const double phi = std::atan2(x, z);
  std::vector<double> Y;
  for (int l = 0; l <= L; ++l)
    for (int m = -l; m <= l; ++m) {
      const int am = std::abs(m);
      const double N = std::sqrt((2 * l + 1) * fact(l - am) / fact(l + am)) * (am ? std::sqrt(2.0) : 1.0);
      const double ang = am == 0 ? 1.0 : (m > 0 ? std::cos(am * phi) : std::sin(am * phi));
      Y.push_back(N * assoc_legendre(l, am, y) * ang);
    }
  return Y;
}

inline std::array<double, 9> random_rotation(std::mt19937& rng) {
  std::normal_distribution<double> n(0, 1);
  double q[4];
  double s = 0;
  for (double& v : q) {
    v = n(rng);
    s += v * v;
  }
  s = std::sqrt(s);
  for (double& v : q) v /= s;
  const double w = q[0], x = q[1], y = q[2], z = q[3];
  return {1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
          2 * (x * y + z * w),     1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
          2 * (x * z - y * w),     2 * (y * z + x * w),     1 - 2 * (x * x + y * y)};
}
inline void rotate(const std::array<double, 9>& R, const double* v, double* out) {
  for (int a = 0; a < 3; ++a) out[a] = R[3 * a] * v[0] + R[3 * a + 1] * v[1] + R[3 * a + 2] * v[2];
}

// Wigner-D of degree l from the SH: D = Y(R P) Y(P)^-1 over 2l+1 fixed generic points (Gauss-Jordan inverse).
inline std::vector<double> wigner_from_sh(int l, const std::array<double, 9>& R) {
  const int n = 2 * l + 1;
  std::mt19937 rng(1234 + l);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> A(n * n), B(n * n);
  for (int c = 0; c < n; ++c) {
    double p[3] = {g(rng), g(rng), g(rng)}, rp[3];
    rotate(R, p, rp);
    double Y[16], YR[16];
    sh<3, double>(p, Y);
    sh<3, double>(rp, YR);
    for (int m = 0; m < n; ++m) {
      A[m * n + c] = Y[l * l + m];
      B[m * n + c] = YR[l * l + m];
    }
  }
  // solve D A = B  <=>  A^T D^T = B^T (Gauss-Jordan with partial pivoting)
  std::vector<double> D(n * n);
  std::vector<double> At(n * n), Bt(n * n);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      At[a * n + b] = A[b * n + a];
      Bt[a * n + b] = B[b * n + a];
    }
  for (int col = 0; col < n; ++col) {
    int piv = col;
    for (int r = col + 1; r < n; ++r)
      if (std::fabs(At[r * n + col]) > std::fabs(At[piv * n + col])) piv = r;
    for (int k = 0; k < n; ++k) {
      std::swap(At[col * n + k], At[piv * n + k]);
      std::swap(Bt[col * n + k], Bt[piv * n + k]);
    }
    const double inv = 1.0 / At[col * n + col];
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = At[r * n + col] * inv;
      for (int k = 0; k < n; ++k) {
        At[r * n + k] -= f * At[col * n + k];
        Bt[r * n + k] -= f * Bt[col * n + k];
      }
    }
  }
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < n; ++k) D[k * n + r] = Bt[r * n + k] / At[r * n + r];  // D = (Dt)^T
  return D;
}

template <class V>
auto to_host(const V& v) {
  auto h = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(h, v);
  return h;
}

}  // namespace bt
