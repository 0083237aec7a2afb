// Placeholder pair style: see pair_batmobile.h. Every entry point stops with the same clear error, so a
// build without the real model can never produce numbers.
#include "pair_batmobile.h"

#include "error.h"

using namespace LAMMPS_NS;

static const char *const not_implemented = "pair_style batmobile: model not implemented in this build";

PairBatmobile::PairBatmobile(LAMMPS *lmp) : Pair(lmp)
{
  restartinfo = 0;
}

void PairBatmobile::settings(int, char **)
{
  error->all(FLERR, not_implemented);
}

void PairBatmobile::coeff(int, char **)
{
  error->all(FLERR, not_implemented);
}

double PairBatmobile::init_one(int, int)
{
  error->all(FLERR, not_implemented);
  return 0.0;
}

void PairBatmobile::compute(int, int)
{
  error->all(FLERR, not_implemented);
}
