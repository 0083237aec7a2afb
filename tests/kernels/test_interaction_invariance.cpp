// Symmetries and edge cases: rotations, translations, edge permutations, continuity at the cutoff (also when the
// max-logit neighbour leaves), isolated receivers and coincident pairs.
#include "interaction_test_util.hpp"

using namespace bt;
using namespace interaction_test;

// The double L = 2 and L = 3 kernel sets of all test_interaction sources (interaction_test_util.hpp).
namespace interaction_test {
INTERACTION_TEST_RUN_KERNELS(double, 2);
INTERACTION_TEST_RUN_KERNELS(double, 3);
}  // namespace interaction_test

// Rotating all positions rotates m and o with D^l (scalars invariant); translations and edge order change nothing.
TEST(Interaction, RotationTranslationPermutation) {
  constexpr int L = 3;
  std::mt19937 rng(21);
  const Model M = make_model(L, rng);
  System S = make_system(L, M.C, rng);
  const int K = num_sh(L), C = M.C;
  // rotate positions and features: h rotates as D^l h
  const auto R = random_rotation(rng);
  std::vector<double> D[4];
  for (int l = 0; l <= L; ++l) D[l] = wigner_from_sh(l, R);
  auto rotate_features = [&](const std::vector<double>& src, int n) {
    std::vector<double> out(src.size(), 0.0);
    for (int a = 0; a < n; ++a)
      for (int l = 0; l <= L; ++l)
        for (int mm = 0; mm < 2 * l + 1; ++mm)
          for (int m2 = 0; m2 < 2 * l + 1; ++m2)
            for (int c = 0; c < C; ++c)
              out[(size_t(a) * K + l * l + mm) * C + c] +=
                  D[l][mm * (2 * l + 1) + m2] * src[(size_t(a) * K + l * l + m2) * C + c];
    return out;
  };
  std::vector<double> xr(S.x.size()), xt(S.x.size());
  for (int n = 0; n < S.n_total; ++n) {
    rotate(R, &S.x[3 * n], &xr[3 * n]);
    for (int a = 0; a < 3; ++a) xt[3 * n + a] = S.x[3 * n + a] + 10.0 * (a + 1);
  }
  const auto hr = rotate_features(S.h, S.n_total);
  auto base = run_kernels<double, L>(M, S, S.x, S.h, {}, {}, false);
  auto rot = run_kernels<double, L>(M, S, xr, hr, {}, {}, false);
  auto tra = run_kernels<double, L>(M, S, xt, S.h, {}, {}, false);
  System Sp = S;
  std::reverse(Sp.recv.begin(), Sp.recv.end());
  std::reverse(Sp.send.begin(), Sp.send.end());
  auto per = run_kernels<double, L>(M, Sp, S.x, S.h, {}, {}, false);
  auto mb = to_host(base.m), ob = to_host(base.o), mr = to_host(rot.m), orr = to_host(rot.o);
  auto mt = to_host(tra.m), ot = to_host(tra.o), mp = to_host(per.m), op = to_host(per.o);
  std::vector<double> mbv(size_t(S.n_recv) * K * C), obv(mbv.size());
  for (int i = 0; i < S.n_recv; ++i)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c) {
        mbv[(size_t(i) * K + k) * C + c] = mb(i, k, c);
        obv[(size_t(i) * K + k) * C + c] = ob(i, k, c);
      }
  const auto mrot = rotate_features(mbv, S.n_recv), orot = rotate_features(obv, S.n_recv);
  for (int i = 0; i < S.n_recv; ++i)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c) {
        const size_t idx = (size_t(i) * K + k) * C + c;
        EXPECT_NEAR(mr(i, k, c), mrot[idx], 1e-10);
        EXPECT_NEAR(orr(i, k, c), orot[idx], 1e-10);
        EXPECT_NEAR(mt(i, k, c), mb(i, k, c), 1e-10);
        EXPECT_NEAR(ot(i, k, c), ob(i, k, c), 1e-10);
        EXPECT_NEAR(mp(i, k, c), mb(i, k, c), 1e-12);
        EXPECT_NEAR(op(i, k, c), ob(i, k, c), 1e-12);
      }
}

// Receiver 0 with senders 1 (fixed) and 2 (at the origin: the tests move it across r_c), random features.
System one_receiver_two_senders(int K, int C, std::mt19937& rng) {
  System S;
  S.n_recv = 1;
  S.n_total = 3;
  S.x = {0, 0, 0, 1.0, 0.5, 0.2, 0, 0, 0};
  S.recv = {0, 0};
  S.send = {1, 2};
  std::normal_distribution<double> g(0, 1);
  S.h.resize(3 * K * C);
  for (double& v : S.h) v = g(rng);
  return S;
}

// Energy continuity at the cutoff: a neighbour crossing r_c changes m and o continuously.
TEST(Interaction, ContinuousAtCutoff) {
  constexpr int L = 2;
  std::mt19937 rng(31);
  Model M = make_model(L, rng);
  System S = one_receiver_two_senders(num_sh(L), M.C, rng);
  double prev_o = 0, prev_m = 0;
  for (int t = 0; t < 2; ++t) {
    const double d = M.rc + (t == 0 ? -1e-4 : 1e-4);
    S.x[6] = 0.6 * d;
    S.x[7] = 0.8 * d;
    auto out = run_kernels<double, L>(M, S, S.x, S.h, {}, {}, false);
    auto mh = to_host(out.m), oh = to_host(out.o);
    if (t == 1) {
      EXPECT_NEAR(mh(0, 4, 3), prev_m, 1e-9);
      EXPECT_NEAR(oh(0, 4, 3), prev_o, 1e-9);
    }
    prev_m = mh(0, 4, 3);
    prev_o = oh(0, 4, 3);
  }
}

// Head-a logit of edge i <- j (docs/model.md step 2), recomputed here for the test's premise.
double test_logit(const Model& M, const std::vector<double>& h, int i, int j, int a, double d) {
  const int K = num_sh(M.L), C = M.C;
  double s = 0;
  for (int e = 0; e < M.dk; ++e) {
    double q = 0, k = 0;
    for (int c = 0; c < C; ++c) {
      q += M.Wq[(a * M.dk + e) * C + c] * h[(size_t(i) * K) * C + c];
      k += M.Wk[(a * M.dk + e) * C + c] * h[(size_t(j) * K) * C + c];
    }
    s += q * k;
  }
  s /= std::sqrt(double(M.dk));
  const std::vector<double> B = reference_bessel(M, d);
  for (int n = 0; n < M.NB; ++n) s += M.Wg[a * M.NB + n] * B[n];
  return s;
}

// The neighbour holding the largest logit of head 0 crosses r_c: the softmax over s + log u does not depend on the
// max, so E = gm.m + go.o is continuous (the former 1e-9 in the denominator made it jump); jumps shrink with the step.
TEST(Interaction, ContinuousWhenMaxLogitNeighbourLeaves) {
  constexpr int L = 2;
  std::mt19937 rng(37);
  Model M = make_model(L, rng);
  const int K = num_sh(L), C = M.C;
  System S = one_receiver_two_senders(K, C, rng);
  // scalar features of atom 2 along Wk_0^T q_0: its head-0 logit is beta * |Wk_0^T q_0|^2 / sqrt(dk) (B(r_c) = 0)
  std::vector<double> dir(C, 0.0);
  for (int e = 0; e < M.dk; ++e) {
    double q = 0;
    for (int c = 0; c < C; ++c) q += M.Wq[e * C + c] * S.h[c];
    for (int c = 0; c < C; ++c) dir[c] += q * M.Wk[e * C + c];
  }
  for (int c = 0; c < C; ++c) S.h[2 * K * C + c] = dir[c];
  const double d1 = std::sqrt(1.0 + 0.25 + 0.04);
  const double s_other = test_logit(M, S.h, 0, 1, 0, d1), unit = test_logit(M, S.h, 0, 2, 0, M.rc);
  ASSERT_GT(unit, 1e-3);
  const double beta = (s_other + 5.0) / unit;  // leaver's logit 5 above the other neighbour's
  for (int c = 0; c < C; ++c) S.h[2 * K * C + c] = beta * dir[c];
  ASSERT_GT(test_logit(M, S.h, 0, 2, 0, M.rc), s_other + 4.0);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> gm(K * C), go(K * C);
  for (double& v : gm) v = g(rng);
  for (double& v : go) v = g(rng);
  auto energy_at = [&](double d) {
    S.x[6] = 0.6 * d;
    S.x[7] = 0.8 * d;
    auto out = run_kernels<double, L>(M, S, S.x, S.h, {}, {}, false);
    auto mh = to_host(out.m), oh = to_host(out.o);
    double E = 0;
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c) E += gm[k * C + c] * mh(0, k, c) + go[k * C + c] * oh(0, k, c);
    return E;
  };
  double jumps[3];
  const double steps[3] = {1e-3, 1e-5, 1e-7};
  for (int k = 0; k < 3; ++k) jumps[k] = std::fabs(energy_at(M.rc - steps[k]) - energy_at(M.rc + steps[k]));
  EXPECT_LT(jumps[0], 1e-4);
  EXPECT_LT(jumps[1], std::max(jumps[0] * 1e-3, 1e-14));
  EXPECT_LT(jumps[2], 1e-12);
  // the leaver matters inside the cutoff (the test is not vacuous)
  EXPECT_GT(std::fabs(energy_at(0.7 * M.rc) - energy_at(M.rc + 1e-7)), 1e-3);
}

// A receiver whose neighbours are all beyond r_c has m = o = 0 and no force; a coincident pair (d = 0) is skipped.
TEST(Interaction, IsolatedReceiverAndCoincidentPair) {
  constexpr int L = 2;
  std::mt19937 rng(61);
  Model M = make_model(L, rng);
  System S;
  S.n_recv = 2;
  S.n_total = 4;
  S.x = {0, 0, 0, 50, 50, 50, 1.0, 0.4, -0.3, 0, 0, 0};  // atom 3 sits on atom 0
  S.recv = {0, 0, 0, 1, 1};
  S.send = {2, 1, 3, 0, 2};  // receiver 1 only sees atoms at ~86 A
  std::normal_distribution<double> g(0, 1);
  S.h.resize(4 * 9 * M.C);
  for (double& v : S.h) v = g(rng);
  std::vector<double> gm(2 * 9 * M.C), go(gm.size());
  for (double& v : gm) v = g(rng);
  for (double& v : go) v = g(rng);
  auto out = run_kernels<double, L>(M, S, S.x, S.h, gm, go, true);
  auto mh = to_host(out.m), oh = to_host(out.o), ghh = to_host(out.gh);
  auto fh = to_host(out.f);
  const RefOut ref = reference(M, S, S.x, S.h);
  for (int k = 0; k < 9; ++k)
    for (int c = 0; c < M.C; ++c) {
      EXPECT_EQ(mh(1, k, c), 0.0);
      EXPECT_EQ(oh(1, k, c), 0.0);
      EXPECT_NEAR(mh(0, k, c), ref.m[(0 * 9 + k) * M.C + c], 1e-12);
      EXPECT_NEAR(oh(0, k, c), ref.o[(0 * 9 + k) * M.C + c], 1e-12);
      EXPECT_EQ(ghh(3, k, c), 0.0);  // the coincident atom never acts as a sender
    }
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(fh(1, a), 0.0);
    EXPECT_EQ(fh(3, a), 0.0);
    EXPECT_TRUE(std::isfinite(fh(0, a)));
    EXPECT_NEAR(fh(0, a), -fh(2, a), 1e-12);  // only the 0 <- 2 edge is active
  }
}
