/* -*- c++ -*- ----------------------------------------------------------
   pair_style batmobile/kk (/kk/device, /kk/host): the Batmobile model on a Kokkos device. Positions, types and
   the full Kokkos neighbour list stay on DeviceType; the receiver-grouped edge list is built there, the model
   runs there, and forces/eatom/vatom are written into LAMMPS's device views.

     pair_style batmobile/kk [precision double|single] [kernels fused|reference] [ghost_comm device|lammps]

   Node features of ghosts are exchanged between layers (forward) and their adjoints sent back (reverse):
     - ghost_comm device (default), one MPI rank: on the device, through an image -> owner map;
     - ghost_comm device, several ranks, comm_style brick: batmobile/kk's own exchange (pair_batmobile_kokkos_comm.h),
       CommBrick's swaps replayed on the device views with buffers in the model precision, MPI on device buffers
       where MPI is GPU-aware (package kokkos gpu/aware) and on host copies of the buffers otherwise; independent
       of LAMMPS's comm/pair settings;
     - ghost_comm lammps (any rank count), or comm_style tiled: LAMMPS's host forward/reverse pair communication
       (the callbacks of pair_style batmobile) on a host copy of the whole feature array.
   On one rank with ghost_comm device the model groups the sender adjoint by atom with its periodic images
   (BATMOBILE_GROUP_SENDERS=1, the default), so ghost rows get no forces and `newton off` is allowed there: LAMMPS
   then skips its reverse communication of forces (six launches per step on one GPU).
   `compute ID all pair batmobile/kk` gives for the last evaluation (summed over ranks) [1] forward and [2] reverse
   exchanges through the own swap exchange, [3] forward and [4] reverse exchanges through LAMMPS's pair
   communication, and of the own exchange's swaps [5] those with the rank itself (no MPI), [6] those whose MPI
   messages used the device buffers directly, [7] those staged through host copies of the buffers.
------------------------------------------------------------------------- */
#ifdef PAIR_CLASS
// clang-format off
PairStyle(batmobile/kk,PairBatmobileKokkos<LMPDeviceType>);
PairStyle(batmobile/kk/device,PairBatmobileKokkos<LMPDeviceType>);
PairStyle(batmobile/kk/host,PairBatmobileKokkos<LMPHostType>);
// clang-format on
#else

#ifndef LMP_PAIR_BATMOBILE_KOKKOS_H
#define LMP_PAIR_BATMOBILE_KOKKOS_H

#include "kokkos_type.h"
#include "pair_batmobile.h"
#include "pair_kokkos.h"

namespace LAMMPS_NS {

template <class DeviceType>
class PairBatmobileKokkos : public PairBatmobile {
 public:
  typedef DeviceType device_type;
  typedef ArrayTypes<DeviceType> AT;
  PairBatmobileKokkos(class LAMMPS *);
  ~PairBatmobileKokkos() override;
  void compute(int, int) override;
  void init_style() override;

  // The host-buffer callbacks of PairBatmobile, counted for the exchange statistics (pvector).
  int pack_forward_comm(int, int *, double *, int, int *) override;
  int pack_reverse_comm(int, int, double *) override;

  struct KKImpl;

 protected:
  void build_models(const batmobile::ModelFile &file) override;
  bool newton_off_ok() const override;
  int settings_keyword(int narg, char **arg) override;
  const char *settings_usage() const override;
  void select_exchange(int nlocal, int nall);
  void check_closest(double closest_sq, bigint step);
  void update_image_exchange(int nlocal, int nall);
  bool ghost_comm_lammps = false;  // ghost_comm lammps: always LAMMPS's pair communication
  std::unique_ptr<KKImpl> kk;
  DAT::tdual_efloat_1d k_eatom;
  DAT::tdual_virial_array k_vatom;
};

}    // namespace LAMMPS_NS

#endif
#endif
