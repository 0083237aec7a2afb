// The GPU code paths on any back-end: one thread per channel, edge split, radial GEMM (mode 1) and tensor cores
// (mode 2) vs the reference, finite differences and each other.
#include <cmath>
#include <limits>

#include "interaction_test_util.hpp"

using namespace bt;
using namespace interaction_test;

// The L = 1 kernel sets of all test_interaction sources (interaction_test_util.hpp).
namespace interaction_test {
INTERACTION_TEST_RUN_KERNELS(double, 1);
INTERACTION_TEST_RUN_KERNELS(float, 1);
}  // namespace interaction_test

// Largest team the back-end runs (on OpenMP: the thread count); declared in interaction_test_util.hpp.
int interaction_test::team_size_max() {
  using Kern = InteractionKernel<double, Dev, 1, true>;
  Kokkos::TeamPolicy<Dev::execution_space, Kern::PairAdj> probe(1, 1);
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

// The pair adjoint against the independent reference with one thread per team and, on OpenMP with enough threads, the
// GPU paths' teams of C and 4 C threads: a receiver without edges, ghosts (sender teams after the pair teams), edges
// beyond r_c, radial modes 0-2; the larger teams also against the first, and so in radial mode 4 as well (f16 tensor
// cores on GPUs, mode 1 on hosts).
TEST(Interaction, PairAdjointPath) {
  constexpr int L = 2;
  std::mt19937 rng(83);
  const Model M = make_model(L, rng);
  const int C = M.C;
  const System S = split_system(L, C, M.rc, rng);
  const Expected E = expected(M, S, rng);
  std::vector<int> teams = {0};
  for (int ts : {C, 4 * C})
    if (team_size_max() >= ts) teams.push_back(ts);
  for (RadialMode mode : {kPerEdge, kTeamGemm, kTensorCore, kTensorCoreF16})
    for (int ts : teams) {
      const Launch first(teams[0], mode, 0), ln(ts, mode, 0);
      if (ts != teams[0]) {
        compare_runs<double, L>(M, S, E, first, ln, 1e-12);
        compare_runs<float, L>(M, S, E, first, ln, 2e-5);
      }
      // (f16 radial weights on GPUs: TensorCoreRadialF16's reference)
      if (mode != kTensorCoreF16) check_against<L>(M, S, E, ln);
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
  // (3 C: a split that is no power of 2; kWaveAwareTeam, kOneSlotLessTeam: automatic on host back-ends)
  for (int ts : {1, C, 2 * C, 3 * C, 4 * C, kWaveAwareTeam, kOneSlotLessTeam}) check_against<L>(M, S, E, ts);
  compare_runs<double, L>(M, S, E, C, 4 * C, 1e-12);
  compare_runs<float, L>(M, S, E, C, 4 * C, 2e-5);
  // the forward with a team size of its own (the adjoint reads only the per-receiver softmax state M, Z it saved)
  for (int fts : {3 * C, C}) {
    Launch ln(4 * C);
    ln.forward_team = fts;
    check_against<L>(M, S, E, ln);
  }
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
  check_forward_and_adjoint<1>(15, 4, 44, 3.0,
                               {{C, kTeamGemm, 8}, {2 * C, kTeamGemm, 2}, {3 * C, kTeamGemm, 4}, {3 * C, kTeamGemm, 8},
                                {4 * C, kTeamGemm, 4}, {4 * C, kTeamGemm, 0}});
  check_forward_and_adjoint<3>(17, 3, 9, 4.0, {{C, kTeamGemm, 2}, {4 * C, kTeamGemm, 8}});
  check_forward_and_adjoint<2>(21, 4, 12, 4.0, {{4 * C, kTeamGemm, 0}}, 12);  // dk > kSmallDk
  // split_system: a receiver without edges, one with 2 edges (fewer than the chunk), edges beyond r_c
  constexpr int L = 2;
  std::mt19937 rng(71);
  const Model M = make_model(L, rng);
  const System S = split_system(L, C, M.rc, rng);
  const Expected E = expected(M, S, rng);
  for (int ts : {C, 2 * C, 4 * C})
    for (int chunk : {8, 4, 2}) check_against<L>(M, S, E, {ts, kTeamGemm, chunk});
  for (int chunk : {8, 4, 2}) {
    compare_runs<double, L>(M, S, E, {4 * C, kPerEdge, 0}, {4 * C, kTeamGemm, chunk}, 1e-12);
    compare_runs<float, L>(M, S, E, {4 * C, kPerEdge, 0}, {4 * C, kTeamGemm, chunk}, 2e-5);
  }
  compare_runs<float, L>(M, S, E, {C, kPerEdge, 0}, {2 * C, kTeamGemm, 2}, 2e-5);
  // one thread per team (host back-ends): the thread runs the chunk GEMM, then loops over the channels, with the
  // adjoint partials accumulated across chunks in scratch apart from the chunk
  for (int chunk : {8, 4, 2}) check_against<L>(M, S, E, {1, kTeamGemm, chunk});
  compare_runs<double, L>(M, S, E, {1, kPerEdge, 0}, {1, kTeamGemm, 0}, 1e-12);
  compare_runs<float, L>(M, S, E, {1, kPerEdge, 0}, {1, kTeamGemm, 0}, 2e-5);
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
      prm.radial_mode = kTensorCore;
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
      prm.radial_mode = kTeamGemm;
      const auto ln1 = interaction_launch<float, Dev, L, true>(prm, ts);
      EXPECT_FALSE(ln1.tc_fwd || ln1.tc_adj);
    }
    const System S = split_system(L, C, M.rc, rng);
    const Expected E = expected(M, S, rng);
    for (int ts : teams)
      for (int chunk : {8, 4, 2}) {
        check_against<L>(M, S, E, {ts, kTensorCore, chunk});
        compare_runs<float, L>(M, S, E, {ts, kTeamGemm, chunk}, {ts, kTensorCore, chunk}, 2e-5);
      }
  }
  // L = 1 and 3 (NW C = 64 and 368 columns: 4 and 23 tiles over 1 or 2 warps), several chunks per receiver
  check_forward_and_adjoint<1>(92, 4, 44, 3.0, {{32, kTensorCore, 8}, {teams.back(), kTensorCore, 4}}, 3, 16);
  check_forward_and_adjoint<3>(93, 3, 9, 4.0, {{32, kTensorCore, 2}, {teams.back(), kTensorCore, 8}}, 3, 16);
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
    // split_tf32 (the kernels' split): the same big part, a small part cut to TF32 (toward zero), within 2^-21 too
    uint32_t bb, sb;
    split_tf32(w, bb, sb);
    EXPECT_EQ(tf32_bits_float(bb), big);
    EXPECT_EQ(sb & 0x1fffu, 0u);
    EXPECT_LE(std::fabs(tf32_bits_float(sb)), std::fabs(w - big));
    EXPECT_LE(std::fabs(w - (tf32_bits_float(bb) + tf32_bits_float(sb))), std::ldexp(std::fabs(w), -21));
  }
  // non-finite operands keep the products non-finite: a NaN (also the all-ones one, whose rounded big part wraps to
  // -0) and infinities give a NaN small part
  for (float w : {std::numeric_limits<float>::quiet_NaN(), tf32_bits_float(0x7fffffffu), tf32_bits_float(0xffffffffu),
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    uint32_t bb, sb;
    split_tf32(w, bb, sb);
    EXPECT_TRUE(std::isnan(tf32_bits_float(sb))) << w;
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

// Radial mode 4 (pair style precision mixed): f16 operands where H is a multiple of 16 up to kF16MaxK, else mode 2's
// 3xTF32, as the launch reports; against mode 1 within f16 rounding (2^-11 per operand, well inside 5e-3 of the
// largest value; a wrong fragment position gives errors of the values' size) and bit-identical when repeated. On host
// back-ends mode 4 is mode 1 (CTest: OMP_NUM_THREADS=32).
TEST(Interaction, TensorCoreRadialF16) {
  const int C = 8, tmax = team_size_max();
  if (tmax < 4 * C) GTEST_SKIP() << "team_size_max " << tmax << " < 4 C";
  std::vector<int> teams = {32};
  if (tmax >= 64) teams.push_back(64);
  constexpr int L = 2;
  std::mt19937 rng(94);
  const bool tcs = kTensorCoreTf32 && !runs_on_host<Dev::execution_space>;
  for (int H : {16, 32, 40}) {
    SCOPED_TRACE("H " + std::to_string(H));
    const Model M = make_model(L, rng, 3, H);
    auto prm = make_layer_params<float, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg,
                                                M.Wq, M.Wk);
    const bool f16 = H % 16 == 0;
    EXPECT_EQ(prm.W2th.extent(0) > 0, f16);
    prm.radial_mode = kTensorCoreF16;
    const int want = !tcs ? kTensorCoresOff : f16 ? kTensorCoresF16 : kTensorCores3xTf32;
    for (int ts : teams) {
      const auto ln = interaction_launch<float, Dev, L, true>(prm, ts);
      EXPECT_EQ(ln.tc_fwd, want) << ts;
      EXPECT_EQ(ln.tc_adj, want) << ts;
    }
    const System S = split_system(L, C, M.rc, rng);
    const Expected E = expected(M, S, rng);
    for (int ts : teams)
      for (int chunk : {8, 4})
        compare_runs<float, L>(M, S, E, {ts, kTeamGemm, chunk}, {ts, kTensorCoreF16, chunk}, tcs ? 5e-3 : 2e-5);
  }
  // 23 tiles; with f16 operands, against the f16-rounded reference
  check_forward_and_adjoint<3>(95, 3, 9, 4.0, {{32, kTensorCoreF16, 8}}, 3, 16);
}

// f16_round_bits: IEEE binary16, nearest with ties to even, subnormals, overflow to infinity; pack_a_fragments_f16
// puts every W entry, rounded, in exactly one (register, half) slot of the m16n8k16 A fragments.
TEST(TensorCore, F16RoundingAndFragments) {
  EXPECT_EQ(f16_round_bits(1.0f), 0x3c00);
  EXPECT_EQ(f16_round_bits(-2.0f), 0xc000);
  EXPECT_EQ(f16_round_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f16_round_bits(65519.0f), 0x7bff);
  EXPECT_EQ(f16_round_bits(65520.0f), 0x7c00);
  EXPECT_EQ(f16_round_bits(0x1p-24f), 0x0001);
  EXPECT_EQ(f16_round_bits(0x1p-25f), 0x0000);           // tie: to even (zero)
  EXPECT_EQ(f16_round_bits(0x1.8p-24f), 0x0002);         // tie: to even
  EXPECT_EQ(f16_round_bits(1.0f + 0x1p-11f), 0x3c00);    // tie: to even
  EXPECT_EQ(f16_round_bits(1.0f + 0x1.8p-10f), 0x3c02);  // tie: to even (up)
  EXPECT_EQ(f16_round_bits(0x1.ff8p-15f), 0x03ff);       // largest subnormal
  EXPECT_EQ(f16_round_bits(0x1.ffep-15f), 0x0400);       // rounds up to the smallest normal
  EXPECT_TRUE(std::isnan(f16_bits_float(f16_round_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f16_bits_float(f16_round_bits(-std::numeric_limits<float>::infinity())),
            -std::numeric_limits<float>::infinity());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-3.f, 3.f);
  for (int k = 0; k < 2000; ++k) {  // relative error at most 2^-11 for normal results
    const float x = uni(rng) * std::exp2(float(k % 20) - 10.f), y = f16_bits_float(f16_round_bits(x));
    if (std::fabs(x) < 0x1p-14f) continue;
    EXPECT_LE(std::fabs(y - x), std::ldexp(std::fabs(x), -11)) << x;
  }
  std::vector<float> W(32 * 32);
  for (auto& w : W) w = uni(rng);
  // rows (k) 32, cols (m) 32: 2 tiles x 2 k steps of 16
  const auto frag = pack_a_fragments_f16([&](int k, int m) { return W[size_t(k) * 32 + m]; }, 32, 32);
  ASSERT_EQ(frag.size(), size_t(2 * 2 * 32 * 4));
  std::vector<int> seen(W.size(), 0);
  for (int tile = 0; tile < 2; ++tile)
    for (int ks = 0; ks < 2; ++ks)
      for (int l = 0; l < 32; ++l)
        for (int r = 0; r < 4; ++r)
          for (int h = 0; h < 2; ++h) {
            const size_t w = size_t(ks * 16 + F16Tile::a_col(l, r) + h) * 32 + tile * 16 + F16Tile::a_row(l, r);
            const uint32_t v = frag[((size_t(tile) * 2 + ks) * 32 + l) * 4 + r];
            EXPECT_EQ(uint16_t(h ? v >> 16 : v & 0xffffu), f16_round_bits(W[w]));
            ++seen[w];
          }
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_THROW(pack_a_fragments_f16([](int, int) { return 0.f; }, 24, 32), std::invalid_argument);
}

// The kernels of the model's first and last layers (layer roles, common.hpp). kEmbeddingInput: the input is the
// species embedding (only l = 0): tensor products over the paths (0, l, l), adjoints without dE/dh, dE/dq, dE/dk.
// kScalarOutput: only the l = 0 outputs are used: the paths (l, l, 0), m and o exactly 0 for l >= 1. On input that
// fits the role (features with only l = 0, resp. upstream gradients with only l = 0): vs the reference and finite
// differences (check_against: m, o, forces on every atom, virial; gh untouched, resp. vs finite differences), and vs
// the general kernels on the same input to rounding (the role's outputs, M, Z, forces, per-atom virial, gh). L = 1,
// 2, 3; one thread per team and, given 32 OpenMP threads (CTest), teams of C and 4 C; radial modes 0, 1 and 2
// (tensor cores on CUDA, H = 16), the adjoints with and without their register cap. Premises: input outside the role
// (an l = 1 feature, resp. an l = 1 upstream gradient) changes the general kernels' result, not the role's.
template <class T, int L>
void expect_same_layer(const Model& M, const System& S, const Expected& E, Launch ln, double tol) {
  Launch gen = ln;
  gen.role = kGeneralLayer;
  SCOPED_TRACE(std::string(sizeof(T) == 4 ? "float " : "double ") + ln.str());
  const auto a = run_kernels<T, L>(M, S, S.x, S.h, E.gm, E.go, true, gen);
  const auto b = run_kernels<T, L>(M, S, S.x, S.h, E.gm, E.go, true, ln);
  auto expect_close = [&](const auto& x, const auto& y, const char* what) { expect_close_views(x, y, tol, what); };
  // m, o: all components, or those of l = 0 for a scalar output (the general kernels fill the others)
  auto expect_close_outputs = [&](const auto& x, const auto& y, const char* what) {
    if (!(ln.role & kScalarOutput)) return expect_close(x, y, what);
    const auto hx = to_host(x), hy = to_host(y);
    double d = 0, s = 0;
    for (size_t i = 0; i < hx.extent(0); ++i)
      for (size_t c = 0; c < hx.extent(2); ++c) {
        d = std::max(d, std::fabs(double(hx(i, 0, c)) - double(hy(i, 0, c))));
        s = std::max(s, std::fabs(double(hx(i, 0, c))));
      }
    EXPECT_GT(s, 0.0) << what;
    EXPECT_LE(d, tol * std::max(1.0, s)) << what;
  };
  expect_close_outputs(a.m, b.m, "m");
  expect_close_outputs(a.o, b.o, "o");
  expect_close(a.M, b.M, "M");
  expect_close(a.Z, b.Z, "Z");
  expect_close(a.f, b.f, "f");
  expect_close(a.vatom, b.vatom, "vatom");
  if (!(ln.role & kEmbeddingInput)) expect_close(a.gh, b.gh, "gh");
}

template <int L>
void check_layer_role(int role, unsigned seed, const std::vector<Launch>& launches, int dk = 3) {
  SCOPED_TRACE("role " + std::to_string(role) + " L " + std::to_string(L) + " dk " + std::to_string(dk));
  std::mt19937 rng(seed);
  const Model M = make_model(L, rng, dk, 16);
  const System S0 = make_system(L, M.C, rng, 5, 12, 4.0);
  const bool emb = role & kEmbeddingInput, scalar_out = role & kScalarOutput;
  const System S = emb ? embedding_features(S0, L, M.C) : S0;
  const Expected E = expected(M, S, rng, scalar_out);
  for (Launch ln : launches) {
    ln.role = role;
    check_against<L>(M, S, E, ln);
    expect_same_layer<double, L>(M, S, E, ln, 1e-12);
    expect_same_layer<float, L>(M, S, E, ln, 2e-5);
  }
  // premise: input outside the role changes the general kernels' result but not the role's
  System S1 = S;
  Expected E1 = E;
  const size_t l1 = (size_t(S.n_recv) * num_sh(L) + 1) * M.C;  // an l = 1 component of a (ghost) sender, resp. receiver 0
  for (int c = 0; c < M.C; ++c) {
    if (emb) S1.h[l1 + c] = 0.5;
    if (scalar_out) E1.gm[num_sh(L) > 1 ? M.C + c : c] = 0.5;
  }
  Launch gen = launches.front(), mine = launches.front();
  mine.role = role;
  const auto g0 = run_kernels<double, L>(M, S, S.x, S.h, E.gm, E.go, true, gen);
  const auto g1 = run_kernels<double, L>(M, S1, S1.x, S1.h, E1.gm, E1.go, true, gen);
  const auto r0 = run_kernels<double, L>(M, S, S.x, S.h, E.gm, E.go, true, mine);
  const auto r1 = run_kernels<double, L>(M, S1, S1.x, S1.h, E1.gm, E1.go, true, mine);
  EXPECT_GT(emb ? max_diff(g0.m, g1.m).first : max_diff(g0.f, g1.f).first, 1e-6);
  EXPECT_EQ(max_diff(r0.m, r1.m).first, 0.0);
  EXPECT_EQ(max_diff(r0.f, r1.f).first, 0.0);
}

TEST(Interaction, LayerRoles) {
  const int C = 8, tmax = team_size_max();
  std::vector<Launch> launches = {{1, kPerEdge, 0}, {1, kTeamGemm, 0}};
  Launch uncapped(4 * C, kTensorCore, 0);  // the role adjoints without their register cap (compiled on GPUs)
  uncapped.tuning.cap_adjoints = false;
  if (tmax >= 4 * C)  // (otherwise one thread per team only; CTest runs it with 32 threads as well)
    for (Launch ln : {Launch{C, kPerEdge, 0}, Launch{4 * C, kTeamGemm, 0}, Launch{4 * C, kTensorCore, 0}, uncapped,
                      Launch{4 * C, kTeamGemm, 2}})
      launches.push_back(ln);
  for (int role : {kEmbeddingInput, kScalarOutput}) {
    check_layer_role<1>(role, 301 + role, launches);
    check_layer_role<2>(role, 302 + role, launches);
    check_layer_role<3>(role, 303 + role, launches);
    // key width above kSmallDk: the adjoints with DKM = kMaxDk
    check_layer_role<2>(role, 305 + role, {launches.front(), launches.back()}, 12);
  }
}

// The kernels with the bundled potentials' dimensions compiled in (BundledDims: C, H, NB, A, dk constants, L =
// kBundledL) against the same kernels reading them from LayerParams: every role, float and double, radial modes 0
// and 1 (2 and 4, tensor cores, on CUDA), one thread per team and, given 32 OpenMP threads (CTest), teams of C,
// within rounding (compile-time sizes may let the compiler contract multiply-adds differently); the general role also
// against the independent reference and finite differences (check_against). The BundledDims drivers refuse parameters
// of other dimensions.
template <class T, int L>
void expect_same_as_runtime_dims(const Model& M, const System& S, const Expected& E, Launch ln, double tol) {
  Launch fixed = ln;
  fixed.bundled_dims = true;
  SCOPED_TRACE(std::string(sizeof(T) == 4 ? "float " : "double ") + fixed.str());
  const auto a = run_kernels<T, L>(M, S, S.x, S.h, E.gm, E.go, true, ln);
  const auto b = run_kernels<T, L>(M, S, S.x, S.h, E.gm, E.go, true, fixed);
  expect_close_views(a.m, b.m, tol, "m");
  expect_close_views(a.o, b.o, tol, "o");
  expect_close_views(a.M, b.M, tol, "M");
  expect_close_views(a.Z, b.Z, tol, "Z");
  expect_close_views(a.f, b.f, tol, "f");
  expect_close_views(a.vatom, b.vatom, tol, "vatom");
  expect_close_views(a.gh, b.gh, tol, "gh", !(ln.role & kEmbeddingInput));
}

TEST(Interaction, BundledDims) {
  using D = BundledDims;
  constexpr int L = kBundledL;
  std::mt19937 rng(97);
  const Model M = make_model(L, rng, D::dk, D::H, D::C, D::NB, D::A);
  const System S = make_system(L, D::C, rng, 4, 8, 4.0);
  std::vector<Launch> launches = {{1, kPerEdge, 0}, {1, kTeamGemm, 0}};
  if (team_size_max() >= D::C)
    for (RadialMode mode : {kPerEdge, kTeamGemm, kTensorCore, kTensorCoreF16})
      launches.push_back(Launch{D::C, mode, 0});
  const bool tcs = kTensorCoreTf32 && !runs_on_host<Dev::execution_space>;
  for (int role : {kGeneralLayer, kEmbeddingInput, kScalarOutput}) {
    const System Sr = role & kEmbeddingInput ? embedding_features(S, L, D::C) : S;
    Expected E;
    if (role == kGeneralLayer)
      E = expected(M, Sr, rng);
    else
      random_upstream(E, Sr, L, D::C, rng, role & kScalarOutput);
    for (Launch ln : launches) {
      ln.role = role;
      // (radial mode 4 rounds W2 and the hidden layer to f16 alike in both)
      expect_same_as_runtime_dims<double, L>(M, Sr, E, ln, 1e-13);
      expect_same_as_runtime_dims<float, L>(M, Sr, E, ln, tcs && tensor_core_mode(ln.radial_mode) ? 1e-4 : 2e-6);
      if (role == kGeneralLayer) {
        Launch fixed = ln;
        fixed.bundled_dims = true;
        check_against<L>(M, Sr, E, fixed);
      }
    }
  }
  // parameters of other dimensions (the default test model: C = 8, NB = 5, A = 2) through the BundledDims drivers
  const Model other = make_model(L, rng);
  const System So = make_system(L, other.C, rng);
  Launch fixed;
  fixed.bundled_dims = true;
  EXPECT_THROW((run_kernels<float, L>(other, So, So.x, So.h, {}, {}, false, fixed)), std::invalid_argument);
}
