// Fused interaction + attention (docs/model.md steps 1-2): kernels vs an independent double reference, finite
// differences of every adjoint output (forces on local and ghost atoms, dE/dh incl. the q/k paths, virial),
// rotations, translations and neighbour permutations.
#include "test_util.hpp"

using namespace bt;

namespace {

struct Model {
  int L, C, NB, H, A, dk;
  double rc, avg;
  std::vector<double> W1, b1, W2, Wg, Wq, Wk;
};

struct System {
  int n_recv, n_total;
  std::vector<double> x;          // (n_total, 3)
  std::vector<int> recv, send;    // edges (any order, may contain pairs beyond r_c)
  std::vector<double> h;          // (n_total, K, C)
};

Model make_model(int L, std::mt19937& rng, int dk = 3, int H = 6) {
  std::normal_distribution<double> g(0, 1);
  Model M{L, 8, 5, H, 2, dk, 3.0, 4.0, {}, {}, {}, {}, {}, {}};
  const int P = num_paths(L, false);
  auto fill = [&](std::vector<double>& v, size_t n, double s) {
    v.resize(n);
    for (double& a : v) a = s * g(rng);
  };
  fill(M.W1, M.H * M.NB, 0.5);
  fill(M.b1, M.H, 0.3);
  fill(M.W2, 2 * P * M.C * M.H, 0.4);
  fill(M.Wg, M.A * M.NB, 0.8);
  fill(M.Wq, M.A * M.dk * M.C, 0.5);
  fill(M.Wk, M.A * M.dk * M.C, 0.5);
  return M;
}

System make_system(int L, int C, std::mt19937& rng, int n_recv = 6, int n_total = 10, double box = 4.0) {
  std::uniform_real_distribution<double> u(0, box);
  std::normal_distribution<double> g(0, 1);
  System S;
  S.n_recv = n_recv;
  S.n_total = n_total;  // atoms n_recv.. play the role of ghosts: senders only
  S.x.resize(3 * S.n_total);
  for (double& v : S.x) v = u(rng);
  for (int i = 0; i < S.n_recv; ++i)
    for (int j = 0; j < S.n_total; ++j)
      if (i != j) {
        S.recv.push_back(i);
        S.send.push_back(j);
      }
  // shuffle the edge list: make_graph must group it
  std::vector<int> perm(S.recv.size());
  for (size_t k = 0; k < perm.size(); ++k) perm[k] = int(k);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int> r2, s2;
  for (int k : perm) {
    r2.push_back(S.recv[k]);
    s2.push_back(S.send[k]);
  }
  S.recv = r2;
  S.send = s2;
  S.h.resize(size_t(S.n_total) * num_sh(L) * C);
  for (double& v : S.h) v = g(rng);
  return S;
}

// ---------------- independent double reference (plain loops, dense CG, explicit softmax) ----------------
struct RefOut {
  std::vector<double> m, o;  // (n_recv, K, C)
};

RefOut reference(const Model& M, const System& S, const std::vector<double>& x, const std::vector<double>& h) {
  const int K = num_sh(M.L), C = M.C;
  const auto& CG = dense_cg();
  // path list and alpha, counted here independently of common.hpp
  std::vector<std::array<int, 3>> paths;
  for (int a = 0; a <= M.L; ++a)
    for (int b = 0; b <= M.L; ++b)
      for (int c = std::abs(a - b); c <= std::min(a + b, M.L); ++c)
        if ((a + b + c) % 2 == 0) paths.push_back({a, b, c});
  const int P = int(paths.size());
  std::vector<double> alpha(P);
  for (int p = 0; p < P; ++p) {
    int n = 0;
    for (auto& q : paths) n += q[2] == paths[p][2];
    alpha[p] = std::sqrt((2.0 * paths[p][2] + 1) / n);
  }
  RefOut R;
  R.m.assign(size_t(S.n_recv) * K * C, 0.0);
  R.o.assign(size_t(S.n_recv) * K * C, 0.0);
  const double pi = M_PI;
  for (int i = 0; i < S.n_recv; ++i) {
    // q_i
    std::vector<double> q(M.A * M.dk, 0.0);
    for (int a = 0; a < M.A * M.dk; ++a)
      for (int c = 0; c < C; ++c) q[a] += M.Wq[a * C + c] * h[(size_t(i) * K) * C + c];
    struct EdgeData {
      std::vector<double> logits, tp_v;  // logits (A), values (K, C)
      double u;
    };
    std::vector<EdgeData> edges;
    for (size_t e = 0; e < S.recv.size(); ++e) {
      if (S.recv[e] != i) continue;
      const int j = S.send[e];
      double r[3];
      for (int a = 0; a < 3; ++a) r[a] = x[3 * j + a] - x[3 * i + a];
      const double d = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
      if (!(d > 0 && d < M.rc)) continue;  // docs/model.md: edges are pairs with 0 < d < r_c
      const auto Y = sh_reference(M.L, r);
      const double xx = d / M.rc;
      const double u = 1 - 28 * std::pow(xx, 6) + 48 * std::pow(xx, 7) - 21 * std::pow(xx, 8);
      std::vector<double> B(M.NB);
      for (int n = 0; n < M.NB; ++n) B[n] = std::sqrt(2 / M.rc) * std::sin((n + 1) * pi * d / M.rc) / d;
      std::vector<double> hid(M.H);
      for (int k = 0; k < M.H; ++k) {
        double a = M.b1[k];
        for (int n = 0; n < M.NB; ++n) a += M.W1[k * M.NB + n] * B[n];
        hid[k] = a / (1 + std::exp(-a));
      }
      std::vector<double> Rw(2 * P * C, 0.0);
      for (int q2 = 0; q2 < 2 * P * C; ++q2) {
        for (int k = 0; k < M.H; ++k) Rw[q2] += M.W2[q2 * M.H + k] * hid[k];
        Rw[q2] *= u;
      }
      // TP(h_j, w) and TP(h_j, wv)
      std::vector<double> tpw(K * C, 0.0), tpv(K * C, 0.0);
      for (int p = 0; p < P; ++p) {
        const int l1 = paths[p][0], l2 = paths[p][1], l3 = paths[p][2];
        for (int c = 0; c < C; ++c)
          for (int a = 0; a < 2 * l1 + 1; ++a)
            for (int b = 0; b < 2 * l2 + 1; ++b)
              for (int k = 0; k < 2 * l3 + 1; ++k) {
                const double t = alpha[p] * CG(l1, l2, l3, a, b, k) * h[(size_t(j) * K + l1 * l1 + a) * C + c] *
                                 Y[l2 * l2 + b];
                tpw[(l3 * l3 + k) * C + c] += Rw[p * C + c] * t;
                tpv[(l3 * l3 + k) * C + c] += Rw[P * C + p * C + c] * t;
              }
      }
      for (int k = 0; k < K * C; ++k) R.m[size_t(i) * K * C + k] += tpw[k] / M.avg;
      EdgeData ed;
      ed.u = u;
      ed.tp_v = tpv;
      for (int a = 0; a < M.A; ++a) {
        double kj = 0, s = 0;
        for (int e2 = 0; e2 < M.dk; ++e2) {
          kj = 0;
          for (int c = 0; c < C; ++c) kj += M.Wk[(a * M.dk + e2) * C + c] * h[(size_t(j) * K) * C + c];
          s += q[a * M.dk + e2] * kj;
        }
        s /= std::sqrt(double(M.dk));
        for (int n = 0; n < M.NB; ++n) s += M.Wg[a * M.NB + n] * B[n];
        ed.logits.push_back(s);
      }
      edges.push_back(ed);
    }
    const int chead = C / M.A;
    for (int a = 0; a < M.A; ++a) {
      // plain softmax weights exp(s) u / sum exp(s) u (docs/model.md step 2 without the max shift, which only
      // guards against overflow; shifting by max s here is an independent, equivalent choice)
      double mx = -1e300, Z = 0;
      for (auto& ed : edges) mx = std::max(mx, ed.logits[a]);
      for (auto& ed : edges) Z += std::exp(ed.logits[a] - mx) * ed.u;
      for (auto& ed : edges) {
        const double p = std::exp(ed.logits[a] - mx) * ed.u / Z;
        for (int k = 0; k < K; ++k)
          for (int c = a * chead; c < (a + 1) * chead; ++c)
            R.o[(size_t(i) * K + k) * C + c] += p * ed.tp_v[k * C + c];
      }
    }
  }
  return R;
}

// How the kernels are launched: team size (0 = automatic) and LayerParams::radial_mode / radial_chunk.
struct Launch {
  int team_size, radial_mode, radial_chunk, min_blocks;  // min_blocks: LayerParams::adjoint_min_blocks
  int carveout = 0;                                      // LayerParams::shared_carveout
  int basis_chunk = 0;                                   // LayerParams::basis_chunk
  int const_slots = 0;                                   // LayerParams::const_slot_launch
  // InteractionWork::f_send / vatom_send given (the sender adjoint's own accumulators, summed after the run) and
  // LayerParams::concurrent_adjoints
  bool send_accumulators = false;
  int concurrent = LayerParams<float, Dev>().concurrent_adjoints;
  Launch(int ts = 0, int mode = 0, int chunk = 0, int blocks = LayerParams<float, Dev>().adjoint_min_blocks)
      : team_size(ts), radial_mode(mode), radial_chunk(chunk), min_blocks(blocks) {}
  std::string str() const {
    return "team_size " + std::to_string(team_size) + " radial_mode " + std::to_string(radial_mode) + " chunk " +
           std::to_string(radial_chunk) + " min_blocks " + std::to_string(min_blocks) + " basis " +
           std::to_string(basis_chunk) + " const_slots " + std::to_string(const_slots) + " send_acc " +
           std::to_string(send_accumulators) + " concurrent " + std::to_string(concurrent);
  }
};

template <class T>
struct KernelRun {
  Kokkos::View<T***, Kokkos::LayoutRight, Dev> m, o, gh;
  Kokkos::View<double**, Kokkos::LayoutRight, Dev> f, vatom;
  Kokkos::View<T**, Kokkos::LayoutRight, Dev> M, Z;  // saved softmax state
  Kokkos::View<double**, Kokkos::LayoutRight, Dev> f_send, vatom_send;  // Launch::send_accumulators: before the sum
};

template <class T, int L>
KernelRun<T> run_kernels(const Model& M, const System& S, const std::vector<double>& x,
                         const std::vector<double>& h, const std::vector<double>& gm, const std::vector<double>& go,
                         bool backward, Launch ln = {}) {
  const int K = num_sh(L), C = M.C, team_size = ln.team_size;
  std::vector<T> xt(x.begin(), x.end());
  auto g = make_graph<T, Dev>(xt, S.n_recv, S.recv, S.send);
  auto prm = make_layer_params<T, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg, M.Wq, M.Wk);
  prm.radial_mode = ln.radial_mode;
  prm.radial_chunk = ln.radial_chunk;
  prm.adjoint_min_blocks = ln.min_blocks;
  prm.shared_carveout = ln.carveout;
  prm.basis_chunk = ln.basis_chunk;
  prm.const_slot_launch = ln.const_slots;
  prm.concurrent_adjoints = ln.concurrent;
  auto upload = [&](const std::vector<double>& src, int n, const char* name) {
    Kokkos::View<T***, Kokkos::LayoutRight, Dev> v(std::string(name), n, K, C);
    auto hm = Kokkos::create_mirror_view(v);
    for (int a = 0; a < n; ++a)
      for (int k = 0; k < K; ++k)
        for (int c = 0; c < C; ++c) hm(a, k, c) = T(src[(size_t(a) * K + k) * C + c]);
    Kokkos::deep_copy(v, hm);
    return v;
  };
  KernelRun<T> out;
  auto hv = upload(h, S.n_total, "h");
  out.m = decltype(out.m)("m", S.n_recv, K, C);
  out.o = decltype(out.m)("o", S.n_recv, K, C);
  InteractionWork<T, Dev> work;
  interaction_forward<T, Dev, L, true>(g, prm, hv, out.m, out.o, work, team_size);
  out.M = work.M;
  out.Z = work.Z;
  if (backward) {
    auto gmv = upload(gm, S.n_recv, "gm");
    auto gov = upload(go, S.n_recv, "go");
    out.gh = decltype(out.m)("gh", S.n_total, K, C);
    out.f = decltype(out.f)("f", S.n_total, 3);
    out.vatom = decltype(out.f)("vatom", S.n_total, 6);
    if (ln.send_accumulators) {
      work.f_send = decltype(out.f)("f_send", S.n_total, 3);
      work.vatom_send = decltype(out.f)("vatom_send", S.n_total, 6);
    }
    interaction_backward<T, Dev, L, true>(g, prm, hv, out.o, gmv, gov, out.gh, out.f, out.vatom, work, team_size);
    if (ln.send_accumulators) {  // keep the parts, then sum them as the model does
      out.f_send = decltype(out.f)("f_send_copy", S.n_total, 3);
      out.vatom_send = decltype(out.f)("vatom_send_copy", S.n_total, 6);
      Kokkos::deep_copy(out.f_send, work.f_send);
      Kokkos::deep_copy(out.vatom_send, work.vatom_send);
      auto f = out.f, v = out.vatom, fs = work.f_send, vs = work.vatom_send;
      Kokkos::parallel_for(
          "sum_send", Kokkos::RangePolicy<Dev::execution_space>(0, S.n_total), KOKKOS_LAMBDA(int n) {
            for (int a = 0; a < 3; ++a) f(n, a) += fs(n, a);
            for (int a = 0; a < 6; ++a) v(n, a) += vs(n, a);
          });
    }
  }
  Kokkos::fence();
  return out;
}

double energy(const RefOut& R, const std::vector<double>& gm, const std::vector<double>& go) {
  double E = 0;
  for (size_t k = 0; k < gm.size(); ++k) E += gm[k] * R.m[k] + go[k] * R.o[k];
  return E;
}

// Reference outputs and central differences of E = gm.m + go.o (forces on every atom, dE/dh), computed once
// per system and compared with the kernels for any number of team sizes.
struct Expected {
  RefOut ref;
  std::vector<double> gm, go, fref, ghref;
  double scale = 0, fscale = 0, gscale = 0;
};

Expected expected(const Model& M, const System& S, std::mt19937& rng) {
  const int K = num_sh(M.L), C = M.C;
  std::normal_distribution<double> g(0, 1);
  Expected E;
  E.gm.resize(size_t(S.n_recv) * K * C);
  E.go.resize(E.gm.size());
  for (double& v : E.gm) v = g(rng);
  for (double& v : E.go) v = g(rng);
  E.ref = reference(M, S, S.x, S.h);
  for (double v : E.ref.m) E.scale = std::max(E.scale, std::fabs(v));
  for (double v : E.ref.o) E.scale = std::max(E.scale, std::fabs(v));
  const double eps = 1e-5;
  E.fref.resize(3 * S.n_total);
  for (int n = 0; n < S.n_total; ++n)
    for (int a = 0; a < 3; ++a) {
      auto xp = S.x, xm = S.x;
      xp[3 * n + a] += eps;
      xm[3 * n + a] -= eps;
      E.fref[3 * n + a] =
          -(energy(reference(M, S, xp, S.h), E.gm, E.go) - energy(reference(M, S, xm, S.h), E.gm, E.go)) / (2 * eps);
      E.fscale = std::max(E.fscale, std::fabs(E.fref[3 * n + a]));
    }
  E.ghref.resize(S.h.size());
  for (size_t idx = 0; idx < S.h.size(); ++idx) {
    auto hp = S.h, hm = S.h;
    hp[idx] += eps;
    hm[idx] -= eps;
    E.ghref[idx] =
        (energy(reference(M, S, S.x, hp), E.gm, E.go) - energy(reference(M, S, S.x, hm), E.gm, E.go)) / (2 * eps);
    E.gscale = std::max(E.gscale, std::fabs(E.ghref[idx]));
  }
  return E;
}

template <int L>
void check_against(const Model& M, const System& S, const Expected& E, Launch team_size) {
  SCOPED_TRACE(team_size.str());
  const int K = num_sh(L), C = M.C;
  const auto& ref = E.ref;
  const double scale = E.scale, fscale = E.fscale, gscale = E.gscale;
  auto kd = run_kernels<double, L>(M, S, S.x, S.h, E.gm, E.go, true, team_size);
  auto kf = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, team_size);
  auto md = to_host(kd.m), od = to_host(kd.o);
  auto mf = to_host(kf.m), of = to_host(kf.o);
  ASSERT_GT(scale, 1e-3);
  for (int i = 0; i < S.n_recv; ++i)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c) {
        const size_t idx = (size_t(i) * K + k) * C + c;
        ASSERT_NEAR(md(i, k, c), ref.m[idx], 1e-12 * scale) << i << " " << k << " " << c;
        ASSERT_NEAR(od(i, k, c), ref.o[idx], 1e-12 * scale) << i << " " << k << " " << c;
        ASSERT_NEAR(mf(i, k, c), ref.m[idx], 2e-5 * scale);
        ASSERT_NEAR(of(i, k, c), ref.o[idx], 2e-5 * scale);
      }

  // forces on every atom (ghost senders included) vs central differences of the reference energy
  auto fd = to_host(kd.f), ff = to_host(kf.f);
  ASSERT_GT(fscale, 1e-3);
  for (int n = 0; n < S.n_total; ++n)
    for (int a = 0; a < 3; ++a) {
      EXPECT_NEAR(fd(n, a), E.fref[3 * n + a], 2e-7 * fscale) << "atom " << n << " dir " << a;
      EXPECT_NEAR(ff(n, a), E.fref[3 * n + a], 1e-3 * fscale) << "float atom " << n << " dir " << a;
    }
  // virial: sum of per-atom tallies equals sum_n x_n (x) F_n (translation invariance makes it unique)
  auto vd = to_host(kd.vatom);
  double W[3][3] = {};
  for (int n = 0; n < S.n_total; ++n)
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) W[a][b] += S.x[3 * n + a] * E.fref[3 * n + b];
  const int ia[6] = {0, 1, 2, 0, 0, 1}, ib[6] = {0, 1, 2, 1, 2, 2};
  for (int v = 0; v < 6; ++v) {
    double s = 0;
    for (int n = 0; n < S.n_total; ++n) s += vd(n, v);
    EXPECT_NEAR(s, 0.5 * (W[ia[v]][ib[v]] + W[ib[v]][ia[v]]), 1e-6 * fscale * 4) << "virial " << v;
  }
  // dE/dh for every atom and component (conv, values, keys and queries)
  auto ghd = to_host(kd.gh);
  auto ghf = to_host(kf.gh);
  for (int n = 0; n < S.n_total; ++n)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c) {
        const size_t idx = (size_t(n) * K + k) * C + c;
        EXPECT_NEAR(ghd(n, k, c), E.ghref[idx], 2e-7 * gscale) << n << " " << k << " " << c;
        EXPECT_NEAR(ghf(n, k, c), E.ghref[idx], 1e-3 * gscale) << n << " " << k << " " << c;
      }
}

template <int L>
void check_forward_and_adjoint(unsigned seed, int n_recv = 6, int n_total = 10, double box = 4.0,
                               std::vector<Launch> team_sizes = {0}, int dk = 3, int H = 6) {
  std::mt19937 rng(seed);
  const Model M = make_model(L, rng, dk, H);
  const System S = make_system(L, M.C, rng, n_recv, n_total, box);
  const Expected E = expected(M, S, rng);
  for (const Launch& ts : team_sizes) check_against<L>(M, S, E, ts);
}

}  // namespace

TEST(Interaction, ForwardAndAdjointL1) { check_forward_and_adjoint<1>(11); }
TEST(Interaction, ForwardAndAdjointL2) { check_forward_and_adjoint<2>(12); }
TEST(Interaction, ForwardAndAdjointL3) { check_forward_and_adjoint<3>(13); }
// dk > kSmallDk: the adjoint kernels with the wide dq/dk partials (the other tests have dk = 3)
TEST(Interaction, ForwardAndAdjointWideKeys) { check_forward_and_adjoint<2>(19, 6, 10, 4.0, {0}, 12); }
// ~40 neighbours per receiver: several team-shared edge chunks per atom (chunk boundaries, softmax carry-over).
TEST(Interaction, ForwardAndAdjointManyNeighbours) { check_forward_and_adjoint<1>(14, 4, 44, 3.0); }

// Largest team the back-end runs (on OpenMP: the thread count).
static int team_size_max() {
  using Kern = InteractionKernel<double, Dev, 1, true>;
  Kokkos::TeamPolicy<Dev::execution_space, Kern::RecvAdj> probe(1, 1);
  return probe.team_size_max(Kern{}, Kokkos::ParallelForTag());
}

// The one-thread-per-channel code path (used on GPUs) on the host back-end: needs a team size of C = 8, i.e.
// at least 8 OpenMP threads (CTest runs this test with OMP_NUM_THREADS=8); skipped otherwise.
TEST(Interaction, TeamPerChannelPath) {
  const int C = 8, tmax = team_size_max();
  if (tmax < C) GTEST_SKIP() << "team_size_max " << tmax << " < C";
  check_forward_and_adjoint<1>(15, 4, 44, 3.0, {C});
  check_forward_and_adjoint<2>(16, 6, 10, 4.0, {C});
  check_forward_and_adjoint<2>(20, 6, 10, 4.0, {C}, 12);  // dk > kSmallDk
}

// Largest |a - b| over two views of equal shape (rank 2 or 3) and the largest |a|.
template <class V>
std::pair<double, double> max_diff(const V& a, const V& b) {
  auto ha = to_host(a), hb = to_host(b);
  double d = 0, s = 0;  // LayoutRight: contiguous; extent(2) of a rank-2 view is 1
  for (size_t x = 0; x < ha.extent(0) * ha.extent(1) * ha.extent(2); ++x) {
    const double va = double(ha.data()[x]), vb = double(hb.data()[x]);
    d = std::max(d, std::fabs(va - vb));
    s = std::max(s, std::fabs(va));
  }
  return {d, s};
}

// Two kernel runs give bit for bit the same m, o, dE/dh, forces and per-atom virial.
template <class T>
void expect_bitwise_equal(const KernelRun<T>& a, const KernelRun<T>& b) {
  EXPECT_EQ(max_diff(a.m, b.m).first, 0.0);
  EXPECT_EQ(max_diff(a.o, b.o).first, 0.0);
  EXPECT_EQ(max_diff(a.gh, b.gh).first, 0.0);
  EXPECT_EQ(max_diff(a.f, b.f).first, 0.0);
  EXPECT_EQ(max_diff(a.vatom, b.vatom).first, 0.0);
}

// Receivers of the edge-split test: 0 and 3 list their neighbours so that only list slots 3 (mod 4), resp.
// 0 (mod 4), lie inside r_c (with S = 4 or 2 only one edge slot meets edges; receiver 0 spans two chunks),
// 1 has two edges (fewer than S), 2 has no edge at all, 4 lists every other atom; the last atom is in no edge.
System split_system(int L, int C, double rc, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 8.0);
  std::normal_distribution<double> g(0, 1);
  System S;
  S.n_recv = 5;
  S.n_total = 26;
  S.x.resize(3 * S.n_total);
  for (double& v : S.x) v = u(rng);
  const double centre[2][3] = {{4.0, 4.0, 4.0}, {4.4, 3.6, 4.3}};
  for (int a = 0; a < 3; ++a) {
    S.x[0 + a] = centre[0][a];
    S.x[9 + a] = centre[1][a];
  }
  auto dist = [&](int i, int j) {
    double d2 = 0;
    for (int a = 0; a < 3; ++a) d2 += (S.x[3 * j + a] - S.x[3 * i + a]) * (S.x[3 * j + a] - S.x[3 * i + a]);
    return std::sqrt(d2);
  };
  auto add = [&](int i, int j) {
    S.recv.push_back(i);
    S.send.push_back(j);
  };
  const int last = S.n_total - 1;
  auto patterned = [&](int i, int phase) {
    std::vector<int> in, out;
    for (int j = 0; j < last; ++j)
      if (j != i) (dist(i, j) < rc ? in : out).push_back(j);
    for (size_t p = 0;; ++p) {
      auto& pool = int(p % 4) == phase ? in : out;
      if (pool.empty()) break;
      add(i, pool.back());
      pool.pop_back();
    }
  };
  patterned(0, 3);
  std::vector<std::pair<double, int>> near1;
  for (int j = 0; j < last; ++j)
    if (j != 1) near1.push_back({dist(1, j), j});
  std::sort(near1.begin(), near1.end());
  add(1, near1[0].second);
  add(1, near1[1].second);
  patterned(3, 0);
  for (int j = 0; j < last; ++j)
    if (j != 4) add(4, j);
  S.h.resize(size_t(S.n_total) * num_sh(L) * C);
  for (double& v : S.h) v = g(rng);
  return S;
}

// Launches a and b (e.g. S = 1 and S = 4, or radial mode 0 and 1) agree to rounding; b repeats bit for bit;
// receiver 2 (no edges) gives m = o = 0, M = -1e30, Z = 0 exactly.
template <class T, int L>
void compare_runs(const Model& M, const System& S, const Expected& E, Launch a, Launch b, double tol) {
  SCOPED_TRACE(std::string(sizeof(T) == 4 ? "float " : "double ") + a.str() + " vs " + b.str());
  auto one = run_kernels<T, L>(M, S, S.x, S.h, E.gm, E.go, true, a);
  auto four = run_kernels<T, L>(M, S, S.x, S.h, E.gm, E.go, true, b);
  auto again = run_kernels<T, L>(M, S, S.x, S.h, E.gm, E.go, true, b);
  // a vs b within tol of the largest |value| (1 at least); a second run of b identical
  auto expect_split = [&](const auto& s1, const auto& s4, const auto& s4again, const char* what) {
    const auto ds = max_diff(s1, s4);
    EXPECT_LE(ds.first, tol * std::max(1.0, ds.second)) << what;
    EXPECT_EQ(max_diff(s4, s4again).first, 0.0) << what << " repeated";
  };
  expect_split(one.m, four.m, again.m, "m");
  expect_split(one.o, four.o, again.o, "o");
  expect_split(one.gh, four.gh, again.gh, "gh");
  expect_split(one.f, four.f, again.f, "f");
  expect_split(one.vatom, four.vatom, again.vatom, "vatom");
  expect_split(one.Z, four.Z, again.Z, "Z");
  EXPECT_EQ(max_diff(one.M, four.M).first, 0.0) << "M (a max over the same logits)";
  auto mh = to_host(four.m), oh = to_host(four.o);
  auto Mh = to_host(four.M), Zh = to_host(four.Z);
  for (int k = 0; k < num_sh(L); ++k)
    for (int c = 0; c < M.C; ++c) {
      EXPECT_EQ(mh(2, k, c), T(0));
      EXPECT_EQ(oh(2, k, c), T(0));
    }
  for (int a = 0; a < M.A; ++a) {
    EXPECT_EQ(Mh(2, a), T(-1e30));
    EXPECT_EQ(Zh(2, a), T(0));
    EXPECT_GE(Zh(0, a), T(1));
  }
}

// The edge-split GPU path (team_size = C * S: thread = channel + edge slot) on the host back-end: needs teams of
// 4 C = 32 OpenMP threads (CTest runs this test with OMP_NUM_THREADS=32); skipped otherwise.
TEST(Interaction, EdgeSplitPath) {
  using Kern = InteractionKernel<double, Dev, 1, true>;
  const int C = 8, tmax = team_size_max();
  if (tmax < 4 * C) GTEST_SKIP() << "team_size_max " << tmax << " < 4 C";
  // random graph: several chunks per receiver, softmax carried across chunks and slots
  check_forward_and_adjoint<1>(15, 4, 44, 3.0, {2 * C, 4 * C});
  constexpr int L = 2;
  std::mt19937 rng(71);
  const Model M = make_model(L, rng);
  ASSERT_EQ(M.C, C);
  const System S = split_system(L, C, M.rc, rng);
  // premise: receiver 0 spans two chunks and has >= 2 edges inside r_c, all in list slots 3 (mod 4)
  int n0 = 0, in0 = 0;
  for (size_t e = 0; e < S.recv.size(); ++e)
    if (S.recv[e] == 0) {
      double d2 = 0;
      for (int a = 0; a < 3; ++a) d2 += std::pow(S.x[3 * S.send[e] + a] - S.x[a], 2);
      if (std::sqrt(d2) < M.rc) {
        EXPECT_EQ(n0 % 4, 3);
        ++in0;
      }
      ++n0;
    }
  ASSERT_GT(n0, Kern::CH);
  ASSERT_GE(in0, 2);
  const Expected E = expected(M, S, rng);
  for (int ts : {1, C, 2 * C, 4 * C}) check_against<L>(M, S, E, ts);
  compare_runs<double, L>(M, S, E, C, 4 * C, 1e-12);
  compare_runs<float, L>(M, S, E, C, 4 * C, 2e-5);
}

// Radial mode 1 (the team computes the chunk's radial outputs as a GEMM into scratch) on the host back-end with
// teams of C * S threads (CTest runs it with OMP_NUM_THREADS=32) and with one thread per team: chunks of 8, 4 and 2
// edges (register blocks of 4 and 2 edges, partial last blocks) vs the reference and finite differences, and vs
// mode 0 to rounding.
TEST(Interaction, RadialGemmPath) {
  const int C = 8, tmax = team_size_max();
  if (tmax < 4 * C) GTEST_SKIP() << "team_size_max " << tmax << " < 4 C";
  // random graphs: several chunks per receiver; L = 3 (NW C = 184 columns: 5 or 6 per thread of 32, tiles of 4,
  // 2 and 1 columns)
  check_forward_and_adjoint<1>(15, 4, 44, 3.0, {{C, 1, 8}, {2 * C, 1, 2}, {4 * C, 1, 4}, {4 * C, 1, 0}});
  check_forward_and_adjoint<3>(17, 3, 9, 4.0, {{C, 1, 2}, {4 * C, 1, 8}});
  check_forward_and_adjoint<2>(21, 4, 12, 4.0, {{4 * C, 1, 0}}, 12);  // dk > kSmallDk
  // split_system: a receiver without edges, one with 2 edges (fewer than the chunk), edges beyond r_c
  constexpr int L = 2;
  std::mt19937 rng(71);
  const Model M = make_model(L, rng);
  const System S = split_system(L, C, M.rc, rng);
  const Expected E = expected(M, S, rng);
  for (int ts : {C, 2 * C, 4 * C})
    for (int chunk : {8, 4, 2}) check_against<L>(M, S, E, {ts, 1, chunk});
  for (int chunk : {8, 4, 2}) {
    compare_runs<double, L>(M, S, E, {4 * C, 0, 0}, {4 * C, 1, chunk}, 1e-12);
    compare_runs<float, L>(M, S, E, {4 * C, 0, 0}, {4 * C, 1, chunk}, 2e-5);
  }
  compare_runs<float, L>(M, S, E, {C, 0, 0}, {2 * C, 1, 2}, 2e-5);
  // one thread per team (host back-ends): the thread runs the chunk GEMM, then loops over the channels, with the
  // adjoint partials accumulated across chunks in scratch apart from the chunk
  for (int chunk : {8, 4, 2}) check_against<L>(M, S, E, {1, 1, chunk});
  compare_runs<double, L>(M, S, E, {1, 0, 0}, {1, 1, 0}, 1e-12);
  compare_runs<float, L>(M, S, E, {1, 0, 0}, {1, 1, 0}, 2e-5);
}

// Radial mode 2 (the chunk GEMM on tensor cores, 3xTF32) needs H a multiple of 8 and whole warps: H = 16 (2 k
// steps) and 40 (5: past the unrolled 4), teams of 32 and 64 threads (C = 8: S = 4, 8), chunks of 8, 4 and 2
// (the adjoint's 4-edge groups with s and ds/dd side by side; partial groups: a receiver with 2 edges; chunks
// below 8 / 4 edges run mode 1 in the forward / adjoint), vs the reference and finite differences and vs mode 1
// to rounding. Where the tensor cores exist (sm_80+ CUDA build) the launch must report them for float; elsewhere
// (host back-ends: CTest runs this with OMP_NUM_THREADS=32, teams of 32 only) mode 2 is mode 1.
TEST(Interaction, TensorCoreRadial) {
  const int C = 8, tmax = team_size_max();
  if (tmax < 4 * C) GTEST_SKIP() << "team_size_max " << tmax << " < 4 C";
  std::vector<int> teams = {32};
  if (tmax >= 64) teams.push_back(64);
  constexpr int L = 2;
  std::mt19937 rng(91);
  for (int H : {16, 40}) {
    SCOPED_TRACE("H " + std::to_string(H));
    const Model M = make_model(L, rng, 3, H);
    auto prm = make_layer_params<float, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg,
                                                M.Wq, M.Wk);
    ASSERT_GT(prm.W2tc.extent(0), 0u);  // fragments packed for float
    const bool tcs = kTensorCoreTf32 && !runs_on_host<Dev::execution_space>;
    for (int ts : teams) {
      prm.radial_mode = 2;
      const auto ln = interaction_launch<float, Dev, L, true>(prm, ts);  // automatic chunk: 8 edges
      EXPECT_EQ(ln.tc_fwd, tcs) << ts;
      EXPECT_EQ(ln.tc_adj, tcs) << ts;
      for (int chunk : {2, 4, 8}) {  // tensor cores only for chunks that fill the MMA: 8 (forward), 4 (adjoint)
        prm.radial_chunk = chunk;
        const auto lc = interaction_launch<float, Dev, L, true>(prm, ts);
        EXPECT_EQ(lc.tc_fwd, tcs && chunk >= 8) << ts << " " << chunk;
        EXPECT_EQ(lc.tc_adj, tcs && chunk >= 4) << ts << " " << chunk;
      }
      prm.radial_chunk = 0;
      prm.radial_mode = 1;
      const auto ln1 = interaction_launch<float, Dev, L, true>(prm, ts);
      EXPECT_FALSE(ln1.tc_fwd || ln1.tc_adj);
    }
    const System S = split_system(L, C, M.rc, rng);
    const Expected E = expected(M, S, rng);
    for (int ts : teams)
      for (int chunk : {8, 4, 2}) {
        check_against<L>(M, S, E, {ts, 2, chunk});
        compare_runs<float, L>(M, S, E, {ts, 1, chunk}, {ts, 2, chunk}, 2e-5);
      }
  }
  // L = 1 and 3 (NW C = 64 and 368 columns: 4 and 23 tiles over 1 or 2 warps), several chunks per receiver
  check_forward_and_adjoint<1>(92, 4, 44, 3.0, {{32, 2, 8}, {teams.back(), 2, 4}}, 3, 16);
  check_forward_and_adjoint<3>(93, 3, 9, 4.0, {{32, 2, 2}, {teams.back(), 2, 8}}, 3, 16);
  // tf32_round: nearest TF32 (10 mantissa bits), ties away from zero; 3xTF32 parts recover x to 2^-21
  EXPECT_EQ(tf32_round(1.0f + 0x1p-11f), 1.0f + 0x1p-10f);  // tie: away from zero
  EXPECT_EQ(tf32_round(-(1.0f + 0x1p-11f)), -(1.0f + 0x1p-10f));
  EXPECT_EQ(tf32_round(1.0f + 0x1p-12f), 1.0f);
  std::uniform_real_distribution<float> uf(-3.f, 3.f);
  std::vector<float> W(16 * 32);
  for (float& w : W) {
    w = uf(rng);
    const float big = tf32_round(w), small = tf32_round(w - big);
    EXPECT_EQ(big, tf32_round(big));
    EXPECT_LE(std::fabs(w - big), std::ldexp(std::fabs(w), -11));
    EXPECT_LE(std::fabs(w - (big + small)), std::ldexp(std::fabs(w), -21));
  }
  // rows (k) 16, cols (m) 32: 2 tiles x 2 k steps
  const auto frag = pack_a_fragments([&](int k, int m) { return W[size_t(k) * 32 + m]; }, 16, 32);
  std::vector<int> seen(W.size(), 0);
  for (int tile = 0; tile < 2; ++tile)
    for (int ks = 0; ks < 2; ++ks)
      for (int l = 0; l < 32; ++l)
        for (int r = 0; r < 4; ++r) {
          const size_t w = size_t(ks * 8 + MmaTile::a_col(l, r)) * 32 + tile * 16 + MmaTile::a_row(l, r);
          EXPECT_EQ(frag[((size_t(tile) * 2 + ks) * 32 + l) * 4 + r], W[w]);
          ++seen[w];
        }
  for (int n : seen) EXPECT_EQ(n, 1);  // every W entry in exactly one fragment slot
}

// The L = 2, C = 8 case of the launch-variant tests below: model, edge-split system and reference values (finite
// differences included) from one seed.
struct SplitCase {
  Model M;
  System S;
  Expected E;
};
SplitCase split_case(unsigned seed) {
  constexpr int L = 2;
  const int C = 8;
  std::mt19937 rng(seed);
  Model M = make_model(L, rng, 3, 16);
  System S = split_system(L, C, M.rc, rng);
  Expected E = expected(M, S, rng);
  return {std::move(M), std::move(S), std::move(E)};
}

// LayerParams::adjoint_min_blocks = 3 (adjoints capped at 168 registers; compiled for device back-ends, float,
// dk <= kSmallDk, radial mode >= 1, teams <= 128): the launch must report the cap exactly there, and the capped
// kernels must match the reference, finite differences and the uncapped kernels (the cap changes registers, not
// arithmetic: equal to rounding).
TEST(Interaction, AdjointRegisterCap) {
  if (runs_on_host<Dev::execution_space>) GTEST_SKIP() << "the register cap is compiled for device back-ends only";
  const int C = 8;
  constexpr int L = 2;
  std::mt19937 rng(95);
  const Model M = make_model(L, rng, 3, 16);
  auto prm = make_layer_params<float, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg, M.Wq,
                                              M.Wk);
  for (int mode : {0, 1, 2})
    for (int ts : {32, 64})  // the teams TensorCoreRadial runs on the H200 with this C
      for (int blocks : {0, 3}) {
        prm.radial_mode = mode;
        prm.adjoint_min_blocks = blocks;
        const auto ln = interaction_launch<float, Dev, L, true>(prm, ts);
        EXPECT_EQ(ln.capped_adj, blocks == 3 && mode >= 1 && ts <= 128) << mode << " " << ts << " " << blocks;
      }
  const System S = split_system(L, C, M.rc, rng);
  const Expected E = expected(M, S, rng);
  for (int ts : {32, 64})
    for (int mode : {1, 2}) {
      check_against<L>(M, S, E, {ts, mode, 0, 3});
      compare_runs<float, L>(M, S, E, {ts, mode, 0, 0}, {ts, mode, 0, 3}, 1e-6);
    }
}

// LayerParams::shared_carveout: after a launch the kernel carries the requested carveout (CUDA only), and the
// results are bitwise those of the default cache split.
TEST(Interaction, SharedCarveout) {
  using Kern = InteractionKernel<float, Dev, 2, true>;
  using FwdPolicy = Kokkos::TeamPolicy<Dev::execution_space, Kern::ForwardT<true>>;
  // (the attribute itself reads -1 on CUDA too until a carveout is set, so it cannot tell whether we run there)
  if (!carveout_applies<FwdPolicy>) GTEST_SKIP() << "carveouts exist on CUDA only";
  constexpr int L = 2;  // split_case's C = 8
  const auto [M, S, E] = split_case(96);
  auto plain = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, {32, 1, 0});
  Launch carved(32, 1, 0);
  carved.carveout = 50;
  auto a = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, carved);
  auto b = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, carved);  // launched with the carveout in place
  EXPECT_EQ((shared_carveout_of<Kern, FwdPolicy>()), 50);
  for (const auto* run : {&a, &b}) {
    EXPECT_EQ(max_diff(plain.m, run->m).first, 0.0);
    EXPECT_EQ(max_diff(plain.o, run->o).first, 0.0);
    EXPECT_EQ(max_diff(plain.gh, run->gh).first, 0.0);
    EXPECT_EQ(max_diff(plain.f, run->f).first, 0.0);
  }
}

// LayerParams::const_slot_launch (CUDA builds): the fused kernels launched by parallel_for_const_slots (their
// functor in constant-memory slots of their own, used in turn) give bit for bit the results of Kokkos's launch, over
// several calls (both slots of each kernel, back to back without a fence between the launches of one call), for the
// forward and the capped adjoints at teams of 32 and 64.
TEST(Interaction, ConstSlotLaunch) {
  using Kern = InteractionKernel<float, Dev, 2, true>;
  using FwdPolicy = Kokkos::TeamPolicy<Dev::execution_space, Kern::ForwardT<true>>;
  if (!const_slots_compiled<Kern, FwdPolicy>) GTEST_SKIP() << "our own constant-memory launch exists in CUDA builds only";
  EXPECT_NE((const_slot_kernels<Kern, FwdPolicy>().first), nullptr);
  constexpr int L = 2;  // split_case's C = 8
  const auto [M, S, E] = split_case(99);
  for (int ts : {32, 64})  // the teams TensorCoreRadial and AdjointRegisterCap run on the H200 with this C
    for (int mode : {1, 2}) {
      const Launch plain(ts, mode, 0);
      const auto ref = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, plain);
      Launch own = plain;
      own.const_slots = 1;
      for (int rep = 0; rep < 3; ++rep) {
        SCOPED_TRACE(own.str() + " rep " + std::to_string(rep));
        expect_bitwise_equal(ref, run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, own));
      }
    }
  Launch own(64, 2, 0);
  own.const_slots = 1;
  check_against<L>(M, S, E, own);  // and against the reference and finite differences
}

// LayerParams::basis_chunk: several radial chunks per prepare pass (modes 1 and 2) give bit for bit the results of
// one prepare pass per radial chunk (basis_chunk = 1): the edge slots see the same edges in the same order.
// Receivers with up to 89 candidate edges, some beyond r_c: several basis chunks of up to 64 edges, partial last
// basis and radial chunks (the other tests check the default basis chunks against the reference and finite
// differences); and the launch report.
TEST(Interaction, BasisChunks) {
  const int C = 8, tmax = team_size_max();
  if (tmax < 4 * C) GTEST_SKIP() << "team_size_max " << tmax << " < 4 C";
  constexpr int L = 2;
  std::mt19937 rng(97);
  const Model M = make_model(L, rng, 3, 16);
  const System S = make_system(L, C, rng, 4, 90, 3.0);
  Expected E;  // upstream gradients only (no reference: the comparison is with basis_chunk = 1)
  std::normal_distribution<double> gauss(0, 1);
  for (auto* v : {&E.gm, &E.go}) {
    v->resize(size_t(S.n_recv) * num_sh(L) * C);
    for (double& a : *v) a = gauss(rng);
  }
  auto prm = make_layer_params<float, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg, M.Wq,
                                              M.Wk);
  for (int mode : {1, 2})
    for (int ts : {C, 4 * C})
      for (int chunk : {2, 4, 8}) {
        Launch one(ts, mode, chunk);
        one.basis_chunk = 1;
        const auto ref = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, one);
        for (int bc : {0, 24}) {
          Launch b = one;
          b.basis_chunk = bc;
          SCOPED_TRACE(b.str());
          const auto run = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, b);
          expect_bitwise_equal(ref, run);
          EXPECT_EQ(max_diff(ref.Z, run.Z).first, 0.0);
          // the launch: basis chunks are multiples of the radial chunk, at most 64 and at most the request
          prm.radial_mode = mode;
          prm.radial_chunk = chunk;
          prm.basis_chunk = bc;
          const auto ln = interaction_launch<float, Dev, L, true>(prm, ts);
          for (const auto& [basis, rad] : {std::pair{ln.basis_fwd, ln.chunk_fwd}, std::pair{ln.basis_adj, ln.chunk_adj}}) {
            ASSERT_GT(rad, 0);  // these small chunks fit everywhere: mode 1 runs
            EXPECT_EQ(basis % rad, 0) << basis << " " << rad;
            EXPECT_LE(basis, bc > 0 ? std::max(bc / rad * rad, rad) : kMaxBasisChunk) << basis << " " << rad;
            if (bc == 0 && runs_on_host<Dev::execution_space>) EXPECT_EQ(basis, kMaxBasisChunk);  // no scratch limit
          }
          prm.basis_chunk = 1;
          const auto l1 = interaction_launch<float, Dev, L, true>(prm, ts);
          EXPECT_EQ(l1.basis_fwd, l1.chunk_fwd);
          EXPECT_EQ(l1.basis_adj, l1.chunk_adj);
        }
      }
}

// InteractionWork::f_send / vatom_send: the sender adjoint accumulates its forces and virial there (it must: else
// the two adjoints would race on f when they run side by side, as they do on CUDA with concurrent_adjoints = 1 and
// const_slot_launch = 1), and
// the sums are bit for bit those of one shared accumulator (each array gets one addend per atom here, from zero); run
// side by side or one after the other, for the automatic team and the GPU / host paths, radial modes 0-2; the sums
// also against the reference and finite differences.
TEST(Interaction, ConcurrentAdjoints) {
  const int C = 8;
  constexpr int L = 2;
  const auto [M, S, E] = split_case(98);
  std::vector<int> teams = {0};  // automatic: one thread per team on host back-ends
  for (int ts : {C, 4 * C})
    if (team_size_max() >= ts) teams.push_back(ts);
  for (int mode : {0, 1, 2})
    for (int ts : teams) {
      const Launch plain(ts, mode, 0);
      const auto ref = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, plain);
      for (int conc : {1, 0})
        for (int slots : {0, 1}) {  // (const slots: CUDA only; with them the two adjoints overlap there)
          Launch ln = plain;
          ln.send_accumulators = true;
          ln.concurrent = conc;
          ln.const_slots = slots;
          SCOPED_TRACE(ln.str());
          const auto run = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, ln);
          EXPECT_GT(max_diff(run.f_send, decltype(run.f_send)("zero", S.n_total, 3)).first, 0.0);
          EXPECT_GT(max_diff(run.vatom_send, decltype(run.f_send)("zero", S.n_total, 6)).first, 0.0);
          expect_bitwise_equal(ref, run);
        }
    }
  Launch ln(0, 2, 0);
  ln.send_accumulators = true;
  check_against<L>(M, S, E, ln);
}

// The occupancy arithmetic of the basis-chunk guard on the H200's limits, for the water model's capped adjoints
// (168 registers) and forward (129), and the chunk search it drives.
TEST(Interaction, BasisChunkOccupancy) {
  const SmLimits h200;
  // teams of 128: 3 blocks by registers whether the scratch is 23 or 38 KB
  EXPECT_EQ(blocks_per_sm_for(h200, 168, 128, 23000), 3);
  EXPECT_EQ(blocks_per_sm_for(h200, 168, 128, 38000), 3);
  // teams of 64 (MD from 2,048 atoms on): 6 by registers; 38 KB of scratch leaves room for 5 only
  EXPECT_EQ(blocks_per_sm_for(h200, 168, 64, 23000), 6);
  EXPECT_EQ(blocks_per_sm_for(h200, 168, 64, 38000), 5);
  EXPECT_EQ(blocks_per_sm_for(h200, 129, 128, 23000), 3);  // 129 -> 136 registers per thread as allocated: 15 warps
  EXPECT_EQ(blocks_per_sm_for(h200, 32, 128, 0), 16);      // threads: 2048 / 128
  EXPECT_EQ(blocks_per_sm_for(h200, 16, 32, 0), 32);       // the block limit
  // the search: the largest chunk (in steps of gch) that keeps blocks(gch)
  auto blocks = [](int gsc) { return gsc <= 48 ? 6 : 5; };
  EXPECT_EQ(largest_chunk_keeping(64, 4, blocks), 48);
  EXPECT_EQ(largest_chunk_keeping(64, 8, [](int) { return 3; }), 64);
  EXPECT_EQ(largest_chunk_keeping(8, 8, blocks), 8);
  EXPECT_EQ(largest_chunk_keeping(60, 4, [](int g) { return g == 4 ? 7 : 6; }), 4);
}

// Automatic GPU launch against the 40 KB of CUDA scratch_size_max(0) in this Kokkos 3.4 build (team_size_max
// 1024): radial mode 1 takes the largest S whose chunk of >= S edges fits, else mode 0.
template <class T, int L>
void expect_gpu_launch(int C, int H, bool adjoint, int S, int chunk) {
  using Kern = InteractionKernel<T, Dev, L, true>;
  const size_t limit = 40960;
  const auto sg = Kern::gpu_launch(C, H, 8, adjoint, true, 0, 1024, limit);
  const size_t bytes = Kern::scratch_bytes(C, H, 8, adjoint, sg.first, sg.second);
  std::printf("%s C=%d L=%d H=%d %s: S=%d chunk=%d scratch %zu B (mode 0: %zu B)\n", sizeof(T) == 4 ? "float" : "double",
              C, L, H, adjoint ? "adjoint" : "forward", sg.first, sg.second, bytes,
              Kern::scratch_bytes(C, H, 8, adjoint, sg.first));
  EXPECT_EQ(sg.first, S);
  EXPECT_EQ(sg.second, chunk);
  EXPECT_LE(bytes, limit);
  EXPECT_EQ(Kern::gpu_launch(C, H, 8, adjoint, false, 0, 1024, limit).second, 0);
}

TEST(Interaction, RadialGemmScratch) {
  expect_gpu_launch<float, 2>(32, 32, false, 4, 8);
  expect_gpu_launch<float, 2>(32, 32, true, 4, 4);
  expect_gpu_launch<double, 2>(32, 32, false, 4, 4);
  expect_gpu_launch<double, 2>(32, 32, true, 2, 2);
  expect_gpu_launch<float, 3>(64, 16, false, 2, 2);
  expect_gpu_launch<float, 3>(64, 16, true, 2, 0);  // does not fit: mode 0
  expect_gpu_launch<double, 3>(64, 16, false, 2, 0);
  expect_gpu_launch<double, 3>(64, 16, true, 2, 0);
  // explicit chunk that does not fit: mode 0
  using Kern = InteractionKernel<float, Dev, 2, true>;
  EXPECT_EQ(Kern::radial_chunk_for(32, 32, 8, true, 4, 40960, 8), 0);
}

// Explicit team sizes must be 1 or a multiple of C.
TEST(Interaction, TeamSizeValidation) {
  constexpr int L = 1;
  std::mt19937 rng(81);
  const Model M = make_model(L, rng);
  const System S = make_system(L, M.C, rng, 2, 4, 3.0);
  auto run = [&](int ts) { run_kernels<double, L>(M, S, S.x, S.h, {}, {}, false, ts); };
  EXPECT_THROW(run(M.C + 1), std::invalid_argument);
  EXPECT_THROW(run(M.C / 2), std::invalid_argument);
}

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
  for (int n = 0; n < M.NB; ++n) s += M.Wg[a * M.NB + n] * std::sqrt(2 / M.rc) * std::sin((n + 1) * M_PI * d / M.rc) / d;
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
