// pair_style batmobile/kk: see pair_batmobile_kokkos.h.
#include "pair_batmobile_kokkos.h"
#include "lammps_compat.h"
#include "pair_batmobile_common.h"
#include "pair_batmobile_kokkos_comm.h"
#include "pair_batmobile_kokkos_edges.h"

#include <array>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "atom_kokkos.h"
#include "atom_masks.h"
#include "comm.h"
#include "comm_kokkos.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "kokkos.h"
#include "memory_kokkos.h"
#include "kernels/async_readback.hpp"
#include "kernels/common.hpp"
#include "model/model.hpp"
#include "neigh_list_kokkos.h"
#include "neigh_request.h"
#include "neighbor.h"
#include "update.h"

using namespace LAMMPS_NS;

namespace {

// Sets pair->execution_space for one LAMMPS communication call and restores it (also when the call throws).
// CommKokkos picks its pair path from it: Host -> CommBrick with the host callbacks.
class ScopedExecutionSpace {
 public:
  ScopedExecutionSpace(Pair *pair, ExecutionSpace space) : pair_(pair), saved_(pair->execution_space) {
    pair->execution_space = space;
  }
  ~ScopedExecutionSpace() { pair_->execution_space = saved_; }

 private:
  Pair *pair_;
  ExecutionSpace saved_;
};

// Ghost features through LAMMPS's host forward/reverse pair communication (ghost_comm lammps, comm_style tiled):
// the whole feature array through a host mirror and PairBatmobile's pack/unpack callbacks. Counted only when the
// callbacks ran (host_packs: forward packs, reverse packs so far).
template <class T, class Exec>
class KokkosLammpsExchange : public batmobile::GhostExchange<T, Exec> {
 public:
  using typename batmobile::GhostExchange<T, Exec>::FeatureView;
  KokkosLammpsExchange(PairBatmobile *pair, LAMMPS *lmp, const long *host_packs,
                       batmobile_kk::ExchangeCounts *counts) :
      pair_(pair), lmp_(lmp), host_packs_(host_packs), counts_(counts) {}
  void forward(FeatureView h) override {
    check_width(h, pair_->comm_forward);
    const long before = host_packs_[0];
    auto hh = Kokkos::create_mirror_view(h);
    Kokkos::deep_copy(hh, h);
    target(hh);
    {
      ScopedExecutionSpace space(pair_, Host);
      batmobile_compat::forward_comm(lmp_->comm, pair_);
    }
    Kokkos::deep_copy(h, hh);
    if (host_packs_[0] > before) ++counts_->lammps_forward;
  }
  void reverse(FeatureView dh) override {
    check_width(dh, pair_->comm_reverse);
    const long before = host_packs_[1];
    auto hh = Kokkos::create_mirror_view(dh);
    Kokkos::deep_copy(hh, dh);
    target(hh);
    {
      ScopedExecutionSpace space(pair_, Host);
      batmobile_compat::reverse_comm(lmp_->comm, pair_);
    }
    const int nlocal = lmp_->atom->nlocal, nall = nlocal + lmp_->atom->nghost;
    for (int n = nlocal; n < nall; ++n)
      for (size_t x = 0; x < hh.extent(1); ++x) hh(n, x) = 0;
    Kokkos::deep_copy(dh, hh);
    if (host_packs_[1] > before) ++counts_->lammps_reverse;
  }

 private:
  // LAMMPS sizes its buffers from comm_forward/comm_reverse (K*C values per atom, set in load_model)
  static void check_width(const FeatureView &v, int comm_size) {
    if (static_cast<int>(v.extent(1)) != comm_size)
      throw std::runtime_error("ghost feature rows of width " + std::to_string(v.extent(1)) +
                               " but the pair communication size is " + std::to_string(comm_size));
  }
  template <class V>
  void target(V v) {
    pair_->comm_target.point_to(v.data(), static_cast<int>(v.extent(1)));
  }
  PairBatmobile *pair_;
  LAMMPS *lmp_;
  const long *host_packs_;
  batmobile_kk::ExchangeCounts *counts_;
};

}    // namespace

// The ghost exchanges of one precision; `active` is the one this compute() uses (select_exchange): the image map
// on one rank, the own swap exchange on several ranks with comm_style brick, LAMMPS's pair communication for
// ghost_comm lammps and comm_style tiled.
template <class T, class Exec>
struct ExchangeChoice {
  std::unique_ptr<KokkosLammpsExchange<T, Exec>> lammps;
  std::unique_ptr<batmobile_kk::SwapGhostExchange<T, Exec>> swaps;
  std::unique_ptr<batmobile::IndexMapGhostExchange<T, Exec>> images;
  batmobile::GhostExchange<T, Exec> *active = nullptr;
  batmobile::GhostExchange<T, Exec> *get() const { return active; }
};

template <class DeviceType>
struct PairBatmobileKokkos<DeviceType>::KKImpl {
  using Exec = typename DeviceType::execution_space;
  std::unique_ptr<batmobile::Model<double, Exec>> model_d;
  std::unique_ptr<batmobile::Model<float, Exec>> model_f;
  ExchangeChoice<double, Exec> exchange_d;
  ExchangeChoice<float, Exec> exchange_f;
  batmobile_kk::SwapPlan<Exec> swap_plan;  // CommBrick's swaps on the device, shared by exchange_d/f.swaps
  batmobile_kk::ExchangeCounts counts;     // of the current compute() (pvector)
  long host_packs[2] = {0, 0};             // host pack_forward_comm / pack_reverse_comm callbacks so far
  int images_nlocal = -1, images_nall = -1;  // the atom counts the image map was built for
  int graph_team = 1;  // threads per local atom of the edge-list build (graph_team; init_style)
  batmobile::Graph<Exec> graph;
  batmobile::Results<Exec> results;
  // committee members 2..K (pair_batmobile_committee.h) and, on committee steps, the first model's forces apart
  std::vector<std::unique_ptr<batmobile::Model<double, Exec>>> members_d;
  std::vector<std::unique_ptr<batmobile::Model<float, Exec>>> members_f;
  batmobile::Results<Exec> member_results;
  Kokkos::View<double *[3], Kokkos::LayoutRight, Exec> first_forces;
  Kokkos::View<int *, Exec> type_species, count;
  // the edge list's closest squared distance and edge count, written by the count's reduction and the scan straight
  // into stats_readback's host buffer (pinned memory on GPUs: no copy to queue or wait for).
  // distance_check deferred (the GPU default): the host does not wait for the values (the wait empties the GPU's
  // queue every step); the edge arrays are sized by the neighbour list's capacity and the closest distance is
  // checked one compute() later, or at the end of this one where the host waits anyway (energy or virial wanted,
  // last step of a run). immediate (the host default: no queue to keep) reads it at once.
  bool deferred_check = true;
  batmobile::kernels::AsyncReadback<Exec, 2> stats_readback;
  bigint stats_step = 0;      // the step whose statistics stats_readback holds
  bool stats_has_atoms = false;  // that step had local atoms (else no minimum was taken)
  double closest_of(const std::array<double, 2> &v) const { return stats_has_atoms ? v[0] : 1e300; }
};

template <class DeviceType>
PairBatmobileKokkos<DeviceType>::PairBatmobileKokkos(LAMMPS *lmp) : PairBatmobile(lmp), kk(new KKImpl)
{
  respa_enable = 0;
  kokkosable = 1;
  atomKK = (AtomKokkos *) atom;
  execution_space = ExecutionSpaceFromDevice<DeviceType>::space;
  datamask_read = X_MASK | F_MASK | TYPE_MASK | ENERGY_MASK | VIRIAL_MASK;
  datamask_modify = F_MASK | ENERGY_MASK | VIRIAL_MASK;
  // exchange statistics of the last compute() for `compute pair` (see the header)
  nextra = 7;
  pvector = new double[nextra]();
}

template <class DeviceType>
PairBatmobileKokkos<DeviceType>::~PairBatmobileKokkos()
{
  if (copymode) return;
  delete[] pvector;
  memoryKK->destroy_kokkos(k_eatom, eatom);
  memoryKK->destroy_kokkos(k_vatom, vatom);
  kk.reset();
}

template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::build_models(const batmobile::ModelFile &mf)
{
  using Exec = typename KKImpl::Exec;
  kk->model_d.reset();
  kk->model_f.reset();
  const auto backend = batmobile_pair::edge_backend(kernels_choice);
  if (mixed_precision && batmobile::kernels::runs_on_host<Exec> && comm->me == 0)
    error->warning(FLERR, "pair_style {}: precision mixed needs the f16 tensor cores of a GPU; on this host back-end "
                   "it runs as precision single", style_label());
  if (single_precision)
    kk->model_f = std::make_unique<batmobile::Model<float, Exec>>(mf, backend,
                                                                  batmobile_pair::precision_options(mixed_precision));
  else
    kk->model_d = std::make_unique<batmobile::Model<double, Exec>>(mf, backend);
  KKImpl &I = *kk;
  I.exchange_d.lammps = std::make_unique<KokkosLammpsExchange<double, Exec>>(this, lmp, I.host_packs, &I.counts);
  I.exchange_f.lammps = std::make_unique<KokkosLammpsExchange<float, Exec>>(this, lmp, I.host_packs, &I.counts);
  I.exchange_d.swaps = std::make_unique<batmobile_kk::SwapGhostExchange<double, Exec>>(lmp, &I.swap_plan, &I.counts);
  I.exchange_f.swaps = std::make_unique<batmobile_kk::SwapGhostExchange<float, Exec>>(lmp, &I.swap_plan, &I.counts);
  I.exchange_d.images.reset();
  I.exchange_f.images.reset();
  I.exchange_d.active = nullptr;
  I.exchange_f.active = nullptr;
  I.images_nlocal = I.images_nall = -1;
}

template <class DeviceType>
bool PairBatmobileKokkos<DeviceType>::runs_on_gpu() const
{
  return !batmobile::kernels::runs_on_host<typename KKImpl::Exec>;
}

template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::build_members(const std::vector<batmobile::ModelFile> &files)
{
  batmobile_pair::build_members<typename KKImpl::Exec>(*kk, files, single_precision,
                                                         batmobile_pair::edge_backend(kernels_choice),
                                                         batmobile_pair::precision_options(mixed_precision));
}

// A committee step: the first model's forces (computed apart into first_forces) go into LAMMPS's, every member runs
// on the same graph, and their forces and virials go to the host for the deviation (PairBatmobile::committee_finish).
template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::committee_step_device(int nlocal, int nall)
{
  using Policy = Kokkos::RangePolicy<typename KKImpl::Exec>;
  KKImpl &I = *kk;
  const int K = committee->members();
  auto f = atomKK->k_f.view<DeviceType>();
  auto first = I.first_forces;
  Kokkos::parallel_for(
      "bm_kk_committee_add", Policy(0, nall), KOKKOS_LAMBDA(int n) {
        for (int a = 0; a < 3; ++a) f(n, a) += first(n, a);
      });
  const auto species = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), I.graph.species);
  batmobile_pair::collect_committee(I, single_precision, K, nall, species, committee_forces, committee_virials, error,
                                    style_label(), committee->member_paths());
  committee_model_atom.assign(nlocal, 0);
  for (int i = 0; i < nlocal; ++i) committee_model_atom[i] = species(i) >= 0;
  committee_finish(nlocal);
}

// newton off: the image exchange (one rank, ghost_comm device, atom IDs) with a model that groups senders by atom
template <class DeviceType>
bool PairBatmobileKokkos<DeviceType>::newton_off_ok() const
{
  const bool groups = batmobile_pair::with_model(
      *kk, single_precision, [](auto *model, auto &) { return model && model->groups_senders(); });
  return groups && comm->nprocs == 1 && !ghost_comm_lammps && atom->tag_enable;
}

// pair_style batmobile/kk ... ghost_comm device|lammps distance_check auto|deferred|immediate mpi_buffers auto|host
// graph_team auto|N (see the header)
template <class DeviceType>
int PairBatmobileKokkos<DeviceType>::settings_keyword(int narg, char **arg)
{
  if (strcmp(arg[0], "ghost_comm") == 0) {
    ghost_comm_lammps = keyword_choice(narg, arg, {"device", "lammps"}) == 1;
  } else if (strcmp(arg[0], "distance_check") == 0) {
    distance_check = static_cast<DistanceCheck>(keyword_choice(narg, arg, {"auto", "deferred", "immediate"}));
  } else if (strcmp(arg[0], "mpi_buffers") == 0) {
    mpi_buffers_host = keyword_choice(narg, arg, {"auto", "host"}) == 1;
  } else if (strcmp(arg[0], "graph_team") == 0) {
    if (narg < 2) error->all(FLERR, "pair_style batmobile/kk: 'graph_team' needs auto or a thread count");
    char *end = nullptr;
    const bool is_auto = strcmp(arg[1], "auto") == 0;
    const long n = is_auto ? 0 : std::strtol(arg[1], &end, 10);
    if (!is_auto && (*end != '\0' || end == arg[1] || n < 1 || n > 1024))
      error->all(FLERR, "pair_style batmobile/kk: unknown graph_team '{}' (use auto or a thread count 1 to 1024)",
                 arg[1]);
    graph_team_choice = static_cast<int>(n);
  } else {
    return 0;
  }
  return 2;
}

template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::reset_settings()
{
  PairBatmobile::reset_settings();
  ghost_comm_lammps = false;
  distance_check = DistanceCheck::kAuto;
  mpi_buffers_host = false;
  graph_team_choice = 0;
}

template <class DeviceType>
const char *PairBatmobileKokkos<DeviceType>::settings_usage() const
{
  return "pair_style batmobile/kk [precision double|single|mixed] [kernels fused|reference] [ghost_comm device|lammps] "
         "[distance_check auto|deferred|immediate] [mpi_buffers auto|host] [graph_team auto|N] [out_freq N] "
         "[out_file FILE]";
}

// The settings in effect: ghost_comm as this step's exchange took it (comm_style tiled falls back to lammps),
// mpi_buffers direct where MPI reads the exchange buffers in place, host where it gets host copies.
template <class DeviceType>
std::string PairBatmobileKokkos<DeviceType>::launch_settings() const
{
  const bool lammps_route = batmobile_pair::with_model(*kk, single_precision, [](auto *, auto &exchange) {
    return exchange.active == exchange.lammps.get();
  });
  const bool staged = kk->exchange_d.swaps && kk->exchange_d.swaps->stages_through_host();
  return fmt::format("{}, ghost_comm {}, distance_check {}, mpi_buffers {}, graph_team {}",
                     PairBatmobile::launch_settings(), lammps_route ? "lammps" : "device",
                     kk->deferred_check ? "deferred" : "immediate", staged ? "host" : "direct", kk->graph_team);
}

template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::init_style()
{
  check_settings();
  launch_logged = false;
  NeighRequest *request = batmobile_compat::request_full_list(neighbor, this, instance_me);
  request->set_kokkos_host(std::is_same<DeviceType, LMPHostType>::value &&
                           !std::is_same<DeviceType, LMPDeviceType>::value);
  request->set_kokkos_device(std::is_same<DeviceType, LMPDeviceType>::value);
  // LAMMPS type -> model species, on the device
  kk->type_species = Kokkos::View<int *, typename KKImpl::Exec>("bm_type_species", atom->ntypes + 1);
  auto h = Kokkos::create_mirror_view(kk->type_species);
  for (int t = 0; t <= atom->ntypes; ++t) h(t) = type_species[t];
  Kokkos::deep_copy(kk->type_species, h);
  // the keywords' effective values: auto resolves by back-end (host or GPU)
  using Exec = typename KKImpl::Exec;
  constexpr bool host = batmobile::kernels::runs_on_host<Exec>;
  kk->deferred_check = distance_check == DistanceCheck::kDeferred || (distance_check == DistanceCheck::kAuto && !host);
  // a warp per atom on GPUs (one thread per atom made the edge build a large part of a small system's step)
  kk->graph_team = graph_team_choice > 0 ? graph_team_choice : (host ? 1 : 32);
  using TeamPolicy = Kokkos::TeamPolicy<Exec>;
  const int team_max = TeamPolicy(1, 1).team_size_max(
      KOKKOS_LAMBDA(const typename TeamPolicy::member_type &){}, Kokkos::ParallelForTag());
  if (kk->graph_team > team_max)
    error->all(FLERR, "pair_style batmobile/kk: graph_team {} is more than this back-end's team size limit {}",
               kk->graph_team, team_max);
  if (kk->exchange_d.swaps) kk->exchange_d.swaps->force_host_buffers = mpi_buffers_host;
  if (kk->exchange_f.swaps) kk->exchange_f.swaps->force_host_buffers = mpi_buffers_host;
}

// One evaluation: the edge list on the device (build_graph), the ghost exchange (select_exchange), the model, the
// deferred distance check where the host waits anyway, the exchange statistics and LAMMPS's tallies (add_outputs).
template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::compute(int eflag, int vflag)
{
  ev_init(eflag, vflag, 0);
  if (domain->box_change) check_box();
  if (eflag_atom) {
    memoryKK->destroy_kokkos(k_eatom, eatom);
    memoryKK->create_kokkos(k_eatom, eatom, maxeatom, "pair:eatom");
  }
  if (vflag_atom) {
    memoryKK->destroy_kokkos(k_vatom, vatom);
    memoryKK->create_kokkos(k_vatom, vatom, maxvatom, "pair:vatom");
  }
  atomKK->sync(execution_space, X_MASK | F_MASK | TYPE_MASK);
  const int nlocal = atom->nlocal, nall = atom->nlocal + atom->nghost;
  KKImpl &I = *kk;
  // a closest distance measured by an earlier compute() and not checked yet (distance_check deferred)
  if (I.stats_readback.pending()) check_closest(I.closest_of(I.stats_readback.take()), I.stats_step);
  build_graph(nlocal, nall);
  select_exchange(nlocal, nall);
  I.counts = batmobile_kk::ExchangeCounts();
  // the model adds its forces to LAMMPS's force array itself (one pass over the atoms less; atoms of no model species
  // get zero from it). newton off: ghost rows are left alone, LAMMPS neither clears nor folds them
  // On committee steps the first model's forces are kept apart for the deviation and added afterwards.
  const bool committee_due = committee->due(update->ntimestep);
  if (committee_due) {
    if (I.first_forces.extent(0) < static_cast<size_t>(nall))
      I.first_forces = decltype(I.first_forces)("bm_first_f", batmobile_pair::grow_capacity(nall));
    Kokkos::deep_copy(I.first_forces, 0.0);
    I.results.f = I.first_forces;
    I.results.add_forces = false;
  } else {
    I.results.f = atomKK->k_f.view<DeviceType>();
    I.results.add_forces = true;
  }
  batmobile_pair::run_model(I, single_precision, eflag_global, vflag_global || committee_due, eflag_atom, vflag_atom,
                            nlocal, nall, error, style_label());
  if (committee_due) committee_step_device(nlocal, nall);
  batmobile_pair::log_launch_once(I, single_precision, nlocal, lmp, launch_logged, style_label(), launch_settings());
  // where the host has waited for the GPU anyway (the energy or virial sums), or the run ends, check this step now
  if (I.stats_readback.pending() && (eflag_global || vflag_global || update->ntimestep >= update->laststep))
    check_closest(I.closest_of(I.stats_readback.take()), I.stats_step);
  const auto &c = I.counts;
  const int counts[7] = {c.swap_forward, c.swap_reverse, c.lammps_forward, c.lammps_reverse, c.self_swaps,
                         c.mpi_direct,   c.mpi_staged};
  for (int k = 0; k < 7; ++k) pvector[k] = counts[k];
  // newton off (newton_off_ok): LAMMPS neither clears nor folds the ghosts' forces, so they must have landed on
  // their atoms (they did unless this step had no image exchange, which init_style has ruled out: checked anyway)
  if (force->newton_pair == 0 && nall > nlocal &&
      !batmobile_pair::with_model(I, single_precision,
                                  [](auto *model, auto &) { return model->senders_grouped_last(); }))
    error->one(FLERR, "pair_style batmobile/kk: newton off, but this step's ghost forces were not folded by the model");
  add_outputs(nlocal, nall);
  atomKK->modified(execution_space, F_MASK);
}

// The model's graph of this step on the device: positions and species of all atoms, then the receiver-grouped edges
// 0 < r < r_c between model atoms from the full neighbour list (same filter and order as the CPU style), with the
// closest distance measured on the way (checked here or later, distance_check).
template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::build_graph(int nlocal, int nall)
{
  using Exec = typename KKImpl::Exec;
  using Policy = Kokkos::RangePolicy<Exec>;
  auto x = atomKK->k_x.view<DeviceType>();
  auto type = atomKK->k_type.view<DeviceType>();
  auto *k_list = static_cast<NeighListKokkos<DeviceType> *>(list);
  auto d_numneigh = k_list->d_numneigh;
  auto d_neighbors = k_list->d_neighbors;
  auto d_ilist = k_list->d_ilist;
  const int inum = list->inum;
  const double rcsq = r_c * r_c;

  KKImpl &I = *kk;
  auto &g = I.graph;
  const auto grow = batmobile_pair::grow_capacity;
  if (batmobile_pair::reserve_atoms(I, nlocal, nall)) I.count = decltype(I.count)("bm_count", grow(nlocal + 1));
  auto gx = g.x;
  auto gs = g.species;
  auto tsp = I.type_species;
  auto count = I.count;
  // (also zeroes the per-receiver counts, one launch instead of two)
  Kokkos::parallel_for(
      "bm_kk_atoms", Policy(0, std::max(nall, nlocal + 1)), KOKKOS_LAMBDA(int n) {
        if (n <= nlocal) count(n) = 0;
        if (n >= nall) return;
        for (int a = 0; a < 3; ++a) gx(n, a) = x(n, a);
        gs(n) = tsp(type(n));
      });
  // edges: count per receiver, scan, fill (pair_batmobile_kokkos_edges.h), I.graph_team threads per local atom
  const batmobile_kk::EdgeFilter<decltype(x), decltype(gs), decltype(d_neighbors)> keep{x, gs, d_neighbors, rcsq,
                                                                                      NEIGHMASK};
  // The reduction and the scan write the closest distance and the edge count into host-readable memory (pinned on
  // GPUs): a reduction into a host value and a scan with a total would each make the host wait, and a copy of them
  // would idle the GPU around it. Where the check is deferred the host does not wait for them: the sender array is
  // sized by the neighbour list's capacity.
  auto stats = I.stats_readback.target();
  const Kokkos::View<double, typename decltype(stats)::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      closest_d(stats.data());
  batmobile_kk::count_edges<Exec>(inum, I.graph_team, keep, d_ilist, d_numneigh, count, closest_d);
  auto roff = g.recv_offsets;
  Kokkos::parallel_scan(
      "bm_kk_scan", Policy(0, nlocal + 1), KOKKOS_LAMBDA(int i, int &acc, bool final) {
        acc += count(i);
        if (final) {
          roff(i) = acc;
          if (i == nlocal) stats(1) = acc;
        }
      });
  I.stats_readback.mark();
  I.stats_step = update->ntimestep;
  I.stats_has_atoms = nlocal > 0;
  // (when the check runs depends on settings every rank shares, never on this rank's sizes: it is collective)
  const long long edge_bound = static_cast<long long>(inum) * static_cast<long long>(d_neighbors.extent(1));
  const bool bounded = I.deferred_check && edge_bound < INT_MAX;
  int n_edges = static_cast<int>(edge_bound);
  if (!I.deferred_check) {
    const auto v = I.stats_readback.take();
    n_edges = static_cast<int>(v[1]);
    check_closest(I.closest_of(v), I.stats_step);
  } else if (!bounded) {  // a capacity beyond int: the exact count (a wait); the check stays deferred
    n_edges = static_cast<int>(I.stats_readback.values()[1]);
  }
  if (g.senders.extent(0) < static_cast<size_t>(n_edges)) g.senders = decltype(g.senders)("bm_senders", grow(n_edges));
  batmobile_kk::fill_edges<Exec>(inum, I.graph_team, keep, d_ilist, d_numneigh, g.recv_offsets, g.senders);
  g.n_local = nlocal;
  g.n_all = nall;
  g.n_edges = n_edges;          // (known here, or bounded: the model need not read it back)
  g.n_edges_is_bound = bounded;
  g.senders_in_range = true;    // neighbour-list indices, all < nall
}

// The model's energy, virial and per-atom terms into LAMMPS's accumulators (forces went in with the model).
template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::add_outputs(int nlocal, int nall)
{
  using Policy = Kokkos::RangePolicy<typename KKImpl::Exec>;
  auto &res = kk->results;
  const int n_out = force->newton_pair ? nall : nlocal;  // per-atom virial rows (ghost rows are zero with newton off)
  if (eflag_global) eng_vdwl += res.energy;
  if (vflag_global)
    for (int a = 0; a < 6; ++a) virial[a] += res.virial[a];
  if (eflag_atom) {
    auto d_eatom = k_eatom.template view<DeviceType>();
    auto re = res.eatom;
    Kokkos::parallel_for(
        "bm_kk_eatom", Policy(0, nlocal), KOKKOS_LAMBDA(int i) { d_eatom(i) += re(i); });
    k_eatom.template modify<DeviceType>();
    k_eatom.template sync<LMPHostType>();
  }
  if (vflag_atom) {
    auto d_vatom = k_vatom.template view<DeviceType>();
    auto rv = res.vatom;
    Kokkos::parallel_for(
        "bm_kk_vatom", Policy(0, n_out), KOKKOS_LAMBDA(int n) {
          for (int a = 0; a < 6; ++a) d_vatom(n, a) += rv(n, a);
        });
    k_vatom.template modify<DeviceType>();
    k_vatom.template sync<LMPHostType>();
  }
}

// Error unless the closest pair of atoms (squared distance, the minimum over this rank's edges of the given step;
// Kokkos's Min identity where it had none) is at least half the smallest distance in the model's training data, on
// any rank. Collective: every rank calls it at the same point.
template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::check_closest(double closest_sq, bigint step)
{
  double all_closest = closest_sq;
  MPI_Allreduce(&closest_sq, &all_closest, 1, MPI_DOUBLE, MPI_MIN, world);
  if (all_closest < 0.25 * min_distance * min_distance)
    error->all(FLERR, "pair_style {}: atoms at distance {:.4f} A at step {}, closer than half the smallest "
               "distance in the model's training data ({:.4f} A); the model is not valid there", style_label(),
               std::sqrt(all_closest), step, min_distance);
}

// Picks this step's ghost exchange (see the header): the image map on one rank (it needs atom IDs), the own swap
// exchange with CommBrick (its plan re-read after re-neighbouring), LAMMPS's pair communication otherwise or when
// asked for.
template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::select_exchange(int nlocal, int nall)
{
  KKImpl &I = *kk;
  // the same route for both precisions: pick(choice) returns that choice's exchange
  auto use = [&](auto pick) {
    I.exchange_d.active = pick(I.exchange_d);
    I.exchange_f.active = pick(I.exchange_f);
  };
  if (ghost_comm_lammps) {
    use([](auto &e) { return e.lammps.get(); });
  } else if (comm->nprocs == 1 && atom->tag_enable) {
    update_image_exchange(nlocal, nall);
    use([](auto &e) { return e.images.get(); });
  } else if (dynamic_cast<CommBrick *>(comm)) {
    try {
      I.swap_plan.update(lmp);
    } catch (const std::exception &e) {
      error->one(FLERR, "pair_style batmobile/kk: {}", e.what());
    }
    use([](auto &e) { return e.swaps.get(); });
  } else {
    use([](auto &e) { return e.lammps.get(); });
  }
}

// One rank: ghost n is an image of the owned atom with the same tag. The map only changes when LAMMPS rebuilds
// its ghost lists, i.e. at re-neighbouring.
template <class DeviceType>
void PairBatmobileKokkos<DeviceType>::update_image_exchange(int nlocal, int nall)
{
  KKImpl &I = *kk;
  if (neighbor->ago != 0 && I.images_nlocal == nlocal && I.images_nall == nall &&
      (I.exchange_d.images || I.exchange_f.images))
    return;
  atomKK->sync(Host, TAG_MASK);
  const std::vector<int> owner = batmobile_pair::image_owners(atom, nlocal, nall, error, style_label());
  if (single_precision)
    batmobile_pair::set_image_exchange(I.exchange_f.images, nlocal, owner);
  else
    batmobile_pair::set_image_exchange(I.exchange_d.images, nlocal, owner);
  I.images_nlocal = nlocal;
  I.images_nall = nall;
}

template <class DeviceType>
int PairBatmobileKokkos<DeviceType>::pack_forward_comm(int n, int *list, double *buf, int pbc_flag, int *pbc)
{
  ++kk->host_packs[0];
  return PairBatmobile::pack_forward_comm(n, list, buf, pbc_flag, pbc);
}

template <class DeviceType>
int PairBatmobileKokkos<DeviceType>::pack_reverse_comm(int n, int first, double *buf)
{
  ++kk->host_packs[1];
  return PairBatmobile::pack_reverse_comm(n, first, buf);
}

namespace LAMMPS_NS {
template class PairBatmobileKokkos<LMPDeviceType>;
#ifdef LMP_KOKKOS_GPU
template class PairBatmobileKokkos<LMPHostType>;
#endif
}    // namespace LAMMPS_NS
