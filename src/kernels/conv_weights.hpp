// Fused convolution with per-edge weights given as input (the e3nn benchmark operation):
//   out_i = scale * sum_{e = (i <- j)} TP_ALL(h_j, w_e)
// over the path set num_paths(L, ALL) (ALL = true: all 34 triangle-allowed paths of 0e+1o+2e+3o x SH; outputs
// of both parities, slot layout out_index() in common.hpp: natural parity [0, K), other parity [K, 2K)).
// alpha_p = sqrt((2 l3 + 1) / n(l3, parity)) equals e3nn 0.6's TensorProduct normalisation for a channel-wise
// "uvu" product with irrep_normalization="component", path_normalization="element".
//
// Layouts (LayoutRight): h (n_total, K, C); w (E, P, C) with E in receiver-grouped edge order of Graph;
// out (n_recv, KO, C), KO = num_out(L, ALL); adjoint: gout (n_recv, KO, C) -> gh (n_total, K, C) accumulated,
// gw (E, P, C) written, f (n_total, 3) and vatom (n_total, 6) double accumulated (no atomics: receiver pass
// writes gw and receiver forces, sender pass (sender CSR) gathers gh and sender forces).
#pragma once
#include "graph.hpp"
#include "sh.hpp"
#include "tp.hpp"

namespace batmobile {
namespace kernels {

template <class T, class Device, int L, bool ALL>
struct ConvEdgeWeights {
  static constexpr int K = num_sh(L);
  static constexpr int KO = num_out(L, ALL);
  static constexpr int P = num_paths(L, ALL);
  static constexpr int NV = 9;
  using exec = typename Device::execution_space;
  using V3 = Kokkos::View<T***, Kokkos::LayoutRight, Device>;
  using CV3 = Kokkos::View<const T***, Kokkos::LayoutRight, Device>;
  using D2 = Kokkos::View<double**, Kokkos::LayoutRight, Device>;
  using member = typename Kokkos::TeamPolicy<exec>::member_type;
  using scratch = Kokkos::View<double**, Kokkos::LayoutRight, typename exec::scratch_memory_space,
                               Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  struct Forward {};
  struct RecvAdj {};
  struct SendAdj {};

  Graph<T, Device> g;
  CV3 h, w, gout;
  V3 out, gh, gw;
  D2 f, vatom;
  T scale = 1;
  int C = 0;

  KOKKOS_INLINE_FUNCTION void edge_vec(int i, int j, T* r) const {
    for (int a = 0; a < 3; ++a) r[a] = g.x(j, a) - g.x(i, a);
  }

  KOKKOS_INLINE_FUNCTION void operator()(Forward, const member& team) const {
    const int i = team.league_rank();
    const int e0 = g.recv_offsets(i), e1 = g.recv_offsets(i + 1);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](const int c) {
      T acc[KO];
      for (int k = 0; k < KO; ++k) acc[k] = T(0);
      for (int e = e0; e < e1; ++e) {
        const int j = g.edge_sender(e);
        T r[3], Y[K], hj[K];
        edge_vec(i, j, r);
        sh<L, T>(r, Y);
        for (int k = 0; k < K; ++k) hj[k] = h(j, k, c);
        // weights read path by path where used (all 34 preloaded took 188 registers, this 128: 1.63 -> 1.33 ms
        // at 10,000 x 30 x 64 on the H200)
        tp_fwd<L, ALL>(hj, Y, Strided<T>{&w(e, 0, c), C}, T(1), acc);
      }
      for (int k = 0; k < KO; ++k) out(i, k, c) = scale * acc[k];
    });
  }

  template <bool SENDER>
  KOKKOS_INLINE_FUNCTION void edge_adjoint(int e, int i, int j, int c, T* r, T* gr, T* ghj, T* gwe) const {
    T Y[K], hj[K], gY[K];
    edge_vec(i, j, r);
    sh<L, T>(r, Y);
    for (int k = 0; k < K; ++k) {
      hj[k] = h(j, k, c);
      gY[k] = T(0);
    }
    if (!SENDER)
      for (int p = 0; p < P; ++p) gwe[p] = T(0);
    // w and gout are read path by path where they are used (Strided), not preloaded: with all 34 weights and 32
    // upstream values live at once both adjoint kernels ran out of registers and spilled.
    const Strided<T> we{&w(e, 0, c), C}, go{&gout(i, 0, c), C};
    // the sender pass needs no dE/dw (written by the receiver pass)
    tp_adjoint<L, ALL, SENDER, false, T, !SENDER>(hj, Y, we, nullptr, go, nullptr, scale, T(0), ghj, gY, gwe, nullptr);
    gr[0] = gr[1] = gr[2] = T(0);
    sh_vjp<L, T>(r, gY, gr);
  }

  KOKKOS_INLINE_FUNCTION static void tally(double* acc, const T* r, const T* gr, double sign) {
    for (int b = 0; b < 3; ++b) acc[b] += sign * gr[b];
    add_half_edge_virial(acc + 3, r, gr);
  }

  KOKKOS_INLINE_FUNCTION void finish(const member& team, const scratch& part, int n) const {
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NV), [&](const int v) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += part(c, v);
      if (v < 3)
        f(n, v) += s;
      else
        vatom(n, v - 3) += s;
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(RecvAdj, const member& team) const {
    const int i = team.league_rank();
    scratch part(team.team_scratch(0), C, NV);
    const int e0 = g.recv_offsets(i), e1 = g.recv_offsets(i + 1);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](const int c) {
      double acc[NV] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
      for (int e = e0; e < e1; ++e) {
        T r[3], gr[3], gwe[P];
        edge_adjoint<false>(e, i, g.edge_sender(e), c, r, gr, nullptr, gwe);
        for (int p = 0; p < P; ++p) gw(e, p, c) = gwe[p];
        tally(acc, r, gr, 1.0);
      }
      for (int v = 0; v < NV; ++v) part(c, v) = acc[v];
    });
    finish(team, part, i);
  }

  KOKKOS_INLINE_FUNCTION void operator()(SendAdj, const member& team) const {
    const int j = team.league_rank();
    scratch part(team.team_scratch(0), C, NV);
    const int s0 = g.send_offsets(j), s1 = g.send_offsets(j + 1);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](const int c) {
      double acc[NV] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
      T ghj[K];
      for (int k = 0; k < K; ++k) ghj[k] = T(0);
      for (int s = s0; s < s1; ++s) {
        const int e = g.send_edges(s);
        T r[3], gr[3];
        edge_adjoint<true>(e, g.edge_receiver(e), j, c, r, gr, ghj, nullptr);
        tally(acc, r, gr, -1.0);
      }
      for (int k = 0; k < K; ++k) gh(j, k, c) += ghj[k];
      for (int v = 0; v < NV; ++v) part(c, v) = acc[v];
    });
    finish(team, part, j);
  }


  template <class Tag>
  void launch(const char* name, int n) const {
    Kokkos::TeamPolicy<exec, Tag> pol(n, runs_on_host<exec> ? 1 : C);
    pol = pol.set_scratch_size(0, Kokkos::PerTeam(scratch::shmem_size(C, NV)));
    Kokkos::parallel_for(name, pol, *this);
  }
  void forward() const { launch<Forward>("batmobile::conv_w_fwd", g.n_recv); }
  void backward() const {
    launch<RecvAdj>("batmobile::conv_w_recv_adj", g.n_recv);
    launch<SendAdj>("batmobile::conv_w_send_adj", g.n_total);
  }
};

}  // namespace kernels
}  // namespace batmobile
