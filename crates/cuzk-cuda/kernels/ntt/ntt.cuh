// Radix-2 NTT over Fr, decimation in time on bit-reversed input.
//
// A transform of size n = 2^log_n is: bit_reverse (in place), ntt_block for the
// first stages inside blocks of 2^k contiguous elements in shared memory, then
// ntt_strided passes that each run up to m further stages on groups of 2^m elements
// spaced 2^s0 apart, also in shared memory, so the vector crosses device memory
// once per pass rather than once per stage.
//
// tw[j] = w^j for j < n/2, with w the forward or inverse n-th root of unity.
#pragma once
#include "../ff/fr.cuh"

__device__ __forceinline__ uint32_t bitrev32(uint32_t i, uint32_t log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

__device__ __forceinline__ void butterfly(fr::elem &x, fr::elem &y, const fr::elem &w, bool trivial) {
    fr::elem t = trivial ? y : fr::mul(y, w);
    y = fr::sub(x, t);
    x = fr::add(x, t);
}

// In-place bit-reversal permutation: the pair {i, bitrev(i)} is swapped by the thread
// of the smaller index, so no element is touched twice.
extern "C" __global__ void ntt_bit_reverse(fr::elem *data, uint32_t log_n) {
    uint64_t n = 1ull << log_n;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t j = bitrev32((uint32_t)i, log_n);
        if (i < j) {
            fr::elem t = data[i];
            data[i] = data[j];
            data[j] = t;
        }
    }
}

// Stages 0..k-1 on each block of 2^k contiguous elements; blockDim.x = 2^(k-1).
extern "C" __global__ void ntt_block(fr::elem *data, const fr::elem *__restrict__ tw, uint32_t log_n, uint32_t k) {
    extern __shared__ fr::elem sh[];
    const uint32_t size = 1u << k;
    fr::elem *base = data + (uint64_t)blockIdx.x * size;
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) sh[i] = base[i];
    __syncthreads();
    const uint32_t q = threadIdx.x;
    for (uint32_t s = 0; s < k; s++) {
        const uint32_t half = 1u << s;
        const uint32_t j = q & (half - 1);
        const uint32_t i0 = ((q >> s) << (s + 1)) | j;
        const uint64_t widx = (uint64_t)j << (log_n - 1 - s);
        butterfly(sh[i0], sh[i0 + half], tw[widx], j == 0);
        __syncthreads();
    }
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) base[i] = sh[i];
}

// Stages s0..s0+m-1. The elements (hi, mid, lo) = index bits split at s0+m and s0;
// the butterflies of these stages mix only elements of equal (hi, lo). A block
// takes 2^m values of mid for L consecutive lo (L a power of two dividing 2^s0):
// blockDim.x = 2^(m-1) * L, shared memory 2^m * L elements.
extern "C" __global__ void ntt_strided(fr::elem *data, const fr::elem *__restrict__ tw, uint32_t log_n, uint32_t s0,
                                       uint32_t m, uint32_t log_l) {
    extern __shared__ fr::elem sh[];
    const uint32_t L = 1u << log_l;
    const uint32_t groups_per_hi = 1u << (s0 - log_l);
    const uint64_t hi = blockIdx.x / groups_per_hi;
    const uint32_t lo0 = (blockIdx.x % groups_per_hi) << log_l;
    const uint32_t rows = 1u << m;
    const uint64_t hi_base = hi << (s0 + m);
    // Load: consecutive threads take consecutive lo, so global reads come in runs of L.
    for (uint32_t e = threadIdx.x; e < rows * L; e += blockDim.x) {
        uint32_t mid = e >> log_l, l = e & (L - 1);
        sh[e] = data[hi_base | ((uint64_t)mid << s0) | (lo0 + l)];
    }
    __syncthreads();
    const uint32_t l = threadIdx.x & (L - 1);
    const uint32_t q = threadIdx.x >> log_l;  // butterfly within the group, < 2^(m-1)
    for (uint32_t t = 0; t < m; t++) {
        const uint32_t half = 1u << t;
        const uint32_t jm = q & (half - 1);
        const uint32_t mid0 = ((q >> t) << (t + 1)) | jm;
        const uint32_t s = s0 + t;
        // Offset of this butterfly inside its block of 2^(s+1): (jm << s0) | lo.
        const uint64_t j = ((uint64_t)jm << s0) | (lo0 + l);
        const uint64_t widx = j << (log_n - 1 - s);
        butterfly(sh[(mid0 << log_l) | l], sh[((mid0 + half) << log_l) | l], tw[widx], j == 0);
        __syncthreads();
    }
    for (uint32_t e = threadIdx.x; e < rows * L; e += blockDim.x) {
        uint32_t mid = e >> log_l, l2 = e & (L - 1);
        data[hi_base | ((uint64_t)mid << s0) | (lo0 + l2)] = sh[e];
    }
}
