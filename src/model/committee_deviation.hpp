// Model deviation of a committee of K models, as DeePMD-kit defines it (docs/pair_style.md, "Committees"):
//   per atom  eps_F,i = sqrt( <| F_i^k - <F_i> |^2> )                      (<.> = mean over the K members)
//   virial    eps_V,ab = sqrt( <( W_ab^k - <W_ab> )^2> ) / N, over the 9 components ab of the virial tensor
// Plain host code on arrays, no LAMMPS and no Kokkos, so that both pair styles and the tests share it.
#ifndef BATMOBILE_MODEL_COMMITTEE_DEVIATION_HPP
#define BATMOBILE_MODEL_COMMITTEE_DEVIATION_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace batmobile {

// max / min / sum / count of a set of deviations, combinable over MPI ranks (max, min, sum, sum).
struct DeviationStats {
  double max = -std::numeric_limits<double>::infinity();
  double min = std::numeric_limits<double>::infinity();
  double sum = 0.0;
  double count = 0.0;
  void add(double v)
  {
    max = std::max(max, v);
    min = std::min(min, v);
    sum += v;
    count += 1.0;
  }
  double mean() const { return count > 0 ? sum / count : 0.0; }
};

// eps_F of one atom from its K member forces, forces[3 * k + a].
inline double atom_force_deviation(const double *forces, int K)
{
  double mean[3] = {0.0, 0.0, 0.0};
  for (int k = 0; k < K; ++k)
    for (int a = 0; a < 3; ++a) mean[a] += forces[3 * k + a];
  for (double &m : mean) m /= K;
  double var = 0.0;
  for (int k = 0; k < K; ++k)
    for (int a = 0; a < 3; ++a) {
      const double d = forces[3 * k + a] - mean[a];
      var += d * d;
    }
  return std::sqrt(var / K);
}

// eps_V over the 9 tensor components from the K members' global virials in LAMMPS order (xx, yy, zz, xy, xz, yz),
// virials[6 * k + v], of a system of n_atoms atoms; the symmetric off-diagonal components count twice, as in
// DeePMD-kit's 9-component statistics.
inline DeviationStats virial_deviation(const double *virials, int K, double n_atoms)
{
  static constexpr int kVoigtOf9[9] = {0, 3, 4, 3, 1, 5, 4, 5, 2};
  DeviationStats s;
  for (int c = 0; c < 9; ++c) {
    const int v = kVoigtOf9[c];
    double mean = 0.0;
    for (int k = 0; k < K; ++k) mean += virials[6 * k + v];
    mean /= K;
    double var = 0.0;
    for (int k = 0; k < K; ++k) {
      const double d = virials[6 * k + v] - mean;
      var += d * d;
    }
    s.add(std::sqrt(var / K) / n_atoms);
  }
  return s;
}

}    // namespace batmobile

#endif
