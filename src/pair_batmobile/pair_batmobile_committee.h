/* -*- c++ -*- ----------------------------------------------------------
   Committee output of pair_style batmobile (docs/pair_style.md, "Committees"): the members beyond the first model
   of `pair_coeff * * m1.pt m2.pt ... species`, evaluated only on steps that are multiples of out_freq, and the
   DeePMD-style model deviation they give, reduced over MPI ranks and written by rank 0. No style macro here: not
   a style header.
------------------------------------------------------------------------- */
#ifndef LMP_PAIR_BATMOBILE_COMMITTEE_H
#define LMP_PAIR_BATMOBILE_COMMITTEE_H

#include <cstdio>
#include <string>
#include <vector>

#include "model/committee_deviation.hpp"
#include "pointers.h"

namespace LAMMPS_NS {

class BatmobileCommittee : protected Pointers {
 public:
  explicit BatmobileCommittee(LAMMPS *lmp) : Pointers(lmp) {}
  ~BatmobileCommittee() override;

  // pair_style keywords out_freq N / out_file FILE: words taken from arg[0..narg) (0: not one of them). out_file in
  // a directory that does not exist stops here (on every rank).
  int settings_keyword(int narg, char **arg, const char *style);
  // out_freq and out_file back to their defaults; style: the pair style's name in messages
  void reset_settings(const char *style);
  // At init_style (collective): an active committee opens its out_file on rank 0, so that a file that cannot be
  // written stops the run before it starts, on every rank.
  void init(const char *style);
  // the member files (after the first model) of pair_coeff; empty: no committee
  void set_members(const std::vector<std::string> &paths) { member_paths_ = paths; }
  const std::vector<std::string> &member_paths() const { return member_paths_; }
  int members() const { return 1 + static_cast<int>(member_paths_.size()); }
  bool active() const { return !member_paths_.empty(); }
  // a committee evaluates its members this step
  bool due(bigint step) const { return active() && step % out_freq_ == 0; }
  std::string settings_line() const;  // for the launch line of the log

  // Deviations of this rank's local atoms from their K member forces, forces[(i * K + k) * 3 + a] (folded: ghosts'
  // contributions already on their owners), the members' global virials virials[6 * k + v] of this rank (summed over
  // ranks here); writes the file line (rank 0) and, where `fix property/atom d_batmobile_devi_f` exists, each local
  // atom's force deviation there. model_atom[i]: atom i is one of the model's (others are skipped).
  void write_step(bigint step, const std::vector<double> &forces, const std::vector<double> &virials,
                  const std::vector<char> &model_atom, int nlocal);

 private:
  std::vector<std::string> member_paths_;
  int out_freq_ = 100;
  std::string out_file_ = "model_devi.out";
  std::string style_ = "batmobile";
  FILE *fp_ = nullptr;
  void open_file();
  bool try_open();  // rank 0: opens out_file and writes its column header; false (errno set) if it cannot
  // Stops on every rank (error->all) where rank 0 finds the directory of out_file missing (or not a directory), or,
  // with `open`, cannot open out_file for writing. Collective.
  void check_file(bool open);
  double *per_atom_property();
};

}    // namespace LAMMPS_NS

#endif
