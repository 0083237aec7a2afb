// Launch policy of the fused interaction kernels (InteractionKernel, interaction_kernel.hpp), pure where it can be so
// that tests check it on any back-end: team sizes (edge split S), radial and basis chunks, tensor cores and tables,
// register caps; atom_team_policy() turns them into the Kokkos team policy, interaction_launch() reports them.
//
// Team size argument of the drivers (interaction_driver.hpp): 0 = automatic (host: 1; GPU: C * S with
// S = 128 / C, at least 1, team <= 256, lowered until the team scratch fits scratch_size_max(0) and the team fits
// team_size_max), 1 = one thread per team, C * S = edge split S, kWaveAwareTeam, kOneSlotLessTeam.
#pragma once
#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_cache.hpp"
#include "impl/launch_tuning.hpp"
#include "interaction_adjoint.hpp"
#include "interaction_forward.hpp"

namespace batmobile {
namespace kernels {

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

// Radial mode 2 runs on tensor cores for chunks that fill the B columns: smaller chunks (C = 64: forward 4,
// adjoint 2 edges) left them half empty and ran slower than mode 1 on the H200.
inline bool tensor_core_chunk(int radial_edges, bool adjoint) { return radial_edges >= mma_edges(adjoint); }
// Radial mode 2 applies: a float kernel of an sm_80+ CUDA build, packed fragments, whole warps, H a multiple of
// 8, output columns in tiles of 16.
template <class Kern, class Params>
bool tensor_core_ok(const Params& prm, int team_size) {
  return kTensorCoreTf32 && std::is_same<typename Kern::scalar, float>::value && !runs_on_host<typename Kern::exec> &&
         prm.W2tc.extent(0) > 0 && prm.H % MmaTile::K == 0 && (Kern::NW * prm.C) % MmaTile::M == 0 &&
         team_size % 32 == 0;
}

// Mode 1 basis chunk for radial chunk radial_edges: the largest multiple of radial_edges up to kMaxBasisChunk (and
// up to `want` if want > 0) whose scratch fits `limit`; radial_edges itself if none larger does.
template <class Kern>
int basis_chunk_for(int C, int H, int dk, int adjoint, int S, int radial_edges, bool overlap, size_t limit,
                    int want = 0) {
  int best = radial_edges;
  for (int bc = 2 * radial_edges; radial_edges > 0 && bc <= kMaxBasisChunk && (want <= 0 || bc <= want);
       bc += radial_edges)
    if (Kern::scratch_bytes(C, H, dk, adjoint, S, radial_edges, overlap, bc) <= limit) best = bc;
  return best;
}
// Mode 1 chunk for edge split S: `want` (2, 4, 8) or, if 0, the largest of 8, 4, 2 that is >= min_cap and
// whose scratch fits `limit`; 0 (mode 0) if none does.
template <class Kern>
int radial_chunk_for(int C, int H, int dk, int adjoint, int S, size_t limit, int want = 0, int min_cap = 2) {
  for (int cap : {8, 4, 2})
    if ((want == 0 ? cap >= min_cap : cap == want) && Kern::scratch_bytes(C, H, dk, adjoint, S, cap) <= limit)
      return cap;
  return 0;
}

// Automatic GPU launch: edge split S = auto_edge_split(C) = 128 / C (>= 1), team C S <= 256 and <= tmax; with
// radial mode 1 (team_radial) the largest S for which a mode-1 chunk of >= S edges fits `limit`, else (mode 0) S
// lowered until the scratch fits. Returns {S, radial chunk}.
template <class Kern>
Kokkos::pair<int, int> gpu_launch(int C, int H, int dk, int adjoint, bool team_radial, int want, int tmax,
                                  size_t limit) {
  const int S0 = auto_edge_split(C);
  auto team_ok = [&](int S) { return S == 1 || (C * S <= 256 && C * S <= tmax); };
  for (int S = S0; team_radial && S >= 1; --S) {
    const int chunk = team_ok(S) ? radial_chunk_for<Kern>(C, H, dk, adjoint, S, limit, want, S) : 0;
    if (chunk > 0) return {S, chunk};
  }
  int S = S0;
  while (S > 1 && (!team_ok(S) || Kern::scratch_bytes(C, H, dk, adjoint, S) > limit)) --S;
  return {S, 0};
}

// Register caps of the fused kernels, Kokkos::LaunchBounds<128, B> (at most 65536 / (128 B) registers per thread),
// compiled only where they apply, to keep the build time: device back-ends, float, radial mode >= 1; used there when
// the team has <= 128 threads. The forward with B = 4 (4 blocks of 128 threads per SM instead of 3), the adjoints
// with key width <= kSmallDk with B = 3 (168 registers, 3 blocks per SM instead of 2), those of the first and last
// layers (ROLE kEmbeddingInput, kScalarOutput) with B = 4 (their uncapped registers come close to 128).
// fused_cap_blocks: that B, 0 where no cap is compiled.
template <class Kern, class Tag>
inline constexpr bool is_forward_tag = std::is_same<Tag, typename Kern::template ForwardT<true>>::value ||
                                       std::is_same<Tag, typename Kern::template ForwardT<false>>::value;
template <class Kern, class Tag>
inline constexpr int fused_cap_blocks =
    !runs_on_host<typename Kern::exec> && std::is_same<typename Kern::scalar, float>::value && Tag::team_radial
        ? (is_forward_tag<Kern, Tag> ? 4 : Kern::dkm == kSmallDk ? (Kern::role == kGeneralLayer ? 3 : 4) : 0)
        : 0;
// The policy type of a capped launch of tag Tag.
template <class Kern, class Tag>
using CappedPolicy =
    Kokkos::TeamPolicy<typename Kern::exec, Tag, Kokkos::LaunchBounds<128, fused_cap_blocks<Kern, Tag>>>;

// Whether a kernel of tag Tag launches capped with teams of team_size: compiled and teams of at most 128 threads
// (unless a test switched the cap off: impl::LaunchTuning).
template <class Kern, class Tag>
bool fused_capped(int team_size) {
  constexpr int B = fused_cap_blocks<Kern, Tag>;
  const impl::LaunchTuning& tuning = impl::launch_tuning();
  const bool want = is_forward_tag<Kern, Tag> ? tuning.cap_forward : tuning.cap_adjoints;
  return B > 0 && want && team_size <= 128;
}

// The largest of basis_edges, basis_edges - radial_edges, ..., radial_edges whose blocks(.) is at least
// blocks(radial_edges) (pure; tests check it anywhere).
template <class Blocks>
int largest_chunk_keeping(int basis_edges, int radial_edges, const Blocks& blocks) {
  const int want = blocks(radial_edges);
  while (basis_edges > radial_edges && blocks(basis_edges) < want) basis_edges -= radial_edges;
  return basis_edges;
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
int fused_blocks_per_sm(const Kern&, int team_size, size_t bytes) {
  if constexpr (fused_cap_blocks<Kern, Tag> > 0)
    if (fused_capped<Kern, Tag>(team_size)) return blocks_per_sm<Kern, CappedPolicy<Kern, Tag>>(team_size, bytes);
  return blocks_per_sm<Kern, Kokkos::TeamPolicy<typename Kern::exec, Tag>>(team_size, bytes);
}

// The largest basis chunk, from kern.basis_edges down in steps of the radial chunk kern.radial_edges, with which the
// kernel (as launch_kernel will launch it: capped or not) keeps as many blocks per SM as with radial_edges: a larger
// scratch must not cost occupancy (64-edge basis chunks cost teams of 64 a block per SM on the H200, and MD time).
template <class Tag, class Kern>
int basis_chunk_keeping_occupancy(const Kern& kern, int adjoint, int team_size) {
  const auto& p = kern.prm;
  const int S = edge_split(team_size, p.C);
  const bool overlap = Kern::chunk_overlap(team_size);
  auto blocks = [&](int basis_edges) {
    return fused_blocks_per_sm<Tag>(
        kern, team_size, Kern::scratch_bytes(p.C, p.H, p.dk, adjoint, S, kern.radial_edges, overlap, basis_edges));
  };
  return largest_chunk_keeping(kern.basis_edges, kern.radial_edges, blocks);
}

// Rejects launch options of kern.prm that the kernels do not take, and parameters of another layer role.
template <class Kern>
void check_launch_options(const Kern& kern) {
  const int want = kern.prm.radial_chunk;
  if (!valid_radial_mode(kern.prm.radial_mode) || (want != 0 && want != 2 && want != 4 && want != 8))
    throw std::invalid_argument("batmobile: radial_mode must be 0, 1, 2 or 4 and radial_chunk 0, 2, 4 or 8");
  if (kern.prm.basis_chunk < 0) throw std::invalid_argument("batmobile: basis_chunk must be >= 0");
  if (kern.prm.prepare_span < 0 || (kern.prm.prepare_span > 0 && kern.prm.H % kern.prm.prepare_span != 0))
    throw std::invalid_argument("batmobile: prepare_span must be 0 (automatic) or divide the radial hidden width H = " +
                                std::to_string(kern.prm.H));
  if (kern.prm.role != Kern::role)
    throw std::invalid_argument("batmobile: layer parameters of role " + std::to_string(kern.prm.role) +
                                " for a kernel of role " + std::to_string(Kern::role) +
                                " (make_layer_params' role must match the kernel's)");
}

// Team policy of kernel `kern` for n atoms; sets kern.radial_edges (radial mode 1 chunk, 0: mode 0) and
// kern.basis_edges (its basis chunk: basis_chunk_for, after the radial chunk is chosen, so that it never costs a
// smaller one) and kern.use_tensor_cores. team_size: 0 = automatic (host back-ends: 1, channels looped; GPU: C * S,
// S = 128 / C (>= 1) edge slots, team <= 256, S lowered until the scratch fits scratch_size_max(0) and the team fits
// team_size_max; with a team GEMM radial mode (team_gemm_mode) the largest S for which a mode-1 chunk of >= S edges
// fits, else mode 0); kWaveAwareTeam: automatic, S then lowered by wave_aware_split for n teams (CUDA);
// kOneSlotLessTeam: automatic, then S - 1 as if explicit; 1 or C * S: explicit (tests run the GPU paths on OpenMP
// with it; mode 1 then takes the largest chunk that fits, the host back-ends not limiting it).
template <class Tag, class Kern>
inline Kokkos::TeamPolicy<typename Kern::exec, Tag> atom_team_policy(Kern& kern, int n, int adjoint,
                                                                     int team_size = 0) {
  using Pol = Kokkos::TeamPolicy<typename Kern::exec, Tag>;
  const int C = kern.prm.C, H = kern.prm.H, dk = kern.prm.dk, want = kern.prm.radial_chunk;
  const bool team_radial = Tag::team_radial && team_gemm_mode(kern.prm.radial_mode);
  check_launch_options(kern);
  const bool host = runs_on_host<typename Kern::exec>;
  const size_t limit = size_t(Pol::scratch_size_max(0));
  kern.radial_edges = 0;
  const bool wave_aware = team_size == kWaveAwareTeam;
  if (wave_aware) team_size = 0;
  auto automatic_split = [&] {
    return gpu_launch<Kern>(C, H, dk, adjoint, team_radial, want,
                            Pol(1, 1).team_size_max(kern, Kokkos::ParallelForTag()), limit);
  };
  if (team_size == kOneSlotLessTeam) {  // then launched as the explicit team size C (S - 1) below
    const int S = host ? 1 : automatic_split().first;
    team_size = S > 1 ? C * (S - 1) : 0;
  }
  if (team_size == 0 && !host) {
    const auto split_chunk = automatic_split();
    team_size = C * split_chunk.first;
    kern.radial_edges = split_chunk.second;
    const int sms = multiprocessor_count<typename Kern::exec>();
    if (wave_aware && split_chunk.first > 1 && sms > 0) {
      // candidates keep whole warps (tensor_core_ok) and the radial path gpu_launch chose (a chunk >= S edges)
      auto chunk = [&](int S) {
        return split_chunk.second > 0 ? radial_chunk_for<Kern>(C, H, dk, adjoint, S, limit, want, S) : 0;
      };
      const int S = wave_aware_split(n, split_chunk.first, [&](int s) {
        const int radial = chunk(s);
        if ((C * s) % 32 != 0 || (split_chunk.second > 0 && radial == 0)) return 0;
        return sms * fused_blocks_per_sm<Tag>(kern, C * s,
                                              Kern::scratch_bytes(C, H, dk, adjoint, s, radial,
                                                                  Kern::chunk_overlap(C * s), radial));
      });
      team_size = C * S;
      kern.radial_edges = chunk(S);
    }
  } else {
    if (team_size == 0) team_size = 1;
    if (team_radial && host && team_size == 1)  // host: one thread runs the chunk GEMM, then loops over the channels
      kern.radial_edges = radial_chunk_for<Kern>(C, H, dk, adjoint, 1, size_t(-1), want);
    else if (team_radial && team_size >= C)
      kern.radial_edges = radial_chunk_for<Kern>(C, H, dk, adjoint, team_size / C, host ? size_t(-1) : limit, want);
  }
  if (team_size != 1 && (team_size < C || team_size % C != 0))
    throw std::invalid_argument("batmobile: team size must be 1 or a multiple of C");
  const bool mma = team_radial && tensor_core_mode(kern.prm.radial_mode) &&
                   tensor_core_chunk(kern.radial_edges, adjoint) && tensor_core_ok<Kern>(kern.prm, team_size);
  const bool f16 = kern.prm.radial_mode == RadialMode::kTensorCoreF16 && kern.prm.W2th.extent(0) > 0;
  kern.use_tensor_cores = !mma ? kTensorCoresOff : f16 ? kTensorCoresF16 : kTensorCores3xTf32;
  const int S = edge_split(team_size, C);
  const bool overlap = Kern::chunk_overlap(team_size);
  kern.basis_edges = basis_chunk_for<Kern>(C, H, dk, adjoint, S, kern.radial_edges, overlap,
                                           host ? size_t(-1) : limit, kern.prm.basis_chunk);
  if (!host && kern.basis_edges > kern.radial_edges)
    kern.basis_edges = basis_chunk_keeping_occupancy<Tag>(kern, adjoint, team_size);
  const size_t bytes = Kern::scratch_bytes(C, H, dk, adjoint, S, kern.radial_edges, overlap, kern.basis_edges);
  // host team scratch is ordinary memory; on GPUs it is the shared memory of one block
  if (!host && bytes > limit)
    throw std::invalid_argument("batmobile: interaction team scratch " + std::to_string(bytes) + " B exceeds " +
                                std::to_string(limit) + " B (lower team_size)");
  return Pol(n, team_size).set_scratch_size(0, Kokkos::PerTeam(bytes));
}

// Calls f(policy) with the policy of tag TagT<true> (radial mode 1) if prm.radial_mode asks for a team GEMM
// (team_gemm_mode) and a mode-1 chunk fits, else with that of TagT<false> (mode 0); kern.radial_edges is set to
// match. adjoint: the team scratch's layout (common.hpp: kForwardScratch, kSendScratch, kPairScratch).
template <template <bool> class TagT, class Kern, class F>
void with_atom_policy(Kern& kern, int n, int adjoint, int team_size, F&& f) {
  if (team_gemm_mode(kern.prm.radial_mode)) {
    const auto pol = atom_team_policy<TagT<true>>(kern, n, adjoint, team_size);
    if (kern.radial_edges > 0) return f(pol);
  }
  f(atom_team_policy<TagT<false>>(kern, n, adjoint, team_size));
}

// Rejects layer parameters whose dimensions differ from the compiled-in ones of kernels of dimensions Dims.
template <class Dims, class T, class Device>
void check_dims(const LayerParams<T, Device>& prm) {
  if (!dims_match<Dims>(prm))
    throw std::invalid_argument("batmobile: layer parameters (C " + std::to_string(prm.C) + ", H " +
                                std::to_string(prm.H) + ", NB " + std::to_string(prm.NB) + ", A " +
                                std::to_string(prm.A) + ", dk " + std::to_string(prm.dk) +
                                ") for kernels compiled for other dimensions");
}

// Calls f(kern) with a default-constructed adjoint kernel whose key-width bound DKM fits prm.dk (kSmallDk if it can).
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer, class Dims = RuntimeDims, class F>
void with_adjoint_kernel(const LayerParams<T, Device>& prm, F&& f) {
  if constexpr (Dims::fixed) {
    InteractionKernel<T, Device, L, ATTN, Dims::dk <= kSmallDk ? kSmallDk : kMaxDk, ROLE, Dims> kern;
    f(kern);
  } else if (prm.dk <= kSmallDk) {
    InteractionKernel<T, Device, L, ATTN, kSmallDk, ROLE> kern;
    f(kern);
  } else {
    InteractionKernel<T, Device, L, ATTN, kMaxDk, ROLE> kern;
    f(kern);
  }
}

// Launch that the drivers choose for one layer (bench, logs): team size, mode-1 chunk (0: mode 0), tensor cores
// (radial modes 2 and 4: kTensorCores*) and team scratch bytes of the forward and of the adjoint kernels.
struct InteractionLaunch {
  int team_fwd, chunk_fwd, team_adj, chunk_adj;
  int basis_fwd = 0, basis_adj = 0;  // mode 1 basis chunks (edges per prepare pass)
  int tc_fwd, tc_adj;
  bool capped_adj = false;  // adjoint launched capped (LaunchBounds<128, 3>; first/last layer roles <128, 4>)
  bool capped_fwd = false;  // forward launched with LaunchBounds<128, 4>
  bool fixed_dims = false;  // kernels with their dimensions compiled in (FixedDims)
  size_t bytes_fwd, bytes_adj;
};

// One kernel's part of InteractionLaunch, as atom_team_policy set kern for policy pol.
template <class Kern, class Pol>
void note_launch(const Kern& kern, const Pol& pol, int& team, int& chunk, int& basis, int& tensor_cores, bool& capped) {
  team = pol.team_size();
  chunk = kern.radial_edges;
  basis = kern.basis_edges;
  tensor_cores = kern.use_tensor_cores;
  capped = fused_capped<Kern, typename Pol::work_tag>(pol.team_size());
}

// ROLE: the layer role's kernels (InteractionKernel; prm from make_layer_params with the same role), here and in
// interaction_forward / interaction_backward.
// The forward launched with team size argument team_fwd, the adjoints with team_adj, for n atoms (teams: the
// wave-aware split depends on them).
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer, class Dims = RuntimeDims>
InteractionLaunch interaction_launch(const LayerParams<T, Device>& prm, int team_fwd, int team_adj, int n) {
  using Kern = InteractionKernel<T, Device, L, ATTN, kMaxDk, ROLE, Dims>;
  check_dims<Dims>(prm);
  Kern kern;
  kern.prm = prm;
  InteractionLaunch r;
  r.fixed_dims = Dims::fixed;
  with_atom_policy<Kern::template ForwardT>(kern, n, false, team_fwd, [&](const auto& pol) {
    note_launch(kern, pol, r.team_fwd, r.chunk_fwd, r.basis_fwd, r.tc_fwd, r.capped_fwd);
  });
  r.bytes_fwd = Kern::scratch_bytes(prm.C, prm.H, prm.dk, false, edge_split(r.team_fwd, prm.C), r.chunk_fwd,
                                    Kern::chunk_overlap(r.team_fwd), r.basis_fwd);
  with_adjoint_kernel<T, Device, L, ATTN, ROLE, Dims>(prm, [&](auto& adj) {
    using Adj = std::decay_t<decltype(adj)>;
    adj.prm = prm;
    auto note = [&](const auto& pol) {
      note_launch(adj, pol, r.team_adj, r.chunk_adj, r.basis_adj, r.tc_adj, r.capped_adj);
    };
    with_atom_policy<Adj::template PairAdjT>(adj, n, kPairScratch, team_adj, note);
    r.bytes_adj = Adj::scratch_bytes(prm.C, prm.H, prm.dk, kPairScratch, edge_split(r.team_adj, prm.C), r.chunk_adj,
                                     Adj::chunk_overlap(r.team_adj), r.basis_adj);
  });
  return r;
}
// Both with team_size, for one atom.
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer>
InteractionLaunch interaction_launch(const LayerParams<T, Device>& prm, int team_size = 0) {
  return interaction_launch<T, Device, L, ATTN, ROLE>(prm, team_size, team_size, 1);
}

}  // namespace kernels
}  // namespace batmobile
