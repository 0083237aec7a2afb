// What the stages of one Model::compute() share: the graph, its sizes, and the node kernels' launch shape; one
// layer's saved activations.
#pragma once
#include <Kokkos_Core.hpp>
#include <algorithm>

#include "model/device_math.hpp"
#include "model/model.hpp"

namespace batmobile {
namespace model_detail {

template <class T, class ExecSpace>
using Rows = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;  // (atoms or edges, features)

template <class ExecSpace>
using EdgeVectors = Kokkos::View<double* [3], Kokkos::LayoutRight, ExecSpace>;  // per edge, e.g. dE/dr_ij
template <class ExecSpace>
using VirialSum = Kokkos::View<V6, ExecSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;  // a reduction's result
template <class ExecSpace>
using EnergyVirialSum = Kokkos::View<EnergyVirial, ExecSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class ExecSpace>
struct Step {
  int nl = 0, na = 0, n_edges = 0;  // local atoms, all atoms, edges (or the caller's bound on them)
  bool fused = false;               // the fused edge backend
  bool use_rcache = false;          // reference backend: each edge's radial outputs kept from the forward pass
  // The sender-grouped edge lists are built this step (Model::begin_step says when they are needed).
  bool sender_lists = true;
  // The sender offsets are zeroed by the embedding kernel (the sender lists are built just before the adjoint).
  bool offsets_zeroed_early = false;
  Graph<ExecSpace> graph;
  Kokkos::View<const int*, ExecSpace> image_owner;  // each ghost's local atom where the exchange names it, else empty
  // each local atom's images (GhostExchange::image_lists) where the exchange names them, else empty: the node forward
  // then writes the images' rows itself
  Kokkos::View<const int*, ExecSpace> image_offsets, image_ghosts;
  Kokkos::View<int*, ExecSpace> edge_receiver, send_offsets, send_edges;  // sender-grouped edge lists
  // Node (per-atom) kernels: a team per block of block_atoms atoms (<= kNodeAtoms), node_team threads over its
  // (component, channel) items, node_scratch bytes of team scratch (the block's rows, kNodeAtoms wide, [feature][atom],
  // plus alignment); per-atom work over tens of items (an atom's edges, the readout's hidden units): warp_team threads.
  int node_team = 1, warp_team = 1, block_atoms = kNodeAtoms, node_blocks = 0;
  int gate_rows = 1;  // max(1, L C): rows of the gate pre-activations
  size_t node_scratch = 0;

  Kokkos::TeamPolicy<ExecSpace> node_policy() const {
    return Kokkos::TeamPolicy<ExecSpace>(node_blocks, node_team).set_scratch_size(0, Kokkos::PerTeam(node_scratch));
  }
};

// Rows of the node forward's first team-scratch region (of kNodeAtoms values each): the block's m and o (2 KC), later
// the readout's work rows (2 Hr, block_readout).
template <class T, class ExecSpace>
KOKKOS_INLINE_FUNCTION int node_mo_rows(const ModelData<T, ExecSpace>& md) {
  return md.K * md.C > md.Hr ? 2 * md.K * md.C : 2 * md.Hr;
}

// Layer t's saved activations (written by the forward, read by the adjoint) and its weights' offset in ModelData::w.
template <class T, class ExecSpace>
struct LayerViews {
  using Rows = model_detail::Rows<T, ExecSpace>;
  int weights = 0;
  bool product = false;  // the layer has a product basis (ModelData::has_product)
  Rows h;         // input features (n_all)
  Rows m, o;      // message and attention sums (n_local)
  Rows z, gate;   // mix outputs and gate pre-activations
  Rows hp, rms;   // update output before its RMS norm, the norms per degree
  Rows q, k;      // attention queries (n_local) and keys (n_all), reference backend
  Rows smax, zsum;  // per-head softmax maximum and sum, reference backend
  Rows rcache;    // per-edge radial outputs (reference backend, where kept), else empty
};

// Zero fill of the ghost rows of a layer-input adjoint (the node adjoint writes the owned rows whole before the edge
// kernels add to them). One thread per value, on the execution space: Kokkos's deep_copy(view, value) fences
// before and after, and filled whole (n_all, KC) arrays.
template <class T, class ExecSpace>
void zero_ghost_rows(const Rows<T, ExecSpace>& v, int nl, int na, int KC) {
  if (na <= nl) return;
  T* p = v.data();
  Kokkos::parallel_for(
      "bm_zero_ghost_rows",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(int64_t(nl) * KC, int64_t(na) * KC),
      KOKKOS_LAMBDA(int64_t x) { p[x] = T(0); });
}

}  // namespace model_detail
}  // namespace batmobile
