// The functor of the fused interaction kernels of one layer (interaction.hpp gives the layouts and the algorithm):
// its tags, inputs and outputs, the team-scratch layout of an edge chunk, and the declarations of its stages, which
// are defined by role in interaction_chunk.hpp (the per-chunk stages that the forward and the adjoints share),
// interaction_forward.hpp and interaction_adjoint.hpp.
//
// Template parameters: T (float or double), Device, L (feature degree), ATTN (on-the-fly attention), DKM (key width
// bound of the adjoints' register partials: kSmallDk or kMaxDk), ROLE (layer role bits, common.hpp), Dims (C, H, NB,
// A, dk read from LayerParams, RuntimeDims, or compiled in, FixedDims: interaction_params.hpp).
#pragma once
#include <Kokkos_Core.hpp>

#include <cstddef>

#include "common.hpp"
#include "graph.hpp"
#include "interaction_params.hpp"
#include "interaction_radial.hpp"
#include "sh.hpp"
#include "tp.hpp"

namespace batmobile {
namespace kernels {

// lg of an edge whose envelope is 0 (weight exactly 0 in the online softmax, whose running max starts at -1e30)
inline constexpr float kMaskedLogit = -3e38f;

// Edge split S of a fused-kernel team of ts threads for C channels: thread = (channel, edge slot) when ts >= C,
// else 1 (host back-ends: one thread per team loops over the channels).
KOKKOS_INLINE_FUNCTION constexpr int edge_split(int ts, int C) { return ts >= C ? ts / C : 1; }
// The automatic GPU edge split before the scratch and team-size limits (gpu_launch): 128-thread teams.
KOKKOS_INLINE_FUNCTION constexpr int auto_edge_split(int C) { return 128 / C > 1 ? 128 / C : 1; }

template <class T, class Device, int L, bool ATTN, int DKM = kMaxDk, int ROLE = kGeneralLayer, class Dims = RuntimeDims>
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
  // per-channel partials reduced per team: force, virial and dq/dk (a sender team), or dq and dk (a pair team)
  static constexpr int NV = FEATURE_GRAD ? 9 + DKM : 9;
  static constexpr int NVP = FEATURE_GRAD ? 9 + 2 * DKM : 9;
  static constexpr int dkm = DKM;
  static_assert(!Dims::fixed || Dims::dk <= DKM, "Dims: key width within the adjoints' bound");
  using dims = Dims;
  using scalar = T;
  static constexpr int CH = 16;          // edges per chunk whose Bessel basis and hidden layer the team shares
  // Columns of a chunk edge's geometry row: r (3), |r|, r / |r| (3), 1 / |r|. The prepare pass forms the unit vector
  // and the reciprocal once per edge instead of every channel thread dividing by |r|.
  static constexpr int kGeoCols = 8;
  static constexpr int NW = (ATTN ? 2 : 1) * P;  // radial outputs per channel (weights, attention values)
  // Scratch columns of the per-(edge, head) attention terms: the compiled-in head count, else the bound (with A = 4
  // of 16, the pair adjoint's three such arrays take a quarter of the scratch, and its basis chunks can be longer).
  static constexpr int kHeadCols = Dims::fixed ? Dims::A : kMaxHeads;
  // Row stride of the radial outputs w and dw in team scratch: NW C padded against bank conflicts (radial_out_stride)
  KOKKOS_INLINE_FUNCTION static constexpr int radial_cols(int C) { return radial_out_stride(NW * C); }
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
  // Kernel tags; TEAM_RADIAL = radial mode >= 1, the team computes each chunk's radial outputs into scratch (a
  // separate instantiation, so that each mode gets its own registers).
  template <bool TEAM_RADIAL>
  struct ForwardT {
    static constexpr bool team_radial = TEAM_RADIAL;
  };
  template <bool TEAM_RADIAL>
  struct PairAdjT {
    static constexpr bool team_radial = TEAM_RADIAL;
  };
  template <bool TEAM_RADIAL>
  struct SendAdjT {
    static constexpr bool team_radial = TEAM_RADIAL;
  };
  using Forward = ForwardT<false>;
  using PairAdj = PairAdjT<false>;
  using SendAdj = SendAdjT<false>;

  // Team scratch: per-edge data of one chunk (geometry (r, d), the other atom of the edge (-1: not an edge),
  // per-(edge, head) attention terms (forward: lg = logit + log u; adjoint: lg = softmax weight p, dlg = d(logit +
  // log u)/dd; they are the same for all channels of a head, so the prepare pass forms them once; the pair adjoint
  // also the reverse edge's receiver, other2 (-1: no reverse edge on this rank), and its softmax weight lg2), hidden
  // activations s and ds/dd ((basis_edges, H); (H, basis_edges) in radial mode 1, which reads several edges at once;
  // mode 1 also the radial outputs w, dw/dd (radial_edges, NW C)), and the end-of-atom arrays: adjoint partials part
  // (C S, 9 + dk) and the parked partials buf of edge slots 1..S-1.
  template <bool TEAM_RADIAL>
  struct Chunk {
    static constexpr bool team_radial = TEAM_RADIAL;  // radial mode 1
    ST2 geo, lg, dlg, lg2, s, sd, w, dw;
    SI1 other, other2;
    char* base;             // start of the team scratch (end-of-atom arrays: part_of, buf_of)
    int radial_edges = CH;  // edges per radial chunk (rows of w, dw; mode 1: 2, 4 or 8)
    int basis_edges = CH;   // edges per basis chunk (rows of geo, lg, dlg, s, sd, other): a multiple of radial_edges
    bool overlap;           // chunk_overlap(team size)
    int kind = kForwardScratch;  // the team-scratch layout (common.hpp: kForwardScratch, ...)
    // Row of w / dw of basis-chunk edge t: radial chunks start at multiples of radial_edges (a power of 2)
    KOKKOS_INLINE_FUNCTION int wrow(int t) const { return t & (radial_edges - 1); }
    // Channel c's entry of edge t's row in w or dw (rows radial_cols(C) apart: a compile-time stride with
    // compile-time C); its radial outputs are C apart from there.
    KOKKOS_INLINE_FUNCTION const T* radial_row(const ST2& out, int t, int C, int c) const {
      return out.data() + wrow(t) * radial_cols(C) + c;
    }
  };
  // Byte offsets of the arrays of Chunk (each 32-byte aligned) for layout `adjoint` (common.hpp: kForwardScratch,
  // kSendScratch, kPairScratch, which adds lg2, other2 and the dk partials to part). In mode 1 the end-of-atom
  // arrays overlap the chunk (overlap = true; not for one thread per team, which accumulates them across chunks): they
  // are written only after the last chunk, behind a barrier. Mode 1 basis chunks hold basis_edges edges (0:
  // radial_edges), mode 0 CH.
  struct Layout {
    size_t geo, lg, dlg, lg2, s, sd, other, other2, w, dw, part, buf, total;
  };
  KOKKOS_INLINE_FUNCTION static size_t take(size_t& off, size_t bytes) {
    const size_t o = off;
    off += (bytes + 31) / 32 * 32;
    return o;
  }
  KOKKOS_INLINE_FUNCTION static Layout layout(int C, int H, int dk, int adjoint, int S, int radial_edges,
                                              bool overlap = true, int basis_edges = 0) {
    const size_t t = sizeof(T), radial_rows = radial_edges > 0 ? radial_edges : CH,
                 basis_rows = radial_edges > 0 && basis_edges > radial_edges ? basis_edges : radial_rows;
    Layout lo{};
    size_t off = 0;
    lo.geo = take(off, t * basis_rows * kGeoCols);
    lo.lg = take(off, t * basis_rows * kHeadCols);
    if (adjoint) lo.dlg = take(off, t * basis_rows * kHeadCols);
    if (adjoint == kPairScratch) lo.lg2 = take(off, t * basis_rows * kHeadCols);
    if (radial_edges > 0) {  // (H, basis edges) with padded rows, ds/dd right after s (radial_hidden_gap)
      const size_t block = size_t(H) * radial_hidden_stride(int(basis_rows)), gap = radial_hidden_gap(int(block));
      lo.s = take(off, t * (2 * block + gap));
      lo.sd = lo.s + t * (block + gap);
    } else {
      lo.s = take(off, t * basis_rows * H);
      lo.sd = take(off, t * basis_rows * H);
    }
    lo.other = take(off, sizeof(int) * basis_rows);
    if (adjoint == kPairScratch) lo.other2 = take(off, sizeof(int) * basis_rows);
    if (radial_edges > 0) {
      lo.w = take(off, t * radial_rows * radial_cols(C));
      if (adjoint) lo.dw = take(off, t * radial_rows * radial_cols(C));
    }
    const size_t chunk_end = off;
    if (radial_edges > 0 && overlap) off = 0;
    if (adjoint) lo.part = take(off, sizeof(double) * C * S * part_cols(adjoint, dk));
    if (S > 1) lo.buf = take(off, t * C * (S - 1) * merge_cols(adjoint));
    lo.total = off > chunk_end ? off : chunk_end;
    return lo;
  }
  // Per-team scratch for edge split S (S = 1: host or one thread per channel) and radial chunk radial_edges (0: mode
  // 0).
  static size_t scratch_bytes(int C, int H, int dk, int adjoint, int S = 1, int radial_edges = 0, bool overlap = true,
                              int basis_edges = 0) {
    return layout(C, H, dk, adjoint, S, radial_edges, overlap, basis_edges).total + 64;  // + alignment of the base
  }
  // Whether the end-of-atom arrays may overlap a mode-1 chunk for teams of ts threads: not for one thread per team
  // on host back-ends, which loops over the channels and accumulates the adjoint partials across chunks (device
  // back-ends run mode 1 with teams of C * S only, so there it is a compile-time true).
  KOKKOS_INLINE_FUNCTION static constexpr bool chunk_overlap(int ts) { return !(runs_on_host<exec> && ts == 1); }
  // Columns of the adjoints' end-of-atom partials: force, virial and dq or dk (both for the pair adjoint's layout).
  KOKKOS_INLINE_FUNCTION static constexpr int part_cols(int kind, int dk) {
    return 9 + (kind == kPairScratch ? 2 : 1) * dk;
  }
  // Columns of a parked partial of edge slot s > 0: forward m (K), o (K), run_max, run_z; adjoint dE/dh_j (K).
  KOKKOS_INLINE_FUNCTION static constexpr int merge_cols(bool adjoint) { return adjoint ? K : 2 * K + 2; }

  Graph<T, Device> g;
  ShapedParams<T, Device, Dims> prm;  // (with FixedDims, prm.C, prm.H, ... are compile-time constants)
  CV3 h;
  V3 m, o;     // forward outputs (o is read by the adjoint)
  V2 M, Z;     // saved softmax statistics
  V2 q, k;     // projections
  CV3 gm, go;  // upstream gradients (receivers)
  V3 gh;       // dE/dh (accumulated)
  V2 gq, gk;   // dE/dq, dE/dk (written)
  D2 f, vatom;

  // Set by atom_team_policy: radial_edges, radial mode 1 in use with chunks of radial_edges edges (0: mode 0);
  // basis_edges, its basis chunk: the edges whose geometry, Bessel basis and hidden layer one prepare pass fills;
  // use_tensor_cores, radial modes 2 and 4: the chunk GEMM runs on tensor cores, kTensorCores3xTf32 (radial_mma) or
  // kTensorCoresF16 (radial_mma_f16).
  int radial_edges = 0;
  int basis_edges = 0;
  int use_tensor_cores = 0;
  int atom0 = 0;  // the sender adjoint's first atom (team n takes atom atom0 + n: the ghosts after a pair adjoint)
  // (Four ints after the Views: no padding. parallel_for_const_slots compares functors byte for byte, and padding
  // bytes are indeterminate; Interaction.KernelHasNoPadding checks it.)

  // Entry points (one team per atom): the forward (interaction_forward.hpp) and the adjoints: pair and sender
  // (interaction_adjoint.hpp).
  template <bool TEAM_RADIAL>
  KOKKOS_INLINE_FUNCTION void operator()(ForwardT<TEAM_RADIAL>, const member& team) const;
  template <bool TEAM_RADIAL>
  KOKKOS_INLINE_FUNCTION void operator()(PairAdjT<TEAM_RADIAL>, const member& team) const;
  template <bool TEAM_RADIAL>
  KOKKOS_INLINE_FUNCTION void operator()(SendAdjT<TEAM_RADIAL>, const member& team) const;

  template <bool TEAM_RADIAL>
  KOKKOS_INLINE_FUNCTION void check_team_size(int ts) const {
    if (ts != 1 && (ts < prm.C || ts % prm.C != 0)) Kokkos::abort("batmobile: team size must be 1 or C * S");
    if (TEAM_RADIAL && (radial_edges <= 0 || (ts < prm.C && !(runs_on_host<exec> && ts == 1))))
      Kokkos::abort("batmobile: radial mode 1 needs a chunk and team size C * S (host back-ends: or 1)");
  }

  // Slots s = 1..S-1 park n values (per channel) in rows (s - 1) C + c of buf; after the barrier slot 0 reads them.
  KOKKOS_INLINE_FUNCTION static void park(const ST2& buf, int C, int c, int slot, int col0, const T* v, int n) {
    if (slot > 0)
      for (int x = 0; x < n; ++x) buf((slot - 1) * C + c, col0 + x) = v[x];
  }

  // The kernels loop over radial chunks (the edge slots see the same edges whatever the basis chunk) and prepare a
  // basis chunk whenever one starts: one loop level, so that the capped adjoints keep their registers (a loop over
  // radial chunks nested in one over basis chunks spilled). Row in the basis chunk of the radial chunk that starts
  // at edge `start` of a list that starts at `begin`.
  template <class Ch>
  KOKKOS_INLINE_FUNCTION static int basis_row(const Ch& ch, int begin, int start) {
    return (start - begin) % ch.basis_edges;
  }

  // Components (a, 0..K-1, c) of an (n, K, C) feature view (LayoutRight, unpadded: the drivers check the extents) as
  // tp.hpp's Strided: a row pointer and an int stride instead of the view's 64-bit index arithmetic per component,
  // and constant offsets with compile-time C.
  // (Run-time dimensions index through the view's strides, as the kernels did before FixedDims: the row pointer form
  // made their capped sender adjoints spill.)
  template <class V>
  KOKKOS_INLINE_FUNCTION Strided<typename V::non_const_value_type> components(const V& v, int a, int c) const {
    if constexpr (Dims::fixed)
      return {v.data() + size_t(a) * (K * prm.C) + c, prm.C};
    else
      return {&v(a, 0, c), int(v.stride(1))};
  }

  // Key component x of head a of atom n in q or k ((rows, A dk) LayoutRight: InteractionWork::resize makes them so).
  KOKKOS_INLINE_FUNCTION T key(const V2& v, int n, int a, int x) const {
    if constexpr (Dims::fixed)
      return v.data()[size_t(n) * (prm.A * prm.dk) + a * prm.dk + x];
    else
      return v(n, a * prm.dk + x);
  }

  KOKKOS_INLINE_FUNCTION void load_h(int j, int c, T* hj) const {
    const auto hr = components(h, j, c);
    for (int kk = 0; kk < K; ++kk) hj[kk] = kk < KI ? hr[kk] : T(0);
  }

  // Per-chunk stages shared by the forward and the adjoints (interaction_chunk.hpp).
  template <bool TEAM_RADIAL>
  KOKKOS_INLINE_FUNCTION auto make_chunk(const member& team, int adjoint, int S) const -> Chunk<TEAM_RADIAL>;
  template <bool TEAM_RADIAL>
  KOKKOS_INLINE_FUNCTION scratch part_of(const Chunk<TEAM_RADIAL>& ch, int S) const;
  template <bool TEAM_RADIAL>
  KOKKOS_INLINE_FUNCTION ST2 buf_of(const Chunk<TEAM_RADIAL>& ch, int S) const;
  template <bool SENDER, bool GRAD, bool PAIR = false, class Ch>
  KOKKOS_INLINE_FUNCTION void prepare_basis(const member& team, const Ch& ch, int atom, int start, int left) const;
  template <bool GRAD, bool PAIR, class Ch>
  KOKKOS_INLINE_FUNCTION void edge_head_terms(const Ch& ch, int t, int i, int j, int i2, int a, T d, const T* B,
                                              const T* dB) const;
  KOKKOS_INLINE_FUNCTION T softmax_weight(int i, int a, T arg) const;
  KOKKOS_INLINE_FUNCTION int reverse_receiver(int j) const;
  template <bool GRAD, class Ch>
  KOKKOS_INLINE_FUNCTION void radial_outputs(const member& team, const Ch& ch, int first, int cnt) const;
  template <bool GRAD, class Ch>
  KOKKOS_INLINE_FUNCTION void edge_radial(const Ch& ch, int c, int t, T d, EdgeRadial<T, P>& R) const;

  // Forward stages (interaction_forward.hpp).
  template <class Ch>
  KOKKOS_INLINE_FUNCTION void forward_edge(int i, int c, int a, const Ch& ch, int t, T* accm, T* acco, T& run_max,
                                           T& run_z) const;
  KOKKOS_INLINE_FUNCTION void merge_forward(const member& team, const ST2& buf, int S, int c, int sl, T* accm,
                                            T* acco, T& run_max, T& run_z) const;
  KOKKOS_INLINE_FUNCTION void forward_write(int i, int c, int a, int chead, const T* accm, const T* acco, T run_max,
                                            T run_z) const;

  // Adjoint stages (interaction_adjoint.hpp).
  template <class Ch, class F>
  KOKKOS_INLINE_FUNCTION void with_edge_radial(const Ch& ch, int c, int t, const F& f) const;
  template <bool SENDER, class W, class DW>
  KOKKOS_INLINE_FUNCTION T edge_terms(int i, int j, int c, T pw, T dlg, T go_o, const T* Y, const W& w, const W& wv,
                                      const DW& dw, const DW& dwv, T* gY, T* gd, T* ghj) const;
  template <bool SENDER, class Ch, class A>
  KOKKOS_INLINE_FUNCTION void edge_force(const Ch& ch, int t, T gd, const T* gY, A* acc) const;
  template <class A>
  KOKKOS_INLINE_FUNCTION static void tally_virial(A* acc, const T* r, const T* gr) {
    add_half_edge_virial(acc + 3, r, gr);
  }
  // dE/dq_i (receiver side: from key k_j) or dE/dk_j (sender side: from q_i) of head a, given dE/ds, into acc[0, dk).
  template <bool SENDER, class A>
  KOKKOS_INLINE_FUNCTION void add_key_partials(A* acc, T gs, int i, int j, int a) const {
    if constexpr (ATTN && FEATURE_GRAD) {
      const T sdk = T(1) / sqrt(T(prm.dk));
      for (int x = 0; x < DKM; ++x)
        if (x < prm.dk) acc[x] += A(gs * sdk * (SENDER ? key(q, i, a, x) : key(k, j, a, x)));
    }
  }
  template <class Ch, class A>
  KOKKOS_INLINE_FUNCTION void sender_edge(int atom, int c, int a, const Ch& ch, int t, A* acc, T* ghj) const;
  template <class Ch, class A>
  KOKKOS_INLINE_FUNCTION void pair_edge(int atom, int c, int a, const Ch& ch, int t, T go_o, A* acc, T* ghj) const;
  template <int MODE, class Ch, class A>
  KOKKOS_INLINE_FUNCTION void team_edge(int atom, int c, int a, const Ch& ch, int t, T go_o, A* acc, T* ghj) const;
  KOKKOS_INLINE_FUNCTION T receiver_go_o(int i, int c) const;
  template <class G>
  KOKKOS_INLINE_FUNCTION T dot_o(int i, int c, const G& goi) const;
  KOKKOS_INLINE_FUNCTION int part_col(int v) const;
  KOKKOS_INLINE_FUNCTION void team_finish(const member& team, const scratch& part, int n, int mode) const;
  template <int MODE, bool TEAM_RADIAL>
  KOKKOS_INLINE_FUNCTION void adjoint_team(const member& team) const;
};

}  // namespace kernels
}  // namespace batmobile
