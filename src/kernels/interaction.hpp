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
// Edges are processed in chunks of CH = 16 (radial mode 1: radial chunks of 2-8 edges inside basis chunks, see
// prepare_basis): the team first computes, once per edge, the geometry, Bessel basis
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
//                                Independent of RecvAdj: with its own force / virial accumulators
//                                (InteractionWork::f_send) the two can run side by side on CUDA (lanes.hpp;
//                                LayerParams::concurrent_adjoints with const_slot_launch; default on).
//   ProjectQK (+ ::Adjoint)      node kernels: q, k = Wq, Wk . h[.][0] and gh[.][0] += Wq^T gq + Wk^T gk.
// Radial mode 1 (LayerParams::radial_mode = 1; separate kernel instantiations, tags ForwardT<true> etc.): after
// the hidden layer, the team (on host back-ends the team's one thread) computes the radial outputs of all chunk
// edges at once, a GEMM [n x H] x [H x NW C] in which thread tr owns the columns tr + ts x and register-blocks 4
// columns x 4 (or 2) edges, so that each W2t load feeds several edges; w and dw/dd (envelope applied) go to team
// scratch and the channel-threads read their NW values per edge. Chunks of 8, 4 or 2 edges (the scratch holds
// cap x NW C outputs; the end-of-atom arrays overlap the chunk, except with one thread per team); where no chunk
// fits scratch_size_max(0) the mode-0 kernels run.
// Radial mode 2 (default): mode 1 with that GEMM on tensor cores (radial_mma, 3xTF32) where they apply.
// Host drivers: interaction_forward(), interaction_backward() (workspace in InteractionWork; optional team_size:
// 0 = automatic (host: 1; GPU: C * S with S = 128 / C, at least 1, team <= 256, lowered until the team scratch
// fits scratch_size_max(0) and the team fits team_size_max), 1 = one thread per team, C * S = edge split S).
// Layer roles (template parameter ROLE, bits, common.hpp; docs/model.md): kEmbeddingInput, the first layer, whose
// input is the species embedding (only l = 0, constant in the positions): the tensor products run over the paths
// (0, l, l) alone and the adjoints compute forces and virials only (dE/dh, dE/dq, dE/dk are neither needed nor
// written); kScalarOutput, the last layer, of whose outputs only m[.][0] and o[.][0] reach the energy: the paths
// (l, l, 0) alone, m and o are 0 for l >= 1, and gm, go are read for l = 0 only. make_layer_params(..., role) keeps
// the radial-MLP rows of the role's paths (LayerPaths).
// Parameter gradients are not computed (not needed at run time).
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_cache.hpp"
#include "cuda_launch.hpp"
#include "graph.hpp"
#include "lanes.hpp"
#include "radial_table.hpp"
#include "sh.hpp"
#include "tensor_core.hpp"
#include "tp.hpp"

namespace batmobile {
namespace kernels {

inline constexpr int kMaxNB = 16;  // radial basis size bound (register arrays)
inline constexpr int kMaxDk = 32;  // attention key width bound
// The adjoint kernels keep dq/dk partials for DKM key components in registers next to force and virial; the
// drivers pick DKM = kSmallDk when dk <= kSmallDk (the bundled model: dk = 8): with DKM = 32 the unused 24 doubles
// per thread made the float L = 2 adjoints spill (ptxas sm_90, radial mode 1: 472 / 136 B of spill stores; none
// with DKM = 8).
inline constexpr int kSmallDk = 8;
// heads: the prepare pass stores per-(edge, head) softmax terms in kMaxHeads scratch columns
inline constexpr int kMaxHeads = 16;
inline constexpr int kMaxBasisChunk = 64;  // edges per prepare pass of the mode-1 kernels (LayerParams::basis_chunk)
// lg of an edge whose envelope is 0 (weight exactly 0 in the online softmax, whose running max starts at -1e30)
inline constexpr float kMaskedLogit = -3e38f;

// Components (a, 0..K-1, c) of an (n, K, C) view as tp.hpp's Strided (a row pointer and an int stride): the view's
// 64-bit index arithmetic per component cost ~4 instructions per load in the fused kernels (Nsight Compute,
// session 15).
template <class V>
KOKKOS_INLINE_FUNCTION Strided<typename V::non_const_value_type> components(const V& v, int a, int c) {
  return {&v(a, 0, c), int(v.stride(1))};
}

// Edge split S of a fused-kernel team of ts threads for C channels: thread = (channel, edge slot) when ts >= C,
// else 1 (host back-ends: one thread per team loops over the channels).
KOKKOS_INLINE_FUNCTION constexpr int edge_split(int ts, int C) { return ts >= C ? ts / C : 1; }
// The automatic GPU edge split before the scratch and team-size limits (InteractionKernel::gpu_launch): 128-thread
// teams.
KOKKOS_INLINE_FUNCTION constexpr int auto_edge_split(int C) { return 128 / C > 1 ? 128 / C : 1; }

template <class T, class Device>
struct LayerParams {
  using V1 = Kokkos::View<const T*, Device>;
  using V2 = Kokkos::View<const T**, Kokkos::LayoutRight, Device>;
  V2 W1, W2t, Wg, Wq, Wk;
  V2 WqT, WkT;  // (C, A dk): ProjectQK's forward reads them, consecutive threads consecutive addresses
  V1 b1;
  // Radial mode 2: W2t's A fragments for the tensor cores (pack_a_fragments of W2t; float only, else empty).
  Kokkos::View<const float*, Device> W2tc;
  // Radial mode 3: the radial MLP as a table (radial_table.hpp; attach_radial_table: float only, else empty) of
  // rtab_n intervals x rtab_cols (= 2 P C) columns x 4 coefficients, rtab_inv_h = rtab_n / r_c.
  Kokkos::View<const T*, Device> Rtab;
  int rtab_n = 0, rtab_cols = 0;
  T rtab_inv_h = 0;
  T r_c = 5, inv_avg = 1;
  int C = 0, NB = 0, H = 0, A = 1, dk = 1;
  // Layer role (common.hpp) whose paths' radial-MLP rows W2t holds (2 role_num_paths C columns; make_layer_params);
  // the launch checks it against the kernel's.
  int role = kGeneralLayer;
  // 0 = each channel-thread computes its radial outputs from the hidden layer (radial_from_hidden); 1 = the team
  // computes them for the whole chunk as a small GEMM into team scratch (InteractionKernel::radial_gemm), falling
  // back to 0 where the scratch does not fit (30 % more MD steps/s than 0 on the H200 at 648 and 10,368 atoms; on
  // host back-ends, one thread per team, each W2t load then feeds 4 edges instead of 1: attention fwd+bwd 1,000 x 20
  // x 32 on 2 OpenMP threads 395 vs 667 ms); 2 = mode 1 with that GEMM on tensor cores (radial_mma: 3xTF32, fp32
  // accuracy) where they apply (float, sm_80+ CUDA build, H a multiple of 8, whole warps, chunks that fill the MMA;
  // InteractionKernel::tensor_core_ok / tensor_core_chunk), else mode 1. Default 2: on the H200, 228.7 vs 219.2 MD
  // steps/s at 648 atoms (24.7 vs 24.6 at 10,368). 3 (opt-in) = mode 1 with the chunk's radial outputs read from a
  // table of the MLP (Rtab, radial_table.hpp; no hidden layer in the prepare pass) where one is attached (float
  // kernels), else mode 1: approximates the MLP (bundled model, 1,024 intervals: R to ~2e-8, dR/dd to ~2e-6
  // relative). On the H200 at 1,000 x 20 x 32 it gained nothing over mode 2 (attention fwd+bwd 0.817 / 0.825 vs
  // 0.823 / 0.834 ms, forward 0.168 / 0.169 vs 0.158 / 0.154; session 11); not timed where mode 2 cannot use the
  // tensor cores (C = 64's small chunks).
  int radial_mode = 2;
  int radial_chunk = 0;  // mode 1 edges per chunk: 2, 4 or 8; 0 = automatic (largest that fits)
  // Mode 1: at most this many edges (a multiple of the radial chunk, up to kMaxBasisChunk) share one prepare pass
  // (geometry, Bessel basis, hidden layer) whose radial chunks then run one after another; 0 = automatic (the
  // largest that fits the team scratch without costing blocks per SM: basis_chunk_keeping_occupancy); 1 = one
  // prepare pass per radial chunk. Default 0 since session 14: on the H200, MD with 0 vs 1 gave 707.8 vs 655.2 steps/s
  // at 648 atoms, 81.61 vs 77.56 at 10,368 and 9.686 vs 9.346 at 97,200 (same build, same call); on 2 host threads
  // 648 atoms took 2.92 / 2.89 vs 2.97 / 2.89 s per 10 steps (neutral). History: 64-edge chunks without a guard cost
  // teams of 64 a block per SM (10,368 atoms 25.4 vs 28.3, session 8); with the guard, 0 gave 294.1 / 27.98 vs
  // 291.8 / 28.12 (session 9, before the per-(edge, head) attention terms shrank the chunk): within noise then.
  int basis_chunk = 0;
  // GPU paths (teams of C x S threads): hidden units per item of the prepare pass (prepare_basis). Each item forms the
  // edge's geometry and Bessel basis (one sin/cos pair, NB recurrence steps) and then `prepare_span` hidden units, so
  // the basis is formed H / prepare_span times per edge instead of H times, with H / prepare_span times fewer items
  // per edge. 0 (default) = automatic, per prepare pass of nf edges: the smallest divisor of H for which the
  // nf H / span items take one round of the team (auto_prepare_span); else a divisor of H. Results are bit-identical
  // for every value. One-thread teams (host back-ends) always take all H hidden units of an edge in one item.
  // H200 MD, fp32 (session 15, same build, steps/s at 648 / 10,368 / 97,200 atoms): span 1 (the form before)
  // 699.7 / 83.57 / 9.965, 2: 700.7 / 92.61, 4: 749.3 / 98.75 / 11.82, 8: 755.7 / 101.6 / 12.19, 16: 758.4 / 102.7 /
  // 12.36. The automatic span is 16 with the 128-thread teams at 648 atoms and 32 with the 64-thread teams from 2,048
  // atoms on; in two later calls (another build) it and span 16 were within the calls' noise of each other.
  int prepare_span = 0;
  // 3 = adjoint kernels launched with their register cap where fused_capped() says so (Kokkos::LaunchBounds<128, 3>;
  // those of the first and last layer roles <128, 4>), 0 = uncapped.
  // Default 3: on the H200, attention fwd+bwd (mode 2) 10,000 x 30 x 64 20.5 vs 26.3 ms, 1,000 x 20 x 32 0.90 vs
  // 1.06 ms (session 7)
  int adjoint_min_blocks = 3;
  // 4 = the forward kernel (radial mode 1/2, float, device back-ends, teams <= 128) launched with
  // Kokkos::LaunchBounds<128, 4>: at most 128 registers, so that 4 blocks of 128 threads fit on an SM instead of 3
  // (ptxas sm_90, float L = 2: 129 registers uncapped, capped 128 with 0 spills as timed in session 11, 127 since
  // radial mode 3's table fill joined the kernel); 0 = uncapped.
  int forward_min_blocks = 4;
  // A/B option: > 0 = preferred shared-memory carveout (percent) of the fused kernels, set after their first launch
  // (cuda_cache.hpp; 0 = Kokkos's "prefer shared", i.e. ~23 KB of L1 on the H200)
  int shared_carveout = 0;
  // 1 = the fused kernels that MD runs (float, radial mode 1/2, capped: fused_capped; the forward and the adjoints)
  // launched by parallel_for_const_slots (cuda_launch.hpp: their functor in a constant-memory buffer of their own,
  // so that the host no longer waits for the previous kernel of any kind before each launch, as Kokkos 3.4 makes it;
  // the same code as Kokkos's launch); CUDA builds only, elsewhere ignored. Default 1: alone it changed nothing
  // (H200 MD 279.7 vs 281.7 steps/s at 648 atoms, 27.52 vs 27.46 at 10,368; session 10), but it lets the two
  // adjoints overlap (concurrent_adjoints). basis_chunk = 0's occupancy guard reads the registers of Kokkos's
  // kernels (ptxas: the same as these).
  int const_slot_launch = 1;
  // 1 = the receiver and the sender adjoints of interaction_backward on two Lanes (lanes.hpp: CUDA streams) where
  // the caller gave the sender its own force / virial accumulators (InteractionWork::f_send, vatom_send); 0 = one
  // after the other on the default instance. They overlap only with const_slot_launch = 1: through Kokkos
  // 3.4's launch the host waits for the receiver adjoint to finish before it launches the sender adjoint (session 9
  // on the H200: 648 atoms 284.3 vs 291.8 steps/s, 10,368 28.2 vs 28.1; kernel bench equal). Default 1: with
  // const_slot_launch = 1, H200 MD 306.9 vs 281.7 steps/s at 648 atoms (648 + 648 teams fill the GPU's 396 block
  // slots better than two 1.6-wave kernels in turn), 27.53 vs 27.46 at 10,368 (same run, session 10).
  int concurrent_adjoints = 1;
};

// Team size argument of the fused kernels' launches: automatic, with the GPU edge split lowered where fewer waves of
// blocks finish sooner (wave_aware_split: e.g. 648 teams in 528 block slots run as two waves with S = 4, in one of
// 660 with S = 3); elsewhere (host back-ends, no SM count) as 0 = automatic. (A launch argument like the team size,
// not a LayerParams field: the kernels capture LayerParams, and this is host-side launch policy.)
constexpr int kWaveAwareTeam = -1;
// Team size argument: the automatic launch with one edge slot less (S - 1 where the automatic split S > 1; else as
// automatic), its radial chunk then as for that explicit team size. The model's MD launches below
// model_detail::kFewAtoms atoms (src/model/fused_team_rule.hpp): at C = 32 teams of 96 instead of 128. Unlike an
// explicit C * 3 it never asks for more scratch than the automatic launch has (which may have lowered S to fit).
constexpr int kOneSlotLessTeam = -2;

// The rows of radial.W2 (2 P C, H; model-file shape) that a layer of role `role` uses (those of its paths,
// LayerPaths), weights then values, in the same (path, channel) order.
template <int L>
std::vector<double> layer_radial_rows(const std::vector<double>& W2, int C, int H, int role) {
  constexpr int P = num_paths(L, false);
  if (W2.size() != size_t(2) * P * C * H) throw std::invalid_argument("bad size: W2");
  if (role < 0 || role > (kEmbeddingInput | kScalarOutput)) throw std::invalid_argument("bad layer role");
  std::vector<double> out;
  out.reserve(size_t(2) * role_num_paths(L, role) * C * H);
  for (int half = 0; half < 2; ++half)
    for (int p = 0; p < role_num_paths(L, role); ++p) {
      const size_t row0 = (size_t(half) * P + role_natural_path(L, role, p)) * C;
      out.insert(out.end(), W2.begin() + row0 * H, W2.begin() + (row0 + C) * H);
    }
  return out;
}

// Host arrays in model-file shapes (row-major): W1 (H, NB), b1 (H), W2 (2PC, H), Wg (A, NB), Wq, Wk (A dk, C).
// role: the parameters of the kernels of that layer role (InteractionKernel's ROLE), which keep the radial-MLP rows
// of the role's paths only.
template <class T, class Device, int L>
LayerParams<T, Device> make_layer_params(int C, int NB, int H, int A, int dk, double r_c, double avg_num_neighbors,
                                         const std::vector<double>& W1, const std::vector<double>& b1,
                                         const std::vector<double>& W2_all, const std::vector<double>& Wg,
                                         const std::vector<double>& Wq, const std::vector<double>& Wk,
                                         int role = kGeneralLayer) {
  if (NB > kMaxNB || dk > kMaxDk || A > kMaxHeads || C % A != 0) throw std::invalid_argument("make_layer_params: unsupported sizes");
  const std::vector<double> W2 = layer_radial_rows<L>(W2_all, C, H, role);
  const int P = role_num_paths(L, role);
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
  p.WqT = mk(Wq, A * dk, C, true, "WqT");
  p.WkT = mk(Wk, A * dk, C, true, "WkT");
  auto b = mk(b1, 1, H, false, "b1");
  p.b1 = Kokkos::subview(b, 0, Kokkos::ALL());
  if (std::is_same<T, float>::value && H % MmaTile::K == 0 && (2 * P * C) % MmaTile::M == 0) {
    // W2t(hh, col) = W2(col, hh), read in place
    const auto frag = pack_a_fragments([&](int hh, int col) { return W2[size_t(col) * H + hh]; }, H, 2 * P * C);
    Kokkos::View<float*, Device> d("W2tc", frag.size());
    Kokkos::deep_copy(d, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                             frag.data(), frag.size()));
    p.W2tc = d;
  }
  p.role = role;
  p.r_c = T(r_c);
  p.inv_avg = T(1.0 / avg_num_neighbors);
  p.C = C;
  p.NB = NB;
  p.H = H;
  p.A = A;
  p.dk = dk;
  return p;
}

// Radial mode 3: attaches the table of the layer's radial MLP (NI intervals; host arrays in model-file shapes, as
// for make_layer_params) to float parameters; double parameters get none (mode 3 then runs as mode 1).
template <class T, class Device, int L>
void attach_radial_table(LayerParams<T, Device>& p, const std::vector<double>& W1, const std::vector<double>& b1,
                         const std::vector<double>& W2, int NI) {
  if constexpr (std::is_same<T, float>::value) {
    const int ncol = 2 * role_num_paths(L, p.role) * p.C;  // the rows make_layer_params kept
    const auto coef = radial_table_coefficients(p.NB, p.H, ncol, double(p.r_c), W1, b1,
                                                layer_radial_rows<L>(W2, p.C, p.H, p.role), NI);
    Kokkos::View<T*, Device> d("Rtab", coef.size());
    auto hm = Kokkos::create_mirror_view(d);
    for (size_t x = 0; x < coef.size(); ++x) hm(x) = T(coef[x]);
    Kokkos::deep_copy(d, hm);
    p.Rtab = d;
    p.rtab_n = NI;
    p.rtab_cols = ncol;
    p.rtab_inv_h = T(NI / double(p.r_c));
  } else {
    (void)p, (void)W1, (void)b1, (void)W2, (void)NI;
  }
}

// Per-edge radial quantities of one channel, computed in registers from the team-shared hidden layer.
template <class T, int P>
struct EdgeRadial {
  T w[P], wv[P], dw[P], dwv[P];  // weights and their d/dd (envelope included)
  T u, du;                        // envelope
};

// Radial mode 1: channel c's radial outputs of chunk edge t, read from the team's scratch where they are used
// ([p] -> out(t, (first + p) C + c)) instead of being copied into registers first.
template <class T, class Out>
struct RadialColumn {
  Out out;
  int t, first, C, c;
  KOKKOS_INLINE_FUNCTION T operator[](int p) const { return out(t, (first + p) * C + c); }
};

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

template <class T, class Device, int L, bool ATTN, int DKM = kMaxDk, int ROLE = kGeneralLayer>
struct InteractionKernel {
  static_assert(DKM >= 1 && DKM <= kMaxDk, "DKM: key width bound of the adjoint kernels");
  static_assert(ROLE >= 0 && ROLE <= (kEmbeddingInput | kScalarOutput), "ROLE: layer role bits (common.hpp)");
  static constexpr int K = num_sh(L);
  static constexpr int role = ROLE;
  // the tensor-product paths of the role (all natural ones for a general layer)
  using Paths = LayerPaths<L, ROLE>;
  static constexpr int P = Paths::count;
  // feature components the layer reads from h (all, or l = 0 for an embedding input) and writes to m, o (all, or
  // l = 0 for a scalar output: gm, go are read there only)
  static constexpr int KI = (ROLE & kEmbeddingInput) ? 1 : K;
  static constexpr int KO = (ROLE & kScalarOutput) ? 1 : K;
  // the adjoint gives dE/dh, dE/dq, dE/dk (not for an embedding input: constant in the positions)
  static constexpr bool FEATURE_GRAD = !(ROLE & kEmbeddingInput);
  static constexpr int NV = FEATURE_GRAD ? 9 + DKM : 9;  // per-channel partials reduced per team: force, virial, dq/dk
  static constexpr int dkm = DKM;
  using scalar = T;
  static constexpr int CH = 16;          // edges per chunk whose Bessel basis and hidden layer the team shares
  static constexpr int NW = (ATTN ? 2 : 1) * P;  // radial outputs per channel (weights, attention values)
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
  // Kernel tags; G = radial mode 1 (a separate instantiation, so that each mode gets its own registers).
  template <bool G>
  struct ForwardT {
    static constexpr bool gemm = G;
  };
  template <bool G>
  struct RecvAdjT {
    static constexpr bool gemm = G;
  };
  template <bool G>
  struct SendAdjT {
    static constexpr bool gemm = G;
  };
  using Forward = ForwardT<false>;
  using RecvAdj = RecvAdjT<false>;
  using SendAdj = SendAdjT<false>;

  // Team scratch: per-edge data of one chunk (geometry (r, d), the other atom of the edge (-1: not an edge),
  // per-(edge, head) attention terms (forward: lg = logit + log u; adjoint: lg = softmax weight p, dlg = d(logit +
  // log u)/dd; they are the same for all channels of a head, so the prepare pass forms them once), hidden
  // activations s and ds/dd ((cap, H); (H, cap) in radial mode 1, which
  // reads NE edges at once; mode 1 also the radial outputs w, dw/dd (cap, NW C)), and the end-of-atom arrays: adjoint
  // partials part (C S, 9 + dk) and the parked partials buf of edge slots 1..S-1.
  template <bool G>
  struct Chunk {
    static constexpr bool gemm = G;  // radial mode 1
    ST2 geo, lg, dlg, s, sd, w, dw;
    SI1 other;
    char* base;     // start of the team scratch (end-of-atom arrays: part_of, buf_of)
    int cap = CH;   // edges per radial chunk (rows of w, dw; mode 1: 2, 4 or 8)
    int bcap = CH;  // edges per basis chunk (rows of geo, lg, dlg, s, sd, other): a multiple of cap
    bool overlap;   // chunk_overlap(team size)
    // Row of w / dw of basis-chunk edge t: radial chunks start at multiples of cap (a power of 2)
    KOKKOS_INLINE_FUNCTION int wrow(int t) const { return t & (cap - 1); }
  };
  // Byte offsets of the arrays of Chunk (each 32-byte aligned). In mode 1 the end-of-atom arrays overlap the
  // chunk (overlap = true; not for one thread per team, which accumulates them across chunks): they are written
  // only after the last chunk, behind a barrier. Mode 1 basis chunks hold gsc edges (0: gch), mode 0 CH.
  struct Layout {
    size_t geo, lg, dlg, s, sd, other, w, dw, part, buf, total;
  };
  KOKKOS_INLINE_FUNCTION static size_t take(size_t& off, size_t bytes) {
    const size_t o = off;
    off += (bytes + 31) / 32 * 32;
    return o;
  }
  KOKKOS_INLINE_FUNCTION static Layout layout(int C, int H, int dk, bool adjoint, int S, int gch, bool overlap = true,
                                              int gsc = 0) {
    const size_t cap = gch > 0 ? gch : CH, bc = gch > 0 && gsc > gch ? gsc : cap, t = sizeof(T);
    Layout lo{};
    size_t off = 0;
    lo.geo = take(off, t * bc * 4);
    lo.lg = take(off, t * bc * kMaxHeads);
    if (adjoint) lo.dlg = take(off, t * bc * kMaxHeads);
    lo.s = take(off, t * bc * H);
    lo.sd = take(off, t * bc * H);
    lo.other = take(off, sizeof(int) * bc);
    if (gch > 0) {
      lo.w = take(off, t * cap * NW * C);
      if (adjoint) lo.dw = take(off, t * cap * NW * C);
    }
    const size_t chunk_end = off;
    if (gch > 0 && overlap) off = 0;
    if (adjoint) lo.part = take(off, sizeof(double) * C * S * (9 + dk));
    if (S > 1) lo.buf = take(off, t * C * (S - 1) * merge_cols(adjoint));
    lo.total = off > chunk_end ? off : chunk_end;
    return lo;
  }

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

  int gch = 0;  // radial mode 1 in use with chunks of gch edges (set by atom_team_policy); 0: mode 0
  int gsc = 0;  // mode 1 basis chunk: edges whose geometry, Bessel basis and hidden layer one prepare pass fills
  int tc = 0;   // radial mode 2: the chunk GEMM runs on tensor cores (radial_mma; set by atom_team_policy)
  int tab = 0;  // radial mode 3: the chunk's radial outputs come from the table prm.Rtab (radial_table_fill)

  // Whether the end-of-atom arrays may overlap a mode-1 chunk for teams of ts threads: not for one thread per team
  // on host back-ends, which loops over the channels and accumulates the adjoint partials across chunks (device
  // back-ends run mode 1 with teams of C * S only, so there it is a compile-time true).
  KOKKOS_INLINE_FUNCTION static constexpr bool chunk_overlap(int ts) { return !(runs_on_host<exec> && ts == 1); }

  // Chunk edges per MMA chain of radial_mma: the 8 B columns hold 8 edges (forward) or s and ds/dd of 4 (adjoint).
  KOKKOS_INLINE_FUNCTION static constexpr int mma_edges(bool adjoint) { return adjoint ? 4 : 8; }
  // Radial mode 2 runs on tensor cores for chunks that fill the B columns: smaller chunks (C = 64: forward 4,
  // adjoint 2 edges) left them half empty and ran slower than mode 1 on the H200 (attention fwd+bwd 10k x 30 x 64:
  // 35.1 vs 26.0 ms; C = 32 with chunks 8 / 4: 1.04 vs 1.09 ms at 1k x 20, MD +4 % at 648 atoms).
  static bool tensor_core_chunk(int gch, bool adjoint) { return gch >= mma_edges(adjoint); }
  // Radial mode 2 applies: a float kernel of an sm_80+ CUDA build, packed fragments, whole warps, H a multiple of
  // 8, output columns in tiles of 16.
  static bool tensor_core_ok(const LayerParams<T, Device>& prm, int team_size) {
    return kTensorCoreTf32 && std::is_same<T, float>::value && !runs_on_host<exec> && prm.W2tc.extent(0) > 0 &&
           prm.H % MmaTile::K == 0 && (NW * prm.C) % MmaTile::M == 0 && team_size % 32 == 0;
  }

  // Columns of a parked partial of edge slot s > 0: forward m (K), o (K), run_max, run_z; adjoint dE/dh_j (K).
  KOKKOS_INLINE_FUNCTION static constexpr int merge_cols(bool adjoint) { return adjoint ? K : 2 * K + 2; }
  // Per-team scratch for edge split S (S = 1: host or one thread per channel) and radial chunk gch (0: mode 0).
  static size_t scratch_bytes(int C, int H, int dk, bool adjoint, int S = 1, int gch = 0, bool overlap = true,
                              int gsc = 0) {
    return layout(C, H, dk, adjoint, S, gch, overlap, gsc).total + 64;  // + alignment of the base
  }
  // Mode 1 basis chunk for radial chunk gch: the largest multiple of gch up to kMaxBasisChunk (and up to `want` if
  // want > 0) whose scratch fits `limit`; gch itself if none larger does.
  static int basis_chunk_for(int C, int H, int dk, bool adjoint, int S, int gch, bool overlap, size_t limit,
                             int want = 0) {
    int best = gch;
    for (int bc = 2 * gch; gch > 0 && bc <= kMaxBasisChunk && (want <= 0 || bc <= want); bc += gch)
      if (scratch_bytes(C, H, dk, adjoint, S, gch, overlap, bc) <= limit) best = bc;
    return best;
  }
  // Mode 1 chunk for edge split S: `want` (2, 4, 8) or, if 0, the largest of 8, 4, 2 that is >= min_cap and
  // whose scratch fits `limit`; 0 (mode 0) if none does.
  static int radial_chunk_for(int C, int H, int dk, bool adjoint, int S, size_t limit, int want = 0,
                              int min_cap = 2) {
    for (int cap : {8, 4, 2})
      if ((want == 0 ? cap >= min_cap : cap == want) && scratch_bytes(C, H, dk, adjoint, S, cap) <= limit)
        return cap;
    return 0;
  }

  // Automatic GPU launch: edge split S = auto_edge_split(C) = 128 / C (>= 1), team C S <= 256 and <= tmax; with
  // radial mode 1 the largest S for which a mode-1 chunk of >= S edges fits `limit`, else (mode 0) S lowered until
  // the scratch fits. Returns {S, gch}.
  static Kokkos::pair<int, int> gpu_launch(int C, int H, int dk, bool adjoint, bool gemm, int want, int tmax,
                                           size_t limit) {
    const int S0 = auto_edge_split(C);
    auto team_ok = [&](int S) { return S == 1 || (C * S <= 256 && C * S <= tmax); };
    for (int S = S0; gemm && S >= 1; --S) {
      const int g = team_ok(S) ? radial_chunk_for(C, H, dk, adjoint, S, limit, want, S) : 0;
      if (g > 0) return {S, g};
    }
    int S = S0;
    while (S > 1 && (!team_ok(S) || scratch_bytes(C, H, dk, adjoint, S) > limit)) --S;
    return {S, 0};
  }

  template <bool G>
  KOKKOS_INLINE_FUNCTION void check_team_size(int ts) const {
    if (ts != 1 && (ts < prm.C || ts % prm.C != 0)) Kokkos::abort("batmobile: team size must be 1 or C * S");
    if (G && (gch <= 0 || (ts < prm.C && !(runs_on_host<exec> && ts == 1))))
      Kokkos::abort("batmobile: radial mode 1 needs a chunk and team size C * S (host back-ends: or 1)");
  }

  // Slots s = 1..S-1 park n values (per channel) in rows (s - 1) C + c of buf; after the barrier slot 0 reads them.
  KOKKOS_INLINE_FUNCTION static void park(const ST2& buf, int C, int c, int slot, int col0, const T* v, int n) {
    if (slot > 0)
      for (int x = 0; x < n; ++x) buf((slot - 1) * C + c, col0 + x) = v[x];
  }

  template <bool G>
  KOKKOS_INLINE_FUNCTION Chunk<G> make_chunk(const member& team, bool adjoint, int S) const {
    const int C = prm.C, H = prm.H;
    const bool overlap = chunk_overlap(team.team_size());
    const Layout lo = layout(C, H, prm.dk, adjoint, S, G ? gch : 0, overlap, gsc);
    // mode 1 writes its end-of-atom arrays over the chunk; should Kokkos run several atoms per team in turn, the
    // previous atom must no longer read them
    if (G) team.team_barrier();
    char* base = static_cast<char*>(team.team_scratch(0).get_shmem_aligned(lo.total, 32));
    auto at = [base](size_t off) { return reinterpret_cast<T*>(base + off); };
    Chunk<G> ch;
    ch.cap = G ? gch : CH;
    ch.bcap = G && gsc > gch ? gsc : ch.cap;
    ch.geo = ST2(at(lo.geo), ch.bcap, 4);
    ch.lg = ST2(at(lo.lg), ch.bcap, kMaxHeads);
    if (adjoint) ch.dlg = ST2(at(lo.dlg), ch.bcap, kMaxHeads);
    ch.s = G ? ST2(at(lo.s), H, ch.bcap) : ST2(at(lo.s), ch.bcap, H);
    ch.sd = G ? ST2(at(lo.sd), H, ch.bcap) : ST2(at(lo.sd), ch.bcap, H);
    ch.other = SI1(reinterpret_cast<int*>(base + lo.other), ch.bcap);
    if (G) {
      ch.w = ST2(at(lo.w), ch.cap, NW * C);
      if (adjoint) ch.dw = ST2(at(lo.dw), ch.cap, NW * C);
    }
    ch.base = base;
    ch.overlap = overlap;
    return ch;
  }
  // End-of-atom arrays, made where they are used (views held across the edge loop would cost registers).
  template <bool G>
  KOKKOS_INLINE_FUNCTION scratch part_of(const Chunk<G>& ch, int S) const {
    const Layout lo = layout(prm.C, prm.H, prm.dk, true, S, G ? gch : 0, ch.overlap, gsc);
    return scratch(reinterpret_cast<double*>(ch.base + lo.part), prm.C * S, 9 + prm.dk);
  }
  template <bool G>
  KOKKOS_INLINE_FUNCTION ST2 buf_of(const Chunk<G>& ch, bool adjoint, int S) const {
    const Layout lo = layout(prm.C, prm.H, prm.dk, adjoint, S, G ? gch : 0, ch.overlap, gsc);
    return ST2(reinterpret_cast<T*>(ch.base + lo.buf), prm.C * (S - 1), merge_cols(adjoint));
  }

  // Hidden units per prepare-pass item (LayerParams::prepare_span = 0) for nf edges, HH hidden units and ts threads:
  // the smallest divisor of HH whose nf HH / span items fit one round of the team (HH if none does), so that the
  // edge's basis is formed as few times as keeps all threads busy in one round.
  KOKKOS_INLINE_FUNCTION static int auto_prepare_span(int HH, int nf, int ts) {
    int span = 1;
    while (span < HH && (HH % span != 0 || nf * (HH / span) > ts)) ++span;
    return span;
  }

  // Mode 1: edges per register block of radial_gemm (the chunk is a multiple of it).
  KOKKOS_INLINE_FUNCTION static int gemm_block(int cap) { return cap % 4 == 0 ? 4 : 2; }

  // Fills the basis chunk with the edges [start, start + n) of `atom` (receiver list, or sender list if SENDER;
  // `left` edges remain, n = min(left, bcap)): geometry, hidden layer and, with attention, the per-(edge, head)
  // terms (edge_head_terms; GRAD: the adjoint's). Mode 1: rows n..nf-1 (nf = n rounded up to the GEMM block) are
  // zero non-edges. Ends with a barrier.
  template <bool SENDER, bool GRAD, class Ch>
  KOKKOS_INLINE_FUNCTION void prepare_basis(const member& team, const Ch& ch, int atom, int start, int left) const {
    const int n = left < ch.bcap ? left : ch.bcap;
    const int nb = Ch::gemm ? gemm_block(ch.cap) : 1, nf = (n + nb - 1) / nb * nb;
    const int HH = Ch::gemm && tab ? 1 : prm.H;  // radial mode 3 needs no hidden layer: one item per edge
    team.team_barrier();  // the previous chunk is no longer read
    // One pass over the items (edge t, hidden unit hh): each forms the edge geometry and the whole Bessel basis
    // itself (one sin/cos pair, bessel_basis) and its hidden unit; item hh = 0 also stores the geometry, and items
    // hh < A the attention terms of head hh (heads hh, hh + HH, ... if HH < A). This saves a barrier and keeps
    // the team from waiting on one thread per edge evaluating NB sin/cos pairs in series.
    // Mode 1 orders the items edges innermost: s(hh, t) is (H, cap) there, and consecutive threads write
    // consecutive addresses. An item takes `span` hidden units of its edge: a one-thread team (host back-ends) all
    // HH, so that it forms the edge's geometry, basis and attention terms once instead of HH times; GPU teams
    // LayerParams::prepare_span (0: auto_prepare_span; 1: the items as described).
    const int ts = team.team_size();
    const int span = runs_on_host<exec> && ts == 1                             ? HH
                     : prm.prepare_span > 0 && HH % prm.prepare_span == 0 ? prm.prepare_span
                                                                            : auto_prepare_span(HH, nf, ts);
    const int groups = HH / span;
    auto hidden = [&](int hh, int t) -> T& { return Ch::gemm ? ch.s(hh, t) : ch.s(t, hh); };
    auto hidden_d = [&](int hh, int t) -> T& { return Ch::gemm ? ch.sd(hh, t) : ch.sd(t, hh); };
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nf * groups), [&](const int th) {
      const int t = Ch::gemm ? th % nf : th / groups, h0 = (Ch::gemm ? th / nf : th % groups) * span;
      if (Ch::gemm && t >= n) {  // mode 1: zero rows up to the GEMM block, exact zeros for the GEMM
        if (h0 == 0) {
          ch.other(t) = -1;
          for (int a = 0; a < 4; ++a) ch.geo(t, a) = T(0);
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
      T B[kMaxNB], dB[kMaxNB];
      if (edge)
        bessel_basis<kMaxNB>(d, prm.r_c, prm.NB, B, dB);
      else
        for (int nn = 0; nn < kMaxNB; ++nn) B[nn] = dB[nn] = T(0);
      if (h0 == 0) {
        ch.other(t) = edge ? (SENDER ? i : j) : -1;
        for (int a = 0; a < 3; ++a) ch.geo(t, a) = r[a];
        ch.geo(t, 3) = d;
      }
      // heads g, g + groups, ... of item group g = h0 / span (one head per item while there are enough groups)
      if (ATTN && edge)
        for (int a = h0 / span; a < prm.A; a += groups) edge_head_terms<GRAD>(ch, t, i, j, a, d, B, dB);
      for (int hh = h0; hh < h0 + span; ++hh) {
        T& sv = hidden(hh, t);
        T& sdv = hidden_d(hh, t);
        if (!edge) {  // mode 1: exact zeros, so that the GEMM gives finite, unused outputs for non-edges
          if (Ch::gemm) sv = sdv = T(0);
          continue;
        }
        if (Ch::gemm && tab) continue;
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

  // The kernels loop over radial chunks of cap edges (the edge slots see the same edges whatever the basis chunk)
  // and prepare a basis chunk whenever one starts: one loop level, so that the capped adjoints keep their
  // registers (ptxas sm_90, receiver / sender: 8 / 40 B of spill stores, 0 / 28 B with one basis chunk per radial
  // chunk; a loop over radial chunks nested in one over basis chunks spilled 32 / 84 B, with a callback 208 / 384).
  // Row in the basis chunk of the radial chunk that starts at edge `start` of a list that starts at `begin`.
  template <class Ch>
  KOKKOS_INLINE_FUNCTION static int basis_row(const Ch& ch, int begin, int start) {
    return (start - begin) % ch.bcap;
  }
  // Radial chunk [first, first + cnt) of a prepared basis chunk: mode 1 has the team compute its radial outputs into
  // w (and dw) between barriers; mode 0 (one radial chunk per basis chunk, cap = bcap) does nothing.
  template <bool GRAD, class Ch>
  KOKKOS_INLINE_FUNCTION void radial_outputs(const member& team, const Ch& ch, int first, int cnt) const {
    if constexpr (Ch::gemm) {
      const int nb = gemm_block(ch.cap), nf = (cnt + nb - 1) / nb * nb;
      if (first > 0) team.team_barrier();  // the previous radial chunk is no longer read
      if (tab)
        radial_table_fill<GRAD>(team, ch, first, nf);
      else if (tc)
        radial_mma<GRAD>(team, ch, first, nf);
      else if (nb == 4)
        radial_gemm<GRAD, 4>(team, ch, first, nf);
      else
        radial_gemm<GRAD, 2>(team, ch, first, nf);
      team.team_barrier();
    } else {
      (void)team, (void)ch, (void)first, (void)cnt;
    }
  }

  template <int N>
  struct alignas(N * sizeof(T)) Pack {  // N consecutive scratch values read as one (vector) load
    T v[N];
  };

  // Radial mode 3: w(t, col) = u(d_t) R(d_t) and dw = d/dd for the chunk edges t < nf from the table prm.Rtab
  // (radial_table.hpp): items (edge, column) with columns innermost, so that consecutive threads read consecutive
  // 16-byte coefficient groups. Padding rows (geometry 0) get finite, unused values.
  template <bool GRAD, class Ch>
  KOKKOS_INLINE_FUNCTION void radial_table_fill(const member& team, const Ch& ch, int first, int nf) const {
    const int ncol = NW * prm.C, tcols = prm.rtab_cols;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nf * ncol), [&](const int it) {
      const int t = it / ncol, col = it % ncol;
      const T d = ch.geo(first + t, 3);
      T du, f, dr;
      const T u = envelope(d, prm.r_c, &du);
      const int k = radial_table_locate(d, prm.rtab_inv_h, prm.rtab_n, &f);
      const Pack<4> c = *reinterpret_cast<const Pack<4>*>(&prm.Rtab((size_t(k) * tcols + col) * 4));
      const T r = radial_table_piece(c.v, f, prm.rtab_inv_h, &dr);
      ch.w(t, col) = u * r;
      if (GRAD) ch.dw(t, col) = du * r + u * dr;
    });
  }

  // Mode 1: w(t, col) = u(d_t) sum_h W2t(h, col) s(h, t) and dw = d/dd for the chunk edges t < nf and the NW C
  // output columns. Thread tr takes the columns tr + ts x (coalesced W2t rows), CB at a time, and NE edges at a
  // time, so that each W2t load feeds NE edges and each (vector) load of s(h, t0..t0+NE) feeds CB columns; the sum
  // over h runs in the same order as in radial_from_hidden.
  template <bool GRAD, int NE, class Ch>
  KOKKOS_INLINE_FUNCTION void radial_gemm(const member& team, const Ch& ch, int first, int nf) const {
    const int ts = team.team_size(), tr = team.team_rank(), ncol = NW * prm.C;
    const int mine = tr < ncol ? (ncol - tr + ts - 1) / ts : 0;  // this thread's columns tr + ts x, x < mine
    for (int t0 = 0; t0 < nf; t0 += NE) {
      T u[NE], du[NE];
      for (int e = 0; e < NE; ++e) u[e] = envelope(ch.geo(first + t0 + e, 3), prm.r_c, &du[e]);
      int x = 0;
      for (; x + 4 <= mine; x += 4) radial_tile<GRAD, NE, 4>(ch, first, t0, tr + x * ts, ts, u, du);
      if (x + 2 <= mine) {
        radial_tile<GRAD, NE, 2>(ch, first, t0, tr + x * ts, ts, u, du);
        x += 2;
      }
      if (x < mine) radial_tile<GRAD, NE, 1>(ch, first, t0, tr + x * ts, ts, u, du);
    }
  }

  template <bool GRAD, int NE, int CB, class Ch>
  KOKKOS_INLINE_FUNCTION void radial_tile(const Ch& ch, int first, int t0, int col0, int ts, const T* u,
                                          const T* du) const {
    T acc[CB][NE], dacc[CB][NE];
    for (int x = 0; x < CB; ++x)
      for (int e = 0; e < NE; ++e) acc[x][e] = dacc[x][e] = T(0);
    for (int hh = 0; hh < prm.H; ++hh) {
      const Pack<NE> sv = *reinterpret_cast<const Pack<NE>*>(&ch.s(hh, first + t0));
      Pack<NE> dv;
      if (GRAD) dv = *reinterpret_cast<const Pack<NE>*>(&ch.sd(hh, first + t0));
      for (int x = 0; x < CB; ++x) {
        const T wt = prm.W2t(hh, col0 + x * ts);
        for (int e = 0; e < NE; ++e) {
          acc[x][e] += wt * sv.v[e];
          if (GRAD) dacc[x][e] += wt * dv.v[e];
        }
      }
    }
    for (int x = 0; x < CB; ++x)
      for (int e = 0; e < NE; ++e) {
        ch.w(t0 + e, col0 + x * ts) = u[e] * acc[x][e];
        if (GRAD) ch.dw(t0 + e, col0 + x * ts) = du[e] * acc[x][e] + u[e] * dacc[x][e];
      }
  }

  // Radial mode 2: the outputs of radial_gemm, w(t, col) = u(d_t) sum_h W2t(h, col) s(h, t) (and dw/dd), on tensor
  // cores, 3xTF32 with fp32 accumulation (tensor_core.hpp). Warp w takes the 16-column tiles w, w + warps, ...
  // (A = W2t^T from the packed fragments W2tc, one 16-byte load per lane and k step); B holds, in its 8 columns, 8
  // chunk edges (forward) or s and ds/dd of 4 edges (adjoint), read and split per tile (keeping them in registers
  // for all tiles made the adjoints spill: ptxas sm_90, 340 / 232 B). In the adjoint, lanes l%4 < 2 hold the
  // accumulators of w and lane l ^ 2 those of dw (same column and edges): one shuffle gives each what it needs, the
  // first write w and the second dw. Columns n of B past nf are zero and their outputs are not written.
  template <bool GRAD, class Ch>
  KOKKOS_INLINE_FUNCTION void radial_mma(const member& team, const Ch& ch, int first, int nf) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same<T, float>::value) {
      const int tr = team.team_rank(), lane = tr & 31, warp = tr >> 5, warps = team.team_size() >> 5;
      const int KS = prm.H / MmaTile::K, tiles = NW * prm.C / MmaTile::M;
      constexpr int EG = mma_edges(GRAD);  // chunk edges per MMA chain
      const int n = MmaTile::b_col(lane), c0 = MmaTile::c_col(lane, 0);
      const bool dw_lane = GRAD && c0 >= 4;
      const float4* frag = reinterpret_cast<const float4*>(prm.W2tc.data());
      for (int t0 = 0; t0 < nf; t0 += EG) {
        const int eb = t0 + (GRAD ? n % 4 : n);  // edge of this lane's B column
        const float* bsrc = eb < nf ? &(GRAD && n >= 4 ? ch.sd : ch.s)(0, first + eb) : nullptr;
        const int bstride = ch.s.stride(0);
        const int e0 = t0 + (GRAD ? c0 % 4 : c0);  // edges e0, e0 + 1 of this lane's D registers r % 2 = 0, 1
        float u[2] = {0.f, 0.f}, du[2] = {0.f, 0.f};
        for (int x = 0; x < 2; ++x)
          if (e0 + x < nf) u[x] = envelope(ch.geo(first + e0 + x, 3), prm.r_c, &du[x]);
        // this lane's outputs: w, or dw on the adjoint's dw lanes (w and dw have the same shape); a select instead of
        // a branch per store, whose two paths the warp ran one after the other (9 % of the adjoints' instructions
        // went to these stores, Nsight Compute, session 15)
        float* const out = GRAD && dw_lane ? ch.dw.data() : ch.w.data();
        const int ostride = int(ch.w.stride(0));
        for (int tile = warp; tile < tiles; tile += warps) {
          float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
          for (int ks = 0; ks < KS; ++ks) {
            uint32_t bb[2], bs[2];
            for (int r = 0; r < 2; ++r)
              split_tf32(bsrc ? bsrc[(ks * MmaTile::K + MmaTile::b_row(lane, r)) * bstride] : 0.f, bb[r], bs[r]);
            const float4 a = frag[(size_t(tile) * KS + ks) * 32 + lane];
            uint32_t ab[4], as[4];
            split_tf32(a.x, ab[0], as[0]);
            split_tf32(a.y, ab[1], as[1]);
            split_tf32(a.z, ab[2], as[2]);
            split_tf32(a.w, ab[3], as[3]);
            mma_tf32_3x(acc, ab, as, bb, bs);
          }
          for (int r = 0; r < 4; ++r) {
            const int col = tile * MmaTile::M + MmaTile::c_row(lane, r), x = r % 2;
            const float other = GRAD ? __shfl_xor_sync(0xffffffffu, acc[r], 2) : 0.f;
            const float value = dw_lane ? du[x] * other + u[x] * acc[r] : u[x] * acc[r];
            if (e0 + x < nf) out[(e0 + x) * ostride + col] = value;
          }
        }
      }
    }
#else
    (void)team, (void)ch, (void)first, (void)nf;
    Kokkos::abort("batmobile: radial mode 2 needs an sm_80+ CUDA build");
#endif
  }

  // Radial outputs of channel c for chunk edge t: mode 1 reads the team's results (forward only: the adjoint
  // reads them in place, see edge_adjoint), mode 0 computes them.
  template <bool GRAD, class Ch>
  KOKKOS_INLINE_FUNCTION void edge_radial(const Ch& ch, int c, int t, T d, EdgeRadial<T, P>& R) const {
    if constexpr (Ch::gemm) {
      static_assert(!GRAD, "mode-1 adjoints read the radial outputs through RadialColumn");
      R.u = envelope(d, prm.r_c, &R.du);
      const int C = prm.C;
      for (int p = 0; p < P; ++p) {
        R.w[p] = ch.w(ch.wrow(t), p * C + c);
        R.wv[p] = ATTN ? ch.w(ch.wrow(t), (P + p) * C + c) : T(0);
        R.dw[p] = R.dwv[p] = T(0);
      }
    } else {
      radial_from_hidden<T, P, ATTN, GRAD>(prm, c, d, Kokkos::subview(ch.s, t, Kokkos::ALL()),
                                           Kokkos::subview(ch.sd, t, Kokkos::ALL()), R);
    }
  }

  KOKKOS_INLINE_FUNCTION void load_h(int j, int c, T* hj) const {
    const auto hr = components(h, j, c);
    for (int kk = 0; kk < K; ++kk) hj[kk] = kk < KI ? hr[kk] : T(0);
  }

  // Attention terms of chunk edge t = (i <- j), head a, at distance d with Bessel basis B and dB/dd, formed once
  // per (edge, head) in the prepare pass (the C / A channel-threads of the head read them):
  //   logit s = q_i . k_j / sqrt(dk) + Wg_a . B(d), envelope u(d);
  //   forward (!GRAD): lg = s + log u, the online softmax's argument (kMaskedLogit where u <= 0: weight 0);
  //   adjoint (GRAD):  lg = p = exp(s + log u - M_ia) / Z_ia (0 where u <= 0), dlg = d(s + log u)/dd (0 there).
  template <bool GRAD, class Ch>
  KOKKOS_INLINE_FUNCTION void edge_head_terms(const Ch& ch, int t, int i, int j, int a, T d, const T* B,
                                              const T* dB) const {
    T s = T(0);
    for (int e = 0; e < prm.dk; ++e) s += q(i, a * prm.dk + e) * k(j, a * prm.dk + e);
    s /= sqrt(T(prm.dk));
    T dg = T(0);
    for (int n = 0; n < kMaxNB; ++n)  // compile-time bound: B and dB stay in registers
      if (n < prm.NB) {
        s += prm.Wg(a, n) * B[n];
        if (GRAD) dg += prm.Wg(a, n) * dB[n];
      }
    T du;
    const T u = envelope(d, prm.r_c, &du);
    const bool inside = u > T(0);  // an edge whose u rounds to <= 0 next to r_c has weight 0
    if constexpr (GRAD) {
      const T ex = inside ? exp(s + log(u) - M(i, a)) : T(0);  // e_ij = exp(s + log u - M) <= 1
      const T inv = Z(i, a) > T(0) ? T(1) / Z(i, a) : T(0);    // Z >= 1 once the receiver has an edge
      ch.lg(t, a) = ex * inv;
      ch.dlg(t, a) = inside ? du / u + dg : T(0);
    } else {
      ch.lg(t, a) = inside ? s + log(u) : T(kMaskedLogit);
    }
  }

  template <bool G>
  KOKKOS_INLINE_FUNCTION void operator()(ForwardT<G>, const member& team) const {
    const int i = team.league_rank();
    const int C = prm.C, chead = C / prm.A;
    const int e0 = g.recv_offsets(i), e1 = g.recv_offsets(i + 1);
    T accm[K], acco[K], run_max, run_z;
    const int ts = team.team_size(), tr = team.team_rank();
    check_team_size<G>(ts);
    const auto ch = make_chunk<G>(team, false, edge_split(ts, C));
    if (ts >= C) {  // GPU: thread = (channel c, edge slot sl); slot sl takes the chunk edges t = sl (mod S)
      const int S = ts / C, c = tr % C, sl = tr / C;
      const int a = c / chead;
      for (int kk = 0; kk < K; ++kk) accm[kk] = acco[kk] = T(0);
      run_max = T(-1e30);
      run_z = T(0);
      for (int start = e0; start < e1; start += ch.cap) {
        const int n = e1 - start < ch.cap ? e1 - start : ch.cap, first = basis_row(ch, e0, start);
        if (first == 0) prepare_basis<false, false>(team, ch, i, start, e1 - start);
        radial_outputs<false>(team, ch, first, n);
        for (int t = first + sl; t < first + n; t += S) forward_edge(i, c, a, ch, t, accm, acco, run_max, run_z);
      }
      if (S > 1) {
        if (G) team.team_barrier();  // buf overlaps the last chunk
        merge_forward(team, buf_of(ch, false, S), S, c, sl, accm, acco, run_max, run_z);
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
      for (int start = e0; start < e1; start += ch.cap) {
        const int n = e1 - start < ch.cap ? e1 - start : ch.cap, first = basis_row(ch, e0, start);
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

  template <class Ch>
  KOKKOS_INLINE_FUNCTION void forward_edge(int i, int c, int a, const Ch& ch, int t, T* accm, T* acco, T& run_max,
                                           T& run_z) const {
    const int j = ch.other(t);
    if (j < 0) return;
    const T r[3] = {ch.geo(t, 0), ch.geo(t, 1), ch.geo(t, 2)};
    const T d = ch.geo(t, 3);
    T Y[K], hj[K];
    const T inv_d = T(1) / d;  // (|r| is in the chunk: no second square root)
    sh_unit<L, T>(r[0] * inv_d, r[1] * inv_d, r[2] * inv_d, Y);
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
        const T new_max = s > run_max ? s : run_max;
        const T corr = exp(run_max - new_max);
        const T wgt = exp(s - new_max);
        run_z = run_z * corr + wgt;
        for (int kk = 0; kk < K; ++kk) acco[kk] = acco[kk] * corr + wgt * v[kk];
        run_max = new_max;
      }
    } else {
      tp_fwd<L, false, Paths>(hj, Y, R.w, T(1), accm);
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
  // Mode 1 reads the radial outputs from team scratch path by path (RadialColumn); mode 0 computes them into
  // registers (EdgeRadial).
  template <bool SENDER, class Ch>
  KOKKOS_INLINE_FUNCTION void edge_adjoint(int i, int j, int c, int a, const Ch& ch, int t, const T* r, T d,
                                           T* gr, T* ghj, T* gs_out) const {
    if constexpr (Ch::gemm) {
      using Col = RadialColumn<T, decltype(ch.w)>;
      const int C = prm.C;
      const int tw = ch.wrow(t);
      edge_adjoint_radial<SENDER>(i, j, c, a, ch, t, r, d, Col{ch.w, tw, 0, C, c}, Col{ch.w, tw, P, C, c},
                                  Col{ch.dw, tw, 0, C, c}, Col{ch.dw, tw, P, C, c}, gr, ghj, gs_out);
    } else {
      EdgeRadial<T, P> R;
      edge_radial<true>(ch, c, t, d, R);
      const T *w = R.w, *wv = R.wv, *dw = R.dw, *dwv = R.dwv;
      edge_adjoint_radial<SENDER>(i, j, c, a, ch, t, r, d, w, wv, dw, dwv, gr, ghj, gs_out);
    }
  }

  template <bool SENDER, class Ch, class W, class DW>
  KOKKOS_INLINE_FUNCTION void edge_adjoint_radial(int i, int j, int c, int a, const Ch& ch, int t, const T* r, T d,
                                                  const W& w, const W& wv, const DW& dw, const DW& dwv,
                                                  T* gr, T* ghj, T* gs_out) const {
    T Y[K], hj[K], gmi[K], goi[K];
    const T inv_d = T(1) / d;
    sh_unit<L, T>(r[0] * inv_d, r[1] * inv_d, r[2] * inv_d, Y);
    load_h(j, c, hj);
    const auto gmr = components(gm, i, c);
    for (int kk = 0; kk < K; ++kk) gmi[kk] = kk < KO ? gmr[kk] : T(0);  // (scalar output: l = 0 only)
    T gY[K];
    for (int kk = 0; kk < K; ++kk) gY[kk] = T(0);
    T gd = T(0), gs = T(0), pw = T(0);
    if constexpr (ATTN) {
      pw = ch.lg(t, a);  // p_ij = e_ij / Z_i (edge_head_terms)
      T v[K];
      for (int kk = 0; kk < K; ++kk) v[kk] = T(0);
      tp_fwd2<L, T, Paths>(hj, Y, w, wv, T(0), T(1), nullptr, v);  // the value part only
      T tt = T(0);
      const auto gor = components(go, i, c), orow = components(o, i, c);
      for (int kk = 0; kk < K; ++kk) {
        goi[kk] = kk < KO ? gor[kk] : T(0);
        if (kk < KO) tt += goi[kk] * (v[kk] - orow[kk]);
      }
      // dE/ds = p (go_i . (v - o_i)) (o does not depend on M: no gradient flows through it); de/ds = e and
      // de/du = e / u, so dE/dd gets dE/ds d(s + log u)/dd
      gs = tt * pw;
      gd += gs * ch.dlg(t, a);
    } else {
      for (int kk = 0; kk < K; ++kk) goi[kk] = T(0);
    }
    // dE/dw_p and dE/dwv_p go straight into gd = dE/dd (path order: w_p then wv_p, as a loop over p would add them)
    const ContractWithDw<T, DW> gw{&gd, dw}, gwv{&gd, dwv};
    tp_adjoint<L, false, SENDER && FEATURE_GRAD, ATTN, T, true, Paths>(hj, Y, w, wv, gmi, goi, prm.inv_avg, pw, ghj, gY,
                                                                      gw, gwv);
    // dE/dr = gd r / d + the SH part, in reverse mode from the unit vector (sh_vjp_unit)
    const T rhat[3] = {r[0] * inv_d, r[1] * inv_d, r[2] * inv_d};
    for (int b = 0; b < 3; ++b) gr[b] = gd * rhat[b];
    sh_vjp_unit<L, T>(rhat, inv_d, gY, gr);
    *gs_out = gs;
  }

  template <class A>
  KOKKOS_INLINE_FUNCTION static void tally_virial(A* acc, const T* r, const T* gr) {
    add_half_edge_virial(acc + 3, r, gr);
  }

  // One chunk edge of the adjoint for channel c: accumulates force/virial/dq-or-dk partials (and ghj) into acc
  // (A = double, or T for the per-thread partials of the GPU path, see adjoint_team).
  template <bool SENDER, class Ch, class A>
  KOKKOS_INLINE_FUNCTION void adjoint_edge(int atom, int c, int a, const Ch& ch, int t, A* acc,
                                           T* ghj) const {
    const int other = ch.other(t);
    if (other < 0) return;
    const int i = SENDER ? other : atom, j = SENDER ? atom : other;
    const T r[3] = {ch.geo(t, 0), ch.geo(t, 1), ch.geo(t, 2)};
    const T d = ch.geo(t, 3);
    T gr[3], gs;
    edge_adjoint<SENDER>(i, j, c, a, ch, t, r, d, gr, ghj, &gs);
    // F_i = -dE/dx_i = +dE/dr_ij (receiver), F_j = -dE/dr_ij (sender)
    for (int b = 0; b < 3; ++b) acc[b] += SENDER ? -A(gr[b]) : A(gr[b]);
    tally_virial(acc, r, gr);
    if constexpr (ATTN && FEATURE_GRAD) {
      const T sdk = T(1) / sqrt(T(prm.dk));
      for (int x = 0; x < DKM; ++x)
        if (x < prm.dk) acc[9 + x] += A(gs * sdk * (SENDER ? q(i, a * prm.dk + x) : k(j, a * prm.dk + x)));
    }
  }

  // Sum the per-thread partials of the team (row sl C + c: edge slot sl, channel c; fixed order) and write the
  // per-atom results.
  KOKKOS_INLINE_FUNCTION void team_finish(const member& team, const scratch& part, int n, bool sender) const {
    team.team_barrier();
    const int C = prm.C, chead = C / prm.A, adk = FEATURE_GRAD ? prm.A * prm.dk : 0, S = int(part.extent(0)) / C;
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

  template <bool SENDER, bool G>
  KOKKOS_INLINE_FUNCTION void adjoint_team(const member& team) const {
    const int atom = team.league_rank();
    const int C = prm.C, chead = C / prm.A;
    const int ts = team.team_size(), tr = team.team_rank();
    check_team_size<G>(ts);
    const int S = edge_split(ts, C);
    const auto ch = make_chunk<G>(team, true, S);
    const int s0 = SENDER ? g.send_offsets(atom) : g.recv_offsets(atom);
    const int s1 = SENDER ? g.send_offsets(atom + 1) : g.recv_offsets(atom + 1);
    if (ts >= C) {  // GPU: thread = (channel c, edge slot sl), partials in registers across chunks
      const int c = tr % C, sl = tr / C;
      // in T: a thread sums only its own few edges (1/S of the atom's), the team and the atoms add in double.
      // In double the float L = 2 adjoints spilled at their 168-register cap (ptxas sm_90, receiver / sender: 8 / 48
      // B of spill stores; 0 / 0 in float).
      T acc[NV];
      for (int v = 0; v < NV; ++v) acc[v] = 0;
      T ghj[K];
      for (int kk = 0; kk < K; ++kk) ghj[kk] = T(0);
      for (int start = s0; start < s1; start += ch.cap) {
        const int n = s1 - start < ch.cap ? s1 - start : ch.cap, first = basis_row(ch, s0, start);
        if (first == 0) prepare_basis<SENDER, true>(team, ch, atom, start, s1 - start);
        radial_outputs<true>(team, ch, first, n);
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
        for (int t = first + sl; t < first + n; t += S) adjoint_edge<SENDER>(atom, c, c / chead, ch, t, acc, ghj);
      }
      if (G) team.team_barrier();  // part and buf overlap the last chunk
      const scratch part = part_of(ch, S);
      for (int v = 0; v < NV; ++v)  // compile-time bound: acc stays in registers
        if (v < 9 + prm.dk) part(tr, v) = acc[v];
      if (SENDER && FEATURE_GRAD) {  // dE/dh_j: slot 0 sums the S partials of channel c and writes gh once
        if (S > 1) {
          const ST2 buf = buf_of(ch, true, S);
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
        for (int v = 0; v < 9 + prm.dk; ++v) part(c, v) = 0;
      for (int start = s0; start < s1; start += ch.cap) {
        const int n = s1 - start < ch.cap ? s1 - start : ch.cap, first = basis_row(ch, s0, start);
        if (first == 0) prepare_basis<SENDER, true>(team, ch, atom, start, s1 - start);
        radial_outputs<true>(team, ch, first, n);
        for (int c = 0; c < C; ++c) {
          double acc[NV];
          for (int v = 0; v < NV; ++v) acc[v] = 0;
          T ghj[K];
          for (int kk = 0; kk < K; ++kk) ghj[kk] = T(0);
          for (int t = first; t < first + n; ++t) adjoint_edge<SENDER>(atom, c, c / chead, ch, t, acc, ghj);
          if (SENDER && FEATURE_GRAD)
            for (int kk = 0; kk < K; ++kk) gh(atom, kk, c) += ghj[kk];
          for (int v = 0; v < NV; ++v)
            if (v < 9 + prm.dk) part(c, v) += acc[v];
        }
      }
    }
    team_finish(team, part_of(ch, S), atom, SENDER);
  }

  template <bool G>
  KOKKOS_INLINE_FUNCTION void operator()(RecvAdjT<G>, const member& team) const {
    adjoint_team<false, G>(team);
  }
  template <bool G>
  KOKKOS_INLINE_FUNCTION void operator()(SendAdjT<G>, const member& team) const {
    adjoint_team<true, G>(team);
  }
};

// q(n) = Wq . h(n, 0, :) for receivers, k(n) = Wk . h(n, 0, :) for all atoms; and the adjoint. One thread per
// output value, flat index n * adk + x (forward) or n * C + c (adjoint): consecutive threads write consecutive
// addresses, read the same h / gq / gk row and consecutive weights (the forward from the transposed WqT, WkT). A 2-D
// MDRange had put consecutive threads on consecutive atoms, rows C / adk apart: 390 / 570 us per call (forward /
// adjoint) at 97,200 atoms on the H200; flat over Wq, Wk (rows C apart for the forward's threads): 970 / 160.
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

template <class T, class Device>
struct InteractionWork {
  Kokkos::View<T**, Kokkos::LayoutRight, Device> q, k, M, Z, gq, gk;
  // Optional, set by the caller: the sender adjoint's own force / virial accumulators (n_total, 3) and (n_total, 6),
  // summed with f and vatom by the caller. With them the two adjoints write disjoint arrays and may run side by
  // side (LayerParams::concurrent_adjoints); without them the sender adds to f and vatom after the receiver.
  Kokkos::View<double**, Kokkos::LayoutRight, Device> f_send, vatom_send;
  std::shared_ptr<Lanes<typename Device::execution_space>> lanes;  // created at the first concurrent adjoint
  // Grow-only, with 20 % headroom beyond the first size: MD changes n_total (the ghosts) at every re-neighbouring,
  // and each reallocation of the six arrays initialised and fenced (H200, 648 atoms: 22 times in 300 steps).
  // Set by a caller that wrote q and k for the next interaction_forward itself (e.g. per species, for an embedding
  // input), after sizing them with resize: that forward then projects nothing (and clears the flag).
  bool qk_given = false;
  // Returns whether the arrays were reallocated.
  bool resize(int n_recv, int n_total, int A, int dk) {
    const bool first = q.data() == nullptr;
    const bool grow = int(q.extent(0)) < n_recv || int(k.extent(0)) < n_total || int(M.extent(1)) != A ||
                      int(q.extent(1)) != A * dk;
    if (grow) {
      const int nr = first ? n_recv : n_recv + n_recv / 5 + 16, nt = first ? n_total : n_total + n_total / 5 + 16;
      q = decltype(q)("q", nr, A * dk);
      gq = decltype(q)("gq", nr, A * dk);
      k = decltype(q)("k", nt, A * dk);
      gk = decltype(q)("gk", nt, A * dk);
      M = decltype(q)("M", nr, A);
      Z = decltype(q)("Z", nr, A);
    }
    return grow;
  }
};

// Register caps of the fused kernels, Kokkos::LaunchBounds<128, B> (at most 65536 / (128 B) registers per thread),
// compiled only where they apply, to keep the build time: device back-ends, float, radial mode >= 1; used there when
// the team has <= 128 threads. The forward with B = 4 (LayerParams::forward_min_blocks = 4, the default: 128
// registers instead of 129, 4 blocks of 128 threads per SM instead of 3), the adjoints with key width <= kSmallDk
// with B = 3 (adjoint_min_blocks = 3, the default: 168 registers, 3 blocks per SM instead of 2). ptxas sm_90, float
// L = 2, radial mode 1/2: no spills in any of the three (session 11; uncapped adjoints 238 / 247 registers). The
// adjoints of the first and last layers (ROLE kEmbeddingInput, kScalarOutput) with B = 4 (adjoint_min_blocks = 3 asks
// for it too): 128 registers; ptxas sm_90, receiver / sender: embedding input 0 / 0 B of spill stores (uncapped
// 133-140 registers, i.e. 3 blocks per SM), scalar output 0 / 4 B (uncapped 136 / 153). fused_cap_blocks: that B,
// 0 where no cap is compiled.
template <class Kern, class Tag>
inline constexpr bool is_forward_tag = std::is_same<Tag, typename Kern::template ForwardT<true>>::value ||
                                       std::is_same<Tag, typename Kern::template ForwardT<false>>::value;
template <class Kern, class Tag>
inline constexpr int fused_cap_blocks =
    !runs_on_host<typename Kern::exec> && std::is_same<typename Kern::scalar, float>::value && Tag::gemm
        ? (is_forward_tag<Kern, Tag> ? 4 : Kern::dkm == kSmallDk ? (Kern::role == kGeneralLayer ? 3 : 4) : 0)
        : 0;
// The policy type of a capped launch of tag Tag.
template <class Kern, class Tag>
using CappedPolicy =
    Kokkos::TeamPolicy<typename Kern::exec, Tag, Kokkos::LaunchBounds<128, fused_cap_blocks<Kern, Tag>>>;

// Whether kernel `kern` of tag Tag launches capped with teams of team_size: compiled, asked for (forward_min_blocks
// or adjoint_min_blocks > 0, i.e. 4 or 3: the values the model accepts) and teams of at most 128 threads.
template <class Kern, class Tag>
bool fused_capped(const Kern& kern, int team_size) {
  constexpr int B = fused_cap_blocks<Kern, Tag>;
  const int want = is_forward_tag<Kern, Tag> ? kern.prm.forward_min_blocks : kern.prm.adjoint_min_blocks;
  return B > 0 && want > 0 && team_size <= 128;
}

// The largest of gsc, gsc - gch, ..., gch whose blocks(.) is at least blocks(gch) (pure; tests check it anywhere).
template <class Blocks>
int largest_chunk_keeping(int gsc, int gch, const Blocks& blocks) {
  const int want = blocks(gch);
  while (gsc > gch && blocks(gsc) < want) gsc -= gch;
  return gsc;
}

// Edge split for n teams (pure; tests check it anywhere): of S_max, S_max - 1, ..., 1, the S with the fewest
// waves per edge slot, ceil(n / slots(S)) / S, where slots(S) (<= 0: not possible) is how many teams of split S the
// GPU holds at once; ties keep the larger S. A team's time is taken as proportional to 1 / S (its edge loop).
template <class Slots>
int wave_aware_split(int n, int S_max, const Slots& slots) {
  int best = S_max;
  long best_waves = -1;
  for (int S = S_max; S >= 1; --S) {
    const long sl = slots(S);
    if (sl <= 0) continue;
    const long waves = (n + sl - 1) / sl;
    if (best_waves < 0 || waves * best < best_waves * S) best = S, best_waves = waves;  // waves/S < best's
  }
  return best;
}

// Blocks per SM of kernel `kern` of tag Tag as launch_fused will launch it (capped or not), -1 off CUDA.
template <class Tag, class Kern>
int fused_blocks_per_sm(const Kern& kern, int team_size, size_t bytes) {
  if constexpr (fused_cap_blocks<Kern, Tag> > 0)
    if (fused_capped<Kern, Tag>(kern, team_size)) return blocks_per_sm<Kern, CappedPolicy<Kern, Tag>>(team_size, bytes);
  return blocks_per_sm<Kern, Kokkos::TeamPolicy<typename Kern::exec, Tag>>(team_size, bytes);
}

// The largest basis chunk, from kern.gsc down in steps of the radial chunk kern.gch, with which the kernel (as
// launch_kernel will launch it: capped or not) keeps as many blocks per SM as with gch: a larger
// scratch must not cost occupancy. On the H200 (session 8), 64-edge basis chunks (~38 KB of scratch): teams of 128
// (3 blocks per SM either way) MD at 648 atoms 292.0 vs 271.7 steps/s with one pass per radial chunk; teams of 64
// (MD from kManyAtoms on; 6 -> 5 blocks per SM) 10,368 atoms 25.4 vs 28.3.
template <class Tag, class Kern>
int basis_chunk_keeping_occupancy(const Kern& kern, bool adjoint, int team_size) {
  const auto& p = kern.prm;
  const int S = edge_split(team_size, p.C);
  const bool overlap = Kern::chunk_overlap(team_size);
  auto blocks = [&](int gsc) {
    return fused_blocks_per_sm<Tag>(kern, team_size, Kern::scratch_bytes(p.C, p.H, p.dk, adjoint, S, kern.gch, overlap, gsc));
  };
  return largest_chunk_keeping(kern.gsc, kern.gch, blocks);
}

// Team policy of kernel `kern` for n atoms; sets kern.gch (radial mode 1 chunk, 0: mode 0) and kern.gsc (its basis
// chunk: basis_chunk_for, after the radial chunk is chosen, so that it never costs a smaller one). team_size: 0 =
// automatic (host back-ends: 1, channels looped; GPU: C * S, S = 128 / C (>= 1) edge slots, team <= 256, S lowered
// until the scratch fits scratch_size_max(0) and the team fits team_size_max; with prm.radial_mode = 1 the largest
// S for which a mode-1 chunk of >= S edges fits, else mode 0); kWaveAwareTeam: automatic, S then lowered by
// wave_aware_split for n teams (CUDA); kOneSlotLessTeam: automatic, then S - 1 as if explicit; 1 or C * S: explicit
// (tests run the GPU paths on OpenMP with it; mode 1 then takes the largest chunk that fits, the host back-ends not
// limiting it).
template <class Tag, class Kern>
inline Kokkos::TeamPolicy<typename Kern::exec, Tag> atom_team_policy(Kern& kern, int n, bool adjoint,
                                                                     int team_size = 0) {
  using Pol = Kokkos::TeamPolicy<typename Kern::exec, Tag>;
  const int C = kern.prm.C, H = kern.prm.H, dk = kern.prm.dk, want = kern.prm.radial_chunk;
  const bool gemm = Tag::gemm && kern.prm.radial_mode >= 1;
  if (kern.prm.radial_mode < 0 || kern.prm.radial_mode > 3 || (want != 0 && want != 2 && want != 4 && want != 8))
    throw std::invalid_argument("batmobile: radial_mode must be 0, 1, 2 or 3 and radial_chunk 0, 2, 4 or 8");
  if (kern.prm.basis_chunk < 0) throw std::invalid_argument("batmobile: basis_chunk must be >= 0");
  if (kern.prm.prepare_span < 0 || (kern.prm.prepare_span > 0 && kern.prm.H % kern.prm.prepare_span != 0))
    throw std::invalid_argument("batmobile: prepare_span must be 0 (automatic) or divide the radial hidden width H = " +
                                std::to_string(kern.prm.H));
  if (kern.prm.role != Kern::role)
    throw std::invalid_argument("batmobile: layer parameters of role " + std::to_string(kern.prm.role) +
                                " for a kernel of role " + std::to_string(Kern::role) +
                                " (make_layer_params' role must match the kernel's)");
  const bool host = runs_on_host<typename Kern::exec>;
  const size_t limit = size_t(Pol::scratch_size_max(0));
  kern.gch = 0;
  const bool wave_aware = team_size == kWaveAwareTeam;
  if (wave_aware) team_size = 0;
  auto automatic_split = [&] {
    return Kern::gpu_launch(C, H, dk, adjoint, gemm, want, Pol(1, 1).team_size_max(kern, Kokkos::ParallelForTag()),
                            limit);
  };
  if (team_size == kOneSlotLessTeam) {  // then launched as the explicit team size C (S - 1) below
    const int S = host ? 1 : automatic_split().first;
    team_size = S > 1 ? C * (S - 1) : 0;
  }
  if (team_size == 0 && !host) {
    const auto sg = automatic_split();
    team_size = C * sg.first;
    kern.gch = sg.second;
    const int sms = multiprocessor_count<typename Kern::exec>();
    if (wave_aware && sg.first > 1 && sms > 0) {
      // candidates keep whole warps (tensor_core_ok) and the radial path gpu_launch chose (a chunk >= S edges)
      auto chunk = [&](int S) { return sg.second > 0 ? Kern::radial_chunk_for(C, H, dk, adjoint, S, limit, want, S) : 0; };
      const int S = wave_aware_split(n, sg.first, [&](int s) {
        const int g = chunk(s);
        if ((C * s) % 32 != 0 || (sg.second > 0 && g == 0)) return 0;
        return sms * fused_blocks_per_sm<Tag>(kern, C * s,
                                              Kern::scratch_bytes(C, H, dk, adjoint, s, g, Kern::chunk_overlap(C * s), g));
      });
      team_size = C * S;
      kern.gch = chunk(S);
    }
  } else {
    if (team_size == 0) team_size = 1;
    if (gemm && host && team_size == 1)  // host: one thread runs the chunk GEMM, then loops over the channels
      kern.gch = Kern::radial_chunk_for(C, H, dk, adjoint, 1, size_t(-1), want);
    else if (gemm && team_size >= C)
      kern.gch = Kern::radial_chunk_for(C, H, dk, adjoint, team_size / C, host ? size_t(-1) : limit, want);
  }
  if (team_size != 1 && (team_size < C || team_size % C != 0))
    throw std::invalid_argument("batmobile: team size must be 1 or a multiple of C");
  kern.tc = gemm && kern.prm.radial_mode == 2 && Kern::tensor_core_chunk(kern.gch, adjoint) &&
            Kern::tensor_core_ok(kern.prm, team_size);
  kern.tab = gemm && kern.gch > 0 && kern.prm.radial_mode == 3 && kern.prm.Rtab.extent(0) > 0 &&
             kern.prm.rtab_cols >= Kern::NW * C;
  const int S = edge_split(team_size, C);
  const bool overlap = Kern::chunk_overlap(team_size);
  kern.gsc = Kern::basis_chunk_for(C, H, dk, adjoint, S, kern.gch, overlap, host ? size_t(-1) : limit,
                                   kern.prm.basis_chunk);
  if (!host && kern.gsc > kern.gch) kern.gsc = basis_chunk_keeping_occupancy<Tag>(kern, adjoint, team_size);
  const size_t bytes = Kern::scratch_bytes(C, H, dk, adjoint, S, kern.gch, overlap, kern.gsc);
  // host team scratch is ordinary memory; on GPUs it is the shared memory of one block
  if (!host && bytes > limit)
    throw std::invalid_argument("batmobile: interaction team scratch " + std::to_string(bytes) + " B exceeds " +
                                std::to_string(limit) + " B (lower team_size)");
  return Pol(n, team_size).set_scratch_size(0, Kokkos::PerTeam(bytes));
}

// Calls f(policy) with the policy of tag TagT<true> (radial mode 1) if prm.radial_mode = 1 and a mode-1 chunk
// fits, else with that of TagT<false> (mode 0); kern.gch is set to match.
template <template <bool> class TagT, class Kern, class F>
void with_atom_policy(Kern& kern, int n, bool adjoint, int team_size, F&& f) {
  if (kern.prm.radial_mode >= 1) {
    const auto pol = atom_team_policy<TagT<true>>(kern, n, adjoint, team_size);
    if (kern.gch > 0) return f(pol);
  }
  f(atom_team_policy<TagT<false>>(kern, n, adjoint, team_size));
}

// The launches that LayerParams::const_slot_launch can take over (compiled only there, to keep the build time):
// CUDA builds, float, radial mode >= 1, capped (fused_cap_blocks): the forward and the adjoints with key width
// <= kSmallDk, as MD runs them. The uncapped A/B launches go through Kokkos's.
template <class Kern, class Pol>
inline constexpr bool const_slots_compiled = [] {
  using Tag = typename Pol::work_tag;
  if constexpr (fused_cap_blocks<Kern, Tag> > 0)
    return const_launch_available && std::is_same<Pol, CappedPolicy<Kern, Tag>>::value;
  return false;
}();

// parallel_for of a fused kernel, then its shared-memory carveout if LayerParams::shared_carveout asks for one.
template <class Kern, class Pol>
void launch_fused(const char* name, const Kern& kern, const Pol& pol) {
  if constexpr (const_slots_compiled<Kern, Pol>) {
    if (kern.prm.const_slot_launch == 1) {
      parallel_for_const_slots(name, pol, kern);
      if (kern.prm.shared_carveout > 0) {
        const auto ks = const_slot_kernels<Kern, Pol>();
        set_kernel_carveout(ks.first, kern.prm.shared_carveout);
        set_kernel_carveout(ks.second, kern.prm.shared_carveout);
      }
      return;
    }
  }
  Kokkos::parallel_for(name, pol, kern);
  if (kern.prm.shared_carveout > 0) set_shared_carveout<Kern, Pol>(kern.prm.shared_carveout);
}

// Policy P with pol's league, team and scratch, on execution-space instance `space`.
template <class P, class Pol>
P policy_on(const typename P::execution_space& space, const Pol& pol) {
  P p(space, pol.league_size(), pol.team_size());
  return p.set_scratch_size(0, Kokkos::PerTeam(pol.scratch_size(0)));  // (no per-thread scratch here)
}

// Launches a fused kernel with policy pol's league, team and scratch on execution-space instance `space` (a Lanes
// lane or the default), capped where fused_capped says so.
template <class Kern, class Pol>
void launch_kernel(const char* name, const Kern& kern, const Pol& pol, const typename Kern::exec& space) {
  using Tag = typename Pol::work_tag;
  if constexpr (fused_cap_blocks<Kern, Tag> > 0) {
    if (fused_capped<Kern, Tag>(kern, pol.team_size())) {
      launch_fused(name, kern, policy_on<CappedPolicy<Kern, Tag>>(space, pol));
      return;
    }
  }
  if constexpr (runs_on_host<typename Kern::exec>) {
    // Host threads take teams dynamically: the sender adjoint's teams (ghosts included) differ widely in edge count
    // and are ordered owned atoms first, so a static split left one thread most of the work (648 waters, 2 OpenMP
    // threads: sender adjoint 90.6 ms per call against 51.1 for the receiver adjoint; 106 / 98 on one thread).
    launch_fused(name, kern,
                 policy_on<Kokkos::TeamPolicy<typename Kern::exec, Tag, Kokkos::Schedule<Kokkos::Dynamic>>>(space, pol));
  } else {
    launch_fused(name, kern, policy_on<Kokkos::TeamPolicy<typename Kern::exec, Tag>>(space, pol));
  }
}

// Launch that the drivers choose for one layer (bench, logs): team size, mode-1 chunk (0: mode 0), tensor cores
// (radial mode 2) and team scratch bytes of the forward and of the adjoint kernels.
struct InteractionLaunch {
  int team_fwd, chunk_fwd, team_adj, chunk_adj;
  int basis_fwd = 0, basis_adj = 0;  // mode 1 basis chunks (edges per prepare pass)
  bool tc_fwd, tc_adj;
  bool capped_adj = false;  // adjoint launched capped (LaunchBounds<128, 3>; first/last layer roles <128, 4>)
  bool capped_fwd = false;  // forward launched with LaunchBounds<128, 4> (LayerParams::forward_min_blocks)
  bool table_fwd = false, table_adj = false;  // radial mode 3: outputs read from the table
  size_t bytes_fwd, bytes_adj;
};
// Calls f(kern) with a default-constructed adjoint kernel whose key-width bound DKM fits prm.dk (kSmallDk if it can).
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer, class F>
void with_adjoint_kernel(const LayerParams<T, Device>& prm, F&& f) {
  if (prm.dk <= kSmallDk) {
    InteractionKernel<T, Device, L, ATTN, kSmallDk, ROLE> kern;
    f(kern);
  } else {
    InteractionKernel<T, Device, L, ATTN, kMaxDk, ROLE> kern;
    f(kern);
  }
}

// ROLE: the layer role's kernels (InteractionKernel; prm from make_layer_params with the same role), here and in
// interaction_forward / interaction_backward.
// The forward launched with team size argument team_fwd, the adjoints with team_adj, for n atoms (teams: the
// wave-aware split depends on them).
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer>
InteractionLaunch interaction_launch(const LayerParams<T, Device>& prm, int team_fwd, int team_adj, int n) {
  using Kern = InteractionKernel<T, Device, L, ATTN, kMaxDk, ROLE>;
  Kern kern;
  kern.prm = prm;
  InteractionLaunch r;
  with_atom_policy<Kern::template ForwardT>(kern, n, false, team_fwd, [&](const auto& pol) {
    r.team_fwd = pol.team_size();
    r.chunk_fwd = kern.gch;
    r.basis_fwd = kern.gsc;
    r.tc_fwd = kern.tc;
    r.table_fwd = kern.tab;
    r.capped_fwd = fused_capped<Kern, typename std::decay_t<decltype(pol)>::work_tag>(kern, pol.team_size());
  });
  r.bytes_fwd = Kern::scratch_bytes(prm.C, prm.H, prm.dk, false, edge_split(r.team_fwd, prm.C), r.chunk_fwd,
                                    Kern::chunk_overlap(r.team_fwd), r.basis_fwd);
  with_adjoint_kernel<T, Device, L, ATTN, ROLE>(prm, [&](auto& adj) {
    using Adj = std::decay_t<decltype(adj)>;
    adj.prm = prm;
    with_atom_policy<Adj::template RecvAdjT>(adj, n, true, team_adj, [&](const auto& pol) {
      r.team_adj = pol.team_size();
      r.chunk_adj = adj.gch;
      r.basis_adj = adj.gsc;
      r.tc_adj = adj.tc;
      r.table_adj = adj.tab;
      r.capped_adj = fused_capped<Adj, typename std::decay_t<decltype(pol)>::work_tag>(adj, pol.team_size());
    });
    r.bytes_adj = Adj::scratch_bytes(prm.C, prm.H, prm.dk, true, edge_split(r.team_adj, prm.C), r.chunk_adj,
                                     Adj::chunk_overlap(r.team_adj), r.basis_adj);
  });
  return r;
}
// Both with team_size, for one atom.
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer>
InteractionLaunch interaction_launch(const LayerParams<T, Device>& prm, int team_size = 0) {
  return interaction_launch<T, Device, L, ATTN, ROLE>(prm, team_size, team_size, 1);
}

// The inputs that the forward and the adjoint kernels of a layer share.
template <class Kern, class G, class Prm, class H, class O, class Work>
void bind_layer(Kern& kern, const G& g, const Prm& prm, const H& h, const O& o, const Work& work) {
  kern.g = g;
  kern.prm = prm;
  kern.h = h;
  kern.o = o;
  kern.M = work.M;
  kern.Z = work.Z;
  kern.q = work.q;
  kern.k = work.k;
}

// Forward of one layer: m (and, if ATTN, o, saving M and Z in work).
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer>
void interaction_forward(const Graph<T, Device>& g, const LayerParams<T, Device>& prm,
                         const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& h,
                         const Kokkos::View<T***, Kokkos::LayoutRight, Device>& m,
                         const Kokkos::View<T***, Kokkos::LayoutRight, Device>& o, InteractionWork<T, Device>& work,
                         int team_size = 0) {
  using exec = typename Device::execution_space;
  using Kern = InteractionKernel<T, Device, L, ATTN, kMaxDk, ROLE>;
  const bool qk_given = work.qk_given;
  work.qk_given = false;
  if (work.resize(g.n_recv, g.n_total, prm.A, prm.dk) && qk_given)
    throw std::logic_error("interaction_forward: q and k were given in work arrays too small for this graph");
  if (ATTN && !qk_given) {
    ProjectQK<T, Device> pq{h, {}, prm.Wq, prm.Wk, prm.WqT, prm.WkT, work.q, work.k, work.gq, work.gk, g.n_recv, prm.C, prm.A * prm.dk};
    Kokkos::parallel_for("batmobile::project_qk",
                         Kokkos::RangePolicy<exec, Kokkos::IndexType<int64_t>>(0, int64_t(g.n_total) * prm.A * prm.dk),
                         pq);
  }
  Kern kern;
  bind_layer(kern, g, prm, h, o, work);
  kern.m = m;
  with_atom_policy<Kern::template ForwardT>(kern, g.n_recv, false, team_size, [&](const auto& pol) {
    launch_kernel("batmobile::interaction_fwd", kern, pol, exec());
  });
}

// Adjoint of one layer given gm = dE/dm, go = dE/do (receivers); accumulates f, vatom and (not for an embedding
// input) gh.
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer>
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
  with_adjoint_kernel<T, Device, L, ATTN, ROLE>(prm, [&](auto& kern) {
    using Kern = std::decay_t<decltype(kern)>;
    bind_layer(kern, g, prm, h, o, work);
    kern.gm = gm;
    kern.go = go;
    kern.gh = gh;
    kern.gq = work.gq;
    kern.gk = work.gk;
    kern.f = f;
    kern.vatom = vatom;
    // the sender's own accumulators, if the caller gave them: then the two kernels write disjoint arrays
    Kern send = kern;
    const bool own = work.f_send.extent(0) >= size_t(g.n_total) && work.vatom_send.extent(0) >= size_t(g.n_total) &&
                     work.f_send.extent(1) == 3 && work.vatom_send.extent(1) == 6;
    if (own) send.f = work.f_send, send.vatom = work.vatom_send;
    const bool concurrent = own && prm.concurrent_adjoints == 1 && Lanes<exec>::concurrent;
    if (concurrent && !work.lanes) work.lanes = std::make_shared<Lanes<exec>>();
    if (concurrent) work.lanes->fork();
    const exec recv_space = concurrent ? work.lanes->lane(0) : exec();
    const exec send_space = concurrent ? work.lanes->lane(1) : exec();
    with_atom_policy<Kern::template RecvAdjT>(kern, g.n_recv, true, team_size, [&](const auto& pol) {
      launch_kernel("batmobile::interaction_recv_adj", kern, pol, recv_space);
    });
    with_atom_policy<Kern::template SendAdjT>(send, g.senders(), true, team_size, [&](const auto& pol) {
      launch_kernel("batmobile::interaction_send_adj", send, pol, send_space);
    });
    if (concurrent) work.lanes->join();
  });
  if (ATTN && !(ROLE & kEmbeddingInput)) {
    ProjectQK<T, Device> pq{h, gh, prm.Wq, prm.Wk, prm.WqT, prm.WkT, work.q, work.k, work.gq, work.gk, g.n_recv, prm.C, prm.A * prm.dk};
    // (with sender groups only the groups' rows of gk are written: the images' dE/dk is in their atom's row)
    Kokkos::parallel_for("batmobile::project_qk_adj",
                         Kokkos::RangePolicy<exec, typename ProjectQK<T, Device>::Adjoint, Kokkos::IndexType<int64_t>>(
                             0, int64_t(g.senders()) * prm.C),
                         pq);
  }
}

}  // namespace kernels
}  // namespace batmobile
