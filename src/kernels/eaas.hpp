// Edge-aligned SO(2) tensor product ("EAAS"): rotate the sender feature into the frame where the
// edge direction is +y, where Y^l(rhat) = sqrt(2l+1) e_{m=0}; the CG contraction becomes a gather with at most
// one source per output row; rotate back.
//
// Public API (namespace batmobile::kernels):
//   wigner_D<L>(R, D)               D^l(R) for l = 0..L packed block-diagonally: D[(l,a,b)] at l-offset
//                                   sum_{l'<l} (2l'+1)^2 + a (2l+1) + b; built as D^l = Y^l(R P) Y^l(P)^-1 with 7
//                                   fixed points P (Y^l(P)^-1 is computed at compile time). D^1 = R.
//   GatherTable<L, ALL> / make_gather_table<L, ALL>()   constexpr; for path p and output row m3 (index m3 + l3):
//                                   src[p][m3] (input row index m1 + l1, or -1) and coef[p][m3] =
//                                   sqrt(2 l3 + 1) CG_p[src][m2 = 0][m3] (the normalisation of the test vectors);
//                                   ok == false if a row had two sources (static_assert'ed).
//   edge_angles<L>(r, A), angles_frame(A, R), rotate_to_edge<L, INVERSE>(A, x, y)   the rotation into the edge
//                                   frame R (rows e_x' along y x rhat, e_y' = rhat, e_z'; R rhat = +y) from two
//                                   angles, rhat = Rot_y(alpha) Rot_x(beta) y: D(R) = D(Pi)
//                                   D(Rot_y(-beta)) D(Pi)^T D(Rot_y(-alpha)), turns about y (O(L) pairs) and a
//                                   constant axis swap D(Pi) (make_axis_swap(), 24 non-zeros); per edge only
//                                   cos / sin of m alpha and m beta, no Wigner matrix (equal to wigner_D: tested).
//   eaas_tp<L, ALL>(r, h, w, s, out)   out += s * sum_p alpha_p w_p CG_p(h, Y(rhat)) evaluated through the frame:
//                                   equals tp_fwd<L, ALL> (tested <= 1e-10 relative in double for every path).
//   eaas_tp_adjoint<L, ALL>(r, h, w, s, g, gh, gw, gr)  gh += d<g,out>/dh, gw += d/dw, gr += d/dr (the direction
//                                   gradient from the SO(3) generators J_a in the edge frame: O(L^2) per vector,
//                                   no derivative of the Wigner matrices; finite near the poles).
//   make_wigner_generators()        constexpr J_a = dD(exp(theta G_a))/dtheta, a = x, y, z, packed as D.
//   eaas_blocks<L, ALL>(w, W, Wt)   the 2x2 (+m, -m) block form: for output l3, input l1, m = 1..min(l1,l3):
//                                   out(+m) = W h(+m) - Wt h(-m), out(-m) = W h(-m) + Wt h(+m), and m = 0 is
//                                   W[l3][l1][0] h(0). W, Wt indexed [l3][l1][m] (4 x 4 x 4), path factors,
//                                   weights and the aligned-frame SH value included.
#pragma once
#include "common.hpp"
#include "generated/cg_tables.hpp"
#include "sh.hpp"

namespace batmobile {
namespace kernels {

KOKKOS_INLINE_FUNCTION constexpr int wigner_offset(int l) { return l == 0 ? 0 : l == 1 ? 1 : l == 2 ? 10 : 35; }

// Y^l for l = 2, 3 (entries 4..15) of a point, as constexpr polynomials: the same as sh_unit (equality is tested),
// usable at compile time for the Wigner basis and generators below.
KOKKOS_INLINE_FUNCTION constexpr void sh_poly23(double x, double y, double z, double* Y) {
  const double x2z2 = x * x + z * z, q = 4 * y * y - x2z2;
  Y[4] = 3.872983346207417 * x * z;
  Y[5] = 3.872983346207417 * x * y;
  Y[6] = 2.23606797749979 * (y * y - 0.5 * x2z2);
  Y[7] = 3.872983346207417 * y * z;
  Y[8] = 0.5 * 3.872983346207417 * (z * z - x * x);
  Y[9] = 2.091650066335189 * x * (3 * z * z - x * x);
  Y[10] = 10.246950765959598 * x * y * z;
  Y[11] = 1.620185174601965 * x * q;
  Y[12] = 1.3228756555322954 * y * (2 * y * y - 3 * x2z2);
  Y[13] = 1.620185174601965 * z * q;
  Y[14] = 0.5 * 10.246950765959598 * y * (z * z - x * x);
  Y[15] = 2.091650066335189 * z * (z * z - 3 * x * x);
}

// Y^l(P)^-1 for 7 fixed generic unit points, computed at compile time (Gauss-Jordan).
struct WignerBasis {
  double P[7][3];
  double inv2[5][5], inv3[7][7];
};

KOKKOS_INLINE_FUNCTION constexpr WignerBasis make_wigner_basis() {
  WignerBasis B{};
  const double raw[7][3] = {{1, 2, 3},       {-2, 1, 0.5},     {0.3, -1, 2},   {2, -0.7, -1},
                            {-1, -1.5, 0.2}, {0.5, 0.25, -2}, {-0.8, 2, -1.2}};
  for (int p = 0; p < 7; ++p) {
    const double n = constexpr_sqrt(raw[p][0] * raw[p][0] + raw[p][1] * raw[p][1] + raw[p][2] * raw[p][2]);
    for (int a = 0; a < 3; ++a) B.P[p][a] = raw[p][a] / n;
  }
  for (int l = 2; l <= 3; ++l) {
    const int n = 2 * l + 1;
    double A[7][14] = {};
    for (int c = 0; c < n; ++c) {
      double Y[16] = {};
      sh_poly23(B.P[c][0], B.P[c][1], B.P[c][2], Y);
      for (int m = 0; m < n; ++m) A[m][c] = Y[l * l + m];
    }
    for (int m = 0; m < n; ++m) A[m][n + m] = 1;
    for (int col = 0; col < n; ++col) {
      int piv = col;
      for (int r2 = col + 1; r2 < n; ++r2)
        if ((A[r2][col] < 0 ? -A[r2][col] : A[r2][col]) > (A[piv][col] < 0 ? -A[piv][col] : A[piv][col])) piv = r2;
      for (int k = 0; k < 2 * n; ++k) {
        const double t = A[col][k];
        A[col][k] = A[piv][k];
        A[piv][k] = t;
      }
      const double d = A[col][col];
      for (int k = 0; k < 2 * n; ++k) A[col][k] /= d;
      for (int r2 = 0; r2 < n; ++r2)
        if (r2 != col) {
          const double f = A[r2][col];
          for (int k = 0; k < 2 * n; ++k) A[r2][k] -= f * A[col][k];
        }
    }
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        if (l == 2) B.inv2[a][b] = A[a][n + b];
        if (l == 3) B.inv3[a][b] = A[a][n + b];
      }
  }
  return B;
}

// out[off(l) + n m + b] = sum_c X[c][l^2 + m] Y^l(P)^-1[c][b] for l = 2, 3 (n = 2 l + 1): a block of D-like matrices
// from the rows X[c] that some map gives at the basis points P_c.
KOKKOS_INLINE_FUNCTION constexpr void times_basis_inverse(const WignerBasis& B, const double (*X)[16], double* out) {
  for (int l = 2; l <= 3; ++l) {
    const int n = 2 * l + 1, off = l == 2 ? 10 : 35;
    for (int m = 0; m < n; ++m)
      for (int b = 0; b < n; ++b) {
        double v = 0;
        for (int c = 0; c < n; ++c) v += X[c][l * l + m] * (l == 2 ? B.inv2[c][b] : B.inv3[c][b]);
        out[off + n * m + b] = v;
      }
  }
}

// The generators J_a = dD(exp(theta G_a))/dtheta at theta = 0 (G_a x = e_a x x, a rotation about axis a), block-packed
// as D, for l = 0..3: J^1_a = G_a (D^1 = R), and for l = 2, 3 J^l_a = [grad Y^l(P_c) . (e_a x P_c)] Y^l(P)^-1, the
// directional derivative taken by the 5-point stencil, exact for these polynomials of degree <= 3.
struct WignerGenerators {
  double J[3][84];
};

KOKKOS_INLINE_FUNCTION constexpr WignerGenerators make_wigner_generators() {
  constexpr WignerBasis B = make_wigner_basis();
  WignerGenerators G{};
  for (int a = 0; a < 3; ++a) {
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 3; ++k)  // (G_a)_{ik} = epsilon_{i a k}
        G.J[a][1 + 3 * i + k] = (i == a || k == a || i == k) ? 0.0 : ((a - i + 3) % 3 == 1 ? 1.0 : -1.0);
    double dY[7][16] = {};
    for (int c = 0; c < 7; ++c) {
      const double* P = B.P[c];
      const double e[3] = {a == 0 ? 1.0 : 0.0, a == 1 ? 1.0 : 0.0, a == 2 ? 1.0 : 0.0};
      const double v[3] = {e[1] * P[2] - e[2] * P[1], e[2] * P[0] - e[0] * P[2], e[0] * P[1] - e[1] * P[0]};
      const double h = 0.25, step[4] = {h, -h, 2 * h, -2 * h};
      double Ys[4][16] = {};
      for (int s = 0; s < 4; ++s)
        sh_poly23(P[0] + step[s] * v[0], P[1] + step[s] * v[1], P[2] + step[s] * v[2], Ys[s]);
      for (int m = 4; m < 16; ++m) dY[c][m] = (8 * (Ys[0][m] - Ys[1][m]) - (Ys[2][m] - Ys[3][m])) / (12 * h);
    }
    times_basis_inverse(B, dY, G.J[a]);
  }
  return G;
}

// D^l(Pi) for Pi = the rotation (x, y, z) -> (y, -x, z) (Pi y = x, so Rot_x(b) = Pi Rot_y(b) Pi^T), packed as D:
// 23 non-zeros for l <= 3, the constant between rotations about y and about x.
struct AxisSwap {
  double D[84];
};

KOKKOS_INLINE_FUNCTION constexpr AxisSwap make_axis_swap() {
  constexpr WignerBasis B = make_wigner_basis();
  AxisSwap S{};
  S.D[0] = 1;
  const double Pi[3][3] = {{0, 1, 0}, {-1, 0, 0}, {0, 0, 1}};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) S.D[1 + 3 * a + b] = Pi[a][b];
  double Yr[7][16] = {};
  for (int c = 0; c < 7; ++c) {
    const double* P = B.P[c];
    double q[3] = {};
    for (int a = 0; a < 3; ++a) q[a] = Pi[a][0] * P[0] + Pi[a][1] * P[1] + Pi[a][2] * P[2];
    sh_poly23(q[0], q[1], q[2], Yr[c]);
  }
  times_basis_inverse(B, Yr, S.D);
  for (int k = 10; k < 84; ++k)
    if (S.D[k] < 1e-12 && S.D[k] > -1e-12) S.D[k] = 0.0;  // exact zeros, so that they cost nothing
  return S;
}

// The edge direction as two angles, rhat = Rot_y(alpha) Rot_x(beta) y: cos and sin of m alpha and m beta for
// m = 0..L. At the poles (sin beta = 0) alpha is free (the product is roll-invariant) and set to 0.
template <int L, class T>
struct EdgeAngles {
  T ca[L + 1], sa[L + 1], cb[L + 1], sb[L + 1];
};

template <int L, class T>
KOKKOS_INLINE_FUNCTION void edge_angles(const T* r, EdgeAngles<L, T>& A) {
  const T inv = T(1) / sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  const T u[3] = {r[0] * inv, r[1] * inv, r[2] * inv};
  const T rho = sqrt(u[0] * u[0] + u[2] * u[2]);
  A.ca[0] = A.cb[0] = T(1);
  A.sa[0] = A.sb[0] = T(0);
  if constexpr (L >= 1) {
    A.cb[1] = u[1];
    A.sb[1] = rho;
    const bool pole = !(rho > T(0));
    A.ca[1] = pole ? T(1) : u[2] / rho;
    A.sa[1] = pole ? T(0) : u[0] / rho;
  }
  for (int m = 2; m <= L; ++m) {
    A.ca[m] = A.ca[m - 1] * A.ca[1] - A.sa[m - 1] * A.sa[1];
    A.sa[m] = A.sa[m - 1] * A.ca[1] + A.ca[m - 1] * A.sa[1];
    A.cb[m] = A.cb[m - 1] * A.cb[1] - A.sb[m - 1] * A.sb[1];
    A.sb[m] = A.sb[m - 1] * A.cb[1] + A.cb[m - 1] * A.sb[1];
  }
}

// The frame of the angles (rows e_x', e_y' = rhat, e_z'): R = (Rot_y(alpha) Rot_x(beta))^T, R rhat = +y.
template <int L, class T>
KOKKOS_INLINE_FUNCTION void angles_frame(const EdgeAngles<L, T>& A, T (*R)[3]) {
  const T ca = A.ca[1], sa = A.sa[1], cb = A.cb[1], sb = A.sb[1];
  R[0][0] = ca, R[0][1] = T(0), R[0][2] = -sa;
  R[1][0] = sb * sa, R[1][1] = cb, R[1][2] = sb * ca;
  R[2][0] = cb * sa, R[2][1] = -sb, R[2][2] = cb * ca;
}

// y = D(Rot_y(SIGN phi)) x for one irrep-vector, phi given by cos / sin of m phi: D(Rot_y) = exp(phi J_y) turns each
// (+m, -m) pair by m phi (the sense read from J_y).
template <int L, int SIGN, class T>
KOKKOS_INLINE_FUNCTION void rotate_about_y(const T* c, const T* s, const T* x, T* y) {
  constexpr WignerGenerators G = make_wigner_generators();
  y[0] = x[0];
  static_for<L>([&](auto I) {
    constexpr int l = decltype(I)::value + 1, n = 2 * l + 1, off = wigner_offset(l);
    y[l * l + l] = x[l * l + l];
    static_for<l>([&](auto M) {
      constexpr int m = decltype(M)::value + 1, p = l + m, q = l - m;  // rows of +m and -m
      // J_y[p][q] = +-m: exp(phi J) on (x_p, x_q) = (c x_p + sg s x_q, c x_q - sg s x_p), sg = sign(J_y[p][q])
      constexpr bool plus = (SIGN > 0) == (G.J[1][off + n * p + q] > 0);
      const T xp = x[l * l + p], xq = x[l * l + q], sm = plus ? s[m] : -s[m];
      y[l * l + p] = c[m] * xp + sm * xq;
      y[l * l + q] = c[m] * xq - sm * xp;
    });
  });
}

// y = D(Pi) x (or D(Pi)^T x): the constant axis swap, its zeros skipped at compile time.
template <int L, bool TRANSPOSE, class T>
KOKKOS_INLINE_FUNCTION void apply_axis_swap(const T* x, T* y) {
  constexpr AxisSwap S = make_axis_swap();
  static_for<num_sh(L)>([&](auto I) {
    constexpr int k = decltype(I)::value;
    constexpr int l = k < 1 ? 0 : k < 4 ? 1 : k < 9 ? 2 : 3, n = 2 * l + 1, a = k - l * l, off = wigner_offset(l);
    T v = T(0);
    static_for<n>([&](auto J) {
      constexpr int b = decltype(J)::value;
      constexpr double d = TRANSPOSE ? S.D[off + n * b + a] : S.D[off + n * a + b];
      if constexpr (d != 0.0) v += T(d) * x[l * l + b];
    });
    y[k] = v;
  });
}

// x (lab) -> the edge frame of the angles, D(R) x = D(Pi) D(Rot_y(-beta)) D(Pi)^T D(Rot_y(-alpha)) x; INVERSE: D(R)^T.
template <int L, bool INVERSE, class T>
KOKKOS_INLINE_FUNCTION void rotate_to_edge(const EdgeAngles<L, T>& A, const T* x, T* y) {
  constexpr int K = num_sh(L);
  T t[K], u[K];
  if constexpr (!INVERSE) {
    rotate_about_y<L, -1>(A.ca, A.sa, x, t);
    apply_axis_swap<L, true>(t, u);
    rotate_about_y<L, -1>(A.cb, A.sb, u, t);
    apply_axis_swap<L, false>(t, y);
  } else {
    apply_axis_swap<L, true>(x, t);
    rotate_about_y<L, 1>(A.cb, A.sb, t, u);
    apply_axis_swap<L, false>(u, t);
    rotate_about_y<L, 1>(A.ca, A.sa, t, y);
  }
}

// D^l(R) for l = 0..L, block-packed (see header comment).
template <int L, class T>
KOKKOS_INLINE_FUNCTION void wigner_D(const T (*R)[3], T* D) {
  constexpr WignerBasis WB = make_wigner_basis();
  D[0] = T(1);
  if constexpr (L >= 1)
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) D[1 + 3 * a + b] = R[a][b];
  if constexpr (L >= 2) {
    T Yr[7][16];
    constexpr int npts = L >= 3 ? 7 : 5;
    for (int c = 0; c < npts; ++c) {
      T p[3];
      for (int a = 0; a < 3; ++a) p[a] = R[a][0] * T(WB.P[c][0]) + R[a][1] * T(WB.P[c][1]) + R[a][2] * T(WB.P[c][2]);
      sh_unit<L, T>(p[0], p[1], p[2], Yr[c]);
    }
    for (int a = 0; a < 5; ++a)
      for (int b = 0; b < 5; ++b) {
        T s = T(0);
        for (int c = 0; c < 5; ++c) s = s + Yr[c][4 + a] * T(WB.inv2[c][b]);
        D[10 + 5 * a + b] = s;
      }
    if constexpr (L >= 3)
      for (int a = 0; a < 7; ++a)
        for (int b = 0; b < 7; ++b) {
          T s = T(0);
          for (int c = 0; c < 7; ++c) s = s + Yr[c][9 + a] * T(WB.inv3[c][b]);
          D[35 + 7 * a + b] = s;
        }
  }
}

template <int L, bool ALL>
struct GatherTable {
  static constexpr int P = num_paths(L, ALL);
  int src[P][7];
  double coef[P][7];
  bool ok;
};

template <int L, bool ALL>
KOKKOS_INLINE_FUNCTION constexpr GatherTable<L, ALL> make_gather_table() {
  GatherTable<L, ALL> G{};
  G.ok = true;
  for (int p = 0; p < GatherTable<L, ALL>::P; ++p) {
    const PathLs q = path_at(L, ALL, p);
    for (int m = 0; m < 7; ++m) {
      G.src[p][m] = -1;
      G.coef[p][m] = 0;
    }
    int ci = -1;
    for (int k = 0; k < cg::kNumPaths; ++k)
      if (cg::kPaths[k].l1 == q.l1 && cg::kPaths[k].l2 == q.l2 && cg::kPaths[k].l3 == q.l3) ci = k;
    if (ci < 0) {
      G.ok = false;
      continue;
    }
    const double scale = constexpr_sqrt(2.0 * q.l3 + 1);
    for (int e = cg::kPaths[ci].offset; e < cg::kPaths[ci].offset + cg::kPaths[ci].count; ++e) {
      const cg::Entry& E = cg::kEntries[e];
      if (E.i2 != q.l2) continue;  // aligned frame: only m2 = 0 of Y^{l2} is non-zero
      if (G.src[p][E.i3] != -1) G.ok = false;
      G.src[p][E.i3] = E.i1;
      G.coef[p][E.i3] = scale * E.value;
    }
  }
  return G;
}

// Aligned-frame product of rotated features hr (block layout k(l, m)) into outr (num_out slots).
template <int L, bool ALL, class T, class W>
KOKKOS_INLINE_FUNCTION void eaas_aligned(const T* hr, const W& w, T s, T* outr) {
  constexpr GatherTable<L, ALL> G = make_gather_table<L, ALL>();
  static_assert(G.ok, "EAAS gather table: an output row has more than one source");
  static_for<GatherTable<L, ALL>::P>([&](auto I) {
    constexpr int p = decltype(I)::value;
    constexpr PathLs q = path_at(L, ALL, p);
    constexpr int o = out_index(L, ALL, q.l3, q.l1 + q.l2);
    // Y^{l2}_0 = sqrt(2 l2 + 1) in the aligned frame; the table carries sqrt(2 l3 + 1)
    constexpr double f = path_alpha(L, ALL, p) * constexpr_sqrt((2.0 * q.l2 + 1) / (2.0 * q.l3 + 1));
    const T a = T(f) * T(s * w[p]);
    static_for<2 * q.l3 + 1>([&](auto M) {  // unrolled: sources and coefficients become constants
      constexpr int m = decltype(M)::value, src = G.src[p][m];
      if constexpr (src >= 0) outr[o + m] = outr[o + m] + (a * T(G.coef[p][m])) * hr[q.l1 * q.l1 + src];
    });
  });
}

// y = D x (blockwise) or y = D^T x for one irrep-vector with degrees 0..L.
template <int L, bool TRANSPOSE, class S, class X>
KOKKOS_INLINE_FUNCTION void apply_wigner(const S* D, const X* x, S* y) {
  using T = typename ScalarOf<S>::type;
  for (int l = 0; l <= L; ++l) {
    const int n = 2 * l + 1, off = wigner_offset(l);
    for (int a = 0; a < n; ++a) {
      S s = S(T(0));
      for (int b = 0; b < n; ++b) s = s + (TRANSPOSE ? D[off + b * n + a] : D[off + a * n + b]) * x[l * l + b];
      y[l * l + a] = s;
    }
  }
}

template <int L, bool ALL, class T>
KOKKOS_INLINE_FUNCTION void eaas_tp(const T* r, const T* h, const T* w, T s, T* out) {
  constexpr int K = num_sh(L), KO = num_out(L, ALL);
  EdgeAngles<L, T> A;
  T hr[K], outr[KO], tmp[K];
  edge_angles<L, T>(r, A);
  rotate_to_edge<L, false>(A, h, hr);
  for (int k = 0; k < KO; ++k) outr[k] = T(0);
  eaas_aligned<L, ALL>(hr, w, s, outr);
  for (int b = 0; b < KO / K; ++b) {
    rotate_to_edge<L, true>(A, outr + b * K, tmp);
    for (int k = 0; k < K; ++k) out[b * K + k] += tmp[k];
  }
}

// c[a] += <x, J_a y> for the generators about x and z (a = 0, 2; about y, the edge axis, the gradient needs none),
// degrees 1..L, the zeros of J skipped at compile time.
template <int L, class T>
KOKKOS_INLINE_FUNCTION void generator_forms(const T* x, const T* y, T* c) {
  constexpr WignerGenerators G = make_wigner_generators();
  static_for<num_sh(L) - 1>([&](auto I) {
    constexpr int k = decltype(I)::value + 1;
    constexpr int l = k < 4 ? 1 : k < 9 ? 2 : 3, n = 2 * l + 1, m = k - l * l, off = wigner_offset(l);
    static_for<n>([&](auto J) {
      constexpr int b = decltype(J)::value;
      constexpr double jx = G.J[0][off + n * m + b], jz = G.J[2][off + n * m + b];
      if constexpr (jx != 0.0) c[0] += T(jx) * x[k] * y[l * l + b];
      if constexpr (jz != 0.0) c[2] += T(jz) * x[k] * y[l * l + b];
    });
  });
}

// Reverse of eaas_aligned for upstream gp (aligned frame): gw[p] += s <gp, F_p hr>, ghr += s w_p F_p^T gp.
template <int L, bool ALL, class T, class W, class GW>
KOKKOS_INLINE_FUNCTION void eaas_aligned_adjoint(const T* hr, const W& w, T s, const T* gp, T* ghr, GW gw) {
  constexpr GatherTable<L, ALL> G = make_gather_table<L, ALL>();
  static_for<GatherTable<L, ALL>::P>([&](auto I) {
    constexpr int p = decltype(I)::value;
    constexpr PathLs q = path_at(L, ALL, p);
    constexpr int o = out_index(L, ALL, q.l3, q.l1 + q.l2);
    constexpr double f = path_alpha(L, ALL, p) * constexpr_sqrt((2.0 * q.l2 + 1) / (2.0 * q.l3 + 1));
    const T sw = s * w[p];
    T acc = T(0);
    static_for<2 * q.l3 + 1>([&](auto M) {
      constexpr int m = decltype(M)::value, src = G.src[p][m];
      if constexpr (src >= 0) {
        const T c = T(f * G.coef[p][m]), x = gp[o + m];
        acc += c * x * hr[q.l1 * q.l1 + src];
        ghr[q.l1 * q.l1 + src] += sw * c * x;
      }
    });
    gw[p] += s * acc;
  });
}

// The gradient of an edge's value with respect to r from its generator terms c (c_a = <J_a g', F h'> + <F^T g', J_a
// h'>, summed over channels and products). With g' = D g, h' = D h and the aligned-frame product F the value is
// <g', F h'>. Turning the edge direction by a small angle theta about a lab axis n (normal to it) turns the frame by
// -theta about R n, so dD = -theta J_{Rn} D and dV/dtheta = -(R n) . c: the gradient normal to rhat is
// rhat x (R^T c) / |r| (the component about the edge axis vanishes: F commutes with rotations about it, which is
// why the roll is free).
template <int L, class T>
KOKKOS_INLINE_FUNCTION void eaas_direction_gradient(const EdgeAngles<L, T>& A, const T* r, const T* c, T* gr) {
  T R[3][3], a[3];
  angles_frame<L, T>(A, R);
  for (int k = 0; k < 3; ++k) a[k] = R[0][k] * c[0] + R[2][k] * c[2];  // R^T c (c[1] drops out of the cross product)
  const T inv = T(1) / sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  const T* u = R[1];  // rhat
  gr[0] += (u[1] * a[2] - u[2] * a[1]) * inv;
  gr[1] += (u[2] * a[0] - u[0] * a[2]) * inv;
  gr[2] += (u[0] * a[1] - u[1] * a[0]) * inv;
}

// Adjoint of out = s * EAAS(r, h, w) for upstream g: gh, gw (exact transposes) and gr (eaas_direction_gradient).
template <int L, bool ALL, class T>
KOKKOS_INLINE_FUNCTION void eaas_tp_adjoint(const T* r, const T* h, const T* w, T s, const T* g, T* gh, T* gw,
                                            T* gr) {
  constexpr int K = num_sh(L), KO = num_out(L, ALL), NB = KO / K;
  EdgeAngles<L, T> A;
  T hr[K], gp[KO], outr[KO], ghr[K], c[3] = {T(0), T(0), T(0)};
  edge_angles<L, T>(r, A);
  rotate_to_edge<L, false>(A, h, hr);
  for (int b = 0; b < NB; ++b) rotate_to_edge<L, false>(A, g + b * K, gp + b * K);
  for (int k = 0; k < KO; ++k) outr[k] = T(0);
  eaas_aligned<L, ALL>(hr, w, s, outr);
  for (int k = 0; k < K; ++k) ghr[k] = T(0);
  eaas_aligned_adjoint<L, ALL>(hr, w, s, gp, ghr, gw);
  for (int b = 0; b < NB; ++b) generator_forms<L, T>(outr + b * K, gp + b * K, c);  // <J g', F h'> = <F h', J g'>
  generator_forms<L, T>(ghr, hr, c);
  eaas_direction_gradient<L, T>(A, r, c, gr);
  T ghv[K];
  rotate_to_edge<L, true>(A, ghr, ghv);
  for (int k = 0; k < K; ++k) gh[k] += ghv[k];
}

// One channel's two natural-path products through the edge frame, as tp_fwd2 (messages om += sw TP(h, w), values
// ov += sv TP(h, wv)): the feature is rotated in once, both products rotated back.
template <int L, class T, class W, class WV>
KOKKOS_INLINE_FUNCTION void eaas_fwd2(const EdgeAngles<L, T>& A, const T* h, const W& w, const WV& wv, T sw, T sv,
                                      T* om, T* ov) {
  constexpr int K = num_sh(L);
  T hr[K], am[K], av[K], t[K];
  for (int k = 0; k < K; ++k) am[k] = av[k] = T(0);
  rotate_to_edge<L, false>(A, h, hr);
  eaas_aligned<L, false>(hr, w, sw, am);
  eaas_aligned<L, false>(hr, wv, sv, av);
  rotate_to_edge<L, true>(A, am, t);
  for (int k = 0; k < K; ++k) om[k] += t[k];
  rotate_to_edge<L, true>(A, av, t);
  for (int k = 0; k < K; ++k) ov[k] += t[k];
}

// Adjoint of eaas_fwd2 for upstream gm, go: gh += d/dh, gw, gwv as in tp_adjoint, and the generator terms into c
// (c[0], c[2]); after the channel sum, eaas_direction_gradient(A, r, c, gr) gives the edge's d/dr once.
template <int L, class T, class W, class WV, class GW, class GWV>
KOKKOS_INLINE_FUNCTION void eaas_adjoint2(const EdgeAngles<L, T>& A, const T* h, const W& w, const WV& wv, T sw,
                                          T sv, const T* gm, const T* go, T* gh, GW gw, GWV gwv, T* c) {
  constexpr int K = num_sh(L);
  T hr[K], gmr[K], gor[K], am[K], av[K], ghr[K], t[K];
  for (int k = 0; k < K; ++k) am[k] = av[k] = ghr[k] = T(0);
  rotate_to_edge<L, false>(A, h, hr);
  rotate_to_edge<L, false>(A, gm, gmr);
  rotate_to_edge<L, false>(A, go, gor);
  eaas_aligned<L, false>(hr, w, sw, am);
  eaas_aligned<L, false>(hr, wv, sv, av);
  eaas_aligned_adjoint<L, false>(hr, w, sw, gmr, ghr, gw);
  eaas_aligned_adjoint<L, false>(hr, wv, sv, gor, ghr, gwv);
  generator_forms<L, T>(am, gmr, c);
  generator_forms<L, T>(av, gor, c);
  generator_forms<L, T>(ghr, hr, c);
  rotate_to_edge<L, true>(A, ghr, t);
  for (int k = 0; k < K; ++k) gh[k] += t[k];
}

// 2x2 block form of the aligned-frame product summed over paths (weights w, factor s).
template <int L, bool ALL, class T>
KOKKOS_INLINE_FUNCTION void eaas_blocks(const T* w, T s, T (*W)[4][4], T (*Wt)[4][4]) {
  constexpr GatherTable<L, ALL> G = make_gather_table<L, ALL>();
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 4; ++c) W[a][b][c] = Wt[a][b][c] = T(0);
  static_for<GatherTable<L, ALL>::P>([&](auto I) {
    constexpr int p = decltype(I)::value;
    constexpr PathLs q = path_at(L, ALL, p);
    constexpr double f = path_alpha(L, ALL, p) * constexpr_sqrt((2.0 * q.l2 + 1) / (2.0 * q.l3 + 1));
    const bool even = (q.l1 + q.l2 + q.l3) % 2 == 0;
    for (int m = 0; m <= (q.l1 < q.l3 ? q.l1 : q.l3); ++m) {
      const int row = q.l3 - m;  // output m3 = -m: source is -m (even) or +m (odd)
      if (G.src[p][row] < 0) continue;
      const T c = T(f) * T(G.coef[p][row]) * s * w[p];
      if (even)
        W[q.l3][q.l1][m] += c;  // out(-m) = W h(-m)
      else
        Wt[q.l3][q.l1][m] += c;  // out(-m) = Wt h(+m)
    }
  });
}

}  // namespace kernels
}  // namespace batmobile
