/* -*- c++ -*- ----------------------------------------------------------
   pair_style batmobile/kk (/kk/device, /kk/host): the Batmobile model on a Kokkos device. Positions, types and
   the full Kokkos neighbour list stay on DeviceType; the receiver-grouped edge list is built there, the model
   runs there, and forces/eatom/vatom are written into LAMMPS's device views. Node features of ghosts are
   exchanged between layers:
     - one MPI rank: on the device, through an image -> owner map;
     - several ranks, forward (features): through CommKokkos's device pair communication, which calls
       pack/unpack_forward_comm_kokkos on LAMMPS's device buffers, where LAMMPS uses it (`package kokkos
       comm/pair/forward device`, the default with GPUs); with `host`/`no` (the default of host-only builds)
       through a host mirror and the host pack routines;
     - several ranks, reverse (feature adjoints): through LAMMPS's host reverse pair communication (the only one
       LAMMPS 29Sep2021 has), via a host mirror.
   `compute ID all pair batmobile/kk` gives for the last evaluation (summed over ranks): [1] forward exchanges that
   went through pack_forward_comm_kokkos, [2] forward exchanges through host buffers, [3] reverse exchanges.
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

#include "kokkos_base.h"
#include "kokkos_type.h"
#include "pair_batmobile.h"
#include "pair_kokkos.h"

namespace LAMMPS_NS {

template <class DeviceType>
class PairBatmobileKokkos : public PairBatmobile, public KokkosBase {
 public:
  typedef DeviceType device_type;
  typedef ArrayTypes<DeviceType> AT;
  PairBatmobileKokkos(class LAMMPS *);
  ~PairBatmobileKokkos() override;
  void compute(int, int) override;
  void init_style() override;

  // Forward communication of the current layer's ghost feature rows on DeviceType (CommKokkos device path).
  int pack_forward_comm_kokkos(int, DAT::tdual_int_2d, int, DAT::tdual_xfloat_1d &, int, int *) override;
  void unpack_forward_comm_kokkos(int, int, DAT::tdual_xfloat_1d &) override;
  // The host-buffer callbacks of PairBatmobile, counted for the exchange statistics (pvector).
  int pack_forward_comm(int, int *, double *, int, int *) override;
  int pack_reverse_comm(int, int, double *) override;

  struct KKImpl;

 protected:
  void build_models(const batmobile::ModelFile &file) override;
  void update_image_exchange(int nlocal, int nall);
  std::unique_ptr<KKImpl> kk;
  DAT::tdual_efloat_1d k_eatom;
  DAT::tdual_virial_array k_vatom;
};

}    // namespace LAMMPS_NS

#endif
#endif
