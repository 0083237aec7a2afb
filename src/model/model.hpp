// The Batmobile model in C++/Kokkos (docs/model.md, model file format versions 1 to 3): forward pass and hand-written
// adjoint.
// Public header: no libtorch. Weights come from a ModelFile (model_file.hpp; read by the libtorch loader TU).
//
// Graph contract: atoms [0, n_local) are receivers (owned atoms), [n_local, n_all) ghosts. Edges are grouped by
// receiver (CSR `recv_offsets`, `senders`), only 0 < |x_j - x_i| < r_c, both directions present for owned pairs.
// Forces come back for all n_all atoms (ghost forces to be folded onto owners by the caller); energy and eatom
// only for owned atoms; the virial from per-edge tallies (-r_ij (x) dE/dr_ij), per-atom virial half to each end.
#pragma once
#include <Kokkos_Core.hpp>
#include <memory>
#include <string>
#include <vector>

#include "kernels/stream_event.hpp"
#include "model/impl/model_tuning.hpp"
#include "model/model_file.hpp"
#include "model/model_options.hpp"

namespace batmobile {

// Node features are (n_all, K*C) rows, index k*C + c.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class GhostExchange {
 public:
  using FeatureView = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  virtual ~GhostExchange() = default;
  // Copy the owners' rows of h into the ghost rows.
  virtual void forward(FeatureView h) = 0;
  // Add the ghost rows of dh onto their owners' rows, then zero the ghost rows.
  virtual void reverse(FeatureView dh) = 0;
  // Where every ghost is a periodic image of a local atom (one rank): the local atom of each ghost (n_all - n_local
  // entries), so that the model groups sender lists by it; else empty (several ranks).
  virtual Kokkos::View<const int*, ExecSpace> image_owners() const { return {}; }
  // The same relation from the owners' side: the ghosts of local atom i are n_local + ghosts(q) for offsets(i) <= q <
  // offsets(i + 1) (offsets: n_local + 1 entries). A kernel that writes an owner's row then writes its images' rows
  // too, and forward() is not needed after it. Empty where image_owners() is.
  struct ImageLists {
    Kokkos::View<const int*, ExecSpace> offsets, ghosts;
  };
  virtual ImageLists image_lists() const { return {}; }
};

// Stand-alone exchange for periodic images: ghost g (index n_local + g) is a copy of owner[g].
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class IndexMapGhostExchange : public GhostExchange<T, ExecSpace> {
 public:
  using typename GhostExchange<T, ExecSpace>::FeatureView;
  IndexMapGhostExchange(int n_local, const std::vector<int>& ghost_owner);
  // A new map (after re-neighbouring): its upload is queued behind the work already queued, which still reads the
  // old one; nothing is allocated unless the map outgrows its arrays. Throws on an owner outside [0, n_local).
  void update(int n_local, const std::vector<int>& ghost_owner);
  void forward(FeatureView h) override;
  void reverse(FeatureView dh) override;
  Kokkos::View<const int*, ExecSpace> image_owners() const override { return owner_; }
  typename GhostExchange<T, ExecSpace>::ImageLists image_lists() const override { return {ghost_offsets_, ghost_list_}; }

 private:
  int n_local_ = 0;
  Kokkos::View<int*, ExecSpace> owner_;
  Kokkos::View<int*, ExecSpace> ghost_offsets_, ghost_list_;  // owner -> its ghosts (CSR), deterministic reverse
  // the three above as parts of one array, uploaded in one copy from host staging (pinned on GPUs)
  Kokkos::View<int*, ExecSpace> packed_;
  Kokkos::View<int*, typename kernels::PinnedHostSpace<ExecSpace>::type> staging_;
  kernels::StreamEvent<ExecSpace> uploaded_;  // the last upload from staging_
};

template <class ExecSpace = Kokkos::DefaultExecutionSpace>
struct Graph {
  int n_local = 0, n_all = 0;
  int n_edges = -1;  // recv_offsets(n_local) if the caller knows it on the host (-1: the model reads it, a device wait)
  // true: n_edges is only an upper bound on recv_offsets(n_local) (senders holds at least that many entries). The
  // fused backend sizes its edge arrays by it and never needs the count on the host; the reference backend reads
  // the count back (a device wait).
  bool n_edges_is_bound = false;
  // true if the caller guarantees 0 <= senders(e) < n_all (e.g. indices from LAMMPS's neighbour lists): the model
  // then skips its own range check, a reduction the host would wait for every step
  bool senders_in_range = false;
  Kokkos::View<double* [3], Kokkos::LayoutRight, ExecSpace> x;  // positions, n_all
  Kokkos::View<int*, ExecSpace> species;                        // n_all, -1 = not a model atom
  Kokkos::View<int*, ExecSpace> recv_offsets;                   // n_local + 1
  Kokkos::View<int*, ExecSpace> senders;                        // n_edges
};

template <class ExecSpace = Kokkos::DefaultExecutionSpace>
struct Results {
  // What the caller needs this step (LAMMPS: eflag_global, vflag_global). Their reductions run either way, into
  // device memory; only a wanted one makes the host wait for its value. Not wanted: left 0.
  bool want_energy = true, want_virial = true;
  double energy = 0;
  double virial[6] = {0, 0, 0, 0, 0, 0};                      // xx yy zz xy xz yz
  Kokkos::View<double* [3], Kokkos::LayoutRight, ExecSpace> f;  // n_all (overwritten, or added to: add_forces)
  // true: the model adds its forces to f, which holds the caller's (e.g. LAMMPS's force array itself, saving the
  // caller a pass over it); ghost rows the model leaves zero (grouped senders) are then left as they are
  bool add_forces = false;
  Kokkos::View<double*, ExecSpace> eatom;                       // n_local (when requested)
  Kokkos::View<double* [6], Kokkos::LayoutRight, ExecSpace> vatom;  // n_all (when requested)
};

// Model weights and sparse CG table in a plain struct that device lambdas capture by value.
template <class T, class ExecSpace>
struct ModelData {
  int L = 0, K = 0, C = 0, T_layers = 0, NB = 0, H = 0, A = 0, dk = 0, Hr = 0, P = 0, nnz = 0;
  T r_c = 0, inv_avg = 0, energy_scale = 0;
  // Offsets into `w`: globals, then one block of `layer_size` per layer with identical internal offsets.
  int o_embed = 0, o_rW1 = 0, o_rW1t = 0, o_rb1 = 0, o_rw2 = 0, o_rb2 = 0, layer_base = 0, layer_size = 0;
  int o_W1 = 0, o_b1 = 0, o_W2 = 0, o_W2t = 0, o_Wg = 0, o_Wq = 0, o_Wk = 0, o_Wm0 = 0, o_Wo0 = 0, o_b0 = 0, o_Wgm = 0,
      o_Wgo = 0, o_bg = 0;
  int o_Wm[kMaxL + 1] = {}, o_Wo[kMaxL + 1] = {}, o_Wu[kMaxL + 1] = {}, o_gn[kMaxL + 1] = {};
  // Transposed (in, out) copies of the node-update matrices for the forward node kernel: its threads run over
  // outputs o, so a warp then reads consecutive addresses (row-major (out, in) reads were C floats apart, 32 cache
  // lines per warp load).
  int o_Wm0t = 0, o_Wo0t = 0, o_Wgmt = 0, o_Wgot = 0;
  int o_Wmt[kMaxL + 1] = {}, o_Wot[kMaxL + 1] = {}, o_Wut[kMaxL + 1] = {};
  Kokkos::View<T*, ExecSpace> w;
  Kokkos::View<double*, ExecSpace> E_ref;
  Kokkos::View<int*, ExecSpace> cg_k1, cg_k2, cg_k3, cg_path;  // nnz entries, alpha_p folded into cg_coef
  Kokkos::View<T*, ExecSpace> cg_coef;
  // Product basis (correlation 2, docs/model.md step 3), in the layers t < T_layers - 1; the last layer's block holds
  // zeros there so that every layer block has the same offsets. product.wq (Q, C), product.Wp<l> (C, C) and its
  // transposed copy. Its CG entries (beta_q folded into prod_coef) twice, as CSR tables in prod_index: grouped by
  // output component k3 for the forward (offsets at 0, K + 1 of them; rows (k1, k2, q) from prod_fwd_rows) and by
  // the factor component k that the adjoint differentiates (offsets from prod_adj_offsets; rows (other factor, k3, q)
  // from prod_adj_rows, coefficients from prod_adj_coef). Two views: every node kernel captures ModelData.
  int correlation = 1, o_wq = 0;
  int o_Wp[kMaxL + 1] = {}, o_Wpt[kMaxL + 1] = {};
  int prod_adj_offsets = 0, prod_fwd_rows = 0, prod_adj_rows = 0, prod_adj_coef = 0;
  Kokkos::View<int*, ExecSpace> prod_index;
  Kokkos::View<T*, ExecSpace> prod_coef;
  KOKKOS_INLINE_FUNCTION bool has_product(int t) const { return correlation == 2 && t < T_layers - 1; }
};

namespace model_detail {
template <class T, class ExecSpace>
struct FusedState;  // fused_state.hpp
template <class ExecSpace>
struct Step;  // model_step.hpp
template <class T, class ExecSpace>
struct LayerViews;  // model_step.hpp
template <class T, class ExecSpace>
struct ReadoutViews;  // model_forward_stages.hpp
}  // namespace model_detail

// Edge operations (message + attention and their adjoints): the fused kernels of src/kernels (one team per
// atom, no per-edge storage) or the straightforward per-edge reference implemented in this library.
enum class EdgeBackend { Fused, Reference };

// Atoms per node-kernel team that impl::ModelTuning::node_atoms = 0 picks for nl local atoms on a GPU of `sms` SMs
// (sms <= 0: not a GPU, max_atoms): the largest of max_atoms .. 2 that still makes at least two teams per SM, else 2
// (one atom per team ran slower than four on the H200; this rule was within the noise of four: opt-in).
inline int auto_node_atoms(int nl, int sms, int max_atoms) {
  if (sms <= 0) return max_atoms;
  int nba = max_atoms;
  while (nba > 2 && (nl + nba - 1) / nba < 2 * sms) --nba;
  return nba;
}

template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Model {
 public:
  using FeatureView = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  // options: ModelOptions{} is the production configuration (model_options.hpp); out-of-range values throw
  // std::invalid_argument.
  explicit Model(const ModelFile& file, EdgeBackend backend = EdgeBackend::Fused,
                 const ModelOptions& options = ModelOptions{});
  // The same with the kernels' internal tuning (tests: impl/model_tuning.hpp; the constructor above takes
  // impl::ModelTuning{}); out-of-range values throw std::invalid_argument.
  Model(const ModelFile& file, EdgeBackend backend, const ModelOptions& options, const impl::ModelTuning& tuning);
  ~Model();
  EdgeBackend backend() const { return backend_; }
  const ModelHyper& hyper() const { return hyper_; }
  const ModelOptions& options() const { return options_; }
  const impl::ModelTuning& tuning() const { return tuning_; }

  // Energy, forces on all n_all atoms, virial; eatom/vatom when the Results views are allocated (non-empty).
  // `exchange` refreshes ghost features between layers (may be null when n_all == n_local).
  void compute(const Graph<ExecSpace>& graph, GhostExchange<T, ExecSpace>* exchange, Results<ExecSpace>& out);

  int64_t num_edges_last() const { return n_edges_; }  // (the caller's upper bound where Graph gave one)
  // Whether compute() groups the sender adjoint by local atom where the exchange names the ghosts' image owners
  // (fused backend, impl::ModelTuning::group_senders): then every ghost's forces, per-atom virial and feature adjoints
  // land on its atom's row and the ghost rows of Results::f and vatom are zero. senders_grouped_last(): the last
  // compute() did so (it had ghosts and such an exchange).
  bool groups_senders() const { return backend_ == EdgeBackend::Fused && tuning_.group_senders; }
  bool senders_grouped_last() const { return n_send_ >= 0; }
  // One line on how the edge kernels launch for nl local atoms: per layer, the fused forward's and adjoints' threads
  // per atom, radial chunk (0: mode 0), basis chunk, tensor cores, register cap (the pair styles log it once a run);
  // non-default options and tuning are named at its end.
  std::string launch_summary(int nl) const;

 private:
  using Step = model_detail::Step<ExecSpace>;
  // compute()'s stages (model_compute.hpp), one per model step; the kernels are model_detail's stage functions
  Step begin_step(const Graph<ExecSpace>& graph, GhostExchange<T, ExecSpace>* exchange);
  void ensure_capacity(int n_local, int n_all, int n_edges, bool sender_lists);
  void build_sender_lists(const Step& step);
  model_detail::LayerViews<T, ExecSpace> layer_views(int t, bool use_rcache) const;
  void forward_layer(int t, const Step& step, GhostExchange<T, ExecSpace>* exchange,
                     const model_detail::ReadoutViews<T, ExecSpace>* readout);
  void adjoint_layer(int t, const Step& step, GhostExchange<T, ExecSpace>* exchange, FeatureView dh, FeatureView dh_in);
  void fold_forces(const Step& step, Results<ExecSpace>& out);
  void fetch_sums(Results<ExecSpace>& out) const;
  // the fused backend's kernels of layer t (model_construct.hpp)
  template <class Fn>
  void with_fused_graph(const Step& step, Fn fn);
  int fused_team_size(int nl, bool forward = false) const;
  void fused_forward_layer(int t, const Step& step);
  void fused_backward_layer(int t, const Step& step, FeatureView dh_in);
  std::unique_ptr<model_detail::FusedState<T, ExecSpace>> fused_;  // kernel-library parameters and workspace
  EdgeBackend backend_;
  ModelHyper hyper_;
  ModelOptions options_;
  impl::ModelTuning tuning_;
  ModelData<T, ExecSpace> data_;
  int64_t n_edges_ = 0;
  int node_team_ = 1;  // threads per atom in the node kernels (set from the back-end at construction)
  int node_atoms_ = 4;  // atoms per team of the node kernels (impl::ModelTuning::node_atoms)
  // The fused sender adjoint runs one team per local atom and its periodic images where the ghost exchange says which
  // those are, else one per atom incl. ghosts; n_send_ is this compute's count (kernels::Graph::n_send, -1: not
  // grouped)
  int n_send_ = -1;
  // Per-layer saved activations for the adjoint.
  std::vector<FeatureView> h_;  // T+1 (n_all)
  std::vector<FeatureView> m_, o_, z_, hp_;  // T (n_local)
  std::vector<Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>> gate_, rms_, q_, k_, smax_, zsum_;
  FeatureView dh_, dh_prev_, dm_, do_;
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> obar_, edge_p_, edge_ds_;
  Kokkos::View<double* [3], Kokkos::LayoutRight, ExecSpace> edge_grad_;
  Kokkos::View<int*, ExecSpace> edge_receiver_, send_offsets_, send_edges_, send_fill_;
  Kokkos::View<double*, ExecSpace> atom_energy_;  // each owned atom's energy (the readout's), n_local
  // device results of the energy (element 0) and virial (1..6) reductions, copied to the host when wanted
  Kokkos::View<double[7], ExecSpace> sums_;
  // per layer (n_edges, 2PC), reference backend
  std::vector<Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>> radial_cache_;
};

}  // namespace batmobile
