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
#include "path_groups.hpp"
#include "tp.hpp"

namespace batmobile {
namespace kernels {

// NG threads per channel (path_groups.hpp): the forward splits the paths by output irrep (each thread owns its
// outputs), both adjoint passes path by path (the receiver pass: each thread owns its dE/dw; the sender pass sums
// the threads' dE/dh partials in team scratch once per sender); force and virial partials of all threads are
// summed per atom at the end, as the channels' are. MINB > 0: CUDA launch bounds of MINB blocks of 64 NG threads
// per SM (caps registers; used when C <= 64), 0: none. Host back-ends run one thread per team: NG = 1 there.
template <class T, class Device, int L, bool ALL,
          int NG = runs_on_host<typename Device::execution_space> ? 1 : default_path_groups(L, ALL), int MINB = 0>
struct ConvEdgeWeights {
  static constexpr int K = num_sh(L);
  static constexpr int KO = num_out(L, ALL);
  static constexpr int P = num_paths(L, ALL);
  static constexpr int NV = 9;
  static constexpr int groups = NG;
  using exec = typename Device::execution_space;
  using V3 = Kokkos::View<T***, Kokkos::LayoutRight, Device>;
  using CV3 = Kokkos::View<const T***, Kokkos::LayoutRight, Device>;
  using D2 = Kokkos::View<double**, Kokkos::LayoutRight, Device>;
  using member = typename Kokkos::TeamPolicy<exec>::member_type;
  using scratch = Kokkos::View<double**, Kokkos::LayoutRight, typename exec::scratch_memory_space,
                               Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using scratch3 = Kokkos::View<T***, Kokkos::LayoutRight, typename exec::scratch_memory_space,
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

  // Thread t of a team works on channel t % C for path group t / C (a whole warp on one group when C % 32 == 0):
  // f(std::integral_constant<int, group>, channel).
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_threads(const member& team, F&& f) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C * NG), [&](const int t) {
      const int grp = t / C, c = t - grp * C;
      static_for<NG>([&](auto G) {
        if (grp == decltype(G)::value) f(G, c);
      });
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(Forward, const member& team) const {
    const int i = team.league_rank();
    const int e0 = g.recv_offsets(i), e1 = g.recv_offsets(i + 1);
    for_threads(team, [&](auto G, const int c) {
      constexpr int grp = decltype(G)::value;
      T acc[KO];
      for (int k = 0; k < KO; ++k) acc[k] = T(0);
      for (int e = e0; e < e1; ++e) {
        const int j = g.edge_sender(e);
        T r[3], Y[K], hj[K];
        edge_vec(i, j, r);
        sh<L, T>(r, Y);
        for (int k = 0; k < K; ++k) hj[k] = h(j, k, c);
        tp_fwd<L, ALL, InGroup<L, ALL, PathKey::output, NG, grp>>(hj, Y, Strided<T>{&w(e, 0, c), C}, T(1), acc);
      }
      // this group's output irreps (l3, parity of l1 + l2); the other parity exists only with ALL
      static_for<L + 1>([&](auto L3) {
        static_for<2>([&](auto PAR) {
          constexpr int l3 = decltype(L3)::value, par = decltype(PAR)::value;
          if constexpr ((ALL || par == l3 % 2) && key_in_group<L, ALL, PathKey::output, NG, grp>(l3, par)) {
            constexpr int o = out_index(L, ALL, l3, par);
            for (int m = 0; m < 2 * l3 + 1; ++m) out(i, o + m, c) = scale * acc[o + m];
          }
        });
      });
    });
  }

  template <bool SENDER, class Sel>
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
    tp_adjoint<L, ALL, SENDER, false, T, !SENDER, Sel>(hj, Y, we, nullptr, go, nullptr, scale, T(0), ghj, gY, gwe,
                                                       nullptr);
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
      for (int t = 0; t < C * NG; ++t) s += part(t, v);
      if (v < 3)
        f(n, v) += s;
      else
        vatom(n, v - 3) += s;
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(RecvAdj, const member& team) const {
    const int i = team.league_rank();
    scratch part(team.team_scratch(0), C * NG, NV);
    const int e0 = g.recv_offsets(i), e1 = g.recv_offsets(i + 1);
    for_threads(team, [&](auto G, const int c) {
      using Sel = InGroup<L, ALL, PathKey::path, NG, decltype(G)::value>;
      double acc[NV] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
      for (int e = e0; e < e1; ++e) {
        T r[3], gr[3], gwe[P];
        edge_adjoint<false, Sel>(e, i, g.edge_sender(e), c, r, gr, nullptr, gwe);
        static_for<P>([&](auto I) {
          constexpr int p = decltype(I)::value;
          if constexpr (Sel::has(p)) gw(e, p, c) = gwe[p];
        });
        tally(acc, r, gr, 1.0);
      }
      for (int v = 0; v < NV; ++v) part(decltype(G)::value * C + c, v) = acc[v];
    });
    finish(team, part, i);
  }

  KOKKOS_INLINE_FUNCTION void operator()(SendAdj, const member& team) const {
    const int j = team.league_rank();
    scratch part(team.team_scratch(0), C * NG, NV);
    // dE/dh_j partials of the NG groups, (K, NG, C)
    scratch3 ghp(team.team_scratch(0), K, NG, C);
    const int s0 = g.send_offsets(j), s1 = g.send_offsets(j + 1);
    for_threads(team, [&](auto G, const int c) {
      constexpr int grp = decltype(G)::value;
      double acc[NV] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
      T ghj[K];
      for (int k = 0; k < K; ++k) ghj[k] = T(0);
      for (int s = s0; s < s1; ++s) {
        const int e = g.send_edges(s);
        T r[3], gr[3];
        edge_adjoint<true, InGroup<L, ALL, PathKey::path, NG, grp>>(e, g.edge_receiver(e), j, c, r, gr, ghj, nullptr);
        tally(acc, r, gr, -1.0);
      }
      for (int k = 0; k < K; ++k) ghp(k, grp, c) = ghj[k];
      for (int v = 0; v < NV; ++v) part(grp * C + c, v) = acc[v];
    });
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, K * C), [&](const int t) {
      const int k = t / C, c = t - k * C;
      T s = ghp(k, 0, c);
      for (int q = 1; q < NG; ++q) s += ghp(k, q, c);
      gh(j, k, c) += s;
    });
    finish(team, part, j);
  }

  template <class Tag, class Bounds>
  void launch_with(const char* name, int n) const {
    Kokkos::TeamPolicy<exec, Tag, Bounds> pol(n, runs_on_host<exec> ? 1 : C * NG);
    const size_t ghp_bytes = std::is_same<Tag, SendAdj>::value ? scratch3::shmem_size(K, NG, C) : 0;
    pol = pol.set_scratch_size(0, Kokkos::PerTeam(scratch::shmem_size(C * NG, NV) + ghp_bytes));
    Kokkos::parallel_for(name, pol, *this);
  }
  template <class Tag>
  void launch(const char* name, int n) const {
    if constexpr (MINB > 0)
      if (C <= 64) return launch_with<Tag, Kokkos::LaunchBounds<64 * NG, MINB>>(name, n);
    launch_with<Tag, Kokkos::LaunchBounds<>>(name, n);
  }
  void forward() const { launch<Forward>("batmobile::conv_w_fwd", g.n_recv); }
  void backward() const {
    launch<RecvAdj>("batmobile::conv_w_recv_adj", g.n_recv);
    launch<SendAdj>("batmobile::conv_w_send_adj", g.n_total);
  }
};

}  // namespace kernels
}  // namespace batmobile
