// Per-chunk stages of the fused interaction kernels (InteractionKernel, interaction_kernel.hpp) that the forward and
// the adjoints share: the team scratch of an edge chunk (make_chunk and the end-of-atom arrays), the prepare pass
// (geometry, Bessel basis, radial hidden layer and attention terms of each chunk edge, once per edge for all
// channels), and the radial outputs of a chunk (the team's in mode >= 1, interaction_radial.hpp; a channel's own in
// mode 0).
#pragma once
#include "interaction_kernel.hpp"

namespace batmobile {
namespace kernels {

// Hidden units per prepare-pass item (LayerParams::prepare_span = 0) for nf edges, HH hidden units and ts threads:
// the smallest divisor of HH whose nf HH / span items fit one round of the team (HH if none does), so that the
// edge's basis is formed as few times as keeps all threads busy in one round. The items fit for span >= nf HH / ts,
// so the search starts there (it runs once per prepare pass and team; from 1, its divisions were ~10 % of the
// forward's instructions).
KOKKOS_INLINE_FUNCTION int auto_prepare_span(int HH, int nf, int ts) {
  int span = (nf * HH + ts - 1) / ts;
  if (span < 1) span = 1;
  while (span < HH && HH % span != 0) ++span;
  return span < HH ? span : HH;
}
// The same for a compile-time HH (FixedDims): the divisors are constants, the search a few compares.
template <int HH>
KOKKOS_INLINE_FUNCTION int auto_prepare_span_fixed(int nf, int ts) {
  const int lo = (nf * HH + ts - 1) / ts;
  int span = HH;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int s = HH - 1; s >= 1; --s)
    if (HH % s == 0 && s >= lo) span = s;
  return span;
}

template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool TEAM_RADIAL>
KOKKOS_INLINE_FUNCTION auto InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::make_chunk(const member& team,
                                                                                        int adjoint, int S) const
    -> Chunk<TEAM_RADIAL> {
  const int C = prm.C, H = prm.H;
  const bool overlap = chunk_overlap(team.team_size());
  const Layout lo = layout(C, H, prm.dk, adjoint, S, TEAM_RADIAL ? radial_edges : 0, overlap, basis_edges);
  // mode 1 writes its end-of-atom arrays over the chunk; should Kokkos run several atoms per team in turn, the
  // previous atom must no longer read them
  if (TEAM_RADIAL) team.team_barrier();
  char* base = static_cast<char*>(team.team_scratch(0).get_shmem_aligned(lo.total, 32));
  auto at = [base](size_t off) { return reinterpret_cast<T*>(base + off); };
  Chunk<TEAM_RADIAL> ch;
  ch.radial_edges = TEAM_RADIAL ? radial_edges : CH;
  ch.basis_edges = TEAM_RADIAL && basis_edges > radial_edges ? basis_edges : ch.radial_edges;
  ch.geo = ST2(at(lo.geo), ch.basis_edges, kGeoCols);
  ch.lg = ST2(at(lo.lg), ch.basis_edges, kHeadCols);
  if (adjoint) ch.dlg = ST2(at(lo.dlg), ch.basis_edges, kHeadCols);
  if (adjoint == kPairScratch) ch.lg2 = ST2(at(lo.lg2), ch.basis_edges, kHeadCols);
  // (mode 1: rows padded to radial_hidden_stride, columns past basis_edges unused)
  const int hidden_cols = radial_hidden_stride(ch.basis_edges);
  ch.s = TEAM_RADIAL ? ST2(at(lo.s), H, hidden_cols) : ST2(at(lo.s), ch.basis_edges, H);
  ch.sd = TEAM_RADIAL ? ST2(at(lo.sd), H, hidden_cols) : ST2(at(lo.sd), ch.basis_edges, H);
  ch.other = SI1(reinterpret_cast<int*>(base + lo.other), ch.basis_edges);
  if (adjoint == kPairScratch) ch.other2 = SI1(reinterpret_cast<int*>(base + lo.other2), ch.basis_edges);
  if (TEAM_RADIAL) {
    ch.w = ST2(at(lo.w), ch.radial_edges, radial_cols(C));  // (columns past NW C unused)
    if (adjoint) ch.dw = ST2(at(lo.dw), ch.radial_edges, radial_cols(C));
  }
  ch.base = base;
  ch.overlap = overlap;
  ch.kind = adjoint;
  return ch;
}

// End-of-atom arrays, made where they are used (views held across the edge loop would cost registers).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool TEAM_RADIAL>
KOKKOS_INLINE_FUNCTION typename InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::scratch
InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::part_of(const Chunk<TEAM_RADIAL>& ch, int S) const {
  const Layout lo = layout(prm.C, prm.H, prm.dk, ch.kind, S, TEAM_RADIAL ? radial_edges : 0, ch.overlap, basis_edges);
  return scratch(reinterpret_cast<double*>(ch.base + lo.part), prm.C * S, part_cols(ch.kind, prm.dk));
}
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool TEAM_RADIAL>
KOKKOS_INLINE_FUNCTION typename InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::ST2
InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::buf_of(const Chunk<TEAM_RADIAL>& ch, int S) const {
  const Layout lo = layout(prm.C, prm.H, prm.dk, ch.kind, S, TEAM_RADIAL ? radial_edges : 0, ch.overlap, basis_edges);
  return ST2(reinterpret_cast<T*>(ch.base + lo.buf), prm.C * (S - 1), merge_cols(ch.kind != 0));
}

// Fills the basis chunk with the edges [start, start + n) of `atom` (receiver list, or sender list if SENDER;
// `left` edges remain, n = min(left, basis_edges)): geometry, hidden layer and, with attention, the per-(edge, head)
// terms (edge_head_terms; GRAD: the adjoint's). PAIR (receiver list): also each edge i <- j's reverse j <- i, its
// receiver other2 (reverse_receiver(j); -1: not an edge here) and, with attention, its softmax weight lg2. Mode 1:
// rows n..nf-1 (nf = n rounded up to the GEMM block) are zero non-edges. Ends with a barrier.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool SENDER, bool GRAD, bool PAIR, class Ch>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::prepare_basis(const member& team,
                                                                                           const Ch& ch, int atom,
                                                                                           int start,
                                                                                           int left) const {
  const int n = left < ch.basis_edges ? left : ch.basis_edges;
  const int nb = Ch::team_radial ? gemm_block(ch.radial_edges) : 1, nf = (n + nb - 1) / nb * nb;
  team.team_barrier();  // the previous chunk is no longer read
  // One pass over the items (edge t, hidden unit hh): each forms the edge geometry and the whole Bessel basis
  // itself (one sin/cos pair, bessel_basis) and its hidden unit; item hh = 0 also stores the geometry, and items
  // hh < A the attention terms of head hh (heads hh, hh + H, ... if H < A). This saves a barrier and keeps
  // the team from waiting on one thread per edge evaluating NB sin/cos pairs in series.
  // Mode 1 orders the items edges innermost: s(hh, t) is (H, basis_edges) there, and consecutive threads write
  // consecutive addresses. An item takes `span` hidden units of its edge: a one-thread team (host back-ends) all
  // H, so that it forms the edge's geometry, basis and attention terms once instead of H times; GPU teams
  // LayerParams::prepare_span (0: auto_prepare_span; 1: the items as described).
  const int ts = team.team_size();
  const int span = runs_on_host<exec> && ts == 1                               ? prm.H
                   : prm.prepare_span > 0 && prm.H % prm.prepare_span == 0 ? prm.prepare_span
                   : Dims::fixed && prm.H == Dims::H                         ? auto_prepare_span_fixed<Dims::H>(nf, ts)
                                                                             : auto_prepare_span(prm.H, nf, ts);
  const int groups = prm.H / span;
  auto hidden = [&](int hh, int t) -> T& { return Ch::team_radial ? ch.s(hh, t) : ch.s(t, hh); };
  auto hidden_d = [&](int hh, int t) -> T& { return Ch::team_radial ? ch.sd(hh, t) : ch.sd(t, hh); };
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nf * groups), [&](const int th) {
    const int t = Ch::team_radial ? th % nf : th / groups, h0 = (Ch::team_radial ? th / nf : th % groups) * span;
    if (Ch::team_radial && t >= n) {  // mode 1: zero rows up to the GEMM block, exact zeros for the GEMM
      if (h0 == 0) {
        ch.other(t) = -1;
        if (PAIR) ch.other2(t) = -1;
        for (int a = 0; a < kGeoCols; ++a) ch.geo(t, a) = T(0);
      }
      for (int hh = h0; hh < h0 + span; ++hh) hidden(hh, t) = hidden_d(hh, t) = T(0);
      return;
    }
    int i = atom, j;
    if (SENDER) {  // with sender groups the edge's own sender, an image of `atom` (else `atom` itself: no load)
      const int e = g.send_edges(start + t);
      i = g.edge_receiver(e);
      j = g.n_send >= 0 ? g.edge_sender(e) : atom;
    } else {
      j = g.edge_sender(start + t);
    }
    T r[3];
    for (int a = 0; a < 3; ++a) r[a] = g.x(j, a) - g.x(i, a);
    const T d = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    const bool edge = d > T(0) && d < prm.r_c;
    const int i2 = PAIR && edge ? reverse_receiver(j) : -1;
    T B[kMaxNB], dB[kMaxNB];
    if (edge)
      bessel_basis<kMaxNB>(d, prm.r_c, prm.NB, B, dB);
    else
      for (int nn = 0; nn < kMaxNB; ++nn) B[nn] = dB[nn] = T(0);
    if (h0 == 0) {
      ch.other(t) = edge ? (SENDER ? i : j) : -1;
      if (PAIR) ch.other2(t) = i2;
      const T inv_d = edge ? T(1) / d : T(0);
      for (int a = 0; a < 3; ++a) {
        ch.geo(t, a) = r[a];
        ch.geo(t, 4 + a) = r[a] * inv_d;
      }
      ch.geo(t, 3) = d;
      ch.geo(t, 7) = inv_d;
    }
    // heads g, g + groups, ... of item group g = h0 / span (one head per item while there are enough groups)
    if (ATTN && edge)
      for (int a = h0 / span; a < prm.A; a += groups) edge_head_terms<GRAD, PAIR>(ch, t, i, j, i2, a, d, B, dB);
    for (int hh = h0; hh < h0 + span; ++hh) {
      T& sv = hidden(hh, t);
      T& sdv = hidden_d(hh, t);
      if (!edge) {  // mode 1: exact zeros, so that the GEMM gives finite, unused outputs for non-edges
        if (Ch::team_radial) sv = sdv = T(0);
        continue;
      }
      T a = prm.b1(hh), da = T(0);
      for (int nn = 0; nn < kMaxNB; ++nn)
        if (nn < prm.NB) {
          a += prm.W1(hh, nn) * B[nn];
          if (GRAD) da += prm.W1(hh, nn) * dB[nn];
        }
      T ds;
      sv = silu(a, &ds);
      sdv = ds * da;
    }
  });
  team.team_barrier();
}

// Attention terms of chunk edge t = (i <- j), head a, at distance d with Bessel basis B and dB/dd, formed once
// per (edge, head) in the prepare pass (the C / A channel-threads of the head read them):
//   logit s = q_i . k_j / sqrt(dk) + Wg_a . B(d), envelope u(d);
//   forward (!GRAD): lg = s + log u, the online softmax's argument (kMaskedLogit where u <= 0: weight 0);
//   adjoint (GRAD):  lg = p = exp(s + log u - M_ia) / Z_ia (0 where u <= 0), dlg = d(s + log u)/dd (0 there);
//   PAIR (adjoint):  lg2 = the reverse edge i2 <- i's p (0 where i2 < 0); its dlg is the same (same d).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool GRAD, bool PAIR, class Ch>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::edge_head_terms(
    const Ch& ch, int t, int i, int j, int i2, int a, T d, const T* B, const T* dB) const {
  T s = T(0), s2 = T(0);  // (s2: the reverse edge's logit)
  for (int e = 0; e < prm.dk; ++e) {
    s += key(q, i, a, e) * key(k, j, a, e);
    if (PAIR && i2 >= 0) s2 += key(q, i2, a, e) * key(k, i, a, e);
  }
  s /= sqrt(T(prm.dk));
  if (PAIR) s2 /= sqrt(T(prm.dk));
  T dg = T(0);
  for (int n = 0; n < kMaxNB; ++n)  // compile-time bound: B and dB stay in registers
    if (n < prm.NB) {
      s += prm.Wg(a, n) * B[n];
      if (PAIR) s2 += prm.Wg(a, n) * B[n];
      if (GRAD) dg += prm.Wg(a, n) * dB[n];
    }
  T du;
  const T u = envelope(d, prm.r_c, &du);
  const bool inside = u > T(0);  // an edge whose u rounds to <= 0 next to r_c has weight 0
  if constexpr (GRAD) {
    ch.lg(t, a) = inside ? softmax_weight(i, a, s + log(u)) : T(0);
    ch.dlg(t, a) = inside ? du / u + dg : T(0);
    if (PAIR) ch.lg2(t, a) = inside && i2 >= 0 ? softmax_weight(i2, a, s2 + log(u)) : T(0);
  } else {
    ch.lg(t, a) = inside ? s + log(u) : T(kMaskedLogit);
  }
}

// p = exp(arg - M_ia) / Z_ia of receiver i, head a, for arg = s + log u of one of its edges: e = exp(arg - M) <= 1,
// and Z >= 1 once the receiver has an edge.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
KOKKOS_INLINE_FUNCTION T InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::softmax_weight(int i, int a,
                                                                                             T arg) const {
  const T inv = Z(i, a) > T(0) ? T(1) / Z(i, a) : T(0);
  return exp(arg - M(i, a)) * inv;
}

// The receiver of the reverse j <- i of an edge i <- j with sender j, if that edge is in this rank's graph: j itself
// for an owned atom, with sender groups the owned atom j is an image of (the same h, q, k); -1 for another rank's
// atom (its edges' sender terms are a ghost team's, interaction_backward).
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
KOKKOS_INLINE_FUNCTION int InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::reverse_receiver(int j) const {
  if (j < g.n_recv) return j;
  return g.n_send >= 0 ? g.image_owner(j - g.n_recv) : -1;
}

// Radial chunk [first, first + cnt) of a prepared basis chunk: mode 1 has the team compute its radial outputs into
// w (and dw) between barriers; mode 0 (one radial chunk per basis chunk, radial_edges = basis_edges) does nothing.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool GRAD, class Ch>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::radial_outputs(const member& team,
                                                                                            const Ch& ch, int first,
                                                                                            int cnt) const {
  if constexpr (Ch::team_radial) {
    const int nb = gemm_block(ch.radial_edges), nf = (cnt + nb - 1) / nb * nb;
    if (first > 0) team.team_barrier();  // the previous radial chunk is no longer read
    if (use_tensor_cores == kTensorCoresF16)
      radial_mma_f16<T, NW, GRAD>(team, prm, ch, first, nf);
    else if (use_tensor_cores)
      radial_mma<T, NW, GRAD>(team, prm, ch, first, nf);
    else if (nb == 4)
      radial_gemm<T, NW, GRAD, 4>(team, prm, ch, first, nf);
    else
      radial_gemm<T, NW, GRAD, 2>(team, prm, ch, first, nf);
    team.team_barrier();
  } else {
    (void)team, (void)ch, (void)first, (void)cnt;
  }
}

// Radial outputs of channel c for chunk edge t: mode 1 reads the team's results (forward only: the adjoint
// reads them in place, see with_edge_radial), mode 0 computes them.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool GRAD, class Ch>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::edge_radial(const Ch& ch, int c, int t,
                                                                                         T d,
                                                                                         EdgeRadial<T, P>& R) const {
  if constexpr (Ch::team_radial) {
    static_assert(!GRAD, "mode-1 adjoints read the radial outputs through RadialColumn");
    R.u = envelope(d, prm.r_c, &R.du);
    const int C = prm.C;
    const T* w = ch.radial_row(ch.w, t, C, c);
    for (int p = 0; p < P; ++p) {
      R.w[p] = w[p * C];
      R.wv[p] = ATTN ? w[(P + p) * C] : T(0);
      R.dw[p] = R.dwv[p] = T(0);
    }
  } else {
    radial_from_hidden<T, P, ATTN, GRAD>(prm, c, d, Kokkos::subview(ch.s, t, Kokkos::ALL()),
                                         Kokkos::subview(ch.sd, t, Kokkos::ALL()), R);
  }
}

}  // namespace kernels
}  // namespace batmobile
