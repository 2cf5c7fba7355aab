// a = A·z, b = B·z, c = C·z on the device, from a circuit's compiled matrices
// (cuzk-groth16's ConstraintMatrices) and its assignment z = (inputs, aux).
//
// The aux part of z arrives compact: two bitmaps (the zeros and the ones; ~98 % of a
// Filecoin witness) and the other values in order. witness_word_offsets gives every
// 64-bit word the index of its first other value (the host hands each block its
// first); witness_expand then writes z's aux part, one thread per value, coalesced.
//
// The products are compressed sparse rows over z's unified index (inputs first),
// each coefficient an index into the circuit's dictionary of distinct coefficients;
// index 0 is one and index 1 minus one, the commonest, which need no product. One
// thread per row. Every value stays fully reduced, so a, b, c are bit-identical to
// the host's products whatever the order of the additions.
#pragma once
#include <stdint.h>
#include "../ff/fr.cuh"

#define WITNESS_OFFSET_THREADS 256

// The other (neither 0 nor 1) values of word w, bits past n cleared.
__device__ __forceinline__ uint64_t witness_others(const uint64_t *__restrict__ one, const uint64_t *__restrict__ zero,
                                                   uint64_t w, uint64_t n) {
    const uint64_t valid = (w + 1) * 64 <= n ? ~0ull : (1ull << (n % 64)) - 1;
    return ~one[w] & ~zero[w] & valid;
}

// offsets[w] = the index of word w's first other value. block_first[b] is the count of
// other values before block b's first word (one block per WITNESS_OFFSET_THREADS words).
extern "C" __global__ void __launch_bounds__(WITNESS_OFFSET_THREADS)
    witness_word_offsets(const uint64_t *__restrict__ one, const uint64_t *__restrict__ zero, uint64_t n,
                         const uint32_t *__restrict__ block_first, uint32_t *__restrict__ offsets) {
    __shared__ uint32_t scan[WITNESS_OFFSET_THREADS];
    const uint32_t t = threadIdx.x;
    const uint64_t words = (n + 63) / 64;
    const uint64_t w = (uint64_t)blockIdx.x * WITNESS_OFFSET_THREADS + t;
    const uint32_t count = w < words ? __popcll(witness_others(one, zero, w, n)) : 0;
    scan[t] = count;
    __syncthreads();
    // Inclusive scan (Hillis–Steele).
    for (uint32_t d = 1; d < WITNESS_OFFSET_THREADS; d <<= 1) {
        const uint32_t v = t >= d ? scan[t - d] : 0;
        __syncthreads();
        scan[t] += v;
        __syncthreads();
    }
    if (w < words) offsets[w] = block_first[blockIdx.x] + scan[t] - count;
}

// aux[i] for i < n: 0, one (Montgomery form of 1) or the next other value.
extern "C" __global__ void witness_expand(const uint64_t *__restrict__ one, const uint64_t *__restrict__ zero,
                                          const uint32_t *__restrict__ offsets, const fr::elem *__restrict__ others,
                                          uint64_t n, fr::elem one_mont, fr::elem *__restrict__ aux) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t w = i / 64;
        const uint32_t b = i % 64;
        const uint64_t bit = 1ull << b;
        if (one[w] & bit) {
            aux[i] = one_mont;
        } else if (zero[w] & bit) {
            aux[i] = fr::elem{{0, 0, 0, 0, 0, 0, 0, 0}};
        } else {
            const uint64_t below = witness_others(one, zero, w, n) & (bit - 1);
            aux[i] = others[offsets[w] + __popcll(below)];
        }
    }
}

__device__ __forceinline__ bool fr_is_zero(const fr::elem &v) {
    uint32_t any = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) any |= v.l[i];
    return any == 0;
}

// out[r] = Σ_k dictionary[coefficients[k]] · z[columns[k]] over row r's non-zeros
// k ∈ [row_starts[r], row_starts[r + 1]), for r < rows.
extern "C" __global__ void csr_products(const uint64_t *__restrict__ row_starts, const uint32_t *__restrict__ columns,
                                        const uint16_t *__restrict__ coefficients,
                                        const fr::elem *__restrict__ dictionary, const fr::elem *__restrict__ z,
                                        uint64_t rows, fr::elem *__restrict__ out) {
    for (uint64_t r = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; r < rows;
         r += (uint64_t)gridDim.x * blockDim.x) {
        fr::elem acc{{0, 0, 0, 0, 0, 0, 0, 0}};
        const uint64_t end = row_starts[r + 1];
        for (uint64_t k = row_starts[r]; k < end; k++) {
            const fr::elem v = z[columns[k]];
            const uint16_t id = coefficients[k];
            if (id == 0) {
                acc = fr::add(acc, v);
            } else if (id == 1) {
                acc = fr::sub(acc, v);
            } else if (!fr_is_zero(v)) {
                acc = fr::add(acc, fr::mul(dictionary[id], v));
            }
        }
        out[r] = acc;
    }
}
