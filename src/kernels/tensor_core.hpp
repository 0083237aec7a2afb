// Tensor-core helpers (NVIDIA sm_80+): a warp-level D += A B with mma.sync m16n8k8 on TF32 operands, and the
// "3xTF32" split that keeps fp32 accuracy on TF32 tensor cores: x = big + small with big = tf32(x) and
// small = tf32(x - big), and a b ~ big_a big_b + big_a small_b + small_a big_b (the dropped small_a small_b is
// ~2^-22 relative; TF32 keeps 10 mantissa bits, so each split part carries 11 of the 24).
//
// Public API (namespace batmobile::kernels):
//   kTensorCoreTf32                 true when the Kokkos build targets an sm_80+ NVIDIA GPU (the device code exists)
//   tf32_round(x)                   round to TF32 (nearest, ties away from zero), host and device (cvt.rna.tf32.f32)
//   tf32_round_finite_bits(x)       the same as bits, by an integer add and mask (kTf32Mask), for finite x
//   MmaTile                         fragment positions of m16n8k8 (PTX ISA): lane l, register r of
//                                   A (16 x 8, row-major): a_row(l, r) = l/4 + 8 (r%2), a_col(l, r) = l%4 + 4 (r/2)
//                                   B (8 x 8, col-major):  b_row(l, r) = l%4 + 4 r,     b_col(l)    = l/4
//                                   C/D (16 x 8):          c_row(l, r) = l/4 + 8 (r/2), c_col(l, r) = 2 (l%4) + r%2
//   pack_a_fragments(W, rows, cols) host: the A operand A(m, k) = W(k, m) of every (16-column tile, 8-row k step)
//                                   of W (a callable W(k, m); rows = K dimension, cols = M dimension) in fragment
//                                   order:
//                                   out[((tile * KS + ks) * 32 + lane) * 4 + r], one 16-byte load per lane and k
//                                   step. fp32 values, split on the device: a pre-split big + small copy was twice
//                                   the bytes, and the H200 ran the radial GEMM from L2 instead of L1 with it
//                                   (slower than the CUDA-core GEMM)
//   mma_tf32_3x(d, a_big, a_small, b_big, b_small)   device: d += A B (three m16n8k8 MMAs, small terms first)
//   split_tf32(x, big, small)       host and device: the split of one operand value in 4 integer / fp32 operations:
//                                   big = tf32_round(x) for finite x, small = x - big cut to TF32 (toward zero), so
//                                   |x - (big + small)| < 2^-21 |x|. NaN and infinite x give a NaN small part (the
//                                   products then give NaN, as with cvt). The cvt.rna form (tf32_round twice) took
//                                   7-9 SASS instructions per value with its NaN / infinity guards, about two thirds
//                                   of the radial GEMM's instructions, which were ~45 % of the fused kernels'
//                                   (Nsight Compute, H200, MD at 10,368 atoms).
#pragma once
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace batmobile {
namespace kernels {

#if defined(KOKKOS_ENABLE_CUDA) &&                                                                      \
    (defined(KOKKOS_ARCH_AMPERE80) || defined(KOKKOS_ARCH_AMPERE86) || defined(KOKKOS_ARCH_HOPPER90) || \
     defined(KOKKOS_ARCH_ADA89))
inline constexpr bool kTensorCoreTf32 = true;
#else
inline constexpr bool kTensorCoreTf32 = false;
#endif

struct MmaTile {
  static constexpr int M = 16, N = 8, K = 8;
  KOKKOS_INLINE_FUNCTION static constexpr int a_row(int l, int r) { return l / 4 + 8 * (r % 2); }
  KOKKOS_INLINE_FUNCTION static constexpr int a_col(int l, int r) { return l % 4 + 4 * (r / 2); }
  KOKKOS_INLINE_FUNCTION static constexpr int b_row(int l, int r) { return l % 4 + 4 * r; }
  KOKKOS_INLINE_FUNCTION static constexpr int b_col(int l) { return l / 4; }
  KOKKOS_INLINE_FUNCTION static constexpr int c_row(int l, int r) { return l / 4 + 8 * (r / 2); }
  KOKKOS_INLINE_FUNCTION static constexpr int c_col(int l, int r) { return 2 * (l % 4) + r % 2; }
};

KOKKOS_INLINE_FUNCTION uint32_t tf32_float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}
KOKKOS_INLINE_FUNCTION float tf32_bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

inline constexpr uint32_t kTf32Mask = 0xffffe000u;  // the bits a TF32 value keeps (sign, exponent, 10 mantissa)
// Round to nearest TF32, ties away from zero, for finite x: half a TF32 unit added to the magnitude bits, then the
// 13 low mantissa bits cut (a NaN whose mantissa is all ones wraps to -0 here; callers keep NaN elsewhere).
KOKKOS_INLINE_FUNCTION uint32_t tf32_round_finite_bits(float x) { return (tf32_float_bits(x) + 0x1000u) & kTf32Mask; }

KOKKOS_INLINE_FUNCTION float tf32_round(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
  return __uint_as_float(u);
#else
  return tf32_bits_float(tf32_round_finite_bits(x));  // finite x
#endif
}

// Host: A(m, k) = W(k, m) in fragment order (see the top comment).
template <class F>
std::vector<float> pack_a_fragments(const F& W, int rows, int cols) {
  if (rows % MmaTile::K != 0 || cols % MmaTile::M != 0)
    throw std::invalid_argument("pack_a_fragments: rows must be a multiple of 8 and cols of 16");
  const int KS = rows / MmaTile::K, tiles = cols / MmaTile::M;
  std::vector<float> out(size_t(tiles) * KS * 32 * 4);
  for (int tile = 0; tile < tiles; ++tile)
    for (int ks = 0; ks < KS; ++ks)
      for (int l = 0; l < 32; ++l)
        for (int r = 0; r < 4; ++r)
          out[((size_t(tile) * KS + ks) * 32 + l) * 4 + r] =
              float(W(ks * MmaTile::K + MmaTile::a_col(l, r), tile * MmaTile::M + MmaTile::a_row(l, r)));
  return out;
}

// big: tf32_round_finite_bits (= cvt.rna for finite x; a NaN may become -0 there, but x - big stays NaN); small:
// x - big (exact) with its 13 low bits cut.
KOKKOS_INLINE_FUNCTION void split_tf32(float x, uint32_t& big, uint32_t& small) {
  big = tf32_round_finite_bits(x);
  small = tf32_float_bits(x - tf32_bits_float(big)) & kTf32Mask;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

__device__ inline void mma_tf32(float* d, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ inline void mma_tf32_3x(float* d, const uint32_t* a_big, const uint32_t* a_small, const uint32_t* b_big,
                                   const uint32_t* b_small) {
  mma_tf32(d, a_small, b_big);
  mma_tf32(d, a_big, b_small);
  mma_tf32(d, a_big, b_big);
}
#endif

}  // namespace kernels
}  // namespace batmobile
