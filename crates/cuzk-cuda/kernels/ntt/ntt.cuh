// Radix-2 NTT over Fr.
//
// Stage s combines elements 2^s apart. Decimation in time (DIT) runs stages 0, 1, …
// on bit-reversed input and yields natural order; decimation in frequency (DIF) runs
// them in the opposite order on natural input and yields bit-reversed order. Pairing
// a DIF transform with a DIT one needs no bit reversal in between.
//
// ntt_block runs the stages below k inside blocks of 2^k contiguous elements in
// shared memory; ntt_strided runs up to m stages s0..s0+m-1 on groups of 2^m
// elements spaced 2^s0 apart, also in shared memory, so the vector crosses device
// memory once per pass rather than once per stage.
//
// tw[j] = w^j for j < n/2, with w the forward or inverse n-th root of unity; a
// butterfly of stage s at offset j inside its half-block uses tw[j << (log_n-1-s)].
#pragma once
#include "../ff/fr.cuh"

__device__ __forceinline__ uint32_t bitrev32(uint32_t i, uint32_t log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

// DIT: (x, y) <- (x + w·y, x − w·y).  DIF: (x, y) <- (x + y, (x − y)·w).
__device__ __forceinline__ void butterfly(fr::elem &x, fr::elem &y, const fr::elem *tw, uint64_t widx, bool dif) {
    const bool trivial = widx == 0;
    if (dif) {
        fr::elem d = fr::sub(x, y);
        x = fr::add(x, y);
        y = trivial ? d : fr::mul(d, tw[widx]);
    } else {
        fr::elem t = trivial ? y : fr::mul(y, tw[widx]);
        y = fr::sub(x, t);
        x = fr::add(x, t);
    }
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
// 512 threads and at most 42 registers, so three blocks (1536 threads) fit an SM.
extern "C" __global__ void __launch_bounds__(512, 3) ntt_block(fr::elem *data, const fr::elem *__restrict__ tw, uint32_t log_n, uint32_t k,
                                     uint32_t dif) {
    extern __shared__ fr::elem sh[];
    const uint32_t size = 1u << k;
    fr::elem *base = data + (uint64_t)blockIdx.x * size;
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) sh[i] = base[i];
    __syncthreads();
    const uint32_t q = threadIdx.x;
    for (uint32_t step = 0; step < k; step++) {
        const uint32_t s = dif ? k - 1 - step : step;
        const uint32_t half = 1u << s;
        const uint32_t j = q & (half - 1);
        const uint32_t i0 = ((q >> s) << (s + 1)) | j;
        butterfly(sh[i0], sh[i0 + half], tw, (uint64_t)j << (log_n - 1 - s), dif);
        __syncthreads();
    }
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) base[i] = sh[i];
}

// Stages s0..s0+m-1. The elements (hi, mid, lo) = index bits split at s0+m and s0;
// the butterflies of these stages mix only elements of equal (hi, lo). A block
// takes 2^m values of mid for L consecutive lo (L a power of two dividing 2^s0):
// blockDim.x = 2^(m-1) * L, shared memory 2^m * L elements.
extern "C" __global__ void __launch_bounds__(512, 3) ntt_strided(fr::elem *data, const fr::elem *__restrict__ tw, uint32_t log_n, uint32_t s0,
                                       uint32_t m, uint32_t log_l, uint32_t dif) {
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
    for (uint32_t step = 0; step < m; step++) {
        const uint32_t t = dif ? m - 1 - step : step;
        const uint32_t half = 1u << t;
        const uint32_t jm = q & (half - 1);
        const uint32_t mid0 = ((q >> t) << (t + 1)) | jm;
        const uint32_t s = s0 + t;
        // Offset of this butterfly inside its block of 2^(s+1): (jm << s0) | lo.
        const uint64_t j = ((uint64_t)jm << s0) | (lo0 + l);
        butterfly(sh[(mid0 << log_l) | l], sh[((mid0 + half) << log_l) | l], tw, j << (log_n - 1 - s), dif);
        __syncthreads();
    }
    for (uint32_t e = threadIdx.x; e < rows * L; e += blockDim.x) {
        uint32_t mid = e >> log_l, l2 = e & (L - 1);
        data[hi_base | ((uint64_t)mid << s0) | (lo0 + l2)] = sh[e];
    }
}
