// Parameters of one fused interaction layer (interaction.hpp) and the size bounds of its kernels.
//
// LayerParams: W1 (H, NB), b1 (H), W2t (H, 2 P C) = transpose of radial.W2 (so that channel-threads read
//   consecutive addresses), Wg (A, NB), Wq, Wk (A*dk, C), r_c, inv_avg = 1 / avg_num_neighbors, and the kernels'
//   launch options (radial mode, chunks; the register caps and the launch path are fixed: impl/launch_tuning.hpp).
// make_layer_params() builds it from host arrays in the model-file shapes.
#pragma once
#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "tensor_core.hpp"

namespace batmobile {
namespace kernels {

inline constexpr int kMaxNB = 16;  // radial basis size bound (register arrays)
inline constexpr int kMaxDk = 32;  // attention key width bound
// The adjoint kernels keep dq/dk partials for DKM key components in registers next to force and virial; the
// drivers pick DKM = kSmallDk when dk <= kSmallDk (the bundled model: dk = 8), since with DKM = 32 the unused
// registers made the float L = 2 adjoints spill.
inline constexpr int kSmallDk = 8;
// heads: the prepare pass stores per-(edge, head) softmax terms in kMaxHeads scratch columns
inline constexpr int kMaxHeads = 16;
inline constexpr int kMaxBasisChunk = 64;  // edges per prepare pass of the mode-1 kernels (LayerParams::basis_chunk)

// How the fused kernels form the radial MLP's outputs (LayerParams::radial_mode). The values are the radial modes
// 0, 1, 2 and 4 that the comments, the launch report and the logs name.
enum class RadialMode : int {
  // each channel-thread computes its radial outputs from the hidden layer, edge by edge (radial_from_hidden)
  kPerEdge = 0,
  // the team computes them for a chunk of edges as a small GEMM into team scratch (radial_gemm), where the scratch
  // fits (else kPerEdge): each W2t load then feeds several edges
  kTeamGemm = 1,
  // that GEMM on tensor cores (radial_mma: 3xTF32, fp32 accuracy) where they apply (float, sm_80+ CUDA build, H a
  // multiple of 8, whole warps, chunks that fill the MMA: tensor_core_ok / tensor_core_chunk), else kTeamGemm
  kTensorCore = 2,
  // `precision mixed`: kTensorCore with f16 operands and f32 accumulation (one MMA per 16 hidden units, B fragments
  // kept in registers) where LayerParams::W2th exists, else kTensorCore
  kTensorCoreF16 = 4,
};
// Whether m is one of the enumerators (a RadialMode converted from another int is none; the launch rejects it).
constexpr bool valid_radial_mode(RadialMode m) {
  return m == RadialMode::kPerEdge || m == RadialMode::kTeamGemm || m == RadialMode::kTensorCore ||
         m == RadialMode::kTensorCoreF16;
}
// Whether the radial outputs come from a team GEMM over a chunk of edges (every mode but kPerEdge).
constexpr bool team_gemm_mode(RadialMode m) { return m != RadialMode::kPerEdge; }
// Whether the mode asks for tensor cores.
constexpr bool tensor_core_mode(RadialMode m) {
  return m == RadialMode::kTensorCore || m == RadialMode::kTensorCoreF16;
}

template <class T, class Device>
struct LayerParams {
  using V1 = Kokkos::View<const T*, Device>;
  using V2 = Kokkos::View<const T**, Kokkos::LayoutRight, Device>;
  V2 W1, W2t, Wg, Wq, Wk;
  V2 WqT, WkT;  // (C, A dk): ProjectQK's forward reads them, consecutive threads consecutive addresses
  V1 b1;
  // RadialMode::kTensorCore: W2t's A fragments for the tensor cores (pack_a_fragments of W2t; float only, else
  // empty).
  Kokkos::View<const float*, Device> W2tc;
  // RadialMode::kTensorCoreF16: the same A fragments as f16 pairs (pack_a_fragments_f16; float, H a multiple of 16
  // up to kF16MaxK, else empty).
  Kokkos::View<const uint32_t*, Device> W2th;
  T r_c = 5, inv_avg = 1;
  int C = 0, NB = 0, H = 0, A = 1, dk = 1;
  // Layer role (common.hpp) whose paths' radial-MLP rows W2t holds (2 role_num_paths C columns; make_layer_params);
  // the launch checks it against the kernel's.
  int role = kGeneralLayer;
  // Default kTensorCore: the team GEMM gave faster MD than kPerEdge on the H200 (and on host back-ends), and the
  // tensor cores faster than kTeamGemm there.
  RadialMode radial_mode = RadialMode::kTensorCore;
  int radial_chunk = 0;  // mode 1 edges per chunk: 2, 4 or 8; 0 = automatic (largest that fits)
  // Mode 1: at most this many edges (a multiple of the radial chunk, up to kMaxBasisChunk) share one prepare pass
  // (geometry, Bessel basis, hidden layer) whose radial chunks then run one after another; 0 = automatic (the
  // largest that fits the team scratch without costing blocks per SM: basis_chunk_keeping_occupancy); 1 = one
  // prepare pass per radial chunk. Default 0: fewer, larger prepare passes gave faster MD on the H200.
  int basis_chunk = 0;
  // GPU paths (teams of C x S threads): hidden units per item of the prepare pass (prepare_basis). Each item forms the
  // edge's geometry and Bessel basis (one sin/cos pair, NB recurrence steps) and then `prepare_span` hidden units, so
  // the basis is formed H / prepare_span times per edge instead of H times, with H / prepare_span times fewer items
  // per edge. 0 (default) = automatic, per prepare pass of nf edges: the smallest divisor of H for which the
  // nf H / span items take one round of the team (auto_prepare_span); else a divisor of H. Results are bit-identical
  // for every value. One-thread teams (host back-ends) always take all H hidden units of an edge in one item.
  int prepare_span = 0;
};

// Dimensions of a fused kernel (InteractionKernel's Dims): RuntimeDims reads C, H, NB, A and dk from LayerParams;
// FixedDims compiles them in, so that the loops over them unroll without guards and their index arithmetic folds into
// constant offsets (fewer instructions per edge: the kernels are bound by instruction issue, docs/performance.md).
struct RuntimeDims {
  static constexpr bool fixed = false;
  static constexpr int C = 0, H = 0, NB = 0, A = 0, dk = 0;  // (not used: the kernels read LayerParams)
};
template <int C_, int H_, int NB_, int A_, int DK_>
struct FixedDims {
  static_assert(C_ > 0 && H_ > 0 && NB_ > 0 && NB_ <= kMaxNB && A_ > 0 && A_ <= kMaxHeads && C_ % A_ == 0 &&
                    DK_ > 0 && DK_ <= kMaxDk,
                "FixedDims: sizes within the kernels' bounds");
  static constexpr bool fixed = true;
  static constexpr int C = C_, H = H_, NB = NB_, A = A_, dk = DK_;
};
// The dimensions of the bundled potentials (docs/model.md defaults), compiled in for feature degree kBundledL.
using BundledDims = FixedDims<32, 32, 8, 4, 8>;
inline constexpr int kBundledL = 2;

// LayerParams as a kernel of dimensions Dims sees them: with FixedDims its static members C, H, NB, A and dk hide
// LayerParams' run-time fields, so that the kernels' `prm.C` is a compile-time constant (dims_match checks the
// values before such a kernel runs).
template <class T, class Device, class Dims = RuntimeDims>
struct ShapedParams : LayerParams<T, Device> {
  ShapedParams() = default;
  KOKKOS_INLINE_FUNCTION ShapedParams(const LayerParams<T, Device>& p) : LayerParams<T, Device>(p) {}
};
template <class T, class Device, int C_, int H_, int NB_, int A_, int DK_>
struct ShapedParams<T, Device, FixedDims<C_, H_, NB_, A_, DK_>> : LayerParams<T, Device> {
  static constexpr int C = C_, H = H_, NB = NB_, A = A_, dk = DK_;
  ShapedParams() = default;
  KOKKOS_INLINE_FUNCTION ShapedParams(const LayerParams<T, Device>& p) : LayerParams<T, Device>(p) {}
};

// Whether kernels of dimensions Dims may run layer parameters prm.
template <class Dims, class T, class Device>
bool dims_match(const LayerParams<T, Device>& prm) {
  if constexpr (Dims::fixed)
    return prm.C == Dims::C && prm.H == Dims::H && prm.NB == Dims::NB && prm.A == Dims::A && prm.dk == Dims::dk;
  return true;
}

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
  if (NB > kMaxNB || dk > kMaxDk || A > kMaxHeads || C % A != 0)
    throw std::invalid_argument("make_layer_params: unsupported sizes");
  const std::vector<double> W2 = layer_radial_rows<L>(W2_all, C, H, role);
  const int P = role_num_paths(L, role);
  auto to_device = [](const std::vector<double>& src, int rows, int cols, bool transpose, const char* name) {
    Kokkos::View<T**, Kokkos::LayoutRight, Device> d(std::string(name), transpose ? cols : rows,
                                                     transpose ? rows : cols);
    if (src.size() != size_t(rows) * cols) throw std::invalid_argument(std::string("bad size: ") + name);
    auto hm = Kokkos::create_mirror_view(d);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) (transpose ? hm(c, r) : hm(r, c)) = T(src[size_t(r) * cols + c]);
    Kokkos::deep_copy(d, hm);
    return d;
  };
  LayerParams<T, Device> p;
  p.W1 = to_device(W1, H, NB, false, "W1");
  p.W2t = to_device(W2, 2 * P * C, H, true, "W2t");
  p.Wg = to_device(Wg, A, NB, false, "Wg");
  p.Wq = to_device(Wq, A * dk, C, false, "Wq");
  p.Wk = to_device(Wk, A * dk, C, false, "Wk");
  p.WqT = to_device(Wq, A * dk, C, true, "WqT");
  p.WkT = to_device(Wk, A * dk, C, true, "WkT");
  auto b = to_device(b1, 1, H, false, "b1");
  p.b1 = Kokkos::subview(b, 0, Kokkos::ALL());
  if (std::is_same<T, float>::value && H % MmaTile::K == 0 && (2 * P * C) % MmaTile::M == 0) {
    // W2t(hh, col) = W2(col, hh), read in place
    const auto frag = pack_a_fragments([&](int hh, int col) { return W2[size_t(col) * H + hh]; }, H, 2 * P * C);
    Kokkos::View<float*, Device> d("W2tc", frag.size());
    Kokkos::deep_copy(d, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                             frag.data(), frag.size()));
    p.W2tc = d;
    if (H % F16Tile::K == 0 && H <= kF16MaxK) {
      const auto half = pack_a_fragments_f16([&](int hh, int col) { return W2[size_t(col) * H + hh]; }, H, 2 * P * C);
      Kokkos::View<uint32_t*, Device> dh("W2th", half.size());
      Kokkos::deep_copy(dh, Kokkos::View<const uint32_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                                half.data(), half.size()));
      p.W2th = dh;
    }
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

}  // namespace kernels
}  // namespace batmobile
