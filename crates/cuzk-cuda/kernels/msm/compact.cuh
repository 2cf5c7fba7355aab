// A vector of scalars in compact form: two bitmaps (the zeros and the ones; ~98 % of a
// Filecoin witness) and the other values in order. compact_word_offsets gives every
// 64-bit word the index of its first other value (the host hands each block its
// first), so the scalar at any position is read with one popcount: no expanded copy
// of the vector (4.2 GB for a 32 GiB PoRep partition) is ever made on the device.
//
// `others` may hold only a window of the other values: the caller passes its address
// shifted back by the window's first index, and reads only positions inside it.
#pragma once
#include <stdint.h>
#include "../ff/fr_elem.cuh"

#define COMPACT_OFFSET_THREADS 256

// The other (neither 0 nor 1) values of word w, bits past n cleared.
__device__ __forceinline__ uint64_t compact_others(const uint64_t *__restrict__ one, const uint64_t *__restrict__ zero,
                                                   uint64_t w, uint64_t n) {
    const uint64_t valid = (w + 1) * 64 <= n ? ~0ull : (1ull << (n % 64)) - 1;
    return ~one[w] & ~zero[w] & valid;
}

// The class of position i < n: 0 (zero), 1 (one) or 2 (other); for an other value,
// its index among the other values in `index`.
struct compact_scalars {
    const uint64_t *one, *zero;
    const uint32_t *offsets;
    const fr::elem *others;
    uint64_t n;

    __device__ __forceinline__ uint32_t classify(uint64_t i, uint64_t &index) const {
        const uint64_t w = i / 64, bit = 1ull << (i % 64);
        if (one[w] & bit) return 1;
        if (zero[w] & bit) return 0;
        index = offsets[w] + __popcll(compact_others(one, zero, w, n) & (bit - 1));
        return 2;
    }
};

// offsets[w] = the index of word w's first other value. block_first[b] is the count of
// other values before block b's first word (one block per COMPACT_OFFSET_THREADS words).
extern "C" __global__ void __launch_bounds__(COMPACT_OFFSET_THREADS)
    compact_word_offsets(const uint64_t *__restrict__ one, const uint64_t *__restrict__ zero, uint64_t n,
                         const uint32_t *__restrict__ block_first, uint32_t *__restrict__ offsets) {
    __shared__ uint32_t scan[COMPACT_OFFSET_THREADS];
    const uint32_t t = threadIdx.x;
    const uint64_t words = (n + 63) / 64;
    const uint64_t w = (uint64_t)blockIdx.x * COMPACT_OFFSET_THREADS + t;
    const uint32_t count = w < words ? __popcll(compact_others(one, zero, w, n)) : 0;
    scan[t] = count;
    __syncthreads();
    // Inclusive scan (Hillis–Steele).
    for (uint32_t d = 1; d < COMPACT_OFFSET_THREADS; d <<= 1) {
        const uint32_t v = t >= d ? scan[t - d] : 0;
        __syncthreads();
        scan[t] += v;
        __syncthreads();
    }
    if (w < words) offsets[w] = block_first[blockIdx.x] + scan[t] - count;
}

// out[i] for i < n: 0, one (Montgomery form of 1) or the next other value: the vector
// expanded (to read a device witness back; the prover never needs it).
extern "C" __global__ void compact_expand(const uint64_t *__restrict__ one, const uint64_t *__restrict__ zero,
                                          const uint32_t *__restrict__ offsets, const fr::elem *__restrict__ others,
                                          uint64_t n, fr::elem one_mont, fr::elem *__restrict__ out) {
    const compact_scalars v{one, zero, offsets, others, n};
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t k = 0;
        const uint32_t c = v.classify(i, k);
        out[i] = c == 1 ? one_mont : c == 0 ? fr::elem{{0, 0, 0, 0, 0, 0, 0, 0}} : others[k];
    }
}
