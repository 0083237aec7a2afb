// filter_candidates (src/model/candidate_graph.hpp) against a naive double loop: a periodic graph built with a
// cutoff plus skin gives the candidates, the filter must keep exactly the pairs at 0 < r < r_c between model atoms, in
// candidate order, with the right count and closest distance.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <random>
#include <vector>

#include "model/candidate_graph.hpp"
#include "model/graph_builder.hpp"

namespace {
using Exec = Kokkos::DefaultExecutionSpace;

struct Case {
  batmobile::HostGraph hg;  // candidates: the graph with cutoff r_c + skin
  double r_c;
};

Case random_case(unsigned seed, double r_c, double skin) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double cell[9] = {9.0, 0, 0, 1.5, 8.5, 0, -0.7, 0.9, 9.5};  // triclinic
  const bool pbc[3] = {true, true, false};
  const int n = 60;
  std::vector<double> pos(3 * n);
  std::vector<int> species(n);
  for (int i = 0; i < n; ++i) {
    const double f[3] = {u(rng), u(rng), u(rng)};
    for (int a = 0; a < 3; ++a) pos[3 * i + a] = f[0] * cell[a] + f[1] * cell[3 + a] + f[2] * cell[6 + a];
    species[i] = i % 7 == 3 ? -1 : i % 2;  // some atoms of no model species
  }
  return {batmobile::build_periodic_graph(pos, species, cell, pbc, r_c + skin), r_c};
}

TEST(CandidateGraph, KeepsExactlyThePairsInsideTheCutoff) {
  for (unsigned seed : {1u, 2u, 3u}) {
    const Case c = random_case(seed, 3.0, 1.0);
    const auto& hg = c.hg;
    // species as the candidates' graph has them, then a naive filter
    std::vector<int> want_off(hg.n_local + 1, 0), want;
    double want_min = 1e300;
    for (int i = 0; i < hg.n_local; ++i) {
      for (int e = hg.recv_offsets[i]; e < hg.recv_offsets[i + 1]; ++e) {
        const int j = hg.senders[e];
        double rsq = 0;
        for (int a = 0; a < 3; ++a) rsq += (hg.x[3 * j + a] - hg.x[3 * i + a]) * (hg.x[3 * j + a] - hg.x[3 * i + a]);
        if (hg.species[i] >= 0 && hg.species[j] >= 0 && rsq > 0 && rsq < c.r_c * c.r_c) {
          want.push_back(j);
          want_min = std::min(want_min, rsq);
        }
      }
      want_off[i + 1] = static_cast<int>(want.size());
    }
    ASSERT_GT(want.size(), 100u);
    ASSERT_LT(want.size(), hg.senders.size());  // the skin gave candidates beyond r_c
    // device: positions and species from the host graph, candidates = its edges
    batmobile::Graph<Exec> g = batmobile::upload_graph<Exec>(hg);
    batmobile::CandidateList<Exec> cand;
    cand.n_local = hg.n_local;
    cand.n_candidates = static_cast<int>(hg.senders.size());
    cand.offsets = g.recv_offsets;
    cand.atoms = g.senders;
    g.recv_offsets = decltype(g.recv_offsets)("roff", hg.n_local + 1);
    g.senders = decltype(g.senders)("snd", cand.n_candidates);
    Kokkos::View<int*, Exec> count("count", hg.n_local + 1);
    Kokkos::View<double[2], Exec> stats("stats");
    batmobile::filter_candidates(cand, c.r_c, g, count, stats);
    auto off = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.recv_offsets);
    auto snd = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.senders);
    auto st = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), stats);
    for (int i = 0; i <= hg.n_local; ++i) ASSERT_EQ(off(i), want_off[i]) << "receiver " << i << " seed " << seed;
    for (size_t e = 0; e < want.size(); ++e) ASSERT_EQ(snd(e), want[e]) << "edge " << e << " seed " << seed;
    EXPECT_EQ(st(1), static_cast<double>(want.size()));
    EXPECT_DOUBLE_EQ(st(0), want_min);
    EXPECT_EQ(g.n_edges, cand.n_candidates);
    EXPECT_TRUE(g.n_edges_is_bound);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  Kokkos::finalize();
  return rc;
}
