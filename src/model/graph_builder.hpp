// Stand-alone neighbour graph with periodic images as ghost atoms (tests and tools; LAMMPS builds its own).
#pragma once
#include <Kokkos_Core.hpp>
#include <vector>

#include "model/model.hpp"

namespace batmobile {

struct HostGraph {
  int n_local = 0, n_all = 0;
  std::vector<double> x;          // n_all * 3
  std::vector<int> species;       // n_all
  std::vector<int> ghost_owner;   // n_all - n_local
  std::vector<int> recv_offsets;  // n_local + 1
  std::vector<int> senders;       // edges, receiver-grouped
};

// cell: rows are the lattice vectors a, b, c; pbc per direction. Ghosts are the periodic images within r_c of an
// owned atom. Throws if any pair is closer than min_distance (> 0 to check).
HostGraph build_periodic_graph(const std::vector<double>& pos, const std::vector<int>& species, const double cell[9],
                               const bool pbc[3], double r_c);

template <class ExecSpace>
Graph<ExecSpace> upload_graph(const HostGraph& hg) {
  Graph<ExecSpace> g;
  g.n_local = hg.n_local;
  g.n_all = hg.n_all;
  g.x = decltype(g.x)("bm_x", hg.n_all);
  g.species = decltype(g.species)("bm_species", hg.n_all);
  g.recv_offsets = decltype(g.recv_offsets)("bm_roff", hg.n_local + 1);
  g.senders = decltype(g.senders)("bm_senders", hg.senders.size());
  auto hx = Kokkos::create_mirror_view(g.x);
  auto hs = Kokkos::create_mirror_view(g.species);
  auto ho = Kokkos::create_mirror_view(g.recv_offsets);
  auto hn = Kokkos::create_mirror_view(g.senders);
  for (int n = 0; n < hg.n_all; ++n) {
    for (int a = 0; a < 3; ++a) hx(n, a) = hg.x[3 * n + a];
    hs(n) = hg.species[n];
  }
  for (int i = 0; i <= hg.n_local; ++i) ho(i) = hg.recv_offsets[i];
  for (size_t e = 0; e < hg.senders.size(); ++e) hn(e) = hg.senders[e];
  Kokkos::deep_copy(g.x, hx);
  Kokkos::deep_copy(g.species, hs);
  Kokkos::deep_copy(g.recv_offsets, ho);
  Kokkos::deep_copy(g.senders, hn);
  return g;
}

}  // namespace batmobile
