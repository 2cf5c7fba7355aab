// Elementwise scaling for the single transforms (the H polynomial fuses its pointwise
// steps into the NTT passes instead, see ntt.cuh).
#pragma once
#include "../ff/fr.cuh"

// v[i] *= c · x^i, with c · x^i = lo[i & (2^lo_bits - 1)] · hi[i >> lo_bits]: two small
// tables instead of one of n entries (c folds in 1/n where needed).
extern "C" __global__ void scale_by_powers(fr::elem *v, const fr::elem *__restrict__ lo,
                                           const fr::elem *__restrict__ hi, uint32_t lo_bits, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const fr::elem f = fr::mul(lo[i & ((1u << lo_bits) - 1)], hi[i >> lo_bits]);
        v[i] = fr::mul(v[i], f);
    }
}
