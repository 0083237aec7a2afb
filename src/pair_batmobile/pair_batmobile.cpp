// pair_style batmobile: LAMMPS glue around the Kokkos C++ model (src/model). See pair_batmobile.h.
#include "pair_batmobile.h"
#include "lammps_compat.h"
#include "pair_batmobile_common.h"
#include "pair_batmobile_exchange.h"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "model/model.hpp"
#include "model/model_file.hpp"
#include "neigh_list.h"
#include "neigh_request.h"
#include "neighbor.h"
#include "lammps.h"
#include "update.h"

using namespace LAMMPS_NS;

namespace {
using HostExec = Kokkos::DefaultHostExecutionSpace;

template <class T>
using LammpsExchange = batmobile_pair::LammpsPairExchange<T, HostExec>;

bool g_we_initialized_kokkos = false;
// Without `-k on` LAMMPS leaves Kokkos uninitialised; the model still runs on the host execution space, or on this
// node's GPU (ranks of a node take its GPUs in turn) where the styles were built for CUDA.
void ensure_kokkos(LAMMPS *lmp, const char *style)
{
  if (Kokkos::is_initialized()) return;
  Kokkos::InitializationSettings settings;
  if (PairBatmobile::gpu_build()) {
    // (Kokkos initialises its GPU back-end either way and would abort without one)
    const int gpus = PairBatmobile::gpu_count();
    if (gpus < 1)
      lmp->error->one(FLERR, "pair_style {}: these styles were built for CUDA, but this process sees no GPU; on "
                      "machines without one use a CPU build (scripts/build_lammps.sh --lammps 2025)", style);
    int local_rank = 0;
#if !defined(MPI_STUBS)
    MPI_Comm node;
    MPI_Comm_split_type(lmp->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
#endif
    settings.set_device_id(local_rank % gpus);
  }
  Kokkos::initialize(settings);
  g_we_initialized_kokkos = true;
  std::atexit([] {
    if (g_we_initialized_kokkos && Kokkos::is_initialized()) Kokkos::finalize();
  });
}
}    // namespace

struct PairBatmobile::Impl {
  std::unique_ptr<batmobile::Model<double, HostExec>> model_d;
  std::unique_ptr<batmobile::Model<float, HostExec>> model_f;
  // committee members 2..K (pair_batmobile_committee.h), in the first model's precision
  std::vector<std::unique_ptr<batmobile::Model<double, HostExec>>> members_d;
  std::vector<std::unique_ptr<batmobile::Model<float, HostExec>>> members_f;
  batmobile::Results<HostExec> member_results;
  std::unique_ptr<LammpsExchange<double>> exchange_d;
  std::unique_ptr<LammpsExchange<float>> exchange_f;
  batmobile::Graph<HostExec> graph;
  batmobile::Results<HostExec> results;
  std::vector<int> count;
};

PairBatmobile::PairBatmobile(LAMMPS *lmp) : Pair(lmp), impl(new Impl), committee(new BatmobileCommittee(lmp))
{
  restartinfo = 0;
  // one pair_coeff * * call maps all types; LAMMPS's own check of that (one_coeff = 1) only says "Incorrect args",
  // coeff() says what is expected
  one_coeff = 0;
  manybody_flag = 1;
  single_enable = 0;
  no_virial_fdotr_compute = 1;    // the virial comes from per-edge tallies
  centroidstressflag = CENTROID_NOTAVAIL;
}

PairBatmobile::~PairBatmobile()
{
  impl.reset();
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
}

void PairBatmobile::allocate()
{
  allocated = 1;
  const int n = atom->ntypes;
  memory->create(setflag, n + 1, n + 1, "pair:setflag");
  memory->create(cutsq, n + 1, n + 1, "pair:cutsq");
  for (int i = 1; i <= n; i++)
    for (int j = i; j <= n; j++) setflag[i][j] = 0;
}

void PairBatmobile::settings(int narg, char **arg)
{
  reset_settings();
  int iarg = 0;
  int precision = -1;  // 0 double, 1 single, 2 mixed; -1: not given
  while (iarg < narg) {
    if (strcmp(arg[iarg], "precision") == 0) {
      precision = keyword_choice(narg - iarg, arg + iarg, {"double", "single", "mixed"});
      iarg += 2;
    } else if (strcmp(arg[iarg], "kernels") == 0) {
      kernels_choice = keyword_choice(narg - iarg, arg + iarg, {"fused", "reference"});
      iarg += 2;
    } else if (strcmp(arg[iarg], "device") == 0 && has_device_keyword()) {
      device_cuda = keyword_choice(narg - iarg, arg + iarg, {"cpu", "cuda"}) == 1;
      if (device_cuda && !gpu_build())
        error->all(FLERR, "pair_style {}: 'device cuda' needs the styles built for CUDA (scripts/build_lammps.sh "
                   "--lammps 2025 --backend cuda --plugin-only); this build runs the model on the CPU only",
                   style_label());
      iarg += 2;
    } else if (const int used = committee->settings_keyword(narg - iarg, arg + iarg, style_label())) {
      iarg += used;
    } else if (const int used = settings_keyword(narg - iarg, arg + iarg)) {
      iarg += used;
    } else {
      error->all(FLERR, "pair_style {}: unknown keyword '{}' (usage: {})", style_label(), arg[iarg],
                 settings_usage());
    }
  }
  // (after all keywords: `device cuda` may follow `precision`)
  if (precision < 0) precision = runs_on_gpu() ? 2 : 0;
  single_precision = precision >= 1;
  mixed_precision = precision == 2;
}

void PairBatmobile::reset_settings()
{
  kernels_choice = -1;
  device_cuda = false;
  committee->reset_settings(style_label());
}

int PairBatmobile::keyword_choice(int narg, char **arg, const std::vector<std::string> &values)
{
  std::string choices;
  for (size_t k = 0; k < values.size(); ++k)
    choices += (k == 0 ? "" : k + 1 == values.size() ? " or " : ", ") + values[k];
  if (narg < 2) error->all(FLERR, "pair_style {}: '{}' needs {}", style_label(), arg[0], choices);
  for (size_t k = 0; k < values.size(); ++k)
    if (values[k] == arg[1]) return static_cast<int>(k);
  error->all(FLERR, "pair_style {}: unknown {} '{}' (use {})", style_label(), arg[0], arg[1], choices);
  return -1;
}

const char *PairBatmobile::settings_usage() const
{
  return "pair_style batmobile [precision double|single|mixed] [kernels fused|reference] [device cpu|cuda] [out_freq N] "
         "[out_file FILE]";
}

std::string PairBatmobile::launch_settings() const
{
  const char *device_word = !has_device_keyword() ? "" : device_cuda ? ", device cuda" : ", device cpu";
  return fmt::format("precision {}, kernels {}{}{}", mixed_precision ? "mixed" : single_precision ? "single" : "double",
                     kernels_choice == 1 ? "reference" : "fused", device_word, committee->settings_line());
}

void PairBatmobile::load_model(const std::string &path)
{
  ensure_kokkos(lmp, style_label());
  batmobile::ModelFile mf;
  try {
    mf = batmobile::load_model_file(path);
  } catch (const std::exception &e) {
    error->all(FLERR, "pair_coeff {}: {}", style_label(), e.what());
  }
  report_model_file(mf, "model file");
  model_path = path;
  r_c = mf.hyper.r_c;
  min_distance = mf.hyper.min_distance;
  feature_width = mf.hyper.K() * mf.hyper.C;
  comm_forward = comm_reverse = feature_width;
  hyper = mf.hyper;
  try {
    build_models(mf);
  } catch (const std::exception &e) {
    error->all(FLERR, "pair_coeff {}: cannot set up the model from '{}': {}", style_label(), path, e.what());
  }
  type_species.assign(atom->ntypes + 1, -1);
}

void PairBatmobile::report_model_file(const batmobile::ModelFile &mf, const char *role)
{
  if (comm->me != 0) return;
  std::string checked;
  switch (mf.checksum) {
    case batmobile::ChecksumState::kVerified:
      checked = "model checksum verified (header and weights, sha256 " + mf.model_sha256.substr(0, 16) + ")";
      break;
    case batmobile::ChecksumState::kWeightsVerified:
      checked = "weights checksum verified (sha256 " + mf.tensors_sha256.substr(0, 16) + "), header not covered";
      break;
    default:
      checked = "no checksum";
  }
  std::string species;
  for (const auto &s : mf.hyper.species) species += (species.empty() ? "" : " ") + s;
  utils::logmesg(lmp,
                 "pair_coeff {}: {} '{}': {}; format version {}, written by batmobile {}; species {}, cutoff {} A; "
                 "L {}, C {}, T {}, correlation {}\n",
                 style_label(), role, mf.path, checked, mf.hyper.version,
                 mf.hyper.batmobile_version.empty() ? "(version not recorded)" : mf.hyper.batmobile_version, species,
                 mf.hyper.r_c, mf.hyper.L, mf.hyper.C, mf.hyper.T, mf.hyper.correlation);
  if (mf.hyper.version < batmobile::kHeaderChecksumVersion)
    error->warning(FLERR, "pair_coeff {}: {} '{}' is in model format version {}, {}, so {} would go unnoticed; upgrade "
                   "it with: python -m batmobile.export --upgrade {} NEW.pt", style_label(), role, mf.path,
                   mf.hyper.version,
                   mf.checksum == batmobile::ChecksumState::kWeightsVerified
                       ? "whose checksum covers the weights but not the header (species, cutoff, hyperparameters)"
                       : "without a checksum",
                   mf.checksum == batmobile::ChecksumState::kWeightsVerified
                       ? "an altered header"
                       : "corrupted weights or an altered header",
                   mf.path);
}

void PairBatmobile::build_models(const batmobile::ModelFile &mf)
{
  impl->model_d.reset();
  impl->model_f.reset();
  device.reset();
  if (device_cuda) {
    build_device_models(mf);
    return;
  }
  const auto backend = batmobile_pair::edge_backend(kernels_choice);
  if (mixed_precision && comm->me == 0)
    error->warning(FLERR, "pair_style {}: precision mixed needs the f16 tensor cores of a GPU; on the CPU it runs as "
                   "precision single", style_label());
  if (single_precision)
    impl->model_f = std::make_unique<batmobile::Model<float, HostExec>>(mf, backend,
                                                                        batmobile_pair::precision_options(mixed_precision));
  else
    impl->model_d = std::make_unique<batmobile::Model<double, HostExec>>(mf, backend);
  impl->exchange_d = std::make_unique<LammpsExchange<double>>(this, lmp);
  impl->exchange_f = std::make_unique<LammpsExchange<float>>(this, lmp);
}

void PairBatmobile::load_members(const std::vector<std::string> &paths)
{
  committee->set_members(paths);
  auto words = [](const std::vector<std::string> &v) {
    std::string out;
    for (const auto &w : v) out += (out.empty() ? "" : " ") + w;
    return out;
  };
  std::vector<batmobile::ModelFile> files;
  for (const std::string &path : paths) {
    batmobile::ModelFile mf;
    try {
      mf = batmobile::load_model_file(path);
    } catch (const std::exception &e) {
      error->all(FLERR, "pair_coeff {}: committee member '{}': {}", style_label(), path, e.what());
    }
    report_model_file(mf, "committee member");
    if (mf.hyper.species != hyper.species)
      error->all(FLERR, "pair_coeff {}: committee member '{}' has species {} but the first model '{}' has {}; the "
                 "members of a committee must share their species and their order", style_label(), path,
                 words(mf.hyper.species), model_path, words(hyper.species));
    if (mf.hyper.r_c != hyper.r_c)
      error->all(FLERR, "pair_coeff {}: committee member '{}' has cutoff {} A but the first model '{}' has {} A; the "
                 "members of a committee must share their cutoff", style_label(), path, mf.hyper.r_c, model_path,
                 hyper.r_c);
    // the exchange buffers hold the widest member's features
    comm_forward = comm_reverse = std::max(comm_forward, mf.hyper.K() * mf.hyper.C);
    files.push_back(std::move(mf));
  }
  if (!files.empty() && comm_reverse < 3 * (1 + static_cast<int>(files.size())))
    error->all(FLERR, "pair_coeff {}: a committee of {} models is larger than this build supports ({})", style_label(),
               files.size() + 1, comm_reverse / 3);
  try {
    build_members(files);
  } catch (const std::exception &e) {
    error->all(FLERR, "pair_coeff {}: cannot set up the committee: {}", style_label(), e.what());
  }
}

void PairBatmobile::build_members(const std::vector<batmobile::ModelFile> &files)
{
  if (device) {
    build_device_members(files);
    return;
  }
  batmobile_pair::build_members<HostExec>(*impl, files, single_precision, batmobile_pair::edge_backend(kernels_choice),
                                          batmobile_pair::precision_options(mixed_precision));
}

void PairBatmobile::coeff(int narg, char **arg)
{
  if (!allocated) allocate();
  const int ntypes = atom->ntypes;
  const std::string usage = fmt::format("use 'pair_coeff * * model.pt' followed by one model species name (or NULL) "
                                        "per LAMMPS atom type, {} names for this system", ntypes);
  if (narg < 2 || strcmp(arg[0], "*") != 0 || strcmp(arg[1], "*") != 0)
    error->all(FLERR, "pair_coeff {}: one model covers all type pairs: {}; got type ranges '{} {}'", style_label(),
               usage, narg > 0 ? arg[0] : "", narg > 1 ? arg[1] : "");
  // '* *', K >= 1 model files (several: a committee), then one name per atom type
  const int n_models = narg - 2 - ntypes;
  if (n_models < 1)
    error->all(FLERR, "pair_coeff {}: expected '* * model.pt' followed by {} species names (one per atom type, NULL "
               "to skip), got {} names", style_label(), ntypes, std::max(narg - 3, 0));
  // a word taken for a committee member that names no file is more likely one species name too many
  for (int k = 3; k < 2 + n_models; ++k)
    if (!std::ifstream(arg[k]).good())
      error->all(FLERR, "pair_coeff {}: expected '* * model.pt' followed by {} species names (one per atom type, NULL "
                 "to skip; several model files before them form a committee), got {} names: '{}' is not a readable "
                 "model file", style_label(), ntypes, narg - 3, arg[k]);
  load_model(arg[2]);
  load_members(std::vector<std::string>(arg + 3, arg + 2 + n_models));
  std::vector<std::string> names;
  for (int t = 1; t <= ntypes; ++t) names.emplace_back(arg[1 + n_models + t]);
  std::vector<int> species;
  try {
    species = batmobile::map_species(hyper, names);
  } catch (const std::exception &e) {
    error->all(FLERR, "pair_coeff {}: {} in model file '{}'", style_label(), e.what(), model_path);
  }
  for (int t = 1; t <= ntypes; ++t) type_species[t] = species[t - 1];
  int count = 0;
  for (int i = 1; i <= ntypes; ++i)
    for (int j = i; j <= ntypes; ++j) {
      setflag[i][j] = type_species[i] >= 0 && type_species[j] >= 0;
      count += setflag[i][j];
    }
  if (count == 0) error->all(FLERR, "pair_coeff {}: no atom type is mapped to a model species", style_label());
}

void PairBatmobile::init_style()
{
  check_settings();
  launch_logged = false;
  batmobile_compat::request_full_list(neighbor, this, instance_me);
}

void PairBatmobile::check_settings()
{
  if (model_path.empty()) error->all(FLERR, "pair_style {}: pair_coeff has not been given", style_label());
  if (strcmp(update->unit_style, "metal") != 0)
    error->all(FLERR, "pair_style {} needs 'units metal' (the model is in eV and Angstrom), got units {}",
               style_label(), update->unit_style);
  if (force->newton_pair == 0 && !newton_off_ok())
    error->all(FLERR, "pair_style {} needs 'newton on' ({} with newton off on one MPI rank with ghost_comm device "
               "and kernels fused, the defaults, where the model folds the periodic images' forces itself)",
               style_label(), has_device_keyword() ? "batmobile/kk also runs" : "it runs");
  if (atom->tag_enable == 0) error->all(FLERR, "pair_style {} needs atom IDs", style_label());
  check_box();
  committee->init(style_label());
  // Under pair_style hybrid the top-level style took its comm sizes at pair_style time, before pair_coeff
  // told us K*C; Comm::init sizes the buffers from the top-level style, which comes after this.
  if (force->pair && force->pair != this) {
    force->pair->comm_forward = std::max(force->pair->comm_forward, comm_forward);
    force->pair->comm_reverse = std::max(force->pair->comm_reverse, comm_reverse);
  }
}

double PairBatmobile::init_one(int, int)
{
  return r_c;
}

void PairBatmobile::check_box()
{
  // Perpendicular thickness of the periodic cell along each lattice direction.
  const double *h = domain->h;
  const double a[3] = {h[0], 0.0, 0.0}, b[3] = {h[5], h[1], 0.0}, c[3] = {h[4], h[3], h[2]};
  auto cross_norm = [](const double *u, const double *v) {
    const double w[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
    return std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
  };
  const double vol = h[0] * h[1] * h[2];
  const double thick[3] = {vol / cross_norm(b, c), vol / cross_norm(c, a), vol / cross_norm(a, b)};
  const int periodic[3] = {domain->xperiodic, domain->yperiodic, domain->zperiodic};
  for (int d = 0; d < 3; ++d)
    if (periodic[d] && thick[d] < r_c)
      error->all(FLERR, "pair_style {}: periodic box thickness {:.4f} A along {} is thinner than the model "
                 "cutoff {:.4f} A; replicate the system", style_label(), thick[d], "xyz"[d], r_c);
}

void PairBatmobile::compute(int eflag, int vflag)
{
  ev_init(eflag, vflag);
  if (domain->box_change) check_box();
  const int nlocal = atom->nlocal, nall = atom->nlocal + atom->nghost;
  if (device_cuda != static_cast<bool>(device))
    error->all(FLERR, "pair_style {}: 'device' changed after pair_coeff; give pair_coeff again", style_label());
  if (device) {
    compute_device(nlocal, nall);
    return;
  }
  double **x = atom->x;
  double **f = atom->f;
  const int *type = atom->type;
  const double rcsq = r_c * r_c;
  const double dmin = 0.5 * min_distance;

  Impl &I = *impl;
  auto &g = I.graph;
  const auto grow = batmobile_pair::grow_capacity;
  batmobile_pair::reserve_atoms(I, nlocal, nall);
  if (I.results.f.extent(0) < static_cast<size_t>(nall))
    I.results.f = decltype(I.results.f)("bm_f", grow(nall));
  for (int n = 0; n < nall; ++n) {
    for (int a = 0; a < 3; ++a) g.x(n, a) = x[n][a];
    g.species(n) = type_species[type[n]];
  }

  // Receiver-grouped edges from the full list, filtered to 0 < r < r_c and to model atoms.
  const int inum = list->inum;
  const int *ilist = list->ilist;
  const int *numneigh = list->numneigh;
  int **firstneigh = list->firstneigh;
  I.count.assign(nlocal + 1, 0);
  int too_close = 0;
  double closest = 1e300;
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    if (g.species(i) < 0) continue;
    for (int jj = 0; jj < numneigh[i]; ++jj) {
      const int j = firstneigh[i][jj] & NEIGHMASK;
      if (g.species(j) < 0) continue;
      const double dx = x[j][0] - x[i][0], dy = x[j][1] - x[i][1], dz = x[j][2] - x[i][2];
      const double rsq = dx * dx + dy * dy + dz * dz;
      if (rsq < rcsq && rsq > 0.0) {
        ++I.count[i + 1];
        if (rsq < dmin * dmin) {
          too_close = 1;
          closest = std::min(closest, std::sqrt(rsq));
        }
      }
    }
  }
  int any_too_close = 0;
  MPI_Allreduce(&too_close, &any_too_close, 1, MPI_INT, MPI_MAX, world);
  if (any_too_close) {
    double all_closest = closest;
    MPI_Allreduce(&closest, &all_closest, 1, MPI_DOUBLE, MPI_MIN, world);
    error->all(FLERR, "pair_style {}: atoms at distance {:.4f} A, closer than half the smallest distance in "
               "the model's training data ({:.4f} A); the model is not valid there", style_label(), all_closest,
               min_distance);
  }
  for (int i = 0; i < nlocal; ++i) I.count[i + 1] += I.count[i];
  const int n_edges = I.count[nlocal];
  if (g.senders.extent(0) < static_cast<size_t>(n_edges)) g.senders = decltype(g.senders)("bm_senders", grow(n_edges));
  for (int i = 0; i <= nlocal; ++i) g.recv_offsets(i) = I.count[i];
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    if (g.species(i) < 0) continue;
    int e = I.count[i];
    for (int jj = 0; jj < numneigh[i]; ++jj) {
      const int j = firstneigh[i][jj] & NEIGHMASK;
      if (g.species(j) < 0) continue;
      const double dx = x[j][0] - x[i][0], dy = x[j][1] - x[i][1], dz = x[j][2] - x[i][2];
      const double rsq = dx * dx + dy * dy + dz * dz;
      if (rsq < rcsq && rsq > 0.0) g.senders(e++) = j;
    }
  }
  g.n_local = nlocal;
  g.n_all = nall;
  g.n_edges = n_edges;  // (known here: the model need not read it back)

  const bool committee_due = committee->due(update->ntimestep);
  batmobile_pair::run_model(I, single_precision, eflag_global, vflag_global || committee_due, eflag_atom, vflag_atom,
                            nlocal, nall, error, style_label());
  batmobile_pair::log_launch_once(I, single_precision, nlocal, lmp, launch_logged, style_label(), launch_settings());
  auto &res = I.results;
  if (committee_due) committee_step(nlocal, nall);

  for (int n = 0; n < nall; ++n)
    if (g.species(n) >= 0)
      for (int a = 0; a < 3; ++a) f[n][a] += res.f(n, a);
  if (eflag_global) eng_vdwl += res.energy;
  if (eflag_atom)
    for (int i = 0; i < nlocal; ++i) eatom[i] += res.eatom(i);
  if (vflag_global)
    for (int a = 0; a < 6; ++a) virial[a] += res.virial[a];
  if (vflag_atom)
    for (int n = 0; n < nall; ++n)
      for (int a = 0; a < 6; ++a) vatom[n][a] += res.vatom(n, a);
}

void PairBatmobile::committee_step(int nlocal, int nall)
{
  Impl &I = *impl;
  batmobile_pair::collect_committee(I, single_precision, committee->members(), nall, I.graph.species,
                                    committee_forces, committee_virials, error, style_label(),
                                    committee->member_paths());
  committee_model_atom.assign(nlocal, 0);
  for (int i = 0; i < nlocal; ++i) committee_model_atom[i] = I.graph.species(i) >= 0;
  committee_finish(nlocal);
}

void PairBatmobile::committee_finish(int nlocal)
{
  // fold the ghosts' member forces onto their owners, as LAMMPS does for the dynamics' forces (ghost rows that the
  // model already folded are zero and add nothing)
  comm_target.point_to(committee_forces.data(), 3 * committee->members());
  batmobile_compat::reverse_comm(comm, this);
  committee->write_step(update->ntimestep, committee_forces, committee_virials, committee_model_atom, nlocal);
}

int PairBatmobile::pack_forward_comm(int n, int *list, double *buf, int, int *)
{
  const int w = comm_target.width;
  int m = 0;
  for (int q = 0; q < n; ++q) {
    const int j = list[q];
    if (comm_target.d)
      for (int x = 0; x < w; ++x) buf[m++] = comm_target.d[(size_t) j * w + x];
    else
      for (int x = 0; x < w; ++x) buf[m++] = comm_target.f[(size_t) j * w + x];
  }
  return m;
}

void PairBatmobile::unpack_forward_comm(int n, int first, double *buf)
{
  const int w = comm_target.width;
  int m = 0;
  for (int q = 0; q < n; ++q) {
    const size_t row = (size_t) (first + q) * w;
    if (comm_target.d)
      for (int x = 0; x < w; ++x) comm_target.d[row + x] = buf[m++];
    else
      for (int x = 0; x < w; ++x) comm_target.f[row + x] = static_cast<float>(buf[m++]);
  }
}

int PairBatmobile::pack_reverse_comm(int n, int first, double *buf)
{
  const int w = comm_target.width;
  int m = 0;
  for (int q = 0; q < n; ++q) {
    const size_t row = (size_t) (first + q) * w;
    if (comm_target.d)
      for (int x = 0; x < w; ++x) buf[m++] = comm_target.d[row + x];
    else
      for (int x = 0; x < w; ++x) buf[m++] = comm_target.f[row + x];
  }
  return m;
}

void PairBatmobile::unpack_reverse_comm(int n, int *list, double *buf)
{
  const int w = comm_target.width;
  int m = 0;
  for (int q = 0; q < n; ++q) {
    const size_t row = (size_t) list[q] * w;
    if (comm_target.d)
      for (int x = 0; x < w; ++x) comm_target.d[row + x] += buf[m++];
    else
      for (int x = 0; x < w; ++x) comm_target.f[row + x] += static_cast<float>(buf[m++]);
  }
}
