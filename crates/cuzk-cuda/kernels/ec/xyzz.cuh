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

// Results of two and three independent products. The formulas below group their
// products by dependency level; the fields compute a group as separate out-of-line
// products. Written this way, the G2 accumulation's stack frame is 464 bytes, against
// 1,192 for the same products one after another, and it ran 2.9× faster
// (bench/results/2026-11-30-gpu-msm-sort-by-value-5d5eeb6.txt).
template <class E>
struct two {
    E v0, v1;
};
template <class E>
struct three {
    E v0, v1, v2;
};

// The coordinate fields, as template arguments: namespace NS provides elem, zero, one,
// is_zero, equal, add, sub, mul, sqr and inv; a group of products is separate calls.
#define EC_COORDINATE_FIELD(NAME, NS)                                                                          \
    struct NAME {                                                                                              \
        typedef NS::elem elem;                                                                                 \
        __device__ __forceinline__ static elem zero() { return NS::zero(); }                                   \
        __device__ __forceinline__ static elem one() { return NS::one(); }                                     \
        __device__ __forceinline__ static bool is_zero(const elem &a) { return NS::is_zero(a); }               \
        __device__ __forceinline__ static bool equal(const elem &a, const elem &b) { return NS::equal(a, b); } \
        __device__ __forceinline__ static elem add(const elem &a, const elem &b) { return NS::add(a, b); }     \
        __device__ __forceinline__ static elem sub(const elem &a, const elem &b) { return NS::sub(a, b); }     \
        __device__ __forceinline__ static elem mul(const elem &a, const elem &b) { return NS::mul(a, b); }     \
        __device__ __forceinline__ static elem sqr(const elem &a) { return NS::sqr(a); }                       \
        __device__ __forceinline__ static elem inv(const elem &a) { return NS::inv(a); }                       \
        __device__ __forceinline__ static two<elem> mul2(const elem &a0, const elem &b0, const elem &a1,       \
                                                         const elem &b1) {                                     \
            return two<elem>{NS::mul(a0, b0), NS::mul(a1, b1)};                                                \
        }                                                                                                      \
        __device__ __forceinline__ static two<elem> sqr2(const elem &a0, const elem &a1) {                     \
            return two<elem>{NS::sqr(a0), NS::sqr(a1)};                                                        \
        }                                                                                                      \
        __device__ __forceinline__ static three<elem> mul3(const elem &a0, const elem &b0, const elem &a1,     \
                                                           const elem &b1, const elem &a2, const elem &b2) {   \
            return three<elem>{NS::mul(a0, b0), NS::mul(a1, b1), NS::mul(a2, b2)};                             \
        }                                                                                                      \
    };

EC_COORDINATE_FIELD(fp_field, fp)
EC_COORDINATE_FIELD(fp2_field, fp2)

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

// The doubling of (X, Y, ZZ, ZZZ) (dbl-2008-s-1; for an affine point mdbl-2008-s-1, with
// ZZ = ZZZ = 1 and their two products skipped). Y = 0 does not occur on G1 (no point
// of order 2), but gives V = 0, i.e. infinity, all the same.
template <class F, bool AFFINE>
__device__ __forceinline__ xyzz<F> dbl_generic(const typename F::elem &x, const typename F::elem &y,
                                               const typename F::elem &zz, const typename F::elem &zzz) {
    typedef typename F::elem E;
    const E u = F::add(y, y);
    const two<E> vx = F::sqr2(u, x);  // V = U², X²
    const E &v = vx.v0;
    const two<E> ws = F::mul2(u, v, x, v);  // W = U·V, S = X·V
    const E &w = ws.v0, &s = ws.v1;
    const E m = F::add(F::add(vx.v1, vx.v1), vx.v1);
    xyzz<F> r;
    if (AFFINE) {
        const two<E> t = F::mul2(m, m, w, y);  // M², W·Y
        r.x = F::sub(F::sub(t.v0, s), s);
        r.y = F::sub(F::mul(m, F::sub(s, r.x)), t.v1);
        r.zz = v;
        r.zzz = w;
    } else {
        const three<E> t = F::mul3(m, m, w, y, v, zz);  // M², W·Y, V·ZZ
        r.x = F::sub(F::sub(t.v0, s), s);
        const two<E> t2 = F::mul2(m, F::sub(s, r.x), w, zzz);
        r.y = F::sub(t2.v0, t.v1);
        r.zz = t.v2;
        r.zzz = t2.v1;
    }
    return r;
}

// 2·(x, y) for an affine point.
template <class F>
__device__ __forceinline__ xyzz<F> dbl_affine(const affine<F> &p) {
    if (is_infinity(p)) return infinity<F>();
    return dbl_generic<F, true>(p.x, p.y, p.x, p.y);
}

// 2·p.
template <class F>
__device__ __forceinline__ xyzz<F> dbl(const xyzz<F> &p) {
    if (is_infinity(p)) return p;
    return dbl_generic<F, false>(p.x, p.y, p.zz, p.zzz);
}

// p + q for an affine q (madd-2008-s).
template <class F>
__device__ __forceinline__ xyzz<F> add_affine(const xyzz<F> &p, const affine<F> &q) {
    typedef typename F::elem E;
    if (is_infinity(q)) return p;
    if (is_infinity(p)) return from_affine(q);
    const two<E> us = F::mul2(q.x, p.zz, q.y, p.zzz);  // U2, S2
    const E pp_ = F::sub(us.v0, p.x);
    const E r_ = F::sub(us.v1, p.y);
    if (F::is_zero(pp_)) return F::is_zero(r_) ? dbl_affine(q) : infinity<F>();
    const two<E> sq = F::sqr2(pp_, r_);  // PP, R²
    const E &pp = sq.v0;
    const three<E> t = F::mul3(pp_, pp, p.x, pp, p.zz, pp);  // PPP, Q, ZZ·PP
    const E &ppp = t.v0, &q_ = t.v1;
    xyzz<F> r;
    r.x = F::sub(F::sub(F::sub(sq.v1, ppp), q_), q_);
    const three<E> t2 = F::mul3(r_, F::sub(q_, r.x), p.y, ppp, p.zzz, ppp);
    r.y = F::sub(t2.v0, t2.v1);
    r.zz = t.v2;
    r.zzz = t2.v2;
    return r;
}

// p + q (add-2008-s).
template <class F>
__device__ __forceinline__ xyzz<F> add(const xyzz<F> &p, const xyzz<F> &q) {
    typedef typename F::elem E;
    if (is_infinity(q)) return p;
    if (is_infinity(p)) return q;
    const three<E> a = F::mul3(p.x, q.zz, q.x, p.zz, p.y, q.zzz);      // U1, U2, S1
    const three<E> b = F::mul3(q.y, p.zzz, p.zz, q.zz, p.zzz, q.zzz);  // S2, ZZ1·ZZ2, ZZZ1·ZZZ2
    const E &u1 = a.v0, &s1 = a.v2;
    const E pp_ = F::sub(a.v1, u1);
    const E r_ = F::sub(b.v0, s1);
    if (F::is_zero(pp_)) return F::is_zero(r_) ? dbl(p) : infinity<F>();
    const two<E> sq = F::sqr2(pp_, r_);  // PP, R²
    const E &pp = sq.v0;
    const three<E> t = F::mul3(pp_, pp, u1, pp, b.v1, pp);  // PPP, Q, ZZ1·ZZ2·PP
    const E &ppp = t.v0, &q_ = t.v1;
    xyzz<F> r;
    r.x = F::sub(F::sub(F::sub(sq.v1, ppp), q_), q_);
    const three<E> t2 = F::mul3(r_, F::sub(q_, r.x), s1, ppp, b.v2, ppp);
    r.y = F::sub(t2.v0, t2.v1);
    r.zz = t.v2;
    r.zzz = t2.v2;
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
