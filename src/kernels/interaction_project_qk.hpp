// Attention projections of one interaction layer (node kernels, interaction.hpp): q(n) = Wq . h(n, 0, :) for
// receivers, k(n) = Wk . h(n, 0, :) for all atoms, and the adjoint gh(n, 0, :) += Wq^T gq(n) + Wk^T gk(n).
#pragma once
#include <Kokkos_Core.hpp>

#include <cstdint>

namespace batmobile {
namespace kernels {

// One thread per output value, flat index n * adk + x (forward) or n * C + c (adjoint): consecutive threads write
// consecutive addresses, read the same h / gq / gk row and consecutive weights (the forward from the transposed
// WqT, WkT); a 2-D range over (atom, value), or the forward reading Wq, Wk in place (rows C apart), was slower on
// the H200.
template <class T, class Device>
struct ProjectQK {
  struct Adjoint {};
  Kokkos::View<const T***, Kokkos::LayoutRight, Device> h;
  Kokkos::View<T***, Kokkos::LayoutRight, Device> gh;
  Kokkos::View<const T**, Kokkos::LayoutRight, Device> Wq, Wk, WqT, WkT;
  Kokkos::View<T**, Kokkos::LayoutRight, Device> q, k, gq, gk;
  int n_recv, C, adk;
  KOKKOS_INLINE_FUNCTION void operator()(const int64_t idx) const {
    const int n = int(idx / adk), x = int(idx % adk);
    T sq = 0, sk = 0;
    for (int c = 0; c < C; ++c) {
      const T hv = h(n, 0, c);
      sk += WkT(c, x) * hv;
      if (n < n_recv) sq += WqT(c, x) * hv;
    }
    k(n, x) = sk;
    if (n < n_recv) q(n, x) = sq;
  }
  KOKKOS_INLINE_FUNCTION void operator()(Adjoint, const int64_t idx) const {
    const int n = int(idx / C), c = int(idx % C);
    T s = 0;
    for (int x = 0; x < adk; ++x) {
      s += Wk(x, c) * gk(n, x);
      if (n < n_recv) s += Wq(x, c) * gq(n, x);
    }
    gh(n, 0, c) += s;
  }
};

}  // namespace kernels
}  // namespace batmobile
