// Batmobile kernel benchmark (Kokkos; same source for OpenMP and CUDA).
//
// Usage: batmobile_bench [--out FILE.jsonl] [--graph-dir DIR] [--reps 50] [--warmup 5] [--cases full|quick|N:k:C]
//                        [--radial-mode 0|1|2|4|both|all] [--radial-chunk 0|2|4|8] [--check-dump DIR]
//                        [launch settings: see below]
//   Times, on random graphs (receiver i has k distinct random senders j != i; edge e = i*k + s):
//     sh                 ComputeSH<float, 3> of the E edge vectors (forward)
//     conv_fwd           ConvEdgeWeights<float, L=3, all 34 paths> forward (per-edge weights given)
//     conv_fwd_bwd       forward + adjoint (dE/dh, dE/dw, dE/dr -> forces and per-atom virial)
//     attention_fwd_bwd  fused interaction + on-the-fly attention of one layer (docs/model.md, L=2, A=4, dk=8,
//                        NB=8, H=32) forward + adjoint (dE/dh, forces, virial)
//     attention_fwd      its forward alone
//   --radial-mode picks LayerParams::radial_mode of the attention ops by its value (RadialMode: 0 kPerEdge, the
//   default; 1 kTeamGemm, 2 kTensorCore, 4 kTensorCoreF16; "both" times 0 and 1, "all" 0, 1, 2 and 4); mode 1 ops
//   are named attention_fwd_bwd_radial_gemm and attention_fwd_radial_gemm, mode 2 (tensor cores) ..._radial_mma,
//   mode 4 (f16 tensor cores, precision mixed) ..._radial_mma_f16; --radial-chunk sets radial_chunk;
//   --role-radial-mode the radial mode of the first and last layers' ops (rows ..._embedding_input,
//   ..._scalar_output; default LayerParams's, 2). Attention records also carry the launch (team size, mode-1 chunk
//   (0 = mode 0) and whether the tensor cores ran, of forward and adjoint).
//   Launch settings (default: the model's; LayerParams members in brackets):
//     --team N                  attention ops with teams of N threads (C * edge split; 0: automatic)
//     --basis-chunk N           edges per prepare pass, 0: automatic (basis_chunk)
//     --conv-staged LIST        also these ConvEdgeWeights::staged values, e.g. 0,2,3 (rows conv_fwd_bwd_unstaged,
//                               conv_fwd_bwd_staged2 / _staged3; a staged one is skipped where its scratch does not
//                               fit)
//   median of --reps runs after --warmup runs, each bracketed by Kokkos::fence(). One JSON object per line
//   is appended to --out. Peak bytes: device memory in use (cudaMemGetInfo) after the op minus before the case
//   was set up (CUDA only, else null).
//   --graph-dir: writes graph_<N>_<k>.bin (float32 positions N*3, then int32 senders E) for the e3nn script.
//   --check-dump DIR: instead of timing, writes small double-precision cases for bench/e3nn_bench.py --check:
//   SH, conv with per-edge weights (all 34 paths) and its adjoint; the fused interaction + attention layer
//   (docs/model.md steps 1-2, L = 2) with parameters, outputs and adjoint (dE/dh, forces).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <stdexcept>
#include <vector>

#include "conv_weights.hpp"
#include "kernels/batmobile_kernels.hpp"

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

using namespace batmobile::kernels;
using Dev = Kokkos::DefaultExecutionSpace::device_type;
using Exec = Kokkos::DefaultExecutionSpace;

namespace {

long long device_used_bytes() {
#if defined(KOKKOS_ENABLE_CUDA)
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  return (long long)(total_b - free_b);
#else
  return -1;
#endif
}

struct RandomGraph {
  int N, k;
  double box;
  std::vector<float> x;
  std::vector<int> recv, send;
};

// N atoms at random positions, each with exactly k neighbours (k even, k < N), symmetric as LAMMPS's full lists are
// (the kernels' graph contract, kernels/graph.hpp): in a random order of the atoms, atom a's neighbours are the atoms
// at order positions pos(a) +- o for k / 2 random distinct offsets o < N / 2.
RandomGraph make_random_graph(int N, int k, unsigned seed) {
  RandomGraph g{N, k, std::cbrt(N / 0.1), {}, {}, {}};
  if (k % 2 != 0 || k >= N) throw std::invalid_argument("make_random_graph: k must be even and below N");
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, g.box);
  g.x.resize(3 * size_t(N));
  for (auto& v : g.x) v = float(u(rng));
  std::vector<int> order(N), pos(N);
  for (int a = 0; a < N; ++a) order[a] = a;
  std::shuffle(order.begin(), order.end(), rng);
  for (int p = 0; p < N; ++p) pos[order[p]] = p;
  std::uniform_int_distribution<int> pick(1, (N - 1) / 2);
  std::vector<int> offsets;
  while (int(offsets.size()) < k / 2) {
    const int o = pick(rng);
    if (std::find(offsets.begin(), offsets.end(), o) == offsets.end()) offsets.push_back(o);
  }
  for (int i = 0; i < N; ++i)
    for (int o : offsets)
      for (int sign : {1, -1}) {
        g.recv.push_back(i);
        g.send.push_back(order[((pos[i] + sign * o) % N + N) % N]);
      }
  return g;
}

// What the command line chose: the cases' timing and the attention ops' launch (std::nullopt: the model's default).
struct BenchOptions {
  int reps = 50, warmup = 5, radial_chunk = 0, team = 0;
  std::string graph_dir;
  std::vector<RadialMode> radial_modes = {RadialMode::kPerEdge};
  std::vector<int> conv_staged;
  std::optional<int> basis_chunk;
  std::optional<RadialMode> role_radial_mode;
};

// The radial mode that "0", "1", "2" or "4" names (its RadialMode value); std::nullopt for anything else.
std::optional<RadialMode> parse_radial_mode(const std::string& v) {
  using R = RadialMode;
  for (R m : {R::kPerEdge, R::kTeamGemm, R::kTensorCore, R::kTensorCoreF16})
    if (v == std::to_string(int(m))) return m;
  return std::nullopt;
}

// A whole decimal number in [lo, hi] given to option `opt` (std::stoi read "1x" as 1); else the bench stops.
int parse_int(const std::string& opt, const std::string& v, int lo, int hi) {
  const bool digits = !v.empty() && v.size() <= 9 && v.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(v) < lo || std::stoi(v) > hi) {
    std::fprintf(stderr, "batmobile_bench: %s takes an integer %d..%d, not '%s'\n", opt.c_str(), lo, hi, v.c_str());
    std::exit(2);
  }
  return std::stoi(v);
}

template <class F>
double median_ms(F&& f, int warmup, int reps) {
  for (int r = 0; r < warmup; ++r) f();
  Kokkos::fence();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    Kokkos::fence();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    Kokkos::fence();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class V>
void fill_random(const V& v, unsigned seed, double scale) {
  auto h = Kokkos::create_mirror_view(v);
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0, scale);
  for (size_t a = 0; a < h.span(); ++a) h.data()[a] = typename V::value_type(g(rng));
  Kokkos::deep_copy(v, h);
}

// Useful fp32 FLOPs per edge of the conv forward (CG FMAs + per-path weight scaling), all 34 paths.
double conv_flops_per_edge(int C) {
  double per_channel = 2.0 * cg::kNumEntries;
  for (int p = 0; p < num_paths(3, true); ++p) per_channel += 2.0 * (2 * path_at(3, true, p).l3 + 1);
  return per_channel * C;
}

struct Result {
  std::string op;
  int atoms, neighbors, channels;
  double ms;
  long long peak;
  double roofline;  // < 0: not reported
};

// extra: further JSON members (", \"key\": value ..."), or empty
void write_result(std::FILE* out, const Result& r, const std::string& extra = "") {
  std::fprintf(out,
               "{\"op\": \"%s\", \"atoms\": %d, \"neighbors\": %d, \"channels\": %d, \"batmobile_ms\": %.6f, "
               "\"batmobile_peak_bytes\": %s, \"fp32_roofline_fraction\": %s, \"device\": \"%s\"%s}\n",
               r.op.c_str(), r.atoms, r.neighbors, r.channels, r.ms,
               r.peak >= 0 ? std::to_string(r.peak).c_str() : "null",
               r.roofline >= 0 ? std::to_string(r.roofline).c_str() : "null", Exec::name(), extra.c_str());
  std::fflush(out);
}

// A conv kernel on graph g with random h, w and upstream gout (seeds 2, 3, 4) and zeroed outputs, scale 1.
template <class Kern, class G>
Kern make_conv(const G& g, int N, int E, int C) {
  using V = typename Kern::V3;
  Kern kern;
  kern.g = g;
  kern.C = C;
  kern.scale = 1;
  V h("h", N, Kern::K, C), w("w", E, Kern::P, C), go("go", N, Kern::KO, C);
  fill_random(h, 2, 1.0);
  fill_random(w, 3, 1.0);
  fill_random(go, 4, 1.0);
  kern.h = h;
  kern.w = w;
  kern.gout = go;
  kern.out = V("out", N, Kern::KO, C);
  kern.gh = V("gh", N, Kern::K, C);
  kern.gw = V("gw", E, Kern::P, C);
  kern.f = typename Kern::D2("f", N, 3);
  kern.vatom = typename Kern::D2("vatom", N, 6);
  kern.allocate_workspace();
  return kern;
}

// conv_fwd and conv_fwd_bwd of ConvEdgeWeights<float, 3, all paths>, and the adjoint's variants `staged`.
void time_conv(std::FILE* out, const Graph<float, Dev>& g, int N, int k, int C, int warmup, int reps, double fma_rate,
               const std::vector<int>& staged) {
  const int E = N * k;
  const long long base = device_used_bytes();
  const auto kern = make_conv<ConvEdgeWeights<float, Dev, 3, true>>(g, N, E, C);
  const double fl = conv_flops_per_edge(C) * E;
  const double ms = median_ms([&] { kern.forward(); }, warmup, reps);
  write_result(out, {"conv_fwd", N, k, C, ms, base >= 0 ? device_used_bytes() - base : -1,
                     fl / (ms * 1e-3) / fma_rate});
  // forward + backward of kernel variant kv, written as op
  auto fwd_bwd = [&](const auto& kv, const std::string& op) {
    const double t = median_ms(
        [&] {
          kv.forward();
          Kokkos::deep_copy(kv.gh, 0.0f);
          Kokkos::deep_copy(kv.f, 0.0);
          Kokkos::deep_copy(kv.vatom, 0.0);
          kv.backward();
        },
        warmup, reps);
    write_result(out, {op, N, k, C, t, base >= 0 ? device_used_bytes() - base : -1, 3 * fl / (t * 1e-3) / fma_rate});
  };
  fwd_bwd(kern, "conv_fwd_bwd");  // the default adjoint (ConvEdgeWeights::default_staged)
  for (int v : staged) {
    auto variant = kern;
    variant.staged = v;
    if (v == 0 || variant.staged_fits())
      fwd_bwd(variant, v == 0 ? std::string("conv_fwd_bwd_unstaged") : "conv_fwd_bwd_staged" + std::to_string(v));
  }
}

void run_case(std::FILE* out, int N, int k, int C, const BenchOptions& opt) {
  const int warmup = opt.warmup, reps = opt.reps, radial_chunk = opt.radial_chunk;
  const std::string& graph_dir = opt.graph_dir;
  const RandomGraph rg = make_random_graph(N, k, 1000u + N + k);
  if (!graph_dir.empty()) {
    std::ofstream f(graph_dir + "/graph_" + std::to_string(N) + "_" + std::to_string(k) + ".bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(rg.x.data()), rg.x.size() * sizeof(float));
    f.write(reinterpret_cast<const char*>(rg.send.data()), rg.send.size() * sizeof(int));
  }
  const int E = N * k;
  const double fma_rate = 56e12;  // measured H200 fp32 FMA rate, FLOP/s
  {  // SH
    const long long base = device_used_bytes();
    Kokkos::View<float* [3], Kokkos::LayoutRight, Dev> r("r", E);
    fill_random(r, 1, 1.0);
    Kokkos::View<float**, Kokkos::LayoutRight, Dev> Y("Y", E, 16);
    ComputeSH<float, 3, Dev> f{r, Y, {}, {}};
    const double ms = median_ms([&] { Kokkos::parallel_for("sh", Kokkos::RangePolicy<Exec>(0, E), f); }, warmup, reps);
    write_result(out, {"sh", N, k, C, ms, base >= 0 ? device_used_bytes() - base : -1, -1});
  }
  auto g = make_graph<float, Dev>(rg.x, N, rg.recv, rg.send);
  time_conv(out, g, N, k, C, warmup, reps, fma_rate, opt.conv_staged);  // conv with per-edge weights, all 34 paths
  {  // fused interaction + attention, L = 2 (model default), forward + adjoint
    constexpr int L = 2;
    const int A = 4, dk = 8, NB = 8, H = 32, P = num_paths(L, false);
    const long long base = device_used_bytes();
    std::mt19937 rng(5);
    std::normal_distribution<double> nd(0, 1);
    auto rnd = [&](size_t n, double s) {
      std::vector<double> v(n);
      for (auto& a : v) a = s * nd(rng);
      return v;
    };
    const double rc = rg.box * 1.8 + 1.0;  // every random edge is inside the cutoff
    const auto W1 = rnd(H * NB, 0.3), b1 = rnd(H, 0.1), W2 = rnd(2 * P * C * H, 0.2);
    auto prm = make_layer_params<float, Dev, L>(C, NB, H, A, dk, rc, double(k), W1, b1, W2, rnd(A * NB, 0.3),
                                                rnd(A * dk * C, 0.2), rnd(A * dk * C, 0.2));
    constexpr int K = num_sh(L);
    Kokkos::View<float***, Kokkos::LayoutRight, Dev> h("h", N, K, C), m("m", N, K, C), o("o", N, K, C),
        gm("gm", N, K, C), go("go", N, K, C), gh("gh", N, K, C);
    Kokkos::View<double**, Kokkos::LayoutRight, Dev> f("f", N, 3), vatom("vatom", N, 6);
    fill_random(h, 6, 1.0);
    fill_random(gm, 7, 1.0);
    fill_random(go, 8, 1.0);
    InteractionWork<float, Dev> work;
    // as in the model: the sender adjoint accumulates its forces / virial apart, so that it can run beside the pair
    // adjoint (interaction_backward)
    work.f_send = decltype(f)("f_send", N, 3);
    work.vatom_send = decltype(f)("vatom_send", N, 6);
    prm.basis_chunk = opt.basis_chunk.value_or(prm.basis_chunk);
    const int ts = opt.team;
    // Times one layer's attention ops with parameters p and the kernels of layer role R (kGeneralLayer or the first /
    // last layers' roles): forward + adjoint, and the forward alone; rows attention_fwd_bwd<suffix>,
    // attention_fwd<suffix>, with the launch the drivers chose.
    auto time_layer = [&](auto role_c, const LayerParams<float, Dev>& p, const std::string& suffix) {
      constexpr int R = decltype(role_c)::value;
      const auto ln = interaction_launch<float, Dev, L, true, R>(p, ts);
      const std::string extra = ", \"radial_mode\": " + std::to_string(int(p.radial_mode)) + ", \"team_fwd\": " +
                                std::to_string(ln.team_fwd) + ", \"chunk_fwd\": " + std::to_string(ln.chunk_fwd) +
                                ", \"tc_fwd\": " + std::to_string(ln.tc_fwd) +
                                ", \"team_adj\": " + std::to_string(ln.team_adj) +
                                ", \"chunk_adj\": " + std::to_string(ln.chunk_adj) +
                                ", \"basis_fwd\": " + std::to_string(ln.basis_fwd) +
                                ", \"basis_adj\": " + std::to_string(ln.basis_adj) +
                                ", \"tc_adj\": " + std::to_string(ln.tc_adj) +
                                ", \"capped_adj\": " + (ln.capped_adj ? "true" : "false") +
                                ", \"capped_fwd\": " + (ln.capped_fwd ? "true" : "false");
      double ms = median_ms(
          [&] {
            interaction_forward<float, Dev, L, true, R>(g, p, h, m, o, work, ts);
            Kokkos::deep_copy(gh, 0.0f);
            Kokkos::deep_copy(f, 0.0);
            Kokkos::deep_copy(vatom, 0.0);
            Kokkos::deep_copy(work.f_send, 0.0);
            Kokkos::deep_copy(work.vatom_send, 0.0);
            interaction_backward<float, Dev, L, true, R>(g, p, h, o, gm, go, gh, f, vatom, work, ts);
          },
          warmup, reps);
      write_result(out, {"attention_fwd_bwd" + suffix, N, k, C, ms, base >= 0 ? device_used_bytes() - base : -1, -1},
                   extra);
      ms = median_ms([&] { interaction_forward<float, Dev, L, true, R>(g, p, h, m, o, work, ts); }, warmup, reps);
      write_result(out, {"attention_fwd" + suffix, N, k, C, ms, base >= 0 ? device_used_bytes() - base : -1, -1},
                   extra);
    };
    for (RadialMode mode : opt.radial_modes) {
      prm.radial_mode = mode;
      prm.radial_chunk = radial_chunk;
      const std::string suffix = mode == RadialMode::kTeamGemm         ? "_radial_gemm"
                                 : mode == RadialMode::kTensorCore     ? "_radial_mma"
                                 : mode == RadialMode::kTensorCoreF16 ? "_radial_mma_f16"
                                                                       : "";
      time_layer(std::integral_constant<int, kGeneralLayer>(), prm, suffix);
    }
    // The first and last layers' kernels (layer roles: embedding input, the paths (0, l, l), no dE/dh; scalar output,
    // the paths (l, l, 0)), as MD runs them, with the default radial mode (or --role-radial-mode), the same radial
    // MLP and the launch settings above; op names end in _embedding_input, _scalar_output.
    for (int role : {kEmbeddingInput, kScalarOutput}) {
      auto pe = make_layer_params<float, Dev, L>(C, NB, H, A, dk, rc, double(k), W1, b1, W2, rnd(A * NB, 0.3),
                                                 rnd(A * dk * C, 0.2), rnd(A * dk * C, 0.2), role);
      pe.basis_chunk = prm.basis_chunk;
      pe.radial_chunk = radial_chunk;
      pe.radial_mode = opt.role_radial_mode.value_or(pe.radial_mode);
      if (role == kEmbeddingInput)
        time_layer(std::integral_constant<int, kEmbeddingInput>(), pe, "_embedding_input");
      else
        time_layer(std::integral_constant<int, kScalarOutput>(), pe, "_scalar_output");
    }
  }
}

template <class V>
void dump(const std::string& path, const V& v) {
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);  // (v may be a const view)
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(h.data()), h.span() * sizeof(typename V::value_type));
}

void dump_vec(const std::string& path, const std::vector<double>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

// docs/model.md steps 1-2 (fused interaction + attention, L = 2) on the same graph, r_c cutting some edges:
// parameters, inputs, m, o and the adjoint (dE/dh, forces) for E = sum gm.m + go.o.
void check_dump_attention(const std::string& dir, const RandomGraph& rg, const std::vector<double>& xd) {
  constexpr int L = 2, K = num_sh(L);
  const int N = rg.N, C = 8, A = 2, dk = 4, NB = 5, H = 6, P = num_paths(L, false);
  const double rc = 6.0, avg = 5.0;
  std::mt19937 rng(91);
  std::normal_distribution<double> nd(0, 1);
  auto rnd = [&](size_t n, double s) {
    std::vector<double> v(n);
    for (auto& a : v) a = s * nd(rng);
    return v;
  };
  const auto W1 = rnd(H * NB, 0.5), b1 = rnd(H, 0.3), W2 = rnd(2 * P * C * H, 0.4), Wg = rnd(A * NB, 0.8),
             Wq = rnd(A * dk * C, 0.5), Wk = rnd(A * dk * C, 0.5);
  auto g = make_graph<double, Dev>(xd, N, rg.recv, rg.send);
  auto prm = make_layer_params<double, Dev, L>(C, NB, H, A, dk, rc, avg, W1, b1, W2, Wg, Wq, Wk);
  Kokkos::View<double***, Kokkos::LayoutRight, Dev> h("h", N, K, C), m("m", N, K, C), o("o", N, K, C),
      gm("gm", N, K, C), go("go", N, K, C), gh("gh", N, K, C);
  Kokkos::View<double**, Kokkos::LayoutRight, Dev> f("f", N, 3), vatom("vatom", N, 6);
  fill_random(h, 11, 1.0);
  fill_random(gm, 12, 1.0);
  fill_random(go, 13, 1.0);
  InteractionWork<double, Dev> work;
  interaction_forward<double, Dev, L, true>(g, prm, h, m, o, work);
  interaction_backward<double, Dev, L, true>(g, prm, h, o, gm, go, gh, f, vatom, work);
  Kokkos::fence();
  std::ofstream meta(dir + "/attn_meta.json");
  meta << "{\"L\": " << L << ", \"C\": " << C << ", \"A\": " << A << ", \"dk\": " << dk << ", \"NB\": " << NB
       << ", \"H\": " << H << ", \"P\": " << P << ", \"rc\": " << rc << ", \"avg\": " << avg << "}\n";
  dump_vec(dir + "/attn_W1.bin", W1);
  dump_vec(dir + "/attn_b1.bin", b1);
  dump_vec(dir + "/attn_W2.bin", W2);
  dump_vec(dir + "/attn_Wg.bin", Wg);
  dump_vec(dir + "/attn_Wq.bin", Wq);
  dump_vec(dir + "/attn_Wk.bin", Wk);
  dump(dir + "/attn_h.bin", h);
  dump(dir + "/attn_gm.bin", gm);
  dump(dir + "/attn_go.bin", go);
  dump(dir + "/attn_m.bin", m);
  dump(dir + "/attn_o.bin", o);
  dump(dir + "/attn_gh.bin", gh);
  dump(dir + "/attn_f.bin", f);
}

// Small double-precision case for the e3nn cross-check (bench/e3nn_bench.py --check).
void check_dump(const std::string& dir) {
  const int N = 40, k = 6, C = 4, E = N * k;
  const RandomGraph rg = make_random_graph(N, k, 77);
  std::vector<double> xd(rg.x.begin(), rg.x.end());
  auto g = make_graph<double, Dev>(xd, N, rg.recv, rg.send);
  using Kern = ConvEdgeWeights<double, Dev, 3, true>;
  const auto kern = make_conv<Kern>(g, N, E, C);
  kern.forward();
  kern.backward();
  Kokkos::View<double* [3], Kokkos::LayoutRight, Dev> r("r", E);
  auto rh = Kokkos::create_mirror_view(r);
  for (int e = 0; e < E; ++e)
    for (int a = 0; a < 3; ++a) rh(e, a) = xd[3 * rg.send[e] + a] - xd[3 * rg.recv[e] + a];
  Kokkos::deep_copy(r, rh);
  Kokkos::View<double**, Kokkos::LayoutRight, Dev> Y("Y", E, 16);
  Kokkos::parallel_for(Kokkos::RangePolicy<Exec>(0, E), ComputeSH<double, 3, Dev>{r, Y, {}, {}});
  Kokkos::fence();
  std::ofstream meta(dir + "/check_meta.json");
  meta << "{\"N\": " << N << ", \"k\": " << k << ", \"C\": " << C << ", \"P\": " << Kern::P << ", \"KO\": " << Kern::KO
       << "}\n";
  std::ofstream fx(dir + "/check_x.bin", std::ios::binary);
  fx.write(reinterpret_cast<const char*>(xd.data()), xd.size() * sizeof(double));
  std::ofstream fs(dir + "/check_send.bin", std::ios::binary);
  fs.write(reinterpret_cast<const char*>(rg.send.data()), rg.send.size() * sizeof(int));
  dump(dir + "/check_h.bin", kern.h);
  dump(dir + "/check_w.bin", kern.w);
  dump(dir + "/check_go.bin", kern.gout);
  dump(dir + "/check_out.bin", kern.out);
  dump(dir + "/check_gh.bin", kern.gh);
  dump(dir + "/check_gw.bin", kern.gw);
  dump(dir + "/check_f.bin", kern.f);
  dump(dir + "/check_Y.bin", Y);
  check_dump_attention(dir, rg, xd);
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::string out_path, cases = "full", check_dir;
  BenchOptions opt;
  for (int a = 1; a < argc; ++a) {
    const std::string s = argv[a];
    auto next = [&]() -> std::string { return a + 1 < argc ? argv[++a] : ""; };
    auto next_int = [&](int lo, int hi) { return parse_int(s, next(), lo, hi); };
    if (s == "--out") out_path = next();
    else if (s == "--graph-dir") opt.graph_dir = next();
    else if (s == "--reps") opt.reps = next_int(1, 100000);
    else if (s == "--warmup") opt.warmup = next_int(0, 100000);
    else if (s == "--cases") cases = next();
    else if (s == "--check-dump") check_dir = next();
    else if (s == "--radial-chunk") opt.radial_chunk = next_int(0, 8);
    else if (s == "--team") opt.team = next_int(0, 1024);
    else if (s == "--basis-chunk") opt.basis_chunk = next_int(0, kMaxBasisChunk);
    else if (s == "--role-radial-mode") {
      const std::string v = next();
      opt.role_radial_mode = parse_radial_mode(v);
      if (!opt.role_radial_mode) {
        std::fprintf(stderr, "batmobile_bench: --role-radial-mode takes 0, 1, 2 or 4, not '%s'\n", v.c_str());
        return 2;
      }
    }
    else if (s == "--conv-staged") {
      const std::string list = next();
      for (size_t from = 0; from <= list.size();) {
        const size_t comma = std::min(list.find(',', from), list.size());
        const std::string v = list.substr(from, comma - from);
        if (v != "0" && v != "2" && v != "3") {  // ConvEdgeWeights::staged
          std::fprintf(stderr, "batmobile_bench: --conv-staged takes a list of 0, 2 and 3, not '%s'\n", list.c_str());
          return 2;
        }
        opt.conv_staged.push_back(std::stoi(v));
        from = comma + 1;
      }
    }
    else if (s == "--radial-mode") {
      const std::string v = next();
      if (const auto mode = parse_radial_mode(v)) opt.radial_modes = {*mode};
      else if (v == "both") opt.radial_modes = {RadialMode::kPerEdge, RadialMode::kTeamGemm};
      else if (v == "all")
        opt.radial_modes = {RadialMode::kPerEdge, RadialMode::kTeamGemm, RadialMode::kTensorCore,
                            RadialMode::kTensorCoreF16};
      else {
        std::fprintf(stderr, "--radial-mode: 0, 1, 2, 4, both or all\n");
        return 2;
      }
    }
    else if (s.rfind("--kokkos", 0) == 0) continue;
    else {
      std::fprintf(stderr, "unknown argument %s\n", s.c_str());
      return 2;
    }
  }
  if (!check_dir.empty()) {
    check_dump(check_dir);
    std::printf("wrote check case to %s\n", check_dir.c_str());
    return 0;
  }
  std::FILE* out = out_path.empty() ? stdout : std::fopen(out_path.c_str(), "w");
  if (!out) return 3;
  if (cases == "quick") {
    BenchOptions quick = opt;
    quick.warmup = 1;
    quick.reps = 3;
    run_case(out, 60, 6, 8, quick);
  } else if (cases.find(':') != std::string::npos) {  // one custom case N:k:C
    int N = 0, k = 0, C = 0;
    if (std::sscanf(cases.c_str(), "%d:%d:%d", &N, &k, &C) != 3) return 2;
    run_case(out, N, k, C, opt);
  } else {
    run_case(out, 1000, 20, 32, opt);
    run_case(out, 10000, 30, 64, opt);
  }
  if (out != stdout) std::fclose(out);
  return 0;
}
