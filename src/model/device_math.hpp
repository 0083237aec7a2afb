// Device-side helpers of the model's kernels: constants, activations, the node kernels' atom blocks, the virial sum.
#pragma once
#include <Kokkos_Core.hpp>
#include <type_traits>

namespace batmobile {
namespace model_detail {

constexpr double kNormEps = 1e-6;
constexpr int kNodeTeam = 128;  // GPU threads per team in the node kernels
// Most atoms per node-kernel team: each thread's item applies a weight to all atoms of the block (register arrays
// of this size), so that weights are read once per block instead of once per atom.
constexpr int kNodeAtoms = 4;

template <class T>
KOKKOS_INLINE_FUNCTION T sigmoid(T x) { return T(1) / (T(1) + Kokkos::exp(-x)); }

// Degree l of the spherical-harmonic component k = l^2 + m.
KOKKOS_INLINE_FUNCTION int degree_of(int k) {
  int l = 0;
  while ((l + 1) * (l + 1) <= k) ++l;
  return l;
}
template <class T>
KOKKOS_INLINE_FUNCTION T silu(T x) { return x * sigmoid(x); }
template <class T>
KOKKOS_INLINE_FUNCTION T silu_grad(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}


// Node kernels' atom blocks in team scratch are laid out [feature][atom], kNodeAtoms atoms (padding atoms zero), so
// that one vector load gives a feature of every atom of the block.
template <class T>
struct alignas(kNodeAtoms * sizeof(T)) BlockAtoms {
  T v[kNodeAtoms];
};
template <class T>
KOKKOS_INLINE_FUNCTION BlockAtoms<T> block_row(const T* x, int f) {
  return *reinterpret_cast<const BlockAtoms<T>*>(x + kNodeAtoms * f);
}
// Calls body(c) for c = 0 .. n-1, eight at a time so that their loads are in flight together. With it and the
// [feature][atom] rows the node kernels took about half the time of a scalar load per atom and feature, one iteration
// at a time, at 97,200 atoms on the H200 (few atoms: latency-bound either way).
template <class Body>
KOKKOS_INLINE_FUNCTION void by_eights(int n, const Body& body) {
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int u = 0; u < 8; ++u) body(c + u);
  for (; c < n; ++c) body(c);
}
// acc[a] += sum_{c < n} w[c ws] x[c][a] over the block's atoms a.
template <class T>
KOKKOS_INLINE_FUNCTION void block_fma(const T* w, int ws, const T* x, int n, T* acc) {
  by_eights(n, [&](int c) {
    const T wc = w[c * ws];
    const BlockAtoms<T> xv = block_row(x, c);
    for (int a = 0; a < kNodeAtoms; ++a) acc[a] += wc * xv.v[a];
  });
}
// Two weight columns against the same rows: acc_a[a] += sum_c wa[c ws] x[c][a], acc_b[a] += sum_c wb[c ws] x[c][a].
template <class T>
KOKKOS_INLINE_FUNCTION void block_fma2(const T* wa, const T* wb, int ws, const T* x, int n, T* acc_a, T* acc_b) {
  by_eights(n, [&](int c) {
    const T ca = wa[c * ws], cb = wb[c * ws];
    const BlockAtoms<T> xv = block_row(x, c);
    for (int a = 0; a < kNodeAtoms; ++a) {
      acc_a[a] += ca * xv.v[a];
      acc_b[a] += cb * xv.v[a];
    }
  });
}

// N doubles summed by a reduction: the virial (6), or the energy and the virial (7, the layout of Model::sums_).
template <int N>
struct DoubleSums {
  double v[N];
  KOKKOS_INLINE_FUNCTION DoubleSums() {
    for (int a = 0; a < N; ++a) v[a] = 0;
  }
  KOKKOS_INLINE_FUNCTION DoubleSums& operator+=(const DoubleSums& o) {
    for (int a = 0; a < N; ++a) v[a] += o.v[a];
    return *this;
  }
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile DoubleSums& o) volatile {
    for (int a = 0; a < N; ++a) v[a] += o.v[a];
  }
};
using V6 = DoubleSums<6>;
using EnergyVirial = DoubleSums<7>;  // energy, then the virial in LAMMPS order xx yy zz xy xz yz

}  // namespace model_detail
}  // namespace batmobile
