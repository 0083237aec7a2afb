/* -*- c++ -*- ----------------------------------------------------------
   pair_style batmobile/kk (/kk/device, /kk/host): the Batmobile model on a Kokkos device. Positions, types and
   the full Kokkos neighbour list stay on DeviceType; the receiver-grouped edge list is built there, the model
   runs there, and forces/eatom/vatom are written into LAMMPS's device views. Node features of ghosts are
   exchanged between layers on the device through an image -> owner map on one MPI rank, and through LAMMPS's
   forward/reverse pair communication (host buffers) on several ranks.
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
