// Montgomery product in Fr on the FP64 units.
//
// Why: on Hopper a 32x32->64 integer product costs 6 issue cycles per warp (IMAD +
// IMAD.HI), while a double-precision FMA costs 2 and runs on its own pipe. With
// 52-bit limbs a 52x52 product is exact in two FMAs, so the 256-bit product needs
// 5x5 limb products instead of 8x8 (measured on the H200: ~620 cycles per warp product
// against ~910 for the integer CIOS).
//
// Representation: 5 limbs of 52 bits held as doubles (exact integers < 2^52), so the
// Montgomery radix is R' = 2^260 rather than the host's R = 2^256. mont(a, b) gives
// a·b·2^-260; feeding b·2^4 (a shift by 4 while splitting: 16·b < 2^259 fits five
// limbs) gives a·b·2^-256, the host's Montgomery product.
//
// One limb product p = a·b < 2^104, split exactly:
//   hi = fma_rz(a, b, 2^104)              in [2^104, 2^105), a multiple of 2^52:
//                                          hi - 2^104 = floor(p / 2^52)·2^52
//   lo = fma(a, b, (2^104 + 2^52) - hi)   = p mod 2^52 + 2^52, in [2^52, 2^53)
// (the subtraction is exact: its result is a multiple of 2^52 below 2^104). In those
// binades the bit pattern of a double is its exponent field plus an integer that grows
// by one per unit (2^52 for hi): bits(hi) - bits(2^104) = floor(p / 2^52) and
// bits(lo) - bits(2^52) = p mod 2^52. The halves are summed as 64-bit integers per
// column (product scanning); a column holds at most 20 halves below 2^52 plus a carry,
// far from 2^64.
#pragma once
#include "fr_elem.cuh"

namespace fr {

#define FR52_MASK 0xfffffffffffffull
#define FR52_BITS_2P52 0x4330000000000000ull   // bit pattern of 2^52
#define FR52_BITS_2P104 0x4670000000000000ull  // bit pattern of 2^104

struct limbs52 {
    double d[5];
};

// The integer v < 2^52, given as its low 32 bits and high 20 bits, as a double: set the
// exponent of 2^52 over v's bits, then subtract 2^52 (both steps exact).
__device__ __forceinline__ double limb_to_double(uint32_t lo, uint32_t hi20) {
    return __hiloint2double((int)(hi20 | 0x43300000u), (int)lo) - 0x1p52;
}

// The 52-bit limbs of x·2^S for S = 0 or 4 (x < 2^255, so x·2^4 < 2^259 < 2^260).
template <int S>
__device__ __forceinline__ limbs52 split52(const uint32_t x[8]) {
    // One zero word below and two above, so every limb is a funnel shift of constant
    // words after unrolling.
    const uint32_t w[11] = {0, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], 0, 0};
    limbs52 o;
#pragma unroll
    for (int i = 0; i < 5; i++) {
        const int start = 52 * i - S + 32, q = start / 32, off = start % 32;
        const uint32_t lo = off ? __funnelshift_r(w[q], w[q + 1], off) : w[q];
        const uint32_t hi = (off ? __funnelshift_r(w[q + 1], w[q + 2], off) : w[q + 1]) & 0xfffffu;
        o.d[i] = limb_to_double(lo, hi);
    }
    return o;
}

// lo_col += a·b mod 2^52, hi_col += floor(a·b / 2^52), for a, b < 2^52.
__device__ __forceinline__ void mul_limbs52(uint64_t &lo_col, uint64_t &hi_col, double a, double b) {
    const double hi = __fma_rz(a, b, 0x1p104);
    const double lo = __fma_rz(a, b, (0x1p104 + 0x1p52) - hi);
    hi_col += (uint64_t)__double_as_longlong(hi) - FR52_BITS_2P104;
    lo_col += (uint64_t)__double_as_longlong(lo) - FR52_BITS_2P52;
}

// a·b·2^-260 mod r, fully reduced, for a < r and b < 16r given as 52-bit limbs.
// Bound before the last subtraction: (a·b + m·r) / 2^260 < 16r²/2^260 + r < 1.5r.
__device__ __forceinline__ elem mont52(const limbs52 &a, const limbs52 &b) {
    // r in 52-bit limbs.
    const double rl[5] = {4503595332403201.0, 52776117727231.0, 2711223964777892.0, 2203984808738944.0,
                          127464551688605.0};
    uint64_t col[11];
#pragma unroll
    for (int i = 0; i < 11; i++) col[i] = 0;
    // All of a·b first: 25 independent products.
#pragma unroll
    for (int i = 0; i < 5; i++)
#pragma unroll
        for (int j = 0; j < 5; j++) mul_limbs52(col[i + j], col[i + j + 1], a.d[i], b.d[j]);
    // Then clear the low five columns one by one with multiples of r.
#pragma unroll
    for (int k = 0; k < 5; k++) {
        const uint64_t v = col[k];
        // m = v·(-r^-1) mod 2^52; r ≡ 2^52 - 2^32 + 1, so -r^-1 ≡ -(1 + 2^32) (mod 2^52).
        const uint64_t m = (0ull - (v + (v << 32))) & FR52_MASK;
        const double dm = limb_to_double((uint32_t)m, (uint32_t)(m >> 32));
#pragma unroll
        for (int j = 0; j < 5; j++) mul_limbs52(col[k + j], col[k + j + 1], dm, rl[j]);
        col[k + 1] += col[k] >> 52;  // col[k] is now a multiple of 2^52
    }
    // The result is columns 5..9: carry them into 52-bit limbs (it is < 2r < 2^256,
    // so nothing is left over for a sixth limb)...
    uint64_t t[5];
#pragma unroll
    for (int i = 0; i < 5; i++) {
        t[i] = col[5 + i] & FR52_MASK;
        col[6 + i] += col[5 + i] >> 52;
    }
    // ...and repack them into eight 32-bit words.
    uint32_t o[8];
#pragma unroll
    for (int w = 0; w < 8; w++) {
        const int i = (32 * w) / 52, off = (32 * w) % 52;
        uint64_t v = t[i] >> off;
        if (52 - off < 32 && i + 1 < 5) v |= t[i + 1] << (52 - off);
        o[w] = (uint32_t)v;
    }
    return reduce_once(o);
}

__device__ __forceinline__ elem mul_fp64(const elem &a, const elem &b) {
    return mont52(split52<0>(a.l), split52<4>(b.l));
}

}  // namespace fr
