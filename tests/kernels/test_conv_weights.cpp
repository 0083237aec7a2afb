// Fused conv with per-edge weights over all 34 paths (and the 23 natural ones): forward vs a dense double
// reference, dE/dw exactly, dE/dh and forces by finite differences, virial, rotation equivariance. The op is the
// kernel benchmark's (bench/conv_weights.hpp).
#include "conv_weights.hpp"
#include "test_util.hpp"

using namespace bt;

namespace {

struct Case {
  int n_recv = 5, n_total = 8, C = 4;
  std::vector<double> x, h, w;  // h (n_total, 16, C), w (E, P, C) in receiver-grouped order
  std::vector<int> recv, send;
};

// Independent reference: out[i][slot][c], slot = parity * 16 + l3^2 + m3 (parity 1 = non-natural output).
std::vector<double> reference(const Case& S, bool all, const std::vector<double>& x, const std::vector<double>& h,
                              const std::vector<double>& w) {
  const auto& CG = dense_cg();
  std::vector<std::array<int, 3>> paths;
  for (int a = 0; a <= 3; ++a)
    for (int b = 0; b <= 3; ++b)
      for (int c = 0; c <= 3; ++c)
        if (std::abs(a - b) <= c && c <= a + b && (all || (a + b + c) % 2 == 0)) paths.push_back({a, b, c});
  const int P = int(paths.size()), C = S.C, KO = all ? 32 : 16;
  std::vector<double> out(size_t(S.n_recv) * KO * C, 0.0);
  for (size_t e = 0; e < S.recv.size(); ++e) {
    const int i = S.recv[e], j = S.send[e];
    double r[3] = {x[3 * j] - x[3 * i], x[3 * j + 1] - x[3 * i + 1], x[3 * j + 2] - x[3 * i + 2]};
    const auto Y = sh_reference(3, r);
    for (int p = 0; p < P; ++p) {
      const int l1 = paths[p][0], l2 = paths[p][1], l3 = paths[p][2], par = (l1 + l2 + l3) % 2;
      int n = 0;
      for (auto& q : paths) n += (q[2] == l3 && (q[0] + q[1] + q[2]) % 2 == par);
      const double alpha = std::sqrt((2.0 * l3 + 1) / n);
      for (int c = 0; c < C; ++c)
        for (int a = 0; a < 2 * l1 + 1; ++a)
          for (int b = 0; b < 2 * l2 + 1; ++b)
            for (int k = 0; k < 2 * l3 + 1; ++k)
              out[(size_t(i) * KO + par * 16 + l3 * l3 + k) * C + c] +=
                  alpha * w[(e * P + p) * C + c] * CG(l1, l2, l3, a, b, k) * h[(size_t(j) * 16 + l1 * l1 + a) * C + c] *
                  Y[l2 * l2 + b];
    }
  }
  return out;
}

template <class T, bool ALL>
struct Runner {
  using Kern = ConvEdgeWeights<T, Dev, 3, ALL>;
  Kern k;
  Runner(const Case& S, const std::vector<double>& x, const std::vector<double>& h, const std::vector<double>& w,
         const std::vector<double>* gout, int staged = Kern::default_staged) {
    const int P = Kern::P, KO = Kern::KO, C = S.C, E = int(S.recv.size());
    std::vector<T> xt(x.begin(), x.end());
    k.g = make_graph<T, Dev>(xt, S.n_recv, S.recv, S.send);
    k.C = C;
    k.scale = T(0.5);
    Kokkos::View<T***, Kokkos::LayoutRight, Dev> hv("h", S.n_total, 16, C), wv("w", E, P, C), go("go", S.n_recv, KO, C);
    auto hh = Kokkos::create_mirror_view(hv);
    auto wh = Kokkos::create_mirror_view(wv);
    auto gh = Kokkos::create_mirror_view(go);
    for (size_t a = 0; a < h.size(); ++a) hh.data()[a] = T(h[a]);
    for (size_t a = 0; a < w.size(); ++a) wh.data()[a] = T(w[a]);
    if (gout)
      for (size_t a = 0; a < gout->size(); ++a) gh.data()[a] = T((*gout)[a]);
    Kokkos::deep_copy(hv, hh);
    Kokkos::deep_copy(wv, wh);
    Kokkos::deep_copy(go, gh);
    k.h = hv;
    k.w = wv;
    k.gout = go;
    k.out = decltype(k.out)("out", S.n_recv, KO, C);
    k.gh = decltype(k.out)("gh", S.n_total, 16, C);
    k.gw = decltype(k.out)("gw", E, P, C);
    k.f = decltype(k.f)("f", S.n_total, 3);
    k.vatom = decltype(k.f)("vatom", S.n_total, 6);
    k.allocate_workspace();
    k.staged = staged;
    k.forward();
    if (gout) k.backward();
    Kokkos::fence();
  }
};

Case make_case(bool all, unsigned seed, int C = 4) {
  Case S;
  S.C = C;
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0, 1);
  S.x.resize(3 * S.n_total);
  for (double& v : S.x) v = 2.0 * g(rng);
  for (int i = 0; i < S.n_recv; ++i)  // receiver-grouped edge order (ids are kept by make_graph)
    for (int j = 0; j < S.n_total; ++j)
      if (i != j && (i + j) % 3 != 0) {
        S.recv.push_back(i);
        S.send.push_back(j);
      }
  const int P = num_paths(3, all);
  S.h.resize(size_t(S.n_total) * 16 * S.C);
  S.w.resize(S.recv.size() * P * S.C);
  for (double& v : S.h) v = g(rng);
  for (double& v : S.w) v = g(rng);
  return S;
}

// stride: finite-difference checks of dE/dw and dE/dh on every stride-th entry (the reference is O(size) per call)
template <bool ALL>
void check(unsigned seed, int C_in = 4, size_t stride = 1) {
  const Case S = make_case(ALL, seed, C_in);
  const int P = num_paths(3, ALL), KO = ALL ? 32 : 16, C = S.C;
  std::mt19937 rng(seed + 1);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> gout(size_t(S.n_recv) * KO * C);
  for (double& v : gout) v = g(rng);
  auto ref = reference(S, ALL, S.x, S.h, S.w);
  for (double& v : ref) v *= 0.5;
  auto energy = [&](const std::vector<double>& x, const std::vector<double>& h, const std::vector<double>& w) {
    auto o = reference(S, ALL, x, h, w);
    double E = 0;
    for (size_t a = 0; a < o.size(); ++a) E += 0.5 * o[a] * gout[a];
    return E;
  };
  Runner<double, ALL> rd(S, S.x, S.h, S.w, &gout);
  Runner<float, ALL> rf(S, S.x, S.h, S.w, &gout);
  auto od = to_host(rd.k.out);
  auto of = to_host(rf.k.out);
  double scale = 0;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  for (size_t a = 0; a < ref.size(); ++a) {
    ASSERT_NEAR(od.data()[a], ref[a], 1e-12 * scale) << a;
    ASSERT_NEAR(of.data()[a], ref[a], 1e-5 * scale) << a;
  }
  if (ALL) {  // no path produces 0o: that slot stays zero; every other slot is reached
    for (int i = 0; i < S.n_recv; ++i)
      for (int c = 0; c < C; ++c) EXPECT_EQ(od(i, 16, c), 0.0);
  }
  // dE/dw: E is linear in w, so central differences are exact up to rounding
  auto gwd = to_host(rd.k.gw);
  const double eps = 1e-4;
  for (size_t a = 0; a < S.w.size(); a += stride) {
    auto wp = S.w, wm = S.w;
    wp[a] += eps;
    wm[a] -= eps;
    ASSERT_NEAR(gwd.data()[a], (energy(S.x, S.h, wp) - energy(S.x, S.h, wm)) / (2 * eps), 1e-8) << "w " << a;
  }
  auto ghd = to_host(rd.k.gh);
  auto ghf = to_host(rf.k.gh);
  for (size_t a = 0; a < S.h.size(); a += stride) {
    auto hp = S.h, hm = S.h;
    hp[a] += eps;
    hm[a] -= eps;
    const double ref_g = (energy(S.x, hp, S.w) - energy(S.x, hm, S.w)) / (2 * eps);
    ASSERT_NEAR(ghd.data()[a], ref_g, 1e-8) << "h " << a;
    ASSERT_NEAR(ghf.data()[a], ref_g, 1e-3 * (1 + std::fabs(ref_g))) << "h " << a;
  }
  auto fd = to_host(rd.k.f), vd = to_host(rd.k.vatom);
  std::vector<double> fref(S.x.size());
  const double ex = 1e-6;
  for (size_t a = 0; a < S.x.size(); ++a) {
    auto xp = S.x, xm = S.x;
    xp[a] += ex;
    xm[a] -= ex;
    fref[a] = -(energy(xp, S.h, S.w) - energy(xm, S.h, S.w)) / (2 * ex);
    EXPECT_NEAR(fd.data()[a], fref[a], 1e-6 * (1 + std::fabs(fref[a]))) << "x " << a;
  }
  const int ia[6] = {0, 1, 2, 0, 0, 1}, ib[6] = {0, 1, 2, 1, 2, 2};
  for (int v = 0; v < 6; ++v) {
    double s = 0, W = 0;
    for (int n = 0; n < S.n_total; ++n) {
      s += vd(n, v);
      W += 0.5 * (S.x[3 * n + ia[v]] * fref[3 * n + ib[v]] + S.x[3 * n + ib[v]] * fref[3 * n + ia[v]]);
    }
    EXPECT_NEAR(s, W, 1e-5 * (1 + std::fabs(W))) << "virial " << v;
  }
  (void)P;
}

}  // namespace

TEST(ConvEdgeWeights, AllPathsForwardAdjoint) { check<true>(41); }
TEST(ConvEdgeWeights, NaturalPathsForwardAdjoint) { check<false>(42); }
// 40 channels: on GPUs the adjoint team is two warps, the second partly idle (each warp sums its channels' edge
// gradients into its own slot); on host back-ends the one thread adds the later channels into its slot.
TEST(ConvEdgeWeights, FortyChannelsForwardAdjoint) { check<true>(45, 40, 97); }

// The staged adjoint (staged = 2 | 3, the default on device back-ends: w_e and gout_i double-buffered through team
// scratch; cp.async on sm_80+) gives the numbers of the unstaged one, for one and for two warps of channels (C = 4,
// 40), in both precisions where its scratch fits (on CUDA 40 KB: C = 40 double does not, and says so).
template <class T>
void expect_staged_agrees(int C, double tol) {
  const Case S = make_case(true, 49, C);
  std::mt19937 rng(50);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> gout(size_t(S.n_recv) * 32 * C);
  for (double& v : gout) v = g(rng);
  Runner<T, true> plain(S, S.x, S.h, S.w, &gout, 0);
  for (int staged : {2, 3}) {
    Runner<T, true> r(S, S.x, S.h, S.w, &gout, staged);
    if (!r.k.staged_fits()) {
      std::printf("staged adjoint does not fit the team scratch: C = %d, %zu-byte values\n", C, sizeof(T));
      continue;
    }
    auto same = [&](const auto& a, const auto& b, const char* what) {
      auto ha = to_host(a), hb = to_host(b);
      double scale = 0;
      for (size_t n = 0; n < ha.span(); ++n) scale = std::max(scale, std::fabs(double(ha.data()[n])));
      for (size_t n = 0; n < ha.span(); ++n)
        ASSERT_NEAR(hb.data()[n], ha.data()[n], tol * scale) << what << " staged " << staged << " C " << C << " at " << n;
    };
    same(plain.k.gw, r.k.gw, "gw");
    same(plain.k.gh, r.k.gh, "gh");
    same(plain.k.f, r.k.f, "f");
    same(plain.k.vatom, r.k.vatom, "vatom");
  }
}
TEST(ConvEdgeWeights, StagedAdjointAgrees) {
  for (int C : {4, 40}) {
    expect_staged_agrees<double>(C, 1e-12);
    expect_staged_agrees<float>(C, 1e-6);
  }
  const Case S = make_case(true, 51);
  Runner<double, true> r(S, S.x, S.h, S.w, nullptr);
  r.k.staged = 1;
  EXPECT_THROW(r.k.backward(), std::invalid_argument);
}

// backward() needs the edge workspace sized for the graph and C: a clear error, not out-of-bounds writes.
TEST(ConvEdgeWeights, BackwardWithoutWorkspaceThrows) {
  const Case S = make_case(true, 48);
  Runner<double, true> r(S, S.x, S.h, S.w, nullptr);
  EXPECT_NO_THROW(r.k.backward());
  r.k.edge_grad = decltype(r.k.edge_grad)();  // as if allocate_workspace() had not been called
  EXPECT_THROW(r.k.backward(), std::logic_error);
  r.k.edge_grad = decltype(r.k.edge_grad)("small", S.recv.size() - 1, 1, 3);  // sized for another graph
  EXPECT_THROW(r.k.backward(), std::logic_error);
}

TEST(ConvEdgeWeights, RotationEquivariance) {
  const Case S = make_case(true, 43);
  std::mt19937 rng(44);
  const auto R = random_rotation(rng);
  std::vector<double> D[4];
  for (int l = 0; l <= 3; ++l) D[l] = wigner_from_sh(l, R);
  auto rot = [&](const std::vector<double>& src, int n, int blocks) {
    std::vector<double> out(src.size(), 0.0);
    for (int a = 0; a < n; ++a)
      for (int bl = 0; bl < blocks; ++bl)
        for (int l = 0; l <= 3; ++l)
          for (int m = 0; m < 2 * l + 1; ++m)
            for (int m2 = 0; m2 < 2 * l + 1; ++m2)
              for (int c = 0; c < S.C; ++c)
                out[(size_t(a) * 16 * blocks + bl * 16 + l * l + m) * S.C + c] +=
                    D[l][m * (2 * l + 1) + m2] * src[(size_t(a) * 16 * blocks + bl * 16 + l * l + m2) * S.C + c];
    return out;
  };
  std::vector<double> xr(S.x.size());
  for (int n = 0; n < S.n_total; ++n) rotate(R, &S.x[3 * n], &xr[3 * n]);
  Runner<double, true> base(S, S.x, S.h, S.w, nullptr), r(S, xr, rot(S.h, S.n_total, 1), S.w, nullptr);
  auto ob = to_host(base.k.out), orr = to_host(r.k.out);
  std::vector<double> obv(ob.data(), ob.data() + ob.size());
  auto expect = rot(obv, S.n_recv, 2);
  for (size_t a = 0; a < expect.size(); ++a) EXPECT_NEAR(orr.data()[a], expect[a], 1e-10);
}
