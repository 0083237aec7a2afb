// Shared helpers of the Interaction.* tests of the fused interaction + attention (docs/model.md steps 1-2), sources
// test_interaction_*.cpp, one executable test_interaction: model and system builders, the independent double
// reference, the kernel driver run_kernels and the comparisons. The tests are split over several sources because
// nvcc takes minutes for each set of fused kernels (one per scalar T and L): each set is compiled in one source only
// (run_kernels<T, L> extern here, instantiated where the list below says), so that a parallel build compiles the
// sets concurrently.
#pragma once
#include <set>

#include "kernels/impl/launch_tuning.hpp"
#include "test_util.hpp"

namespace interaction_test {
using namespace bt;

struct Model {
  int L, C, NB, H, A, dk;
  double rc, avg;
  std::vector<double> W1, b1, W2, Wg, Wq, Wk;
  bool f16_radial = false;  // the reference of radial mode 4 on tensor cores: W2 and the hidden layer rounded to f16
};

struct System {
  int n_recv, n_total;
  std::vector<double> x;          // (n_total, 3)
  std::vector<int> recv, send;    // edges (any order, may contain pairs beyond r_c)
  std::vector<double> h;          // (n_total, K, C)
};

inline Model make_model(int L, std::mt19937& rng, int dk = 3, int H = 6, int C = 8, int NB = 5, int A = 2) {
  std::normal_distribution<double> g(0, 1);
  Model M{L, C, NB, H, A, dk, 3.0, 4.0, {}, {}, {}, {}, {}, {}};
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

inline System make_system(int L, int C, std::mt19937& rng, int n_recv = 6, int n_total = 10,
                          double box = 4.0) {
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

// Bessel basis of docs/model.md, B_n(d) = sqrt(2 / r_c) sin(n pi d / r_c) / d, n = 1..NB.
inline std::vector<double> reference_bessel(const Model& M, double d) {
  std::vector<double> B(M.NB);
  for (int n = 0; n < M.NB; ++n) B[n] = std::sqrt(2 / M.rc) * std::sin((n + 1) * M_PI * d / M.rc) / d;
  return B;
}

// The radial MLP of docs/model.md without the envelope, W2 . silu(W1 . B(d) + b1): all 2 P C outputs at distance d.
inline std::vector<double> reference_radial_mlp(const Model& M, double d) {
  const std::vector<double> B = reference_bessel(M, d);
  std::vector<double> hid(M.H);
  for (int k = 0; k < M.H; ++k) {
    double a = M.b1[k];
    for (int n = 0; n < M.NB; ++n) a += M.W1[k * M.NB + n] * B[n];
    hid[k] = a / (1 + std::exp(-a));
  }
  // (f16_radial: each operand rounded to f16 from float, as the kernels' fragments are)
  auto operand = [&](double v) { return M.f16_radial ? double(f16_bits_float(f16_round_bits(float(v)))) : v; };
  std::vector<double> R(M.W2.size() / M.H, 0.0);
  for (size_t q = 0; q < R.size(); ++q)
    for (int k = 0; k < M.H; ++k) R[q] += operand(M.W2[q * M.H + k]) * operand(hid[k]);
  return R;
}

inline RefOut reference(const Model& M, const System& S, const std::vector<double>& x,
                        const std::vector<double>& h) {
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
      const std::vector<double> B = reference_bessel(M, d);  // (the attention gate below)
      std::vector<double> Rw = reference_radial_mlp(M, d);     // 2 P C outputs
      for (double& w : Rw) w *= u;
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

// The radial modes (LayerParams::radial_mode), short for the tests' loops.
constexpr RadialMode kPerEdge = RadialMode::kPerEdge, kTeamGemm = RadialMode::kTeamGemm,
                     kTensorCore = RadialMode::kTensorCore, kTensorCoreF16 = RadialMode::kTensorCoreF16;

// How the kernels are launched: team size (0 = automatic), LayerParams::radial_mode / radial_chunk, and the
// test-only launch switches in effect during the run (register caps, constant-memory launch).
struct Launch {
  int team_size;
  RadialMode radial_mode;
  int radial_chunk;
  int basis_chunk = 0;                                        // LayerParams::basis_chunk
  int prepare_span = LayerParams<float, Dev>().prepare_span;  // LayerParams::prepare_span
  impl::LaunchTuning tuning;                                  // the production launch unless a test changes it
  // InteractionWork::f_send / vatom_send given (the sender adjoint's own accumulators, summed after the run; with
  // them the adjoints run side by side on CUDA)
  bool send_accumulators = false;
  // the kernels of a layer role (InteractionKernel's ROLE, common.hpp) with the parameters they take (make_layer_params'
  // role): kEmbeddingInput needs h with only l = 0 and leaves gh untouched; kScalarOutput needs gm, go with only l = 0
  // and gives m, o for l = 0 only (0 elsewhere)
  int role = kGeneralLayer;
  int forward_team = -1;  // the forward kernel's team size where >= 0 (ModelTuning::forward_team), else team_size
  bool qk_given = false;  // InteractionWork::qk_given set before the forward (on fresh work arrays: an error)
  // the kernels with kernels::BundledDims compiled in (L = kBundledL only; the model must have those dimensions, else
  // the drivers throw)
  bool bundled_dims = false;
  Launch(int ts = 0, RadialMode mode = kPerEdge, int chunk = 0)
      : team_size(ts), radial_mode(mode), radial_chunk(chunk) {}
  std::string str() const {
    return "team_size " + std::to_string(team_size) + " radial_mode " + std::to_string(int(radial_mode)) + " chunk " +
           std::to_string(radial_chunk) + " cap_fwd " + std::to_string(tuning.cap_forward) + " cap_adj " +
           std::to_string(tuning.cap_adjoints) + " basis " + std::to_string(basis_chunk) + " span " +
           std::to_string(prepare_span) + " const_slots " + std::to_string(tuning.const_slot_launch) + " send_acc " +
           std::to_string(send_accumulators) + " role " + std::to_string(role) + " forward_team " +
           std::to_string(forward_team) + " bundled_dims " + std::to_string(bundled_dims);
  }
};

template <class T>
struct KernelRun {
  Kokkos::View<T***, Kokkos::LayoutRight, Dev> m, o, gh;
  Kokkos::View<double**, Kokkos::LayoutRight, Dev> f, vatom;
  Kokkos::View<T**, Kokkos::LayoutRight, Dev> M, Z;  // saved softmax state
  Kokkos::View<double**, Kokkos::LayoutRight, Dev> f_send, vatom_send;  // Launch::send_accumulators: before the sum
  bool f16_radial = false;  // the radial weights came from f16 operands (radial mode 4 on tensor cores)
};

// Calls f(std::integral_constant<int, role>) for the roles the model runs (not both bits at once).
template <class F>
void with_role(int role, F&& f) {
  if (role == kEmbeddingInput)
    f(std::integral_constant<int, kEmbeddingInput>());
  else if (role == kScalarOutput)
    f(std::integral_constant<int, kScalarOutput>());
  else
    f(std::integral_constant<int, kGeneralLayer>());
}

// Calls f(dims) with BundledDims where asked for (feature degree kBundledL only), else with RuntimeDims.
template <int L, class F>
void with_dims(bool bundled, F&& f) {
  if constexpr (L == kBundledL) {
    if (bundled) return f(BundledDims{});
  } else {
    if (bundled) throw std::logic_error("BundledDims kernels are compiled for L = kBundledL only");
  }
  f(RuntimeDims{});
}

// The fused kernels that run_kernels launches for one dimension variant (forward; adjoints), functions of their own so
// that a variant can be compiled in a source of its own: every fused kernel's constant-memory launch slots count
// against CUDA's 64 KB per translation unit (cuda_launch.hpp), and float L = 2 with both variants is over it.
template <class T>
using View3 = Kokkos::View<T***, Kokkos::LayoutRight, Dev>;

template <class T, int L, class Dims>
void fused_forward(int role, const Graph<T, Dev>& g, const LayerParams<T, Dev>& prm, const View3<T>& h,
                   KernelRun<T>& out, InteractionWork<T, Dev>& work, int team_size) {
  with_role(role, [&](auto r) {
    interaction_forward<T, Dev, L, true, decltype(r)::value, Dims>(g, prm, h, out.m, out.o, work, team_size);
  });
}

template <class T, int L, class Dims>
void fused_backward(int role, const Graph<T, Dev>& g, const LayerParams<T, Dev>& prm, const View3<T>& h,
                    const View3<T>& gm, const View3<T>& go, KernelRun<T>& out, InteractionWork<T, Dev>& work,
                    int team_size) {
  with_role(role, [&](auto r) {
    interaction_backward<T, Dev, L, true, decltype(r)::value, Dims>(g, prm, h, out.o, gm, go, out.gh, out.f,
                                                                      out.vatom, work, team_size);
  });
}

// INTERACTION_TEST_FUSED(, T, L, DIMS) instantiates both; INTERACTION_TEST_FUSED(extern, ...) declares them
#define INTERACTION_TEST_FUSED(EXTERN, T, L, DIMS)                                                                   \
  EXTERN template void fused_forward<T, L, DIMS>(int, const Graph<T, Dev>&, const LayerParams<T, Dev>&,               \
                                                 const View3<T>&, KernelRun<T>&, InteractionWork<T, Dev>&, int);     \
  EXTERN template void fused_backward<T, L, DIMS>(int, const Graph<T, Dev>&, const LayerParams<T, Dev>&,              \
                                                  const View3<T>&, const View3<T>&, const View3<T>&, KernelRun<T>&,   \
                                                  InteractionWork<T, Dev>&, int)
INTERACTION_TEST_FUSED(extern, float, kBundledL, BundledDims);  // test_interaction_bundled.cpp

template <class T, int L>
KernelRun<T> run_kernels(const Model& M, const System& S, const std::vector<double>& x,
                         const std::vector<double>& h, const std::vector<double>& gm, const std::vector<double>& go,
                         bool backward, Launch ln = {}) {
  const impl::ScopedLaunchTuning tuning(ln.tuning);
  const int K = num_sh(L), C = M.C, team_size = ln.team_size;
  std::vector<T> xt(x.begin(), x.end());
  auto g = make_graph<T, Dev>(xt, S.n_recv, S.recv, S.send);
  auto prm = make_layer_params<T, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg, M.Wq, M.Wk,
                                          ln.role);
  prm.radial_mode = ln.radial_mode;
  prm.radial_chunk = ln.radial_chunk;
  prm.basis_chunk = ln.basis_chunk;
  prm.prepare_span = ln.prepare_span;
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
  out.f16_radial = ln.radial_mode == kTensorCoreF16 && prm.W2th.extent(0) > 0 && kTensorCoreTf32 &&
                   !runs_on_host<Dev::execution_space>;
  auto hv = upload(h, S.n_total, "h");
  out.m = decltype(out.m)("m", S.n_recv, K, C);
  out.o = decltype(out.m)("o", S.n_recv, K, C);
  InteractionWork<T, Dev> work;
  work.qk_given = ln.qk_given;
  with_dims<L>(ln.bundled_dims, [&](auto dims) {
    const int forward_team = ln.forward_team >= 0 ? ln.forward_team : team_size;
    fused_forward<T, L, decltype(dims)>(ln.role, g, prm, hv, out, work, forward_team);
  });
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
    with_dims<L>(ln.bundled_dims, [&](auto dims) {
      fused_backward<T, L, decltype(dims)>(ln.role, g, prm, hv, gmv, gov, out, work, team_size);
    });
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

// The kernel sets: run_kernels<T, L> (which instantiates every fused kernel of T and L: radial modes, key widths,
// register caps; float L = 2's BundledDims kernels excepted, see fused_forward) is compiled in one source each, named
// here; the other sources only call it.
#define INTERACTION_TEST_RUN_KERNELS(T, L)                                                                      \
  template KernelRun<T> run_kernels<T, L>(const Model&, const System&, const std::vector<double>&,            \
                                          const std::vector<double>&, const std::vector<double>&,             \
                                          const std::vector<double>&, bool, Launch)
extern INTERACTION_TEST_RUN_KERNELS(double, 1);  // test_interaction_paths.cpp
extern INTERACTION_TEST_RUN_KERNELS(float, 1);   // test_interaction_paths.cpp
extern INTERACTION_TEST_RUN_KERNELS(double, 2);  // test_interaction_invariance.cpp
extern INTERACTION_TEST_RUN_KERNELS(float, 2);   // test_interaction_launch.cpp
extern INTERACTION_TEST_RUN_KERNELS(double, 3);  // test_interaction_invariance.cpp
extern INTERACTION_TEST_RUN_KERNELS(float, 3);   // test_interaction_reference.cpp

inline double energy(const RefOut& R, const std::vector<double>& gm, const std::vector<double>& go) {
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

// Upstream gradients E.gm, E.go (n_recv, K, C) drawn from N(0, 1), gm first; scalar_output: only l = 0 (a last
// layer's, kScalarOutput).
inline void random_upstream(Expected& E, const System& S, int L, int C, std::mt19937& rng, bool scalar_output = false) {
  const int K = num_sh(L);
  std::normal_distribution<double> g(0, 1);
  E.gm.resize(size_t(S.n_recv) * K * C);
  E.go.resize(E.gm.size());
  for (double& v : E.gm) v = g(rng);
  for (double& v : E.go) v = g(rng);
  if (scalar_output)
    for (size_t x = 0; x < E.gm.size(); ++x)
      if ((x / C) % K != 0) E.gm[x] = E.go[x] = 0;
}

// E.ghref: central differences of E = gm.m + go.o over every feature component of every atom.
inline void central_dE_dh(Expected& E, const Model& M, const System& S) {
  const double eps = 1e-5;
  E.ghref.resize(S.h.size());
  for (size_t idx = 0; idx < S.h.size(); ++idx) {
    auto hp = S.h, hm = S.h;
    hp[idx] += eps;
    hm[idx] -= eps;
    E.ghref[idx] =
        (energy(reference(M, S, S.x, hp), E.gm, E.go) - energy(reference(M, S, S.x, hm), E.gm, E.go)) / (2 * eps);
    E.gscale = std::max(E.gscale, std::fabs(E.ghref[idx]));
  }
}

// scalar_output: upstream gradients gm, go with only l = 0 (a last layer's, kScalarOutput).
inline Expected expected(const Model& M, const System& S, std::mt19937& rng, bool scalar_output = false) {
  Expected E;
  random_upstream(E, S, M.L, M.C, rng, scalar_output);
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
  central_dE_dh(E, M, S);
  return E;
}

// The reference of the float kernels with the f16 radial GEMM (radial mode 4 on tensor cores): m, o and dE/dh of
// the model with W2 and the hidden layer rounded to f16, so that those kernels meet the float tolerance; the forces
// stay those of the unrounded model (central differences of the rounded one would measure its steps).
inline Expected expected_f16_radial(const Model& M, const System& S, const Expected& E) {
  Model M16 = M;
  M16.f16_radial = true;
  Expected E16 = E;
  E16.ref = reference(M16, S, S.x, S.h);
  central_dE_dh(E16, M16, S);
  return E16;
}

// Largest |value| of a host view of rank 3.
template <class V>
double max_abs(const V& v) {
  double m = 0;
  for (size_t x = 0; x < v.extent(0) * v.extent(1) * v.extent(2); ++x) m = std::max(m, std::fabs(double(v.data()[x])));
  return m;
}

// Features of an embedding-input layer: those of S with every l >= 1 component set to 0.
inline System embedding_features(System S, int L, int C) {
  const int K = num_sh(L);
  for (int n = 0; n < S.n_total; ++n)
    for (int k = 1; k < K; ++k)
      for (int c = 0; c < C; ++c) S.h[(size_t(n) * K + k) * C + c] = 0;
  return S;
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
  const Expected Ef = kf.f16_radial ? expected_f16_radial(M, S, E) : Expected{};  // the float kernels' m, o, dE/dh
  const auto& fref = kf.f16_radial ? Ef.ref : ref;
  const auto& ghfref = kf.f16_radial ? Ef.ghref : E.ghref;
  const bool scalar_out = team_size.role & kScalarOutput;  // m, o for l = 0 only, exactly 0 elsewhere
  for (int i = 0; i < S.n_recv; ++i)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c) {
        const size_t idx = (size_t(i) * K + k) * C + c;
        if (scalar_out && k > 0) {
          ASSERT_EQ(md(i, k, c), 0.0);
          ASSERT_EQ(od(i, k, c), 0.0);
          ASSERT_EQ(mf(i, k, c), 0.0f);
          ASSERT_EQ(of(i, k, c), 0.0f);
          continue;
        }
        ASSERT_NEAR(md(i, k, c), ref.m[idx], 1e-12 * scale) << i << " " << k << " " << c;
        ASSERT_NEAR(od(i, k, c), ref.o[idx], 1e-12 * scale) << i << " " << k << " " << c;
        ASSERT_NEAR(mf(i, k, c), fref.m[idx], 2e-5 * scale);
        ASSERT_NEAR(of(i, k, c), fref.o[idx], 2e-5 * scale);
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
  // dE/dh for every atom and component (conv, values, keys and queries); the embedding-input kernels leave gh as
  // it was (zero here)
  auto ghd = to_host(kd.gh);
  auto ghf = to_host(kf.gh);
  if (team_size.role & kEmbeddingInput) {
    EXPECT_EQ(max_abs(ghd), 0.0);
    EXPECT_EQ(max_abs(ghf), 0.0);
    return;
  }
  for (int n = 0; n < S.n_total; ++n)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c) {
        const size_t idx = (size_t(n) * K + k) * C + c;
        EXPECT_NEAR(ghd(n, k, c), E.ghref[idx], 2e-7 * gscale) << n << " " << k << " " << c;
        EXPECT_NEAR(ghf(n, k, c), ghfref[idx], 1e-3 * gscale) << n << " " << k << " " << c;
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

// Largest team the back-end runs (on OpenMP: the thread count). In test_interaction_paths.cpp (on CUDA it compiles
// a kernel of the L = 1 double set).
int team_size_max();

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

// Two kernel runs give bit for bit the same softmax state M, Z, m, o, dE/dh, forces and per-atom virial.
// |a - b| within tol of the largest |a| (1 at least); with nonzero, a must not be all zero (a comparison of zeros
// would show nothing).
template <class V>
void expect_close_views(const V& a, const V& b, double tol, const char* what, bool nonzero = true) {
  const auto d = max_diff(a, b);
  if (nonzero) EXPECT_GT(d.second, 0.0) << what;
  EXPECT_LE(d.first, tol * std::max(1.0, d.second)) << what;
}

template <class T>
void expect_bitwise_equal(const KernelRun<T>& a, const KernelRun<T>& b) {
  EXPECT_EQ(max_diff(a.M, b.M).first, 0.0);  // the forward's saved softmax state
  EXPECT_EQ(max_diff(a.Z, b.Z).first, 0.0);
  EXPECT_EQ(max_diff(a.m, b.m).first, 0.0);
  EXPECT_EQ(max_diff(a.o, b.o).first, 0.0);
  EXPECT_EQ(max_diff(a.gh, b.gh).first, 0.0);
  EXPECT_EQ(max_diff(a.f, b.f).first, 0.0);
  EXPECT_EQ(max_diff(a.vatom, b.vatom).first, 0.0);
}

// The kernels' graph contract (kernels/graph.hpp): an edge i <- j inside r_c between owned atoms has its reverse
// j <- i, as in LAMMPS's full neighbour lists. Appends the missing reverses.
inline void symmetrize(System& S, double rc) {
  std::set<std::pair<int, int>> have;
  for (size_t e = 0; e < S.recv.size(); ++e) have.insert({S.recv[e], S.send[e]});
  const size_t E = S.recv.size();
  for (size_t e = 0; e < E; ++e) {
    const int i = S.recv[e], j = S.send[e];
    double d2 = 0;
    for (int a = 0; a < 3; ++a) d2 += (S.x[3 * j + a] - S.x[3 * i + a]) * (S.x[3 * j + a] - S.x[3 * i + a]);
    if (j < S.n_recv && std::sqrt(d2) < rc && have.insert({j, i}).second) {
      S.recv.push_back(j);
      S.send.push_back(i);
    }
  }
}

// Receivers of the edge-split test: 0 and 3 list their neighbours so that only list slots 3 (mod 4), resp.
// 0 (mod 4), lie inside r_c (with S = 4 or 2 only one edge slot meets edges; receiver 0 spans two chunks),
// 1 has two edges (fewer than S), 2 has no edge at all, 4 lists every other atom; the last atom is in no edge.
// Receiver 2 is moved beyond r_c of all atoms; symmetrize adds the reverses of the other owned pairs.
inline System split_system(int L, int C, double rc, std::mt19937& rng) {
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
  for (int a = 0; a < 3; ++a) S.x[6 + a] = 40.0 + a;  // receiver 2: no atom within r_c
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
    const std::vector<int> all_out = out;  // (repeated where they run out first: every atom inside r_c is listed)
    for (size_t p = 0;; ++p) {
      auto& pool = int(p % 4) == phase ? in : out;
      if (pool.empty() && &pool == &out && !in.empty()) out = all_out;
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
  symmetrize(S, rc);
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

}  // namespace interaction_test

// interaction_launch of the float L = 2 kernels (on CUDA it compiles most of that set): in test_interaction_launch.cpp.
extern template batmobile::kernels::InteractionLaunch
batmobile::kernels::interaction_launch<float, bt::Dev, 2, true>(const batmobile::kernels::LayerParams<float, bt::Dev>&,
                                                                 int);
