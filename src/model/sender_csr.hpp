// Sender-grouped CSR of a receiver-grouped edge list, built on the device (used by Model::compute; its own
// header so that tests can check it directly).
//   build_sender_csr(nl, na, roff, snd, erecv, soff, sedge, fill, team_size, check, cap, image_owner)
//     in:  roff (nl + 1) receiver offsets, snd (n_edges = roff(nl)) sender of each edge (0 <= snd < na)
//     out: erecv (n_edges) receiver of each edge; soff (na + 1) sender offsets; sedge (n_edges) edge ids grouped by
//          sender, increasing within each sender; fill (na) is workspace. team_size: threads per atom (1 on hosts);
//          cap: longest segment sorted in team scratch (longer ones: insertion sort).
//     image_owner (na - nl; optional): ghost g = nl + k is a periodic image of local atom image_owner(k); then the
//          edges are grouped by that atom instead (nl groups, soff (nl + 1): kernels::Graph::n_send = nl).
//     check: count out-of-range sender indices and throw std::runtime_error if there are any (the host waits for
//     that count); without it such edges are left out of the sender lists (for callers that guarantee the range).
//     The host needs no edge count: every kernel runs over receivers or senders (arrays of at least n_edges).
#pragma once
#include <Kokkos_Core.hpp>
#include <stdexcept>

namespace batmobile {

// Integer counters only (index bookkeeping, not the physics kernels); sorting each sender's segment by edge id makes
// the order -- and every floating-point sum over it -- the same on every run.
// (A free function: CUDA forbids extended lambdas in private member functions.)
template <class ExecSpace>
void build_sender_csr(int nl, int na, const Kokkos::View<int*, ExecSpace>& roff,
                      const Kokkos::View<int*, ExecSpace>& snd, const Kokkos::View<int*, ExecSpace>& erecv,
                      const Kokkos::View<int*, ExecSpace>& soff, const Kokkos::View<int*, ExecSpace>& sedge,
                      const Kokkos::View<int*, ExecSpace>& fill, int team_size, bool check = true,
                      int cap = 1024, const Kokkos::View<const int*, ExecSpace>& image_owner = {},
                      bool offsets_zeroed = false) {
  using Policy = Kokkos::RangePolicy<ExecSpace>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using ScratchI = Kokkos::View<int*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  // groups: one per sender, or one per local atom with its images (image_owner)
  const bool by_owner = image_owner.extent(0) > 0;
  if (by_owner && image_owner.extent(0) != size_t(na - nl))
    throw std::invalid_argument("build_sender_csr: image_owner must hold na - nl entries");
  const int ng = by_owner ? nl : na;
  auto group = KOKKOS_LAMBDA(int j) { return by_owner && j >= nl ? image_owner(j - nl) : j; };
  // (on the execution space: the plain deep_copy(view, value) fences)
  if (!offsets_zeroed) Kokkos::deep_copy(ExecSpace(), Kokkos::subview(soff, Kokkos::make_pair(0, ng + 1)), 0);
  // a team per receiver, its threads over the receiver's edges (one thread per receiver left GPUs latency-bound);
  // returns the receiver's number of out-of-range senders
  auto count = KOKKOS_LAMBDA(const Member& team) {
    const int i = team.league_rank();
    int tb = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, roff(i), roff(i + 1)),
        [&](int e, int& b) {
          erecv(e) = i;
          const int j = snd(e);
          if (j < 0 || j >= na) {
            ++b;
            return;
          }
          Kokkos::atomic_inc(&soff(group(j) + 1));
        },
        tb);
    return tb;
  };
  const Kokkos::TeamPolicy<ExecSpace> per_receiver(nl, team_size);
  if (check) {  // a reduction into a host value: the host waits for it
    int bad = 0;
    Kokkos::parallel_reduce(
        "bm_csr_count", per_receiver,
        KOKKOS_LAMBDA(const Member& team, int& nbad) {
          const int tb = count(team);
          Kokkos::single(Kokkos::PerTeam(team), [&]() { nbad += tb; });
        },
        bad);
    if (bad) throw std::runtime_error("Batmobile model: sender index out of range");
  } else {
    Kokkos::parallel_for(
        "bm_csr_count", per_receiver, KOKKOS_LAMBDA(const Member& team) { (void)count(team); });
  }
  Kokkos::parallel_scan(
      "bm_csr_scan", Policy(0, ng + 1), KOKKOS_LAMBDA(int j, int& acc, bool final) {
        acc += soff(j);
        if (final) {
          soff(j) = acc;
          if (j < ng) fill(j) = 0;
        }
      });
  Kokkos::parallel_for(
      "bm_csr_fill", per_receiver, KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, roff(i), roff(i + 1)), [&](int e) {
          const int j = snd(e);
          if (j < 0 || j >= na) return;  // (only possible unchecked)
          const int gj = group(j);
          sedge(soff(gj) + Kokkos::atomic_fetch_add(&fill(gj), 1)) = e;
        });
      });
  // Each sender's edges in increasing edge order, so that every sum over them has a fixed order. A team per
  // sender: each edge id's rank among the segment's (distinct) ids is its place; segments longer than the team
  // scratch, or one-thread teams (host back-ends), use an insertion sort.
  Kokkos::parallel_for(
      "bm_csr_sort",
      Kokkos::TeamPolicy<ExecSpace>(ng, team_size).set_scratch_size(0, Kokkos::PerTeam(ScratchI::shmem_size(cap))),
      KOKKOS_LAMBDA(const Member& team) {
        const int j = team.league_rank(), s0 = soff(j), n = soff(j + 1) - s0;
        if (n <= 1) return;
        if (n > cap || team.team_size() == 1) {
          Kokkos::single(Kokkos::PerTeam(team), [&]() {
            for (int a = s0 + 1; a < s0 + n; ++a) {
              const int v = sedge(a);
              int b = a - 1;
              while (b >= s0 && sedge(b) > v) {
                sedge(b + 1) = sedge(b);
                --b;
              }
              sedge(b + 1) = v;
            }
          });
          return;
        }
        ScratchI ids(team.team_scratch(0), n);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](int a) { ids(a) = sedge(s0 + a); });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](int a) {
          const int v = ids(a);
          int rank = 0;
          for (int b = 0; b < n; ++b) rank += ids(b) < v;
          sedge(s0 + rank) = v;
        });
      });
}

}  // namespace batmobile
