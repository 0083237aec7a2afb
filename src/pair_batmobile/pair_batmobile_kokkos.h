/* -*- c++ -*- ----------------------------------------------------------
   pair_style batmobile/kk (/kk/device, /kk/host): the Batmobile model on a Kokkos device. Positions, types and
   the full Kokkos neighbour list stay on DeviceType; the receiver-grouped edge list is built there, the model
   runs there, and forces/eatom/vatom are written into LAMMPS's device views.

     pair_style batmobile/kk [precision double|single|mixed] [kernels fused|reference] [ghost_comm device|lammps]
                             [distance_check auto|deferred|immediate] [mpi_buffers auto|host] [graph_team auto|N]
                             [out_freq N] [out_file FILE]

   (docs/pair_style.md.) distance_check: when the closest pair of the edge list is checked against the model's
   training range: at once (immediate) or at the next evaluation, on thermo steps and at the end of a run
   (deferred: the host does not wait for the GPU); auto = deferred on GPUs, immediate on host back-ends.
   mpi_buffers host: MPI messages of the own swap exchange through host copies (MPI without GPU-aware support).
   graph_team: threads per local atom of the edge-list build (auto = 32 on GPUs, 1 on host back-ends; 1: one thread
   per atom over a range of atoms, pair_batmobile_kokkos_edges.h).

   Node features of ghosts are exchanged between layers (forward) and their adjoints sent back (reverse):
     - ghost_comm device (default), one MPI rank: on the device, through an image -> owner map;
     - ghost_comm device, several ranks, comm_style brick: batmobile/kk's own exchange (pair_batmobile_kokkos_comm.h),
       CommBrick's swaps replayed on the device views with buffers in the model precision, MPI on device buffers
       where MPI is GPU-aware (package kokkos gpu/aware) and on host copies of the buffers otherwise or with
       mpi_buffers host; independent
       of LAMMPS's comm/pair settings;
     - ghost_comm lammps (any rank count), or comm_style tiled: LAMMPS's host forward/reverse pair communication
       (the callbacks of pair_style batmobile) on a host copy of the whole feature array.
   On one rank with ghost_comm device the model groups the sender adjoint by atom with its periodic images, so
   ghost rows get no forces and `newton off` is allowed there: LAMMPS then skips its reverse communication of
   forces (six launches per step on one GPU).
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
  // compute()'s stages with device kernels (public: CUDA's device lambdas need a public enclosing function)
  void build_graph(int nlocal, int nall);
  void add_outputs(int nlocal, int nall);
  void committee_step_device(int nlocal, int nall);

  // The host-buffer callbacks of PairBatmobile, counted for the exchange statistics (pvector).
  int pack_forward_comm(int, int *, double *, int, int *) override;
  int pack_reverse_comm(int, int, double *) override;

  struct KKImpl;

 protected:
  void build_models(const batmobile::ModelFile &file) override;
  void build_members(const std::vector<batmobile::ModelFile> &files) override;
  bool newton_off_ok() const override;
  int settings_keyword(int narg, char **arg) override;
  void reset_settings() override;
  const char *settings_usage() const override;
  const char *style_label() const override { return "batmobile/kk"; }
  bool has_device_keyword() const override { return false; }
  bool runs_on_gpu() const override;
  std::string launch_settings() const override;
  void select_exchange(int nlocal, int nall);
  void check_closest(double closest_sq, bigint step);
  void update_image_exchange(int nlocal, int nall);
  bool ghost_comm_lammps = false;  // ghost_comm lammps: always LAMMPS's pair communication
  enum class DistanceCheck { kAuto, kDeferred, kImmediate };
  DistanceCheck distance_check = DistanceCheck::kAuto;
  bool mpi_buffers_host = false;  // mpi_buffers host
  int graph_team_choice = 0;      // graph_team N; 0: auto
  std::unique_ptr<KKImpl> kk;
  DAT::tdual_efloat_1d k_eatom;
  DAT::tdual_virial_array k_vatom;
};

}    // namespace LAMMPS_NS

#endif
#endif
