// Fp2 = Fp[u]/(u² + 1), the field of G2's coordinates: c0 + c1·u, the layout of blst's
// blst_fp2 (two blst_fp).
#pragma once
#include "fp.cuh"

namespace fp2 {

struct elem {
    fp::elem c0, c1;
};

__device__ __forceinline__ elem zero() { return elem{fp::zero(), fp::zero()}; }
__device__ __forceinline__ elem one() { return elem{fp::one(), fp::zero()}; }
__device__ __forceinline__ bool is_zero(const elem &a) { return fp::is_zero(a.c0) && fp::is_zero(a.c1); }
__device__ __forceinline__ bool equal(const elem &a, const elem &b) {
    return fp::equal(a.c0, b.c0) && fp::equal(a.c1, b.c1);
}
__device__ __forceinline__ elem add(const elem &a, const elem &b) {
    return elem{fp::add(a.c0, b.c0), fp::add(a.c1, b.c1)};
}
__device__ __forceinline__ elem sub(const elem &a, const elem &b) {
    return elem{fp::sub(a.c0, b.c0), fp::sub(a.c1, b.c1)};
}

// Three Fp products (Karatsuba): c0 = a0·b0 − a1·b1, c1 = (a0 + a1)(b0 + b1) − a0·b0 − a1·b1.
// Out of line, like fp::mul, to keep the G2 kernels' size and compile time down. Unlike
// fp::mul, the operands are taken by reference: measured on the H200, by value made G2
// accumulation 1.4× slower (2^22: 198 → 143 ms by reference), by-reference fp::mul
// made G1 8 % slower.
__device__ __noinline__ elem mul(const elem &a, const elem &b) {
    // The sums first: a and b need not stay live across the products.
    const fp::elem sa = fp::add(a.c0, a.c1), sb = fp::add(b.c0, b.c1);
    const fp::elem t0 = fp::mul(a.c0, b.c0), t1 = fp::mul(a.c1, b.c1), t2 = fp::mul(sa, sb);
    return elem{fp::sub(t0, t1), fp::sub(fp::sub(t2, t0), t1)};
}

// Two Fp products: c0 = (a0 + a1)(a0 − a1), c1 = 2·a0·a1.
__device__ __noinline__ elem sqr(const elem &a) {
    const fp::elem s = fp::add(a.c0, a.c1), d = fp::sub(a.c0, a.c1);
    const fp::elem c0 = fp::mul(s, d), t = fp::mul(a.c0, a.c1);
    return elem{c0, fp::add(t, t)};
}

// 1/(c0 + c1·u) = (c0 − c1·u)/(c0² + c1²): one Fp inversion; 0 for 0.
__device__ __noinline__ elem inv(const elem &a) {
    const fp::elem t = fp::inv(fp::add(fp::sqr(a.c0), fp::sqr(a.c1)));
    return elem{fp::mul(a.c0, t), fp::sub(fp::zero(), fp::mul(a.c1, t))};
}

}  // namespace fp2
