// Model's constructor (weights from model_weights.hpp, the fused backend's configuration from fused_state.hpp), its
// launch summary, and the calls into the fused kernels of one layer.
#pragma once
#include <algorithm>
#include <string>

#include "model/device_math.hpp"
#include "model/fused_layer.hpp"
#include "model/fused_state.hpp"
#include "model/model.hpp"
#include "model/model_step.hpp"
#include "model/model_weights.hpp"

namespace batmobile {
namespace model_detail {

// Calls f(layer) with a FusedLayer<T, D, L, ROLE, Dims> value (its members are static) for a layer of role `role`,
// Dims as with_layer_dims picks for its parameters prm.
template <class T, class D, int L, class F>
void with_fused_layer(int role, const kernels::LayerParams<T, D>& prm, F&& f) {
  with_layer_role(role, [&](auto r) {
    with_layer_dims<L>(prm, [&](auto dims) { f(FusedLayer<T, D, L, decltype(r)::value, decltype(dims)>{}); });
  });
}

}  // namespace model_detail

template <class T, class ExecSpace>
Model<T, ExecSpace>::~Model() = default;

template <class T, class ExecSpace>
Model<T, ExecSpace>::Model(const ModelFile& file, EdgeBackend backend, const ModelOptions& options)
    : Model(file, backend, options, impl::ModelTuning{}) {}

template <class T, class ExecSpace>
Model<T, ExecSpace>::Model(const ModelFile& file, EdgeBackend backend, const ModelOptions& options,
                           const impl::ModelTuning& tuning)
    : backend_(backend), hyper_(file.hyper), options_(options), tuning_(tuning) {
  validate_options(options_);
  impl::validate_tuning(tuning_, hyper_.H);
  static_assert(model_detail::kNodeAtoms == 4, "ModelTuning::node_atoms accepts 1..4");
  node_team_ = tuning_.node_team > 0 ? tuning_.node_team
                                     : kernels::runs_on_host<ExecSpace> ? 1 : model_detail::kNodeTeam;
  node_atoms_ = tuning_.node_atoms;
  data_ = model_detail::load_model_data<T, ExecSpace>(file);
  if (backend_ == EdgeBackend::Fused)
    fused_ = model_detail::make_fused_state<T, ExecSpace>(file, data_, options_, tuning_);
}

template <class T, class ExecSpace>
int Model<T, ExecSpace>::fused_team_size(int nl, bool forward) const {
  return model_detail::fused_team_size(*fused_, nl, data_.C, forward);
}

template <class T, class ExecSpace>
std::string Model<T, ExecSpace>::launch_summary(int nl) const {
  // (one list: the options first, then the tuning)
  const std::string chosen = non_default_options(options_), tuned = impl::non_default_tuning(tuning_);
  const std::string options = chosen + (!chosen.empty() && !tuned.empty() ? ", " : "") + tuned;
  const std::string options_note = options.empty() ? "" : "; options: " + options;
  if (backend_ != EdgeBackend::Fused) return "reference edge kernels (per-edge arrays)" + options_note;
  auto one = [](int team, int chunk, int basis, int tensor_cores, bool capped) {
    std::string d = std::to_string(team) + (team == 1 ? " thread" : " threads");
    const char* tc = tensor_cores == kernels::kTensorCoresF16      ? ", tensor cores f16"
                     : tensor_cores == kernels::kTensorCores3xTf32 ? ", tensor cores"
                                                                   : "";
    d += chunk > 0 ? " (radial chunk " + std::to_string(chunk) + ", basis chunk " + std::to_string(basis) + tc + ")"
                   : " (radial mode 0)";
    return capped ? d + " capped" : d;
  };
  std::string s = "fused kernels for " + std::to_string(nl) + " local atoms, per atom:";
  bool fixed = false;  // some layer runs kernels with its dimensions compiled in (kernels::BundledDims)
  for (int t = 0; t < data_.T_layers; ++t)
    model_detail::with_feature_degree(data_.L, [&](auto degree) {
      kernels::InteractionLaunch r{};
      model_detail::with_fused_layer<T, ExecSpace, decltype(degree)::value>(
          fused_->role(t, data_.T_layers), fused_->params[t], [&](auto layer) {
            r = decltype(layer)::launch(fused_->params[t], fused_team_size(nl, true), fused_team_size(nl),
                                        std::max(nl, 1));
          });
      fixed = fixed || r.fixed_dims;
      s += " layer " + std::to_string(t) + " forward " +
           one(r.team_fwd, r.chunk_fwd, r.basis_fwd, r.tc_fwd, r.capped_fwd) +
           ", pair adjoint " +
           one(r.team_adj, r.chunk_adj, r.basis_adj, r.tc_adj, r.capped_adj) + (t + 1 < data_.T_layers ? ";" : "");
    });
  return s + (fixed ? "; dimensions compiled in" : "") + options_note;
}

// Calls fn(degree, graph, as3) with the kernel library's graph of this step and as3(rows, n): rows as (n, K, C).
template <class T, class ExecSpace>
template <class Fn>
void Model<T, ExecSpace>::with_fused_graph(const Step& step, Fn fn) {
  kernels::Graph<T, ExecSpace> g;
  g.x = fused_->x;
  g.recv_offsets = step.graph.recv_offsets;
  g.edge_sender = step.graph.senders;
  g.edge_receiver = edge_receiver_;
  g.send_offsets = send_offsets_;
  g.send_edges = send_edges_;
  g.n_recv = step.nl;
  g.n_total = step.na;
  g.n_edges = step.n_edges;
  g.n_send = n_send_;
  if (n_send_ >= 0) g.image_owner = step.image_owner;
  const int K = data_.K, C = data_.C;
  using Unmanaged3 = Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  auto as3 = [&](FeatureView v, int n) { return Unmanaged3(v.data(), n, K, C); };
  model_detail::with_feature_degree(data_.L, [&](auto degree) { fn(degree, g, as3); });
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::fused_forward_layer(int t, const Step& step) {
  const int nl = step.nl, na = step.na;
  with_fused_graph(step, [&](auto degree, const auto& g, auto as3) {
    model_detail::with_fused_layer<T, ExecSpace, decltype(degree)::value>(
        fused_->role(t, data_.T_layers), fused_->params[t], [&](auto layer) {
          decltype(layer)::forward(g, fused_->params[t], as3(h_[t], na), as3(m_[t], nl), as3(o_[t], nl),
                                   fused_->work[t], fused_team_size(nl, true));
        });
  });
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::fused_backward_layer(int t, const Step& step, FeatureView dh_in) {
  const int nl = step.nl, na = step.na;
  with_fused_graph(step, [&](auto degree, const auto& g, auto as3) {
    // (layer 0 through the embedding-input kernels leaves dh_in as the node adjoint wrote it: nothing reads it)
    model_detail::with_fused_layer<T, ExecSpace, decltype(degree)::value>(
        fused_->role(t, data_.T_layers), fused_->params[t], [&](auto layer) {
          decltype(layer)::backward(g, fused_->params[t], as3(h_[t], na), as3(o_[t], nl), as3(dm_, nl), as3(do_, nl),
                                    as3(dh_in, na), fused_->f, fused_->vatom, fused_->work[t], fused_team_size(nl));
        });
  });
}

}  // namespace batmobile
