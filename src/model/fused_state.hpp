// The fused edge backend's configuration and workspace: per-layer kernel parameters (src/kernels/interaction.hpp),
// layer roles, GPU team sizes, the force and virial accumulators of the adjoint kernels.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/interaction.hpp"
#include "model/fused_team_rule.hpp"
#include "model/model.hpp"

namespace batmobile {
namespace model_detail {

// Calls f(std::integral_constant<int, L>) with the fused kernels' feature degree L (1, 2 or 3; make_fused_state has
// checked it), returning what f returns.
template <class F>
decltype(auto) with_feature_degree(int L, F&& f) {
  switch (L) {
    case 1: return f(std::integral_constant<int, 1>());
    case 2: return f(std::integral_constant<int, 2>());
    default: return f(std::integral_constant<int, 3>());
  }
}

template <class T, class ExecSpace>
struct FusedState {
  std::vector<kernels::LayerParams<T, ExecSpace>> params;
  std::vector<kernels::InteractionWork<T, ExecSpace>> work;  // per layer: q, k, M, Z saved for the adjoint
  Kokkos::View<T* [3], Kokkos::LayoutRight, ExecSpace> x;  // positions in T for the kernels
  // forces and per-atom virial accumulated by the adjoint kernels: f, vatom by the pair adjoints, f_send, vatom_send
  // by the sender adjoints of other ranks' ghosts (so that the two can run side by side); summed in bm_fused_out
  Kokkos::View<double**, Kokkos::LayoutRight, ExecSpace> f, vatom, f_send, vatom_send;
  int team_size = 0;           // fused kernels' GPU team size (impl::ModelTuning::interaction_team), 0 = automatic
  int forward_team_size = -1;  // the forward kernel's (impl::ModelTuning::forward_team), -1 = as team_size
  // Layer 0 runs through the embedding-input kernels (its input, the species embedding, holds only l = 0 and does not
  // depend on the positions: the tensor products use the paths (0, l, l), the adjoints skip dE/dh, dE/dq, dE/dk), the
  // last layer through the scalar-output kernels (only its l = 0 outputs reach the energy: the paths (l, l, 0)),
  // layers between through the general ones (src/kernels/interaction.hpp). A one-layer model runs its layer as an
  // embedding-input one (both roles at once are not compiled).
  //
  // The scalar-output layer's node update runs over l = 0 alone: only those rows of its output reach the readout,
  // the adjoint's dE/dh there is 0 for l >= 1, and those kernels read dE/dm and dE/do for l = 0 only. Its l >= 1
  // outputs stay unset.
  //
  // Layer 0's q and k of each species' embedding (S, A dk), projected once at construction by the forward's own
  // functor (kernels::ProjectQK) in T, so that the embedding kernel writes every atom's q and k and layer 0's forward
  // launches no projection (bit-identical to the per-atom projection). Empty: not used (no species, or A dk > K C).
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> species_q, species_k;
  static int role(int t, int layers) {
    if (t == 0) return kernels::kEmbeddingInput;
    return t == layers - 1 ? kernels::kScalarOutput : kernels::kGeneralLayer;
  }
  // Highest degree that layer t's node update and its adjoint compute (L: all; 0 for the scalar-output layer).
  static int update_lmax(int t, int layers, int L) { return role(t, layers) == kernels::kScalarOutput ? 0 : L; }

  // Accumulators and positions in T for na atoms (grow-only, with headroom).
  void ensure_atoms(int na) {
    if (x.extent(0) >= static_cast<size_t>(na)) return;
    const size_t cap = na + na / 5 + 16;
    x = decltype(x)("bm_xT", cap);
    f = decltype(f)("bm_fused_f", cap, 3);
    vatom = decltype(vatom)("bm_fused_vatom", cap, 6);
    f_send = decltype(f)("bm_fused_f_send", cap, 3);
    vatom_send = decltype(vatom)("bm_fused_vatom_send", cap, 6);
    for (auto& w : work) w.f_send = f_send, w.vatom_send = vatom_send;
  }
};

// Calls f(std::integral_constant<int, role>) with a layer role (FusedState::role).
template <class Fn>
void with_layer_role(int role, Fn f) {
  switch (role) {
    case kernels::kEmbeddingInput: f(std::integral_constant<int, kernels::kEmbeddingInput>()); break;
    case kernels::kScalarOutput: f(std::integral_constant<int, kernels::kScalarOutput>()); break;
    default: f(std::integral_constant<int, kernels::kGeneralLayer>()); break;
  }
}

// Layer 0's q and k per species (FusedState::species_q), from the species embedding in md.w.
template <class T, class ExecSpace>
void project_species_qk(const ModelHyper& hp, const ModelData<T, ExecSpace>& md, FusedState<T, ExecSpace>& fused) {
  const int S = static_cast<int>(hp.species.size()), AD = hp.A * hp.dk;
  // each species' embedding as a one-atom-per-species feature array (l = 0 rows; the model's T values)
  Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace> emb("bm_species_embedding", S, 1, hp.C);
  auto he = Kokkos::create_mirror_view(emb);
  auto hw = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), md.w);
  for (int s = 0; s < S; ++s)
    for (int c = 0; c < hp.C; ++c) he(s, 0, c) = hw(md.o_embed + s * hp.C + c);
  Kokkos::deep_copy(emb, he);
  fused.species_q = decltype(fused.species_q)("bm_species_q", S, AD);
  fused.species_k = decltype(fused.species_k)("bm_species_k", S, AD);
  const auto& prm = fused.params[0];
  const kernels::ProjectQK<T, ExecSpace> pq{emb,      {}, prm.Wq, prm.Wk, prm.WqT, prm.WkT, fused.species_q,
                                            fused.species_k, {}, {}, S, hp.C, AD};
  Kokkos::parallel_for("bm_species_qk", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(0, int64_t(S) * AD),
                       pq);
}

// The fused backend for a model file: every layer's kernel parameters with the options' and the tuning's paths, the
// team sizes, the per-species q and k.
template <class T, class ExecSpace>
std::unique_ptr<FusedState<T, ExecSpace>> make_fused_state(const ModelFile& file, const ModelData<T, ExecSpace>& md,
                                                           const ModelOptions& options,
                                                           const impl::ModelTuning& tuning) {
  const ModelHyper& hp = file.hyper;
  if (hp.L < 1 || hp.L > 3 || hp.NB > kernels::kMaxNB || hp.dk > kernels::kMaxDk)
    throw std::runtime_error("Batmobile model: the fused kernels need 1 <= L <= 3, NB <= 16, dk <= 32 "
                             "(use the reference edge backend)");
  auto fused = std::make_unique<FusedState<T, ExecSpace>>();
  fused->work.resize(hp.T);
  for (int t = 0; t < hp.T; ++t) {
    const std::string p = "layers." + std::to_string(t) + ".";
    auto v = [&](const std::string& n) { return file.tensors.at(p + n).values; };
    auto make = [&](auto degree) {
      constexpr int L = decltype(degree)::value;
      auto prm = kernels::make_layer_params<T, ExecSpace, L>(
          hp.C, hp.NB, hp.H, hp.A, hp.dk, hp.r_c, hp.avg_num_neighbors, v("radial.W1"), v("radial.b1"),
          v("radial.W2"), v("gate.Wg"), v("attn.Wq"), v("attn.Wk"), fused->role(t, hp.T));
      prm.radial_mode = options.radial_mode;
      prm.basis_chunk = tuning.basis_chunk;
      prm.prepare_span = tuning.prepare_span;
      return prm;
    };
    fused->params.push_back(with_feature_degree(hp.L, make));
  }
  // Host back-ends keep one thread per team (their thread count may be below C).
  if (!kernels::runs_on_host<ExecSpace>) {
    fused->team_size = tuning.interaction_team;
    fused->forward_team_size = tuning.forward_team;
  }
  const int S = static_cast<int>(hp.species.size());
  if (fused->role(0, hp.T) == kernels::kEmbeddingInput && hp.A * hp.dk <= md.K * md.C && S > 0)
    project_species_qk(hp, md, *fused);
  return fused;
}

// Team size of the fused kernels (the forward's where `forward`) for nl local atoms and C channels: the tuning's if
// set, else automatic_fused_team (GPUs only; host back-ends: one thread per team).
template <class T, class ExecSpace>
int fused_team_size(const FusedState<T, ExecSpace>& fused, int nl, int C, bool forward) {
  if (forward && fused.forward_team_size >= 0) return fused.forward_team_size;
  if (fused.team_size > 0 || kernels::runs_on_host<ExecSpace>) return fused.team_size;
  return automatic_fused_team(nl, C, forward, few_atoms_rule_for<T>);
}

}  // namespace model_detail
}  // namespace batmobile
