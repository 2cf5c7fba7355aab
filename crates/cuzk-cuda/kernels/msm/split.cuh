// The input lists of a split MSM, built on the device from the compact aux
// assignment (compact.cuh).
//
// A split MSM runs over the aux values a density selects (all of them for L). The
// k-th selected value belongs to base first_base + k; zeros are dropped, ones listed
// by base index (their bases are summed), the rest kept with their base index for
// Pippenger. The host knows, per chunk of SPLIT_CHUNK_WORDS density words, how many
// values are selected, one and significant (popcounts of the bitmaps it already
// holds), so it hands every chunk its first base index and output offsets: one block
// per chunk then fills its part of the outputs with no global synchronization.
//
// A launch may cover a run of chunks only (a piece of the lists that fits the memory
// the caller has): `chunks` then starts at the run's first chunk, and the outputs are
// addressed by the whole lists' offsets (the caller shifts their addresses back by the
// piece's first entries), as is `others` by the piece's first other value.
#pragma once
#include <stdint.h>
#include "../ff/fr_elem.cuh"
#include "compact.cuh"

#define SPLIT_THREADS 256
#define SPLIT_WORDS_PER_THREAD 4
// 65,536 positions per chunk: the host's LIST_CHUNK / 64.
#define SPLIT_CHUNK_WORDS (SPLIT_THREADS * SPLIT_WORDS_PER_THREAD)

// The selected real positions of word w (bits past n are not positions).
__device__ __forceinline__ uint64_t split_selected(const uint64_t *__restrict__ density, uint64_t w, uint64_t n) {
    const uint64_t valid = (w + 1) * 64 <= n ? ~0ull : (1ull << (n % 64)) - 1;
    return density ? density[w] & valid : valid;
}

// chunks[3b..3b+3] = (first base index, first one, first significant) of chunk
// first_chunk + b, for block b. density may be null (every position selected).
extern "C" __global__ void __launch_bounds__(SPLIT_THREADS)
    msm_split_lists(const uint64_t *__restrict__ one, const uint64_t *__restrict__ zero,
                    const uint32_t *__restrict__ offsets, const fr::elem *__restrict__ others, uint64_t n,
                    const uint64_t *__restrict__ density, const uint32_t *__restrict__ chunks, uint64_t first_chunk,
                    uint32_t *__restrict__ ones_out, uint32_t *__restrict__ sig_index_out,
                    fr::elem *__restrict__ sig_out) {
    __shared__ uint32_t scan[3][SPLIT_THREADS];
    const uint32_t t = threadIdx.x;
    const uint64_t words = (n + 63) / 64;
    const uint64_t first = (first_chunk + blockIdx.x) * SPLIT_CHUNK_WORDS + (uint64_t)t * SPLIT_WORDS_PER_THREAD;
    const uint64_t last = min(first + SPLIT_WORDS_PER_THREAD, words);
    uint32_t c_sel = 0, c_one = 0, c_sig = 0;
    for (uint64_t w = first; w < last; w++) {
        const uint64_t s = split_selected(density, w, n);
        c_sel += __popcll(s);
        c_one += __popcll(s & one[w]);
        c_sig += __popcll(s & ~one[w] & ~zero[w]);
    }
    scan[0][t] = c_sel;
    scan[1][t] = c_one;
    scan[2][t] = c_sig;
    __syncthreads();
    // Inclusive scans of the three counts (Hillis–Steele).
    for (uint32_t d = 1; d < SPLIT_THREADS; d <<= 1) {
        uint32_t v[3];
        for (int j = 0; j < 3; j++) v[j] = t >= d ? scan[j][t - d] : 0;
        __syncthreads();
        for (int j = 0; j < 3; j++) scan[j][t] += v[j];
        __syncthreads();
    }
    const uint32_t *base = chunks + 3 * (uint64_t)blockIdx.x;
    uint32_t k = base[0] + scan[0][t] - c_sel;
    uint32_t o = base[1] + scan[1][t] - c_one;
    uint32_t g = base[2] + scan[2][t] - c_sig;
    for (uint64_t w = first; w < last; w++) {
        uint64_t s = split_selected(density, w, n);
        const uint64_t ones = one[w], zeros = zero[w];
        // Word w's other values, and the index of its first.
        const uint64_t other = compact_others(one, zero, w, n);
        const uint32_t other0 = offsets[w];
        while (s) {
            const uint32_t b = __ffsll((long long)s) - 1;
            s &= s - 1;
            if ((ones >> b) & 1) {
                ones_out[o++] = k;
            } else if (!((zeros >> b) & 1)) {
                sig_index_out[g] = k;
                sig_out[g] = others[other0 + __popcll(other & ((1ull << b) - 1))];
                g++;
            }
            k++;
        }
    }
}
