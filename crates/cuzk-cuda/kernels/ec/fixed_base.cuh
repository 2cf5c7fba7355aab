// Fixed-base scalar multiplication k_i·G for millions of scalars (a setup's query
// points), and the batch conversion of its XYZZ results to affine points.
//
// The table holds d·2^(c·w)·G for every window w and digit d < 2^c (entry 0, the
// identity, unused), so k·G is one mixed addition per non-zero c-bit digit of k: no
// doublings. With c = 16, G1's table is 16 × 65,536 points (100 MB), read at random.
//
// Conversion: an XYZZ point (X, Y, ZZ, ZZZ) is (X/ZZ, Y/ZZZ). With t = 1/ZZZ,
// 1/ZZ = (ZZ·t)² (as ZZ³ = ZZZ²), so one inversion per point suffices, and each thread
// shares one inversion across FIXED_BASE_BATCH points (Montgomery's trick).
#pragma once
#include "../ff/fr.cuh"
#include "xyzz.cuh"

// out[i] = scalars[i]·G in XYZZ form, for c-bit windows (c divides 32).
template <class F>
__device__ __forceinline__ void fixed_base_mul(const ec::affine<F> *__restrict__ table, uint32_t c, uint32_t windows,
                                               const fr::elem *__restrict__ scalars, uint32_t n,
                                               ec::xyzz<F> *__restrict__ out) {
    const uint32_t per_limb = 32 / c, mask = (c == 32) ? 0xffffffffu : (1u << c) - 1;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const fr::elem k = fr::from_montgomery(scalars[i]);
        ec::xyzz<F> acc = ec::infinity<F>();
        for (uint32_t w = 0; w < windows; w++) {
            const uint32_t d = (k.l[w / per_limb] >> ((w % per_limb) * c)) & mask;
            if (d != 0) acc = ec::add_affine(acc, table[((size_t)w << c) + d]);
        }
        out[i] = acc;
    }
}

#define FIXED_BASE_BATCH 16

// out[i] = the affine form of in[i] (infinity as (0, 0)); one thread per run of
// FIXED_BASE_BATCH consecutive points.
template <class F>
__device__ __forceinline__ void fixed_base_to_affine(const ec::xyzz<F> *__restrict__ in, uint32_t n,
                                                     ec::affine<F> *__restrict__ out) {
    typedef typename F::elem E;
    const uint32_t runs = (n + FIXED_BASE_BATCH - 1) / FIXED_BASE_BATCH;
    for (uint32_t r = blockIdx.x * blockDim.x + threadIdx.x; r < runs; r += gridDim.x * blockDim.x) {
        const uint32_t begin = r * FIXED_BASE_BATCH, len = min(n - begin, (uint32_t)FIXED_BASE_BATCH);
        // prefix[j] = product of the non-zero ZZZ before j.
        E prefix[FIXED_BASE_BATCH];
        E acc = F::one();
        for (uint32_t j = 0; j < len; j++) {
            prefix[j] = acc;
            const E &zzz = in[begin + j].zzz;
            if (!F::is_zero(zzz)) acc = F::mul(acc, zzz);
        }
        E inv = F::inv(acc);  // 1 / (product of all non-zero ZZZ)
        for (uint32_t j = len; j-- > 0;) {
            const ec::xyzz<F> p = in[begin + j];
            if (F::is_zero(p.zzz)) {
                out[begin + j] = ec::affine<F>{F::zero(), F::zero()};
                continue;
            }
            const E t = F::mul(inv, prefix[j]);  // 1/ZZZ
            inv = F::mul(inv, p.zzz);
            const E zz_inv = F::sqr(F::mul(p.zz, t));
            out[begin + j] = ec::affine<F>{F::mul(p.x, zz_inv), F::mul(p.y, t)};
        }
    }
}

#define FIXED_BASE_KERNELS(G, F)                                                                                      \
    extern "C" __global__ void fixed_base_mul_##G(const ec::affine<F> *__restrict__ table, uint32_t c,                \
                                                  uint32_t windows, const fr::elem *__restrict__ scalars, uint32_t n, \
                                                  ec::xyzz<F> *__restrict__ out) {                                    \
        fixed_base_mul<F>(table, c, windows, scalars, n, out);                                                        \
    }                                                                                                                 \
    extern "C" __global__ void fixed_base_to_affine_##G(const ec::xyzz<F> *__restrict__ in, uint32_t n,               \
                                                        ec::affine<F> *__restrict__ out) {                            \
        fixed_base_to_affine<F>(in, n, out);                                                                          \
    }

FIXED_BASE_KERNELS(g1, ec::fp_field)
FIXED_BASE_KERNELS(g2, ec::fp2_field)
