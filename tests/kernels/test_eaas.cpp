// EAAS / SO(2): frame and Wigner-D (a fixed test vector), gather table (a fixed test vector, "at most one
// source", parity rule), equality with the dense CG product for every path, 2x2 block form, adjoint.
#include "test_util.hpp"

using namespace bt;

namespace {
double maxabs(const double* a, int n) {
  double m = 0;
  for (int k = 0; k < n; ++k) m = std::max(m, std::fabs(a[k]));
  return m;
}
std::vector<std::array<double, 3>> test_directions() {
  std::mt19937 rng(51);
  std::normal_distribution<double> g(0, 1);
  std::vector<std::array<double, 3>> v = {{1, 2, 3},     {0, 1, 0},         {0, -2, 0},   {1e-7, 1, -2e-7},
                                          {0.3, -1, 0.1}, {-1e-9, -1, 1e-9}, {1, 0.9, 0.2}, {0.5, 0, 0}};
  for (int t = 0; t < 20; ++t) v.push_back({g(rng), g(rng), g(rng)});
  return v;
}
}  // namespace

TEST(EAAS, DesignTestVectorFrameAndWignerD) {
  const double r[3] = {1, 2, 3};
  double R[3][3], D[84];
  EdgeAngles<3, double> A;
  edge_angles<3, double>(r, A);
  angles_frame<3, double>(A, R);
  const double ref[3][3] = {{0.948683, 0, -0.316228}, {0.267261, 0.534522, 0.801784}, {0.169031, -0.845154, 0.507093}};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) EXPECT_NEAR(R[a][b], ref[a][b], 1e-6);
  wigner_D<3, double>(R, D);
  double Y[16], Yr[16];
  sh<3, double>(r, Y);
  for (int l = 0; l <= 3; ++l) {
    const int n = 2 * l + 1, off = wigner_offset(l);
    for (int a = 0; a < n; ++a) {
      double s = 0;
      for (int b = 0; b < n; ++b) s += D[off + a * n + b] * Y[l * l + b];
      Yr[l * l + a] = s;
    }
  }
  const double expect[16] = {1, 0, 1.732051, 0, 0, 0, 2.236068, 0, 0, 0, 0, 0, 2.645751, 0, 0, 0};
  for (int k = 0; k < 16; ++k) EXPECT_NEAR(Yr[k], expect[k], 1e-6) << k;
}

TEST(EAAS, WignerDIsTheRepresentation) {
  for (const auto& v : test_directions()) {
    double R[3][3], D[84];
    EdgeAngles<3, double> A;
    edge_angles<3, double>(v.data(), A);
    angles_frame<3, double>(A, R);
    // R is a proper rotation taking rhat to +y
    double det = R[0][0] * (R[1][1] * R[2][2] - R[1][2] * R[2][1]) - R[0][1] * (R[1][0] * R[2][2] - R[1][2] * R[2][0]) +
                 R[0][2] * (R[1][0] * R[2][1] - R[1][1] * R[2][0]);
    EXPECT_NEAR(det, 1.0, 1e-12);
    wigner_D<3, double>(R, D);
    std::mt19937 rng(52);
    std::normal_distribution<double> g(0, 1);
    for (int t = 0; t < 3; ++t) {
      double u[3] = {g(rng), g(rng), g(rng)}, ru[3], Yu[16], Yru[16];
      for (int a = 0; a < 3; ++a) ru[a] = R[a][0] * u[0] + R[a][1] * u[1] + R[a][2] * u[2];
      sh<3, double>(u, Yu);
      sh<3, double>(ru, Yru);
      for (int l = 0; l <= 3; ++l) {
        const int n = 2 * l + 1, off = wigner_offset(l);
        for (int a = 0; a < n; ++a) {
          double s = 0;
          for (int b = 0; b < n; ++b) s += D[off + a * n + b] * Yu[l * l + b];
          EXPECT_NEAR(s, Yru[l * l + a], 1e-11);  // Y(R u) = D(R) Y(u)
        }
      }
    }
  }
}

// The constexpr generators are the derivatives of D along rotations about x, y and z (central differences of D).
TEST(EAAS, GeneratorsAreTheDerivativesOfD) {
  constexpr WignerGenerators G = make_wigner_generators();
  const double th = 1e-4;
  for (int a = 0; a < 3; ++a) {
    double Dp[84], Dm[84];
    for (int sgn = -1; sgn <= 1; sgn += 2) {
      const double c = std::cos(sgn * th), s = std::sin(sgn * th);
      const int b = (a + 1) % 3, e = (a + 2) % 3;  // rotation about a: e_b -> c e_b + s e_e
      double R[3][3] = {};
      R[a][a] = 1;
      R[b][b] = c;
      R[e][e] = c;
      R[e][b] = s;
      R[b][e] = -s;
      wigner_D<3, double>(R, sgn > 0 ? Dp : Dm);
    }
    double err = 0, big = 0;
    for (int k = 1; k < 84; ++k) {
      err = std::max(err, std::fabs((Dp[k] - Dm[k]) / (2 * th) - G.J[a][k]));
      big = std::max(big, std::fabs(G.J[a][k]));
    }
    EXPECT_LT(err, 1e-7) << "axis " << a;
    EXPECT_GT(big, 0.5) << "axis " << a;  // (not all zero)
  }
}

// The angle form of the rotation into the edge frame (two turns about y and a constant axis swap) equals D(R) of
// the angles' frame, which takes rhat to +y; its inverse is D(R)^T. Poles and random directions.
TEST(EAAS, AngleRotationEqualsWignerD) {
  constexpr int L = 3, K = 16;
  std::mt19937 rng(57);
  std::normal_distribution<double> g(0, 1);
  for (const auto& v : test_directions()) {
    EdgeAngles<L, double> A;
    edge_angles<L, double>(v.data(), A);
    double R[3][3], D[84], x[K], a[K], b[K], c[K];
    angles_frame<L, double>(A, R);
    const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR((R[i][0] * v[0] + R[i][1] * v[1] + R[i][2] * v[2]) / n, i == 1 ? 1.0 : 0.0, 1e-12);
    wigner_D<L, double>(R, D);
    for (double& e : x) e = g(rng);
    rotate_to_edge<L, false, double>(A, x, a);
    apply_wigner<L, false>(D, x, b);
    for (int k = 0; k < K; ++k) EXPECT_NEAR(a[k], b[k], 1e-12) << v[0] << " " << v[1] << " " << v[2] << " k " << k;
    rotate_to_edge<L, true, double>(A, x, a);
    apply_wigner<L, true>(D, x, c);
    for (int k = 0; k < K; ++k) EXPECT_NEAR(a[k], c[k], 1e-12) << "inverse, k " << k;
  }
  constexpr AxisSwap S = make_axis_swap();
  int nonzeros = 0;
  for (double d : S.D) nonzeros += d != 0.0;
  EXPECT_EQ(nonzeros, 24);  // l = 0..3: 1 + 3 + 7 + 13
}

TEST(EAAS, GatherTableDesignTestVector) {
  constexpr auto G = make_gather_table<2, true>();
  static_assert(G.ok, "at most one source per row");
  struct Row {
    int l1, l3;
    std::vector<std::pair<int, double>> rows;  // per output m3: (global source row or -1, coefficient)
  };
  const std::vector<Row> expect = {
      {1, 0, {{2, 0.57735}}},
      {0, 1, {{-1, 0}, {0, 1.0}, {-1, 0}}},
      {1, 1, {{3, -0.707107}, {-1, 0}, {1, 0.707107}}},
      {2, 1, {{5, 0.547723}, {6, 0.632456}, {7, 0.547723}}},
      {1, 2, {{-1, 0}, {1, 0.707107}, {2, 0.816497}, {3, 0.707107}, {-1, 0}}},
      {2, 2, {{8, -0.816497}, {7, -0.408248}, {-1, 0}, {5, 0.408248}, {4, 0.816497}}}};
  for (const auto& e : expect) {
    int p = -1;
    for (int k = 0; k < num_paths(2, true); ++k) {
      const auto q = path_at(2, true, k);
      if (q.l1 == e.l1 && q.l2 == 1 && q.l3 == e.l3) p = k;
    }
    ASSERT_GE(p, 0);
    for (int m = 0; m < 2 * e.l3 + 1; ++m) {
      const int src = G.src[p][m] < 0 ? -1 : e.l1 * e.l1 + G.src[p][m];
      EXPECT_EQ(src, e.rows[m].first) << e.l1 << "1" << e.l3 << " m " << m;
      EXPECT_NEAR(G.coef[p][m], e.rows[m].second, 1e-6);
    }
  }
}

TEST(EAAS, GatherParityRuleAllPaths) {
  constexpr auto G = make_gather_table<3, true>();
  static_assert(G.ok, "at most one source per row");
  for (int p = 0; p < num_paths(3, true); ++p) {
    const auto q = path_at(3, true, p);
    const bool even = (q.l1 + q.l2 + q.l3) % 2 == 0;
    for (int m = -q.l3; m <= q.l3; ++m) {
      const int src = G.src[p][m + q.l3];
      if (src < 0) continue;
      EXPECT_EQ(src - q.l1, even ? m : -m) << p;
      if (!even) EXPECT_NE(m, 0);
      if (m > 0) {  // 2x2 block structure: even paths symmetric, odd paths antisymmetric in (+m, -m)
        const double cp = G.coef[p][m + q.l3], cm = G.coef[p][-m + q.l3];
        EXPECT_NEAR(cp, even ? cm : -cm, 1e-14) << p;
      }
    }
  }
}

template <int L, bool ALL>
void check_matches_dense() {
  constexpr int K = num_sh(L), KO = num_out(L, ALL), P = num_paths(L, ALL);
  std::mt19937 rng(53);
  std::normal_distribution<double> g(0, 1);
  for (const auto& v : test_directions()) {
    double h[K];
    for (double& x : h) x = g(rng);
    for (int p = 0; p < P; ++p) {  // each path on its own
      double w[P] = {};
      w[p] = 1.0;
      double Y[K], dense[KO] = {}, eaas[KO] = {};
      sh<L, double>(v.data(), Y);
      tp_fwd<L, ALL>(h, Y, w, 1.0, dense);
      eaas_tp<L, ALL, double>(v.data(), h, w, 1.0, eaas);
      const double sc = maxabs(dense, KO);
      ASSERT_GT(sc, 1e-6);
      for (int k = 0; k < KO; ++k) EXPECT_NEAR(eaas[k], dense[k], 1e-10 * sc) << "path " << p << " k " << k;
    }
  }
}

TEST(EAAS, EqualsDenseCGEveryPathL3All) { check_matches_dense<3, true>(); }
TEST(EAAS, EqualsDenseCGEveryPathL2Natural) { check_matches_dense<2, false>(); }

TEST(EAAS, BlockFormEqualsGather) {
  constexpr int L = 3;
  std::mt19937 rng(54);
  std::normal_distribution<double> g(0, 1);
  double w[34], hr[16];
  for (double& x : w) x = g(rng);
  for (double& x : hr) x = g(rng);
  double out[32] = {};
  eaas_aligned<L, true>(hr, w, 0.8, out);
  double W[4][4][4], Wt[4][4][4];
  eaas_blocks<L, true, double>(w, 0.8, W, Wt);
  for (int l3 = 0; l3 <= 3; ++l3)
    for (int m = -l3; m <= l3; ++m) {
      double s = 0;
      for (int l1 = 0; l1 <= 3; ++l1) {
        const int am = std::abs(m);
        if (am > l1) continue;
        const double hp = hr[l1 * l1 + l1 + am], hm = hr[l1 * l1 + l1 - am];
        if (m == 0)
          s += W[l3][l1][0] * hr[l1 * l1 + l1];
        else if (m > 0)
          s += W[l3][l1][am] * hp - Wt[l3][l1][am] * hm;
        else
          s += W[l3][l1][am] * hm + Wt[l3][l1][am] * hp;
      }
      // both parity slots together (the block form is parity-agnostic)
      EXPECT_NEAR(s, out[l3 * l3 + l3 + m] + out[16 + l3 * l3 + l3 + m], 1e-12) << l3 << " " << m;
    }
}

TEST(EAAS, AdjointMatchesFiniteDifferences) {
  constexpr int L = 3, K = 16, KO = 32, P = 34;
  std::mt19937 rng(55);
  std::normal_distribution<double> g(0, 1);
  for (const auto& v : test_directions()) {
    double h[K], w[P], go[KO];
    for (double& x : h) x = g(rng);
    for (double& x : w) x = g(rng);
    for (double& x : go) x = g(rng);
    auto E = [&](const double* r, const double* hh, const double* ww) {
      double out[KO] = {};
      eaas_tp<L, true, double>(r, hh, ww, 0.7, out);
      double s = 0;
      for (int k = 0; k < KO; ++k) s += go[k] * out[k];
      return s;
    };
    double gh[K] = {}, gw[P] = {}, gr[3] = {};
    eaas_tp_adjoint<L, true, double>(v.data(), h, w, 0.7, go, gh, gw, gr);
    const double eps = 1e-6;
    for (int b = 0; b < 3; ++b) {
      double rp[3] = {v[0], v[1], v[2]}, rm[3] = {v[0], v[1], v[2]};
      rp[b] += eps;
      rm[b] -= eps;
      // the dense product is the same function; FD through it is independent of the edge frame
      auto Ed = [&](const double* r) {
        double Y[K], out[KO] = {};
        sh<L, double>(r, Y);
        tp_fwd<L, true>(h, Y, w, 0.7, out);
        double s = 0;
        for (int k = 0; k < KO; ++k) s += go[k] * out[k];
        return s;
      };
      const double fd = (Ed(rp) - Ed(rm)) / (2 * eps);
      ASSERT_TRUE(std::isfinite(gr[b]));
      EXPECT_NEAR(gr[b], fd, 1e-6 * (1 + std::fabs(fd))) << v[0] << " " << v[1] << " " << v[2] << " dir " << b;
    }
    for (int k = 0; k < K; ++k) {
      double hp[K], hm[K];
      std::copy(h, h + K, hp);
      std::copy(h, h + K, hm);
      hp[k] += 1e-5;
      hm[k] -= 1e-5;
      EXPECT_NEAR(gh[k], (E(v.data(), hp, w) - E(v.data(), hm, w)) / 2e-5, 1e-8 * (1 + std::fabs(gh[k])));
    }
    for (int p = 0; p < P; ++p) {
      double wp[P], wm[P];
      std::copy(w, w + P, wp);
      std::copy(w, w + P, wm);
      wp[p] += 1e-5;
      wm[p] -= 1e-5;
      EXPECT_NEAR(gw[p], (E(v.data(), h, wp) - E(v.data(), h, wm)) / 2e-5, 1e-8 * (1 + std::fabs(gw[p])));
    }
  }
}

// The channel API of the fused kernels' layout (natural paths, messages and values): eaas_fwd2 equals tp_fwd2, and
// eaas_adjoint2 (summed generator terms, then one eaas_direction_gradient) equals tp_adjoint with sh_vjp.
TEST(EAAS, ChannelPairEqualsDenseForwardAndAdjoint) {
  constexpr int L = 3, K = 16, P = num_paths(3, false);
  std::mt19937 rng(58);
  std::normal_distribution<double> g(0, 1);
  for (const auto& v : test_directions()) {
    EdgeAngles<L, double> A;
    edge_angles<L, double>(v.data(), A);
    double Y[K], c[3] = {0, 0, 0}, gr_e[3] = {0, 0, 0}, gr_d[3] = {0, 0, 0}, gY[K] = {};
    sh<L, double>(v.data(), Y);
    for (int ch = 0; ch < 3; ++ch) {  // three channels share the edge
      double h[K], w[P], wv[P], gm[K], go[K];
      for (double* a : {h, gm, go})
        for (int k = 0; k < K; ++k) a[k] = g(rng);
      for (int p = 0; p < P; ++p) w[p] = g(rng), wv[p] = g(rng);
      double om_e[K] = {}, ov_e[K] = {}, om_d[K] = {}, ov_d[K] = {};
      eaas_fwd2<L, double>(A, h, w, wv, 0.7, 0.3, om_e, ov_e);
      tp_fwd2<L, double>(h, Y, w, wv, 0.7, 0.3, om_d, ov_d);
      for (int k = 0; k < K; ++k) {
        EXPECT_NEAR(om_e[k], om_d[k], 1e-12 * (1 + std::fabs(om_d[k])));
        EXPECT_NEAR(ov_e[k], ov_d[k], 1e-12 * (1 + std::fabs(ov_d[k])));
      }
      double gh_e[K] = {}, gh_d[K] = {}, gw_e[P] = {}, gw_d[P] = {}, gwv_e[P] = {}, gwv_d[P] = {};
      eaas_adjoint2<L, double>(A, h, w, wv, 0.7, 0.3, gm, go, gh_e, gw_e, gwv_e, c);
      tp_adjoint<L, false, true, true, double>(h, Y, w, wv, gm, go, 0.7, 0.3, gh_d, gY, gw_d, gwv_d);
      for (int k = 0; k < K; ++k) EXPECT_NEAR(gh_e[k], gh_d[k], 1e-11 * (1 + std::fabs(gh_d[k])));
      for (int p = 0; p < P; ++p) {
        EXPECT_NEAR(gw_e[p], gw_d[p], 1e-11 * (1 + std::fabs(gw_d[p])));
        EXPECT_NEAR(gwv_e[p], gwv_d[p], 1e-11 * (1 + std::fabs(gwv_d[p])));
      }
    }
    eaas_direction_gradient<L, double>(A, v.data(), c, gr_e);
    sh_vjp<L, double>(v.data(), gY, gr_d);
    for (int b = 0; b < 3; ++b) EXPECT_NEAR(gr_e[b], gr_d[b], 1e-9 * (1 + std::fabs(gr_d[b]))) << "dir " << b;
  }
}

// The same header runs inside a Kokkos kernel (device code path). A free function: CUDA extended lambdas
// cannot live in gtest's private TestBody.
double eaas_vs_dense_in_kernel() {
  Kokkos::View<double*, Dev> err("err", 1);
  Kokkos::parallel_for(
      Kokkos::RangePolicy<Dev::execution_space>(0, 1), KOKKOS_LAMBDA(const int) {
        const double r[3] = {0.3, -0.7, 1.1};
        double h[16], w[34], Y[16], a[32] = {}, b[32] = {};
        for (int k = 0; k < 16; ++k) h[k] = 0.1 * k - 0.5;
        for (int p = 0; p < 34; ++p) w[p] = 0.05 * p + 0.1;
        sh<3, double>(r, Y);
        tp_fwd<3, true>(h, Y, w, 1.0, a);
        eaas_tp<3, true, double>(r, h, w, 1.0, b);
        double e = 0;
        for (int k = 0; k < 32; ++k) e = fmax(e, fabs(a[k] - b[k]));
        // the channel API of the fused kernels' layout (natural paths: the first 16 of a and b as messages, the
        // second 16 as values), forward and the d/dh of the adjoint
        constexpr int PN = num_paths(3, false);
        EdgeAngles<3, double> A;
        edge_angles<3, double>(r, A);
        double om[16] = {}, ov[16] = {}, dm[16] = {}, dv[16] = {}, gh1[16] = {}, gh2[16] = {}, gY[16] = {};
        double gw1[PN] = {}, gwv1[PN] = {}, gw2[PN] = {}, gwv2[PN] = {}, c[3] = {0, 0, 0};
        eaas_fwd2<3, double>(A, h, w, w + 1, 0.7, 0.3, om, ov);
        tp_fwd2<3, double>(h, Y, w, w + 1, 0.7, 0.3, dm, dv);
        eaas_adjoint2<3, double>(A, h, w, w + 1, 0.7, 0.3, a, b + 16, gh1, gw1, gwv1, c);
        tp_adjoint<3, false, true, true, double>(h, Y, w, w + 1, a, b + 16, 0.7, 0.3, gh2, gY, gw2, gwv2);
        for (int k = 0; k < 16; ++k)
          e = fmax(e, fmax(fabs(om[k] - dm[k]), fmax(fabs(ov[k] - dv[k]), fabs(gh1[k] - gh2[k]))));
        err(0) = e;
      });
  auto e = to_host(err);
  return e(0);
}

// (values of order 1-10; devices contract to FMAs differently)
TEST(EAAS, RunsInKernel) { EXPECT_LT(eaas_vs_dense_in_kernel(), 1e-10); }
