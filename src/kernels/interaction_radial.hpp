// Radial MLP outputs of the fused interaction kernels (interaction.hpp): w_p(d) = u(d) W2 . silu(W1 . B(d) + b1) of
// every channel and path, and dw_p/dd, from the hidden layer s = silu(W1 . B(d) + b1) that the team's prepare pass
// left in scratch (interaction_chunk.hpp).
//
//   radial_from_hidden   radial mode 0: one channel-thread computes its own outputs of one edge into registers
//                        (EdgeRadial).
//   radial_gemm          radial mode 1: the team computes the outputs of all chunk edges, a GEMM [n x H] x [H x NW C]
//                        into team scratch (w, dw of the chunk; channel-threads then read them, RadialColumn).
//   radial_mma           radial mode 2: that GEMM on tensor cores (3xTF32, tensor_core.hpp).
//   radial_mma_f16       radial mode 4 (precision mixed): that GEMM with f16 operands, f32 accumulation.
// Ch: the kernel's Chunk (views geo (edge, x y z d), s / sd (H, edge), w / dw (edge, NW C) in team scratch).
#pragma once
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

#include "common.hpp"
#include "tensor_core.hpp"

namespace batmobile {
namespace kernels {

// Per-edge radial quantities of one channel, computed in registers from the team-shared hidden layer.
template <class T, int P>
struct EdgeRadial {
  T w[P], wv[P], dw[P], dwv[P];  // weights and their d/dd (envelope included)
  T u, du;                        // envelope
};

// Radial mode 1: channel c's radial outputs of chunk edge t, read from the team's scratch where they are used
// ([p] -> out(t, (first + p) C + c), from row = &out(t, c)) instead of being copied into registers first. (The weight
// and value columns share one row pointer: four pointers made the run-time-dimension adjoints spill.)
template <class T>
struct RadialColumn {
  const T* row;
  int first, C;
  KOKKOS_INLINE_FUNCTION T operator[](int p) const { return row[(first + p) * C]; }
};

// w = u(d) * W2 . s, with s = silu(W1 . B(d) + b1) precomputed per edge (shared by the team) and
// sd = d s / d d; only this channel's output columns of W2 (read from W2t) are touched.
template <class T, int P, bool TWO, bool GRAD, class Params, class Row>
KOKKOS_INLINE_FUNCTION void radial_from_hidden(const Params& prm, int c, T d, const Row& s, const Row& sd,
                                               EdgeRadial<T, P>& R) {
  R.u = envelope(d, prm.r_c, &R.du);
  T raw[P], rawv[P], draw[P], drawv[P];
  for (int p = 0; p < P; ++p) raw[p] = rawv[p] = draw[p] = drawv[p] = T(0);
  const int PC = P * prm.C;
  for (int hh = 0; hh < prm.H; ++hh) {
    const T sv = s(hh);
    const T dv = GRAD ? sd(hh) : T(0);
    for (int p = 0; p < P; ++p) {
      const T t = prm.W2t(hh, p * prm.C + c);
      raw[p] += t * sv;
      if (GRAD) draw[p] += t * dv;
      if (TWO) {
        const T tv = prm.W2t(hh, PC + p * prm.C + c);
        rawv[p] += tv * sv;
        if (GRAD) drawv[p] += tv * dv;
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    R.w[p] = R.u * raw[p];
    R.wv[p] = R.u * rawv[p];
    R.dw[p] = R.du * raw[p] + R.u * draw[p];
    R.dwv[p] = R.du * rawv[p] + R.u * drawv[p];
  }
}

// Mode 1: edges per register block of radial_gemm (the chunk is a multiple of it).
KOKKOS_INLINE_FUNCTION constexpr int gemm_block(int chunk_edges) { return chunk_edges % 4 == 0 ? 4 : 2; }
// Mode 2: chunk edges per MMA chain of radial_mma: the 8 B columns hold 8 edges (forward) or s and ds/dd of 4
// (adjoint).
KOKKOS_INLINE_FUNCTION constexpr int mma_edges(bool adjoint) { return adjoint ? 4 : 8; }
// The chain edge of MMA column n (B's and D's; MmaTile and F16Tile share these columns). Lane l holds the D columns
// 2 (l % 4) and 2 (l % 4) + 1, in its registers r % 2 = 0 and 1. Adjoint: column n holds s (n even) or ds/dd (n odd)
// of edge n / 2, so that a lane holds both accumulators of one edge, and w and dw need no exchange between lanes.
// Forward: the lane's edges are l % 4 and l % 4 + 4, so that the lanes of one store write 4 consecutive edge rows, as
// the adjoint's do (rows padded to a stride of 8 or 24 modulo 32 banks would then spread each store over all banks).
KOKKOS_INLINE_FUNCTION constexpr int mma_column_edge(bool adjoint, int n) {
  return n / 2 + (adjoint ? 0 : 4 * (n % 2));
}
KOKKOS_INLINE_FUNCTION constexpr bool mma_column_is_sd(bool adjoint, int n) { return adjoint && n % 2 == 1; }
// Row strides of the radial GEMM's team-scratch arrays, chosen so that the MMA lanes' accesses fall into distinct
// shared-memory banks (32 banks of 4 bytes; the layout test checks every access pattern). Rows of w and dw (NW C
// outputs of one edge): a stride of 8 modulo 16 spreads each tile store (8 output columns x 4 edge rows) over all
// banks, where a multiple of 32 put the 4 edge rows into the same 8 banks. Rows of s and ds/dd ((H, basis edges)):
// a stride of 4 modulo 8 spreads the f16 B-fragment loads (4 k rows x 8 edges; adjoint: 4 edges of s and 4 of
// ds/dd, with ds/dd starting 4 modulo 8 values after s: radial_hidden_gap).
KOKKOS_INLINE_FUNCTION constexpr int radial_out_stride(int cols) { return cols + (24 - cols % 16) % 16; }
KOKKOS_INLINE_FUNCTION constexpr int radial_hidden_stride(int edges) { return edges + (12 - edges % 8) % 8; }
// Values between the end of s and the start of ds/dd for a hidden-layer block of `values` (H times the stride):
// 4 modulo 8, and a multiple of 4 so that ds/dd keeps the 4-value alignment of the mode-1 vector loads.
KOKKOS_INLINE_FUNCTION constexpr int radial_hidden_gap(int values) { return (12 - values % 8) % 8; }
// The chain edge of lane l's D registers r % 2 = x (forward: x = 0, 1; adjoint: both hold edge x = 0's).
KOKKOS_INLINE_FUNCTION constexpr int mma_lane_edge(bool adjoint, int l, int x) {
  return mma_column_edge(adjoint, MmaTile::c_col(l, adjoint ? 0 : x));
}

// Radial modes 2 and 4: one 16-column tile's accumulators acc (lane's D fragment) of the chain from edge t0, scaled by
// the envelope u[x] (du = du/dd) of the lane's edges t0 + mma_lane_edge(GRAD, lane, x). Forward: w = u acc into w.
// Adjoint: s in registers 0 and 2, ds/dd in 1 and 3: w = u acc_s into w and dw = du acc_s + u acc_sd into dw. Edges
// >= nf are not written. (Host-callable for the layout test.)
template <bool GRAD>
KOKKOS_INLINE_FUNCTION void store_mma_tile(const float* acc, int lane, int tile, int t0, int nf, const float* u,
                                           const float* du, float* w, float* dw, int ostride) {
  if constexpr (GRAD) {
    const int e = t0 + mma_lane_edge(true, lane, 0);
    if (e < nf)
      for (int r = 0; r < 4; r += 2) {
        const int col = tile * MmaTile::M + MmaTile::c_row(lane, r);
        w[e * ostride + col] = u[0] * acc[r];
        dw[e * ostride + col] = du[0] * acc[r] + u[0] * acc[r + 1];
      }
  } else {
    (void)du, (void)dw;
    for (int r = 0; r < 4; ++r) {
      const int col = tile * MmaTile::M + MmaTile::c_row(lane, r), x = r % 2, e = t0 + mma_lane_edge(false, lane, x);
      if (e < nf) w[e * ostride + col] = u[x] * acc[r];
    }
  }
}

template <class T, int N>
struct alignas(N * sizeof(T)) ScratchPack {  // N consecutive scratch values read as one (vector) load
  T v[N];
};

// Mode 1, one register tile: CB columns col0 + ts x (x < CB) of NE edges t0..t0+NE-1.
template <class T, bool GRAD, int NE, int CB, class Params, class Ch>
KOKKOS_INLINE_FUNCTION void radial_tile(const Params& prm, const Ch& ch, int first, int t0, int col0, int ts,
                                        const T* u, const T* du) {
  T acc[CB][NE], dacc[CB][NE];
  for (int x = 0; x < CB; ++x)
    for (int e = 0; e < NE; ++e) acc[x][e] = dacc[x][e] = T(0);
  for (int hh = 0; hh < prm.H; ++hh) {
    const ScratchPack<T, NE> sv = *reinterpret_cast<const ScratchPack<T, NE>*>(&ch.s(hh, first + t0));
    ScratchPack<T, NE> dv;
    if (GRAD) dv = *reinterpret_cast<const ScratchPack<T, NE>*>(&ch.sd(hh, first + t0));
    for (int x = 0; x < CB; ++x) {
      const T wt = prm.W2t(hh, col0 + x * ts);
      for (int e = 0; e < NE; ++e) {
        acc[x][e] += wt * sv.v[e];
        if (GRAD) dacc[x][e] += wt * dv.v[e];
      }
    }
  }
  for (int x = 0; x < CB; ++x)
    for (int e = 0; e < NE; ++e) {
      ch.w(t0 + e, col0 + x * ts) = u[e] * acc[x][e];
      if (GRAD) ch.dw(t0 + e, col0 + x * ts) = du[e] * acc[x][e] + u[e] * dacc[x][e];
    }
}

// Mode 1: w(t, col) = u(d_t) sum_h W2t(h, col) s(h, t) and dw = d/dd for the chunk edges t < nf and the NW C
// output columns. Thread tr takes the columns tr + ts x (coalesced W2t rows), CB at a time, and NE edges at a
// time, so that each W2t load feeds NE edges and each (vector) load of s(h, t0..t0+NE) feeds CB columns; the sum
// over h runs in the same order as in radial_from_hidden.
template <class T, int NW, bool GRAD, int NE, class Params, class Member, class Ch>
KOKKOS_INLINE_FUNCTION void radial_gemm(const Member& team, const Params& prm, const Ch& ch, int first, int nf) {
  const int ts = team.team_size(), tr = team.team_rank(), ncol = NW * prm.C;
  const int mine = tr < ncol ? (ncol - tr + ts - 1) / ts : 0;  // this thread's columns tr + ts x, x < mine
  for (int t0 = 0; t0 < nf; t0 += NE) {
    T u[NE], du[NE];
    for (int e = 0; e < NE; ++e) u[e] = envelope(ch.geo(first + t0 + e, 3), prm.r_c, &du[e]);
    int x = 0;
    for (; x + 4 <= mine; x += 4) radial_tile<T, GRAD, NE, 4>(prm, ch, first, t0, tr + x * ts, ts, u, du);
    if (x + 2 <= mine) {
      radial_tile<T, GRAD, NE, 2>(prm, ch, first, t0, tr + x * ts, ts, u, du);
      x += 2;
    }
    if (x < mine) radial_tile<T, GRAD, NE, 1>(prm, ch, first, t0, tr + x * ts, ts, u, du);
  }
}

// Radial mode 2: the outputs of radial_gemm, w(t, col) = u(d_t) sum_h W2t(h, col) s(h, t) (and dw/dd), on tensor
// cores, 3xTF32 with fp32 accumulation (tensor_core.hpp). Warp w takes the 16-column tiles w, w + warps, ...
// (A = W2t^T from the packed fragments W2tc, one 16-byte load per lane and k step); B holds, in its 8 columns, 8
// chunk edges (forward) or s and ds/dd of 4 edges (adjoint, interleaved: mma_column_edge), read and split per tile
// (keeping them in registers for all tiles made the adjoints spill). Columns n of B past nf are zero and their
// outputs are not written.
template <class T, int NW, bool GRAD, class Params, class Member, class Ch>
KOKKOS_INLINE_FUNCTION void radial_mma(const Member& team, const Params& prm, const Ch& ch, int first, int nf) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same<T, float>::value) {
    const int tr = team.team_rank(), lane = tr & 31, warp = tr >> 5, warps = team.team_size() >> 5;
    const int KS = prm.H / MmaTile::K, tiles = NW * prm.C / MmaTile::M;
    constexpr int EG = mma_edges(GRAD);  // chunk edges per MMA chain
    const int n = MmaTile::b_col(lane);
    const float4* frag = reinterpret_cast<const float4*>(prm.W2tc.data());
    for (int t0 = 0; t0 < nf; t0 += EG) {
      const int eb = t0 + mma_column_edge(GRAD, n);  // edge of this lane's B column
      const float* bsrc = eb < nf ? &(mma_column_is_sd(GRAD, n) ? ch.sd : ch.s)(0, first + eb) : nullptr;
      const int bstride = ch.s.stride(0);
      float u[2] = {0.f, 0.f}, du[2] = {0.f, 0.f};  // of this lane's D edges (store_mma_tile)
      for (int x = 0; x < (GRAD ? 1 : 2); ++x) {
        const int e = t0 + mma_lane_edge(GRAD, lane, x);
        if (e < nf) u[x] = envelope(ch.geo(first + e, 3), prm.r_c, &du[x]);
      }
      const int ostride = int(ch.w.stride(0));
      for (int tile = warp; tile < tiles; tile += warps) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
        for (int ks = 0; ks < KS; ++ks) {
          uint32_t bb[2], bs[2];
          for (int r = 0; r < 2; ++r)
            split_tf32(bsrc ? bsrc[(ks * MmaTile::K + MmaTile::b_row(lane, r)) * bstride] : 0.f, bb[r], bs[r]);
          const float4 a = frag[(size_t(tile) * KS + ks) * 32 + lane];
          uint32_t ab[4], as[4];
          split_tf32(a.x, ab[0], as[0]);
          split_tf32(a.y, ab[1], as[1]);
          split_tf32(a.z, ab[2], as[2]);
          split_tf32(a.w, ab[3], as[3]);
          mma_tf32_3x(acc, ab, as, bb, bs);
        }
        store_mma_tile<GRAD>(acc, lane, tile, t0, nf, u, du, ch.w.data(), ch.dw.data(), ostride);
      }
    }
  }
#else
  (void)team, (void)prm, (void)ch, (void)first, (void)nf;
  Kokkos::abort("batmobile: radial mode 2 needs an sm_80+ CUDA build");
#endif
}

// Radial mode 4 (precision mixed): radial_mma with f16 operands (W2th: W2t^T rounded to f16 on the host; s and ds/dd
// rounded per chain) and f32 accumulation, one m16n8k16 MMA per 16 hidden units. Each lane's B fragments of a chain
// (H / 8 registers) stay in registers for all its tiles; same lanes, columns and stores as radial_mma (their setup
// is written out in both: shared through a helper struct, it made ptxas spill 32-96 B in the general layer's adjoints).
template <class T, int NW, bool GRAD, class Params, class Member, class Ch>
KOKKOS_INLINE_FUNCTION void radial_mma_f16(const Member& team, const Params& prm, const Ch& ch, int first, int nf) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same<T, float>::value) {
    constexpr int KSMAX = kF16MaxK / F16Tile::K;
    const int tr = team.team_rank(), lane = tr & 31, warp = tr >> 5, warps = team.team_size() >> 5;
    const int KS = prm.H / F16Tile::K, tiles = NW * prm.C / F16Tile::M;
    constexpr int EG = mma_edges(GRAD);
    const int n = MmaTile::b_col(lane);
    const uint4* frag = reinterpret_cast<const uint4*>(prm.W2th.data());
    // (w and dw are (radial_edges, radial_out_stride(NW C)): a row stride known at compile time with compile-time C)
    const int bstride = ch.s.stride(0), ostride = radial_out_stride(NW * prm.C);
    for (int t0 = 0; t0 < nf; t0 += EG) {
      const int eb = t0 + mma_column_edge(GRAD, n);
      const float* bsrc = eb < nf ? &(mma_column_is_sd(GRAD, n) ? ch.sd : ch.s)(0, first + eb) : nullptr;
      uint32_t b[KSMAX][2];
#pragma unroll
      for (int ks = 0; ks < KSMAX; ++ks)
        for (int r = 0; r < 2; ++r) {
          const int k = ks * F16Tile::K + F16Tile::b_row(lane, r);
          b[ks][r] = ks < KS && bsrc ? pack_f16x2(bsrc[k * bstride], bsrc[(k + 1) * bstride]) : 0u;
        }
      float u[2] = {0.f, 0.f}, du[2] = {0.f, 0.f};
      for (int x = 0; x < (GRAD ? 1 : 2); ++x) {
        const int e = t0 + mma_lane_edge(GRAD, lane, x);
        if (e < nf) u[x] = envelope(ch.geo(first + e, 3), prm.r_c, &du[x]);
      }
      // (with compile-time H the k loop has no guards: interaction_params.hpp, FixedDims)
      for (int tile = warp; tile < tiles; tile += warps) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int ks = 0; ks < KSMAX; ++ks)
          if (ks < KS) {
            const uint4 a4 = frag[(size_t(tile) * KS + ks) * 32 + lane];
            const uint32_t a[4] = {a4.x, a4.y, a4.z, a4.w};
            mma_f16(acc, a, b[ks]);
          }
        store_mma_tile<GRAD>(acc, lane, tile, t0, nf, u, du, ch.w.data(), ch.dw.data(), ostride);
      }
    }
  }
#else
  (void)team, (void)prm, (void)ch, (void)first, (void)nf;
  Kokkos::abort("batmobile: radial mode 4 needs an sm_80+ CUDA build");
#endif
}

}  // namespace kernels
}  // namespace batmobile
