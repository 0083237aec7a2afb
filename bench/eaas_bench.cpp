// EAAS against the dense product, per channel (Kokkos; same source for OpenMP and CUDA).
//
// Usage: batmobile_eaas_bench [--edges N] [--channels C] [--reps 20] [--out FILE.json]
//   Forward of one layer's products at L = 3, natural-parity paths, messages and attention values (two weight sets
//   on one sender feature), as the fused kernels form them: per edge the direction terms once (EAAS: the two
//   angles; dense: the spherical harmonics), then each of C channels its own feature and weights. EAAS rotates the
//   feature into the edge frame once, forms both aligned products and rotates both back; dense runs tp_fwd2.
//   One thread per edge walks its channels (the same layout for both, not the fused kernels' team layout).
//   The adjoint: each channel's dE/dh, dE/dw, dE/dwv and generator terms (dense: dE/dY), then the edge's dE/dr once.
//   Prints and writes (--out) the median ns per edge-channel of each, forward and adjoint, and their ratios; fp32
//   kernels, checksums compared in fp32 (a product that disagrees makes the exit status 1).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/eaas.hpp"
#include "kernels/tp.hpp"

using namespace batmobile::kernels;
using Dev = Kokkos::DefaultExecutionSpace;

namespace eaas_bench {
constexpr int L = 3, K = num_sh(L), P = num_paths(L, false);

struct Inputs {
  Kokkos::View<float* [3], Dev> r;
  Kokkos::View<float**, Dev> h, w, wv;  // (C, K), (C, P), (C, P)
  Kokkos::View<float**, Dev> out;       // (edges, 2): a checksum per edge
};

Inputs make_inputs(int E, int C) {
  Inputs in{Kokkos::View<float* [3], Dev>("r", E), Kokkos::View<float**, Dev>("h", C, K),
            Kokkos::View<float**, Dev>("w", C, P), Kokkos::View<float**, Dev>("wv", C, P),
            Kokkos::View<float**, Dev>("out", E, 2)};
  auto fill = [](auto v, unsigned seed) {
    auto hv = Kokkos::create_mirror_view(v);
    float* p = hv.data();
    for (size_t i = 0; i < hv.size(); ++i) {
      seed = seed * 1664525u + 1013904223u;
      p[i] = float(seed >> 8) / float(1u << 24) * 2.0f - 1.0f;
    }
    Kokkos::deep_copy(v, hv);
  };
  fill(in.r, 1);
  fill(in.h, 2);
  fill(in.w, 3);
  fill(in.wv, 4);
  return in;
}

// One edge: its direction terms once, then each channel's products (ADJOINT: their adjoint for upstream gradients
// made from the channel's feature, and the edge's d/dr once after the channel sum); a checksum per edge.
template <bool EAAS, bool ADJOINT>
struct EdgeProducts {
  Inputs in;
  int C;
  KOKKOS_INLINE_FUNCTION void operator()(const int e) const {
    const float re[3] = {in.r(e, 0), in.r(e, 1), in.r(e, 2)};
    EdgeAngles<L, float> A;
    float Y[K], gY[K] = {}, c[3] = {0, 0, 0};
    if constexpr (EAAS)
      edge_angles<L, float>(re, A);
    else
      sh<L, float>(re, Y);
    float s0 = 0, s1 = 0;
    for (int ch = 0; ch < C; ++ch) {
      float hc[K], om[K] = {}, ov[K] = {}, wc[P], wvc[P];
      for (int k = 0; k < K; ++k) hc[k] = in.h(ch, k);
      for (int p = 0; p < P; ++p) wc[p] = in.w(ch, p), wvc[p] = in.wv(ch, p);
      if constexpr (!ADJOINT) {
        if constexpr (EAAS)
          eaas_fwd2<L, float>(A, hc, wc, wvc, 0.7f, 0.3f, om, ov);
        else
          tp_fwd2<L, float>(hc, Y, wc, wvc, 0.7f, 0.3f, om, ov);
        for (int k = 0; k < K; ++k) s0 += om[k], s1 += ov[k];
      } else {
        float gm[K], go[K], gh[K] = {}, gw[P] = {}, gwv[P] = {};
        for (int k = 0; k < K; ++k) gm[k] = hc[(k + 3) % K], go[k] = hc[(k + 7) % K];
        if constexpr (EAAS)
          eaas_adjoint2<L, float>(A, hc, wc, wvc, 0.7f, 0.3f, gm, go, gh, gw, gwv, c);
        else
          tp_adjoint<L, false, true, true, float>(hc, Y, wc, wvc, gm, go, 0.7f, 0.3f, gh, gY, gw, gwv);
        for (int k = 0; k < K; ++k) s0 += gh[k];
        for (int p = 0; p < P; ++p) s1 += gw[p] + gwv[p];
      }
    }
    if constexpr (ADJOINT) {
      float gr[3] = {0, 0, 0};
      if constexpr (EAAS)
        eaas_direction_gradient<L, float>(A, re, c, gr);
      else
        sh_vjp<L, float>(re, gY, gr);
      s0 += gr[0] + 2 * gr[1] + 3 * gr[2];
    }
    in.out(e, 0) = s0;
    in.out(e, 1) = s1;
  }
};

template <bool EAAS, bool ADJOINT>
void run_products(const Inputs& in, int C) {
  Kokkos::parallel_for(EAAS ? "eaas" : "dense", Kokkos::RangePolicy<Dev>(0, int(in.r.extent(0))),
                       EdgeProducts<EAAS, ADJOINT>{in, C});
}

}  // namespace eaas_bench

namespace {
using namespace eaas_bench;

template <class F>
double median_ns(F&& f, int reps) {
  std::vector<double> t;
  f();
  Kokkos::fence();
  for (int i = 0; i < reps; ++i) {
    Kokkos::Timer timer;
    f();
    Kokkos::fence();
    t.push_back(timer.seconds() * 1e9);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Timing {
  double eaas, dense, err, scale;  // ns per edge-channel; largest checksum difference and checksum
};

template <bool ADJOINT>
Timing compare(const Inputs& in, int C, int reps) {
  const int E = int(in.r.extent(0));
  Timing t{};
  t.eaas = median_ns([&] { run_products<true, ADJOINT>(in, C); }, reps) / (double(E) * C);
  auto a = Kokkos::create_mirror(in.out);  // a copy, also on host back-ends (the dense run overwrites out)
  Kokkos::deep_copy(a, in.out);
  t.dense = median_ns([&] { run_products<false, ADJOINT>(in, C); }, reps) / (double(E) * C);
  auto b = Kokkos::create_mirror(in.out);
  Kokkos::deep_copy(b, in.out);
  for (int e = 0; e < E; ++e)
    for (int q = 0; q < 2; ++q) {
      t.err = std::max(t.err, double(std::fabs(a(e, q) - b(e, q))));
      t.scale = std::max(t.scale, double(std::fabs(b(e, q))));
    }
  return t;
}

int usage(const char* msg) {
  std::fprintf(stderr, "error: %s (usage: batmobile_eaas_bench [--edges N] [--channels C] [--reps R] [--out FILE])\n",
               msg);
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  int E = 0, C = 32, reps = 20;
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--edges") E = std::atoi(v);
    else if (a == "--channels") C = std::atoi(v);
    else if (a == "--reps") reps = std::atoi(v);
    else if (a == "--out") out_path = v;
    else return usage(("unknown option " + a).c_str());
  }
  if (C < 1 || reps < 1 || E < 0) return usage("--edges, --channels and --reps must be positive");
  Kokkos::initialize(argc, argv);
  int rc = 0;
  {
    const bool gpu = !std::is_same<Dev, Kokkos::DefaultHostExecutionSpace>::value;
    if (E == 0) E = gpu ? 500000 : 4000;
    const Inputs in = make_inputs(E, C);
    std::string json = std::string("{\"backend\": \"") + Dev::name() + "\", \"L\": 3, \"paths\": \"natural, messages " +
                       "and values\", \"edges\": " + std::to_string(E) + ", \"channels\": " + std::to_string(C);
    for (const bool adjoint : {false, true}) {
      const Timing t = adjoint ? compare<true>(in, C, reps) : compare<false>(in, C, reps);
      const char* what = adjoint ? "adjoint" : "forward";
      std::printf("%s, %s: %d edges x %d channels, L = 3: EAAS %.3f ns, dense %.3f ns per edge-channel (EAAS / "
                  "dense %.2f); largest difference %.2e of %.2e\n",
                  Dev::name(), what, E, C, t.eaas, t.dense, t.eaas / t.dense, t.err, t.scale);
      if (!(t.err <= 1e-4 * (1 + t.scale))) {
        std::fprintf(stderr, "error: EAAS and the dense product disagree in the %s (%.3e)\n", what, t.err);
        rc = 1;
      }
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    ", \"%s\": {\"eaas_ns_per_edge_channel\": %.4f, \"dense_ns_per_edge_channel\": %.4f, "
                    "\"ratio\": %.4f}",
                    what, t.eaas, t.dense, t.eaas / t.dense);
      json += buf;
    }
    if (!out_path.empty()) {
      std::FILE* f = std::fopen(out_path.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "error: cannot write %s\n", out_path.c_str());
        rc = 2;
      } else {
        std::fprintf(f, "%s}\n", json.c_str());
        std::fclose(f);
      }
    }
  }
  Kokkos::finalize();
  return rc;
}
