// C++ model vs the float64 PyTorch reference, finite differences, invariances, loader errors.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "model/fused_team_rule.hpp"
#include "model/graph_builder.hpp"
#include "model/model.hpp"
#include "model/model_file.hpp"
#include "model/sender_csr.hpp"
#include "model/version.hpp"

using namespace batmobile;
using Exec = Kokkos::DefaultExecutionSpace;

static std::string g_ref_dir;
// The options and the internal tuning every model of this suite is built with, unless a test picks its own (the
// CTest variants set them on the command line: --node-team N), and whether evaluate() hides the ghosts' image owners
// (--ungrouped-senders).
static ModelOptions g_options;
static impl::ModelTuning g_tuning;
static bool g_ungrouped_senders = false;

// g_tuning changed by set(tuning).
template <class Set>
static impl::ModelTuning tuning_with(Set set) {
  impl::ModelTuning t = g_tuning;
  set(t);
  return t;
}

// The periodic-image exchange as a multi-rank exchange looks to the model: ghosts without named image owners, so that
// the fused sender adjoint runs over all atoms incl. ghosts instead of grouping them by local atom.
template <class T>
class UnnamedImagesExchange : public GhostExchange<T, Exec> {
 public:
  using typename GhostExchange<T, Exec>::FeatureView;
  UnnamedImagesExchange(int n_local, const std::vector<int>& ghost_owner) : images_(n_local, ghost_owner) {}
  void forward(FeatureView h) override { images_.forward(h); }
  void reverse(FeatureView dh) override { images_.reverse(dh); }

 protected:
  IndexMapGhostExchange<T, Exec> images_;
};

// The periodic-image exchange naming the ghosts' image owners but not each atom's images (GhostExchange::image_lists):
// the model then copies the ghost rows with forward() instead of writing them in the node kernel.
template <class T>
class OwnersOnlyExchange : public UnnamedImagesExchange<T> {
 public:
  using UnnamedImagesExchange<T>::UnnamedImagesExchange;
  Kokkos::View<const int*, Exec> image_owners() const override { return this->images_.image_owners(); }
};

struct Reference {
  std::map<std::string, std::vector<double>> v;
  std::vector<double> pos, cell;
  std::vector<int> species;
  bool pbc[3];
};

static Reference read_reference(const std::string& name) {
  Reference r;
  std::ifstream in(g_ref_dir + "/ref_" + name + ".txt");
  if (!in) throw std::runtime_error("cannot read reference " + name);
  std::string key;
  size_t n;
  while (in >> key >> n) {
    std::vector<double> vals(n);
    for (auto& x : vals) in >> x;
    r.v[key] = vals;
  }
  r.pos = r.v.at("positions");
  r.cell = r.v.at("cell");
  for (double s : r.v.at("species")) r.species.push_back(static_cast<int>(s));
  for (int a = 0; a < 3; ++a) r.pbc[a] = r.v.at("pbc")[a] != 0;
  return r;
}

struct Evaluation {
  double energy;
  double virial[6];
  std::vector<double> eatom, forces, vatom;  // owners only (ghost contributions folded)
  double ghost_abs = 0;  // sum of |f| and |vatom| over the ghost rows as the model returned them (before folding)
};

// want: Results::want_energy and want_virial; edges_known: the graph passes its edge count (Graph::n_edges);
// name_images: the exchange names the ghosts' image owners (default: unless the suite runs --ungrouped-senders);
// in_range: the graph vouches for its sender indices (Graph::senders_in_range, as LAMMPS's neighbour lists do);
// list_images: a naming exchange also lists each atom's images (GhostExchange::image_lists).
template <class T>
static Evaluation evaluate(Model<T, Exec>& model, const std::vector<double>& pos, const std::vector<int>& species,
                           const std::vector<double>& cell, const bool* pbc, bool want = true,
                           bool edges_known = false, std::optional<bool> name_images = std::nullopt,
                           bool in_range = false, bool list_images = true) {
  HostGraph hg = build_periodic_graph(pos, species, cell.data(), pbc, model.hyper().r_c);
  Graph<Exec> g = upload_graph<Exec>(hg);
  if (edges_known) g.n_edges = int(hg.senders.size());
  g.senders_in_range = in_range;
  IndexMapGhostExchange<T, Exec> named(hg.n_local, hg.ghost_owner);
  UnnamedImagesExchange<T> unnamed(hg.n_local, hg.ghost_owner);
  OwnersOnlyExchange<T> owners_only(hg.n_local, hg.ghost_owner);
  GhostExchange<T, Exec>& exchange = !name_images.value_or(!g_ungrouped_senders)
                                         ? static_cast<GhostExchange<T, Exec>&>(unnamed)
                                         : list_images ? static_cast<GhostExchange<T, Exec>&>(named) : owners_only;
  Results<Exec> res;
  res.want_energy = res.want_virial = want;
  res.f = decltype(res.f)("f", hg.n_all);
  res.eatom = decltype(res.eatom)("eatom", hg.n_local);
  res.vatom = decltype(res.vatom)("vatom", hg.n_all);
  model.compute(g, &exchange, res);
  auto f = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), res.f);
  auto ea = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), res.eatom);
  auto va = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), res.vatom);
  Evaluation ev;
  ev.energy = res.energy;
  for (int a = 0; a < 6; ++a) ev.virial[a] = res.virial[a];
  ev.forces.assign(3 * hg.n_local, 0.0);
  ev.vatom.assign(6 * hg.n_local, 0.0);
  for (int n = 0; n < hg.n_all; ++n) {
    const int owner = n < hg.n_local ? n : hg.ghost_owner[n - hg.n_local];
    for (int a = 0; a < 3; ++a) ev.forces[3 * owner + a] += f(n, a);
    for (int a = 0; a < 6; ++a) ev.vatom[6 * owner + a] += va(n, a);
    if (n >= hg.n_local) {
      for (int a = 0; a < 3; ++a) ev.ghost_abs += std::fabs(f(n, a));
      for (int a = 0; a < 6; ++a) ev.ghost_abs += std::fabs(va(n, a));
    }
  }
  for (int i = 0; i < hg.n_local; ++i) ev.eatom.push_back(ea(i));
  return ev;
}

static double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / std::max(den, 1e-300);
}

static ModelFile load(const std::string& name = "model_double.pt") { return load_model_file(g_ref_dir + "/" + name); }

template <class T>
static void compare_with_reference(const std::string& conf, double tol, EdgeBackend backend,
                                   const std::string& model_file = "model_double.pt") {
  Model<T, Exec> model(load(model_file), backend, g_options, g_tuning);
  Reference r = read_reference(conf);
  Evaluation ev = evaluate(model, r.pos, r.species, r.cell, r.pbc);
  const double E = r.v.at("energy")[0];
  EXPECT_LE(std::fabs(ev.energy - E) / std::fabs(E), tol) << conf << " energy " << ev.energy << " vs " << E;
  EXPECT_LE(rel_err(ev.eatom, r.v.at("atomic_energies")), tol) << conf;
  EXPECT_LE(rel_err(ev.forces, r.v.at("forces")), tol) << conf;
  EXPECT_LE(rel_err(std::vector<double>(ev.virial, ev.virial + 6), r.v.at("virial")), tol) << conf;
  // both backends tally the symmetrised edge virial -(r (x) g + g (x) r)/2, half per atom: all six per atom
  EXPECT_LE(rel_err(ev.vatom, r.v.at("atomic_virial")), tol) << conf;
  for (int a = 0; a < 6; ++a) {
    double sum = 0;
    for (size_t n = 0; n < ev.vatom.size() / 6; ++n) sum += ev.vatom[6 * n + a];
    EXPECT_NEAR(sum, ev.virial[a], tol * std::max(1.0, std::fabs(ev.virial[a]))) << conf << " vatom sum " << a;
  }
  double sum = 0;
  for (double e : ev.eatom) sum += e;
  EXPECT_NEAR(sum, ev.energy, 1e-12 * std::fabs(ev.energy) + (sizeof(T) == 4 ? 1e-6 * std::fabs(ev.energy) : 0));
  std::printf("[%s %s %s] rel err: E %.2e  F %.2e  W %.2e  Watom %.2e\n", conf.c_str(), sizeof(T) == 8 ? "double" : "float",
              backend == EdgeBackend::Fused ? "fused" : "reference", std::fabs(ev.energy - E) / std::fabs(E), rel_err(ev.forces, r.v.at("forces")),
              rel_err(std::vector<double>(ev.virial, ev.virial + 6), r.v.at("virial")),
              rel_err(ev.vatom, r.v.at("atomic_virial")));
}

class ModelReference : public ::testing::TestWithParam<EdgeBackend> {};
TEST_P(ModelReference, PeriodicDouble) { compare_with_reference<double>("periodic", 1e-9, GetParam()); }
TEST_P(ModelReference, ClusterDouble) { compare_with_reference<double>("cluster", 1e-9, GetParam()); }
TEST_P(ModelReference, PeriodicFloat) { compare_with_reference<float>("periodic", 1e-4, GetParam()); }
TEST_P(ModelReference, ClusterFloat) { compare_with_reference<float>("cluster", 1e-4, GetParam()); }
// three layers (the other fixtures have two): every layer-to-layer hand-over of features and adjoints is exercised
TEST_P(ModelReference, ThreeLayersPeriodic) {
  compare_with_reference<double>("t3_periodic", 1e-9, GetParam(), "model_t3_double.pt");
  compare_with_reference<float>("t3_periodic", 1e-4, GetParam(), "model_t3_double.pt");
}
// one layer: the first layer is also the last (the fused backend runs it through the embedding-input kernels)
TEST_P(ModelReference, OneLayerPeriodic) {
  compare_with_reference<double>("t1_periodic", 1e-9, GetParam(), "model_t1_double.pt");
  compare_with_reference<float>("t1_periodic", 1e-4, GetParam(), "model_t1_double.pt");
}
// The model exported by the Python package (batmobile.export) and its fixture tool (python -m batmobile.fixtures).
TEST_P(ModelReference, PythonPackageFixturesDouble) {
  for (const char* c : {"py_water", "py_distorted", "py_isolated", "py_cutoff"})
    compare_with_reference<double>(c, 1e-9, GetParam(), "model_pyexport.pt");
}
TEST_P(ModelReference, PythonPackageFixturesFloat) {
  for (const char* c : {"py_water", "py_distorted", "py_isolated", "py_cutoff"})
    compare_with_reference<float>(c, 1e-4, GetParam(), "model_pyexport.pt");
}
// The neighbour holding the largest logit of receiver 0 (checked by make_reference.py) crosses r_c: with the
// softmax over s + log u the energy does not depend on the max, so it is continuous; jumps shrink with the step.
TEST_P(ModelReference, ContinuousWhenMaxLogitNeighbourLeaves) {
  Model<double, Exec> model(load(), GetParam(), g_options, g_tuning);
  Reference r = read_reference("leaver");
  const double r_c = model.hyper().r_c;
  double dir[3], len = 0;
  for (int a = 0; a < 3; ++a) len += (r.pos[9 + a] - r.pos[a]) * (r.pos[9 + a] - r.pos[a]);
  for (int a = 0; a < 3; ++a) dir[a] = (r.pos[9 + a] - r.pos[a]) / std::sqrt(len);
  auto energy_at = [&](double d) {
    std::vector<double> pos = r.pos;
    for (int a = 0; a < 3; ++a) pos[9 + a] = pos[a] + d * dir[a];
    return evaluate(model, pos, r.species, r.cell, r.pbc).energy;
  };
  const double steps[3] = {1e-3, 1e-5, 1e-7};
  double jumps[3];
  for (int k = 0; k < 3; ++k) jumps[k] = std::fabs(energy_at(r_c - steps[k]) - energy_at(r_c + steps[k]));
  std::printf("[leaver] |dE| at r_c +- 1e-3, 1e-5, 1e-7: %.3e %.3e %.3e\n", jumps[0], jumps[1], jumps[2]);
  EXPECT_LT(jumps[0], 1e-6);
  EXPECT_LT(jumps[1], std::max(1e-3 * jumps[0], 1e-13));
  EXPECT_LT(jumps[2], 1e-12);
  EXPECT_NEAR(energy_at(r_c + 1e-7), r.v.at("energy")[0], 1e-12 * std::fabs(r.v.at("energy")[0]));
  EXPECT_GT(std::fabs(energy_at(r_c - 1.0) - r.v.at("energy")[0]), 1e-5);  // the leaver matters inside r_c
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelReference, ::testing::Values(EdgeBackend::Fused, EdgeBackend::Reference),
                         [](const auto& info) { return info.param == EdgeBackend::Fused ? "fused" : "reference"; });

// the product basis (correlation 2) in layers 0 and 1 of a three-layer model
TEST_P(ModelReference, ProductBasis) {
  for (const char* conf : {"c2_periodic", "c2_cluster"}) {
    compare_with_reference<double>(conf, 1e-9, GetParam(), "model_c2_double.pt");
    compare_with_reference<float>(conf, 1e-4, GetParam(), "model_c2_double.pt");
  }
}

// Forces and virial against central differences of the energy, for `file` on the configuration `conf`.
static void finite_difference_check(EdgeBackend backend, const std::string& file, const std::string& conf) {
  SCOPED_TRACE(file);
  Model<double, Exec> model(load(file), backend, g_options, g_tuning);
  Reference r = read_reference(conf);
  Evaluation ev = evaluate(model, r.pos, r.species, r.cell, r.pbc);
  const double h = 1e-5;
  double worst = 0, scale = 0;
  for (size_t q = 0; q < r.pos.size(); ++q) {
    auto p = r.pos, m = r.pos;
    p[q] += h;
    m[q] -= h;
    const double fd = -(evaluate(model, p, r.species, r.cell, r.pbc).energy -
                        evaluate(model, m, r.species, r.cell, r.pbc).energy) / (2 * h);
    worst = std::max(worst, std::fabs(fd - ev.forces[q]));
    scale = std::max(scale, std::fabs(ev.forces[q]));
  }
  EXPECT_LE(worst / scale, 1e-6) << "finite-difference forces";
  // virial W_ab = -dE/d(eps_ab) under the homogeneous deformation x -> (1 + eps) x of positions and cell
  const int comp[6][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {0, 2}, {1, 2}};
  for (int v = 0; v < 6; ++v) {
    double Epm[2];
    for (int s = 0; s < 2; ++s) {
      double eps[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
      eps[comp[v][0]][comp[v][1]] += s == 0 ? h : -h;
      auto deform = [&](std::vector<double> xs) {
        for (size_t n = 0; n < xs.size() / 3; ++n) {
          double y[3] = {0, 0, 0};
          for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) y[a] += eps[a][b] * xs[3 * n + b];
          for (int a = 0; a < 3; ++a) xs[3 * n + a] = y[a];
        }
        return xs;
      };
      Epm[s] = evaluate(model, deform(r.pos), r.species, deform(r.cell), r.pbc).energy;
    }
    const double fd = -(Epm[0] - Epm[1]) / (2 * h);
    // the virial is symmetric for a rotation-invariant energy: compare with the symmetric part
    EXPECT_NEAR(fd, ev.virial[v], 1e-6 * std::max(1.0, std::fabs(ev.virial[v]))) << "virial component " << v;
  }
}

class ModelFiniteDifference : public ::testing::TestWithParam<EdgeBackend> {};
TEST_P(ModelFiniteDifference, ForcesAndStrain) {
  finite_difference_check(GetParam(), "model_double.pt", "periodic");
  finite_difference_check(GetParam(), "model_c2_double.pt", "c2_periodic");
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelFiniteDifference, ::testing::Values(EdgeBackend::Fused, EdgeBackend::Reference),
                         [](const auto& info) { return info.param == EdgeBackend::Fused ? "fused" : "reference"; });

// Energy invariance and force covariance under a rotation plus translation, and under reversing the atom order.
static void invariance_check(EdgeBackend backend, const std::string& file, const std::string& conf) {
  SCOPED_TRACE(file);
  Model<double, Exec> model(load(file), backend, g_options, g_tuning);
  Reference r = read_reference(conf);
  Evaluation ev = evaluate(model, r.pos, r.species, r.cell, r.pbc);
  const int n = static_cast<int>(r.species.size());
  // rotation about a generic axis plus translation
  const double ang = 0.7, ax[3] = {0.48, -0.6, 0.64};
  double R[3][3];
  const double c = std::cos(ang), s = std::sin(ang);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) R[a][b] = (a == b ? c : 0) + (1 - c) * ax[a] * ax[b];
  R[0][1] -= s * ax[2], R[0][2] += s * ax[1], R[1][0] += s * ax[2], R[1][2] -= s * ax[0], R[2][0] -= s * ax[1],
      R[2][1] += s * ax[0];
  std::vector<double> pos2(3 * n);
  for (int i = 0; i < n; ++i)
    for (int a = 0; a < 3; ++a) {
      pos2[3 * i + a] = 1.3 * (a + 1);
      for (int b = 0; b < 3; ++b) pos2[3 * i + a] += R[a][b] * r.pos[3 * i + b];
    }
  Evaluation ev2 = evaluate(model, pos2, r.species, r.cell, r.pbc);
  EXPECT_NEAR(ev2.energy, ev.energy, 1e-11 * std::fabs(ev.energy));
  std::vector<double> rotF(3 * n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) rotF[3 * i + a] += R[a][b] * ev.forces[3 * i + b];
  EXPECT_LE(rel_err(ev2.forces, rotF), 1e-10);
  // permutation: reverse the atom order
  std::vector<double> pos3(3 * n);
  std::vector<int> sp3(n);
  for (int i = 0; i < n; ++i) {
    sp3[i] = r.species[n - 1 - i];
    for (int a = 0; a < 3; ++a) pos3[3 * i + a] = r.pos[3 * (n - 1 - i) + a];
  }
  Evaluation ev3 = evaluate(model, pos3, sp3, r.cell, r.pbc);
  EXPECT_NEAR(ev3.energy, ev.energy, 1e-11 * std::fabs(ev.energy));
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(ev3.eatom[i], ev.eatom[n - 1 - i], 1e-11);
    for (int a = 0; a < 3; ++a) EXPECT_NEAR(ev3.forces[3 * i + a], ev.forces[3 * (n - 1 - i) + a], 1e-10);
  }
}

class ModelInvariance : public ::testing::TestWithParam<EdgeBackend> {};
TEST_P(ModelInvariance, RotationTranslationPermutation) {
  invariance_check(GetParam(), "model_double.pt", "cluster");
  invariance_check(GetParam(), "model_c2_double.pt", "c2_cluster");
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelInvariance, ::testing::Values(EdgeBackend::Fused, EdgeBackend::Reference),
                         [](const auto& info) { return info.param == EdgeBackend::Fused ? "fused" : "reference"; });

// The sender CSR against a host construction: every edge once, under its sender, in increasing edge order, for
// the one-thread path (host back-ends) and the team rank-sort path (GPUs; team sizes > 1 run it here too), with a
// segment longer than the team scratch (insertion-sort fallback), with and without the range check (the same lists
// for valid senders); an out-of-range sender throws when checked and is left out of the lists when not (the
// neighbour-list graphs of batmobile/kk skip the check: Graph::senders_in_range).
TEST(SenderCsr, SortedCompleteAndChecked) {
  const int nl = 300, na = 420;
  std::vector<int> roff_h(nl + 1, 0), snd_h;
  unsigned seed = 12345;
  auto rnd = [&seed](int n) { seed = seed * 1103515245u + 12345u; return int((seed >> 8) % unsigned(n)); };
  for (int i = 0; i < nl; ++i) {
    const int deg = rnd(60);
    for (int k = 0; k < deg; ++k) snd_h.push_back(rnd(na));
    if (i % 3 == 0) snd_h.push_back(7);  // atom 7 sends to 100 receivers (> 64 below: the fallback path)
    roff_h[i + 1] = static_cast<int>(snd_h.size());
  }
  const int ne = static_cast<int>(snd_h.size());
  auto to_dev = [](const std::vector<int>& v) {
    Kokkos::View<int*, Exec> d("v", v.size());
    auto h = Kokkos::create_mirror_view(d);
    for (size_t k = 0; k < v.size(); ++k) h(k) = v[k];
    Kokkos::deep_copy(d, h);
    return d;
  };
  auto roff = to_dev(roff_h);
  // builds the CSR of senders s_h and compares it with the host construction (out-of-range senders left out)
  // ghosts as periodic images: ghost nl + k of local atom (7 k) % nl (atom 7's images and atom 7 form one group)
  std::vector<int> owner_h(na - nl);
  for (int k = 0; k < na - nl; ++k) owner_h[k] = (7 * k) % nl;
  const auto owner_d = to_dev(owner_h);
  auto check_csr = [&](const std::vector<int>& s_h, int team, bool check, bool by_owner = false) {
    auto snd = to_dev(s_h);
    Kokkos::View<int*, Exec> erecv("erecv", ne), soff("soff", na + 1), sedge("sedge", ne), fill("fill", na);
    build_sender_csr<Exec>(nl, na, roff, snd, erecv, soff, sedge, fill, team, check, 64,
                           by_owner ? Kokkos::View<const int*, Exec>(owner_d) : Kokkos::View<const int*, Exec>());
    auto er = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), erecv);
    auto so = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), soff);
    auto se = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), sedge);
    const int ng = by_owner ? nl : na;
    std::vector<std::vector<int>> want(ng);
    for (int i = 0; i < nl; ++i)
      for (int e = roff_h[i]; e < roff_h[i + 1]; ++e) {
        const int j = s_h[e];
        if (j >= 0 && j < na) want[by_owner && j >= nl ? owner_h[j - nl] : j].push_back(e);
        ASSERT_EQ(er(e), i) << "team " << team;
      }
    ASSERT_EQ(so(0), 0);
    for (int j = 0; j < ng; ++j) {
      ASSERT_EQ(so(j + 1) - so(j), static_cast<int>(want[j].size())) << "team " << team << " sender " << j;
      for (size_t k = 0; k < want[j].size(); ++k) ASSERT_EQ(se(so(j) + k), want[j][k]) << "team " << team;
    }
  };
  for (int team : {1, 2, 4, 7}) {
    if (team > Exec().concurrency()) continue;  // host teams cannot outnumber the threads
    for (bool check : {true, false}) check_csr(snd_h, team, check);
    check_csr(snd_h, team, true, true);  // grouped by local atom (one rank: the images' owners known)
  }
  snd_h[5] = na;  // out of range
  auto bad = to_dev(snd_h);
  Kokkos::View<int*, Exec> erecv("erecv", ne), soff("soff", na + 1), sedge("sedge", ne), fill("fill", na);
  EXPECT_THROW(build_sender_csr<Exec>(nl, na, roff, bad, erecv, soff, sedge, fill, 2), std::runtime_error);
  check_csr(snd_h, 2 <= Exec().concurrency() ? 2 : 1, false);  // unchecked: edge 5 is in no sender's list
}

// The reference backend keeps the radial-MLP outputs per edge when they fit; without the cache it recomputes them.
// Results::add_forces (batmobile/kk passes LAMMPS's force array itself): the model adds to what f holds, exactly
// what it would have written plus that, on every row incl. ghost rows (grouped senders leave those as they are: the
// model's value there is 0). Both backends, float and double, senders grouped (an exchange that names the ghosts'
// image owners) and not.
TEST(ModelResults, AddForces) {
  Reference r = read_reference("periodic");
  auto check = [&](auto zero, EdgeBackend backend, bool group) {
    using T = decltype(zero);
    SCOPED_TRACE(std::string(sizeof(T) == 4 ? "float" : "double") +
                 (backend == EdgeBackend::Fused ? " fused" : " reference") + (group ? " grouped" : " ungrouped"));
    Model<T, Exec> m(load(), backend, g_options, g_tuning);
    HostGraph hg = build_periodic_graph(r.pos, r.species, r.cell.data(), r.pbc, m.hyper().r_c);
    Graph<Exec> g = upload_graph<Exec>(hg);
    IndexMapGhostExchange<T, Exec> named(hg.n_local, hg.ghost_owner);
    UnnamedImagesExchange<T> unnamed(hg.n_local, hg.ghost_owner);
    GhostExchange<T, Exec>& exchange = group ? static_cast<GhostExchange<T, Exec>&>(named) : unnamed;
    auto held = [](int n, int a) { return 0.1 * (n % 7) - 0.3 * a + 0.05; };  // what f holds before
    auto run = [&](bool add) {
      Results<Exec> res;
      res.f = decltype(res.f)("f", hg.n_all);
      // (a host copy of its own: on host back-ends a mirror view is the view itself)
      Kokkos::View<double* [3], Kokkos::LayoutRight, Kokkos::HostSpace> h("f_host", hg.n_all);
      for (int n = 0; n < hg.n_all; ++n)
        for (int a = 0; a < 3; ++a) h(n, a) = add ? held(n, a) : 0.0;
      Kokkos::deep_copy(res.f, h);
      res.add_forces = add;
      m.compute(g, &exchange, res);
      Kokkos::deep_copy(h, res.f);
      return h;
    };
    const auto plain = run(false);
    const auto added = run(true);
    double fmax = 0;
    for (int n = 0; n < hg.n_all; ++n)
      for (int a = 0; a < 3; ++a) {
        fmax = std::max(fmax, std::fabs(plain(n, a)));
        ASSERT_EQ(added(n, a), held(n, a) + plain(n, a)) << "atom " << n << " axis " << a;
      }
    EXPECT_GT(fmax, 1e-2);
  };
  for (bool group : {true, false})
    for (EdgeBackend b : {EdgeBackend::Fused, EdgeBackend::Reference}) {
      check(0.0f, b, group);
      check(0.0, b, group);
    }
}

// Energy and virial on demand (Results::want_energy / want_virial, LAMMPS's eflag_global / vflag_global): a step that
// does not want them leaves them 0 and gives the same forces, per-atom energies and virials bit for bit; the next step
// that wants them gets this step's values, not stale ones. The edge count passed in (Graph::n_edges) changes nothing.
// Both backends, float and double.
TEST(ModelResults, EnergyVirialOnDemand) {
  Reference r = read_reference("periodic");
  auto check = [&](auto zero, EdgeBackend backend) {
    using T = decltype(zero);
    SCOPED_TRACE(std::string(sizeof(T) == 4 ? "float" : "double") +
                 (backend == EdgeBackend::Fused ? " fused" : " reference"));
    Model<T, Exec> m(load(), backend, g_options, g_tuning);
    const Evaluation full = evaluate(m, r.pos, r.species, r.cell, r.pbc);
    ASSERT_NE(full.energy, 0.0);
    // a displaced configuration without energy and virial, then the original one again with them
    std::vector<double> moved = r.pos;
    moved[0] += 0.05;
    const Evaluation quiet = evaluate(m, moved, r.species, r.cell, r.pbc, false, true);
    EXPECT_EQ(quiet.energy, 0.0);
    for (int a = 0; a < 6; ++a) EXPECT_EQ(quiet.virial[a], 0.0);
    const Evaluation moved_full = evaluate(m, moved, r.species, r.cell, r.pbc, true, true);
    EXPECT_NE(moved_full.energy, full.energy);
    EXPECT_EQ(rel_err(quiet.forces, moved_full.forces), 0.0);
    EXPECT_EQ(rel_err(quiet.eatom, moved_full.eatom), 0.0);
    EXPECT_EQ(rel_err(quiet.vatom, moved_full.vatom), 0.0);
    const Evaluation again = evaluate(m, r.pos, r.species, r.cell, r.pbc, true, true);
    EXPECT_EQ(again.energy, full.energy);
    for (int a = 0; a < 6; ++a) EXPECT_EQ(again.virial[a], full.virial[a]);
    EXPECT_EQ(rel_err(again.forces, full.forces), 0.0);
  };
  for (EdgeBackend b : {EdgeBackend::Fused, EdgeBackend::Reference}) {
    check(0.0f, b);
    check(0.0, b);
  }
}

// The reference backend keeps the radial-MLP outputs per edge when they fit (ModelTuning::radial_cache_mb); without
// the cache it recomputes them.
TEST(ModelRadialCache, SameResultWithoutCache) {
  Reference r = read_reference("periodic");
  Model<double, Exec> model(load(), EdgeBackend::Reference, g_options, g_tuning);
  Model<double, Exec> uncached(load(), EdgeBackend::Reference, g_options,
                               tuning_with([](impl::ModelTuning& t) { t.radial_cache_mb = 0; }));
  Evaluation cached = evaluate(model, r.pos, r.species, r.cell, r.pbc);
  Evaluation recomputed = evaluate(uncached, r.pos, r.species, r.cell, r.pbc);
  EXPECT_NEAR(cached.energy, recomputed.energy, 1e-13 * std::fabs(cached.energy));
  EXPECT_LE(rel_err(cached.forces, recomputed.forces), 1e-13);
  EXPECT_LE(rel_err(cached.vatom, recomputed.vatom), 1e-13);
}

// A fused model built with tuning `with` against one built with the suite's: energy (etol, relative), forces,
// per-atom energies and virials (tol, relative to their largest) on the periodic reference system, whose forces are
// not all small.
template <class T>
static void expect_tuning_close(const Reference& r, const impl::ModelTuning& with, double etol, double tol) {
  SCOPED_TRACE(impl::non_default_tuning(with) + (sizeof(T) == 4 ? " float" : " double"));
  Model<T, Exec> changed(load(), EdgeBackend::Fused, g_options, with);
  Model<T, Exec> plain(load(), EdgeBackend::Fused, g_options, g_tuning);
  const Evaluation a = evaluate(changed, r.pos, r.species, r.cell, r.pbc);
  const Evaluation b = evaluate(plain, r.pos, r.species, r.cell, r.pbc);
  EXPECT_NEAR(a.energy, b.energy, etol * std::fabs(b.energy));
  EXPECT_LE(rel_err(a.forces, b.forces), tol);
  EXPECT_LE(rel_err(a.eatom, b.eatom), tol);
  EXPECT_LE(rel_err(a.vatom, b.vatom), tol);
  double fmax = 0;
  for (double f : b.forces) fmax = std::max(fmax, std::fabs(f));
  EXPECT_GT(fmax, 1e-2);
}

// Options and tuning out of range are errors (std::invalid_argument) that name the field, whichever backend.
TEST(ModelOptionsTest, Validation) {
  // field: "ModelOptions::name" or "ModelTuning::name"
  auto expect_invalid = [](const std::string& field, const ModelOptions& o, const impl::ModelTuning& t) {
    for (EdgeBackend backend : {EdgeBackend::Fused, EdgeBackend::Reference}) {
      try {
        Model<float, Exec> m(load(), backend, o, t);
        ADD_FAILURE() << "no error for a bad " << field;
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("batmobile::" + field), std::string::npos) << e.what();
      }
    }
  };
  // the suite's tuning with one field set to v
  auto bad = [](int impl::ModelTuning::*field, int v) {
    impl::ModelTuning t = g_tuning;
    t.*field = v;
    return t;
  };
  using Tuning = impl::ModelTuning;
  for (int v : {-1, 3, 5, 9}) {
    ModelOptions o = g_options;
    o.radial_mode = static_cast<RadialMode>(v);
    expect_invalid("ModelOptions::radial_mode", o, g_tuning);
  }
  for (int v : {-1, 65}) expect_invalid("ModelTuning::basis_chunk", g_options, bad(&Tuning::basis_chunk, v));
  // the test model's H = 12 hidden units: 5 does not divide it
  for (int v : {-1, 5}) expect_invalid("ModelTuning::prepare_span", g_options, bad(&Tuning::prepare_span, v));
  for (int v : {-1, 4096})
    expect_invalid("ModelTuning::interaction_team", g_options, bad(&Tuning::interaction_team, v));
  for (int v : {-2, 2000}) expect_invalid("ModelTuning::forward_team", g_options, bad(&Tuning::forward_team, v));
  for (int v : {-1, 1025}) expect_invalid("ModelTuning::node_team", g_options, bad(&Tuning::node_team, v));
  for (int v : {-1, 5}) expect_invalid("ModelTuning::node_atoms", g_options, bad(&Tuning::node_atoms, v));
  expect_invalid("ModelTuning::radial_cache_mb", g_options, bad(&Tuning::radial_cache_mb, -1));
}

// The fused kernels' alternative paths (impl::ModelTuning): the prepare passes per radial chunk (basis_chunk) and the
// hidden units per prepare item (prepare_span) change no bit against the default.
TEST(ModelOptionsTest, FusedKernelPaths) {
  Reference r = read_reference("periodic");
  Model<float, Exec> plain(load(), EdgeBackend::Fused, g_options, g_tuning);  // the defaults, compared with below
  const Evaluation b = evaluate(plain, r.pos, r.species, r.cell, r.pbc);
  // a model built with this tuning gives bit for bit the default's results, in two evaluations (the second one
  // uses the other constant-memory slot of each kernel on CUDA)
  auto expect_bitwise_default = [&](const impl::ModelTuning& with) {
    Model<float, Exec> m(load(), EdgeBackend::Fused, g_options, with);
    for (int rep = 0; rep < 2; ++rep) {
      const Evaluation e = evaluate(m, r.pos, r.species, r.cell, r.pbc);
      EXPECT_EQ(e.energy, b.energy) << impl::non_default_tuning(with) << " rep " << rep;
      EXPECT_EQ(rel_err(e.forces, b.forces), 0.0) << impl::non_default_tuning(with) << " rep " << rep;
      EXPECT_EQ(rel_err(e.vatom, b.vatom), 0.0) << impl::non_default_tuning(with) << " rep " << rep;
    }
  };
  // (host back-ends run one thread per team, which takes all hidden units of an edge whatever the span: this checks
  // that the option is passed and changes nothing there; tests/kernels' Interaction.PrepareSpan checks the GPU paths)
  for (int span : {2, 1}) expect_bitwise_default(tuning_with([&](impl::ModelTuning& t) { t.prepare_span = span; }));
  // one prepare pass per radial chunk instead of the automatic basis chunks: the same edge order
  for (int chunk : {1, 16}) expect_bitwise_default(tuning_with([&](impl::ModelTuning& t) { t.basis_chunk = chunk; }));
}

// The node kernels take blocks of ModelTuning::node_atoms atoms per team (default 4; each weight read once per
// block; 0: automatic, auto_node_atoms). The periodic reference has 9 atoms: blocks of 4 and 2 end with a partial
// block, blocks of 3 do not. Any block size gives the default's results to rounding (only the RMS sums' order
// differs).
TEST(ModelOptionsTest, NodeAtomBlocks) {
  Reference r = read_reference("periodic");
  // the automatic rule (H200: 132 SMs): 648 atoms -> 162, 216 teams of 4, 3 atoms are under 264, 324 of 2 are not
  EXPECT_EQ(auto_node_atoms(648, 132, 4), 2);
  EXPECT_EQ(auto_node_atoms(1053, 132, 4), 4);  // 264 teams
  EXPECT_EQ(auto_node_atoms(1052, 132, 4), 3);  // 263 teams of 4
  EXPECT_EQ(auto_node_atoms(10368, 132, 4), 4);
  EXPECT_EQ(auto_node_atoms(9, 132, 4), 2);     // never below 2
  EXPECT_EQ(auto_node_atoms(9, -1, 4), 4);      // not a GPU
  for (int atoms : {0, 1, 2, 3}) {
    const impl::ModelTuning with = tuning_with([&](impl::ModelTuning& t) { t.node_atoms = atoms; });
    expect_tuning_close<float>(r, with, 1e-5, 1e-5);
    expect_tuning_close<double>(r, with, 1e-12, 1e-12);
  }
}

// The fused kernels' team sizes: any accepted value gives the default's results (on host back-ends they change
// nothing: one thread per team; the GPU paths of these team sizes are the kernel tests' 3 C and forward_team cases).
TEST(ModelOptionsTest, FusedTeamSizes) {
  Reference r = read_reference("periodic");
  expect_tuning_close<float>(r, tuning_with([](impl::ModelTuning& t) { t.forward_team = 96; }), 1e-6, 1e-6);
  expect_tuning_close<float>(r, tuning_with([](impl::ModelTuning& t) { t.interaction_team = 32; }), 1e-6, 1e-6);
}

// The automatic GPU team sizes of the fused kernels by local atom count (a pure rule; what the kernels make of
// kOneSlotLessTeam is Interaction.OneSlotLessTeam's, and the LAMMPS GPU tests' small boxes run below kFewAtoms atoms).
TEST(FusedTeamRule, ByAtomCount) {
  using model_detail::automatic_fused_team;
  using model_detail::kFewAtoms;
  using model_detail::kManyAtoms;
  constexpr int wave = kernels::kWaveAwareTeam, less = kernels::kOneSlotLessTeam;
  static_assert(kFewAtoms > 648 && kFewAtoms < 1296 && kFewAtoms < kManyAtoms,
                "kFewAtoms outside the measured bracket (fused_team_rule.hpp)");
  for (bool fwd : {true, false}) {
    // below kFewAtoms: one edge slot less, forward and adjoints alike
    for (int C : {16, 32, 128}) {
      EXPECT_EQ(automatic_fused_team(648, C, fwd, true), less);
      EXPECT_EQ(automatic_fused_team(kFewAtoms - 1, C, fwd, true), less);
    }
    // from kFewAtoms (or with the rule off) to kManyAtoms: the forward wave-aware, the adjoints automatic
    for (int n : {648, kFewAtoms, 1296, kManyAtoms - 1}) {
      const bool few = n >= kFewAtoms;
      EXPECT_EQ(automatic_fused_team(n, 32, fwd, few), fwd ? wave : 0) << n;
    }
    // many atoms: half the automatic split (64 threads at C = 32), C = 128: automatic
    EXPECT_EQ(automatic_fused_team(kManyAtoms, 32, fwd, true), 64);
    EXPECT_EQ(automatic_fused_team(10368, 32, fwd, false), 64);
    EXPECT_EQ(automatic_fused_team(10368, 128, fwd, true), 0);
  }
}

// The few-atoms rule's scope: the fp32 kernels only (it costs fp64 time on the H200, fused_team_rule.hpp).
TEST(FusedTeamRule, ByPrecision) {
  EXPECT_TRUE(model_detail::few_atoms_rule_for<float>);
  EXPECT_FALSE(model_detail::few_atoms_rule_for<double>);
}

// The launch line the pair styles log: one entry per layer, each with the pair adjoint; on host back-ends one thread
// per atom; non-default options and tuning named at its end.
TEST(ModelOptionsTest, LaunchSummary) {
  const Model<float, Exec> fused(load(), EdgeBackend::Fused, ModelOptions{});
  const int T = fused.hyper().T;
  ASSERT_GE(T, 2);
  const std::string few = fused.launch_summary(648);
  EXPECT_NE(few.find("fused kernels for 648 local atoms"), std::string::npos) << few;
  for (int t = 0; t < T; ++t) EXPECT_NE(few.find("layer " + std::to_string(t) + " forward "), std::string::npos) << few;
  EXPECT_EQ(few.find("layer " + std::to_string(T) + " "), std::string::npos) << few;
  EXPECT_EQ(few.find("options"), std::string::npos) << few;
  const Model<float, Exec> reference(load(), EdgeBackend::Reference, ModelOptions{});
  EXPECT_EQ(reference.launch_summary(648), "reference edge kernels (per-edge arrays)");
  if (kernels::runs_on_host<Exec>) EXPECT_EQ(few.find("threads"), std::string::npos) << few;  // "1 thread" throughout
  // the adjoint that runs (every back-end)
  EXPECT_NE(few.find(", pair adjoint "), std::string::npos) << few;
  impl::ModelTuning two;
  two.node_atoms = 2;
  two.basis_chunk = 16;
  const Model<float, Exec> with(load(), EdgeBackend::Fused, ModelOptions{}, two);
  const std::string named = with.launch_summary(648);
  EXPECT_NE(named.find("; options: basis_chunk 16, node_atoms 2"), std::string::npos) << named;
  ModelOptions mixed;  // (the options come first)
  mixed.radial_mode = RadialMode::kTensorCoreF16;
  const Model<float, Exec> reference_with(load(), EdgeBackend::Reference, mixed, two);
  EXPECT_EQ(reference_with.launch_summary(648),
            "reference edge kernels (per-edge arrays); options: radial_mode 4, basis_chunk 16, node_atoms 2");
}

// The sender adjoint over local atoms with their periodic images (where the exchange names them: one rank) gives the
// results of one team per atom incl. ghosts (an exchange that does not, as on several ranks) to rounding (the images'
// terms are summed in another order), in both precisions; ModelTuning::group_senders = false takes the ungrouped
// path with either exchange. (The CTest variant model_tests_ungrouped_senders runs every model test ungrouped.)
TEST(ModelExchange, GroupSenders) {
  Reference r = read_reference("periodic");
  auto expect_close = [&](auto zero, double etol, double tol) {
    using T = decltype(zero);
    Model<T, Exec> grouped(load(), EdgeBackend::Fused, g_options, g_tuning);
    Model<T, Exec> plain(load(), EdgeBackend::Fused, g_options, g_tuning);
    const Evaluation a = evaluate(grouped, r.pos, r.species, r.cell, r.pbc, true, false, true);
    const Evaluation b = evaluate(plain, r.pos, r.species, r.cell, r.pbc, true, false, false);
    EXPECT_NEAR(a.energy, b.energy, etol * std::fabs(b.energy));
    EXPECT_LE(rel_err(a.forces, b.forces), tol);
    EXPECT_LE(rel_err(a.eatom, b.eatom), tol);
    EXPECT_LE(rel_err(a.vatom, b.vatom), tol);
  };
  expect_close(0.0, 1e-13, 1e-12);
  expect_close(0.0f, 1e-6, 1e-5);
  // a second evaluation (used buffers: grouped, the ghost rows of the input adjoints are neither zeroed nor folded,
  // so stale values there must not matter) against a fresh ungrouped model
  std::vector<double> moved = r.pos;
  for (size_t k = 0; k < moved.size(); ++k) moved[k] += 0.02 * double(int(k % 5) - 2);
  Model<double, Exec> grouped(load(), EdgeBackend::Fused, g_options, g_tuning);
  EXPECT_TRUE(grouped.groups_senders());
  Model<double, Exec> plain(load(), EdgeBackend::Fused, g_options, g_tuning);
  evaluate(grouped, moved, r.species, r.cell, r.pbc, true, false, true);
  const Evaluation a = evaluate(grouped, r.pos, r.species, r.cell, r.pbc, true, false, true);
  EXPECT_TRUE(grouped.senders_grouped_last());
  const Evaluation b = evaluate(plain, r.pos, r.species, r.cell, r.pbc, true, false, false);
  EXPECT_FALSE(plain.senders_grouped_last());
  EXPECT_NEAR(a.energy, b.energy, 1e-13 * std::fabs(b.energy));
  EXPECT_LE(rel_err(a.forces, b.forces), 1e-12);
  EXPECT_LE(rel_err(a.vatom, b.vatom), 1e-12);
  // grouped, the images' terms are on their atoms' rows and the ghost rows zero (what lets batmobile/kk run with
  // newton off); ungrouped they are not
  EXPECT_EQ(a.ghost_abs, 0.0);
  EXPECT_GT(b.ghost_abs, 0.0);
  // ModelTuning::group_senders = false: the ungrouped path although the exchange names the owners, bit for bit
  Model<double, Exec> ungrouped(load(), EdgeBackend::Fused, g_options,
                                tuning_with([](impl::ModelTuning& t) { t.group_senders = false; }));
  EXPECT_FALSE(ungrouped.groups_senders());
  const Evaluation c = evaluate(ungrouped, r.pos, r.species, r.cell, r.pbc, true, false, true);
  EXPECT_FALSE(ungrouped.senders_grouped_last());
  EXPECT_EQ(c.energy, b.energy);
  EXPECT_EQ(c.forces, b.forces);
  EXPECT_EQ(c.vatom, b.vatom);
  EXPECT_EQ(c.ghost_abs, b.ghost_abs);
}

// Launches whose kernel name starts with g_launch_prefix, counted through the Kokkos tools callbacks while fn runs.
static int g_launches = 0;
static std::string g_launch_prefix;
static void count_launch(const char* name, uint32_t, uint64_t*) {
  if (std::string(name).rfind(g_launch_prefix, 0) == 0) ++g_launches;
}
template <class Fn>
static int launches_during(const std::string& prefix, Fn fn) {
  namespace KT = Kokkos::Tools::Experimental;
  g_launches = 0;
  g_launch_prefix = prefix;
  KT::set_begin_parallel_for_callback(count_launch);
  KT::set_begin_parallel_reduce_callback(count_launch);
  KT::set_begin_parallel_scan_callback(count_launch);
  fn();
  KT::set_begin_parallel_for_callback(nullptr);
  KT::set_begin_parallel_reduce_callback(nullptr);
  KT::set_begin_parallel_scan_callback(nullptr);
  return g_launches;
}
// the sender-list build (sender_csr.hpp)
template <class Fn>
static int csr_launches_during(Fn fn) {
  return launches_during("bm_csr", fn);
}

// The sender-grouped edge lists are built only where something reads them: not for the fused pair adjoint with
// sender groups (one rank), whose results are then the same bit for bit; but for the fused sender adjoint of ghosts
// without named owners (several ranks), for the reference backend, and where the graph does not vouch for its
// sender indices (the build checks them).
TEST(ModelExchange, SenderListsOnlyWhereRead) {
  Reference r = read_reference("periodic");
  Model<double, Exec> fused(load(), EdgeBackend::Fused, g_options, g_tuning);
  Evaluation built, skipped;
  EXPECT_GT(csr_launches_during([&] { built = evaluate(fused, r.pos, r.species, r.cell, r.pbc, true, false, true); }),
            0);
  EXPECT_EQ(csr_launches_during(
                [&] { skipped = evaluate(fused, r.pos, r.species, r.cell, r.pbc, true, false, true, true); }),
            0);
  EXPECT_TRUE(fused.senders_grouped_last());
  EXPECT_EQ(skipped.energy, built.energy);
  EXPECT_EQ(skipped.forces, built.forces);
  EXPECT_EQ(skipped.eatom, built.eatom);
  EXPECT_EQ(skipped.vatom, built.vatom);
  for (int a = 0; a < 6; ++a) EXPECT_EQ(skipped.virial[a], built.virial[a]);
  // a fresh model whose first evaluation skips them (its sender arrays never allocated)
  Model<double, Exec> fresh(load(), EdgeBackend::Fused, g_options, g_tuning);
  Evaluation first;
  EXPECT_EQ(csr_launches_during(
                [&] { first = evaluate(fresh, r.pos, r.species, r.cell, r.pbc, true, false, true, true); }),
            0);
  EXPECT_EQ(first.forces, built.forces);
  EXPECT_EQ(first.energy, built.energy);
  EXPECT_GT(csr_launches_during([&] { evaluate(fused, r.pos, r.species, r.cell, r.pbc, true, false, false, true); }),
            0);
  Model<double, Exec> reference(load(), EdgeBackend::Reference, g_options, g_tuning);
  EXPECT_GT(
      csr_launches_during([&] { evaluate(reference, r.pos, r.species, r.cell, r.pbc, true, false, true, true); }), 0);
}

// IndexMapGhostExchange::update: forward copies each owner's row into its ghosts' rows, reverse folds the ghost rows
// onto their owners and zeroes them, and image_lists inverts image_owners, for a first map, a smaller one (arrays
// reused) and a larger one (arrays grown), against a loop on the host.
TEST(ModelExchange, ImageMapUpdate) {
  IndexMapGhostExchange<double, Exec> images(3, {2, 0, 2});
  auto check = [&](int nl, const std::vector<int>& owner) {
    const int ng = int(owner.size()), na = nl + ng, width = 5;
    Kokkos::View<double**, Kokkos::LayoutRight, Exec> h("h", na, width);
    auto hh = Kokkos::create_mirror_view(h);
    for (int n = 0; n < na; ++n)
      for (int x = 0; x < width; ++x) hh(n, x) = 100.0 * n + x + 1;
    Kokkos::deep_copy(h, hh);
    images.forward(h);
    auto fwd = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), h);
    for (int n = 0; n < na; ++n)
      for (int x = 0; x < width; ++x) EXPECT_EQ(fwd(n, x), hh(n < nl ? n : owner[n - nl], x)) << n << " " << x;
    Kokkos::deep_copy(h, hh);
    images.reverse(h);
    auto rev = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), h);
    std::vector<double> expect(na * width);
    for (int n = 0; n < na; ++n)
      for (int x = 0; x < width; ++x) expect[(n < nl ? n : owner[n - nl]) * width + x] += hh(n, x);
    for (int n = 0; n < na; ++n)
      for (int x = 0; x < width; ++x) EXPECT_EQ(rev(n, x), n < nl ? expect[n * width + x] : 0.0) << n << " " << x;
    auto owners = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), images.image_owners());
    ASSERT_EQ(int(owners.extent(0)), ng);
    const auto lists = images.image_lists();
    auto off = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lists.offsets);
    auto ghosts = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lists.ghosts);
    ASSERT_EQ(int(off.extent(0)), nl + 1);
    ASSERT_EQ(int(ghosts.extent(0)), ng);
    std::vector<int> seen(ng, 0);
    for (int i = 0; i < nl; ++i)
      for (int q = off(i); q < off(i + 1); ++q) {
        EXPECT_EQ(owner[ghosts(q)], i);
        ++seen[ghosts(q)];
      }
    for (int g = 0; g < ng; ++g) {
      EXPECT_EQ(owners(g), owner[g]);
      EXPECT_EQ(seen[g], 1);
    }
  };
  check(3, {2, 0, 2});
  images.update(2, {1});
  check(2, {1});
  std::vector<int> many;
  for (int g = 0; g < 300; ++g) many.push_back((g * 7) % 40);
  images.update(40, many);
  check(40, many);
  images.update(1, {});
  check(1, {});
  EXPECT_THROW(images.update(2, {0, 2}), std::runtime_error);
}

// Where the exchange lists each atom's periodic images, the node forward writes the images' rows and no ghost copy
// runs; the results are those of the copy, bit for bit, for both backends and precisions, and for three layers.
TEST(ModelExchange, NodeForwardWritesImages) {
  Reference r = read_reference("periodic");
  auto expect_same = [&](auto zero, EdgeBackend backend, const std::string& file) {
    using T = decltype(zero);
    Model<T, Exec> listed(load(file), backend, g_options, g_tuning), copied(load(file), backend, g_options, g_tuning);
    const int layers = listed.hyper().T;
    Evaluation a, b;
    EXPECT_EQ(launches_during("bm_ghost_forward",
                              [&] { a = evaluate(listed, r.pos, r.species, r.cell, r.pbc, true, false, true); }),
              0);
    EXPECT_EQ(launches_during("bm_ghost_forward", [&] {
                b = evaluate(copied, r.pos, r.species, r.cell, r.pbc, true, false, true, false, false);
              }),
              layers - 1);
    EXPECT_EQ(a.energy, b.energy);
    EXPECT_EQ(a.forces, b.forces);
    EXPECT_EQ(a.eatom, b.eatom);
    EXPECT_EQ(a.vatom, b.vatom);
    for (int v = 0; v < 6; ++v) EXPECT_EQ(a.virial[v], b.virial[v]);
  };
  expect_same(0.0, EdgeBackend::Fused, "model_double.pt");
  expect_same(0.0f, EdgeBackend::Fused, "model_double.pt");
  expect_same(0.0, EdgeBackend::Reference, "model_double.pt");
  expect_same(0.0, EdgeBackend::Fused, "model_t3_double.pt");
}

static void expect_load_error(const std::string& file, const std::string& fragment) {
  try {
    load_model_file(file);
    ADD_FAILURE() << "no error for " << file;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << "message should name the file: " << e.what();
  }
}

TEST(ModelLoader, Errors) {
  expect_load_error(g_ref_dir + "/does_not_exist.pt", "cannot open");
  expect_load_error(g_ref_dir + "/corrupt.pt", "not a readable TorchScript archive");
  expect_load_error(g_ref_dir + "/bad_version.pt", "unsupported format version 99 (this build reads versions 1 to 3)");
  expect_load_error(g_ref_dir + "/bad_format.pt", "not a Batmobile model");
  expect_load_error(g_ref_dir + "/bad_units.pt", "units 'real'");
  expect_load_error(g_ref_dir + "/missing_tensor.pt", "missing tensor 'layers.1.mix.Wo2'");
  // format version 3 (the product basis): its tensors in every layer but the last, correlation 1 or 2
  expect_load_error(g_ref_dir + "/c2_missing_product.pt", "missing tensor 'layers.1.product.Wp2'");
  expect_load_error(g_ref_dir + "/c2_correlation3.pt", "hyperparameter correlation = 3");
  expect_load_error(g_ref_dir + "/c2_header_disagrees.pt", "the header says correlation 1, meta.correlation says 2");
  expect_load_error(g_ref_dir + "/c2_one_layer.pt", "correlation 2 needs T >= 2");
  const ModelFile c2 = load("model_c2_double.pt");
  EXPECT_EQ(c2.hyper.version, 3);
  EXPECT_EQ(c2.hyper.correlation, 2);
  EXPECT_TRUE(c2.hyper.has_product(1));
  EXPECT_FALSE(c2.hyper.has_product(2));
  EXPECT_EQ(load().hyper.correlation, 1);
  ModelFile mf = load();
  EXPECT_EQ(mf.hyper.species, (std::vector<std::string>{"O", "H"}));
  EXPECT_EQ(map_species(mf.hyper, {"H", "NULL", "O"}), (std::vector<int>{1, -1, 0}));
  EXPECT_THROW(map_species(mf.hyper, {"O", "C"}), std::runtime_error);
}

// The model checksum (docs/model.md "Model checksum"): version 2 covers the header and the tensors, version 1 the
// tensors alone (or nothing). The fixtures come from make_reference.py, whose contract writer computes the checksum
// independently of batmobile.export; model_pyexport.pt is the package exporter's.
TEST(ModelLoader, Checksum) {
  ModelFile mf = load();
  EXPECT_EQ(mf.hyper.version, 2);
  EXPECT_EQ(mf.checksum, ChecksumState::kVerified);
  EXPECT_EQ(mf.model_sha256.size(), 64u);
  ModelFile py = load("model_pyexport.pt");
  EXPECT_EQ(py.checksum, ChecksumState::kVerified);
  // the Python package and this build take their version from the same VERSION file
  EXPECT_EQ(py.hyper.batmobile_version, std::string(package_version()));
  EXPECT_NE(std::string(package_version()), "unknown");
  EXPECT_EQ(mf.hyper.batmobile_version, "");  // the contract writer records none
  // a hand-edited header (checksum member unchanged): species order swapped, cutoff changed; a flipped weight bit
  const std::string altered = "the header (species, cutoff, hyperparameters) or the weights were altered or "
                              "corrupted after export; re-export the model file";
  expect_load_error(g_ref_dir + "/header_species_swapped.pt", "the model checksum does not match (stored sha256:");
  expect_load_error(g_ref_dir + "/header_species_swapped.pt", altered);
  expect_load_error(g_ref_dir + "/header_cutoff_altered.pt", altered);
  expect_load_error(g_ref_dir + "/weights_flipped.pt", altered);
  expect_load_error(g_ref_dir + "/v2_no_checksum.pt", "does not end with its checksum member");
  // version 1: loads; the checksum, where there is one, covers the tensors alone (pair_coeff warns)
  ModelFile v1 = load("v1_checksum.pt");
  EXPECT_EQ(v1.hyper.version, 1);
  EXPECT_EQ(v1.checksum, ChecksumState::kWeightsVerified);
  EXPECT_EQ(v1.hyper.species, mf.hyper.species);
  EXPECT_EQ(load("v1_no_checksum.pt").checksum, ChecksumState::kAbsent);
}

// The checksum's byte stream, against hashlib.sha256 in Python over the same bytes:
// b'8\n{"a": 1}' + b'b\nint64\n[1]\n' + pack('<q', 7) + b'x\nfloat64\n[1]\n' + pack('<d', 1.5).
TEST(ModelLoader, ChecksumDefinition) {
  auto raw = [](const std::string& name, const std::string& dtype, const void* p, size_t n) {
    RawTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = {1};
    const auto* b = static_cast<const unsigned char*>(p);
    t.bytes.assign(b, b + n);  // (the test hosts are little-endian)
    return t;
  };
  const double x = 1.5;
  const int64_t b = 7;
  const std::vector<RawTensor> tensors = {raw("x", "float64", &x, 8), raw("b", "int64", &b, 8)};
  EXPECT_EQ(model_checksum("{\"a\": 1}", tensors), "492467c2c7ac15b38d0f3b1142425db4f85558895ced85e1552a2e4bdccb58a6");
  EXPECT_EQ(tensors_checksum(tensors), "b05f7c85c86dde9d6cd64f69b791b805222a5f41939e3de23b4709f44ef1f31f");
  const std::string hex(64, 'a');
  std::string canonical, got;
  ASSERT_TRUE(split_header("{\"a\": 1, \"checksum\": \"sha256:" + hex + "\"}", &canonical, &got));
  EXPECT_EQ(canonical, "{\"a\": 1}");
  EXPECT_EQ(got, hex);
  // not the last member, upper-case digits, a digit short, other spacing: no checksum member
  EXPECT_FALSE(split_header("{\"checksum\": \"sha256:" + hex + "\", \"a\": 1}", &canonical, &got));
  EXPECT_FALSE(split_header("{\"a\": 1, \"checksum\": \"sha256:" + std::string(64, 'A') + "\"}", &canonical, &got));
  EXPECT_FALSE(split_header("{\"a\": 1, \"checksum\": \"sha256:" + hex.substr(1) + "\"}", &canonical, &got));
  EXPECT_FALSE(split_header("{\"a\": 1,\"checksum\":\"sha256:" + hex + "\"}", &canonical, &got));
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: test_model REFERENCE_DIR [--node-team N] [--ungrouped-senders]\n");
    return 2;
  }
  g_ref_dir = argv[1];
  Kokkos::initialize(argc, argv);
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--node-team" && a + 1 < argc) {
      g_tuning.node_team = std::stoi(argv[++a]);
    } else if (arg == "--ungrouped-senders") {
      g_ungrouped_senders = true;
    } else {
      std::fprintf(stderr, "test_model: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  int rc = RUN_ALL_TESTS();
  Kokkos::finalize();
  return rc;
}
