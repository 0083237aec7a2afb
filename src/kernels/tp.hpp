// Per-thread (one channel) channel-wise tensor product of a feature vector with the edge SH, unrolled at
// compile time over a path set, using the generated straight-line CG kernels.
//
// Public API (namespace batmobile::kernels), all KOKKOS_INLINE_FUNCTION; arrays are per-thread registers:
//   h[K]   sender feature of one channel, K = (L+1)^2, index k(l, m) = l*l + m + l
//   Y[K]   edge spherical harmonics
//   w[P]   per-path weights of this channel, P = num_paths(L, ALL), or PS::count for a path set PS (common.hpp;
//          default AllowedPaths<L, ALL>; LayerPaths<L, role>: the paths the first and last layers need)
//   out[num_out(L, ALL)]  output slots, see out_index() in common.hpp
//   tp_fwd<L, ALL[, PS]>(h, Y, w, s, out)  out += s * sum_p alpha_p w_p CG_p(h, Y) (w: array or accessor)
//   tp_fwd2<L, T[, PS]>(h, Y, w, wv, sw, sv, om, ov)  natural paths, two weight sets sharing the CG products
//   tp_adjoint<L, ALL, NEED_H, TWO, T, NEED_W = true[, PS]>(h, Y, w, wv, gm, go, cm, cv, gh, gY, gw, gwv)
//       adjoint of  out_m = cm * TP(h, w) (and, if TWO, out_v = cv * TP(h, wv)) for upstream gm (go):
//       gh += d/dh (if NEED_H), gY += d/dY, gw[p] += d/dw_p, gwv[p] += d/dwv_p (if TWO; both if NEED_W)
#pragma once
#include "common.hpp"
#include "generated/cg_tables.hpp"

namespace batmobile {
namespace kernels {

template <int L, bool ALL, class PS = AllowedPaths<L, ALL>, class T, class W>
KOKKOS_INLINE_FUNCTION void tp_fwd(const T* h, const T* Y, const W& w, T s, T* out) {
  static_for<PS::count>([&](auto I) {
    constexpr int p = decltype(I)::value;
    constexpr PathLs q = PS::at(p);
    constexpr int o = out_index(L, ALL, q.l3, q.l1 + q.l2);
    cg::Path<q.l1, q.l2, q.l3>::fwd(h + q.l1 * q.l1, Y + q.l2 * q.l2, T(PS::alpha(p)) * s * w[p], out + o);
  });
}

// om may be nullptr: then only ov is computed (the same arithmetic for ov).
template <int L, class T, class PS = AllowedPaths<L, false>, class W, class WV, class OM>
KOKKOS_INLINE_FUNCTION void tp_fwd2(const T* h, const T* Y, const W& w, const WV& wv, T sw, T sv, OM om, T* ov) {
  constexpr bool with_m = !std::is_same<OM, std::nullptr_t>::value;
  static_for<PS::count>([&](auto I) {
    constexpr int p = decltype(I)::value;
    constexpr PathLs q = PS::at(p);
    T x[2 * q.l3 + 1];
    for (int m = 0; m < 2 * q.l3 + 1; ++m) x[m] = T(0);
    cg::Path<q.l1, q.l2, q.l3>::fwd(h + q.l1 * q.l1, Y + q.l2 * q.l2, T(PS::alpha(p)), x);
    const T b = sv * wv[p];
    if constexpr (with_m) {
      const T a = sw * w[p];
      for (int m = 0; m < 2 * q.l3 + 1; ++m) om[q.l3 * q.l3 + m] += a * x[m];
    }
    for (int m = 0; m < 2 * q.l3 + 1; ++m) ov[q.l3 * q.l3 + m] += b * x[m];
  });
}

template <int N, class T>
KOKKOS_FORCEINLINE_FUNCTION T dot_n(const T* a, const T* b) {
  T s = T(0);
  for (int k = 0; k < N; ++k) s += a[k] * b[k];
  return s;
}

// w, wv, gm, go may be register arrays (T*) or any indexable accessor, e.g. Strided over a global view: each
// path then loads its weight and its (2 l3 + 1) upstream values where it uses them, so that they need not all be
// live in registers at once (the conv adjoint kernels spill otherwise). gw, gwv: anything with gw[p] += x (T*, or a
// proxy that contracts dE/dw_p at once, see ContractWithDw in interaction_adjoint.hpp).
template <int L, bool ALL, bool NEED_H, bool TWO, class T, bool NEED_W = true, class PS = AllowedPaths<L, ALL>,
          class W, class WV, class GM, class GO, class GW, class GWV>
KOKKOS_INLINE_FUNCTION void tp_adjoint(const T* h, const T* Y, const W& w, const WV& wv, const GM& gm, const GO& go,
                                       T cm, T cv, T* gh, T* gY, GW gw, GWV gwv) {
  static_for<PS::count>([&](auto I) {
    constexpr int p = decltype(I)::value;
    constexpr PathLs q = PS::at(p);
    constexpr int o = out_index(L, ALL, q.l3, q.l1 + q.l2);
    constexpr int n3 = 2 * q.l3 + 1;
    using CG = cg::Path<q.l1, q.l2, q.l3>;
    constexpr int n1 = 2 * q.l1 + 1;
    const T alpha = T(PS::alpha(p));
    const T* hb = h + q.l1 * q.l1;
    const T* Yb = Y + q.l2 * q.l2;
    T gb[n3], G[n3];
    // Two forms with the same results. The forward form: dE/dw = alpha gm . CG(h, Y) and dE/dwv = alpha go . CG(h, Y)
    // from one forward product x, and dE/dh = alpha CG^T(G, Y) from one adjoint contraction of the combined upstream
    // G = cm w gm + cv wv go. The adjoint form: per upstream one adjoint contraction t, which gives both dE/dh and
    // (with h . t) dE/dw. Without dE/dh the forward form saves a contraction wherever 2 n3 < count + 2 n1 (every path
    // with l1 > 0); with it, it has as many and saves dot products wherever 2 n3 < 3 n1.
    constexpr bool forward_form = NEED_H ? 2 * n3 < 3 * n1 : 2 * n3 < CG::count + 2 * n1;
    if constexpr (forward_form) {
      T x[n3];
      for (int m = 0; m < n3; ++m) x[m] = T(0);
      CG::fwd(hb, Yb, alpha, x);
      for (int m = 0; m < n3; ++m) gb[m] = gm[o + m];
      if constexpr (NEED_W) gw[p] += cm * dot_n<n3>(gb, x);
      const T wp = cm * w[p];
      for (int m = 0; m < n3; ++m) G[m] = wp * gb[m];
      if constexpr (TWO) {
        for (int m = 0; m < n3; ++m) gb[m] = go[o + m];
        if constexpr (NEED_W) gwv[p] += cv * dot_n<n3>(gb, x);
        const T wvp = cv * wv[p];
        for (int m = 0; m < n3; ++m) G[m] += wvp * gb[m];
      }
      if constexpr (NEED_H) CG::adj_a(G, Yb, alpha, gh + q.l1 * q.l1);
    } else {
      // t_a = sum_{b,k} CG_abk Y_b g_k (rather than a triple-product dot for dE/dw, 3 operations per CG entry)
      T t[n1];
      for (int m = 0; m < n3; ++m) gb[m] = gm[o + m];
      for (int a = 0; a < n1; ++a) t[a] = T(0);
      CG::adj_a(gb, Yb, T(1), t);
      const T wp = cm * w[p];
      if constexpr (NEED_W) gw[p] += cm * alpha * dot_n<n1>(hb, t);
      if constexpr (NEED_H)
        for (int a = 0; a < n1; ++a) gh[q.l1 * q.l1 + a] += alpha * wp * t[a];
      for (int m = 0; m < n3; ++m) G[m] = wp * gb[m];
      if constexpr (TWO) {
        for (int m = 0; m < n3; ++m) gb[m] = go[o + m];
        for (int a = 0; a < n1; ++a) t[a] = T(0);
        CG::adj_a(gb, Yb, T(1), t);
        const T wvp = cv * wv[p];
        if constexpr (NEED_W) gwv[p] += cv * alpha * dot_n<n1>(hb, t);
        if constexpr (NEED_H)
          for (int a = 0; a < n1; ++a) gh[q.l1 * q.l1 + a] += alpha * wvp * t[a];
        for (int m = 0; m < n3; ++m) G[m] += wvp * gb[m];
      }
    }
    CG::adj_b(hb, G, alpha, gY + q.l2 * q.l2);
  });
}

// Read-only strided access p[k * stride]: one channel's column of a LayoutRight (.., K, C) view row.
template <class T>
struct Strided {
  const T* p;
  int stride;
  KOKKOS_INLINE_FUNCTION T operator[](int k) const { return p[k * stride]; }
};

// Write-only strided access for tp_adjoint's gw: it produces each path's dE/dw_p in exactly one `gw[p] += x`,
// so into a freshly written output that term is a store (no read of the old value, no zeroing pass).
template <class T>
struct StridedWrite {
  T* p;
  int stride;
  struct Slot {
    T* q;
    KOKKOS_INLINE_FUNCTION void operator+=(T v) const { *q = v; }
  };
  KOKKOS_INLINE_FUNCTION Slot operator[](int k) const { return Slot{p + k * stride}; }
};

}  // namespace kernels
}  // namespace batmobile
