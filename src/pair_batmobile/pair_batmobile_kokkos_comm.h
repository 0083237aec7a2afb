/* -*- c++ -*- ----------------------------------------------------------
   batmobile/kk's own ghost exchange of node features on several MPI ranks (comm_style brick): LAMMPS's
   CommBrick swap pattern replayed on the style's Kokkos views, independent of LAMMPS's comm/pair flags.

   LAMMPS 29Sep2021 offers a pair style only (a) host forward/reverse pair communication with double buffers
   and (b) a device forward path (CommKokkos::forward_comm_pair_device) that it switches off on GPUs whenever
   MPI is not GPU-aware, and no device reverse path at all. Through (a) every layer copied the whole
   n_all x K*C feature array device -> host -> device twice. Here the rows of each swap are packed on the
   device into a buffer of the model precision (float stays float), sent with MPI (device buffers directly
   with GPU-aware MPI or on host execution spaces, otherwise host copies of the buffers only), and unpacked on
   the device; a swap with the rank itself is one device copy.

   The plan (which rows go where) is CommBrick's: nswap, sendproc/recvproc, sendnum/recvnum, firstrecv and the
   per-swap sendlists, re-read (sendlists uploaded as one flat device index view) whenever LAMMPS has
   re-neighboured or the atom counts changed. No style macro here: not a style header.

   Tested on host Kokkos builds on 2 and 4 MPI ranks (tests/lammps), staged and direct (mpi_buffers).
------------------------------------------------------------------------- */
#ifndef LMP_PAIR_BATMOBILE_KOKKOS_COMM_H
#define LMP_PAIR_BATMOBILE_KOKKOS_COMM_H

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "atom.h"
#include "comm_brick.h"
#include "comm_kokkos.h"
#include "kokkos.h"
#include "lammps.h"
#include "model/model.hpp"
#include "neighbor.h"
#include "pair_batmobile_common.h"

namespace LAMMPS_NS {
namespace batmobile_kk {

// Exchanges of one compute(), by the route their data took (the pair's pvector, see pair_batmobile_kokkos.h).
struct ExchangeCounts {
  int swap_forward = 0, swap_reverse = 0;      // calls of SwapGhostExchange::forward / reverse
  int lammps_forward = 0, lammps_reverse = 0;  // exchanges through LAMMPS's pair communication (host callbacks)
  int self_swaps = 0;                          // SwapGhostExchange swaps with the rank itself (no MPI)
  int mpi_direct = 0;                          // ... swaps with MPI on the device buffers themselves
  int mpi_staged = 0;                          // ... swaps with MPI through host copies of the buffers
};

// CommBrick keeps its swap plan protected. A class derived from CommBrick may name those members, and
// `&CommBrickPlan::sendproc` is then a pointer to a member of CommBrick (type `int *CommBrick::*`), which can be
// applied to any CommBrick object (`brick->*ptr`). That is standard C++ and needs no change to LAMMPS and no
// copy of its class layout. The class is never instantiated.
struct CommBrickPlan : CommBrick {
  static auto nswap_ptr() { return &CommBrickPlan::nswap; }
  static auto sendproc_ptr() { return &CommBrickPlan::sendproc; }
  static auto recvproc_ptr() { return &CommBrickPlan::recvproc; }
  static auto sendnum_ptr() { return &CommBrickPlan::sendnum; }
  static auto recvnum_ptr() { return &CommBrickPlan::recvnum; }
  static auto firstrecv_ptr() { return &CommBrickPlan::firstrecv; }
  static auto sendlist_ptr() { return &CommBrickPlan::sendlist; }
};
// CommKokkos builds the sendlists on the device where it does borders there; its host copy (CommBrick's
// sendlist rows point into it) must then be synchronised before it is read. Same idiom.
struct CommKokkosPlan : CommKokkos {
  static auto k_sendlist_ptr() { return &CommKokkosPlan::k_sendlist; }
};

// Row maps of the copy kernel: a contiguous range of rows, or rows named by a slice of the flat send index.
struct RangeRows {
  int first;
  KOKKOS_INLINE_FUNCTION int operator()(int q) const { return first + q; }
};
template <class Exec>
struct ListedRows {
  Kokkos::View<const int *, Exec> index;
  int offset;
  KOKKOS_INLINE_FUNCTION int operator()(int q) const { return index(offset + q); }
};

// dst(drow(q), x) = (or +=) src(srow(q), x) for q < n, x < width, one value per thread so that neighbouring GPU
// threads touch neighbouring values. Callers guarantee that no destination row occurs twice and that source and
// destination rows do not overlap (then plain writes and += are race-free without atomics).
template <class Exec, bool Add, class Dst, class DstRows, class Src, class SrcRows>
void copy_rows(const char *label, int n, Dst dst, DstRows drow, Src src, SrcRows srow)
{
  const int w = static_cast<int>(dst.extent(1));
  if (n <= 0 || w <= 0) return;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec>(0, n * w), KOKKOS_LAMBDA(int k) {
        const int q = k / w, x = k - q * w;
        if (Add)
          dst(drow(q), x) += src(srow(q), x);
        else
          dst(drow(q), x) = src(srow(q), x);
      });
}

// CommBrick's swap plan on the device.
template <class Exec>
class SwapPlan {
 public:
  int nswap = 0, me = 0, nlocal = -1, nghost = -1;
  std::vector<int> sendproc, recvproc, sendnum, recvnum, firstrecv;
  std::vector<int> send_offset;           // swap s sends index(send_offset[s] .. + sendnum[s] - 1)
  Kokkos::View<int *, Exec> index;        // every swap's sendlist, one after the other (grows only)

  // Re-reads the plan where LAMMPS may have rebuilt it: at re-neighbouring (neighbor->ago == 0: exchange and
  // borders ran this step) or when the atom counts differ from the last read. Throws on a communication
  // that is not CommBrick (comm_style tiled) or on a plan that breaks the assumptions of the kernels.
  void update(LAMMPS *lmp)
  {
    Atom *atom = lmp->atom;
    if (valid_ && lmp->neighbor->ago != 0 && nlocal == atom->nlocal && nghost == atom->nghost) return;
    auto *brick = dynamic_cast<CommBrick *>(lmp->comm);
    if (!brick) throw std::runtime_error("the device swap exchange needs comm_style brick");
    if (auto *ck = dynamic_cast<CommKokkos *>(brick)) (ck->*CommKokkosPlan::k_sendlist_ptr()).sync<LMPHostType>();
    valid_ = false;
    me = lmp->comm->me;
    nlocal = atom->nlocal;
    nghost = atom->nghost;
    nswap = brick->*CommBrickPlan::nswap_ptr();
    auto read = [&](int *CommBrick::*member, std::vector<int> &v) {
      const int *p = brick->*member;
      v.assign(p, p + nswap);
    };
    read(CommBrickPlan::sendproc_ptr(), sendproc);
    read(CommBrickPlan::recvproc_ptr(), recvproc);
    read(CommBrickPlan::sendnum_ptr(), sendnum);
    read(CommBrickPlan::recvnum_ptr(), recvnum);
    read(CommBrickPlan::firstrecv_ptr(), firstrecv);
    int **lists = brick->*CommBrickPlan::sendlist_ptr();
    send_offset.assign(nswap + 1, 0);
    for (int s = 0; s < nswap; ++s) send_offset[s + 1] = send_offset[s] + sendnum[s];
    const size_t total = send_offset[nswap];
    if (index.extent(0) < total) index = Kokkos::View<int *, Exec>("bm_kk_swap_index", batmobile_pair::grow_capacity(total));
    auto h_index = Kokkos::create_mirror_view(index);
    // stamp[row] == s + 1: row already listed in swap s
    std::vector<int> stamp(static_cast<size_t>(nlocal) + nghost, 0);
    const int nall = nlocal + nghost;
    for (int s = 0; s < nswap; ++s) {
      if (firstrecv[s] < nlocal || recvnum[s] < 0 || firstrecv[s] + recvnum[s] > nall)
        throw std::runtime_error("swap " + std::to_string(s) + " receives rows outside the ghost range");
      if (sendproc[s] == me && sendnum[s] != recvnum[s])
        throw std::runtime_error("swap " + std::to_string(s) + " with the rank itself sends " +
                                 std::to_string(sendnum[s]) + " rows but receives " + std::to_string(recvnum[s]));
      for (int q = 0; q < sendnum[s]; ++q) {
        const int row = lists[s][q];
        // CommBrick::borders lists each atom at most once per swap, and only atoms that existed before the swap
        // (rows < firstrecv[s]): the reverse unpack adds with plain += (no two threads share a row), and a swap
        // with the rank itself copies between disjoint rows. Checked here, once per re-neighbouring.
        if (row < 0 || row >= firstrecv[s] || stamp[row] == s + 1)
          throw std::runtime_error("swap " + std::to_string(s) + " sendlist entry " + std::to_string(row) +
                                   " is repeated or not below the swap's first received row " +
                                   std::to_string(firstrecv[s]));
        stamp[row] = s + 1;
        h_index(send_offset[s] + q) = row;
      }
    }
    Kokkos::deep_copy(index, h_index);
    valid_ = true;
  }

 private:
  bool valid_ = false;
};

// GhostExchange (src/model/model.hpp) over the swap plan: forward in swap order (later swaps pass on rows that
// earlier swaps received), reverse in the opposite order with the adjoints added onto the sent rows, then the
// ghost rows cleared. MPI exchanges as CommBrick::forward_comm_pair / reverse_comm_pair: Irecv, Send, Wait.
template <class T, class Exec>
class SwapGhostExchange : public batmobile::GhostExchange<T, Exec> {
 public:
  using typename batmobile::GhostExchange<T, Exec>::FeatureView;
  using Buffer = Kokkos::View<T **, Kokkos::LayoutRight, Exec>;

  SwapGhostExchange(LAMMPS *lmp, const SwapPlan<Exec> *plan, ExchangeCounts *counts) :
      lmp_(lmp), plan_(plan), counts_(counts) {}

  // mpi_buffers host: every MPI message through host copies of the buffers, the route for MPI without GPU-aware
  // support, also where MPI could read the buffers in place
  bool force_host_buffers = false;

  // Whether MPI gets host copies of the buffers: asked for, or device buffers that LAMMPS was not told MPI can read
  // (package kokkos gpu/aware on, LAMMPS's default unless it detects otherwise).
  bool stages_through_host() const
  {
    return force_host_buffers || !(host_buffers || (lmp_->kokkos && lmp_->kokkos->gpu_aware_flag));
  }

  void forward(FeatureView h) override
  {
    const SwapPlan<Exec> &p = *plan_;
    ++counts_->swap_forward;
    for (int s = 0; s < p.nswap; ++s) {
      const ListedRows<Exec> sent{p.index, p.send_offset[s]};
      const RangeRows received{p.firstrecv[s]};
      if (p.sendproc[s] == p.me) {
        copy_rows<Exec, false>("bm_kk_swap_self_forward", p.sendnum[s], h, received, h, sent);
        ++counts_->self_swaps;
        continue;
      }
      reserve(std::max(p.sendnum[s], p.recvnum[s]), static_cast<int>(h.extent(1)));
      copy_rows<Exec, false>("bm_kk_swap_pack_forward", p.sendnum[s], send_, RangeRows{0}, h, sent);
      transfer(p.sendproc[s], p.sendnum[s], p.recvproc[s], p.recvnum[s], static_cast<int>(h.extent(1)));
      copy_rows<Exec, false>("bm_kk_swap_unpack_forward", p.recvnum[s], h, received, recv_, RangeRows{0});
    }
  }

  void reverse(FeatureView dh) override
  {
    const SwapPlan<Exec> &p = *plan_;
    ++counts_->swap_reverse;
    for (int s = p.nswap - 1; s >= 0; --s) {
      const ListedRows<Exec> sent{p.index, p.send_offset[s]};
      const RangeRows received{p.firstrecv[s]};
      if (p.sendproc[s] == p.me) {
        copy_rows<Exec, true>("bm_kk_swap_self_reverse", p.sendnum[s], dh, sent, dh, received);
        ++counts_->self_swaps;
        continue;
      }
      reserve(std::max(p.sendnum[s], p.recvnum[s]), static_cast<int>(dh.extent(1)));
      copy_rows<Exec, false>("bm_kk_swap_pack_reverse", p.recvnum[s], send_, RangeRows{0}, dh, received);
      transfer(p.recvproc[s], p.recvnum[s], p.sendproc[s], p.sendnum[s], static_cast<int>(dh.extent(1)));
      copy_rows<Exec, true>("bm_kk_swap_unpack_reverse", p.sendnum[s], dh, sent, recv_, RangeRows{0});
    }
    // the GhostExchange contract: ghost rows are zero after the reverse exchange
    const int nlocal = p.nlocal, w = static_cast<int>(dh.extent(1));
    if (p.nghost > 0 && w > 0)
      Kokkos::parallel_for(
          "bm_kk_swap_zero_ghosts", Kokkos::RangePolicy<Exec>(0, p.nghost * w),
          KOKKOS_LAMBDA(int k) { dh(nlocal + k / w, k % w) = 0; });
  }

 private:
  static constexpr bool host_buffers = Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible;

  // Send/receive buffers of at least `rows` rows of width w (grow only).
  void reserve(int rows, int w)
  {
    if (send_.extent(0) >= static_cast<size_t>(rows) && static_cast<int>(send_.extent(1)) == w) return;
    const size_t n = batmobile_pair::grow_capacity(rows);
    send_ = Buffer("bm_kk_swap_send", n, w);
    recv_ = Buffer("bm_kk_swap_recv", n, w);
    h_send_ = typename Buffer::HostMirror();
    h_recv_ = typename Buffer::HostMirror();
  }

  // n_send rows of send_ to rank `to`, n_recv rows from rank `from` into recv_ (CommBrick's order: post the
  // receive, blocking send, wait), in the MPI type of T.
  void transfer(int to, int n_send, int from, int n_recv, int w)
  {
    const MPI_Datatype type = std::is_same<T, float>::value ? MPI_FLOAT : MPI_DOUBLE;
    MPI_Comm world = lmp_->world;
    MPI_Request request;
    if (!stages_through_host()) {
      Exec().fence();  // the pack kernel has written send_
      if (n_recv) MPI_Irecv(recv_.data(), n_recv * w, type, from, 0, world, &request);
      if (n_send) MPI_Send(send_.data(), n_send * w, type, to, 0, world);
      if (n_recv) MPI_Wait(&request, MPI_STATUS_IGNORE);
      ++counts_->mpi_direct;
      return;
    }
    // create_mirror, not create_mirror_view: separate host buffers also where Exec is a host space (mpi_buffers host)
    if (h_send_.extent(0) != send_.extent(0) || h_send_.extent(1) != send_.extent(1)) {
      h_send_ = Kokkos::create_mirror(send_);
      h_recv_ = Kokkos::create_mirror(recv_);
    }
    const auto rows = [](auto v, int n) { return Kokkos::subview(v, Kokkos::make_pair(0, n), Kokkos::ALL()); };
    if (n_send) Kokkos::deep_copy(rows(h_send_, n_send), rows(send_, n_send));
    if (n_recv) MPI_Irecv(h_recv_.data(), n_recv * w, type, from, 0, world, &request);
    if (n_send) MPI_Send(h_send_.data(), n_send * w, type, to, 0, world);
    if (n_recv) {
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      Kokkos::deep_copy(rows(recv_, n_recv), rows(h_recv_, n_recv));
    }
    ++counts_->mpi_staged;
  }

  LAMMPS *lmp_;
  const SwapPlan<Exec> *plan_;
  ExchangeCounts *counts_;
  Buffer send_, recv_;
  typename Buffer::HostMirror h_send_, h_recv_;
};

}    // namespace batmobile_kk
}    // namespace LAMMPS_NS

#endif
