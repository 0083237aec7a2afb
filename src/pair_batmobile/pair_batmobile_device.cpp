// pair_style batmobile device cuda: the model on the GPU of the styles' own Kokkos, for a LAMMPS without the KOKKOS
// package (see pair_batmobile.h). LAMMPS keeps positions, forces and its neighbour list on the host; each step the
// positions go to the GPU and the forces come back, the neighbour list (cutoff plus skin) only when LAMMPS rebuilds
// it, and the edge list is cut from it on the GPU (src/model/candidate_graph.hpp). Ghost features: on one rank an
// image -> owner map on the GPU; on several ranks LAMMPS's pair communication on host copies.
#include "lammps_compat.h"
#include "pair_batmobile.h"
#include "pair_batmobile_common.h"
#include "pair_batmobile_exchange.h"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "atom.h"
#include "comm.h"
#include "error.h"
#include "model/candidate_graph.hpp"
#include "model/model.hpp"
#include "neigh_list.h"
#include "neighbor.h"
#include "update.h"

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime_api.h>
#endif

using namespace LAMMPS_NS;

namespace {
using DevExec = Kokkos::DefaultExecutionSpace;
// page-locked host buffers make the per-step position and force copies direct DMA transfers
#if defined(KOKKOS_ENABLE_CUDA)
using StagingSpace = Kokkos::CudaHostPinnedSpace;
#else
using StagingSpace = Kokkos::HostSpace;
#endif
using StagingVec3 = Kokkos::View<double *[3], Kokkos::LayoutRight, StagingSpace>;

template <class T>
using StagedLammpsExchange = batmobile_pair::LammpsPairExchange<T, DevExec>;

// The ghost exchanges of one precision; `active` is this step's: the image map on one rank, else LAMMPS's.
template <class T>
struct DeviceExchange {
  std::unique_ptr<StagedLammpsExchange<T>> lammps;
  std::unique_ptr<batmobile::IndexMapGhostExchange<T, DevExec>> images;
  batmobile::GhostExchange<T, DevExec> *active = nullptr;
  batmobile::GhostExchange<T, DevExec> *get() const { return active; }
};

// Rows [0, n) of a (capacity x 3) view, for copies between host and device
template <class V>
auto rows(const V &v, int n)
{
  return Kokkos::subview(v, Kokkos::make_pair(0, n), Kokkos::ALL());
}
}    // namespace

struct PairBatmobile::DeviceImpl {
  std::unique_ptr<batmobile::Model<double, DevExec>> model_d;
  std::unique_ptr<batmobile::Model<float, DevExec>> model_f;
  std::vector<std::unique_ptr<batmobile::Model<double, DevExec>>> members_d;
  std::vector<std::unique_ptr<batmobile::Model<float, DevExec>>> members_f;
  DeviceExchange<double> exchange_d;
  DeviceExchange<float> exchange_f;
  batmobile::Graph<DevExec> graph;
  batmobile::Results<DevExec> results, member_results;
  batmobile::CandidateList<DevExec> candidates;
  Kokkos::View<int *, DevExec> count;
  Kokkos::View<double[2], DevExec> stats;  // closest squared distance, edge count (filter_candidates)
  StagingVec3 x_host, f_host;
  Kokkos::View<int *, StagingSpace> species_host;  // this neighbour list's species of all atoms
  std::vector<int> offsets_host, atoms_host;
  int list_nlocal = -1, list_nall = -1;  // the atom counts of the uploaded neighbour list
};

void PairBatmobile::DeviceDeleter::operator()(DeviceImpl *d) const { delete d; }

bool PairBatmobile::gpu_build()
{
  return !batmobile::kernels::runs_on_host<DevExec>;
}

int PairBatmobile::gpu_count()
{
#if defined(KOKKOS_ENABLE_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return gpu_build() ? 1 : 0;
#endif
}

void PairBatmobile::build_device_models(const batmobile::ModelFile &mf)
{
  device.reset(new DeviceImpl);
  DeviceImpl &D = *device;
  const auto backend = batmobile_pair::edge_backend(kernels_choice);
  if (single_precision)
    D.model_f = std::make_unique<batmobile::Model<float, DevExec>>(mf, backend,
                                                                   batmobile_pair::precision_options(mixed_precision));
  else
    D.model_d = std::make_unique<batmobile::Model<double, DevExec>>(mf, backend);
  D.exchange_d.lammps = std::make_unique<StagedLammpsExchange<double>>(this, lmp);
  D.exchange_f.lammps = std::make_unique<StagedLammpsExchange<float>>(this, lmp);
  D.stats = decltype(D.stats)("bm_device_stats");
}

void PairBatmobile::build_device_members(const std::vector<batmobile::ModelFile> &files)
{
  batmobile_pair::build_members<DevExec>(*device, files, single_precision, batmobile_pair::edge_backend(kernels_choice),
                                         batmobile_pair::precision_options(mixed_precision));
}

// After LAMMPS rebuilt its lists: species of all atoms, the full neighbour list of the model atoms (model-atom
// neighbours only; cutoff plus skin) and, on one rank, each ghost's owned image, to the GPU.
void PairBatmobile::upload_device_neighbors(int nlocal, int nall)
{
  DeviceImpl &D = *device;
  const auto grow = batmobile_pair::grow_capacity;
  if (D.species_host.extent(0) < static_cast<size_t>(nall))
    D.species_host = decltype(D.species_host)("bm_species_host", grow(nall));
  const int *type = atom->type;
  for (int n = 0; n < nall; ++n) D.species_host(n) = type_species[type[n]];
  Kokkos::deep_copy(Kokkos::subview(D.graph.species, Kokkos::make_pair(0, nall)),
                    Kokkos::subview(D.species_host, Kokkos::make_pair(0, nall)));
  D.offsets_host.assign(nlocal + 1, 0);
  D.atoms_host.clear();
  for (int ii = 0; ii < list->inum; ++ii) {
    const int i = list->ilist[ii];
    if (D.species_host(i) < 0) continue;
    for (int jj = 0; jj < list->numneigh[i]; ++jj) {
      const int j = list->firstneigh[i][jj] & NEIGHMASK;
      if (D.species_host(j) >= 0) ++D.offsets_host[i + 1];
    }
  }
  for (int i = 0; i < nlocal; ++i) D.offsets_host[i + 1] += D.offsets_host[i];
  D.atoms_host.resize(D.offsets_host[nlocal]);
  for (int ii = 0; ii < list->inum; ++ii) {
    const int i = list->ilist[ii];
    if (D.species_host(i) < 0) continue;
    int q = D.offsets_host[i];
    for (int jj = 0; jj < list->numneigh[i]; ++jj) {
      const int j = list->firstneigh[i][jj] & NEIGHMASK;
      if (D.species_host(j) >= 0) D.atoms_host[q++] = j;
    }
  }
  auto &c = D.candidates;
  c.n_local = nlocal;
  c.n_candidates = D.offsets_host[nlocal];
  if (c.offsets.extent(0) < static_cast<size_t>(nlocal + 1)) c.offsets = decltype(c.offsets)("bm_cand_off", grow(nlocal + 1));
  if (c.atoms.extent(0) < static_cast<size_t>(c.n_candidates))
    c.atoms = decltype(c.atoms)("bm_cand_atoms", grow(c.n_candidates));
  using Unmanaged = Kokkos::View<const int *, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Kokkos::deep_copy(Kokkos::subview(c.offsets, Kokkos::make_pair(0, nlocal + 1)),
                    Unmanaged(D.offsets_host.data(), nlocal + 1));
  Kokkos::deep_copy(Kokkos::subview(c.atoms, Kokkos::make_pair(0, c.n_candidates)),
                    Unmanaged(D.atoms_host.data(), c.n_candidates));
  if (D.graph.senders.extent(0) < static_cast<size_t>(c.n_candidates))
    D.graph.senders = decltype(D.graph.senders)("bm_senders", grow(c.n_candidates));
  if (D.count.extent(0) < static_cast<size_t>(nlocal + 1)) D.count = decltype(D.count)("bm_count", grow(nlocal + 1));
  if (comm->nprocs == 1) {
    const std::vector<int> owner = batmobile_pair::image_owners(atom, nlocal, nall, error, style_label());
    if (single_precision) {
      batmobile_pair::set_image_exchange(D.exchange_f.images, nlocal, owner);
      D.exchange_d.images.reset();
    } else {
      batmobile_pair::set_image_exchange(D.exchange_d.images, nlocal, owner);
      D.exchange_f.images.reset();
    }
  } else {
    D.exchange_d.images.reset();
    D.exchange_f.images.reset();
  }
  D.exchange_d.active = D.exchange_d.images ? (batmobile::GhostExchange<double, DevExec> *) D.exchange_d.images.get()
                                            : D.exchange_d.lammps.get();
  D.exchange_f.active = D.exchange_f.images ? (batmobile::GhostExchange<float, DevExec> *) D.exchange_f.images.get()
                                            : D.exchange_f.lammps.get();
  D.list_nlocal = nlocal;
  D.list_nall = nall;
}

// One evaluation on the GPU: positions up, the edge list from the uploaded neighbour list, the model, forces (and
// the per-atom terms asked for) down into LAMMPS's arrays, the closest-distance check, the committee's members.
void PairBatmobile::compute_device(int nlocal, int nall)
{
  DeviceImpl &D = *device;
  const auto grow = batmobile_pair::grow_capacity;
  batmobile_pair::reserve_atoms(D, nlocal, nall);
  if (D.x_host.extent(0) < static_cast<size_t>(nall)) {
    D.x_host = StagingVec3("bm_x_host", grow(nall));
    D.f_host = StagingVec3("bm_f_host", grow(nall));
  }
  if (D.results.f.extent(0) < static_cast<size_t>(nall)) D.results.f = decltype(D.results.f)("bm_f", grow(nall));
  // LAMMPS's per-atom arrays are contiguous (nmax x 3) blocks
  if (nall > 0) std::memcpy(D.x_host.data(), atom->x[0], sizeof(double) * 3 * nall);
  Kokkos::deep_copy(rows(D.graph.x, nall), rows(D.x_host, nall));
  if (neighbor->ago == 0 || D.list_nlocal != nlocal || D.list_nall != nall) upload_device_neighbors(nlocal, nall);
  D.graph.n_all = nall;
  batmobile::filter_candidates(D.candidates, r_c, D.graph, D.count, D.stats);

  const bool committee_due = committee->due(update->ntimestep);
  batmobile_pair::run_model(D, single_precision, eflag_global, vflag_global || committee_due, eflag_atom, vflag_atom,
                            nlocal, nall, error, style_label());
  batmobile_pair::log_launch_once(D, single_precision, nlocal, lmp, launch_logged, style_label(), launch_settings());
  Kokkos::deep_copy(rows(D.f_host, nall), rows(D.results.f, nall));
  auto stats = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), D.stats);
  double closest = nlocal > 0 ? stats(0) : 1e300, all_closest = closest;
  MPI_Allreduce(&closest, &all_closest, 1, MPI_DOUBLE, MPI_MIN, world);
  if (all_closest < 0.25 * min_distance * min_distance)
    error->all(FLERR, "pair_style {}: atoms at distance {:.4f} A, closer than half the smallest distance in "
               "the model's training data ({:.4f} A); the model is not valid there", style_label(),
               std::sqrt(all_closest), min_distance);
  if (committee_due) committee_step_on_device(nlocal, nall);

  double **f = atom->f;
  for (int n = 0; n < nall; ++n)
    if (D.species_host(n) >= 0)
      for (int a = 0; a < 3; ++a) f[n][a] += D.f_host(n, a);
  const auto &res = D.results;
  if (eflag_global) eng_vdwl += res.energy;
  if (vflag_global)
    for (int a = 0; a < 6; ++a) virial[a] += res.virial[a];
  if (eflag_atom) {
    const auto e = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), res.eatom);
    for (int i = 0; i < nlocal; ++i) eatom[i] += e(i);
  }
  if (vflag_atom) {
    const auto v = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), res.vatom);
    for (int n = 0; n < nall; ++n)
      for (int a = 0; a < 6; ++a) vatom[n][a] += v(n, a);
  }
}

void PairBatmobile::committee_step_on_device(int nlocal, int nall)
{
  DeviceImpl &D = *device;
  batmobile_pair::collect_committee(D, single_precision, committee->members(), nall, D.species_host,
                                    committee_forces, committee_virials, error, style_label(),
                                    committee->member_paths());
  committee_model_atom.assign(nlocal, 0);
  for (int i = 0; i < nlocal; ++i) committee_model_atom[i] = D.species_host(i) >= 0;
  committee_finish(nlocal);
}
