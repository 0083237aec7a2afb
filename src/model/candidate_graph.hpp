// The model's graph from a candidate neighbour list on the device: a host code (e.g. a LAMMPS pair style without the
// KOKKOS package) uploads its neighbour list, cutoff plus skin, once per re-neighbouring; every step keeps the pairs
// at 0 < r < r_c, in candidate order, with no per-step host work and no host wait.
#pragma once
#include <Kokkos_Core.hpp>

#include "kernels/common.hpp"
#include "model/model.hpp"

namespace batmobile {

template <class ExecSpace>
struct CandidateList {
  int n_local = 0;
  int n_candidates = 0;                   // offsets(n_local), known on the host
  Kokkos::View<int*, ExecSpace> offsets;  // n_local + 1: receiver i's candidates are [offsets(i), offsets(i + 1))
  Kokkos::View<int*, ExecSpace> atoms;    // candidate senders, each < Graph::n_all
};

// graph.x and graph.species hold this step's positions and species (-1: not a model atom, never an edge); fills
// graph.recv_offsets and graph.senders (capacity at least n_candidates) and sets n_edges to n_candidates as a bound.
// stats(0): closest squared distance of a kept pair (Kokkos's Min identity, the largest double, where there is none),
// stats(1): the number of kept pairs. count: n_local + 1 scratch entries.
template <class ExecSpace>
void filter_candidates(const CandidateList<ExecSpace>& cand, double r_c, Graph<ExecSpace>& graph,
                       Kokkos::View<int*, ExecSpace> count, Kokkos::View<double[2], ExecSpace> stats) {
  using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename TeamPolicy::member_type;
  using MemSpace = typename ExecSpace::memory_space;
  // a warp per receiver on GPUs: one thread per receiver left most lanes idle on the short candidate rows
  const int team = kernels::runs_on_host<ExecSpace> ? 1 : 32;
  const int nl = cand.n_local;
  const double rcsq = r_c * r_c;
  auto x = graph.x;
  auto sp = graph.species;
  auto off = cand.offsets;
  auto atoms = cand.atoms;
  Kokkos::parallel_for(
      "bm_candidates_zero", Kokkos::RangePolicy<ExecSpace>(0, 1), KOKKOS_LAMBDA(int) { count(0) = 0; });
  const Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> closest(stats.data());
  Kokkos::parallel_reduce(
      "bm_candidates_count", TeamPolicy(nl, team),
      KOKKOS_LAMBDA(const Member& m, double& mind) {
        const int i = m.league_rank();
        int c = 0;
        if (sp(i) >= 0)
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(m, off(i), off(i + 1)),
              [&](int q, int& cc) {
                const int j = atoms(q);
                const double dx = x(j, 0) - x(i, 0), dy = x(j, 1) - x(i, 1), dz = x(j, 2) - x(i, 2);
                const double rsq = dx * dx + dy * dy + dz * dz;
                if (sp(j) >= 0 && rsq < rcsq && rsq > 0.0) {
                  ++cc;
                  if (rsq < mind) mind = rsq;
                }
              },
              c);
        if (m.team_rank() == 0) count(i + 1) = c;
      },
      Kokkos::Min<double, MemSpace>(closest));
  auto roff = graph.recv_offsets;
  Kokkos::parallel_scan(
      "bm_candidates_scan", Kokkos::RangePolicy<ExecSpace>(0, nl + 1), KOKKOS_LAMBDA(int i, int& acc, bool final) {
        acc += count(i);
        if (final) {
          roff(i) = acc;
          if (i == nl) stats(1) = acc;
        }
      });
  auto snd = graph.senders;
  Kokkos::parallel_for(
      "bm_candidates_fill", TeamPolicy(nl, team), KOKKOS_LAMBDA(const Member& m) {
        const int i = m.league_rank();
        if (sp(i) < 0) return;
        const int e0 = roff(i);
        Kokkos::parallel_scan(Kokkos::TeamThreadRange(m, off(i), off(i + 1)), [&](int q, int& slot, bool final) {
          const int j = atoms(q);
          const double dx = x(j, 0) - x(i, 0), dy = x(j, 1) - x(i, 1), dz = x(j, 2) - x(i, 2);
          const double rsq = dx * dx + dy * dy + dz * dz;
          if (sp(j) >= 0 && rsq < rcsq && rsq > 0.0) {
            if (final) snd(e0 + slot) = j;
            ++slot;
          }
        });
      });
  graph.n_local = nl;
  graph.n_edges = cand.n_candidates;
  graph.n_edges_is_bound = true;
  graph.senders_in_range = true;
}

}  // namespace batmobile
