/* -*- c++ -*- ----------------------------------------------------------
   Batmobile: the edges 0 < r < r_c between model atoms, cut from LAMMPS's full KOKKOS neighbour list on the device
   (PairBatmobileKokkos::build_graph: count per receiver, scan, fill; the same filter and order as the CPU style).
   `team` threads per local atom: 1 walks each atom's neighbours in one thread over a range of atoms (on GPUs the
   threads of a warp then read consecutive atoms' neighbours, which LAMMPS's CUDA layout stores side by side); more
   split one atom's neighbours over a team (count: team reduction; fill: ordered team scan). Same edges, same order.
------------------------------------------------------------------------- */

#ifndef LMP_PAIR_BATMOBILE_KOKKOS_EDGES_H
#define LMP_PAIR_BATMOBILE_KOKKOS_EDGES_H

#include <Kokkos_Core.hpp>

namespace LAMMPS_NS {
namespace batmobile_kk {

// Neighbour jj of local atom i: its index where both are model atoms (species >= 0) and 0 < r^2 < rcsq, else -1;
// r^2 in rsq.
template <class X, class Species, class Neighbors>
struct EdgeFilter {
  X x;
  Species species;
  Neighbors neighbors;
  double rcsq;
  int mask;  // LAMMPS's NEIGHMASK
  KOKKOS_INLINE_FUNCTION int operator()(int i, int jj, double &rsq) const {
    const int j = neighbors(i, jj) & mask;
    if (species(j) < 0) return -1;
    const double dx = x(j, 0) - x(i, 0), dy = x(j, 1) - x(i, 1), dz = x(j, 2) - x(i, 2);
    rsq = dx * dx + dy * dy + dz * dz;
    return rsq < rcsq && rsq > 0.0 ? j : -1;
  }
};

// count(i + 1) = the kept neighbours of each model atom i = ilist(ii), ii < inum (other rows untouched); the
// closest kept r^2 reduced into `closest` (a View the kernel writes: the host does not wait).
template <class Exec, class Filter, class IList, class NumNeigh, class Count, class Closest>
void count_edges(int inum, int team, const Filter &keep, const IList &ilist, const NumNeigh &numneigh,
                 const Count &count, const Closest &closest) {
  using MemSpace = typename Closest::memory_space;
  const auto species = keep.species;
  if (team == 1) {
    Kokkos::parallel_reduce(
        "bm_kk_count", Kokkos::RangePolicy<Exec>(0, inum),
        KOKKOS_LAMBDA(int ii, double &mind) {
          const int i = ilist(ii);
          if (species(i) < 0) return;
          int c = 0;
          double rsq = 0;
          for (int jj = 0; jj < numneigh(i); ++jj)
            if (keep(i, jj, rsq) >= 0) {
              ++c;
              if (rsq < mind) mind = rsq;
            }
          count(i + 1) = c;
        },
        Kokkos::Min<double, MemSpace>(closest));
    return;
  }
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  // min over every thread's own candidates: a team-policy reduction joins all threads' values
  Kokkos::parallel_reduce(
      "bm_kk_count", Kokkos::TeamPolicy<Exec>(inum, team),
      KOKKOS_LAMBDA(const Member &m, double &mind) {
        const int i = ilist(m.league_rank());
        if (species(i) < 0) return;
        int c = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, numneigh(i)),
            [&](int jj, int &cc) {
              double rsq = 0;
              if (keep(i, jj, rsq) < 0) return;
              ++cc;
              if (rsq < mind) mind = rsq;
            },
            c);
        if (m.team_rank() == 0) count(i + 1) = c;
      },
      Kokkos::Min<double, MemSpace>(closest));
}

// senders(roff(i) + s) = the s-th kept neighbour of each model atom i, in neighbour-list order.
template <class Exec, class Filter, class IList, class NumNeigh, class Offsets, class Senders>
void fill_edges(int inum, int team, const Filter &keep, const IList &ilist, const NumNeigh &numneigh,
                const Offsets &roff, const Senders &senders) {
  const auto species = keep.species;
  if (team == 1) {
    Kokkos::parallel_for(
        "bm_kk_fill", Kokkos::RangePolicy<Exec>(0, inum), KOKKOS_LAMBDA(int ii) {
          const int i = ilist(ii);
          if (species(i) < 0) return;
          int e = roff(i);
          double rsq = 0;
          for (int jj = 0; jj < numneigh(i); ++jj) {
            const int j = keep(i, jj, rsq);
            if (j >= 0) senders(e++) = j;
          }
        });
    return;
  }
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  // ordered team scan: each kept neighbour's slot is the number of kept neighbours before it
  Kokkos::parallel_for(
      "bm_kk_fill", Kokkos::TeamPolicy<Exec>(inum, team), KOKKOS_LAMBDA(const Member &m) {
        const int i = ilist(m.league_rank());
        if (species(i) < 0) return;
        const int e0 = roff(i);
        Kokkos::parallel_scan(Kokkos::TeamThreadRange(m, numneigh(i)), [&](int jj, int &slot, bool final) {
          double rsq = 0;
          const int j = keep(i, jj, rsq);
          if (j < 0) return;
          if (final) senders(e0 + slot) = j;
          ++slot;
        });
      });
}

}    // namespace batmobile_kk
}    // namespace LAMMPS_NS

#endif
