/* -*- c++ -*- ----------------------------------------------------------
   Per-step code shared by pair_style batmobile (host) and batmobile/kk (Kokkos device): growth policy of
   the reused buffers and the model call. No style macro here: not a style header.
------------------------------------------------------------------------- */
#ifndef LMP_PAIR_BATMOBILE_COMMON_H
#define LMP_PAIR_BATMOBILE_COMMON_H

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "atom.h"
#include "comm.h"
#include "error.h"
#include "lammps.h"
#include "model/model.hpp"
#include "model/version.hpp"
#include "utils.h"

namespace LAMMPS_NS {
namespace batmobile_pair {

// The model backend of `kernels fused|reference` (kernels_choice 0 | 1; -1: not given): fused unless the reference is
// asked for, on every back-end (the fused kernels are the faster of the two on CPUs too).
inline batmobile::EdgeBackend edge_backend(int kernels_choice)
{
  return kernels_choice == 1 ? batmobile::EdgeBackend::Reference : batmobile::EdgeBackend::Fused;
}

// The model options of `precision mixed` (mixed = true: the radial MLP's GEMM with f16 operands on tensor cores,
// radial mode 4) or of double / single (the defaults).
inline batmobile::ModelOptions precision_options(bool mixed)
{
  batmobile::ModelOptions o;
  if (mixed) o.radial_mode = batmobile::RadialMode::kTensorCoreF16;
  return o;
}

// Buffers grow with 20% headroom so that small changes in atom or edge counts do not reallocate every step.
inline size_t grow_capacity(size_t n) { return n + n / 5 + 16; }

// Graph buffers for this step: positions and species of nall atoms, offsets of nlocal receivers. Returns true
// when the offsets were reallocated (a style sizes its own per-receiver arrays along with them).
template <class ImplT>
bool reserve_atoms(ImplT &I, int nlocal, int nall)
{
  auto &g = I.graph;
  if (g.x.extent(0) < static_cast<size_t>(nall)) {
    g.x = decltype(g.x)("bm_x", grow_capacity(nall));
    g.species = decltype(g.species)("bm_species", grow_capacity(nall));
  }
  if (g.recv_offsets.extent(0) >= static_cast<size_t>(nlocal + 1)) return false;
  g.recv_offsets = decltype(g.recv_offsets)("bm_roff", grow_capacity(nlocal + 1));
  return true;
}

// On one rank every ghost n (nlocal <= n < nall) is a periodic image of the owned atom with the same tag: that atom's
// index for each ghost, in ghost order (a LAMMPS error naming style_name where a ghost has none).
inline std::vector<int> image_owners(const Atom *atom, int nlocal, int nall, Error *error, const char *style_name)
{
  const tagint *tag = atom->tag;
  std::unordered_map<tagint, int> owned;
  owned.reserve(2 * static_cast<size_t>(nlocal));
  for (int i = 0; i < nlocal; ++i) owned[tag[i]] = i;
  std::vector<int> owner(nall - nlocal);
  for (int n = nlocal; n < nall; ++n) {
    auto it = owned.find(tag[n]);
    if (it == owned.end())
      error->one(FLERR, "pair_style {}: ghost atom with tag {} has no owned atom on this single rank", style_name,
                 tag[n]);
    owner[n - nlocal] = it->second;
  }
  return owner;
}

// The periodic-image exchange of this step's ghost owners (image_owners): the existing one updated in place (its
// arrays reused, its upload queued), else a new one. ExchangeT: an IndexMapGhostExchange.
template <class ExchangeT>
void set_image_exchange(std::unique_ptr<ExchangeT> &images, int nlocal, const std::vector<int> &owner)
{
  if (images)
    images->update(nlocal, owner);
  else
    images = std::make_unique<ExchangeT>(nlocal, owner);
}

// f(model, exchange) with the model (a pointer, null before it is built) and the ghost-exchange set of the chosen
// precision; returns what f returns. ImplT as run_model's.
template <class ImplT, class F>
auto with_model(ImplT &I, bool single_precision, F &&f) -> decltype(f(I.model_d.get(), I.exchange_d))
{
  if (single_precision) return f(I.model_f.get(), I.exchange_f);
  return f(I.model_d.get(), I.exchange_d);
}

// Sizes the per-atom outputs for this step (allocated views tell the model to fill them, empty ones to skip
// them), then runs the model in the chosen precision. Model errors become a LAMMPS error on this rank:
// "pair_style <style_name>: <what>". ImplT is the style's implementation struct (model_d/model_f,
// exchange_d/exchange_f, graph, results).
template <class ImplT>
void run_model(ImplT &I, bool single_precision, int eflag_global, int vflag_global, int eflag_atom, int vflag_atom,
               int nlocal, int nall, Error *error, const char *style_name)
{
  auto &res = I.results;
  // the model waits for its energy / virial sums only on the steps that need them (thermo, virial-using fixes)
  res.want_energy = eflag_global != 0;
  res.want_virial = vflag_global != 0;
  if (eflag_atom) {
    if (res.eatom.extent(0) < static_cast<size_t>(nlocal))
      res.eatom = decltype(res.eatom)("bm_eatom", grow_capacity(nlocal));
  } else {
    res.eatom = decltype(res.eatom)();
  }
  if (vflag_atom) {
    if (res.vatom.extent(0) < static_cast<size_t>(nall))
      res.vatom = decltype(res.vatom)("bm_vatom", grow_capacity(nall));
  } else {
    res.vatom = decltype(res.vatom)();
  }
  try {
    with_model(I, single_precision, [&](auto *model, auto &exchange) { model->compute(I.graph, exchange.get(), res); });
  } catch (const std::exception &e) {
    error->one(FLERR, "pair_style {}: {}", style_name, e.what());
  }
}

// Builds the committee's further members (members_d/f of ImplT, models on Exec) from their files, in the chosen
// precision.
template <class Exec, class ImplT>
void build_members(ImplT &I, const std::vector<batmobile::ModelFile> &files, bool single_precision,
                   batmobile::EdgeBackend backend, const batmobile::ModelOptions &options)
{
  I.members_d.clear();
  I.members_f.clear();
  for (const auto &mf : files) {
    if (single_precision)
      I.members_f.push_back(std::make_unique<batmobile::Model<float, Exec>>(mf, backend, options));
    else
      I.members_d.push_back(std::make_unique<batmobile::Model<double, Exec>>(mf, backend));
  }
}

// Stores committee member k's forces on model atoms (forces[(n * K + k) * 3 + a], host-accessible views of the species
// and forces of nall atoms) and its virial (virials[6 * k + v]) for the deviation output.
template <class SpeciesView, class ForceView>
void store_member_outputs(std::vector<double> &forces, std::vector<double> &virials, int K, int k, int nall,
                          const SpeciesView &species, const ForceView &f, const double *virial)
{
  for (int n = 0; n < nall; ++n)
    if (species(n) >= 0)
      for (int a = 0; a < 3; ++a) forces[((size_t) n * K + k) * 3 + a] = f(n, a);
  for (int v = 0; v < 6; ++v) virials[6 * k + v] = virial[v];
}

// Runs committee member k (>= 1: members_d/f[k - 1]) of a committee step on this step's graph into r, in the chosen
// precision; its errors become a LAMMPS error naming the member's file. ImplT as run_model's, plus members_d/f.
template <class ImplT, class ResultsT>
void run_member(ImplT &I, bool single_precision, int k, ResultsT &r, Error *error, const char *style_name,
                const std::string &path)
{
  try {
    if (single_precision)
      I.members_f[k - 1]->compute(I.graph, I.exchange_f.get(), r);
    else
      I.members_d[k - 1]->compute(I.graph, I.exchange_d.get(), r);
  } catch (const std::exception &e) {
    error->one(FLERR, "pair_style {}: committee member '{}': {}", style_name, path, e.what());
  }
}

// A committee step's outputs for the deviation (PairBatmobile::committee_finish): the first model's this step
// (I.results) and every further member's on the same graph (into I.member_results), forces of nall atoms
// (forces[(n * K + k) * 3 + a]) and virials (virials[6 * k + v]) copied to the host. species: a host-accessible
// view of the graph's species. ImplT as run_member's, plus member_results.
template <class ImplT, class SpeciesView>
void collect_committee(ImplT &I, bool single_precision, int K, int nall, const SpeciesView &species,
                       std::vector<double> &forces, std::vector<double> &virials, Error *error, const char *style_name,
                       const std::vector<std::string> &paths)
{
  forces.assign((size_t) nall * K * 3, 0.0);
  virials.assign((size_t) K * 6, 0.0);
  auto take = [&](int k, const auto &r) {
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), r.f);
    store_member_outputs(forces, virials, K, k, nall, species, h, r.virial);
  };
  take(0, I.results);
  auto &r = I.member_results;
  if (r.f.extent(0) < static_cast<size_t>(nall)) r.f = decltype(r.f)("bm_member_f", grow_capacity(nall));
  r.want_energy = false;
  r.want_virial = true;
  r.add_forces = false;
  for (int k = 1; k < K; ++k) {
    // ghost rows a model leaves alone (it folded them) must read zero in the fold of committee_finish
    Kokkos::deep_copy(r.f, 0.0);
    run_member(I, single_precision, k, r, error, style_name, paths[k - 1]);
    take(k, r);
  }
}

// Logs once per run (rank 0, for its own atoms; init_style re-arms `logged`) the style's settings in effect and how
// the model's edge kernels launch (Model::launch_summary):
// "pair_style <name>: <settings>; batmobile <version>; <launch summary>".
template <class ImplT>
void log_launch_once(ImplT &I, bool single_precision, int nlocal, LAMMPS *lmp, bool &logged, const char *style_name,
                     const std::string &settings)
{
  if (logged) return;
  logged = true;
  if (lmp->comm->me != 0) return;
  const std::string line =
      with_model(I, single_precision, [&](auto *model, auto &) { return model->launch_summary(nlocal); });
  utils::logmesg(lmp, std::string("pair_style ") + style_name + ": " + settings + "; batmobile " +
                          batmobile::package_version() + "; " + line + "\n");
}

}    // namespace batmobile_pair
}    // namespace LAMMPS_NS

#endif
