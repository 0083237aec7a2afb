// Adjoint kernels of one fused interaction layer (InteractionKernel's PairAdjT / SendAdjT tags,
// interaction_kernel.hpp); both recompute each edge instead of reading per-edge tensors.
//   PairAdj  team i (owned atoms): for each edge i <- j, its receiver terms (force on i, half the edge virial,
//            dE/dq_i) and, where the reverse edge j <- i is on this rank, that edge's sender terms (force on i, its
//            half virial, dE/dh_i, dE/dk_i). The two edges share the distance, so the prepare pass and the radial MLP
//            run once for both. Needs a graph symmetric within r_c (graph.hpp).
//   SendAdj  team j (the ghosts of other ranks, from atom0 = n_recv on): loops over the edges with sender j (sender
//            CSR); dE/dh_j (gather), sender force, half virial, dE/dk_j. With its own force / virial accumulators
//            (InteractionWork::f_send) it may run beside PairAdj on CUDA (interaction_driver.hpp).
#pragma once
#include "interaction_chunk.hpp"

namespace batmobile {
namespace kernels {

// An output "array" for tp_adjoint's dE/dw_p that contracts at once with dw_p/dd: gw[p] += x adds x dw[p] to *gd
// (the adjoint needs only dE/dd = sum_p dE/dw_p dw_p/dd), so that no per-path accumulators stay live.
template <class T, class DW>
struct ContractWithDw {
  T* gd;
  DW dw;
  struct Term {
    T* gd;
    T f;
    KOKKOS_INLINE_FUNCTION void operator+=(T x) const { *gd += x * f; }
  };
  KOKKOS_INLINE_FUNCTION Term operator[](int p) const { return {gd, dw[p]}; }
};

// The same for dE/dwv_p, the attention values' weights, which also sums wv_p dE/dwv_p into *gs: with
// dE/dwv_p = p alpha_p go_i . CG_p(h_j, Y), that sum is p go_i . v_ij, the value part of dE/ds = p go_i . (v_ij - o_i),
// so the adjoint needs no forward product of its own for v_ij.
template <class T, class WV, class DW>
struct ContractValues {
  T* gd;
  T* gs;
  WV wv;
  DW dwv;
  struct Term {
    T* gd;
    T* gs;
    T f, v;
    KOKKOS_INLINE_FUNCTION void operator+=(T x) const {
      *gd += x * f;
      *gs += x * v;
    }
  };
  KOKKOS_INLINE_FUNCTION Term operator[](int p) const { return {gd, gs, dwv[p], wv[p]}; }
};

// Calls f(w, wv, dw, dwv) with channel c's radial outputs of chunk edge t (weights, attention values) and their d/dd.
// Mode 1 reads them from team scratch path by path (RadialColumn); mode 0 computes them into registers (EdgeRadial).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <class Ch, class F>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::with_edge_radial(const Ch& ch,
                                                                                              int c, int t,
                                                                                              const F& f) const {
  if constexpr (Ch::team_radial) {
    using Col = RadialColumn<T>;
    const int C = prm.C;
    const T *w = ch.radial_row(ch.w, t, C, c), *dw = ch.radial_row(ch.dw, t, C, c);
    f(Col{w, 0, C}, Col{w, P, C}, Col{dw, 0, C}, Col{dw, P, C});
  } else {
    EdgeRadial<T, P> R;
    edge_radial<true>(ch, c, t, ch.geo(t, 3), R);
    const T *w = R.w, *wv = R.wv, *dw = R.dw, *dwv = R.dwv;
    f(w, wv, dw, dwv);
  }
}

// The terms of edge i <- j and channel c given its harmonics Y, its radial outputs and its softmax weight pw (dlg:
// d(s + log u)/dd): adds dE/dY to gY, dE/dd to *gd and, on the sender side, dE/dh_j to ghj; returns dE/ds. go_o:
// receiver_go_o(i, c) (used on the receiver side, whose edges all share it).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool SENDER, class W, class DW>
KOKKOS_INLINE_FUNCTION T InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::edge_terms(
    int i, int j, int c, T pw, T dlg, T go_o, const T* Y, const W& w, const W& wv, const DW& dw, const DW& dwv, T* gY,
    T* gd, T* ghj) const {
  T hj[K], gmi[K], goi[K];
  load_h(j, c, hj);
  const auto gmr = components(gm, i, c);
  for (int kk = 0; kk < K; ++kk) gmi[kk] = kk < KO ? gmr[kk] : T(0);  // (scalar output: l = 0 only)
  T gs = T(0);
  if constexpr (ATTN) {
    // dE/ds = p (go_i . (v - o_i)) (o does not depend on M: no gradient flows through it): here its -p go_i . o_i,
    // its p go_i . v from tp_adjoint's dE/dwv (ContractValues)
    const auto gor = components(go, i, c);
    for (int kk = 0; kk < K; ++kk) goi[kk] = kk < KO ? gor[kk] : T(0);
    gs = -pw * (SENDER ? dot_o(i, c, goi) : go_o);
  } else {
    for (int kk = 0; kk < K; ++kk) goi[kk] = T(0);
  }
  // dE/dw_p and dE/dwv_p go straight into gd = dE/dd (path order: w_p then wv_p, as a loop over p would add them)
  const ContractWithDw<T, DW> gw{gd, dw};
  const ContractValues<T, W, DW> gwv{gd, &gs, wv, dwv};
  tp_adjoint<L, false, SENDER && FEATURE_GRAD, ATTN, T, true, Paths>(hj, Y, w, wv, gmi, goi, prm.inv_avg, pw, ghj, gY,
                                                                    gw, gwv);
  // de/ds = e and de/du = e / u, so dE/dd gets dE/ds d(s + log u)/dd
  if constexpr (ATTN) *gd += gs * dlg;
  return gs;
}

// go_i . o_i of receiver i and channel c (its l = 0 part alone for a scalar output): a term of dE/ds for every edge
// into i.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
KOKKOS_INLINE_FUNCTION T InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::receiver_go_o(int i, int c) const {
  if constexpr (ATTN) return dot_o(i, c, components(go, i, c));
  return T(0);
}

// go_i . o_i given go_i's components goi (the sender pass has them loaded already).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <class G>
KOKKOS_INLINE_FUNCTION T InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::dot_o(int i, int c,
                                                                                     const G& goi) const {
  const auto orow = components(o, i, c);
  T s = T(0);
  for (int kk = 0; kk < KO; ++kk) s += goi[kk] * orow[kk];
  return s;
}

// Force and half virial of chunk edge t from its dE/dd (gd) and dE/dY (gY): dE/dr = gd r / d + the SH part (reverse
// mode from the unit vector, sh_vjp_unit); F_i = +dE/dr_ij on the receiver side, F_j = -dE/dr_ij on the sender side.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool SENDER, class Ch, class A>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::edge_force(const Ch& ch, int t,
                                                                                        T gd, const T* gY,
                                                                                        A* acc) const {
  // the unit vector and 1 / |r| are in the chunk (prepare_basis)
  const T rhat[3] = {ch.geo(t, 4), ch.geo(t, 5), ch.geo(t, 6)}, inv_d = ch.geo(t, 7);
  T gr[3];
  for (int b = 0; b < 3; ++b) gr[b] = gd * rhat[b];
  sh_vjp_unit<L, T>(rhat, inv_d, gY, gr);
  for (int b = 0; b < 3; ++b) acc[b] += SENDER ? -A(gr[b]) : A(gr[b]);
  const T r[3] = {ch.geo(t, 0), ch.geo(t, 1), ch.geo(t, 2)};
  tally_virial(acc, r, gr);
}

// One chunk edge t = (i <- atom) of a sender team for channel c: accumulates the sender force, half the edge virial
// and the dk partials into acc (A = double, or T for the per-thread partials of the GPU path, see adjoint_team) and
// dE/dh of the atom into ghj.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <class Ch, class A>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::sender_edge(int atom, int c, int a,
                                                                                         const Ch& ch, int t,
                                                                                         A* acc, T* ghj) const {
  const int i = ch.other(t);
  if (i < 0) return;
  T pw = T(0), dlg = T(0);
  if constexpr (ATTN) {
    pw = ch.lg(t, a);  // p_ij = e_ij / Z_i (edge_head_terms)
    dlg = ch.dlg(t, a);
  }
  with_edge_radial(ch, c, t, [&](const auto& w, const auto& wv, const auto& dw, const auto& dwv) {
    T Y[K], gY[K], gd = T(0);
    sh_unit<L, T>(ch.geo(t, 4), ch.geo(t, 5), ch.geo(t, 6), Y);
    for (int kk = 0; kk < K; ++kk) gY[kk] = T(0);
    const T gs = edge_terms<true>(i, atom, c, pw, dlg, T(0), Y, w, wv, dw, dwv, gY, &gd, ghj);
    edge_force<true>(ch, t, gd, gY, acc);
    add_key_partials<true>(acc + 9, gs, i, atom, a);
  });
}

// One chunk edge t = (atom <- j) of a pair team for channel c: the edge's receiver terms and, where its reverse
// j <- atom is on this rank (receiver other2(t)), the reverse's sender terms, whose dk partials follow the dq partials
// in acc. The reverse's harmonics are the parity of the edge's (sh_parity) and its force on the atom, -dE/dr_ji, is
// the edge's dE/dr formula with the reverse's dE/dd and the parity of its dE/dY, so one SH evaluation, one gradient
// through it and one virial tally serve both edges.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <class Ch, class A>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::pair_edge(int atom, int c, int a,
                                                                                       const Ch& ch, int t, T go_o,
                                                                                       A* acc, T* ghj) const {
  const int j = ch.other(t), i2 = ch.other2(t);
  if (j < 0) return;
  T pw = T(0), pw2 = T(0), dlg = T(0);
  if constexpr (ATTN) {
    pw = ch.lg(t, a);
    pw2 = ch.lg2(t, a);
    dlg = ch.dlg(t, a);  // (the same for both directions: same distance)
  }
  with_edge_radial(ch, c, t, [&](const auto& w, const auto& wv, const auto& dw, const auto& dwv) {
    T Y[K], gY[K], gd = T(0);
    sh_unit<L, T>(ch.geo(t, 4), ch.geo(t, 5), ch.geo(t, 6), Y);
    for (int kk = 0; kk < K; ++kk) gY[kk] = T(0);
    const T gs = edge_terms<false>(atom, j, c, pw, dlg, go_o, Y, w, wv, dw, dwv, gY, &gd, ghj);
    add_key_partials<false>(acc + 9, gs, atom, j, a);
    if (i2 >= 0) {
      sh_parity<L>(Y);
      sh_parity<L>(gY);
      const T gs2 = edge_terms<true>(i2, atom, c, pw2, dlg, go_o, Y, w, wv, dw, dwv, gY, &gd, ghj);
      sh_parity<L>(gY);
      add_key_partials<true>(acc + 9 + DKM, gs2, i2, atom, a);
    }
    edge_force<false>(ch, t, gd, gY, acc);
  });
}

// The adjoint terms of chunk edge t for a team of mode MODE: a sender team's terms of the edge, or a pair team's
// receiver terms of the edge and sender terms of its reverse (geometry and radial outputs from one chunk row).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <int MODE, class Ch, class A>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::team_edge(int atom, int c, int a,
                                                                                       const Ch& ch, int t, T go_o,
                                                                                       A* acc, T* ghj) const {
  if constexpr (MODE == kPairAdjoint)
    pair_edge(atom, c, a, ch, t, go_o, acc, ghj);
  else
    sender_edge(atom, c, a, ch, t, acc, ghj);
}

// Sum the per-thread partials of the team (row sl C + c: edge slot sl, channel c; fixed order) and write the
// per-atom results: force, virial and dE/dk (sender team) or dE/dq and dE/dk (pair team).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::team_finish(const member& team,
                                                                                         const scratch& part, int n,
                                                                                         int mode) const {
  team.team_barrier();
  const int C = prm.C, chead = C / prm.A, adk = FEATURE_GRAD ? prm.A * prm.dk : 0, S = int(part.extent(0)) / C;
  const bool pair = mode == kPairAdjoint;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, 9 + (pair ? 2 : 1) * adk), [&](const int v) {
    if (v < 9) {
      double s = 0;
      for (int row = 0; row < S * C; ++row) s += part(row, v);
      if (v < 3)
        f(n, v) += s;
      else
        vatom(n, v - 3) += s;
    } else if (ATTN) {
      const int key_of_k = (v - 9) / adk, w = (v - 9) % adk, a = w / prm.dk, e = w % prm.dk;  // (block gq, gk)
      double s = 0;
      for (int sl = 0; sl < S; ++sl)
        for (int c = a * chead; c < (a + 1) * chead; ++c) s += part(sl * C + c, 9 + key_of_k * prm.dk + e);
      (pair && key_of_k == 0 ? gq : gk)(n, w) = T(s);
    }
  });
}

// Partial v of a thread's acc (pair team: NVP values, else NV) as column of the end-of-atom partials (part_cols):
// force, virial, then the dq or dk partials (a pair team: dq, then dk), each key block prm.dk wide.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
KOKKOS_INLINE_FUNCTION int InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::part_col(int v) const {
  return v < 9 + DKM ? (v < 9 + prm.dk ? v : -1) : (v - DKM < 9 + prm.dk ? v - DKM + prm.dk : -1);
}

// The adjoint of one atom (MODE: kSendAdjoint or kPairAdjoint): of sender atom0 + league rank (SendAdj), or of owned
// atom `atom` as receiver and, through the reverse edges, as sender (PairAdj).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <int MODE, bool TEAM_RADIAL>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::adjoint_team(const member& team) const {
  constexpr bool SENDER = MODE == kSendAdjoint, PAIR = MODE == kPairAdjoint;  // (the edge list the team walks)
  constexpr int NA = PAIR ? NVP : NV;
  const int atom = SENDER ? atom0 + team.league_rank() : team.league_rank();
  const int C = prm.C, chead = C / prm.A;
  const int ts = team.team_size(), tr = team.team_rank();
  check_team_size<TEAM_RADIAL>(ts);
  const int S = edge_split(ts, C);
  const auto ch = make_chunk<TEAM_RADIAL>(team, PAIR ? kPairScratch : kSendScratch, S);
  const int s0 = SENDER ? g.send_offsets(atom) : g.recv_offsets(atom);
  const int s1 = SENDER ? g.send_offsets(atom + 1) : g.recv_offsets(atom + 1);
  if (ts >= C) {  // GPU: thread = (channel c, edge slot sl), partials in registers across chunks
    const int c = tr % C, sl = tr / C;
    // in T: a thread sums only its own few edges (1/S of the atom's), the team and the atoms add in double; in
    // double the float L = 2 adjoints spilled at their register cap.
    T acc[NA];
    for (int v = 0; v < NA; ++v) acc[v] = 0;
    T ghj[K];
    for (int kk = 0; kk < K; ++kk) ghj[kk] = T(0);
    const T go_o = SENDER ? T(0) : receiver_go_o(atom, c);
    for (int start = s0; start < s1; start += ch.radial_edges) {
      const int n = s1 - start < ch.radial_edges ? s1 - start : ch.radial_edges, first = basis_row(ch, s0, start);
      if (first == 0) prepare_basis<SENDER, true, PAIR>(team, ch, atom, start, s1 - start);
      radial_outputs<true>(team, ch, first, n);
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
      for (int t = first + sl; t < first + n; t += S) team_edge<MODE>(atom, c, c / chead, ch, t, go_o, acc, ghj);
    }
    if (TEAM_RADIAL) team.team_barrier();  // part and buf overlap the last chunk
    const scratch part = part_of(ch, S);
    for (int v = 0; v < NA; ++v) {  // compile-time bound: acc stays in registers
      const int col = part_col(v);
      if (col >= 0) part(tr, col) = acc[v];
    }
    if (FEATURE_GRAD) {  // dE/dh of the atom as sender: slot 0 sums the S partials of channel c and writes gh once
      if (S > 1) {
        const ST2 buf = buf_of(ch, S);
        park(buf, C, c, sl, 0, ghj, K);
        team.team_barrier();
        if (sl == 0)
          for (int s = 1; s < S; ++s)
            for (int kk = 0; kk < K; ++kk) ghj[kk] += buf((s - 1) * C + c, kk);
      }
      if (sl == 0)
        for (int kk = 0; kk < K; ++kk) gh(atom, kk, c) += ghj[kk];
    }
  } else {  // host: channel loop inside each chunk, partials accumulated in team scratch
    const scratch part = part_of(ch, S);
    for (int c = 0; c < C; ++c)
      for (int v = 0; v < part_cols(ch.kind, prm.dk); ++v) part(c, v) = 0;
    for (int start = s0; start < s1; start += ch.radial_edges) {
      const int n = s1 - start < ch.radial_edges ? s1 - start : ch.radial_edges, first = basis_row(ch, s0, start);
      if (first == 0) prepare_basis<SENDER, true, PAIR>(team, ch, atom, start, s1 - start);
      radial_outputs<true>(team, ch, first, n);
      for (int c = 0; c < C; ++c) {
        double acc[NA];
        for (int v = 0; v < NA; ++v) acc[v] = 0;
        T ghj[K];
        for (int kk = 0; kk < K; ++kk) ghj[kk] = T(0);
        const T go_o = SENDER ? T(0) : receiver_go_o(atom, c);
        for (int t = first; t < first + n; ++t) team_edge<MODE>(atom, c, c / chead, ch, t, go_o, acc, ghj);
        if (FEATURE_GRAD)
          for (int kk = 0; kk < K; ++kk) gh(atom, kk, c) += ghj[kk];
        for (int v = 0; v < NA; ++v) {
          const int col = part_col(v);
          if (col >= 0) part(c, col) += acc[v];
        }
      }
    }
  }
  team_finish(team, part_of(ch, S), atom, MODE);
}

template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool TEAM_RADIAL>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::operator()(PairAdjT<TEAM_RADIAL>,
                                                                                        const member& team) const {
  adjoint_team<kPairAdjoint, TEAM_RADIAL>(team);
}
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool TEAM_RADIAL>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::operator()(SendAdjT<TEAM_RADIAL>,
                                                                                        const member& team) const {
  adjoint_team<kSendAdjoint, TEAM_RADIAL>(team);
}

}  // namespace kernels
}  // namespace batmobile
