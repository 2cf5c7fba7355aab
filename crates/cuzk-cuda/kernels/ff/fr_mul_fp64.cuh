// Montgomery product in Fr on the FP64 units (limbs52.cuh has the limb arithmetic).
//
// Why: on Hopper a 32x32->64 integer product costs 6 issue cycles per warp (IMAD +
// IMAD.HI), while a double-precision FMA costs 2 and runs on its own pipe. With
// 52-bit limbs the 256-bit product needs 5x5 limb products instead of 8x8 (measured
// on the H200: ~620 cycles per warp product against ~910 for the integer CIOS).
//
// Representation: 5 limbs of 52 bits, so the Montgomery radix is R' = 2^260 rather than
// the host's R = 2^256. mont52(a, b) gives a·b·2^-260; feeding b·2^4 (a shift by 4
// while splitting: 16·b < 2^259 fits five limbs) gives a·b·2^-256, the host's
// Montgomery product. A column holds at most 20 halves below 2^52 plus a carry.
#pragma once
#include "fr_elem.cuh"
#include "limbs52.cuh"

namespace fr {

struct limbs52 {
    double d[5];
};

// The 52-bit limbs of x·2^S for S = 0 or 4 (x < 2^255, so x·2^4 < 2^259 < 2^260).
template <int S>
__device__ __forceinline__ limbs52 split52(const uint32_t x[8]) {
    limbs52 o;
    ::limbs52::split<8, 5, S>(x, o.d);
    return o;
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
        for (int j = 0; j < 5; j++) ::limbs52::mul_acc(col[i + j], col[i + j + 1], a.d[i], b.d[j]);
    // Then clear the low five columns one by one with multiples of r.
#pragma unroll
    for (int k = 0; k < 5; k++) {
        const uint64_t v = col[k];
        // m = v·(-r^-1) mod 2^52; r ≡ 2^52 - 2^32 + 1, so -r^-1 ≡ -(1 + 2^32) (mod 2^52).
        const uint64_t m = (0ull - (v + (v << 32))) & LIMBS52_MASK;
        const double dm = ::limbs52::to_double((uint32_t)m, (uint32_t)(m >> 32));
#pragma unroll
        for (int j = 0; j < 5; j++) ::limbs52::mul_acc(col[k + j], col[k + j + 1], dm, rl[j]);
        col[k + 1] += col[k] >> 52;  // col[k] is now a multiple of 2^52
    }
    // The result is columns 5..9 (< 2r < 2^256, so nothing is left for a sixth limb).
    uint32_t o[8];
    ::limbs52::join<5, 8>(o, col + 5);
    return reduce_once(o);
}

__device__ __forceinline__ elem mul_fp64(const elem &a, const elem &b) {
    return mont52(split52<0>(a.l), split52<4>(b.l));
}

}  // namespace fr
