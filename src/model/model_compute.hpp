// Model::compute: one step of the model, stage by stage (docs/model.md): embedding, per layer the edge pass (fused
// kernels or the reference backend) and the node update (the last layer's with the readout), per layer backwards the
// node adjoint and the edge adjoint, the forces and virials.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "model/fused_state.hpp"
#include "model/model.hpp"
#include "model/model_adjoint_stages.hpp"
#include "model/model_forward_stages.hpp"
#include "model/model_step.hpp"
#include "model/reference_backend.hpp"
#include "model/sender_csr.hpp"

namespace batmobile {

template <class T, class ExecSpace>
void Model<T, ExecSpace>::ensure_capacity(int n_local, int n_all, int n_edges, bool sender_lists) {
  const int KC = data_.K * data_.C, T_ = data_.T_layers, A = data_.A, AD = data_.A * data_.dk;
  // Grow-only with headroom: LAMMPS changes the atom and edge counts at every re-neighbouring.
  auto grow = [](size_t n) { return n + n / 5 + 16; };
  auto need = [&](auto& v, size_t n0, size_t n1, const char* name) {
    if (v.extent(0) < n0 || v.extent(1) != n1) v = std::decay_t<decltype(v)>(std::string(name), grow(n0), n1);
  };
  h_.resize(T_ + 1);
  m_.resize(T_), o_.resize(T_), z_.resize(T_), hp_.resize(T_), gate_.resize(T_), rms_.resize(T_);
  q_.resize(T_), k_.resize(T_), smax_.resize(T_), zsum_.resize(T_);
  for (int t = 0; t <= T_; ++t) need(h_[t], n_all, KC, "bm_h");
  for (int t = 0; t < T_; ++t) {
    need(m_[t], n_local, KC, "bm_m");
    need(o_[t], n_local, KC, "bm_o");
    need(z_[t], n_local, KC, "bm_z");
    need(hp_[t], n_local, KC, "bm_hp");
    need(gate_[t], n_local, std::max(1, data_.L * data_.C), "bm_gam");
    need(rms_[t], n_local, data_.L + 1, "bm_rms");
    need(q_[t], n_local, AD, "bm_q");
    need(k_[t], n_all, AD, "bm_k");
    need(smax_[t], n_local, A, "bm_smax");
    need(zsum_[t], n_local, A, "bm_zsum");
  }
  need(dh_, n_all, KC, "bm_dh");
  need(dh_prev_, n_all, KC, "bm_dh_prev");
  need(dm_, n_local, KC, "bm_dm");
  need(do_, n_local, KC, "bm_do");
  need(obar_, n_local, A, "bm_obar");
  if (atom_energy_.extent(0) < static_cast<size_t>(n_local))
    atom_energy_ = decltype(atom_energy_)("bm_atom_energy", grow(n_local));
  auto need1 = [&](auto& v, size_t n0, const char* name) {
    if (v.extent(0) < n0) v = std::decay_t<decltype(v)>(std::string(name), grow(n0));
  };
  // Per-edge arrays of the reference backend's adjoint only: the fused kernels keep nothing per edge (56 B per edge
  // in float, times the edges per atom of the neighbour list incl. its skin)
  if (backend_ != EdgeBackend::Fused) {
    need(edge_p_, n_edges, A, "bm_edge_p");
    need(edge_ds_, n_edges, A, "bm_edge_ds");
    need1(edge_grad_, n_edges, "bm_edge_grad");
  }
  if (!sender_lists) return;
  need1(edge_receiver_, n_edges, "bm_edge_recv");
  need1(send_offsets_, n_all + 1, "bm_send_offsets");
  need1(send_edges_, n_edges, "bm_send_edges");
  need1(send_fill_, n_all, "bm_send_fill");
}

// The step's sizes and launch shape; buffers sized; the ghosts' image owners where the exchange names them; the
// sender lists where they are built before the forward.
template <class T, class ExecSpace>
model_detail::Step<ExecSpace> Model<T, ExecSpace>::begin_step(const Graph<ExecSpace>& graph,
                                                             GhostExchange<T, ExecSpace>* exchange) {
  Step step;
  step.graph = graph;
  const int nl = step.nl = graph.n_local, na = step.na = graph.n_all;
  int n_edges = graph.n_edges >= 0 ? graph.n_edges : 0;
  // The fused backend needs no exact count on the host (its kernels run over atoms): a bound sizes its edge arrays.
  const bool need_count = graph.n_edges < 0 || (graph.n_edges_is_bound && backend_ != EdgeBackend::Fused);
  if (need_count) {  // one value: the edge count is the last receiver offset
    n_edges = 0;
    if (nl > 0)
      n_edges = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Kokkos::subview(graph.recv_offsets, nl))();
  }
  step.n_edges = n_edges;
  n_edges_ = n_edges;
  if (na > nl && !exchange && data_.T_layers > 1)
    throw std::runtime_error("Batmobile model: ghost atoms with more than one layer need a GhostExchange");
  step.fused = backend_ == EdgeBackend::Fused;
  // Sender lists grouped by local atom and its periodic images where the exchange names them (fused backend only:
  // the reference adjoint takes each edge's sender row as it is)
  if (step.fused && tuning_.group_senders && exchange && na > nl) {
    step.image_owner = exchange->image_owners();
    if (step.image_owner.extent(0) != static_cast<size_t>(na - nl)) step.image_owner = {};
  }
  n_send_ = step.image_owner.extent(0) > 0 ? nl : -1;
  if (exchange && na > nl) {
    const auto lists = exchange->image_lists();
    if (lists.offsets.extent(0) == static_cast<size_t>(nl + 1) && lists.ghosts.extent(0) == static_cast<size_t>(na - nl))
      step.image_offsets = lists.offsets, step.image_ghosts = lists.ghosts;
  }
  // The sender-grouped edge lists are read by the reference adjoint and by the fused sender adjoint, which runs for
  // ghosts that are not images of local atoms (several ranks) only: the pair adjoint finds each reverse edge through
  // the image owners. They are built as well where the caller does not vouch for the sender indices, for the range
  // check.
  step.sender_lists = !step.fused || (n_send_ < 0 && na > nl) || !graph.senders_in_range;
  ensure_capacity(nl, na, n_edges, step.sender_lists);
  // Node (per-atom) kernels: on GPUs kNodeTeam threads share a block's (component, channel) items, on host
  // back-ends one thread per team; per-atom work over tens of items: a warp per atom is plenty.
  step.node_team = node_team_;
  step.warp_team = std::min(node_team_, 32);
  step.block_atoms = node_atoms_ > 0 ? node_atoms_
                                     : auto_node_atoms(nl, kernels::multiprocessor_count<ExecSpace>(),
                                                       model_detail::kNodeAtoms);
  step.node_blocks = (nl + step.block_atoms - 1) / step.block_atoms;
  step.gate_rows = std::max(1, data_.L * data_.C);
  // (forward: m and o or the readout's rows, activations, update, gates, RMS; adjoint: dE/dh, update, da, dz, gates,
  // norm coefficients)
  step.node_scratch = sizeof(T) * model_detail::kNodeAtoms *
                          (model_detail::node_mo_rows(data_) + 2 * data_.K * data_.C + step.gate_rows + kMaxL + 1) +
                      64;
  // Where they are needed (step.sender_lists, above) and the caller vouches for the sender indices (LAMMPS's
  // neighbour lists), the sender-grouped edge lists are built just before the adjoint: on GPUs the forward's first
  // kernel then starts five small launches earlier and these run behind its kernels. Otherwise here, with the range
  // check, before any kernel reads h through a sender index. Built late with the fused backend, their offsets are
  // zeroed by the forward's first kernel (one launch less).
  step.offsets_zeroed_early = step.fused && graph.senders_in_range && na > 0 && step.sender_lists;
  step.edge_receiver = edge_receiver_;
  step.send_offsets = send_offsets_;
  step.send_edges = send_edges_;
  if (!graph.senders_in_range) build_sender_lists(step);
  // Reference backend: keep each edge's radial-MLP output (2PC values per layer) from the forward pass for the
  // two adjoint passes when that fits in impl::ModelTuning::radial_cache_mb; otherwise recompute it (3 evaluations per
  // edge).
  const double cache_bytes = double(data_.T_layers) * n_edges * 2.0 * data_.P * data_.C * sizeof(T);
  step.use_rcache = !step.fused && n_edges > 0 && cache_bytes <= tuning_.radial_cache_mb * 1024.0 * 1024.0;
  if (step.use_rcache) {
    radial_cache_.resize(data_.T_layers);
    for (auto& v : radial_cache_)
      if (v.extent(0) < static_cast<size_t>(n_edges) || v.extent(1) != static_cast<size_t>(2 * data_.P * data_.C))
        v = std::decay_t<decltype(v)>("bm_radial_cache", n_edges + n_edges / 5 + 16, 2 * data_.P * data_.C);
  }
  if (step.fused) fused_->ensure_atoms(na);
  return step;
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::build_sender_lists(const Step& step) {
  const Graph<ExecSpace>& graph = step.graph;
  build_sender_csr<ExecSpace>(step.nl, step.na, graph.recv_offsets, graph.senders, edge_receiver_, send_offsets_,
                              send_edges_, send_fill_, step.warp_team, !graph.senders_in_range, 1024,
                              step.image_owner, step.offsets_zeroed_early);
}

template <class T, class ExecSpace>
model_detail::LayerViews<T, ExecSpace> Model<T, ExecSpace>::layer_views(int t, bool use_rcache) const {
  model_detail::LayerViews<T, ExecSpace> layer;
  layer.weights = data_.layer_base + t * data_.layer_size;
  layer.product = data_.has_product(t);
  layer.h = h_[t];
  layer.m = m_[t], layer.o = o_[t], layer.z = z_[t], layer.gate = gate_[t], layer.hp = hp_[t], layer.rms = rms_[t];
  layer.q = q_[t], layer.k = k_[t], layer.smax = smax_[t], layer.zsum = zsum_[t];
  if (use_rcache) layer.rcache = radial_cache_[t];
  return layer;
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::forward_layer(int t, const Step& step, GhostExchange<T, ExecSpace>* exchange,
                                        const model_detail::ReadoutViews<T, ExecSpace>* readout) {
  const auto layer = layer_views(t, step.use_rcache);
  if (step.fused)
    fused_forward_layer(t, step);
  else
    model_detail::reference_forward_layer(data_, step, layer);
  // degrees the update computes: all, or l = 0 alone for the last layer (FusedState::update_lmax)
  const int lmax = step.fused ? fused_->update_lmax(t, data_.T_layers, data_.L) : data_.L;
  // Ghost features of the last layer's output are never read (the readout is per local atom), so the
  // exchange after it is skipped. Every rank takes the same branch: the LAMMPS exchange is collective. Where the
  // exchange names each atom's periodic images and the update writes whole rows, the node kernel writes the images'
  // rows as it writes their atom's (one launch less).
  const bool exchange_due = exchange && t + 1 < data_.T_layers;
  const bool images_in_node = exchange_due && lmax == data_.L && step.image_offsets.extent(0) > 0;
  model_detail::node_forward(data_, step, layer, h_[t + 1], lmax, readout, images_in_node);
  if (exchange_due && !images_in_node) exchange->forward(h_[t + 1]);
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::adjoint_layer(int t, const Step& step, GhostExchange<T, ExecSpace>* exchange,
                                        FeatureView dh, FeatureView dh_in) {
  const auto layer = layer_views(t, step.use_rcache);
  // (layer 0 through the embedding-input kernels writes no input adjoint: nothing reads it; with sender groups,
  // n_send_ >= 0, no kernel writes or reads the ghost rows of an input adjoint: the images' dE/dh is on their
  // atom's row, so neither this fill nor the ghost reverse below is needed)
  if (!(step.fused && t == 0 && fused_->role(0, data_.T_layers) == kernels::kEmbeddingInput) && n_send_ < 0)
    model_detail::zero_ghost_rows(dh_in, step.nl, step.na, data_.K * data_.C);
  // degrees of the update's adjoint: as in the forward; the input adjoint's l >= 1 rows are then written 0 (the
  // fused adjoint adds to them)
  const int lmax = step.fused ? fused_->update_lmax(t, data_.T_layers, data_.L) : data_.L;
  model_detail::node_adjoint(data_, step, layer, dh, dh_in, dm_, do_, obar_, lmax);
  if (step.fused)
    fused_backward_layer(t, step, dh_in);
  else
    model_detail::reference_backward_layer(data_, step, layer, dm_, do_, obar_, {edge_p_, edge_ds_, edge_grad_}, dh_in);
  // Ghost rows of layer t's input are copies of owners' layer t-1 outputs: fold their adjoints.
  if (t > 0 && exchange && n_send_ < 0) exchange->reverse(dh_in);
}

// The wanted sums to the host, one copy for both (after the virial's reduction, which runs last).
template <class T, class ExecSpace>
void Model<T, ExecSpace>::fetch_sums(Results<ExecSpace>& out) const {
  if (!out.want_energy && !out.want_virial) return;
  double h[7];
  Kokkos::deep_copy(Kokkos::View<double[7], Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(h), sums_);
  if (out.want_energy) out.energy = h[0];
  if (out.want_virial)
    for (int a = 0; a < 6; ++a) out.virial[a] = h[1 + a];
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::fold_forces(const Step& step, Results<ExecSpace>& out) {
  if (out.f.extent(0) < static_cast<size_t>(step.na))
    throw std::runtime_error("Batmobile model: force view smaller than n_all");
  if (step.fused) {
    const model_detail::EnergyVirialSum<ExecSpace> sums_d(reinterpret_cast<model_detail::EnergyVirial*>(sums_.data()));
    model_detail::fold_fused_forces(step, *fused_, n_send_, atom_energy_, out, sums_d);
    // (no fence: the caller's kernels run after these on the same instance, and a host copy of f waits for them)
    fetch_sums(out);
    return;
  }
  using EnergySum = Kokkos::View<double, ExecSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  model_detail::sum_atom_energies(step, atom_energy_, EnergySum(sums_.data()));
  const model_detail::VirialSum<ExecSpace> virial_d(reinterpret_cast<model_detail::V6*>(sums_.data() + 1));
  model_detail::reference_forces_and_virial(step, edge_grad_, out, virial_d);
  fetch_sums(out);
  model_detail::reference_atom_virial(step, edge_grad_, out);
  Kokkos::fence();
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::compute(const Graph<ExecSpace>& graph, GhostExchange<T, ExecSpace>* exchange,
                                  Results<ExecSpace>& out) {
  const Step step = begin_step(graph, exchange);
  // The readout runs inside the last layer's node forward; its energy and the virial are reduced into device memory
  // by the force fold, and the host waits for them only where out.want_energy / want_virial ask (LAMMPS needs energy
  // and virial on thermo steps only).
  if (sums_.data() == nullptr) sums_ = decltype(sums_)("bm_sums");
  out.energy = 0;
  for (int a = 0; a < 6; ++a) out.virial[a] = 0;
  FeatureView dh = dh_;          // adjoint w.r.t. the output of the current layer
  FeatureView dh_in = dh_prev_;  // adjoint w.r.t. its input; the two swap roles after each layer
  model_detail::ReadoutViews<T, ExecSpace> readout{dh, atom_energy_, out.eatom, false};
  readout.want_eatom = out.eatom.extent(0) >= static_cast<size_t>(step.nl) && step.nl > 0;
  model_detail::embed_atoms(data_, step, h_[0], step.fused ? fused_.get() : nullptr);
  for (int t = 0; t < data_.T_layers; ++t)
    forward_layer(t, step, exchange, t + 1 == data_.T_layers ? &readout : nullptr);

  if (graph.senders_in_range && step.sender_lists) build_sender_lists(step);
  if (!step.fused) Kokkos::deep_copy(edge_grad_, 0.0);
  for (int t = data_.T_layers - 1; t >= 0; --t) {
    adjoint_layer(t, step, exchange, dh, dh_in);
    std::swap(dh, dh_in);  // layer t's input adjoint is layer t-1's output adjoint (no copy)
  }
  fold_forces(step, out);
}

}  // namespace batmobile
