// Elementwise passes of the H polynomial.
#pragma once
#include "../ff/fr.cuh"

// v[p] *= c · g^i with i = p, or i = bitrev(p) when the vector is in bit-reversed
// order (rev_bits = log n; 0 for natural order). g^i = lo[i & (2^lo_bits - 1)] ·
// hi[i >> lo_bits]: two small tables instead of one of n entries; c folds in 1/n.
extern "C" __global__ void scale_by_powers(fr::elem *v, const fr::elem *__restrict__ lo,
                                           const fr::elem *__restrict__ hi, uint32_t lo_bits, uint64_t n,
                                           uint32_t rev_bits) {
    for (uint64_t p = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; p < n; p += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = rev_bits ? (__brev((uint32_t)p) >> (32 - rev_bits)) : p;
        fr::elem f = fr::mul(lo[i & ((1u << lo_bits) - 1)], hi[i >> lo_bits]);
        v[p] = fr::mul(v[p], f);
    }
}

// a[i] = (a[i] · b[i] − c[i]) · z_inv.
extern "C" __global__ void abc_combine(fr::elem *a, const fr::elem *__restrict__ b, const fr::elem *__restrict__ c,
                                       fr::elem z_inv, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        a[i] = fr::mul(fr::sub(fr::mul(a[i], b[i]), c[i]), z_inv);
}
