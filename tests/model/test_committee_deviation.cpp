// DeePMD-style model deviation (src/model/committee_deviation.hpp) against hand values and an independent
// formula (variance as <x^2> - <x>^2 in long double).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/committee_deviation.hpp"

namespace {

TEST(CommitteeDeviation, HandValues)
{
  // one member: no deviation; two members apart by d: each is |d|/2 from the mean
  const double one[3] = {1.0, -2.0, 0.5};
  EXPECT_EQ(batmobile::atom_force_deviation(one, 1), 0.0);
  const double two[6] = {0.0, 0.0, 0.0, 3.0, 4.0, 0.0};
  EXPECT_DOUBLE_EQ(batmobile::atom_force_deviation(two, 2), 2.5);
  // virial: members differ only in xy by 2 (std 1), 10 atoms; xy and yx both count
  const double vir[12] = {1, 1, 1, 0, 0, 0, 1, 1, 1, 2, 0, 0};
  const auto s = batmobile::virial_deviation(vir, 2, 10.0);
  EXPECT_DOUBLE_EQ(s.max, 0.1);
  EXPECT_DOUBLE_EQ(s.min, 0.0);
  EXPECT_DOUBLE_EQ(s.mean(), 0.2 / 9.0);
  EXPECT_EQ(s.count, 9.0);
}

TEST(CommitteeDeviation, MatchesIndependentFormula)
{
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int K : {2, 3, 5}) {
    std::vector<double> f(3 * K);
    for (double &v : f) v = normal(rng);
    long double s1[3] = {0, 0, 0}, s2 = 0;
    for (int k = 0; k < K; ++k)
      for (int a = 0; a < 3; ++a) {
        s1[a] += f[3 * k + a];
        s2 += (long double) f[3 * k + a] * f[3 * k + a];
      }
    long double mean_sq = 0;
    for (long double m : s1) mean_sq += (m / K) * (m / K);
    const double expected = std::sqrt(static_cast<double>(s2 / K - mean_sq));
    EXPECT_NEAR(batmobile::atom_force_deviation(f.data(), K), expected, 1e-12) << "K=" << K;
  }
}

TEST(CommitteeDeviation, StatsCombine)
{
  batmobile::DeviationStats a, b;
  a.add(1.0);
  a.add(3.0);
  b.add(0.5);
  EXPECT_EQ(a.max, 3.0);
  EXPECT_EQ(a.min, 1.0);
  EXPECT_EQ(a.mean(), 2.0);
  EXPECT_EQ(batmobile::DeviationStats().mean(), 0.0);
  EXPECT_EQ(b.count, 1.0);
}

}    // namespace
