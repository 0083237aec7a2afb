// Fused convolution with per-edge weights given as input: the operation that the kernel benchmark compares with e3nn
// (kernels_bench.cpp, e3nn_bench.py). A benchmark op built from the kernel library's SH and tensor products, not part
// of the library: MD runs the fused interaction (kernels/interaction.hpp).
//   out_i = scale * sum_{e = (i <- j)} TP_ALL(h_j, w_e)
// over the path set num_paths(L, ALL) (ALL = true: all 34 triangle-allowed paths of 0e+1o+2e+3o x SH; outputs
// of both parities, slot layout out_index() in common.hpp: natural parity [0, K), other parity [K, 2K)).
// alpha_p = sqrt((2 l3 + 1) / n(l3, parity)) equals e3nn 0.6's TensorProduct normalisation for a channel-wise
// "uvu" product with irrep_normalization="component", path_normalization="element".
//
// Layouts (LayoutRight): h (n_total, K, C); w (E, P, C) with E in receiver-grouped edge order of Graph;
// out (n_recv, KO, C), KO = num_out(L, ALL); adjoint: gout (n_recv, KO, C) -> gh (n_total, K, C) accumulated,
// gw (E, P, C) written, f (n_total, 3) and vatom (n_total, 6) double accumulated. No atomics: one pass over the
// sender CSR writes gw, gathers gh and stores each edge's dE/dr summed over channels (edge_grad, 3 numbers per edge
// and warp: 0.3 % of the size of gw); a gather kernel turns those into both atoms' forces and virials.
// Call allocate_workspace() once g and C are set, before backward().
#pragma once
#include <stdexcept>

#include "kernels/graph.hpp"
#include "kernels/sh.hpp"
#include "kernels/tp.hpp"

namespace batmobile {
namespace kernels {

template <class T, class Device, int L, bool ALL>
struct ConvEdgeWeights {
  static constexpr int K = num_sh(L);
  static constexpr int KO = num_out(L, ALL);
  static constexpr int P = num_paths(L, ALL);
  static constexpr int NV = 9;
  using exec = typename Device::execution_space;
  using V3 = Kokkos::View<T***, Kokkos::LayoutRight, Device>;
  using CV3 = Kokkos::View<const T***, Kokkos::LayoutRight, Device>;
  using D2 = Kokkos::View<double**, Kokkos::LayoutRight, Device>;
  using member = typename Kokkos::TeamPolicy<exec>::member_type;
  struct Forward {};
  struct SendAdj {};
  struct SendAdjStaged {};
  struct Gather {};

  Graph<T, Device> g;
  CV3 h, w, gout;
  V3 out, gh, gw;
  D2 f, vatom;
  V3 edge_grad;  // adjoint workspace, see allocate_workspace()
  T scale = 1;
  int C = 0;
  // 2 or 3 = SendAdjStaged (see there) with LaunchBounds<128, staged> where its scratch fits; 0 = SendAdj.
  // Default 2 on device back-ends, where it was the fastest on the H200 (unstaged took nearly twice as long); host
  // back-ends (one thread per team) gain nothing from staging.
  static constexpr int default_staged = runs_on_host<exec> ? 0 : 2;
  int staged = default_staged;

  KOKKOS_INLINE_FUNCTION void edge_vec(int i, int j, T* r) const {
    for (int a = 0; a < 3; ++a) r[a] = g.x(j, a) - g.x(i, a);
  }

  KOKKOS_INLINE_FUNCTION void forward_channel(int i, int c) const {
    const int e0 = g.recv_offsets(i), e1 = g.recv_offsets(i + 1);
    T acc[KO];
    for (int k = 0; k < KO; ++k) acc[k] = T(0);
    for (int e = e0; e < e1; ++e) {
      const int j = g.edge_sender(e);
      T r[3], Y[K], hj[K];
      edge_vec(i, j, r);
      sh<L, T>(r, Y);
      for (int k = 0; k < K; ++k) hj[k] = h(j, k, c);
      // weights read path by path where used (all 34 preloaded took 188 registers, this 128: 1.63 -> 1.33 ms
      // at 10,000 x 30 x 64 on the H200)
      tp_fwd<L, ALL>(hj, Y, Strided<T>{&w(e, 0, c), C}, T(1), acc);
    }
    for (int k = 0; k < KO; ++k) out(i, k, c) = scale * acc[k];
  }

  // One pass over the sender CSR: for sender j and each of its edges e = (i <- j), with Y = Y(r_ij),
  //   dE/dw_e   = alpha * CG(h_j, Y) . gout_i     (written to gw, each path exactly once)
  //   dE/dh_j  += w_e * CG^T(gout_i, Y)           (registers across the edges, one store per atom)
  //   dE/dr_ij  = sh_vjp(w_e * CG^T(h_j, gout_i)) (summed over channels into edge_grad)
  // The receiver-grouped pass this replaces computed the dE/dY part a second time (and read w a second time) only
  // to deliver the receiver's force; now that half comes from edge_grad in the small gather kernel below.
  // One edge for channel c: we, go read w_e and gout_i (global memory, or the staged copies in team scratch).
  KOKKOS_INLINE_FUNCTION void adjoint_edge(int e, int i, int j, int c, bool active, const Strided<T>& we,
                                           const Strided<T>& go, const T* hj, T* ghj, T (&gr)[3]) const {
    gr[0] = gr[1] = gr[2] = T(0);
    if (!active) return;
    T r[3], Y[K], gY[K];
    edge_vec(i, j, r);
    sh<L, T>(r, Y);
    for (int k = 0; k < K; ++k) gY[k] = T(0);
    // w and gout are read path by path where used (Strided), gw written path by path: with all 34 weights and 32
    // upstream values live at once the adjoint ran out of registers and spilled.
    tp_adjoint<L, ALL, true, false, T>(hj, Y, we, nullptr, go, nullptr, scale, T(0), ghj, gY,
                                       StridedWrite<T>{&gw(e, 0, c), C}, nullptr);
    sh_vjp<L, T>(r, gY, gr);
  }

  // The channel sum of an edge's dE/dr into its edge_grad slot (host back-ends: the later channels add to it).
  KOKKOS_INLINE_FUNCTION void store_edge_grad(int e, int rank, int c0, T (&gr)[3]) const {
    const int slot = channel_sum<exec>(rank, gr);
    if (slot >= 0)
      for (int a = 0; a < 3; ++a) {
        if (c0 == 0)
          edge_grad(e, slot, a) = gr[a];
        else
          edge_grad(e, slot, a) += gr[a];
      }
  }

  // Where the pass reads edge e's rows w_e and gout_i: begin() before an atom's edges (again for each channel
  // round of a host thread), rows(s, e, i, c) the two rows' channel-c columns for edge s, done() after that edge.
  // Global memory here; StagedRows below.
  struct GlobalRows {
    const ConvEdgeWeights* k;
    KOKKOS_INLINE_FUNCTION void begin() const {}
    KOKKOS_INLINE_FUNCTION Kokkos::pair<Strided<T>, Strided<T>> rows(int, int e, int i, int c) const {
      return {Strided<T>{&k->w(e, 0, c), k->C}, Strided<T>{&k->gout(i, 0, c), k->C}};
    }
    KOKKOS_INLINE_FUNCTION void done() const {}
  };

  template <class Rows>
  KOKKOS_INLINE_FUNCTION void send_adjoint(int j, int rank, int ts, const Rows& src) const {
    const int s0 = g.send_offsets(j), s1 = g.send_offsets(j + 1);
    // host back-ends: one thread loops over the channels (and adds into its edges' slot 0 after the first)
    for (int c0 = 0; c0 < C; c0 += ts) {
      const int c = c0 + rank;
      const bool active = c < C;
      T hj[K], ghj[K];
      for (int k = 0; k < K; ++k) {
        hj[k] = active ? h(j, k, c) : T(0);
        ghj[k] = T(0);
      }
      src.begin();
      for (int s = s0; s < s1; ++s) {
        const int e = g.send_edges(s), i = g.edge_receiver(e);
        const auto wg = src.rows(s, e, i, active ? c : 0);
        T gr[3];
        adjoint_edge(e, i, j, c, active, wg.first, wg.second, hj, ghj, gr);
        store_edge_grad(e, rank, c0, gr);
        src.done();
      }
      if (active)
        for (int k = 0; k < K; ++k) gh(j, k, c) += ghj[k];
    }
  }

  // The same pass with w_e and gout_i staged through team scratch, double-buffered: while edge s computes, the
  // team copies edge s + 1's rows (P x C and KO x C contiguous values) with cp.async on sm_80+ (plain copies
  // elsewhere). Ncu put two thirds of the unstaged kernel's time on waits for exactly these global loads; staged,
  // the pass is 1.8x faster on the H200 although it adds two team barriers per edge.
  KOKKOS_INLINE_FUNCTION static constexpr int staged_row_values(int C_) { return (P + KO) * C_; }
  KOKKOS_INLINE_FUNCTION static size_t staged_scratch_bytes(int C_) {
    return 2 * sizeof(T) * size_t(staged_row_values(C_)) + 16;
  }

  KOKKOS_INLINE_FUNCTION static void stage_copy(const member& team, T* dst, const T* src, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int per = 16 / int(sizeof(T));
    if ((reinterpret_cast<size_t>(src) | reinterpret_cast<size_t>(dst)) % 16 == 0 && n % per == 0) {
      for (int q = team.team_rank(); q < n / per; q += team.team_size()) {
        const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst + q * per));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src + q * per));
      }
      asm volatile("cp.async.commit_group;\n" ::);
      return;
    }
#endif
    for (int q = team.team_rank(); q < n; q += team.team_size()) dst[q] = src[q];
  }
  // Waits for this thread's copies but the `pending` most recent groups; the team barrier that follows makes every
  // thread's copies visible.
  KOKKOS_INLINE_FUNCTION static void stage_wait(bool one_pending) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (one_pending)
      asm volatile("cp.async.wait_group 1;\n" ::);
    else
      asm volatile("cp.async.wait_group 0;\n" ::);
#endif
    (void)one_pending;
  }

  // Double buffer: the stage of edge s + 1 is issued before edge s is waited for; slot (s - s0) % 2 holds edge s.
  struct StagedRows {
    const ConvEdgeWeights* k;
    const member* team;
    T* buf;
    int nv;      // staged_row_values(C)
    int s0, s1;  // the atom's sender-CSR range
    KOKKOS_INLINE_FUNCTION void stage(int s, int slot) const {
      const int e = k->g.send_edges(s), i = k->g.edge_receiver(e);
      stage_copy(*team, buf + slot * nv, &k->w(e, 0, 0), P * k->C);
      stage_copy(*team, buf + slot * nv + P * k->C, &k->gout(i, 0, 0), KO * k->C);
    }
    KOKKOS_INLINE_FUNCTION void begin() const {
      if (s0 < s1) stage(s0, 0);
    }
    KOKKOS_INLINE_FUNCTION Kokkos::pair<Strided<T>, Strided<T>> rows(int s, int, int, int c) const {
      const int slot = (s - s0) & 1;
      const bool next = s + 1 < s1;
      if (next) stage(s + 1, slot ^ 1);
      stage_wait(next);
      team->team_barrier();
      const T* row = buf + slot * nv;
      return {Strided<T>{row + c, k->C}, Strided<T>{row + P * k->C + c, k->C}};
    }
    KOKKOS_INLINE_FUNCTION void done() const { team->team_barrier(); }  // slot reused by the stage of edge s + 2
  };

  KOKKOS_INLINE_FUNCTION void operator()(SendAdjStaged, const member& team) const {
    char* raw = static_cast<char*>(team.team_scratch(0).get_shmem_aligned(staged_scratch_bytes(C), 16));
    const int j = team.league_rank();
    const StagedRows src{this, &team, reinterpret_cast<T*>(raw), staged_row_values(C), g.send_offsets(j),
                         g.send_offsets(j + 1)};
    send_adjoint(j, team.team_rank(), team.team_size(), src);
  }

  // Flat range policies (thread t = atom * threads per atom + rank), not team policies: these kernels need no
  // scratch, and Kokkos gives every team-policy kernel a shared-memory carveout of its own choosing, which can
  // leave little L1 for the adjoint's register spills and gathered upstream rows.
  KOKKOS_INLINE_FUNCTION void operator()(Forward, const int t) const { forward_channel(t / C, t % C); }
  KOKKOS_INLINE_FUNCTION void operator()(SendAdj, const int t) const {
    const int ts = adjoint_threads();
    send_adjoint(t / ts, t % ts, ts, GlobalRows{this});
  }

  // Forces and per-atom virial from the channel-summed edge gradients: atom n gets +g_e from the edges it receives
  // and -g_e from those it sends, and half of each edge's virial either way.
  KOKKOS_INLINE_FUNCTION void operator()(Gather, const int n) const {
    double acc[NV] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    auto add = [&](int e, int i, int j, double sign) {
      T r[3], gr[3] = {T(0), T(0), T(0)};
      edge_vec(i, j, r);
      for (int slot = 0; slot < int(edge_grad.extent(1)); ++slot)
        for (int a = 0; a < 3; ++a) gr[a] += edge_grad(e, slot, a);
      for (int a = 0; a < 3; ++a) acc[a] += sign * gr[a];
      add_half_edge_virial(acc + 3, r, gr);
    };
    if (n < g.n_recv)
      for (int e = g.recv_offsets(n); e < g.recv_offsets(n + 1); ++e) add(e, n, g.edge_sender(e), 1.0);
    for (int s = g.send_offsets(n); s < g.send_offsets(n + 1); ++s) {
      const int e = g.send_edges(s);
      add(e, g.edge_receiver(e), n, -1.0);
    }
    for (int a = 0; a < 3; ++a) f(n, a) += acc[a];
    for (int v = 0; v < 6; ++v) vatom(n, v) += acc[3 + v];
  }

  // Threads per atom of the adjoint: GPUs one per channel, rounded up to whole warps (channel_sum shuffles within
  // warps, and warps never straddle two atoms); host back-ends one.
  KOKKOS_INLINE_FUNCTION int adjoint_threads() const { return runs_on_host<exec> ? 1 : (C + 31) / 32 * 32; }
  // edge_grad (E, slots, 3): the per-edge dE/dr partial sums, one slot per warp of an atom's threads.
  void allocate_workspace() {
    edge_grad = V3("conv_edge_grad", g.n_edges, channel_sum_slots<exec>(adjoint_threads()), 3);
  }

  // The staged adjoint runs if asked for and its double buffer fits the team scratch.
  bool staged_fits() const {
    using Pol = Kokkos::TeamPolicy<exec, SendAdjStaged>;
    if (staged != 0 && staged != 2 && staged != 3) throw std::invalid_argument("ConvEdgeWeights::staged: 0, 2 or 3");
    return staged != 0 && staged_scratch_bytes(C) <= size_t(Pol::scratch_size_max(0));
  }

  void forward() const {
    Kokkos::parallel_for("batmobile::conv_w_fwd", Kokkos::RangePolicy<exec, Forward>(0, g.n_recv * C), *this);
  }
  void backward() const {
    if (int(edge_grad.extent(0)) != g.n_edges ||
        int(edge_grad.extent(1)) != channel_sum_slots<exec>(adjoint_threads()))
      throw std::logic_error("ConvEdgeWeights::backward: call allocate_workspace() after setting g and C");
    auto launch_staged = [&](auto bounds) {
      using Staged = Kokkos::TeamPolicy<exec, SendAdjStaged, decltype(bounds)>;
      const auto scratch = Kokkos::PerTeam(staged_scratch_bytes(C));
      Kokkos::parallel_for("batmobile::conv_w_send_adj_staged",
                           Staged(g.n_total, adjoint_threads()).set_scratch_size(0, scratch), *this);
    };
    if (!staged_fits()) {
      // at most 168 registers (3 blocks of 128 threads per SM): 0 spills with ptxas sm_90, and at 10,000 x 30 x 64
      // on the H200 the fastest of the caps tried (none: 255 registers, 11.8 ms fwd+bwd; 168: 9.3; 128: 10.7)
      using Capped = Kokkos::RangePolicy<exec, SendAdj, Kokkos::LaunchBounds<128, 3>>;
      Kokkos::parallel_for("batmobile::conv_w_send_adj", Capped(0, g.n_total * adjoint_threads()), *this);
    } else if (staged == 2) {  // ptxas sm_90 (float, L = 3, all paths): 255 registers, 0 spills
      launch_staged(Kokkos::LaunchBounds<128, 2>());
    } else {
      launch_staged(Kokkos::LaunchBounds<128, 3>());  // 168 registers, 340 B of spills
    }
    Kokkos::parallel_for("batmobile::conv_w_gather", Kokkos::RangePolicy<exec, Gather>(0, g.n_total), *this);
  }
};

}  // namespace kernels
}  // namespace batmobile
