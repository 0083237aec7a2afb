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

// One receiver's kept neighbours and their closest r^2; the scan sums the counts and takes the least distance.
struct EdgeTally {
  int n;
  double closest;
  KOKKOS_INLINE_FUNCTION void add(int n_more, double closest_more) {
    n += n_more;
    if (closest_more < closest) closest = closest_more;
  }
};

// tally(i + 1) = the kept neighbours of each model atom i = ilist(ii), ii < inum, and the closest of them (other
// rows untouched). No reduction across atoms here: the scan below takes the least distance on its way.
template <class Exec, class Filter, class IList, class NumNeigh, class Tally>
void count_edges(int inum, int team, const Filter &keep, const IList &ilist, const NumNeigh &numneigh,
                 const Tally &tally) {
  const auto species = keep.species;
  if (team == 1) {
    Kokkos::parallel_for(
        "bm_kk_count", Kokkos::RangePolicy<Exec>(0, inum), KOKKOS_LAMBDA(int ii) {
          const int i = ilist(ii);
          if (species(i) < 0) return;
          EdgeTally t{0, Kokkos::reduction_identity<double>::min()};
          double rsq = 0;
          for (int jj = 0; jj < numneigh(i); ++jj)
            if (keep(i, jj, rsq) >= 0) t.add(1, rsq);
          tally(i + 1) = t;
        });
    return;
  }
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      "bm_kk_count", Kokkos::TeamPolicy<Exec>(inum, team), KOKKOS_LAMBDA(const Member &m) {
        const int i = ilist(m.league_rank());
        if (species(i) < 0) return;
        int c = 0;
        double mind = Kokkos::reduction_identity<double>::min();  // this thread's candidates, then the team's
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, numneigh(i)),
            [&](int jj, int &cc) {
              double rsq = 0;
              if (keep(i, jj, rsq) < 0) return;
              ++cc;
              if (rsq < mind) mind = rsq;
            },
            c);
        m.team_reduce(Kokkos::Min<double, Kokkos::AnonymousSpace>(mind));
        if (m.team_rank() == 0) tally(i + 1) = EdgeTally{c, mind};
      });
}

// roff(i) = the edges of receivers before atom i (tally(0) is empty), i <= last; the total count and the closest
// r^2 of all into stats(1) and stats(0).
template <class Tally, class Offsets, class Stats>
struct EdgeScan {
  using value_type = EdgeTally;
  Tally tally;
  Offsets roff;
  Stats stats;
  int last;
  KOKKOS_INLINE_FUNCTION void init(value_type &v) const { v = {0, Kokkos::reduction_identity<double>::min()}; }
  KOKKOS_INLINE_FUNCTION void join(value_type &a, const value_type &b) const { a.add(b.n, b.closest); }
  KOKKOS_INLINE_FUNCTION void join(volatile value_type &a, const volatile value_type &b) const {
    a.n += b.n;
    if (b.closest < a.closest) a.closest = b.closest;
  }
  KOKKOS_INLINE_FUNCTION void operator()(int i, value_type &acc, bool final) const {
    const EdgeTally t = tally(i);
    acc.add(t.n, t.closest);
    if (!final) return;
    roff(i) = acc.n;
    if (i == last) {
      stats(0) = acc.closest;
      stats(1) = acc.n;
    }
  }
};

template <class Exec, class Tally, class Offsets, class Stats>
void scan_edges(int nlocal, const Tally &tally, const Offsets &roff, const Stats &stats) {
  Kokkos::parallel_scan("bm_kk_scan", Kokkos::RangePolicy<Exec>(0, nlocal + 1),
                        EdgeScan<Tally, Offsets, Stats>{tally, roff, stats, nlocal});
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
