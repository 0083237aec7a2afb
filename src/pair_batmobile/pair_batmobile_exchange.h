/* -*- c++ -*- ----------------------------------------------------------
   Ghost features between the model's layers through LAMMPS's forward/reverse pair communication (PairBatmobile's
   pack/unpack callbacks), for pair_style batmobile on the host and with `device cuda`. No style macro here: not a
   style header.
------------------------------------------------------------------------- */
#ifndef LMP_PAIR_BATMOBILE_EXCHANGE_H
#define LMP_PAIR_BATMOBILE_EXCHANGE_H

#include <Kokkos_Core.hpp>

#include "atom.h"
#include "lammps.h"
#include "lammps_compat.h"
#include "model/model.hpp"
#include "pair_batmobile.h"

namespace LAMMPS_NS {
namespace batmobile_pair {

// On the features themselves where Exec's memory is host memory, else on a host copy of the whole array.
template <class T, class Exec>
class LammpsPairExchange : public batmobile::GhostExchange<T, Exec> {
 public:
  using typename batmobile::GhostExchange<T, Exec>::FeatureView;
  LammpsPairExchange(PairBatmobile *pair, LAMMPS *lmp) : pair_(pair), lmp_(lmp) {}
  void forward(FeatureView h) override {
    stage(h);
    batmobile_compat::forward_comm(lmp_->comm, pair_);
    Kokkos::deep_copy(h, host_);
  }
  void reverse(FeatureView dh) override {
    stage(dh);
    batmobile_compat::reverse_comm(lmp_->comm, pair_);
    // the ghost rows have been added to their owners; clear them as the GhostExchange contract says
    const int nlocal = lmp_->atom->nlocal, nall = nlocal + lmp_->atom->nghost;
    for (int n = nlocal; n < nall; ++n)
      for (size_t x = 0; x < host_.extent(1); ++x) host_(n, x) = 0;
    Kokkos::deep_copy(dh, host_);
  }

 private:
  // (a host view's mirror is the view itself, and the copies between the two are no-ops)
  void stage(FeatureView v) {
    if (host_.extent(0) != v.extent(0) || host_.extent(1) != v.extent(1) ||
        (HostAccessible && host_.data() != v.data()))
      host_ = Kokkos::create_mirror_view(v);
    Kokkos::deep_copy(host_, v);
    pair_->comm_target.point_to(host_.data(), static_cast<int>(v.extent(1)));
  }
  static constexpr bool HostAccessible =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible;
  PairBatmobile *pair_;
  LAMMPS *lmp_;
  typename FeatureView::HostMirror host_;
};

}    // namespace batmobile_pair
}    // namespace LAMMPS_NS

#endif
