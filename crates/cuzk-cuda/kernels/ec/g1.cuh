// G1 of BLS12-381 (y² = x³ + 4 over Fp) for the MSM: affine inputs, XYZZ accumulators.
//
// An XYZZ point (X, Y, ZZ, ZZZ) stands for the affine (X/ZZ, Y/ZZZ), with ZZ³ = ZZZ²;
// ZZ = 0 is the point at infinity. Affine points use blst's convention: (0, 0) is
// infinity (no curve point has x = 0 and y = 0, since 4 is not 0).
// Formulas: the XYZZ ones for a = 0 of the Explicit-Formulas Database (madd-2008-s,
// add-2008-s, dbl-2008-s-1, mdbl-2008-s-1), with the equal-point and inverse-point
// cases sent to doubling and to infinity.
#pragma once
#include "../ff/fp.cuh"

namespace g1 {

struct affine {
    fp::elem x, y;
};

struct xyzz {
    fp::elem x, y, zz, zzz;
};

__device__ __forceinline__ bool is_zero(const fp::elem &a) {
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) acc |= a.l[i];
    return acc == 0;
}

__device__ __forceinline__ bool equal(const fp::elem &a, const fp::elem &b) {
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) acc |= a.l[i] ^ b.l[i];
    return acc == 0;
}

__device__ __forceinline__ bool is_infinity(const affine &p) { return is_zero(p.x) && is_zero(p.y); }
__device__ __forceinline__ bool is_infinity(const xyzz &p) { return is_zero(p.zz); }

__device__ __forceinline__ xyzz infinity() {
    xyzz r;
#pragma unroll
    for (int i = 0; i < 12; i++) r.x.l[i] = r.y.l[i] = r.zz.l[i] = r.zzz.l[i] = 0;
    return r;
}

// 1 in Montgomery form: 2^384 mod p.
__device__ __forceinline__ fp::elem one() {
    const uint32_t r[12] = {0x0002fffdu, 0x76090000u, 0xc40c0002u, 0xebf4000bu, 0x53c758bau, 0x5f489857u,
                            0x70525745u, 0x77ce5853u, 0xa256ec6du, 0x5c071a97u, 0xfa80e493u, 0x15f65ec3u};
    fp::elem o;
#pragma unroll
    for (int i = 0; i < 12; i++) o.l[i] = r[i];
    return o;
}

__device__ __forceinline__ xyzz from_affine(const affine &p) {
    if (is_infinity(p)) return infinity();
    return xyzz{p.x, p.y, one(), one()};
}

// The doubling shared by both forms: from (X, Y) gives X3, Y3 and the factors V, W
// by which ZZ and ZZZ are multiplied (dbl-2008-s-1; for an affine point, mdbl-2008-s-1
// with ZZ = ZZZ = 1). Y = 0 does not occur on G1 (no point of order 2), but gives
// V = 0, i.e. infinity, all the same.
__device__ __forceinline__ void dbl_core(const fp::elem &x, const fp::elem &y, xyzz &r, fp::elem &v, fp::elem &w) {
    const fp::elem u = fp::add(y, y);
    v = fp::sqr(u);
    w = fp::mul(u, v);
    const fp::elem s = fp::mul(x, v);
    const fp::elem xx = fp::sqr(x);
    const fp::elem m = fp::add(fp::add(xx, xx), xx);
    r.x = fp::sub(fp::sub(fp::sqr(m), s), s);
    r.y = fp::sub(fp::mul(m, fp::sub(s, r.x)), fp::mul(w, y));
}

// 2·(x, y) for an affine point.
__device__ __forceinline__ xyzz dbl_affine(const affine &p) {
    if (is_infinity(p)) return infinity();
    xyzz r;
    dbl_core(p.x, p.y, r, r.zz, r.zzz);
    return r;
}

// 2·p.
__device__ __forceinline__ xyzz dbl(const xyzz &p) {
    if (is_infinity(p)) return p;
    xyzz r;
    fp::elem v, w;
    dbl_core(p.x, p.y, r, v, w);
    r.zz = fp::mul(v, p.zz);
    r.zzz = fp::mul(w, p.zzz);
    return r;
}

// p + q for an affine q (madd-2008-s).
__device__ __forceinline__ xyzz add_affine(const xyzz &p, const affine &q) {
    if (is_infinity(q)) return p;
    if (is_infinity(p)) return from_affine(q);
    const fp::elem u2 = fp::mul(q.x, p.zz);
    const fp::elem s2 = fp::mul(q.y, p.zzz);
    const fp::elem pp_ = fp::sub(u2, p.x);
    const fp::elem r_ = fp::sub(s2, p.y);
    if (is_zero(pp_)) return is_zero(r_) ? dbl_affine(q) : infinity();
    const fp::elem pp = fp::sqr(pp_);
    const fp::elem ppp = fp::mul(pp_, pp);
    const fp::elem q_ = fp::mul(p.x, pp);
    xyzz r;
    r.x = fp::sub(fp::sub(fp::sub(fp::sqr(r_), ppp), q_), q_);
    r.y = fp::sub(fp::mul(r_, fp::sub(q_, r.x)), fp::mul(p.y, ppp));
    r.zz = fp::mul(p.zz, pp);
    r.zzz = fp::mul(p.zzz, ppp);
    return r;
}

// p + q (add-2008-s).
__device__ __forceinline__ xyzz add(const xyzz &p, const xyzz &q) {
    if (is_infinity(q)) return p;
    if (is_infinity(p)) return q;
    const fp::elem u1 = fp::mul(p.x, q.zz);
    const fp::elem u2 = fp::mul(q.x, p.zz);
    const fp::elem s1 = fp::mul(p.y, q.zzz);
    const fp::elem s2 = fp::mul(q.y, p.zzz);
    const fp::elem pp_ = fp::sub(u2, u1);
    const fp::elem r_ = fp::sub(s2, s1);
    if (is_zero(pp_)) return is_zero(r_) ? dbl(p) : infinity();
    const fp::elem pp = fp::sqr(pp_);
    const fp::elem ppp = fp::mul(pp_, pp);
    const fp::elem q_ = fp::mul(u1, pp);
    xyzz r;
    r.x = fp::sub(fp::sub(fp::sub(fp::sqr(r_), ppp), q_), q_);
    r.y = fp::sub(fp::mul(r_, fp::sub(q_, r.x)), fp::mul(s1, ppp));
    r.zz = fp::mul(fp::mul(p.zz, q.zz), pp);
    r.zzz = fp::mul(fp::mul(p.zzz, q.zzz), ppp);
    return r;
}

__device__ __forceinline__ affine neg(const affine &p) {
    if (is_infinity(p)) return p;
    fp::elem zero;
#pragma unroll
    for (int i = 0; i < 12; i++) zero.l[i] = 0;
    return affine{p.x, fp::sub(zero, p.y)};
}

}  // namespace g1
