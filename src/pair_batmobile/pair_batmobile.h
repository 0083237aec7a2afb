/* -*- c++ -*- ----------------------------------------------------------
   pair_style batmobile: E(3)-equivariant message-passing potential (docs/model.md), evaluated by the Kokkos
   C++ model (src/model) on Kokkos' default host execution space, or with `device cuda` on the GPU of the styles'
   own CUDA Kokkos (a LAMMPS without the KOKKOS package: pair_batmobile_device.cpp). No libtorch at run time (only
   to read the model file in pair_coeff).

     pair_style batmobile [precision double|single|mixed] [kernels fused|reference] [device cpu|cuda] [out_freq N]
                          [out_file FILE]
     pair_coeff * * model.pt [member2.pt ...] O H   (one species name or NULL per atom type; several model files
                                                     form a committee: pair_batmobile_committee.h)

   Needs units metal, newton on; full neighbour list filtered to r < r_c; forces on ghosts folded by LAMMPS's
   reverse communication; node features of ghosts exchanged between layers by forward communication and their
   adjoints by reverse communication (comm_forward = comm_reverse = K*C).
------------------------------------------------------------------------- */
#ifdef PAIR_CLASS
// clang-format off
PairStyle(batmobile,PairBatmobile);
// clang-format on
#else

#ifndef LMP_PAIR_BATMOBILE_H
#define LMP_PAIR_BATMOBILE_H

#include <memory>
#include <string>
#include <vector>

#include "model/model_file.hpp"
#include "pair.h"
#include "pair_batmobile_committee.h"

namespace LAMMPS_NS {

class PairBatmobile : public Pair {
 public:
  PairBatmobile(class LAMMPS *);
  ~PairBatmobile() override;
  void compute(int, int) override;
  void settings(int, char **) override;
  void coeff(int, char **) override;
  void init_style() override;
  double init_one(int, int) override;

  int pack_forward_comm(int, int *, double *, int, int *) override;
  void unpack_forward_comm(int, int, double *) override;
  int pack_reverse_comm(int, int, double *) override;
  void unpack_reverse_comm(int, int *, double *) override;

  // Row-major (n_all x width) buffer the forward/reverse communication reads and writes.
  struct CommTarget {
    double *d = nullptr;
    float *f = nullptr;
    int width = 0;
    void point_to(double *p, int w) { *this = CommTarget(); d = p; width = w; }
    void point_to(float *p, int w) { *this = CommTarget(); f = p; width = w; }
  };
  CommTarget comm_target;

  // whether the styles' Kokkos has a GPU back-end, and how many GPUs this process sees
  static bool gpu_build();
  static int gpu_count();

 protected:
  bool single_precision = false;  // float kernels: precision single or mixed
  bool mixed_precision = false;   // precision mixed: single with the radial MLP on f16 tensor cores (CUDA, sm_80+)
  int kernels_choice = -1;  // -1 default (fused), 0 fused, 1 reference
  bool device_cuda = false;  // device cuda: the model on the GPU (pair_batmobile_device.cpp)
  std::string model_path;
  std::vector<int> type_species;  // per LAMMPS type (1-based): model species or -1 (NULL)
  double r_c = 0.0, min_distance = 0.0;
  int feature_width = 0;
  bool launch_logged = false;  // the kernels' launch line of this run is in the log (init_style re-arms it)

  struct Impl;
  std::unique_ptr<Impl> impl;
  struct DeviceImpl;  // device cuda (pair_batmobile_device.cpp)
  struct DeviceDeleter {
    void operator()(DeviceImpl *) const;
  };
  std::unique_ptr<DeviceImpl, DeviceDeleter> device;  // null on the host
  std::unique_ptr<BatmobileCommittee> committee;

  batmobile::ModelHyper hyper;

  void allocate();
  void check_box();
  void check_settings();  // model loaded, units metal, newton on (or newton_off_ok), box thick enough
  // newton off is valid where the model itself puts every ghost's terms on its owner (nothing for LAMMPS to fold)
  virtual bool newton_off_ok() const { return false; }
  void load_model(const std::string &path);
  // The model line of the log (rank 0): what the checksum covered, format version, the Batmobile that wrote the file,
  // species and cutoff; a warning for a format-version-1 file. role: "model file" or "committee member".
  void report_model_file(const batmobile::ModelFile &file, const char *role);
  // Builds the evaluators from the file (host models here; the KOKKOS variant builds them on its device).
  virtual void build_models(const batmobile::ModelFile &file);
  // The committee's further members (same species and cutoff as the first model, checked before).
  virtual void build_members(const std::vector<batmobile::ModelFile> &files);
  void load_members(const std::vector<std::string> &paths);
  // On a committee step: every member's forces and virial (committee_forces / committee_virials, filled by the
  // style), folded onto the local atoms, then the deviation output (committee_finish).
  void committee_step(int nlocal, int nall);
  void committee_finish(int nlocal);
  std::vector<double> committee_forces, committee_virials;  // (n_all x K x 3), (K x 6) on the host
  std::vector<char> committee_model_atom;                   // n_local: atom of a model species
  // pair_style keywords of a derived style: how many words of arg[0..narg) it took (0: not one of its keywords),
  // and the usage line for unknown keywords.
  virtual int settings_keyword(int /*narg*/, char ** /*arg*/) { return 0; }
  // Every keyword back to its default: settings() starts with it, so that a later pair_style command that omits a
  // keyword does not keep an earlier command's value (LAMMPS re-uses the style object for the same style name).
  virtual void reset_settings();
  virtual const char *settings_usage() const;
  // The keyword arg[0] with value arg[1]: its index in `values`; a LAMMPS error if missing or not one of them.
  int keyword_choice(int narg, char **arg, const std::vector<std::string> &values);
  // The style's name in messages, and its settings in effect for the launch line of the log.
  virtual const char *style_label() const { return "batmobile"; }
  // whether `device cpu|cuda` is a keyword of this style (batmobile/kk runs where LAMMPS's -k/-sf put it)
  virtual bool has_device_keyword() const { return true; }
  // whether the model runs on a GPU (device cuda here; batmobile/kk: a GPU execution space): there precision mixed
  // is the default (docs/performance.md, "precision mixed"), elsewhere double
  virtual bool runs_on_gpu() const { return device_cuda; }

  // device cuda (pair_batmobile_device.cpp): the model, committee members and one evaluation on the GPU; positions
  // go there every step, the neighbour list when LAMMPS rebuilds it, forces (and per-atom terms) come back
  void build_device_models(const batmobile::ModelFile &file);
  void build_device_members(const std::vector<batmobile::ModelFile> &files);
  void compute_device(int nlocal, int nall);
  void upload_device_neighbors(int nlocal, int nall);
  void committee_step_on_device(int nlocal, int nall);

  virtual std::string launch_settings() const;
};

}    // namespace LAMMPS_NS

#endif
#endif
