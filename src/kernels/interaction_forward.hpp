// Forward kernel of one fused interaction layer (InteractionKernel's ForwardT tags, interaction_kernel.hpp): team i
// makes one pass over the edges of receiver i and computes m_i and (ATTN) o_i with an online softmax; it writes m,
// o, M, Z once (GPU path; the host path parks running sums in m, o between chunks). No atomics. Edge split: the S
// softmax states (M_s, Z_s, o_s) merge as M = max M_s, Z = sum Z_s e^(M_s - M).
#pragma once
#include "interaction_chunk.hpp"

namespace batmobile {
namespace kernels {

template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <bool TEAM_RADIAL>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::operator()(ForwardT<TEAM_RADIAL>,
                                                                                        const member& team) const {
  const int i = team.league_rank();
  const int C = prm.C, chead = C / prm.A;
  const int e0 = g.recv_offsets(i), e1 = g.recv_offsets(i + 1);
  T accm[K], acco[K], run_max, run_z;
  const int ts = team.team_size(), tr = team.team_rank();
  check_team_size<TEAM_RADIAL>(ts);
  const auto ch = make_chunk<TEAM_RADIAL>(team, false, edge_split(ts, C));
  if (ts >= C) {  // GPU: thread = (channel c, edge slot sl); slot sl takes the chunk edges t = sl (mod S)
    const int S = ts / C, c = tr % C, sl = tr / C;
    const int a = c / chead;
    for (int kk = 0; kk < K; ++kk) accm[kk] = acco[kk] = T(0);
    run_max = T(-1e30);
    run_z = T(0);
    for (int start = e0; start < e1; start += ch.radial_edges) {
      const int n = e1 - start < ch.radial_edges ? e1 - start : ch.radial_edges, first = basis_row(ch, e0, start);
      if (first == 0) prepare_basis<false, false>(team, ch, i, start, e1 - start);
      radial_outputs<false>(team, ch, first, n);
      for (int t = first + sl; t < first + n; t += S) forward_edge(i, c, a, ch, t, accm, acco, run_max, run_z);
    }
    if (S > 1) {
      if (TEAM_RADIAL) team.team_barrier();  // buf overlaps the last chunk
      merge_forward(team, buf_of(ch, S), S, c, sl, accm, acco, run_max, run_z);
    }
    if (sl == 0) forward_write(i, c, a, chead, accm, acco, run_max, run_z);
  } else {
    // host (one thread per team): channel loop inside each chunk; the running sums of a channel are parked
    // in m and o between chunks, the per-head softmax state (identical for all channels of a head) in hmax/hz
    for (int c = 0; c < C; ++c)
      for (int kk = 0; kk < K; ++kk) m(i, kk, c) = T(0);
    if (ATTN)
      for (int c = 0; c < C; ++c)
        for (int kk = 0; kk < K; ++kk) o(i, kk, c) = T(0);
    // per-channel softmax state: one (max, z) per head is identical for all channels of the head
    T hmax[kMaxHeads], hz[kMaxHeads];
    for (int a = 0; a < kMaxHeads; ++a) {
      hmax[a] = T(-1e30);
      hz[a] = T(0);
    }
    for (int start = e0; start < e1; start += ch.radial_edges) {
      const int n = e1 - start < ch.radial_edges ? e1 - start : ch.radial_edges, first = basis_row(ch, e0, start);
      if (first == 0) prepare_basis<false, false>(team, ch, i, start, e1 - start);
      radial_outputs<false>(team, ch, first, n);
      T nmax[kMaxHeads], nz[kMaxHeads];
      for (int c = 0; c < C; ++c) {
        const int a = c / chead;
        for (int kk = 0; kk < K; ++kk) {
          accm[kk] = m(i, kk, c);
          acco[kk] = ATTN ? o(i, kk, c) : T(0);
        }
        run_max = hmax[a];
        run_z = hz[a];
        for (int t = first; t < first + n; ++t) forward_edge(i, c, a, ch, t, accm, acco, run_max, run_z);
        for (int kk = 0; kk < K; ++kk) {
          m(i, kk, c) = accm[kk];
          if (ATTN) o(i, kk, c) = acco[kk];
        }
        nmax[a] = run_max;
        nz[a] = run_z;
      }
      for (int a = 0; a < prm.A; ++a) {
        hmax[a] = nmax[a];
        hz[a] = nz[a];
      }
    }
    for (int c = 0; c < C; ++c) {
      const int a = c / chead;
      for (int kk = 0; kk < K; ++kk) {
        accm[kk] = m(i, kk, c);
        acco[kk] = ATTN ? o(i, kk, c) : T(0);
      }
      forward_write(i, c, a, chead, accm, acco, hmax[a], hz[a]);
    }
  }
}

// One chunk edge t of channel c (head a) into the running sums accm (message) and, with attention, acco and the
// softmax state run_max, run_z.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
template <class Ch>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::forward_edge(int i, int c, int a,
                                                                                          const Ch& ch, int t,
                                                                                          T* accm, T* acco,
                                                                                          T& run_max,
                                                                                          T& run_z) const {
  const int j = ch.other(t);
  if (j < 0) return;
  const T d = ch.geo(t, 3);
  T Y[K], hj[K];
  sh_unit<L, T>(ch.geo(t, 4), ch.geo(t, 5), ch.geo(t, 6), Y);  // (the unit vector is in the chunk)
  load_h(j, c, hj);
  EdgeRadial<T, P> R;
  edge_radial<false>(ch, c, t, d, R);
  if constexpr (ATTN) {
    T v[K];
    for (int kk = 0; kk < K; ++kk) v[kk] = T(0);
    tp_fwd2<L, T, Paths>(hj, Y, R.w, R.wv, T(1), T(1), accm, v);
    // online softmax over s + log u (edge_head_terms); an edge whose u rounds to <= 0 next to r_c has weight 0
    const T s = ch.lg(t, a);
    if (s > T(kMaskedLogit)) {
      // one exponential per edge: of the rescale of the running sums and the edge's weight, the one whose argument
      // is not 0 (exp(0) = 1 exactly, so the sums are those of evaluating both)
      const bool new_max = s > run_max;
      const T e = exp(new_max ? run_max - s : s - run_max);
      const T corr = new_max ? e : T(1), wgt = new_max ? T(1) : e;
      run_z = run_z * corr + wgt;
      for (int kk = 0; kk < K; ++kk) acco[kk] = acco[kk] * corr + wgt * v[kk];
      run_max = new_max ? s : run_max;
    }
  } else {
    tp_fwd<L, false, Paths>(hj, Y, R.w, T(1), accm);
  }
}

// Slot 0 of channel c absorbs the partials of slots 1..S-1 (in this order): m adds; softmax states rescale to
// the common max. A slot that met no edge with u > 0 has run_z = 0, acco = 0 and gets weight exactly 0.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::merge_forward(
    const member& team, const ST2& buf, int S, int c, int sl, T* accm, T* acco, T& run_max, T& run_z) const {
  const T st[2] = {run_max, run_z};
  park(buf, prm.C, c, sl, 0, accm, K);
  if (ATTN) {
    park(buf, prm.C, c, sl, K, acco, K);
    park(buf, prm.C, c, sl, 2 * K, st, 2);
  }
  team.team_barrier();
  if (sl != 0) return;
  T mx = run_max;
  if (ATTN)
    for (int s = 1; s < S; ++s) {
      const T ms = buf((s - 1) * prm.C + c, 2 * K);
      mx = ms > mx ? ms : mx;
    }
  const T w0 = run_z > T(0) ? exp(run_max - mx) : T(0);
  run_z *= w0;
  for (int kk = 0; kk < K; ++kk) acco[kk] *= w0;
  for (int s = 1; s < S; ++s) {
    const int row = (s - 1) * prm.C + c;
    for (int kk = 0; kk < K; ++kk) accm[kk] += buf(row, kk);
    if (ATTN) {
      const T zs = buf(row, 2 * K + 1);
      const T ws = zs > T(0) ? exp(buf(row, 2 * K) - mx) : T(0);
      run_z += ws * zs;
      for (int kk = 0; kk < K; ++kk) acco[kk] += ws * buf(row, K + kk);
    }
  }
  run_max = mx;
}

// m_i, o_i of channel c and (its head's first channel) the softmax state M, Z.
template <class T, class Device, int L, bool ATTN, int DKM, int ROLE, class Dims>
KOKKOS_INLINE_FUNCTION void InteractionKernel<T, Device, L, ATTN, DKM, ROLE, Dims>::forward_write(
    int i, int c, int a, int chead, const T* accm, const T* acco, T run_max, T run_z) const {
  for (int kk = 0; kk < K; ++kk) m(i, kk, c) = prm.inv_avg * accm[kk];
  if constexpr (ATTN) {
    // run_z >= 1 once an edge was seen (its max edge has weight 1); no edges: o = 0
    const T inv = run_z > T(0) ? T(1) / run_z : T(0);
    for (int kk = 0; kk < K; ++kk) o(i, kk, c) = acco[kk] * inv;
    if (c % chead == 0) {
      M(i, a) = run_max;
      Z(i, a) = run_z;
    }
  }
}

}  // namespace kernels
}  // namespace batmobile
