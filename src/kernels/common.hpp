// Batmobile kernel library: shared device helpers.
//
// Public API (namespace batmobile::kernels):
//   num_sh(L)                          (L+1)^2, components of a feature/SH vector with degrees 0..L
//   PathSet / num_paths(L, all) / path_at(L, all, p)
//                                      compile-time list of tensor-product paths (l1, l2, l3):
//                                      all = false: natural-parity paths, l1+l2+l3 even (L=1: 4, L=2: 11, L=3: 23)
//                                      all = true : every triangle-allowed path (L=3: 34), lexicographic order
//   path_alpha(L, all, p)              alpha_p = sqrt((2 l3 + 1) / n(l3, parity)) (docs/model.md; equals e3nn's
//                                      "component"/"element" normalisation of a uvu tensor product)
//   AllowedPaths<L, all>, LayerPaths<L, role>  path sets as types (count, at(p), alpha(p)) for tp.hpp; the second
//                                      holds the natural paths a layer role needs (kGeneralLayer: all;
//                                      kEmbeddingInput: l1 = 0; kScalarOutput: l3 = 0; bits), role_natural_path(L,
//                                      role, p) its path p's index in the natural set
//   out_index(L, all, l3, l1 + l2)     output slot of the first component (m3 = -l3) of a path's output: natural
//                                      parity outputs occupy [0, K), the other parity [K, 2K) (only when all)
//   static_for<N>(f)                   calls f(std::integral_constant<int, I>) for I = 0..N-1 (unrolled)
//   envelope(d, rc, &du)               polynomial envelope p = 6 and its derivative
//   bessel_basis<NMAX>(d, rc, nb, B, dB)  B_n(d) = sqrt(2/rc) sin(n pi d / rc) / d, n = 1..nb, and derivatives
//   silu(x, &ds)
//   runs_on_host<ExecSpace>            true for host back-ends (Serial, OpenMP): one thread per team there
//   channel_sum<ExecSpace>(rank, v)    sum of v[N] over a slot of team threads (a warp on CUDA, shuffles; one thread
//                                      elsewhere); returns the slot in the thread holding the sum, -1 in the others;
//                                      channel_sum_slots<ExecSpace>(team size) slots per team
#pragma once
#include <Kokkos_Core.hpp>

#include <type_traits>
#include <utility>

namespace batmobile {
namespace kernels {

KOKKOS_INLINE_FUNCTION constexpr int num_sh(int L) { return (L + 1) * (L + 1); }

// Host back-ends loop channels in one thread per team; GPUs give a team several threads.
template <class ExecSpace>
inline constexpr bool runs_on_host =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;

// Lanes of a channel_sum slot: a whole warp on CUDA (team sizes there must be multiples of 32), else one thread.
template <class ExecSpace>
inline constexpr int channel_sum_lanes =
#ifdef KOKKOS_ENABLE_CUDA
    std::is_same<ExecSpace, Kokkos::Cuda>::value ? 32 :
#endif
                                                 1;

template <class ExecSpace>
int channel_sum_slots(int team_size) {
  return (team_size + channel_sum_lanes<ExecSpace> - 1) / channel_sum_lanes<ExecSpace>;
}

// `rank` must map to consecutive lanes on CUDA (team ranks with vector length 1: Kokkos puts the team on
// threadIdx.y; or a flat range index whose groups are whole warps), so a slot of 32 ranks is one warp and the
// butterfly leaves the sum in every lane; lane 0 reports the slot.
template <class ExecSpace, int N, class T>
KOKKOS_INLINE_FUNCTION int channel_sum(int rank, T (&v)[N]) {
  constexpr int lanes = channel_sum_lanes<ExecSpace>;
  if constexpr (lanes == 32) {
#ifdef __CUDA_ARCH__
    for (int off = 16; off > 0; off >>= 1)
      for (int a = 0; a < N; ++a) v[a] += __shfl_xor_sync(0xffffffffu, v[a], off);
#endif
    return rank % 32 == 0 ? rank / 32 : -1;
  } else {
    (void)v;
    return rank;
  }
}

struct PathLs {
  int l1, l2, l3;
};

KOKKOS_INLINE_FUNCTION constexpr bool path_allowed(int l1, int l2, int l3, bool all) {
  return (l1 - l2 <= l3 && l2 - l1 <= l3 && l3 <= l1 + l2) && (all || (l1 + l2 + l3) % 2 == 0);
}

KOKKOS_INLINE_FUNCTION constexpr int num_paths(int L, bool all) {
  int n = 0;
  for (int a = 0; a <= L; ++a)
    for (int b = 0; b <= L; ++b)
      for (int c = 0; c <= L; ++c) n += path_allowed(a, b, c, all) ? 1 : 0;
  return n;
}

KOKKOS_INLINE_FUNCTION constexpr PathLs path_at(int L, bool all, int p) {
  int n = 0;
  for (int a = 0; a <= L; ++a)
    for (int b = 0; b <= L; ++b)
      for (int c = 0; c <= L; ++c)
        if (path_allowed(a, b, c, all)) {
          if (n == p) return PathLs{a, b, c};
          ++n;
        }
  return PathLs{-1, -1, -1};
}

// Number of paths of the set that write the same output irrep (l3, parity of l1 + l2).
KOKKOS_INLINE_FUNCTION constexpr int paths_into(int L, bool all, int l3, int parity12) {
  int n = 0;
  for (int a = 0; a <= L; ++a)
    for (int b = 0; b <= L; ++b)
      if (path_allowed(a, b, l3, all) && (a + b) % 2 == parity12 % 2) ++n;
  return n;
}

KOKKOS_INLINE_FUNCTION constexpr double constexpr_sqrt(double x) {
  // Newton iteration, only used at compile time for path factors.
  double r = x > 1 ? x : 1.0;
  for (int i = 0; i < 60; ++i) r = 0.5 * (r + x / r);
  return r;
}

KOKKOS_INLINE_FUNCTION constexpr double path_alpha(int L, bool all, int p) {
  const PathLs q = path_at(L, all, p);
  return constexpr_sqrt(double(2 * q.l3 + 1) / double(paths_into(L, all, q.l3, q.l1 + q.l2)));
}

// A path set as a type, for tp.hpp: count, at(p), alpha(p).
template <int L, bool ALL>
struct AllowedPaths {
  static constexpr int count = num_paths(L, ALL);
  KOKKOS_INLINE_FUNCTION static constexpr PathLs at(int p) { return path_at(L, ALL, p); }
  KOKKOS_INLINE_FUNCTION static constexpr double alpha(int p) { return path_alpha(L, ALL, p); }
};

// Layer roles (bits), for the model's first and last layers (docs/model.md), which need only part of the natural
// paths: kEmbeddingInput, the input holds only l = 0 (the species embedding: paths l1 = 0, and it is constant in the
// positions); kScalarOutput, only the l = 0 outputs are used (the last layer: the readout reads h[.][0], and the mix,
// gate, update and norm keep l = 0 apart from l >= 1: paths l3 = 0).
inline constexpr int kGeneralLayer = 0, kEmbeddingInput = 1, kScalarOutput = 2;
// Adjoint kernel modes (interaction_adjoint.hpp): the sender pass (other ranks' ghosts), or both directions of an
// owned atom's edges.
inline constexpr int kSendAdjoint = 1, kPairAdjoint = 2;
// Team-scratch layouts of the fused kernels (InteractionKernel::layout): the forward's, the sender adjoint's, and the
// pair adjoint's (which adds the reverse edges' receivers and softmax weights and the dk partials).
inline constexpr int kForwardScratch = 0, kSendScratch = 1, kPairScratch = 2;
KOKKOS_INLINE_FUNCTION constexpr bool role_keeps(int role, PathLs q) {
  return (!(role & kEmbeddingInput) || q.l1 == 0) && (!(role & kScalarOutput) || q.l3 == 0);
}
KOKKOS_INLINE_FUNCTION constexpr int role_num_paths(int L, int role) {
  int n = 0;
  for (int p = 0; p < num_paths(L, false); ++p) n += role_keeps(role, path_at(L, false, p)) ? 1 : 0;
  return n;
}
// Index in the natural set of path p of a role's set (its weights' rows in radial.W2).
KOKKOS_INLINE_FUNCTION constexpr int role_natural_path(int L, int role, int p) {
  for (int q = 0, n = 0; q < num_paths(L, false); ++q)
    if (role_keeps(role, path_at(L, false, q)) && n++ == p) return q;
  return -1;
}
// The natural paths that a layer of role ROLE needs, with the full set's alpha_p (L = 2: 11 paths; 3 each for the
// first (0, l, l) and last (l, l, 0) layers, 9 of the 83 CG entries).
template <int L, int ROLE>
struct LayerPaths {
  static constexpr int count = role_num_paths(L, ROLE);
  KOKKOS_INLINE_FUNCTION static constexpr PathLs at(int p) { return path_at(L, false, role_natural_path(L, ROLE, p)); }
  KOKKOS_INLINE_FUNCTION static constexpr double alpha(int p) {
    return path_alpha(L, false, role_natural_path(L, ROLE, p));
  }
};

KOKKOS_INLINE_FUNCTION constexpr int out_index(int L, bool /*all*/, int l3, int parity12) {
  // natural parity of the output: (l1 + l2) and l3 have the same parity
  return ((parity12 - l3) % 2 == 0 ? 0 : num_sh(L)) + l3 * l3;
}

KOKKOS_INLINE_FUNCTION constexpr int num_out(int L, bool all) { return all ? 2 * num_sh(L) : num_sh(L); }

// Each atom's share of one edge's virial: half of the symmetrised tally -(r (x) g + g (x) r) / 2 (g = dE/dr),
// added to acc6 in LAMMPS order xx, yy, zz, xy, xz, yz. The single definition of the per-atom virial convention.
// A: the accumulator type (double; the fused adjoints' per-thread partials on GPUs use T), computed in A.
template <class T, class A>
KOKKOS_INLINE_FUNCTION void add_half_edge_virial(A* acc6, const T* r, const T* g) {
  acc6[0] += A(-0.5) * A(r[0]) * A(g[0]);
  acc6[1] += A(-0.5) * A(r[1]) * A(g[1]);
  acc6[2] += A(-0.5) * A(r[2]) * A(g[2]);
  acc6[3] += A(-0.25) * (A(r[0]) * A(g[1]) + A(r[1]) * A(g[0]));
  acc6[4] += A(-0.25) * (A(r[0]) * A(g[2]) + A(r[2]) * A(g[0]));
  acc6[5] += A(-0.25) * (A(r[1]) * A(g[2]) + A(r[2]) * A(g[1]));
}

template <class F, int... I>
KOKKOS_FORCEINLINE_FUNCTION void static_for_impl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
KOKKOS_FORCEINLINE_FUNCTION void static_for(F&& f) {
  static_for_impl(f, std::make_integer_sequence<int, N>{});
}

// Polynomial envelope p = 6: u(x) = 1 - 28 x^6 + 48 x^7 - 21 x^8 for x = d / rc < 1.
template <class T>
KOKKOS_INLINE_FUNCTION T envelope(T d, T rc, T* du) {
  const T x = d / rc;
  if (x >= T(1)) {
    *du = T(0);
    return T(0);
  }
  const T x2 = x * x, x5 = x2 * x2 * x, x6 = x5 * x;
  *du = (T(-168) * x5 + T(336) * x6 - T(168) * x6 * x) / rc;
  return T(1) + x6 * (T(-28) + x * (T(48) - T(21) * x));
}

// Bessel basis B_n(d) = sqrt(2/rc) sin(n pi d / rc) / d for n = 1..nb (B[n - 1]) and dB_n/dd, n <= NMAX (the
// register bound; entries nb..NMAX-1 are zero). One sin/cos pair, then sin/cos((n + 1) x) by a rotation by x
// (norm-preserving: the rounding error grows ~linearly in n, ~1e-6 relative in float at n = 16), so that a thread
// that needs the whole basis does not evaluate nb sin/cos pairs in series (InteractionKernel::prepare_basis).
template <int NMAX, class T>
KOKKOS_INLINE_FUNCTION void bessel_basis(T d, T rc, int nb, T* B, T* dB) {
  const T pi = T(3.14159265358979323846);
  const T pref = sqrt(T(2) / rc), k1 = pi / rc, inv_d = T(1) / d;
  const T s1 = sin(k1 * d), c1 = cos(k1 * d);
  T s = s1, c = c1;
  for (int n = 0; n < NMAX; ++n) {
    const bool on = n < nb;
    const T b = on ? pref * s * inv_d : T(0);
    B[n] = b;
    dB[n] = on ? (pref * T(n + 1) * k1 * c - b) * inv_d : T(0);  // pref (k_n c_n d - s_n) / d^2
    const T sn = s * c1 + c * s1;
    c = c * c1 - s * s1;
    s = sn;
  }
}

template <class T>
KOKKOS_INLINE_FUNCTION T silu(T x, T* ds) {
  const T sg = T(1) / (T(1) + exp(-x));
  *ds = sg * (T(1) + x * (T(1) - sg));
  return x * sg;
}

// Forward-mode dual number with 3 partials: exact gradients of the straight-line SH polynomials.
template <class T>
struct Dual3 {
  T v, d[3];
  KOKKOS_INLINE_FUNCTION Dual3() : v(0), d{0, 0, 0} {}
  KOKKOS_INLINE_FUNCTION Dual3(T c) : v(c), d{0, 0, 0} {}
  KOKKOS_INLINE_FUNCTION Dual3(T c, T d0, T d1, T d2) : v(c), d{d0, d1, d2} {}
};
template <class T>
KOKKOS_INLINE_FUNCTION Dual3<T> operator+(const Dual3<T>& a, const Dual3<T>& b) {
  return Dual3<T>(a.v + b.v, a.d[0] + b.d[0], a.d[1] + b.d[1], a.d[2] + b.d[2]);
}
template <class T>
KOKKOS_INLINE_FUNCTION Dual3<T> operator-(const Dual3<T>& a, const Dual3<T>& b) {
  return Dual3<T>(a.v - b.v, a.d[0] - b.d[0], a.d[1] - b.d[1], a.d[2] - b.d[2]);
}
template <class T>
KOKKOS_INLINE_FUNCTION Dual3<T> operator*(const Dual3<T>& a, const Dual3<T>& b) {
  return Dual3<T>(a.v * b.v, a.d[0] * b.v + a.v * b.d[0], a.d[1] * b.v + a.v * b.d[1], a.d[2] * b.v + a.v * b.d[2]);
}
template <class T>
KOKKOS_INLINE_FUNCTION Dual3<T> operator*(T s, const Dual3<T>& a) {
  return Dual3<T>(s * a.v, s * a.d[0], s * a.d[1], s * a.d[2]);
}
template <class T>
KOKKOS_INLINE_FUNCTION Dual3<T> operator*(const Dual3<T>& a, T s) {
  return s * a;
}
template <class T>
KOKKOS_INLINE_FUNCTION Dual3<T> operator-(T s, const Dual3<T>& a) {
  return Dual3<T>(s - a.v, -a.d[0], -a.d[1], -a.d[2]);
}

// Scalar types accepted by the SH polynomials.
template <class S>
struct ScalarOf {
  using type = S;
};
template <class T>
struct ScalarOf<Dual3<T>> {
  using type = T;
};

}  // namespace kernels
}  // namespace batmobile
