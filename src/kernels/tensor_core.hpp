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
// fp16 operands (ModelOptions precision "mixed": one m16n8k16 MMA per 16 k instead of three m16n8k8 per 8):
//   F16Tile                         fragment positions of m16n8k16 with f16 A and B (PTX ISA): register r of lane l
//                                   holds two consecutive k, h = 0 in its low and h = 1 in its high 16 bits:
//                                   A (16 x 16): A(a_row(l, r), a_col(l, r) + h), B (16 x 8): B(b_row(l, r) + h,
//                                   MmaTile::b_col(l)); C/D as MmaTile's
//   kF16MaxK                        the largest K (= the radial hidden width H) whose B fragments a lane keeps in
//                                   registers for all tiles (4 k steps, 8 registers)
//   f16_round_bits(x)               host: x rounded to IEEE binary16 (nearest, ties to even) as bits; overflow gives
//                                   infinity, NaN stays NaN
//   f16_bits_float(h)               host: the float value of binary16 bits h (exact)
//   pack_a_fragments_f16(W, rows, cols) host: A(m, k) = W(k, m) as pack_a_fragments, in m16n8k16 fragment order:
//                                   out[((tile * KS + ks) * 32 + lane) * 4 + r], KS = rows / 16, one 16-byte load per
//                                   lane and k step; rows a multiple of 16
//   pack_f16x2(lo, hi)              device: two floats rounded to f16 into one register (cvt.rn.f16x2.f32)
//   mma_f16(d, a, b)                device: d += A B, one m16n8k16 MMA with f32 accumulation
#pragma once
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
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

struct F16Tile {
  static constexpr int M = 16, N = 8, K = 16;
  KOKKOS_INLINE_FUNCTION static constexpr int a_row(int l, int r) { return l / 4 + 8 * (r % 2); }
  KOKKOS_INLINE_FUNCTION static constexpr int a_col(int l, int r) { return 2 * (l % 4) + 8 * (r / 2); }
  KOKKOS_INLINE_FUNCTION static constexpr int b_row(int l, int r) { return 2 * (l % 4) + 8 * r; }
};
inline constexpr int kF16MaxK = 64;
// InteractionKernel::use_tensor_cores: the radial GEMM on CUDA cores, on tensor cores in 3xTF32, or with f16 operands
inline constexpr int kTensorCoresOff = 0, kTensorCores3xTf32 = 1, kTensorCoresF16 = 2;

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

// Host: the A operand of every (16-column tile, k step, lane, register) of a rows x cols GEMM in Tile's fragment
// order, value(k, m) for A(m, k) = W(k, m) (pack_a_fragments, pack_a_fragments_f16).
template <class Tile, class Out, class Value>
std::vector<Out> pack_fragments(int rows, int cols, const char* name, const Value& value) {
  if (rows % Tile::K != 0 || cols % Tile::M != 0)
    throw std::invalid_argument(std::string(name) + ": rows must be a multiple of " + std::to_string(Tile::K) +
                                " and cols of " + std::to_string(Tile::M));
  const int KS = rows / Tile::K, tiles = cols / Tile::M;
  std::vector<Out> out(size_t(tiles) * KS * 32 * 4);
  for (int tile = 0; tile < tiles; ++tile)
    for (int ks = 0; ks < KS; ++ks)
      for (int l = 0; l < 32; ++l)
        for (int r = 0; r < 4; ++r)
          out[((size_t(tile) * KS + ks) * 32 + l) * 4 + r] =
              value(ks * Tile::K + Tile::a_col(l, r), tile * Tile::M + Tile::a_row(l, r));
  return out;
}

// Host: A(m, k) = W(k, m) in fragment order (see the top comment).
template <class F>
std::vector<float> pack_a_fragments(const F& W, int rows, int cols) {
  return pack_fragments<MmaTile, float>(rows, cols, "pack_a_fragments", [&](int k, int m) { return float(W(k, m)); });
}

inline uint16_t f16_round_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // from 65520 on: infinity
  if (a < 0x38800000u)  // below 2^-14: a multiple of 2^-24 (subnormal), 1024 = the smallest normal's bits
    return uint16_t(sign | uint16_t(std::nearbyint(std::fabs(x) * 16777216.0f)));
  const uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);  // nearest, ties to even; a carry bumps the exponent
  return uint16_t(sign | ((rounded - (112u << 23)) >> 13));
}

inline float f16_bits_float(uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.f : 1.f;
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return m ? std::nanf("") : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(float(m), -24) : std::ldexp(float(m | 0x400), e - 25));
}

// Host: A(m, k) = W(k, m) in m16n8k16 fragment order (see the top comment), two f16 per value.
template <class F>
std::vector<uint32_t> pack_a_fragments_f16(const F& W, int rows, int cols) {
  return pack_fragments<F16Tile, uint32_t>(rows, cols, "pack_a_fragments_f16", [&](int k, int m) {
    return uint32_t(f16_round_bits(float(W(k, m)))) | (uint32_t(f16_round_bits(float(W(k + 1, m)))) << 16);
  });
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

__device__ inline uint32_t pack_f16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));  // the first source goes to the upper half
  return d;
}

__device__ inline void mma_f16(float* d, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

}  // namespace kernels
}  // namespace batmobile
