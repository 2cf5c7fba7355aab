// The BLS12-381 base field Fp in Montgomery form (R = 2^384), twelve 32-bit limbs,
// least significant first: the bytes of blst's blst_fp (six 64-bit limbs) on a
// little-endian host. Values are kept fully reduced (< p).
//
// The product (`mul`) runs on the FP64 units where they are fast (`mul_fp64`, limbs52.cuh:
// 8 limbs of 52 bits, R' = 2^416), else with 32-bit integer limbs (`mul_int`).
// mont(a, b·2^32) = a·b·2^32/2^416 = a·b·2^-384, the host's Montgomery product; the
// shift by 32 bits is free while splitting (b·2^32 < 2^413 fits eight limbs).
// Bound before the last subtraction: (a·b·2^32 + m·p) / 2^416 < p·(p·2^32/2^416 + 1)
// < 1.125p. Columns hold at most 32 halves below 2^52 plus a carry (< 2^58).
#pragma once
#include <stdint.h>

#include "fp64_rate.cuh"
#include "limbs52.cuh"

namespace fp {

struct __align__(16) elem {
    uint32_t l[12];
};

// p = 0x1a0111ea 397fe69a 4b1ba7b6 434bacd7 64774b84 f38512bf 6730d2a0 f6b0f624
//       1eabfffe b153ffff b9feffff ffffaaab
__device__ __constant__ const uint32_t P[12] = {0xffffaaabu, 0xb9feffffu, 0xb153ffffu, 0x1eabfffeu,
                                                0xf6b0f624u, 0x6730d2a0u, 0xf38512bfu, 0x64774b84u,
                                                0x434bacd7u, 0x4b1ba7b6u, 0x397fe69au, 0x1a0111eau};

// d = x - y over twelve limbs; returns the borrow (1 if x < y).
__device__ __forceinline__ uint32_t sub_limbs(uint32_t d[12], const uint32_t x[12], const uint32_t y[12]) {
    uint32_t borrow = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        const uint64_t t = (uint64_t)x[i] - y[i] - borrow;
        d[i] = (uint32_t)t;
        borrow = (uint32_t)(t >> 63);
    }
    return borrow;
}

// x + y over twelve limbs (no carry out: callers keep the sum below 2^384).
__device__ __forceinline__ void add_limbs(uint32_t s[12], const uint32_t x[12], const uint32_t y[12]) {
    uint32_t carry = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        const uint64_t t = (uint64_t)x[i] + y[i] + carry;
        s[i] = (uint32_t)t;
        carry = (uint32_t)(t >> 32);
    }
}

// x - p if x >= p, for x < 2p.
__device__ __forceinline__ elem reduce_once(const uint32_t x[12]) {
    uint32_t d[12];
    const uint32_t borrow = sub_limbs(d, x, P);
    elem out;
#pragma unroll
    for (int i = 0; i < 12; i++) out.l[i] = borrow ? x[i] : d[i];
    return out;
}

__device__ __forceinline__ elem zero() {
    elem o;
#pragma unroll
    for (int i = 0; i < 12; i++) o.l[i] = 0;
    return o;
}

// An element from twelve words, least significant first (a constant table).
__device__ __forceinline__ elem from_words(const uint32_t w[12]) {
    elem o;
#pragma unroll
    for (int i = 0; i < 12; i++) o.l[i] = w[i];
    return o;
}

// 1 in Montgomery form: 2^384 mod p.
__device__ __forceinline__ elem one() {
    const uint32_t r[12] = {0x0002fffdu, 0x76090000u, 0xc40c0002u, 0xebf4000bu, 0x53c758bau, 0x5f489857u,
                            0x70525745u, 0x77ce5853u, 0xa256ec6du, 0x5c071a97u, 0xfa80e493u, 0x15f65ec3u};
    return from_words(r);
}

// Equal limbs (both reduced, or both not: values are kept fully reduced).
__device__ __forceinline__ bool equal(const elem &a, const elem &b) {
    uint32_t diff = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) diff |= a.l[i] ^ b.l[i];
    return diff == 0;
}

__device__ __forceinline__ bool is_zero(const elem &a) {
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) acc |= a.l[i];
    return acc == 0;
}

__device__ __forceinline__ elem add(const elem &a, const elem &b) {
    uint32_t s[12];
    add_limbs(s, a.l, b.l);  // < 2p < 2^382
    return reduce_once(s);
}

__device__ __forceinline__ elem sub(const elem &a, const elem &b) {
    uint32_t d[12];
    elem out;
    if (sub_limbs(d, a.l, b.l))
        add_limbs(out.l, d, P);  // a - b + 2^384 + p, truncated: a - b + p
    else
        for (int i = 0; i < 12; i++) out.l[i] = d[i];
    return out;
}

// Halves column c of `mont` receives: a low half from each limb product of i + j = c and
// a high half from each of i + j = c − 1, once in a·b and once in m·p (the same shape).
__device__ __forceinline__ constexpr int mont_terms(int c) { return c < 0 || c > 14 ? 0 : (c < 8 ? c + 1 : 15 - c); }

// Each limb product's halves are added to their columns as raw bit patterns, and the
// exponent bits of all of a column's halves are taken off once, by adding mont_bias(c),
// when the column is complete. The biases are multiples of 2^52: they never touch a
// column's low 52 bits (m reads only those), and the column is right (mod 2^64) once
// its bias is added, before its carry or the result reads it. Against subtracting each
// half's bias as it is added (0d749a4), on the H200: G1 accumulation −2.0 % at 2^24 and
// −2.4 % at 2^26, G2 +1.7 % at 2^24 (ptxas allocates the product's registers per kernel;
// starting the columns at minus their biases instead gave G1 +0.8 %, G2 −3.6 %;
// bench/results/2026-12-03-msm-fp-bias-variants-h200.txt).
__device__ __forceinline__ constexpr uint64_t mont_bias(int c) {
    return 0ull -
           2ull * ((uint64_t)mont_terms(c) * LIMBS52_BITS_2P52 + (uint64_t)mont_terms(c - 1) * LIMBS52_BITS_2P104);
}

// col[k + j] += x·y[j] for j < 8, in raw halves: each limb product's low half goes into
// its column together with the previous product's high half.
__device__ __forceinline__ void mont_row(uint64_t col[17], int k, double x, const double y[8]) {
    uint64_t carried = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint64_t lo, hi;
        limbs52::mul_bits(lo, hi, x, y[j]);
        col[k + j] += lo + carried;
        carried = hi;
    }
    col[k + 8] += carried;
}

// a·b·2^-416 mod p, fully reduced, for a < p and b < p·2^32 as 52-bit limbs.
__device__ __forceinline__ elem mont(const double a[8], const double b[8]) {
    // p in 52-bit limbs.
    const double pl[8] = {4222124650637995.0, 4480601151241119.0, 1883421074697215.0, 329812468902415.0,
                          2080788367864709.0, 486514101631693.0,  539007656565323.0,  106513.0};
    // -p^-1 mod 2^52.
    const uint64_t PINV = 0x3fffcfffcfffdull;
    uint64_t col[17];
#pragma unroll
    for (int c = 0; c < 17; c++) col[c] = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) mont_row(col, i, a[i], b);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint64_t m = (col[k] * PINV) & LIMBS52_MASK;
        const double dm = limbs52::to_double((uint32_t)m, (uint32_t)(m >> 32));
        mont_row(col, k, dm, pl);
        col[k + 1] += (col[k] + mont_bias(k)) >> 52;  // col[k] is now a multiple of 2^52
    }
#pragma unroll
    for (int c = 8; c < 17; c++) col[c] += mont_bias(c);
    // The result is columns 8..15 (< 1.125p < 2^384).
    uint32_t o[12];
    limbs52::join<8, 12>(o, col + 8);
    return reduce_once(o);
}

// Out of line: a curve addition makes ~12 products, and inlining them all made one
// MSM kernel take ~30 s per architecture to compile (255 registers) against ~3 s.
// Arguments and result by value: they travel in registers, where by reference they
// went through the stack (local memory) on every call. G1's accumulation at 2^24 went
// from 161.8 to 148.2 ms; G2's (three of these per Fp2 product) got slower, 592 to
// 774 ms, still to be explained (NOTES.md). Grouping two or three independent
// products per call was 2.4× slower (255 registers, spills).
__device__ __noinline__ elem mul_fp64(elem a, elem b) {
    double da[8], db[8];
    limbs52::split<12, 8, 0>(a.l, da);
    limbs52::split<12, 8, 32>(b.l, db);
    return mont(da, db);
}

// The same product with 32-bit integer limbs (CIOS) on the integer pipe.
__device__ __noinline__ elem mul_int(elem a, elem b) {
    constexpr uint32_t PINV32 = 0xfffcfffdu;  // -p^-1 mod 2^32
    uint32_t t[14];
#pragma unroll
    for (int i = 0; i < 14; i++) t[i] = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        uint64_t c = 0;
#pragma unroll
        for (int j = 0; j < 12; j++) {
            c = (uint64_t)a.l[j] * b.l[i] + t[j] + (c >> 32);
            t[j] = (uint32_t)c;
        }
        c = (uint64_t)t[12] + (c >> 32);
        t[12] = (uint32_t)c;
        t[13] = (uint32_t)(c >> 32);
        const uint32_t m = t[0] * PINV32;
        c = (uint64_t)m * P[0] + t[0];
#pragma unroll
        for (int j = 1; j < 12; j++) {
            c = (uint64_t)m * P[j] + t[j] + (c >> 32);
            t[j - 1] = (uint32_t)c;
        }
        c = (uint64_t)t[12] + (c >> 32);
        t[11] = (uint32_t)c;
        t[12] = t[13] + (uint32_t)(c >> 32);
    }
    // t < 2p here: one conditional subtraction.
    return reduce_once(t);
}

// The product: on the FP64 units where they run at full rate, else on the integer
// pipe (fp64_rate.cuh). Measured on the H200, G1 accumulation at 2^24: FP64 129.4 ms, integer 161.4,
// and the integer product in every other warp 259.3 (both products' registers in one
// kernel: spills) (bench/results/2026-12-01-gpu-msm-fp-product-int.txt).
__device__ __forceinline__ elem mul(elem a, elem b) {
#ifdef CUZK_FULL_RATE_FP64
    return mul_fp64(a, b);
#else
    return mul_int(a, b);
#endif
}

__device__ __forceinline__ elem sqr(const elem &a) { return mul(a, a); }

// a^(p−2) = a^-1 (Fermat), 0 for a = 0: ~380 squarings and ~190 products, so callers
// invert once for many elements (Montgomery's trick).
__device__ __noinline__ elem inv(elem a) {
    elem r = one();
    for (int i = 11; i >= 0; i--) {
        const uint32_t e = i == 0 ? P[0] - 2 : P[i];  // p − 2: the low limb does not borrow
        for (int b = 31; b >= 0; b--) {
            r = sqr(r);
            if ((e >> b) & 1) r = mul(r, a);
        }
    }
    return r;
}

}  // namespace fp
