// Fused interaction (docs/model.md step 1) and on-the-fly attention (step 2) of one layer, forward and adjoint.
//
// Layouts (all Kokkos::LayoutRight, T = float or double):
//   h  (n_total, K, C)  node features, K = (L+1)^2, channels innermost (ghost atoms included)
//   m  (n_recv, K, C)   message  m_i = inv_avg * sum_j TP(h_j, w(d_ij))
//   o  (n_recv, K, C)   attention output o_i (step 2 of docs/model.md)
//   M, Z (n_recv, A)    per-(receiver, head) softmax state, saved for the adjoint: M = max_j (s_ij + log u_ij),
//                       Z = sum_j exp(s_ij + log u_ij - M) (>= 1 with edges, 0 without)
//   q  (n_recv, A*dk), k (n_total, A*dk)   projections of h[.][0] (workspace)
//   f  (n_total, 3), vatom (n_total, 6) double: forces and per-atom virial (xx, yy, zz, xy, xz, yz),
//      ACCUMULATED (+=) by the adjoint; per-edge virial W_e = -(r (x) g + g (x) r) / 2,
//      g = dE/dr_ij, is split half to each atom.
//   gh (n_total, K, C)  dE/dh, ACCUMULATED (+=) by the adjoint.
// LayerParams: W1 (H, NB), b1 (H), W2t (H, 2 P C) = transpose of radial.W2 (so that channel-threads read
//   consecutive addresses), Wg (A, NB), Wq, Wk (A*dk, C), r_c, inv_avg = 1 / avg_num_neighbors.
//   make_layer_params() builds it from host arrays in the model-file shapes.
//
// Kernels (tagged functors; one team per atom; on GPUs team_size = C * S threads, thread tr works on channel
// c = tr % C and edge slot s = tr / C ("edge split" S >= 1); on host back-ends one thread loops over channels).
// Edges are processed in chunks of CH = 16: the team first computes, once per edge, the geometry, Bessel basis
// and the radial MLP hidden layer into team scratch (shared by all channels); then every channel computes its
// own radial-MLP outputs, SH, CG products and logit in registers; with S > 1, slot s takes the chunk edges
// t = s (mod S) and the S per-thread partials of a channel are merged in team scratch at the end of the atom, in
// the fixed order s = 0..S-1 (deterministic). No per-edge tensor goes to global memory:
//   InteractionKernel::Forward   team i: one pass over the edges of receiver i computes m_i and (ATTN) o_i
//                                with an online softmax; writes m, o, M, Z once (GPU path; the host path parks
//                                running sums in m, o between chunks). No atomics. Edge split: the S softmax
//                                states (M_s, Z_s, o_s) merge as M = max M_s, Z = sum Z_s e^(M_s - M).
//   InteractionKernel::RecvAdj   team i: recomputes each edge, dE/dr_ij from gm, go; accumulates the
//                                receiver force, half the per-edge virial and dE/dq_i (team reduction).
//   InteractionKernel::SendAdj   team j (any atom incl. ghosts): loops over edges with sender j (sender CSR),
//                                recomputes them; dE/dh_j (gather), sender force, half virial, dE/dk_j.
//   ProjectQK (+ ::Adjoint)      node kernels: q, k = Wq, Wk . h[.][0] and gh[.][0] += Wq^T gq + Wk^T gk.
// Host drivers: interaction_forward(), interaction_backward() (workspace in InteractionWork; optional team_size:
// 0 = automatic (host: 1; GPU: C * S with S = 128 / C, at least 1, team <= 256, lowered until the team scratch
// fits scratch_size_max(0) and the team fits team_size_max), 1 = one thread per team, C * S = edge split S).
// Parameter gradients are not computed (not needed at run time).
#pragma once
#include <string>
#include <vector>

#include "graph.hpp"
#include "sh.hpp"
#include "tp.hpp"

namespace batmobile {
namespace kernels {

inline constexpr int kMaxNB = 16;  // radial basis size bound (register arrays)
inline constexpr int kMaxDk = 32;  // attention key width bound
inline constexpr int kMaxHeads = 64;

template <class T, class Device>
struct LayerParams {
  using V1 = Kokkos::View<const T*, Device>;
  using V2 = Kokkos::View<const T**, Kokkos::LayoutRight, Device>;
  V2 W1, W2t, Wg, Wq, Wk;
  V1 b1;
  T r_c = 5, inv_avg = 1;
  int C = 0, NB = 0, H = 0, A = 1, dk = 1;
};

// Host arrays in model-file shapes (row-major): W1 (H, NB), b1 (H), W2 (2PC, H), Wg (A, NB), Wq, Wk (A dk, C).
template <class T, class Device, int L>
LayerParams<T, Device> make_layer_params(int C, int NB, int H, int A, int dk, double r_c, double avg_num_neighbors,
                                         const std::vector<double>& W1, const std::vector<double>& b1,
                                         const std::vector<double>& W2, const std::vector<double>& Wg,
                                         const std::vector<double>& Wq, const std::vector<double>& Wk) {
  constexpr int P = num_paths(L, false);
  if (NB > kMaxNB || dk > kMaxDk || A > kMaxHeads || C % A != 0) throw std::invalid_argument("make_layer_params: unsupported sizes");
  auto mk = [](const std::vector<double>& src, int rows, int cols, bool transpose, const char* name) {
    Kokkos::View<T**, Kokkos::LayoutRight, Device> d(std::string(name), transpose ? cols : rows, transpose ? rows : cols);
    if (src.size() != size_t(rows) * cols) throw std::invalid_argument(std::string("bad size: ") + name);
    auto hm = Kokkos::create_mirror_view(d);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) (transpose ? hm(c, r) : hm(r, c)) = T(src[size_t(r) * cols + c]);
    Kokkos::deep_copy(d, hm);
    return d;
  };
  LayerParams<T, Device> p;
  p.W1 = mk(W1, H, NB, false, "W1");
  p.W2t = mk(W2, 2 * P * C, H, true, "W2t");
  p.Wg = mk(Wg, A, NB, false, "Wg");
  p.Wq = mk(Wq, A * dk, C, false, "Wq");
  p.Wk = mk(Wk, A * dk, C, false, "Wk");
  auto b = mk(b1, 1, H, false, "b1");
  p.b1 = Kokkos::subview(b, 0, Kokkos::ALL());
  p.r_c = T(r_c);
  p.inv_avg = T(1.0 / avg_num_neighbors);
  p.C = C;
  p.NB = NB;
  p.H = H;
  p.A = A;
  p.dk = dk;
  return p;
}

// Per-edge radial quantities of one channel, computed in registers from the team-shared hidden layer.
template <class T, int P>
struct EdgeRadial {
  T w[P], wv[P], dw[P], dwv[P];  // weights and their d/dd (envelope included)
  T u, du;                        // envelope
};

// w = u(d) * W2 . s, with s = silu(W1 . B(d) + b1) precomputed per edge (shared by the team) and
// sd = d s / d d; only this channel's output columns of W2 (read from W2t) are touched.
template <class T, int P, bool TWO, bool GRAD, class Params, class Row>
KOKKOS_INLINE_FUNCTION void radial_from_hidden(const Params& prm, int c, T d, const Row& s, const Row& sd,
                                               EdgeRadial<T, P>& R) {
  R.u = envelope(d, prm.r_c, &R.du);
  T raw[P], rawv[P], draw[P], drawv[P];
  for (int p = 0; p < P; ++p) raw[p] = rawv[p] = draw[p] = drawv[p] = T(0);
  const int PC = P * prm.C;
  for (int hh = 0; hh < prm.H; ++hh) {
    const T sv = s(hh);
    const T dv = GRAD ? sd(hh) : T(0);
    for (int p = 0; p < P; ++p) {
      const T t = prm.W2t(hh, p * prm.C + c);
      raw[p] += t * sv;
      if (GRAD) draw[p] += t * dv;
      if (TWO) {
        const T tv = prm.W2t(hh, PC + p * prm.C + c);
        rawv[p] += tv * sv;
        if (GRAD) drawv[p] += tv * dv;
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    R.w[p] = R.u * raw[p];
    R.wv[p] = R.u * rawv[p];
    R.dw[p] = R.du * raw[p] + R.u * draw[p];
    R.dwv[p] = R.du * rawv[p] + R.u * drawv[p];
  }
}

template <class T, class Device, int L, bool ATTN>
struct InteractionKernel {
  static constexpr int K = num_sh(L);
  static constexpr int P = num_paths(L, false);
  static constexpr int NV = 9 + kMaxDk;  // per-channel partials reduced per team: force, virial, dq/dk
  static constexpr int CH = 16;          // edges per chunk whose Bessel basis and hidden layer the team shares
  using exec = typename Device::execution_space;
  using V3 = Kokkos::View<T***, Kokkos::LayoutRight, Device>;
  using CV3 = Kokkos::View<const T***, Kokkos::LayoutRight, Device>;
  using V2 = Kokkos::View<T**, Kokkos::LayoutRight, Device>;
  using D2 = Kokkos::View<double**, Kokkos::LayoutRight, Device>;
  using member = typename Kokkos::TeamPolicy<exec>::member_type;
  using sspace = typename exec::scratch_memory_space;
  using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  using scratch = Kokkos::View<double**, Kokkos::LayoutRight, sspace, unmanaged>;
  using ST2 = Kokkos::View<T**, Kokkos::LayoutRight, sspace, unmanaged>;
  using SI1 = Kokkos::View<int*, sspace, unmanaged>;
  struct Forward {};
  struct RecvAdj {};
  struct SendAdj {};

  // Team-shared per-edge data of one chunk: geometry (r, d), the other atom of the edge (-1: not an edge),
  // Bessel basis and its derivative, hidden activations s and ds/dd.
  struct Chunk {
    ST2 geo, B, dB, s, sd;
    SI1 other;
  };

  Graph<T, Device> g;
  LayerParams<T, Device> prm;
  CV3 h;
  V3 m, o;     // forward outputs (o is read by the adjoint)
  V2 M, Z;     // saved softmax statistics
  V2 q, k;     // projections
  CV3 gm, go;  // upstream gradients (receivers)
  V3 gh;       // dE/dh (accumulated)
  V2 gq, gk;   // dE/dq, dE/dk (written)
  D2 f, vatom;

  static size_t chunk_bytes(int H) {
    return ST2::shmem_size(CH, 4) + 2 * ST2::shmem_size(CH, kMaxNB) + 2 * ST2::shmem_size(CH, H) +
           SI1::shmem_size(CH);
  }
  // Columns of a parked partial of edge slot s > 0: forward m (K), o (K), run_max, run_z; adjoint dE/dh_j (K).
  KOKKOS_INLINE_FUNCTION static constexpr int merge_cols(bool adjoint) { return adjoint ? K : 2 * K + 2; }
  // Per-team scratch for edge split S (S = 1: host or one thread per channel): chunk, the (C S) rows of adjoint
  // partials, and the partials of slots 1..S-1 parked for the merge.
  static size_t scratch_bytes(int C, int H, int dk, bool adjoint, int S = 1) {
    return chunk_bytes(H) + (adjoint ? scratch::shmem_size(size_t(C) * S, 9 + dk) : 0) +
           (S > 1 ? ST2::shmem_size(size_t(C) * (S - 1), merge_cols(adjoint)) : 0) + 512;  // + alignment slack
  }

  KOKKOS_INLINE_FUNCTION void check_team_size(int ts) const {
    if (ts != 1 && (ts < prm.C || ts % prm.C != 0)) Kokkos::abort("batmobile: team size must be 1 or C * S");
  }

  // Slots s = 1..S-1 park n values (per channel) in rows (s - 1) C + c of buf; after the barrier slot 0 reads them.
  KOKKOS_INLINE_FUNCTION static void park(const ST2& buf, int C, int c, int slot, int col0, const T* v, int n) {
    if (slot > 0)
      for (int x = 0; x < n; ++x) buf((slot - 1) * C + c, col0 + x) = v[x];
  }

  KOKKOS_INLINE_FUNCTION Chunk make_chunk(const member& team) const {
    Chunk ch;
    ch.geo = ST2(team.team_scratch(0), CH, 4);
    ch.B = ST2(team.team_scratch(0), CH, kMaxNB);
    ch.dB = ST2(team.team_scratch(0), CH, kMaxNB);
    ch.s = ST2(team.team_scratch(0), CH, prm.H);
    ch.sd = ST2(team.team_scratch(0), CH, prm.H);
    ch.other = SI1(team.team_scratch(0), CH);
    return ch;
  }

  // Fills the chunk for edges [start, start + n) of `atom` (receiver list, or sender list if SENDER).
  template <bool SENDER, bool GRAD>
  KOKKOS_INLINE_FUNCTION void prepare_chunk(const member& team, const Chunk& ch, int atom, int start, int n) const {
    team.team_barrier();  // the previous chunk is no longer read
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](const int t) {
      int i = atom, j;
      if (SENDER) {
        const int e = g.send_edges(start + t);
        i = g.edge_receiver(e);
        j = atom;
      } else {
        j = g.edge_sender(start + t);
      }
      T r[3];
      for (int a = 0; a < 3; ++a) r[a] = g.x(j, a) - g.x(i, a);
      const T d = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
      const bool edge = d > T(0) && d < prm.r_c;
      ch.other(t) = edge ? (SENDER ? i : j) : -1;
      for (int a = 0; a < 3; ++a) ch.geo(t, a) = r[a];
      ch.geo(t, 3) = d;
      for (int nn = 0; nn < kMaxNB; ++nn) {
        T b = T(0), db = T(0);
        if (edge && nn < prm.NB) bessel(nn + 1, d, prm.r_c, &b, &db);
        ch.B(t, nn) = b;
        ch.dB(t, nn) = db;
      }
    });
    team.team_barrier();
    const int H = prm.H;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n * H), [&](const int th) {
      const int t = th / H, hh = th % H;
      if (ch.other(t) < 0) return;
      T a = prm.b1(hh), da = T(0);
      for (int nn = 0; nn < kMaxNB; ++nn)
        if (nn < prm.NB) {
          a += prm.W1(hh, nn) * ch.B(t, nn);
          if (GRAD) da += prm.W1(hh, nn) * ch.dB(t, nn);
        }
      T ds;
      ch.s(t, hh) = silu(a, &ds);
      ch.sd(t, hh) = ds * da;
    });
    team.team_barrier();
  }

  KOKKOS_INLINE_FUNCTION void load_h(int j, int c, T* hj) const {
    for (int kk = 0; kk < K; ++kk) hj[kk] = h(j, kk, c);
  }

  KOKKOS_INLINE_FUNCTION T logit(int i, int j, int a, const Chunk& ch, int t, T* dg) const {
    T s = T(0);
    for (int e = 0; e < kMaxDk; ++e)
      if (e < prm.dk) s += q(i, a * prm.dk + e) * k(j, a * prm.dk + e);
    s /= sqrt(T(prm.dk));
    T gte = T(0), dgte = T(0);
    for (int n = 0; n < kMaxNB; ++n)
      if (n < prm.NB) {
        gte += prm.Wg(a, n) * ch.B(t, n);
        dgte += prm.Wg(a, n) * ch.dB(t, n);
      }
    *dg = dgte;
    return s + gte;
  }

  KOKKOS_INLINE_FUNCTION void operator()(Forward, const member& team) const {
    const int i = team.league_rank();
    const int C = prm.C, chead = C / prm.A;
    const int e0 = g.recv_offsets(i), e1 = g.recv_offsets(i + 1);
    const Chunk ch = make_chunk(team);
    T accm[K], acco[K], run_max, run_z;
    const int ts = team.team_size(), tr = team.team_rank();
    check_team_size(ts);
    if (ts >= C) {  // GPU: thread = (channel c, edge slot sl); slot sl takes the chunk edges t = sl (mod S)
      const int S = ts / C, c = tr % C, sl = tr / C;
      const int a = c / chead;
      const ST2 buf = S > 1 ? ST2(team.team_scratch(0), C * (S - 1), merge_cols(false)) : ST2();
      for (int kk = 0; kk < K; ++kk) accm[kk] = acco[kk] = T(0);
      run_max = T(-1e30);
      run_z = T(0);
      for (int start = e0; start < e1; start += CH) {
        const int n = e1 - start < CH ? e1 - start : CH;
        prepare_chunk<false, false>(team, ch, i, start, n);
        for (int t = sl; t < n; t += S) forward_edge(i, c, a, ch, t, accm, acco, run_max, run_z);
      }
      if (S > 1) merge_forward(team, buf, S, c, sl, accm, acco, run_max, run_z);
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
      for (int start = e0; start < e1; start += CH) {
        const int n = e1 - start < CH ? e1 - start : CH;
        prepare_chunk<false, false>(team, ch, i, start, n);
        T nmax[kMaxHeads], nz[kMaxHeads];
        for (int c = 0; c < C; ++c) {
          const int a = c / chead;
          for (int kk = 0; kk < K; ++kk) {
            accm[kk] = m(i, kk, c);
            acco[kk] = ATTN ? o(i, kk, c) : T(0);
          }
          run_max = hmax[a];
          run_z = hz[a];
          for (int t = 0; t < n; ++t) forward_edge(i, c, a, ch, t, accm, acco, run_max, run_z);
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

  KOKKOS_INLINE_FUNCTION void forward_edge(int i, int c, int a, const Chunk& ch, int t, T* accm, T* acco, T& run_max,
                                           T& run_z) const {
    const int j = ch.other(t);
    if (j < 0) return;
    const T r[3] = {ch.geo(t, 0), ch.geo(t, 1), ch.geo(t, 2)};
    const T d = ch.geo(t, 3);
    T Y[K], hj[K];
    sh<L, T>(r, Y);
    load_h(j, c, hj);
    EdgeRadial<T, P> R;
    radial_from_hidden<T, P, ATTN, false>(prm, c, d, Kokkos::subview(ch.s, t, Kokkos::ALL()),
                                         Kokkos::subview(ch.sd, t, Kokkos::ALL()), R);
    if constexpr (ATTN) {
      T v[K];
      for (int kk = 0; kk < K; ++kk) v[kk] = T(0);
      tp_fwd2<L, T>(hj, Y, R.w, R.wv, T(1), T(1), accm, v);
      T dg;
      // online softmax over s + log u; an edge whose u rounds to <= 0 next to r_c has weight 0
      if (R.u > T(0)) {
        const T s = logit(i, j, a, ch, t, &dg) + log(R.u);
        const T new_max = s > run_max ? s : run_max;
        const T corr = exp(run_max - new_max);
        const T wgt = exp(s - new_max);
        run_z = run_z * corr + wgt;
        for (int kk = 0; kk < K; ++kk) acco[kk] = acco[kk] * corr + wgt * v[kk];
        run_max = new_max;
      }
    } else {
      tp_fwd<L, false, T>(hj, Y, R.w, T(1), accm);
    }
  }

  // Slot 0 of channel c absorbs the partials of slots 1..S-1 (in this order): m adds; softmax states rescale to
  // the common max. A slot that met no edge with u > 0 has run_z = 0, acco = 0 and gets weight exactly 0.
  KOKKOS_INLINE_FUNCTION void merge_forward(const member& team, const ST2& buf, int S, int c, int sl, T* accm,
                                            T* acco, T& run_max, T& run_z) const {
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

  KOKKOS_INLINE_FUNCTION void forward_write(int i, int c, int a, int chead, const T* accm, const T* acco, T run_max,
                                            T run_z) const {
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

  // dE/dr_ij of channel c for chunk edge t = (i <- j) and, for the sender side, dE/dh_j; also dE/ds.
  template <bool SENDER>
  KOKKOS_INLINE_FUNCTION void edge_adjoint(int i, int j, int c, int a, const Chunk& ch, int t, const T* r, T d,
                                           T* gr, T* ghj, T* gs_out) const {
    T Y[K], hj[K], gmi[K], goi[K];
    sh<L, T>(r, Y);
    load_h(j, c, hj);
    for (int kk = 0; kk < K; ++kk) gmi[kk] = gm(i, kk, c);
    EdgeRadial<T, P> R;
    radial_from_hidden<T, P, ATTN, true>(prm, c, d, Kokkos::subview(ch.s, t, Kokkos::ALL()),
                                        Kokkos::subview(ch.sd, t, Kokkos::ALL()), R);
    T gY[K], gw[P], gwv[P];
    for (int kk = 0; kk < K; ++kk) gY[kk] = T(0);
    for (int p = 0; p < P; ++p) gw[p] = gwv[p] = T(0);
    T gd = T(0), gs = T(0), pw = T(0);
    if constexpr (ATTN) {
      T dg;
      const T s = logit(i, j, a, ch, t, &dg);
      const bool inside = R.u > T(0);
      const T ex = inside ? exp(s + log(R.u) - M(i, a)) : T(0);  // e_ij = exp(s + log u - M) <= 1
      const T inv = Z(i, a) > T(0) ? T(1) / Z(i, a) : T(0);       // Z >= 1 once the receiver has an edge
      pw = ex * inv;
      T v[K], dummy[K];
      for (int kk = 0; kk < K; ++kk) v[kk] = dummy[kk] = T(0);
      tp_fwd2<L, T>(hj, Y, R.w, R.wv, T(0), T(1), dummy, v);
      T tt = T(0);
      for (int kk = 0; kk < K; ++kk) {
        goi[kk] = go(i, kk, c);
        const T oo = o(i, kk, c);
        tt += goi[kk] * (v[kk] - oo);
      }
      const T ge = tt * inv;  // dE/d(e_ij); o does not depend on M, so no gradient flows through it
      gs = ge * ex;           // de/ds = e, de/du = e / u
      if (inside) gd += gs * (R.du / R.u) + gs * dg;
    } else {
      for (int kk = 0; kk < K; ++kk) goi[kk] = T(0);
    }
    tp_adjoint<L, false, SENDER, ATTN, T>(hj, Y, R.w, R.wv, gmi, goi, prm.inv_avg, pw, ghj, gY, gw, gwv);
    for (int p = 0; p < P; ++p) {
      gd += gw[p] * R.dw[p];
      if (ATTN) gd += gwv[p] * R.dwv[p];
    }
    for (int b = 0; b < 3; ++b) gr[b] = gd * r[b] / d;
    sh_vjp<L, T>(r, gY, gr);
    *gs_out = gs;
  }

  KOKKOS_INLINE_FUNCTION static void tally_virial(double* acc, const T* r, const T* gr) {
    add_half_edge_virial(acc + 3, r, gr);
  }

  // One chunk edge of the adjoint for channel c: accumulates force/virial/dq-or-dk partials (and ghj).
  template <bool SENDER>
  KOKKOS_INLINE_FUNCTION void adjoint_edge(int atom, int c, int a, const Chunk& ch, int t, double* acc,
                                           T* ghj) const {
    const int other = ch.other(t);
    if (other < 0) return;
    const int i = SENDER ? other : atom, j = SENDER ? atom : other;
    const T r[3] = {ch.geo(t, 0), ch.geo(t, 1), ch.geo(t, 2)};
    const T d = ch.geo(t, 3);
    T gr[3], gs;
    edge_adjoint<SENDER>(i, j, c, a, ch, t, r, d, gr, ghj, &gs);
    // F_i = -dE/dx_i = +dE/dr_ij (receiver), F_j = -dE/dr_ij (sender)
    for (int b = 0; b < 3; ++b) acc[b] += SENDER ? -double(gr[b]) : double(gr[b]);
    tally_virial(acc, r, gr);
    if constexpr (ATTN) {
      const T sdk = T(1) / sqrt(T(prm.dk));
      for (int x = 0; x < kMaxDk; ++x)
        if (x < prm.dk) acc[9 + x] += double(gs * sdk * (SENDER ? q(i, a * prm.dk + x) : k(j, a * prm.dk + x)));
    }
  }

  // Sum the per-thread partials of the team (row sl C + c: edge slot sl, channel c; fixed order) and write the
  // per-atom results.
  KOKKOS_INLINE_FUNCTION void team_finish(const member& team, const scratch& part, int n, bool sender) const {
    team.team_barrier();
    const int C = prm.C, chead = C / prm.A, adk = prm.A * prm.dk, S = int(part.extent(0)) / C;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, 9 + adk), [&](const int v) {
      if (v < 9) {
        double s = 0;
        for (int row = 0; row < S * C; ++row) s += part(row, v);
        if (v < 3)
          f(n, v) += s;
        else
          vatom(n, v - 3) += s;
      } else if (ATTN) {
        const int a = (v - 9) / prm.dk, e = (v - 9) % prm.dk;
        double s = 0;
        for (int sl = 0; sl < S; ++sl)
          for (int c = a * chead; c < (a + 1) * chead; ++c) s += part(sl * C + c, 9 + e);
        (sender ? gk : gq)(n, v - 9) = T(s);
      }
    });
  }

  template <bool SENDER>
  KOKKOS_INLINE_FUNCTION void adjoint_team(const member& team) const {
    const int atom = team.league_rank();
    const int C = prm.C, chead = C / prm.A;
    const int ts = team.team_size(), tr = team.team_rank();
    check_team_size(ts);
    const int S = ts >= C ? ts / C : 1;
    const Chunk ch = make_chunk(team);
    scratch part(team.team_scratch(0), C * S, 9 + prm.dk);
    const int s0 = SENDER ? g.send_offsets(atom) : g.recv_offsets(atom);
    const int s1 = SENDER ? g.send_offsets(atom + 1) : g.recv_offsets(atom + 1);
    if (ts >= C) {  // GPU: thread = (channel c, edge slot sl), partials in registers across chunks
      const int c = tr % C, sl = tr / C;
      double acc[NV];
      for (int v = 0; v < NV; ++v) acc[v] = 0;
      T ghj[K];
      for (int kk = 0; kk < K; ++kk) ghj[kk] = T(0);
      for (int start = s0; start < s1; start += CH) {
        const int n = s1 - start < CH ? s1 - start : CH;
        prepare_chunk<SENDER, true>(team, ch, atom, start, n);
        for (int t = sl; t < n; t += S) adjoint_edge<SENDER>(atom, c, c / chead, ch, t, acc, ghj);
      }
      for (int v = 0; v < 9 + prm.dk; ++v) part(tr, v) = acc[v];
      if (SENDER) {  // dE/dh_j: slot 0 sums the S partials of channel c and writes gh once
        if (S > 1) {
          const ST2 buf(team.team_scratch(0), C * (S - 1), merge_cols(true));
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
      for (int c = 0; c < C; ++c)
        for (int v = 0; v < 9 + prm.dk; ++v) part(c, v) = 0;
      for (int start = s0; start < s1; start += CH) {
        const int n = s1 - start < CH ? s1 - start : CH;
        prepare_chunk<SENDER, true>(team, ch, atom, start, n);
        for (int c = 0; c < C; ++c) {
          double acc[NV];
          for (int v = 0; v < NV; ++v) acc[v] = 0;
          T ghj[K];
          for (int kk = 0; kk < K; ++kk) ghj[kk] = T(0);
          for (int t = 0; t < n; ++t) adjoint_edge<SENDER>(atom, c, c / chead, ch, t, acc, ghj);
          if (SENDER)
            for (int kk = 0; kk < K; ++kk) gh(atom, kk, c) += ghj[kk];
          for (int v = 0; v < 9 + prm.dk; ++v) part(c, v) += acc[v];
        }
      }
    }
    team_finish(team, part, atom, SENDER);
  }

  KOKKOS_INLINE_FUNCTION void operator()(RecvAdj, const member& team) const { adjoint_team<false>(team); }
  KOKKOS_INLINE_FUNCTION void operator()(SendAdj, const member& team) const { adjoint_team<true>(team); }
};

// q(n) = Wq . h(n, 0, :) for receivers, k(n) = Wk . h(n, 0, :) for all atoms; and the adjoint.
template <class T, class Device>
struct ProjectQK {
  struct Adjoint {};
  Kokkos::View<const T***, Kokkos::LayoutRight, Device> h;
  Kokkos::View<T***, Kokkos::LayoutRight, Device> gh;
  Kokkos::View<const T**, Kokkos::LayoutRight, Device> Wq, Wk;
  Kokkos::View<T**, Kokkos::LayoutRight, Device> q, k, gq, gk;
  int n_recv, C, adk;
  KOKKOS_INLINE_FUNCTION void operator()(const int n, const int x) const {
    T sq = 0, sk = 0;
    for (int c = 0; c < C; ++c) {
      const T hv = h(n, 0, c);
      sk += Wk(x, c) * hv;
      if (n < n_recv) sq += Wq(x, c) * hv;
    }
    k(n, x) = sk;
    if (n < n_recv) q(n, x) = sq;
  }
  KOKKOS_INLINE_FUNCTION void operator()(Adjoint, const int n, const int c) const {
    T s = 0;
    for (int x = 0; x < adk; ++x) {
      s += Wk(x, c) * gk(n, x);
      if (n < n_recv) s += Wq(x, c) * gq(n, x);
    }
    gh(n, 0, c) += s;
  }
};

template <class T, class Device>
struct InteractionWork {
  Kokkos::View<T**, Kokkos::LayoutRight, Device> q, k, M, Z, gq, gk;
  void resize(int n_recv, int n_total, int A, int dk) {
    if (int(q.extent(0)) != n_recv || int(k.extent(0)) != n_total || int(M.extent(1)) != A ||
        int(q.extent(1)) != A * dk) {
      q = decltype(q)("q", n_recv, A * dk);
      gq = decltype(q)("gq", n_recv, A * dk);
      k = decltype(q)("k", n_total, A * dk);
      gk = decltype(q)("gk", n_total, A * dk);
      M = decltype(q)("M", n_recv, A);
      Z = decltype(q)("Z", n_recv, A);
    }
  }
};

// Team policy of kernel `kern` for n atoms. team_size: 0 = automatic (host back-ends: 1, channels looped; GPU:
// C * S, S = 128 / C (>= 1) edge slots, team <= 256, S lowered until the scratch fits scratch_size_max(0) and the
// team fits team_size_max); 1 or C * S: explicit (tests run the GPU paths on OpenMP with it).
template <class Tag, class Kern>
inline Kokkos::TeamPolicy<typename Kern::exec, Tag> atom_team_policy(const Kern& kern, int n, bool adjoint,
                                                                     int team_size = 0) {
  using Pol = Kokkos::TeamPolicy<typename Kern::exec, Tag>;
  const int C = kern.prm.C, H = kern.prm.H, dk = kern.prm.dk;
  const bool host =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Kern::exec::memory_space>::accessible;
  const size_t limit = size_t(Pol::scratch_size_max(0));
  if (team_size == 0 && !host) {
    const int tmax = Pol(1, 1).team_size_max(kern, Kokkos::ParallelForTag());
    int S = 128 / C > 1 ? 128 / C : 1;
    while (S > 1 && (C * S > 256 || C * S > tmax || Kern::scratch_bytes(C, H, dk, adjoint, S) > limit)) --S;
    team_size = C * S;
  } else if (team_size == 0) {
    team_size = 1;
  }
  if (team_size != 1 && (team_size < C || team_size % C != 0))
    throw std::invalid_argument("batmobile: team size must be 1 or a multiple of C");
  const int S = team_size >= C ? team_size / C : 1;
  const size_t bytes = Kern::scratch_bytes(C, H, dk, adjoint, S);
  // host team scratch is ordinary memory; on GPUs it is the shared memory of one block
  if (!host && bytes > limit)
    throw std::invalid_argument("batmobile: interaction team scratch " + std::to_string(bytes) + " B exceeds " +
                                std::to_string(limit) + " B (lower team_size)");
  return Pol(n, team_size).set_scratch_size(0, Kokkos::PerTeam(bytes));
}

// Forward of one layer: m (and, if ATTN, o, saving M and Z in work).
template <class T, class Device, int L, bool ATTN>
void interaction_forward(const Graph<T, Device>& g, const LayerParams<T, Device>& prm,
                         const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& h,
                         const Kokkos::View<T***, Kokkos::LayoutRight, Device>& m,
                         const Kokkos::View<T***, Kokkos::LayoutRight, Device>& o, InteractionWork<T, Device>& work,
                         int team_size = 0) {
  using exec = typename Device::execution_space;
  using Kern = InteractionKernel<T, Device, L, ATTN>;
  work.resize(g.n_recv, g.n_total, prm.A, prm.dk);
  if (ATTN) {
    ProjectQK<T, Device> pq{h, {}, prm.Wq, prm.Wk, work.q, work.k, work.gq, work.gk, g.n_recv, prm.C, prm.A * prm.dk};
    Kokkos::parallel_for("batmobile::project_qk",
                         Kokkos::MDRangePolicy<exec, Kokkos::Rank<2>>({0, 0}, {g.n_total, prm.A * prm.dk}), pq);
  }
  Kern kern;
  kern.g = g;
  kern.prm = prm;
  kern.h = h;
  kern.m = m;
  kern.o = o;
  kern.M = work.M;
  kern.Z = work.Z;
  kern.q = work.q;
  kern.k = work.k;
  Kokkos::parallel_for("batmobile::interaction_fwd",
                       atom_team_policy<typename Kern::Forward>(kern, g.n_recv, false, team_size), kern);
}

// Adjoint of one layer given gm = dE/dm, go = dE/do (receivers); accumulates gh, f, vatom.
template <class T, class Device, int L, bool ATTN>
void interaction_backward(const Graph<T, Device>& g, const LayerParams<T, Device>& prm,
                          const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& h,
                          const Kokkos::View<T***, Kokkos::LayoutRight, Device>& o,
                          const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& gm,
                          const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& go,
                          const Kokkos::View<T***, Kokkos::LayoutRight, Device>& gh,
                          const Kokkos::View<double**, Kokkos::LayoutRight, Device>& f,
                          const Kokkos::View<double**, Kokkos::LayoutRight, Device>& vatom,
                          InteractionWork<T, Device>& work, int team_size = 0) {
  using exec = typename Device::execution_space;
  using Kern = InteractionKernel<T, Device, L, ATTN>;
  Kern kern;
  kern.g = g;
  kern.prm = prm;
  kern.h = h;
  kern.o = o;
  kern.M = work.M;
  kern.Z = work.Z;
  kern.q = work.q;
  kern.k = work.k;
  kern.gm = gm;
  kern.go = go;
  kern.gh = gh;
  kern.gq = work.gq;
  kern.gk = work.gk;
  kern.f = f;
  kern.vatom = vatom;
  Kokkos::parallel_for("batmobile::interaction_recv_adj",
                       atom_team_policy<typename Kern::RecvAdj>(kern, g.n_recv, true, team_size), kern);
  Kokkos::parallel_for("batmobile::interaction_send_adj",
                       atom_team_policy<typename Kern::SendAdj>(kern, g.n_total, true, team_size), kern);
  if (ATTN) {
    ProjectQK<T, Device> pq{h, gh, prm.Wq, prm.Wk, work.q, work.k, work.gq, work.gk, g.n_recv, prm.C, prm.A * prm.dk};
    Kokkos::parallel_for(
        "batmobile::project_qk_adj",
        Kokkos::MDRangePolicy<exec, Kokkos::Rank<2>, typename ProjectQK<T, Device>::Adjoint>({0, 0}, {g.n_total, prm.C}),
        pq);
  }
}

}  // namespace kernels
}  // namespace batmobile
