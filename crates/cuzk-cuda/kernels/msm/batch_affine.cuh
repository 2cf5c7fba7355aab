// Batch-affine rounds of the bucket accumulation: within each bucket the entries are
// added in pairs, (e0 + e1), (e2 + e3), …, as affine points, every pair of the round
// sharing one field inversion (Montgomery's trick), so each addition costs about six
// products where the XYZZ mixed addition costs ten. A round halves every bucket; after
// the last one the usual XYZZ accumulation sums what is left (pippenger.cuh).
//
// A round reads a run of buckets (offsets[0..buckets], positions offsets[0] to
// offsets[buckets]) of either the sorted entries (point index << 1 | sign, into bases)
// or the points a previous round wrote, and writes bucket g's ⌈n_g/2⌉ sums to
// out[S_g ..], S_g = (offsets[g] − offsets[0] + g) / 2. Those ranges never overlap and
// leave at most one slot between buckets, which holds the point at infinity, so the
// output is again a run of buckets with offsets S (S_0 = 0); the gap slot counts as bucket
// g's last entry in the next round (an empty bucket becomes one ∞ entry), so a round's
// total is ⌊(total + buckets)/2⌋ at most: halving only while buckets hold several entries.
//
// Kernels, in order, per round:
//   msm_affine_offsets: S, and infinity in the gap slots;
//   msm_affine_prefix:  thread t takes `span` positions from offsets[0] + t·span; for the
//                       pairs starting there (even index within their bucket) it keeps
//                       the running product of d = x2 − x1, storing the product before
//                       each d (prefix) and the total (prod[t]); a lone last entry is
//                       copied out;
//   msm_affine_invert:  each thread inverts `group` consecutive totals with one inversion;
//   msm_affine_apply:   walking its pairs backwards from 1/prod[t], thread t recovers
//                       each 1/d and writes x3 = λ² − x1 − x2, y3 = λ(x1 − x3) − y1.
// A pair with x1 = 0, x2 = 0 or x1 = x2 (infinity, P + P, P − P, or the rare point with
// x = 0) stays out of the product chain: msm_affine_apply adds it in XYZZ and converts
// that one result with its own inversion only when it is a doubling or involves x = 0.
#pragma once
#include "../ec/xyzz.cuh"
#include "buckets.cuh"

template <class F>
__device__ __forceinline__ typename F::elem msm_affine_x(const ec::affine<F> *points, const uint32_t *sorted,
                                                         uint32_t indexed, uint32_t pos) {
    return points[indexed ? sorted[pos] >> 1 : pos].x;
}

template <class F>
__device__ __forceinline__ ec::affine<F> msm_affine_point(const ec::affine<F> *points, const uint32_t *sorted,
                                                          uint32_t indexed, uint32_t pos) {
    if (!indexed) return points[pos];
    const uint32_t e = sorted[pos];
    const ec::affine<F> p = points[e >> 1];
    return (e & 1) ? ec::neg(p) : p;
}

// Whether the pair stays out of the product chain (see the top of this file).
template <class F>
__device__ __forceinline__ bool msm_affine_special(const typename F::elem &x1, const typename F::elem &x2,
                                                   const typename F::elem &d) {
    return F::is_zero(d) || F::is_zero(x1) || F::is_zero(x2);
}

template <class F>
__device__ __forceinline__ void msm_affine_offsets(const uint32_t *__restrict__ offsets, uint32_t buckets,
                                                   uint32_t *out_offsets, ec::affine<F> *out) {
    const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g > buckets) return;
    const uint32_t o0 = offsets[0];
    const uint32_t s = (offsets[g] - o0 + g) >> 1;
    out_offsets[g] = s;
    if (g == buckets) return;
    const uint32_t n = offsets[g + 1] - offsets[g];
    const uint32_t next = (offsets[g + 1] - o0 + g + 1) >> 1;
    const ec::affine<F> inf{F::zero(), F::zero()};
    for (uint32_t slot = s + (n + 1) / 2; slot < next; slot++) out[slot] = inf;
}

template <class F>
__device__ __forceinline__ void msm_affine_prefix(const ec::affine<F> *__restrict__ points,
                                                  const uint32_t *__restrict__ sorted, uint32_t indexed,
                                                  const uint32_t *__restrict__ offsets, uint32_t buckets, uint32_t span,
                                                  uint32_t threads, const uint32_t *__restrict__ out_offsets,
                                                  typename F::elem *prefix, typename F::elem *prod,
                                                  ec::affine<F> *out) {
    typedef typename F::elem E;
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    const uint32_t p0 = offsets[0], p1 = offsets[buckets];
    // No wrap: lo ≤ p0 + threads·span stays below 2^32 (the host checks the capacity).
    const uint32_t lo = p0 + t * span, hi = lo < p1 ? lo + min(p1 - lo, span) : lo;
    E acc = F::one();
    if (lo < hi) {
        uint32_t g = msm_bucket_of(offsets, buckets, lo);
        uint32_t gs = offsets[g], ge = offsets[g + 1];
        // One pair (or lone last entry) per iteration, so the threads of a warp run their
        // products together: p is always the first of a pair, or a bucket's last entry.
        uint32_t p = lo + ((lo - gs) & 1);  // an odd start belongs to the previous thread's pair
        while (p < hi) {
            if (p >= ge) {  // p = ge: the next non-empty bucket starts here
                do g++;
                while (offsets[g + 1] <= p);
                gs = offsets[g];
                ge = offsets[g + 1];
            }
            const uint32_t slot = out_offsets[g] + (p - gs) / 2;
            if (p + 1 < ge) {
                const E x1 = msm_affine_x(points, sorted, indexed, p),
                        x2 = msm_affine_x(points, sorted, indexed, p + 1);
                const E d = F::sub(x2, x1);
                if (!msm_affine_special<F>(x1, x2, d)) {
                    prefix[(p - p0) >> 1] = acc;
                    acc = F::mul(acc, d);
                }
                p += 2;
            } else {
                out[slot] = msm_affine_point(points, sorted, indexed, p);
                p += 1;
            }
        }
    }
    prod[t] = acc;
}

template <class F>
__device__ __forceinline__ void msm_affine_invert(const typename F::elem *__restrict__ prod, uint32_t count,
                                                  uint32_t group, typename F::elem *inv) {
    typedef typename F::elem E;
    const uint32_t u = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t begin = u * group;
    if (begin >= count) return;
    const uint32_t end = begin + min(count - begin, group);
    E acc = F::one();
    for (uint32_t i = begin; i < end; i++) {
        inv[i] = acc;  // the product before i
        acc = F::mul(acc, prod[i]);
    }
    E ia = F::inv(acc);  // the totals are products of non-zero d: never 0
    for (uint32_t i = end; i-- > begin;) {
        const E v = F::mul(ia, inv[i]);
        ia = F::mul(ia, prod[i]);
        inv[i] = v;
    }
}

// P + Q for a pair outside the product chain, as an affine point.
// Out of line: rare, and its XYZZ addition and inversion would crowd the main path.
template <class F>
__device__ __noinline__ ec::affine<F> msm_affine_add_special(const ec::affine<F> &p, const ec::affine<F> &q) {
    if (ec::is_infinity(p)) return q;
    if (ec::is_infinity(q)) return p;
    const ec::xyzz<F> r = ec::add_affine(ec::from_affine(p), q);
    if (ec::is_infinity(r)) return ec::affine<F>{F::zero(), F::zero()};
    // 1/ZZ = t·ZZZ and 1/ZZZ = t·ZZ for t = 1/(ZZ·ZZZ).
    const typename F::elem t = F::inv(F::mul(r.zz, r.zzz));
    return ec::affine<F>{F::mul(r.x, F::mul(t, r.zzz)), F::mul(r.y, F::mul(t, r.zz))};
}

template <class F>
__device__ __forceinline__ void msm_affine_apply(const ec::affine<F> *__restrict__ points,
                                                 const uint32_t *__restrict__ sorted, uint32_t indexed,
                                                 const uint32_t *__restrict__ offsets, uint32_t buckets, uint32_t span,
                                                 uint32_t threads, const uint32_t *__restrict__ out_offsets,
                                                 const typename F::elem *__restrict__ prefix,
                                                 const typename F::elem *__restrict__ inv, ec::affine<F> *out) {
    typedef typename F::elem E;
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    const uint32_t p0 = offsets[0], p1 = offsets[buckets];
    // No wrap: lo ≤ p0 + threads·span stays below 2^32 (the host checks the capacity).
    const uint32_t lo = p0 + t * span, hi = lo < p1 ? lo + min(p1 - lo, span) : lo;
    if (lo >= hi) return;
    E ia = inv[t];  // 1 / (product of every d of this thread's chain so far)
    // The prefix kernel's pairs in reverse, one pair per iteration of the outer loop.
    int64_t p = (int64_t)hi - 1;
    uint32_t g = msm_bucket_of(offsets, buckets, hi - 1);
    uint32_t gs = offsets[g], ge = offsets[g + 1];
    for (;;) {
        // Move p to the last first-of-a-pair at or below it.
        while (p >= lo) {
            if (p < gs) {
                do g--;
                while (offsets[g] > p);
                gs = offsets[g];
                ge = offsets[g + 1];
            }
            if ((p - gs) & 1) {
                p--;  // the first of the pair ending at p
                break;
            }
            if (p + 1 < ge) break;
            p--;  // a lone last entry: not a pair
        }
        if (p < lo) break;
        const uint32_t q = (uint32_t)p;
        const ec::affine<F> a = msm_affine_point(points, sorted, indexed, q),
                            b = msm_affine_point(points, sorted, indexed, q + 1);
        const E d = F::sub(b.x, a.x);
        ec::affine<F> r;
        if (msm_affine_special<F>(a.x, b.x, d)) {
            r = msm_affine_add_special(a, b);
        } else {
            const E inv_d = F::mul(ia, prefix[(q - p0) >> 1]);
            ia = F::mul(ia, d);
            const E lambda = F::mul(F::sub(b.y, a.y), inv_d);
            r.x = F::sub(F::sub(F::sqr(lambda), a.x), b.x);
            r.y = F::sub(F::mul(lambda, F::sub(a.x, r.x)), a.y);
        }
        out[out_offsets[g] + (q - gs) / 2] = r;
        p -= 2;
    }
}

// Blocks of 128 per SM the apply kernel is compiled for (its register budget).
#ifndef MSM_AFFINE_APPLY_MIN_BLOCKS
#define MSM_AFFINE_APPLY_MIN_BLOCKS 1
#endif

#define MSM_AFFINE_KERNELS(G, F)                                                                                       \
    extern "C" __global__ void msm_affine_offsets_##G(const uint32_t *__restrict__ offsets, uint32_t buckets,          \
                                                      uint32_t *out_offsets, ec::affine<F> *out) {                     \
        msm_affine_offsets<F>(offsets, buckets, out_offsets, out);                                                     \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(128) msm_affine_prefix_##G(                                           \
        const ec::affine<F> *__restrict__ points, const uint32_t *__restrict__ sorted, uint32_t indexed,               \
        const uint32_t *__restrict__ offsets, uint32_t buckets, uint32_t span, uint32_t threads,                       \
        const uint32_t *__restrict__ out_offsets, F::elem *prefix, F::elem *prod, ec::affine<F> *out) {                \
        msm_affine_prefix<F>(points, sorted, indexed, offsets, buckets, span, threads, out_offsets, prefix, prod,      \
                             out);                                                                                     \
    }                                                                                                                  \
    extern "C" __global__ void msm_affine_invert_##G(const F::elem *__restrict__ prod, uint32_t count, uint32_t group, \
                                                     F::elem *inv) {                                                   \
        msm_affine_invert<F>(prod, count, group, inv);                                                                 \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(128, MSM_AFFINE_APPLY_MIN_BLOCKS) msm_affine_apply_##G(               \
        const ec::affine<F> *__restrict__ points, const uint32_t *__restrict__ sorted, uint32_t indexed,               \
        const uint32_t *__restrict__ offsets, uint32_t buckets, uint32_t span, uint32_t threads,                       \
        const uint32_t *__restrict__ out_offsets, const F::elem *__restrict__ prefix, const F::elem *__restrict__ inv, \
        ec::affine<F> *out) {                                                                                          \
        msm_affine_apply<F>(points, sorted, indexed, offsets, buckets, span, threads, out_offsets, prefix, inv, out);  \
    }
