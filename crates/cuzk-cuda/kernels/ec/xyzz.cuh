// Points of G1 (over Fp) and G2 (over Fp2) of BLS12-381 for the MSM: affine inputs,
// XYZZ accumulators. Both curves have a = 0 (y² = x³ + b), and these formulas never use
// b, so one set of templates over the coordinate field serves both.
//
// An XYZZ point (X, Y, ZZ, ZZZ) stands for the affine (X/ZZ, Y/ZZZ), with ZZ³ = ZZZ²;
// ZZ = 0 is the point at infinity. Affine points use blst's convention: (0, 0) is
// infinity (no curve point has x = 0 and y = 0, since b is not 0).
// Formulas: the XYZZ ones for a = 0 of the Explicit-Formulas Database (madd-2008-s,
// add-2008-s, dbl-2008-s-1, mdbl-2008-s-1), with the equal-point and inverse-point
// cases sent to doubling and to infinity.
#pragma once
#include "../ff/fp.cuh"
#include "../ff/fp2.cuh"

namespace ec {

// The coordinate fields, as template arguments.
struct fp_field {
    typedef fp::elem elem;
    __device__ __forceinline__ static elem zero() { return fp::zero(); }
    __device__ __forceinline__ static elem one() { return fp::one(); }
    __device__ __forceinline__ static bool is_zero(const elem &a) { return fp::is_zero(a); }
    __device__ __forceinline__ static elem add(const elem &a, const elem &b) { return fp::add(a, b); }
    __device__ __forceinline__ static elem sub(const elem &a, const elem &b) { return fp::sub(a, b); }
    __device__ __forceinline__ static elem mul(const elem &a, const elem &b) { return fp::mul(a, b); }
    __device__ __forceinline__ static elem sqr(const elem &a) { return fp::sqr(a); }
};

struct fp2_field {
    typedef fp2::elem elem;
    __device__ __forceinline__ static elem zero() { return fp2::zero(); }
    __device__ __forceinline__ static elem one() { return fp2::one(); }
    __device__ __forceinline__ static bool is_zero(const elem &a) { return fp2::is_zero(a); }
    __device__ __forceinline__ static elem add(const elem &a, const elem &b) { return fp2::add(a, b); }
    __device__ __forceinline__ static elem sub(const elem &a, const elem &b) { return fp2::sub(a, b); }
    __device__ __forceinline__ static elem mul(const elem &a, const elem &b) { return fp2::mul(a, b); }
    __device__ __forceinline__ static elem sqr(const elem &a) { return fp2::sqr(a); }
};

template <class F>
struct affine {
    typename F::elem x, y;
};

template <class F>
struct xyzz {
    typename F::elem x, y, zz, zzz;
};

template <class F>
__device__ __forceinline__ bool is_infinity(const affine<F> &p) {
    return F::is_zero(p.x) && F::is_zero(p.y);
}
template <class F>
__device__ __forceinline__ bool is_infinity(const xyzz<F> &p) {
    return F::is_zero(p.zz);
}

template <class F>
__device__ __forceinline__ xyzz<F> infinity() {
    return xyzz<F>{F::zero(), F::zero(), F::zero(), F::zero()};
}

template <class F>
__device__ __forceinline__ xyzz<F> from_affine(const affine<F> &p) {
    if (is_infinity(p)) return infinity<F>();
    return xyzz<F>{p.x, p.y, F::one(), F::one()};
}

// The doubling shared by both forms: from (X, Y) gives X3, Y3 and the factors V, W
// by which ZZ and ZZZ are multiplied (dbl-2008-s-1; for an affine point, mdbl-2008-s-1
// with ZZ = ZZZ = 1). Y = 0 does not occur on G1 (no point of order 2), but gives
// V = 0, i.e. infinity, all the same.
template <class F>
__device__ __forceinline__ void dbl_core(const typename F::elem &x, const typename F::elem &y, xyzz<F> &r,
                                         typename F::elem &v, typename F::elem &w) {
    const typename F::elem u = F::add(y, y);
    v = F::sqr(u);
    w = F::mul(u, v);
    const typename F::elem s = F::mul(x, v);
    const typename F::elem xx = F::sqr(x);
    const typename F::elem m = F::add(F::add(xx, xx), xx);
    r.x = F::sub(F::sub(F::sqr(m), s), s);
    r.y = F::sub(F::mul(m, F::sub(s, r.x)), F::mul(w, y));
}

// 2·(x, y) for an affine point.
template <class F>
__device__ __forceinline__ xyzz<F> dbl_affine(const affine<F> &p) {
    if (is_infinity(p)) return infinity<F>();
    xyzz<F> r;
    dbl_core<F>(p.x, p.y, r, r.zz, r.zzz);
    return r;
}

// 2·p.
template <class F>
__device__ __forceinline__ xyzz<F> dbl(const xyzz<F> &p) {
    if (is_infinity(p)) return p;
    xyzz<F> r;
    typename F::elem v, w;
    dbl_core<F>(p.x, p.y, r, v, w);
    r.zz = F::mul(v, p.zz);
    r.zzz = F::mul(w, p.zzz);
    return r;
}

// p + q for an affine q (madd-2008-s).
template <class F>
__device__ __forceinline__ xyzz<F> add_affine(const xyzz<F> &p, const affine<F> &q) {
    if (is_infinity(q)) return p;
    if (is_infinity(p)) return from_affine(q);
    const typename F::elem u2 = F::mul(q.x, p.zz);
    const typename F::elem s2 = F::mul(q.y, p.zzz);
    const typename F::elem pp_ = F::sub(u2, p.x);
    const typename F::elem r_ = F::sub(s2, p.y);
    if (F::is_zero(pp_)) return F::is_zero(r_) ? dbl_affine(q) : infinity<F>();
    const typename F::elem pp = F::sqr(pp_);
    const typename F::elem ppp = F::mul(pp_, pp);
    const typename F::elem q_ = F::mul(p.x, pp);
    xyzz<F> r;
    r.x = F::sub(F::sub(F::sub(F::sqr(r_), ppp), q_), q_);
    r.y = F::sub(F::mul(r_, F::sub(q_, r.x)), F::mul(p.y, ppp));
    r.zz = F::mul(p.zz, pp);
    r.zzz = F::mul(p.zzz, ppp);
    return r;
}

// p + q (add-2008-s).
template <class F>
__device__ __forceinline__ xyzz<F> add(const xyzz<F> &p, const xyzz<F> &q) {
    if (is_infinity(q)) return p;
    if (is_infinity(p)) return q;
    const typename F::elem u1 = F::mul(p.x, q.zz);
    const typename F::elem u2 = F::mul(q.x, p.zz);
    const typename F::elem s1 = F::mul(p.y, q.zzz);
    const typename F::elem s2 = F::mul(q.y, p.zzz);
    const typename F::elem pp_ = F::sub(u2, u1);
    const typename F::elem r_ = F::sub(s2, s1);
    if (F::is_zero(pp_)) return F::is_zero(r_) ? dbl(p) : infinity<F>();
    const typename F::elem pp = F::sqr(pp_);
    const typename F::elem ppp = F::mul(pp_, pp);
    const typename F::elem q_ = F::mul(u1, pp);
    xyzz<F> r;
    r.x = F::sub(F::sub(F::sub(F::sqr(r_), ppp), q_), q_);
    r.y = F::sub(F::mul(r_, F::sub(q_, r.x)), F::mul(s1, ppp));
    r.zz = F::mul(F::mul(p.zz, q.zz), pp);
    r.zzz = F::mul(F::mul(p.zzz, q.zzz), ppp);
    return r;
}

template <class F>
__device__ __forceinline__ affine<F> neg(const affine<F> &p) {
    if (is_infinity(p)) return p;
    return affine<F>{p.x, F::sub(F::zero(), p.y)};
}

}  // namespace ec

// The two groups.
namespace g1 {
typedef ec::fp_field field;
typedef ec::affine<field> affine;
typedef ec::xyzz<field> xyzz;
__device__ __forceinline__ xyzz infinity() { return ec::infinity<field>(); }
using ec::add;
using ec::add_affine;
using ec::dbl;
using ec::from_affine;
using ec::neg;
}  // namespace g1

namespace g2 {
typedef ec::fp2_field field;
typedef ec::affine<field> affine;
typedef ec::xyzz<field> xyzz;
}  // namespace g2
