// C++ model vs the float64 PyTorch reference, finite differences, invariances, loader errors.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "model/fused_team_rule.hpp"
#include "model/graph_builder.hpp"
#include "model/model.hpp"
#include "model/model_file.hpp"
#include "model/sender_csr.hpp"

using namespace batmobile;
using Exec = Kokkos::DefaultExecutionSpace;

static std::string g_ref_dir;

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

// want: Results::want_energy and want_virial; edges_known: the graph passes its edge count (Graph::n_edges).
template <class T>
static Evaluation evaluate(Model<T, Exec>& model, const std::vector<double>& pos, const std::vector<int>& species,
                           const std::vector<double>& cell, const bool* pbc, bool want = true,
                           bool edges_known = false) {
  HostGraph hg = build_periodic_graph(pos, species, cell.data(), pbc, model.hyper().r_c);
  Graph<Exec> g = upload_graph<Exec>(hg);
  if (edges_known) g.n_edges = int(hg.senders.size());
  IndexMapGhostExchange<T, Exec> exchange(hg.n_local, hg.ghost_owner);
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

// Restores an environment variable at scope exit (the CTest variants of this suite set some for every test).
struct KeepEnv {
  std::string name, value;
  bool had;
  explicit KeepEnv(const char* n) : name(n) {
    const char* v = std::getenv(n);
    had = v != nullptr;
    if (had) value = v;
  }
  ~KeepEnv() {
    if (had)
      setenv(name.c_str(), value.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

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
  Model<T, Exec> model(load(model_file), backend);
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
  Model<double, Exec> model(load(), GetParam());
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

class ModelFiniteDifference : public ::testing::TestWithParam<EdgeBackend> {};
TEST_P(ModelFiniteDifference, ForcesAndStrain) {
  Model<double, Exec> model(load(), GetParam());
  Reference r = read_reference("periodic");
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

INSTANTIATE_TEST_SUITE_P(Backends, ModelFiniteDifference, ::testing::Values(EdgeBackend::Fused, EdgeBackend::Reference),
                         [](const auto& info) { return info.param == EdgeBackend::Fused ? "fused" : "reference"; });

class ModelInvariance : public ::testing::TestWithParam<EdgeBackend> {};
TEST_P(ModelInvariance, RotationTranslationPermutation) {
  Model<double, Exec> model(load(), GetParam());
  Reference r = read_reference("cluster");
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
    check_csr(snd_h, team, true, true);  // grouped by local atom (BATMOBILE_GROUP_SENDERS)
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
// model's value there is 0). Both backends, float and double, senders grouped (the default) and not.
TEST(ModelResults, AddForces) {
  Reference r = read_reference("periodic");
  const KeepEnv keep("BATMOBILE_GROUP_SENDERS");
  auto check = [&](auto zero, EdgeBackend backend, const char* group) {
    using T = decltype(zero);
    SCOPED_TRACE(std::string(sizeof(T) == 4 ? "float" : "double") +
                 (backend == EdgeBackend::Fused ? " fused" : " reference") + " GROUP_SENDERS=" + group);
    setenv("BATMOBILE_GROUP_SENDERS", group, 1);
    Model<T, Exec> m(load(), backend);
    HostGraph hg = build_periodic_graph(r.pos, r.species, r.cell.data(), r.pbc, m.hyper().r_c);
    Graph<Exec> g = upload_graph<Exec>(hg);
    IndexMapGhostExchange<T, Exec> exchange(hg.n_local, hg.ghost_owner);
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
  for (const char* group : {"1", "0"})
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
    Model<T, Exec> m(load(), backend);
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

TEST(ModelRadialCache, SameResultWithoutCache) {
  Reference r = read_reference("periodic");
  Model<double, Exec> model(load(), EdgeBackend::Reference);
  Evaluation cached = evaluate(model, r.pos, r.species, r.cell, r.pbc);
  setenv("BATMOBILE_RADIAL_CACHE_MB", "0", 1);
  Evaluation recomputed = evaluate(model, r.pos, r.species, r.cell, r.pbc);
  unsetenv("BATMOBILE_RADIAL_CACHE_MB");
  EXPECT_NEAR(cached.energy, recomputed.energy, 1e-13 * std::fabs(cached.energy));
  EXPECT_LE(rel_err(cached.forces, recomputed.forces), 1e-13);
  EXPECT_LE(rel_err(cached.vatom, recomputed.vatom), 1e-13);
}

// A fused model built with VAR=VALUE against one built without VAR: energy (etol, relative), forces, per-atom energies
// and virials (tol, relative to their largest) on the periodic reference system, whose forces are not all small.
template <class T>
static void expect_env_close(const Reference& r, const char* var, const char* value, double etol, double tol) {
  SCOPED_TRACE(std::string(var) + "=" + value + (sizeof(T) == 4 ? " float" : " double"));
  setenv(var, value, 1);
  Model<T, Exec> with(load(), EdgeBackend::Fused);
  unsetenv(var);
  Model<T, Exec> plain(load(), EdgeBackend::Fused);
  const Evaluation a = evaluate(with, r.pos, r.species, r.cell, r.pbc);
  const Evaluation b = evaluate(plain, r.pos, r.species, r.cell, r.pbc);
  EXPECT_NEAR(a.energy, b.energy, etol * std::fabs(b.energy));
  EXPECT_LE(rel_err(a.forces, b.forces), tol);
  EXPECT_LE(rel_err(a.eatom, b.eatom), tol);
  EXPECT_LE(rel_err(a.vatom, b.vatom), tol);
  double fmax = 0;
  for (double f : b.forces) fmax = std::max(fmax, std::fabs(f));
  EXPECT_GT(fmax, 1e-2);
}

// The fused kernels' A/B switches are read when the model is built: bad values are errors; switching off the
// adjoint register cap (BATMOBILE_ADJ_MIN_BLOCKS=0; the cap applies on device back-ends only) changes registers,
// not arithmetic, and neither the shared-memory carveout (BATMOBILE_SHMEM_CARVEOUT, CUDA only) nor the prepare
// passes per radial chunk (BATMOBILE_BASIS_CHUNK) nor Kokkos's launch instead of our own constant-memory launch
// (BATMOBILE_CONST_SLOTS=0, CUDA) nor the two adjoints one after the other (BATMOBILE_CONCURRENT_ADJOINTS=0; side by
// side is the default, overlapping on CUDA with const slots) change a bit.
TEST(ModelEnv, FusedKernelSwitches) {
  Reference r = read_reference("periodic");
  auto build = [] { Model<float, Exec> m(load(), EdgeBackend::Fused); };
  setenv("BATMOBILE_ADJ_MIN_BLOCKS", "7", 1);
  EXPECT_THROW(build(), std::invalid_argument);
  expect_env_close<float>(r, "BATMOBILE_ADJ_MIN_BLOCKS", "0", 1e-6, 1e-5);
  Model<float, Exec> plain(load(), EdgeBackend::Fused);  // the defaults, compared with below
  const Evaluation b = evaluate(plain, r.pos, r.species, r.cell, r.pbc);
  for (const char* bad : {"9", "abc", "1x"}) {  // atoi read the last two as 0 and 1 before
    setenv("BATMOBILE_RADIAL_MODE", bad, 1);
    EXPECT_THROW(build(), std::invalid_argument) << bad;
  }
  unsetenv("BATMOBILE_RADIAL_MODE");
  // radial mode 3 (opt-in): the radial outputs from a table of each layer's radial MLP, close to the default (mode 2,
  // here mode 1 on host back-ends) to the table's accuracy; table sizes outside 16..65536 are errors
  for (const char* bad : {"8", "100000", "1k"}) {
    setenv("BATMOBILE_RADIAL_TABLE", bad, 1);
    EXPECT_THROW(build(), std::invalid_argument) << bad;
  }
  for (const char* intervals : {"1024", "4096"}) {
    setenv("BATMOBILE_RADIAL_MODE", "3", 1);
    setenv("BATMOBILE_RADIAL_TABLE", intervals, 1);
    Model<float, Exec> table(load(), EdgeBackend::Fused);
    unsetenv("BATMOBILE_RADIAL_MODE");
    unsetenv("BATMOBILE_RADIAL_TABLE");
    const Evaluation t = evaluate(table, r.pos, r.species, r.cell, r.pbc);
    EXPECT_NEAR(t.energy, b.energy, 1e-6 * std::fabs(b.energy)) << intervals;
    EXPECT_LE(rel_err(t.forces, b.forces), 1e-5) << intervals;
    EXPECT_LE(rel_err(t.vatom, b.vatom), 1e-5) << intervals;
    EXPECT_GT(rel_err(t.forces, b.forces), 0.0) << intervals << ": the table was not used";
  }
  for (const char* bad : {"101", "-5", "50%", ""}) {
    setenv("BATMOBILE_SHMEM_CARVEOUT", bad, 1);
    EXPECT_THROW(build(), std::invalid_argument) << bad;
  }
  setenv("BATMOBILE_SHMEM_CARVEOUT", "50", 1);  // a cache split changes no arithmetic: the same numbers
  Model<float, Exec> carved(load(), EdgeBackend::Fused);
  const Evaluation c = evaluate(carved, r.pos, r.species, r.cell, r.pbc);
  unsetenv("BATMOBILE_SHMEM_CARVEOUT");
  EXPECT_EQ(c.energy, b.energy);
  EXPECT_EQ(rel_err(c.forces, b.forces), 0.0);
  for (const char* bad : {"abc", "64x", "-1", "4096"}) {  // atoi read the first three as 0, 64, 0 before
    setenv("BATMOBILE_INTERACTION_TEAM", bad, 1);
    EXPECT_THROW(build(), std::invalid_argument) << bad;
  }
  unsetenv("BATMOBILE_INTERACTION_TEAM");
  for (const char* bad : {"65", "-1", "8x"}) {
    setenv("BATMOBILE_BASIS_CHUNK", bad, 1);
    EXPECT_THROW(build(), std::invalid_argument) << bad;
  }
  // a model built with these variables gives bit for bit the default's results, in two evaluations (the second one
  // uses the other constant-memory slot of each kernel with BATMOBILE_CONST_SLOTS=1)
  auto expect_bitwise_default = [&](std::vector<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) setenv(name, value, 1);
    Model<float, Exec> m(load(), EdgeBackend::Fused);
    for (const auto& [name, value] : vars) unsetenv(name);
    for (int rep = 0; rep < 2; ++rep) {
      const Evaluation e = evaluate(m, r.pos, r.species, r.cell, r.pbc);
      EXPECT_EQ(e.energy, b.energy) << vars.front().first << " rep " << rep;
      EXPECT_EQ(rel_err(e.forces, b.forces), 0.0) << vars.front().first << " rep " << rep;
      EXPECT_EQ(rel_err(e.vatom, b.vatom), 0.0) << vars.front().first << " rep " << rep;
    }
  };
  unsetenv("BATMOBILE_BASIS_CHUNK");
  for (const char* bad : {"-1", "5", "x"}) {  // the test model's H = 12 hidden units: 5 does not divide it
    setenv("BATMOBILE_PREPARE_SPAN", bad, 1);
    EXPECT_THROW(build(), std::invalid_argument) << bad;
  }
  unsetenv("BATMOBILE_PREPARE_SPAN");
  // (host back-ends run one thread per team, which takes all hidden units of an edge whatever the span: this checks
  // that the switch is read and changes nothing there; tests/kernels' Interaction.PrepareSpan checks the GPU paths)
  expect_bitwise_default({{"BATMOBILE_PREPARE_SPAN", "2"}});
  expect_bitwise_default({{"BATMOBILE_PREPARE_SPAN", "1"}});
  // one prepare pass per radial chunk instead of the automatic basis chunks: the same edge order
  expect_bitwise_default({{"BATMOBILE_BASIS_CHUNK", "1"}});
  expect_bitwise_default({{"BATMOBILE_BASIS_CHUNK", "16"}});
  for (const char* bad : {"2", "-1", "on"}) {
    setenv("BATMOBILE_CONST_SLOTS", bad, 1);
    EXPECT_THROW(build(), std::invalid_argument) << bad;
  }
  expect_bitwise_default({{"BATMOBILE_CONST_SLOTS", "0"}});  // Kokkos's launch instead of ours (CUDA): the same code
  for (const char* bad : {"2", "-1", "yes", "1 "}) {
    setenv("BATMOBILE_CONCURRENT_ADJOINTS", bad, 1);
    EXPECT_THROW(build(), std::invalid_argument) << bad;
  }
  // the adjoints one after the other instead of side by side (the default on CUDA, with the const slots): the same
  // accumulators
  expect_bitwise_default({{"BATMOBILE_CONCURRENT_ADJOINTS", "0"}});
  expect_bitwise_default({{"BATMOBILE_CONCURRENT_ADJOINTS", "0"}, {"BATMOBILE_CONST_SLOTS", "0"}});
  expect_bitwise_default({{"BATMOBILE_CONCURRENT_ADJOINTS", "1"}, {"BATMOBILE_CONST_SLOTS", "1"}});
}

// Layer 0 and the last layer through the general kernels (BATMOBILE_EMBEDDING_LAYER=0, BATMOBILE_SCALAR_OUTPUT_LAYER=0)
// instead of the kernels of their layer roles (default: the paths (0, l, l), no dE/dh; the paths (l, l, 0)): the same
// energy, forces, per-atom energies and virials to rounding, float and double; bad values are errors. (The default
// path is the one every reference test checks.)
TEST(ModelEnv, LayerRoleSwitches) {
  Reference r = read_reference("periodic");
  for (const char* var : {"BATMOBILE_EMBEDDING_LAYER", "BATMOBILE_SCALAR_OUTPUT_LAYER"}) {
    for (const char* bad : {"2", "-1", "on"}) {
      setenv(var, bad, 1);
      EXPECT_THROW((Model<float, Exec>(load(), EdgeBackend::Fused)), std::invalid_argument) << var << "=" << bad;
    }
    unsetenv(var);
    expect_env_close<float>(r, var, "0", 1e-5, 1e-5);
    expect_env_close<double>(r, var, "0", 1e-12, 1e-12);
  }
}

// The node kernels take blocks of BATMOBILE_NODE_ATOMS atoms per team (default 4; each weight read once per block;
// 0: automatic, auto_node_atoms). The periodic reference has 9 atoms: blocks of 4 and 2 end with a partial block,
// blocks of 3 do not. Any block size gives the default's results to rounding (only the RMS sums' order differs);
// other values are errors.
TEST(ModelEnv, NodeAtomBlocks) {
  Reference r = read_reference("periodic");
  // the automatic rule (H200: 132 SMs): 648 atoms -> 162, 216 teams of 4, 3 atoms are under 264, 324 of 2 are not
  EXPECT_EQ(auto_node_atoms(648, 132, 4), 2);
  EXPECT_EQ(auto_node_atoms(1053, 132, 4), 4);  // 264 teams
  EXPECT_EQ(auto_node_atoms(1052, 132, 4), 3);  // 263 teams of 4
  EXPECT_EQ(auto_node_atoms(10368, 132, 4), 4);
  EXPECT_EQ(auto_node_atoms(9, 132, 4), 2);     // never below 2
  EXPECT_EQ(auto_node_atoms(9, -1, 4), 4);      // not a GPU
  for (const char* bad : {"-1", "5", "x", ""}) {
    setenv("BATMOBILE_NODE_ATOMS", bad, 1);
    EXPECT_THROW((Model<float, Exec>(load(), EdgeBackend::Fused)), std::invalid_argument) << bad;
  }
  unsetenv("BATMOBILE_NODE_ATOMS");
  // the node kernels' team size is read as strictly (atoi had read "abc" as a team of 1)
  {
    const KeepEnv keep("BATMOBILE_NODE_TEAM");  // (the node_team2 variant of this suite sets it)
    for (const char* bad : {"0", "1025", "abc", "2x"}) {
      setenv("BATMOBILE_NODE_TEAM", bad, 1);
      EXPECT_THROW((Model<float, Exec>(load(), EdgeBackend::Fused)), std::invalid_argument) << bad;
    }
  }
  for (const char* nba : {"0", "1", "2", "3"}) {
    expect_env_close<float>(r, "BATMOBILE_NODE_ATOMS", nba, 1e-5, 1e-5);
    expect_env_close<double>(r, "BATMOBILE_NODE_ATOMS", nba, 1e-12, 1e-12);
  }
}

// The fused kernels' launch switches read strictly, and any accepted value gives the default's results (on host
// back-ends they change nothing: one thread per team; the GPU paths of these team sizes are the kernel tests' 3 C and
// forward_team cases).
TEST(ModelEnv, LaunchSwitches) {
  Reference r = read_reference("periodic");
  for (const auto& [var, bad] : {std::pair<const char*, const char*>{"BATMOBILE_WAVE_TEAMS", "3"},
                                 {"BATMOBILE_WAVE_TEAMS", "-1"}, {"BATMOBILE_FORWARD_TEAM", "2000"},
                                 {"BATMOBILE_FORWARD_TEAM", "x"}}) {
    setenv(var, bad, 1);
    EXPECT_THROW((Model<float, Exec>(load(), EdgeBackend::Fused)), std::invalid_argument) << var << "=" << bad;
    unsetenv(var);
  }
  for (const char* v : {"0", "1", "2"}) expect_env_close<float>(r, "BATMOBILE_WAVE_TEAMS", v, 1e-6, 1e-6);
  expect_env_close<float>(r, "BATMOBILE_FORWARD_TEAM", "96", 1e-6, 1e-6);
  for (const char* v : {"0", "1"}) expect_env_close<float>(r, "BATMOBILE_FEW_ATOMS_TEAM", v, 1e-6, 1e-6);
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
    // below kFewAtoms: one edge slot less, forward and adjoints alike, whatever wave_teams says
    for (int wt : {0, 1, 2})
      for (int C : {16, 32, 128}) {
        EXPECT_EQ(automatic_fused_team(648, C, fwd, wt, true), less);
        EXPECT_EQ(automatic_fused_team(kFewAtoms - 1, C, fwd, wt, true), less);
      }
    // from kFewAtoms (or with the rule off) to kManyAtoms: the forward wave-aware (wave_teams 1), both with 2
    for (int n : {648, kFewAtoms, 1296, kManyAtoms - 1}) {
      const bool few = n >= kFewAtoms;
      EXPECT_EQ(automatic_fused_team(n, 32, fwd, 1, few), fwd ? wave : 0) << n;
      EXPECT_EQ(automatic_fused_team(n, 32, fwd, 2, few), wave) << n;
      EXPECT_EQ(automatic_fused_team(n, 32, fwd, 0, few), 0) << n;
    }
    // many atoms: half the automatic split (64 threads at C = 32), C = 128: automatic
    EXPECT_EQ(automatic_fused_team(kManyAtoms, 32, fwd, 1, true), 64);
    EXPECT_EQ(automatic_fused_team(10368, 32, fwd, 2, false), 64);
    EXPECT_EQ(automatic_fused_team(10368, 128, fwd, 1, true), 0);
  }
}

// The few-atoms rule's scope: unset, the fp32 kernels only (it costs fp64 time on the H200, fused_team_rule.hpp);
// BATMOBILE_FEW_ATOMS_TEAM=0 / 1 turns it off / on for both precisions.
TEST(FusedTeamRule, ByPrecision) {
  using model_detail::few_atoms_rule_on;
  EXPECT_TRUE(few_atoms_rule_on(-1, true));
  EXPECT_FALSE(few_atoms_rule_on(-1, false));
  for (bool fp32 : {true, false}) {
    EXPECT_FALSE(few_atoms_rule_on(0, fp32)) << fp32;
    EXPECT_TRUE(few_atoms_rule_on(1, fp32)) << fp32;
  }
}

// The launch line the pair styles log: one entry per layer; on host back-ends one thread per atom; on GPUs the
// few-atoms rule changes the launch below kFewAtoms local atoms and nothing from there on.
TEST(ModelEnv, LaunchSummary) {
  const KeepEnv keep("BATMOBILE_FEW_ATOMS_TEAM");  // (the default first, whatever the caller's environment says)
  unsetenv("BATMOBILE_FEW_ATOMS_TEAM");
  const Model<float, Exec> fused(load(), EdgeBackend::Fused);
  const int T = fused.hyper().T;
  ASSERT_GE(T, 2);
  const std::string few = fused.launch_summary(648), many = fused.launch_summary(1296);
  EXPECT_NE(few.find("fused kernels for 648 local atoms"), std::string::npos) << few;
  for (int t = 0; t < T; ++t) EXPECT_NE(few.find("layer " + std::to_string(t) + " forward "), std::string::npos) << few;
  EXPECT_EQ(few.find("layer " + std::to_string(T) + " "), std::string::npos) << few;
  const Model<float, Exec> reference(load(), EdgeBackend::Reference);
  EXPECT_EQ(reference.launch_summary(648), "reference edge kernels (per-edge arrays)");
  setenv("BATMOBILE_FEW_ATOMS_TEAM", "0", 1);
  const Model<float, Exec> off(load(), EdgeBackend::Fused);
  EXPECT_EQ(off.launch_summary(1296), many);
  if (kernels::runs_on_host<Exec>) {
    EXPECT_EQ(few.find("threads"), std::string::npos) << few;  // "1 thread" throughout
    EXPECT_EQ(off.launch_summary(648), few);
  } else {
    EXPECT_NE(off.launch_summary(648), few) << few;
  }
  // fp64 kernels: the rule only where asked for (=1); unset, their launch is the one with the rule off
  unsetenv("BATMOBILE_FEW_ATOMS_TEAM");
  const Model<double, Exec> fp64(load(), EdgeBackend::Fused);
  setenv("BATMOBILE_FEW_ATOMS_TEAM", "0", 1);
  const Model<double, Exec> fp64_off(load(), EdgeBackend::Fused);
  setenv("BATMOBILE_FEW_ATOMS_TEAM", "1", 1);
  const Model<double, Exec> fp64_on(load(), EdgeBackend::Fused);
  EXPECT_EQ(fp64.launch_summary(648), fp64_off.launch_summary(648));
  if (!kernels::runs_on_host<Exec>) EXPECT_NE(fp64_on.launch_summary(648), fp64.launch_summary(648));
}

// The sender adjoint over local atoms with their periodic images (BATMOBILE_GROUP_SENDERS=1, the default) gives the
// results of one team per atom incl. ghosts (=0) to rounding (the images' terms are summed in another order), in both
// precisions; bad values are errors. (The CTest variant model_tests_ungrouped_senders runs every model test with 0.)
TEST(ModelEnv, GroupSenders) {
  Reference r = read_reference("periodic");
  const KeepEnv keep("BATMOBILE_GROUP_SENDERS");  // (model_tests_ungrouped_senders sets it for the suite)
  setenv("BATMOBILE_GROUP_SENDERS", "2", 1);
  EXPECT_THROW((Model<float, Exec>(load(), EdgeBackend::Fused)), std::invalid_argument);
  // =0 against the default (unset): to rounding, so the default groups or nothing does; which one is checked next
  expect_env_close<double>(r, "BATMOBILE_GROUP_SENDERS", "0", 1e-13, 1e-12);
  expect_env_close<float>(r, "BATMOBILE_GROUP_SENDERS", "0", 1e-6, 1e-5);
  // a second evaluation (used buffers: grouped, the ghost rows of the input adjoints are neither zeroed nor folded,
  // so stale values there must not matter) against a fresh ungrouped model
  std::vector<double> moved = r.pos;
  for (size_t k = 0; k < moved.size(); ++k) moved[k] += 0.02 * double(int(k % 5) - 2);
  unsetenv("BATMOBILE_GROUP_SENDERS");
  Model<double, Exec> grouped(load(), EdgeBackend::Fused);
  EXPECT_TRUE(grouped.groups_senders());  // the default
  setenv("BATMOBILE_GROUP_SENDERS", "0", 1);
  Model<double, Exec> plain(load(), EdgeBackend::Fused);
  EXPECT_FALSE(plain.groups_senders());
  unsetenv("BATMOBILE_GROUP_SENDERS");
  evaluate(grouped, moved, r.species, r.cell, r.pbc);
  const Evaluation a = evaluate(grouped, r.pos, r.species, r.cell, r.pbc);
  const Evaluation b = evaluate(plain, r.pos, r.species, r.cell, r.pbc);
  EXPECT_NEAR(a.energy, b.energy, 1e-13 * std::fabs(b.energy));
  EXPECT_LE(rel_err(a.forces, b.forces), 1e-12);
  EXPECT_LE(rel_err(a.vatom, b.vatom), 1e-12);
  // grouped, the images' terms are on their atoms' rows and the ghost rows zero (what lets batmobile/kk run with
  // newton off); ungrouped they are not
  EXPECT_EQ(a.ghost_abs, 0.0);
  EXPECT_GT(b.ghost_abs, 0.0);
}

// Switch `var` at 1 and at 0 gives the same energy, forces, per-atom energies and virials bit for bit, in both
// precisions, each model evaluating a displaced geometry first, so that the compared evaluation starts from used
// buffers (rows a switch leaves unset hold the first evaluation's values: a fresh model's zeros would hide a missed
// write); bad values are errors.
static void expect_switch_bit_identical(const Reference& r, const char* var) {
  for (const char* bad : {"2", "x"}) {
    setenv(var, bad, 1);
    EXPECT_THROW((Model<float, Exec>(load(), EdgeBackend::Fused)), std::invalid_argument) << bad;
  }
  unsetenv(var);
  std::vector<double> moved = r.pos;
  for (size_t k = 0; k < moved.size(); ++k) moved[k] += 0.02 * double(int(k % 7) - 3);
  auto second = [&](auto tag, bool on) {
    using T = decltype(tag);
    setenv(var, on ? "1" : "0", 1);
    Model<T, Exec> m(load(), EdgeBackend::Fused);
    unsetenv(var);
    evaluate(m, moved, r.species, r.cell, r.pbc);
    return evaluate(m, r.pos, r.species, r.cell, r.pbc);
  };
  auto same = [](const Evaluation& a, const Evaluation& b) {
    EXPECT_EQ(a.energy, b.energy);
    EXPECT_EQ(a.forces, b.forces);
    EXPECT_EQ(a.eatom, b.eatom);
    EXPECT_EQ(a.vatom, b.vatom);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(a.virial[k], b.virial[k]);
  };
  same(second(float(), true), second(float(), false));
  same(second(double(), true), second(double(), false));
}

// The last layer's node update over l = 0 alone (BATMOBILE_SCALAR_NODE=1, the default; only those rows reach the
// energy) is bit-identical to all degrees (=0). (With the general kernels in the last layer the switch does nothing:
// they read dE/dm and dE/do of every degree.)
TEST(ModelEnv, ScalarNode) { expect_switch_bit_identical(read_reference("periodic"), "BATMOBILE_SCALAR_NODE"); }

// Layer 0's q and k from the per-species table, written by the embedding kernel (BATMOBILE_SPECIES_QK=1, the
// default), are bit-identical to the per-atom projection (=0). (The periodic reference has atoms of every species.)
TEST(ModelEnv, SpeciesQK) { expect_switch_bit_identical(read_reference("periodic"), "BATMOBILE_SPECIES_QK"); }

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
  expect_load_error(g_ref_dir + "/bad_version.pt", "unsupported format version 99");
  expect_load_error(g_ref_dir + "/bad_format.pt", "not a Batmobile model");
  expect_load_error(g_ref_dir + "/bad_units.pt", "units 'real'");
  expect_load_error(g_ref_dir + "/missing_tensor.pt", "missing tensor 'layers.1.mix.Wo2'");
  ModelFile mf = load();
  EXPECT_EQ(mf.hyper.species, (std::vector<std::string>{"O", "H"}));
  EXPECT_EQ(map_species(mf.hyper, {"H", "NULL", "O"}), (std::vector<int>{1, -1, 0}));
  EXPECT_THROW(map_species(mf.hyper, {"O", "C"}), std::runtime_error);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: test_model REFERENCE_DIR\n");
    return 2;
  }
  g_ref_dir = argv[1];
  Kokkos::initialize(argc, argv);
  int rc = RUN_ALL_TESTS();
  Kokkos::finalize();
  return rc;
}
