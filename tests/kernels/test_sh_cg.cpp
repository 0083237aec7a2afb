// Spherical harmonics and Clebsch-Gordan tables: values, normalisation, gradients, equivariance, counts.
#include "test_util.hpp"

using namespace bt;

TEST(SH, MatchesIndependentLegendreReference) {
  std::mt19937 rng(1);
  std::normal_distribution<double> g(0, 1);
  for (int t = 0; t < 200; ++t) {
    double r[3] = {g(rng), g(rng), g(rng)};
    double Y[16];
    sh<3, double>(r, Y);
    const auto ref = sh_reference(3, r);
    for (int k = 0; k < 16; ++k) EXPECT_NEAR(Y[k], ref[k], 1e-12) << "k=" << k;
  }
}

TEST(SH, ExplicitLowOrderFormulas) {
  const double r[3] = {0.3, -0.5, 0.8};
  const double d = std::sqrt(0.09 + 0.25 + 0.64), x = r[0] / d, y = r[1] / d, z = r[2] / d;
  double Y[16];
  sh<3, double>(r, Y);
  const double ex[9] = {1, std::sqrt(3.) * x, std::sqrt(3.) * y, std::sqrt(3.) * z, std::sqrt(15.) * x * z,
                        std::sqrt(15.) * x * y, std::sqrt(5.) * (y * y - 0.5 * (x * x + z * z)),
                        std::sqrt(15.) * y * z, std::sqrt(15.) / 2 * (z * z - x * x)};
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(Y[k], ex[k], 1e-14);
}

TEST(SH, ComponentNormalisationAndOrthogonality) {
  // Gauss-Legendre in cos(theta) (8 nodes) x 16 uniform phi: exact for the degree-6 products.
  const double gl_x[8] = {-0.9602898564975363, -0.7966664774136267, -0.5255324099163290, -0.1834346424956498,
                          0.1834346424956498,  0.5255324099163290,  0.7966664774136267,  0.9602898564975363};
  const double gl_w[8] = {0.1012285362903763, 0.2223810344533745, 0.3137066458778873, 0.3626837833783620,
                          0.3626837833783620, 0.3137066458778873, 0.2223810344533745, 0.1012285362903763};
  double G[16][16] = {};
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 16; ++b) {
      const double ph = 2 * M_PI * b / 16, st = std::sqrt(1 - gl_x[a] * gl_x[a]);
      const double r[3] = {st * std::sin(ph), gl_x[a], st * std::cos(ph)};
      double Y[16];
      sh<3, double>(r, Y);
      const double w = gl_w[a] / 2 / 16;
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) G[i][j] += w * Y[i] * Y[j];
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) EXPECT_NEAR(G[i][j], i == j ? 1.0 : 0.0, 1e-12);
  std::mt19937 rng(2);
  std::normal_distribution<double> g(0, 1);
  double r[3] = {g(rng), g(rng), g(rng)}, Y[16];
  sh<3, double>(r, Y);
  for (int l = 0; l <= 3; ++l) {
    double s = 0;
    for (int m = 0; m < 2 * l + 1; ++m) s += Y[l * l + m] * Y[l * l + m];
    EXPECT_NEAR(s, 2 * l + 1, 1e-12);
  }
}

TEST(SH, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(3);
  std::normal_distribution<double> g(0, 1);
  for (int t = 0; t < 50; ++t) {
    double r[3] = {g(rng), g(rng), g(rng)}, Y[16], dY[16][3];
    sh_grad<3, double>(r, Y, dY);
    for (int b = 0; b < 3; ++b) {
      double rp[3] = {r[0], r[1], r[2]}, rm[3] = {r[0], r[1], r[2]}, Yp[16], Ym[16];
      const double h = 1e-6;
      rp[b] += h;
      rm[b] -= h;
      sh<3, double>(rp, Yp);
      sh<3, double>(rm, Ym);
      for (int k = 0; k < 16; ++k) EXPECT_NEAR(dY[k][b], (Yp[k] - Ym[k]) / (2 * h), 1e-7);
    }
    double gY[16], gr[3] = {0, 0, 0}, ref[3] = {0, 0, 0};
    for (int k = 0; k < 16; ++k) {
      gY[k] = g(rng);
      for (int b = 0; b < 3; ++b) ref[b] += gY[k] * dY[k][b];
    }
    sh_vjp<3, double>(r, gY, gr);
    for (int b = 0; b < 3; ++b) EXPECT_NEAR(gr[b], ref[b], 1e-12);
  }
}

// sh_vjp<L> (hand-written reverse mode) against the dual-number gradient, degree by degree: each L reads only its
// own (L+1)^2 components of gY, which the reference restricts to.
template <int L>
void check_vjp_degree(std::mt19937& rng) {
  std::normal_distribution<double> g(0, 1);
  constexpr int K = (L + 1) * (L + 1);
  for (int t = 0; t < 50; ++t) {
    double r[3] = {g(rng), g(rng), g(rng)}, Y[K], dY[K][3], gY[16], gr[3] = {0, 0, 0}, ref[3] = {0, 0, 0};
    sh_grad<L, double>(r, Y, dY);
    for (int k = 0; k < 16; ++k) gY[k] = k < K ? g(rng) : 1e3;  // (garbage beyond K must not be read)
    for (int k = 0; k < K; ++k)
      for (int b = 0; b < 3; ++b) ref[b] += gY[k] * dY[k][b];
    sh_vjp<L, double>(r, gY, gr);
    for (int b = 0; b < 3; ++b) EXPECT_NEAR(gr[b], ref[b], 1e-12) << "L = " << L;
    float rf[3] = {float(r[0]), float(r[1]), float(r[2])}, gYf[16], grf[3] = {0, 0, 0};
    for (int k = 0; k < 16; ++k) gYf[k] = float(gY[k]);
    sh_vjp<L, float>(rf, gYf, grf);
    const double scale = std::abs(ref[0]) + std::abs(ref[1]) + std::abs(ref[2]) + 1;
    for (int b = 0; b < 3; ++b) EXPECT_NEAR(grf[b], ref[b], 2e-5 * scale) << "float, L = " << L;
  }
}

TEST(SH, VjpMatchesDualNumberGradientPerDegree) {
  std::mt19937 rng(6);
  check_vjp_degree<0>(rng);
  check_vjp_degree<1>(rng);
  check_vjp_degree<2>(rng);
  check_vjp_degree<3>(rng);
}

// sh_parity (the pair adjoint's reverse edge): Y(-u) is the parity of Y(u) bit for bit, and the vector-Jacobian
// product at -u of gY equals minus that at u of parity(gY).
template <int L>
void check_parity_degree(std::mt19937& rng) {
  std::normal_distribution<double> g(0, 1);
  constexpr int K = (L + 1) * (L + 1);
  for (int t = 0; t < 50; ++t) {
    const double r[3] = {g(rng), g(rng), g(rng)}, inv = 1 / std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    const double u[3] = {r[0] * inv, r[1] * inv, r[2] * inv}, mu[3] = {-u[0], -u[1], -u[2]};
    double Y[K], Yp[K], Ym[K], gY[K], gYp[K], gr_m[3] = {0, 0, 0}, gr_p[3] = {0, 0, 0};
    sh_unit<L, double>(u[0], u[1], u[2], Y);
    sh_unit<L, double>(mu[0], mu[1], mu[2], Ym);
    for (int k = 0; k < K; ++k) Yp[k] = Y[k];
    sh_parity<L>(Yp);
    for (int k = 0; k < K; ++k) {
      const bool odd_l = (k >= 1 && k < 4) || k >= 9;
      EXPECT_EQ(Ym[k], odd_l ? -Y[k] : Y[k]) << "L = " << L << ", k = " << k;
      EXPECT_EQ(Yp[k], Ym[k]) << "L = " << L << ", k = " << k;
      gY[k] = gYp[k] = g(rng);
    }
    sh_vjp_unit<L, double>(mu, inv, gY, gr_m);
    sh_parity<L>(gYp);
    sh_vjp_unit<L, double>(u, inv, gYp, gr_p);
    for (int b = 0; b < 3; ++b) EXPECT_NEAR(gr_m[b], -gr_p[b], 1e-13 * (1 + std::abs(gr_m[b]))) << "L = " << L;
  }
}

TEST(SH, ParityOfTheOppositeVector) {
  std::mt19937 rng(8);
  check_parity_degree<1>(rng);
  check_parity_degree<2>(rng);
  check_parity_degree<3>(rng);
}

TEST(SH, FloatMatchesDouble) {
  std::mt19937 rng(4);
  std::normal_distribution<double> g(0, 1);
  for (int t = 0; t < 50; ++t) {
    double r[3] = {g(rng), g(rng), g(rng)}, Y[16];
    float rf[3] = {float(r[0]), float(r[1]), float(r[2])}, Yf[16];
    sh<3, double>(r, Y);
    sh<3, float>(rf, Yf);
    for (int k = 0; k < 16; ++k) EXPECT_NEAR(Yf[k], Y[k], 2e-5 * std::sqrt(7.0));
  }
}

TEST(SH, BatchedFunctorOnDevice) {
  const int E = 257;
  Kokkos::View<double* [3], Kokkos::LayoutRight, Dev> r("r", E);
  Kokkos::View<double**, Kokkos::LayoutRight, Dev> Y("Y", E, 16), gY("gY", E, 16);
  Kokkos::View<double* [3], Kokkos::LayoutRight, Dev> gr("gr", E);
  auto rh = Kokkos::create_mirror_view(r);
  auto gYh = Kokkos::create_mirror_view(gY);
  std::mt19937 rng(5);
  std::normal_distribution<double> g(0, 1);
  for (int e = 0; e < E; ++e) {
    for (int a = 0; a < 3; ++a) rh(e, a) = g(rng);
    for (int k = 0; k < 16; ++k) gYh(e, k) = g(rng);
  }
  Kokkos::deep_copy(r, rh);
  Kokkos::deep_copy(gY, gYh);
  ComputeSH<double, 3, Dev> f{r, Y, gY, gr};
  Kokkos::parallel_for(Kokkos::RangePolicy<Dev::execution_space>(0, E), f);
  Kokkos::parallel_for(Kokkos::RangePolicy<Dev::execution_space, ComputeSH<double, 3, Dev>::Backward>(0, E), f);
  auto Yh = to_host(Y);
  auto grh = to_host(gr);
  for (int e = 0; e < E; ++e) {
    const double v[3] = {rh(e, 0), rh(e, 1), rh(e, 2)};
    const auto ref = sh_reference(3, v);
    for (int k = 0; k < 16; ++k) EXPECT_NEAR(Yh(e, k), ref[k], 1e-12);
    double gg[16], gref[3] = {0, 0, 0};
    for (int k = 0; k < 16; ++k) gg[k] = gYh(e, k);
    sh_vjp<3, double>(v, gg, gref);
    for (int b = 0; b < 3; ++b) EXPECT_NEAR(grh(e, b), gref[b], 1e-12);
  }
}

TEST(CG, CountsNormsAndSelectionRules) {
  EXPECT_EQ(cg::kNumPaths, 34);
  EXPECT_EQ(cg::kNumEntries, 611);
  int nat = 0, nat_nnz = 0;
  for (int p = 0; p < cg::kNumPaths; ++p) {
    const auto& P = cg::kPaths[p];
    EXPECT_TRUE(std::abs(P.l1 - P.l2) <= P.l3 && P.l3 <= P.l1 + P.l2);
    double norm = 0;
    for (int k = P.offset; k < P.offset + P.count; ++k) {
      const auto& e = cg::kEntries[k];
      norm += e.value * e.value;
      EXPECT_NE(e.value, 0.0);
      // real-basis m selection rule: |m3| = |m1| + |m2| or ||m1| - |m2||
      const int a = std::abs(e.i1 - P.l1), b = std::abs(e.i2 - P.l2), c = std::abs(e.i3 - P.l3);
      EXPECT_TRUE(c == a + b || c == std::abs(a - b)) << p;
    }
    EXPECT_NEAR(norm, 1.0, 1e-14);
    if ((P.l1 + P.l2 + P.l3) % 2 == 0) {
      ++nat;
      nat_nnz += P.count;
    }
    if (p > 0) {  // lexicographic
      const auto& Q = cg::kPaths[p - 1];
      EXPECT_LT(Q.l1 * 16 + Q.l2 * 4 + Q.l3, P.l1 * 16 + P.l2 * 4 + P.l3);
    }
  }
  EXPECT_EQ(nat, 23);
  EXPECT_EQ(nat_nnz, 353);
  EXPECT_EQ(num_paths(1, false), 4);
  EXPECT_EQ(num_paths(2, false), 11);
  EXPECT_EQ(num_paths(3, false), 23);
  EXPECT_EQ(num_paths(3, true), 34);
}

TEST(CG, IntertwinesWignerDFromSH) {
  const auto& C = dense_cg();
  std::mt19937 rng(6);
  for (int t = 0; t < 3; ++t) {
    const auto R = random_rotation(rng);
    std::vector<double> D[4];
    for (int l = 0; l <= 3; ++l) {
      D[l] = wigner_from_sh(l, R);
      // D is orthogonal
      const int n = 2 * l + 1;
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
          double s = 0;
          for (int k = 0; k < n; ++k) s += D[l][a * n + k] * D[l][b * n + k];
          EXPECT_NEAR(s, a == b ? 1.0 : 0.0, 1e-10);
        }
    }
    for (int p = 0; p < cg::kNumPaths; ++p) {
      const auto& P = cg::kPaths[p];
      const int n1 = 2 * P.l1 + 1, n2 = 2 * P.l2 + 1, n3 = 2 * P.l3 + 1;
      double maxerr = 0;
      for (int i = 0; i < n1; ++i)
        for (int j = 0; j < n2; ++j)
          for (int k = 0; k < n3; ++k) {
            double s = 0;
            for (int a = 0; a < n1; ++a)
              for (int b = 0; b < n2; ++b)
                for (int c = 0; c < n3; ++c)
                  s += C(P.l1, P.l2, P.l3, a, b, c) * D[P.l1][i * n1 + a] * D[P.l2][j * n2 + b] * D[P.l3][k * n3 + c];
            maxerr = std::max(maxerr, std::fabs(s - C(P.l1, P.l2, P.l3, i, j, k)));
          }
      EXPECT_LT(maxerr, 1e-10) << "path " << P.l1 << P.l2 << P.l3;
    }
  }
}

// e3nn's documented relation Y^{l+1} = c_l CG(l,1,l+1)(Y^l, x) with c_l > 0 ties the SH signs to the CG signs.
TEST(CG, SHRecursionSignConvention) {
  const auto& C = dense_cg();
  std::mt19937 rng(7);
  std::normal_distribution<double> g(0, 1);
  for (int t = 0; t < 10; ++t) {
    double r[3] = {g(rng), g(rng), g(rng)}, Y[16];
    sh<3, double>(r, Y);
    for (int l = 1; l <= 2; ++l) {
      std::vector<double> z(2 * l + 3, 0.0);
      for (int a = 0; a < 2 * l + 1; ++a)
        for (int b = 0; b < 3; ++b)
          for (int c = 0; c < 2 * l + 3; ++c) z[c] += C(l, 1, l + 1, a, b, c) * Y[l * l + a] * Y[1 + b];
      double dot = 0, nz = 0, ny = 0;
      for (int c = 0; c < 2 * l + 3; ++c) {
        dot += z[c] * Y[(l + 1) * (l + 1) + c];
        nz += z[c] * z[c];
        ny += Y[(l + 1) * (l + 1) + c] * Y[(l + 1) * (l + 1) + c];
      }
      EXPECT_NEAR(dot / std::sqrt(nz * ny), 1.0, 1e-12);
    }
  }
}

// The generated straight-line kernels agree with the sparse table (all 34 paths, all four operations).
TEST(CG, GeneratedPathKernelsMatchTable) {
  const auto& C = dense_cg();
  std::mt19937 rng(8);
  std::normal_distribution<double> g(0, 1);
  double h[16], Y[16], G[32];
  for (double& v : h) v = g(rng);
  for (double& v : Y) v = g(rng);
  for (double& v : G) v = g(rng);
  double w[34];
  for (double& v : w) v = g(rng);
  double out[32] = {}, ref[32] = {};
  tp_fwd<3, true>(h, Y, w, 0.7, out);
  for (int p = 0; p < 34; ++p) {
    const auto q = path_at(3, true, p);
    const double alpha = path_alpha(3, true, p);
    const int o = out_index(3, true, q.l3, q.l1 + q.l2);
    for (int a = 0; a < 2 * q.l1 + 1; ++a)
      for (int b = 0; b < 2 * q.l2 + 1; ++b)
        for (int c = 0; c < 2 * q.l3 + 1; ++c)
          ref[o + c] += 0.7 * alpha * w[p] * C(q.l1, q.l2, q.l3, a, b, c) * h[q.l1 * q.l1 + a] * Y[q.l2 * q.l2 + b];
  }
  for (int k = 0; k < 32; ++k) EXPECT_NEAR(out[k], ref[k], 1e-12);
  // adjoint identity <G, TP(h, Y)> = <gh, h> = <gY, Y> = <gw, w>
  double gh[16] = {}, gY[16] = {}, gw[34] = {};
  tp_adjoint<3, true, true, false, double>(h, Y, w, nullptr, G, nullptr, 0.7, 0.0, gh, gY, gw, nullptr);
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int k = 0; k < 32; ++k) s0 += G[k] * ref[k];
  for (int k = 0; k < 16; ++k) {
    s1 += gh[k] * h[k];
    s2 += gY[k] * Y[k];
  }
  for (int p = 0; p < 34; ++p) s3 += gw[p] * w[p];
  EXPECT_NEAR(s1, s0, 1e-11);
  EXPECT_NEAR(s2, s0, 1e-11);
  EXPECT_NEAR(s3, s0, 1e-11);
  // alpha for natural L = 2 follows docs/model.md: sqrt((2 l3 + 1) / n3(l3))
  int n3[3] = {0, 0, 0};
  for (int p = 0; p < num_paths(2, false); ++p) n3[path_at(2, false, p).l3]++;
  EXPECT_EQ(n3[0], 3);
  for (int p = 0; p < num_paths(2, false); ++p) {
    const auto q = path_at(2, false, p);
    EXPECT_NEAR(path_alpha(2, false, p), std::sqrt((2.0 * q.l3 + 1) / n3[q.l3]), 1e-15);
  }
}
