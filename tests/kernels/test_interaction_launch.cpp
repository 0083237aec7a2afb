// Launch variants and launch arithmetic: register cap, constant-memory launch, basis chunks,
// concurrent adjoints, occupancy and scratch limits, team-size validation.
#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <set>

#include "interaction_test_util.hpp"

using namespace bt;
using namespace interaction_test;

// The float L = 2 kernel set of all test_interaction sources, and interaction_launch of it (interaction_test_util.hpp).
namespace interaction_test {
INTERACTION_TEST_RUN_KERNELS(float, 2);
}  // namespace interaction_test
template batmobile::kernels::InteractionLaunch
batmobile::kernels::interaction_launch<float, Dev, 2, true>(const LayerParams<float, Dev>&, int);

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

// The register caps (fused_capped; compiled for device back-ends, float, radial mode >= 1, teams <= 128): the
// adjoints with dk <= kSmallDk at 168 registers (LaunchBounds<128, 3>) and the forward at 128 (<128, 4>), each
// switched off for the comparison through impl::LaunchTuning. The launch must report each cap exactly there, and the
// capped kernels must match the reference, finite differences and the uncapped kernels through both launches (a cap
// changes registers, not arithmetic: equal to rounding).
void check_register_cap(bool forward, unsigned seed) {
  const int C = 8;
  constexpr int L = 2;
  std::mt19937 rng(seed);
  const Model M = make_model(L, rng, 3, 16);
  auto prm = make_layer_params<float, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg, M.Wq,
                                              M.Wk);
  for (RadialMode mode : {kPerEdge, kTeamGemm, kTensorCore})
    for (int ts : {32, 64})  // the teams TensorCoreRadial runs on the H200 with this C
      for (bool cap : {false, true}) {
        prm.radial_mode = mode;
        impl::LaunchTuning tuning;
        (forward ? tuning.cap_forward : tuning.cap_adjoints) = cap;
        const impl::ScopedLaunchTuning scoped(tuning);
        const auto ln = interaction_launch<float, Dev, L, true>(prm, ts);
        EXPECT_EQ(forward ? ln.capped_fwd : ln.capped_adj, cap && mode != kPerEdge && ts <= 128)
            << int(mode) << " " << ts << " " << cap;
      }
  const System S = split_system(L, C, M.rc, rng);
  const Expected E = expected(M, S, rng);
  for (bool slots : {false, true})
    for (int ts : {32, 64})
      for (RadialMode mode : {kTeamGemm, kTensorCore}) {
        Launch capped(ts, mode, 0), plain(ts, mode, 0);
        (forward ? plain.tuning.cap_forward : plain.tuning.cap_adjoints) = false;
        capped.tuning.const_slot_launch = plain.tuning.const_slot_launch = slots;
        check_against<L>(M, S, E, capped);
        compare_runs<float, L>(M, S, E, plain, capped, 1e-6);
      }
}

TEST(Interaction, AdjointRegisterCap) {
  if (runs_on_host<Dev::execution_space>) GTEST_SKIP() << "the register cap is compiled for device back-ends only";
  check_register_cap(false, 95);
}

TEST(Interaction, ForwardRegisterCap) {
  if (runs_on_host<Dev::execution_space>) GTEST_SKIP() << "the register cap is compiled for device back-ends only";
  check_register_cap(true, 97);
}

// The constant-memory launch (CUDA builds): the fused kernels launched by parallel_for_const_slots (their
// functor in constant-memory slots of their own, used in turn) give bit for bit the results of Kokkos's launch, over
// several calls (both slots of each kernel, back to back without a fence between the launches of one call), for the
// forward and the capped adjoints at teams of 32 and 64.
TEST(Interaction, ConstSlotLaunch) {
  using Kern = InteractionKernel<float, Dev, 2, true>;
  using FwdTag = Kern::ForwardT<true>;
  if (!const_launch_available) GTEST_SKIP() << "our own constant-memory launch exists in CUDA builds only";
  // the forward as MD launches it (capped: LaunchBounds<128, 4>) has its slot kernels
  ASSERT_TRUE((const_slots_compiled<Kern, CappedPolicy<Kern, FwdTag>>));
  EXPECT_NE((const_slot_kernels<Kern, CappedPolicy<Kern, FwdTag>>().first), nullptr);
  constexpr int L = 2;  // split_case's C = 8
  const auto [M, S, E] = split_case(99);
  for (int ts : {32, 64})  // the teams TensorCoreRadial and AdjointRegisterCap run on the H200 with this C
    for (RadialMode mode : {kTeamGemm, kTensorCore}) {
      Launch plain(ts, mode, 0);
      plain.tuning.const_slot_launch = false;  // Kokkos's launch
      const auto ref = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, plain);
      Launch own = plain;
      own.tuning.const_slot_launch = true;
      for (int rep = 0; rep < 3; ++rep) {
        SCOPED_TRACE(own.str() + " rep " + std::to_string(rep));
        expect_bitwise_equal(ref, run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, own));
      }
    }
  Launch own(64, kTensorCore, 0);  // (the production launch: through the slots)
  check_against<L>(M, S, E, own);  // and against the reference and finite differences
}

namespace {
// A kernel of parallel_for_const_slots's kind (team policy, explicit team size) that writes value + team index.
struct SlotProbe {
  Kokkos::View<long*, Dev> out;
  long value = 0;  // (no padding in the functor: its bytes are all members)
  KOKKOS_INLINE_FUNCTION void operator()(const Kokkos::TeamPolicy<Dev::execution_space>::member_type& m) const {
    if (m.team_rank() == 0) out(m.league_rank()) = value + m.league_rank();
  }
};
}  // namespace

// parallel_for_const_slots copies a driver into its slot only where the slot does not hold the same functor bytes and
// launch: the same functor launched again and again (on default_instance) costs one copy per slot, a changed one a
// copy into each slot as its turn comes, and every launch computes with the functor it was given.
TEST(Interaction, ConstSlotCopies) {
  using Exec = Dev::execution_space;
  if (!const_launch_available) GTEST_SKIP() << "our own constant-memory launch exists in CUDA builds only";
  constexpr int teams = 5;
  Kokkos::View<long*, Dev> out("slot_probe_out", teams);
  auto launch = [&](long value, long expected_copies) {
    SCOPED_TRACE("value " + std::to_string(value));
    const long before = const_slot_copies();
    parallel_for_const_slots("slot_probe", Kokkos::TeamPolicy<Exec>(default_instance<Exec>(), teams, 32),
                             SlotProbe{out, value});
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
    for (int n = 0; n < teams; ++n) EXPECT_EQ(h(n), value + n);
    EXPECT_EQ(const_slot_copies() - before, expected_copies);
  };
  launch(1, 1);  // slot 0
  launch(1, 1);  // slot 1
  launch(1, 0);  // slot 0 holds these bytes
  launch(1, 0);
  launch(2, 1);  // slot 0 changes
  launch(2, 1);  // slot 1 still holds value 1
  launch(2, 0);
  launch(1, 1);
  Kokkos::View<long*, Dev> other("slot_probe_other", teams);  // another View: other bytes
  out = other;
  launch(1, 1);
  launch(1, 1);
}

// The fused forward and adjoints of a layer, called again with the same inputs and outputs (an MD step between
// re-neighbourings), copy no driver into their constant-memory slots once both slots hold it: their policies are on
// instances that live across calls (default_instance), whatever the host allocates between the calls. The results
// stay bit for bit those of the first call.
TEST(Interaction, FusedLaunchesReuseDrivers) {
  if (!const_launch_available) GTEST_SKIP() << "our own constant-memory launch exists in CUDA builds only";
  constexpr int L = 2;  // split_case's C = 8
  const auto [M, S, E] = split_case(101);
  const int K = num_sh(L), C = M.C;
  std::vector<float> xt(S.x.begin(), S.x.end());
  const auto g = make_graph<float, Dev>(xt, S.n_recv, S.recv, S.send);
  auto prm = make_layer_params<float, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg, M.Wq,
                                              M.Wk);
  prm.radial_mode = kTensorCore;  // as MD runs it: capped, through the slots
  ASSERT_TRUE(impl::launch_tuning().const_slot_launch);
  auto upload = [&](const std::vector<double>& src, int n, const char* name) {
    View3<float> v(std::string(name), n, K, C);
    auto hm = Kokkos::create_mirror_view(v);
    for (size_t i = 0; i < hm.size(); ++i) hm.data()[i] = float(src[i]);
    Kokkos::deep_copy(v, hm);
    return v;
  };
  const auto h = upload(S.h, S.n_total, "h"), gm = upload(E.gm, S.n_recv, "gm"), go = upload(E.go, S.n_recv, "go");
  KernelRun<float> out;
  out.m = View3<float>("m", S.n_recv, K, C);
  out.o = View3<float>("o", S.n_recv, K, C);
  out.gh = View3<float>("gh", S.n_total, K, C);
  out.f = decltype(out.f)("f", S.n_total, 3);
  out.vatom = decltype(out.f)("vatom", S.n_total, 6);
  InteractionWork<float, Dev> work;
  std::vector<Dev::execution_space> held;  // instances made between the calls take the freed heap blocks
  std::vector<float> first_m;
  for (int call = 0; call < 4; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    const long before = const_slot_copies();
    fused_forward<float, L, RuntimeDims>(kGeneralLayer, g, prm, h, out, work, 64);
    fused_backward<float, L, RuntimeDims>(kGeneralLayer, g, prm, h, gm, go, out, work, 64);
    Kokkos::fence();
    // the first two calls fill both slots of the forward, the pair adjoint and the sender adjoint
    EXPECT_EQ(const_slot_copies() - before, call < 2 ? 3 : 0);
    const auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out.m);
    std::vector<float> mv(m.data(), m.data() + m.size());
    if (call == 0) first_m = mv;
    EXPECT_EQ(mv, first_m);
    held.emplace_back();
  }
}

// The fused-kernel functors have no padding bytes: parallel_for_const_slots compares a launch's functor with the one
// in the slot byte for byte, and padding bytes are whatever the caller's stack held. A default-constructed functor
// writes every byte it owns, so its bytes built over 0x00 and over 0xff differ exactly at padding.
template <class Kern>
int functor_padding_bytes() {
  alignas(Kern) unsigned char zeros[sizeof(Kern)], ones[sizeof(Kern)];
  std::memset(zeros, 0x00, sizeof(Kern));
  std::memset(ones, 0xff, sizeof(Kern));
  auto* a = new (zeros) Kern;
  auto* b = new (ones) Kern;
  int differing = 0;
  for (size_t i = 0; i < sizeof(Kern); ++i) differing += zeros[i] != ones[i];
  a->~Kern();
  b->~Kern();
  return differing;
}

TEST(Interaction, KernelHasNoPadding) {
  EXPECT_EQ((functor_padding_bytes<InteractionKernel<float, Dev, 2, true, kMaxDk, kGeneralLayer, BundledDims>>()), 0);
  EXPECT_EQ((functor_padding_bytes<InteractionKernel<float, Dev, 2, true, 8, kEmbeddingInput, BundledDims>>()), 0);
  EXPECT_EQ((functor_padding_bytes<InteractionKernel<float, Dev, 3, false, kMaxDk, kScalarOutput>>()), 0);
  EXPECT_EQ((functor_padding_bytes<InteractionKernel<double, Dev, 2, true>>()), 0);
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
  random_upstream(E, S, L, C, rng);
  auto prm = make_layer_params<float, Dev, L>(C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg, M.Wq,
                                              M.Wk);
  for (RadialMode mode : {kTeamGemm, kTensorCore})
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

// LayerParams::prepare_span: items of the prepare pass that take several hidden units of an edge (each forming the
// edge's basis once for them, and the heads spread over the item groups) give bit for bit the results of one hidden
// unit per item, on the GPU paths (teams of C and 4 C) in radial modes 0-2, chunks 2-8, forward and adjoints, also
// the automatic span (0; auto_prepare_span's choices are checked below); spans that do not divide H are rejected at
// the launch.
TEST(Interaction, PrepareSpan) {
  const int C = 8, tmax = team_size_max();
  if (tmax < 4 * C) GTEST_SKIP() << "team_size_max " << tmax << " < 4 C";
  constexpr int L = 2;
  std::mt19937 rng(101);
  const Model M = make_model(L, rng, 3, 16);  // H = 16 hidden units, A = 2 heads
  const System S = make_system(L, C, rng, 4, 90, 3.0);
  Expected E;  // upstream gradients only (no reference: the comparison is with prepare_span = 1)
  random_upstream(E, S, L, C, rng);
  for (RadialMode mode : {kPerEdge, kTeamGemm, kTensorCore})
    for (int ts : {C, 4 * C})
      for (int chunk : mode == kPerEdge ? std::vector<int>{0} : std::vector<int>{2, 4, 8}) {
        Launch one(ts, mode, chunk);
        one.prepare_span = 1;
        const auto ref = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, one);
        for (int span : {0, 2, 4, 8, 16}) {  // 0: automatic (the default)
          Launch b = one;
          b.prepare_span = span;
          SCOPED_TRACE(b.str());
          const auto run = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, b);
          expect_bitwise_equal(ref, run);
        }
      }
  // the automatic span: the smallest divisor of H with one round of items, H where none has
  EXPECT_EQ(auto_prepare_span(32, 56, 128), 16);
  EXPECT_EQ(auto_prepare_span(32, 56, 64), 32);
  EXPECT_EQ(auto_prepare_span(32, 8, 64), 4);
  EXPECT_EQ(auto_prepare_span(32, 2, 64), 1);
  EXPECT_EQ(auto_prepare_span(12, 10, 32), 4);  // 12 / 3 = 4 items per edge would need 40 threads
  EXPECT_EQ(auto_prepare_span(16, 90, 32), 16);
  EXPECT_EQ(auto_prepare_span(1, 90, 32), 1);
  // ... against the definition, searched from span 1 (and, H = 32, the compile-time version)
  auto by_definition = [](int HH, int nf, int ts) {
    int span = 1;
    while (span < HH && (HH % span != 0 || nf * (HH / span) > ts)) ++span;
    return span;
  };
  for (int ts : {1, 32, 64, 96, 128, 256})
    for (int nf = 1; nf <= kMaxBasisChunk; ++nf) {
      for (int HH : {1, 6, 12, 16, 32, 40, 48, 64})
        EXPECT_EQ(auto_prepare_span(HH, nf, ts), by_definition(HH, nf, ts)) << HH << " " << nf << " " << ts;
      EXPECT_EQ(auto_prepare_span_fixed<32>(nf, ts), by_definition(32, nf, ts)) << nf << " " << ts;
      EXPECT_EQ(auto_prepare_span_fixed<40>(nf, ts), by_definition(40, nf, ts)) << nf << " " << ts;
    }
  Launch bad(4 * C, kTensorCore, 4);
  bad.prepare_span = 3;  // does not divide H = 16
  EXPECT_THROW((run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, bad)), std::invalid_argument);
}

// InteractionWork::f_send / vatom_send: the sender adjoint accumulates its forces and virial there (it must: else
// the pair and sender adjoints would race on f when they run side by side, as they do on CUDA), and the sums are bit
// for bit those of one shared accumulator, with which the adjoints run one after the other (each array gets one
// addend per atom here, from zero); through both launches (on CUDA the adjoints overlap only through the
// constant-memory slots), for the automatic team and the GPU / host paths, radial modes 0-2; the sums also against
// the reference and finite differences.
TEST(Interaction, ConcurrentAdjoints) {
  const int C = 8;
  constexpr int L = 2;
  const auto [M, S, E] = split_case(98);
  std::vector<int> teams = {0};  // automatic: one thread per team on host back-ends
  for (int ts : {C, 4 * C})
    if (team_size_max() >= ts) teams.push_back(ts);
  for (RadialMode mode : {kPerEdge, kTeamGemm, kTensorCore})
    for (int ts : teams) {
      Launch plain(ts, mode, 0);  // one accumulator: the adjoints one after the other
      plain.tuning.const_slot_launch = false;
      const auto ref = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, plain);
      for (bool slots : {false, true}) {  // (const slots: CUDA only; with them the two adjoints overlap there)
        Launch ln = plain;
        ln.send_accumulators = true;
        ln.tuning.const_slot_launch = slots;
        SCOPED_TRACE(ln.str());
        const auto run = run_kernels<float, L>(M, S, S.x, S.h, E.gm, E.go, true, ln);
        EXPECT_GT(max_diff(run.f_send, decltype(run.f_send)("zero", S.n_total, 3)).first, 0.0);
        EXPECT_GT(max_diff(run.vatom_send, decltype(run.f_send)("zero", S.n_total, 6)).first, 0.0);
        expect_bitwise_equal(ref, run);
      }
    }
  Launch ln(0, kTensorCore, 0);
  ln.send_accumulators = true;
  check_against<L>(M, S, E, ln);
}

// The wave-aware edge split (LayerParams::wave_teams) on the H200's 132 SMs for the water model's capped forward
// (128 registers, teams of 32 S): 648 atoms fill 4 x 132 = 528 slots of 128 threads in two waves, 5 x 132 = 660 of 96
// in one, so S = 3; from a few thousand atoms on the waves cost alike and S stays 4.
TEST(Interaction, WaveAwareSplit) {
  const SmLimits h200;
  auto slots = [&](int S) { return h200.sms * blocks_per_sm_for(h200, 128, 32 * S, 20000); };
  EXPECT_EQ(slots(4), 528);
  EXPECT_EQ(slots(3), 660);
  EXPECT_EQ(wave_aware_split(648, 4, slots), 3);
  EXPECT_EQ(wave_aware_split(500, 4, slots), 4);     // one wave either way
  EXPECT_EQ(wave_aware_split(10368, 4, slots), 4);  // 20 / 4 vs 16 / 3 vs 10 / 2: a tie keeps the larger S
  EXPECT_EQ(wave_aware_split(1000, 4, slots), 4);   // 2 / 4 vs 2 / 3
  EXPECT_EQ(wave_aware_split(1100, 4, slots), 3);   // 3 / 4 vs 2 / 3 vs 2 / 2 (1,056 slots of 64)
  // impossible splits are skipped; none possible keeps S_max
  EXPECT_EQ(wave_aware_split(648, 4, [&](int S) { return S == 3 ? 0 : slots(S); }), 4);
  EXPECT_EQ(wave_aware_split(648, 4, [](int) { return 0; }), 4);
}

// kOneSlotLessTeam, the model's MD launch below model_detail::kFewAtoms atoms: on GPUs the automatic launch with one
// edge slot less (here C = 8: 120 threads instead of 128), its radial and basis chunks, tensor-core use and scratch
// those of that explicit team size, in radial modes 0-2, forward and adjoint; on host back-ends the automatic launch.
TEST(Interaction, OneSlotLessTeam) {
  constexpr int L = 2;
  std::mt19937 rng(83);
  const Model M = make_model(L, rng, 3, 16);
  auto prm = make_layer_params<float, Dev, L>(M.C, M.NB, M.H, M.A, M.dk, M.rc, M.avg, M.W1, M.b1, M.W2, M.Wg, M.Wq,
                                              M.Wk);
  const bool host = runs_on_host<Dev::execution_space>;
  for (RadialMode mode : {kPerEdge, kTeamGemm, kTensorCore}) {
    SCOPED_TRACE("radial mode " + std::to_string(int(mode)));
    prm.radial_mode = mode;
    const auto automatic = interaction_launch<float, Dev, L, true>(prm, 0);
    const auto less = interaction_launch<float, Dev, L, true>(prm, kOneSlotLessTeam);
    for (const auto& [a, b] :
         {std::pair{automatic.team_fwd, less.team_fwd}, std::pair{automatic.team_adj, less.team_adj}})
      EXPECT_EQ(b, host || a == M.C ? a : a - M.C);
    const auto fwd = interaction_launch<float, Dev, L, true>(prm, less.team_fwd);
    const auto adj = interaction_launch<float, Dev, L, true>(prm, less.team_adj);
    EXPECT_EQ(less.chunk_fwd, fwd.chunk_fwd);
    EXPECT_EQ(less.basis_fwd, fwd.basis_fwd);
    EXPECT_EQ(less.tc_fwd, fwd.tc_fwd);
    EXPECT_EQ(less.bytes_fwd, fwd.bytes_fwd);
    EXPECT_EQ(less.chunk_adj, adj.chunk_adj);
    EXPECT_EQ(less.basis_adj, adj.basis_adj);
    EXPECT_EQ(less.tc_adj, adj.tc_adj);
    EXPECT_EQ(less.bytes_adj, adj.bytes_adj);
  }
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
  // the search: the largest basis chunk (in steps of the radial chunk) that keeps the radial chunk's blocks
  auto blocks = [](int basis_edges) { return basis_edges <= 48 ? 6 : 5; };
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
  const auto split_chunk = gpu_launch<Kern>(C, H, 8, adjoint, true, 0, 1024, limit);
  const size_t bytes = Kern::scratch_bytes(C, H, 8, adjoint, split_chunk.first, split_chunk.second);
  std::printf("%s C=%d L=%d H=%d %s: S=%d chunk=%d scratch %zu B (mode 0: %zu B)\n",
              sizeof(T) == 4 ? "float" : "double", C, L, H, adjoint ? "adjoint" : "forward", split_chunk.first,
              split_chunk.second, bytes,
              Kern::scratch_bytes(C, H, 8, adjoint, split_chunk.first));
  EXPECT_EQ(split_chunk.first, S);
  EXPECT_EQ(split_chunk.second, chunk);
  EXPECT_LE(bytes, limit);
  EXPECT_EQ(gpu_launch<Kern>(C, H, 8, adjoint, false, 0, 1024, limit).second, 0);
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
  EXPECT_EQ(radial_chunk_for<Kern>(32, 32, 8, true, 4, 40960, 8), 0);
}

// The radial MMA's lane layout (radial modes 2 and 4, run on GPUs only): with B's columns as mma_column_edge assigns
// them, the D fragments that each lane holds (MmaTile's layout, D = A B) and store_mma_tile give w = u A s and
// dw = du A s + u A ds/dd for every column and edge below nf, and nothing for the others. Checked here on the host by
// forming D from the layout; the GPU tests check it against the hardware.
TEST(Interaction, MmaTileStoreLayout) {
  constexpr int KD = 8, cols = MmaTile::M, ostride = 2 * cols;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uni(-1, 1);
  for (const bool adjoint : {false, true}) {
    const int edges = mma_edges(adjoint), nf = edges - 1, tile = 1;  // the chain's last edge past nf
    std::vector<double> A(cols * KD), s(KD * edges), sd(KD * edges), u(edges), du(edges);
    for (auto* v : {&A, &s, &sd, &u, &du})
      for (auto& x : *v) x = uni(rng);
    auto column = [&](int n, int k) {  // B(k, n)
      const int e = mma_column_edge(adjoint, n);
      return (mma_column_is_sd(adjoint, n) ? sd : s)[k * edges + e];
    };
    auto d = [&](int row, int n) {
      double v = 0;
      for (int k = 0; k < KD; ++k) v += A[row * KD + k] * column(n, k);
      return v;
    };
    const float untouched = -1234.f;
    std::vector<float> w(edges * ostride, untouched), dw(edges * ostride, untouched);
    for (int lane = 0; lane < 32; ++lane) {
      float acc[4], ul[2] = {0.f, 0.f}, dul[2] = {0.f, 0.f};
      for (int r = 0; r < 4; ++r) acc[r] = float(d(MmaTile::c_row(lane, r), MmaTile::c_col(lane, r)));
      for (int x = 0; x < (adjoint ? 1 : 2); ++x) {
        ul[x] = float(u[mma_lane_edge(adjoint, lane, x)]);
        dul[x] = float(du[mma_lane_edge(adjoint, lane, x)]);
      }
      if (adjoint)
        store_mma_tile<true>(acc, lane, tile, 0, nf, ul, dul, w.data(), dw.data(), ostride);
      else
        store_mma_tile<false>(acc, lane, tile, 0, nf, ul, dul, w.data(), dw.data(), ostride);
    }
    for (int e = 0; e < edges; ++e)
      for (int col = 0; col < ostride; ++col) {
        const bool written = e < nf && col >= tile * cols;
        double ws = 0, wsd = 0;
        for (int k = 0; k < KD && written; ++k) {
          ws += A[(col - tile * cols) * KD + k] * s[k * edges + e];
          wsd += A[(col - tile * cols) * KD + k] * sd[k * edges + e];
        }
        const double want_w = written ? u[e] * ws : untouched;
        const double want_dw = written && adjoint ? du[e] * ws + u[e] * wsd : untouched;
        EXPECT_NEAR(w[e * ostride + col], want_w, 1e-5) << "adjoint " << adjoint << " edge " << e << " col " << col;
        EXPECT_NEAR(dw[e * ostride + col], want_dw, 1e-5) << "adjoint " << adjoint << " edge " << e << " col " << col;
      }
  }
}

// Shared-memory banks of the radial MMA's scratch accesses (32 banks of 4 bytes) with the row strides of the kernels'
// layout (radial_out_stride, radial_hidden_stride, and ds/dd's place after s): every warp-wide tile store into w and
// dw (through store_mma_tile) and every f16 B-fragment load of s and ds/dd (radial mode 4, the GPU default) touches
// each bank at most once; the 3xTF32 loads of mode 2 at most twice. Before the padding, strides that are multiples of
// 32 made the stores 4-way and the adjoint's loads 8-way conflicts.
int most_addresses_per_bank(const std::vector<long>& addresses) {
  std::map<long, std::set<long>> banks;
  for (long a : addresses) banks[a % 32].insert(a);
  size_t most = 0;
  for (const auto& b : banks) most = std::max(most, b.second.size());
  return int(most);
}

TEST(Interaction, RadialScratchBanks) {
  using Kern = InteractionKernel<float, Dev, 2, true>;
  for (const int cols : {16 * 1, 16 * 2, 16 * 6, 16 * 12, 32 * 6, 32 * 22, 64 * 22})  // NW C
    for (const bool adjoint : {false, true}) {
      const int os = radial_out_stride(cols), t0 = mma_edges(adjoint);
      // one store instruction per register r (forward) or per r = 0, 2 and w / dw (adjoint): acc values mark them
      for (int tile = 0; tile < 2 && tile < cols / MmaTile::M; ++tile)
        for (int r = 0; r < 4; ++r) {
          if (adjoint && r % 2) continue;
          for (const bool into_dw : {false, true}) {
            if (into_dw && !adjoint) continue;
            std::vector<float> w(size_t(2 * t0) * os, 0.f), dw(w.size(), 0.f);
            std::vector<long> addresses;
            for (int lane = 0; lane < 32; ++lane) {
              const float acc[4] = {1.f, 10.f, 3.f, 30.f}, u[2] = {1.f, 1.f}, du[2] = {0.f, 0.f};
              std::fill(w.begin(), w.end(), 0.f), std::fill(dw.begin(), dw.end(), 0.f);
              if (adjoint)
                store_mma_tile<true>(acc, lane, tile, t0, 2 * t0, u, du, w.data(), dw.data(), os);
              else
                store_mma_tile<false>(acc, lane, tile, t0, 2 * t0, u, du, w.data(), dw.data(), os);
              const float mark = into_dw ? acc[r + 1] : acc[r];
              const std::vector<float>& out = into_dw ? dw : w;
              for (size_t a = 0; a < out.size(); ++a)
                if (out[a] == mark) addresses.push_back(long(a));
            }
            ASSERT_EQ(addresses.size(), 32u);
            EXPECT_EQ(most_addresses_per_bank(addresses), 1)
                << "store, NW C " << cols << " adjoint " << adjoint << " r " << r << " dw " << into_dw;
          }
        }
    }
  for (const int H : {16, 32, 64})
    for (const bool adjoint : {false, true})
      for (int basis = mma_edges(adjoint); basis <= kMaxBasisChunk; basis += mma_edges(adjoint)) {
        const int radial = mma_edges(adjoint) * 2 <= basis ? mma_edges(adjoint) * 2 : basis;
        const auto lo = Kern::layout(32, H, 8, adjoint ? kPairScratch : kForwardScratch, 3, radial, true, basis);
        const long bs = radial_hidden_stride(basis), sd = long(lo.sd - lo.s) / long(sizeof(float));
        ASSERT_EQ(sd % 4, 0);
        for (int t0 = 0; t0 + mma_edges(adjoint) <= basis; t0 += mma_edges(adjoint))
          for (const int tf32 : {0, 1})
            for (int r = 0; r < 2; ++r)
              for (int h = 0; h < 2 - tf32; ++h) {  // f16: the two k of a register are two loads
                std::vector<long> addresses;
                for (int lane = 0; lane < 32; ++lane) {
                  const int n = MmaTile::b_col(lane), e = t0 + mma_column_edge(adjoint, n);
                  const int k = (tf32 ? MmaTile::b_row(lane, r) : F16Tile::b_row(lane, r)) + h;
                  addresses.push_back((mma_column_is_sd(adjoint, n) ? sd : 0) + k * bs + e);
                }
                EXPECT_LE(most_addresses_per_bank(addresses), tf32 ? 2 : 1)
                    << "B load, H " << H << " basis " << basis << " adjoint " << adjoint << " tf32 " << tf32;
              }
      }
}

// The bundled potentials' fused kernels (dimensions compiled in) take 64-edge basis chunks, all of a water atom's
// neighbours in one prepare pass, within Kokkos 3.4's 40 KB of team scratch at the 648-atom launch (teams of 96
// threads, S = 3): their per-(edge, head) arrays have the 4 heads' columns, not the 16 of the run-time bound.
TEST(Interaction, BundledScratchTakesWholeChunks) {
  constexpr size_t kokkos_limit = 40960;
  using Bundled = InteractionKernel<float, Dev, kBundledL, true, kSmallDk, kScalarOutput, BundledDims>;
  using Runtime = InteractionKernel<float, Dev, kBundledL, true, kSmallDk, kScalarOutput>;
  for (const int radial : {4, 8})
    for (const int kind : {kForwardScratch, kPairScratch}) {
      const size_t bundled = Bundled::scratch_bytes(32, 32, 8, kind, 3, radial, true, kMaxBasisChunk);
      EXPECT_LE(bundled, kokkos_limit) << "radial chunk " << radial << " layout " << kind;
      EXPECT_LT(bundled, Runtime::scratch_bytes(32, 32, 8, kind, 3, radial, true, kMaxBasisChunk));
    }
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

// LayerParams::radial_mode must be one of RadialMode's values (0, 1, 2 or 4); others, converted from an int, stop
// the launch.
TEST(Interaction, RadialModeValidation) {
  constexpr int L = 1;
  std::mt19937 rng(83);
  const Model M = make_model(L, rng);
  const System S = make_system(L, M.C, rng, 2, 4, 3.0);
  for (int mode : {-1, 3, 5}) {
    SCOPED_TRACE("radial mode " + std::to_string(mode));
    const Launch bad(0, static_cast<RadialMode>(mode));
    EXPECT_THROW((run_kernels<double, L>(M, S, S.x, S.h, {}, {}, false, bad)), std::invalid_argument);
  }
}

// A forward told that q and k were given (InteractionWork::qk_given, the model's per-species q and k of layer 0)
// in work arrays it must still grow stops with a logic error instead of running on unset q and k.
TEST(Interaction, GivenQKNeedsSizedWork) {
  constexpr int L = 1;
  std::mt19937 rng(82);
  const Model M = make_model(L, rng);
  const System S = make_system(L, M.C, rng, 2, 4, 3.0);
  Launch ln;
  ln.qk_given = true;
  EXPECT_THROW((run_kernels<double, L>(M, S, S.x, S.h, {}, {}, false, ln)), std::logic_error);
}
