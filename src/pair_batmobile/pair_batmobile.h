/* Placeholder `pair_style batmobile` (BATMOBILE_PLACEHOLDER_PAIR_STYLE): exists only so that the LAMMPS
   build hook (cmake/lammps_hook.cmake) and the LAMMPS test harness are exercised before the real pair style
   lands. It refuses to run. The real implementation replaces this file and pair_batmobile.cpp. */
#ifdef PAIR_CLASS
// clang-format off
PairStyle(batmobile,PairBatmobile);
// clang-format on
#else

#ifndef LMP_PAIR_BATMOBILE_H
#define LMP_PAIR_BATMOBILE_H

#include "pair.h"

namespace LAMMPS_NS {

class PairBatmobile : public Pair {
 public:
  PairBatmobile(class LAMMPS *);
  void compute(int, int) override;
  void settings(int, char **) override;
  void coeff(int, char **) override;
  double init_one(int, int) override;
};

}    // namespace LAMMPS_NS

#endif
#endif
