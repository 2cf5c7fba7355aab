// Multiprecision products on the FP64 units: 52-bit limbs held as doubles (exact
// integers < 2^52). Shared by the Fr and Fp products (fr_mul_fp64.cuh, fp.cuh).
//
// One limb product p = a·b < 2^104, split exactly:
//   hi = fma_rz(a, b, 2^104)              in [2^104, 2^105), a multiple of 2^52:
//                                          hi - 2^104 = floor(p / 2^52)·2^52
//   lo = fma(a, b, (2^104 + 2^52) - hi)   = p mod 2^52 + 2^52, in [2^52, 2^53)
// (the subtraction is exact: its result is a multiple of 2^52 below 2^104). In those
// binades the bit pattern of a double is its exponent field plus an integer that grows
// by one per unit (2^52 for hi): bits(hi) - bits(2^104) = floor(p / 2^52) and
// bits(lo) - bits(2^52) = p mod 2^52. The halves are summed as 64-bit integers per
// column (product scanning).
#pragma once
#include <stdint.h>

namespace limbs52 {

#define LIMBS52_MASK 0xfffffffffffffull
#define LIMBS52_BITS_2P52 0x4330000000000000ull   // bit pattern of 2^52
#define LIMBS52_BITS_2P104 0x4670000000000000ull  // bit pattern of 2^104

// The integer v < 2^52, given as its low 32 bits and high 20 bits, as a double: set the
// exponent of 2^52 over v's bits, then subtract 2^52 (both steps exact).
__device__ __forceinline__ double to_double(uint32_t lo, uint32_t hi20) {
    return __hiloint2double((int)(hi20 | 0x43300000u), (int)lo) - 0x1p52;
}

// The halves of a·b, for a, b < 2^52, as raw bit patterns:
// lo_bits = a·b mod 2^52 + BITS_2P52, hi_bits = floor(a·b / 2^52) + BITS_2P104.
__device__ __forceinline__ void mul_bits(uint64_t &lo_bits, uint64_t &hi_bits, double a, double b) {
    const double hi = __fma_rz(a, b, 0x1p104);
    const double lo = __fma_rz(a, b, (0x1p104 + 0x1p52) - hi);
    hi_bits = (uint64_t)__double_as_longlong(hi);
    lo_bits = (uint64_t)__double_as_longlong(lo);
}

// lo_col += a·b mod 2^52, hi_col += floor(a·b / 2^52), for a, b < 2^52.
__device__ __forceinline__ void mul_acc(uint64_t &lo_col, uint64_t &hi_col, double a, double b) {
    uint64_t lo, hi;
    mul_bits(lo, hi, a, b);
    hi_col += hi - LIMBS52_BITS_2P104;
    lo_col += lo - LIMBS52_BITS_2P52;
}

// The L 52-bit limbs of x·2^S, x given as W 32-bit words (x·2^S < 2^(52·L)).
template <int W, int L, int S>
__device__ __forceinline__ void split(const uint32_t x[W], double out[L]) {
    // One zero word below and two above, so every limb is a funnel shift of constant
    // words after unrolling.
    uint32_t w[W + 3];
    w[0] = 0;
#pragma unroll
    for (int i = 0; i < W; i++) w[i + 1] = x[i];
    w[W + 1] = 0;
    w[W + 2] = 0;
#pragma unroll
    for (int i = 0; i < L; i++) {
        const int start = 52 * i - S + 32, q = start / 32, off = start % 32;
        const uint32_t lo = q < W + 3 ? (off ? __funnelshift_r(w[q], w[q + 1 < W + 3 ? q + 1 : W + 2], off) : w[q]) : 0;
        const uint32_t hi =
            (q + 1 < W + 3 ? (off ? __funnelshift_r(w[q + 1], w[q + 2 < W + 3 ? q + 2 : W + 2], off) : w[q + 1]) : 0) &
            0xfffffu;
        out[i] = to_double(lo, hi);
    }
}

// Carries the L result columns into 52-bit limbs and repacks them into W 32-bit words
// (the value must be below 2^(32·W)).
template <int L, int W>
__device__ __forceinline__ void join(uint32_t out[W], uint64_t col[L + 1]) {
    uint64_t t[L];
#pragma unroll
    for (int i = 0; i < L; i++) {
        t[i] = col[i] & LIMBS52_MASK;
        col[i + 1] += col[i] >> 52;
    }
#pragma unroll
    for (int w = 0; w < W; w++) {
        const int i = (32 * w) / 52, off = (32 * w) % 52;
        uint64_t v = t[i] >> off;
        if (52 - off < 32 && i + 1 < L) v |= t[i + 1] << (52 - off);
        out[w] = (uint32_t)v;
    }
}

}  // namespace limbs52
