// Pippenger multi-scalar multiplication in G1 and G2: Σ s_i·P_i for affine P_i and
// scalars s_i in Fr (Montgomery form, as the prover holds them). The digit and sorting
// kernels see only scalars; the curve kernels are templates over the coordinate field,
// instantiated as msm_<name>_g1 and msm_<name>_g2 at the end of this file.
//
// Each scalar is cut into `windows` signed digits of c bits, d ∈ [−2^(c−1), 2^(c−1)]
// (digits.cuh), so a window needs 2^(c−1) buckets: bucket |d| − 1 collects ±P_i.
//
// Phases, all on the device (the host only launches; one synchronisation at the end):
//   1. msm_count: digits of every scalar, stored and counted per (window, bucket);
//   2. msm_tile_sums, msm_scan, msm_tile_scan: exclusive prefix sums of the counts =
//      each bucket's first slot in one array sorted by (window, bucket);
//   3. msm_scatter, window by window: each entry (point index, sign) written to its
//      bucket's next free slot;
//   4. (when the buckets are large) batch-affine rounds, a group of windows at a time
//      (batch_affine.cuh): pairs of entries of a bucket added in affine form, one shared
//      inversion per round and 512 pairs, each round halving the buckets;
//      msm_accumulate: the sorted entries (or what the rounds left) cut into equal segments of K, one thread per
//      segment, so a heavy bucket is spread over many threads; a bucket inside one
//      segment is stored directly, a bucket crossing a segment edge leaves partial sums;
//   5. msm_partials_scan (log2(segments) rounds) sums the left partials of each run of
//      segments a bucket crosses in a segmented tree, so a bucket holding every entry
//      costs log rounds rather than a serial chain; msm_fixup then adds that sum to the
//      right partial of the segment where the bucket starts;
//   6. msm_bucket_segments, then msm_pair_segments level by level: Σ_b (b+1)·B_b per
//      window, in segments of M (running sums), each level dividing the count by M;
//   7. msm_combine_windows: Σ_w 2^(c·w)·W_w.
#pragma once
#include "../ec/xyzz.cuh"
#include "../ff/fr.cuh"
#include "buckets.cuh"
#include "digits.cuh"
#include "batch_affine.cuh"

// Sorted entries are point index << 1 | (1 if the digit is negative); partial sums
// that belong to no bucket are marked with this id.
#define MSM_NO_BUCKET 0xffffffffu

// Calls f(window, bucket, negative) for every non-zero signed digit of s (digits.cuh).
template <typename F>
__device__ __forceinline__ void msm_digits(const fr::elem &s_mont, uint32_t c, uint32_t windows, F f) {
    const fr::elem s = fr::from_montgomery(s_mont);
    msm_signed_digits(s.l, c, windows, f);
}

// No digit in this window (digit 0).
#define MSM_NO_DIGIT 0xffffffffu

// Digits of every scalar, stored window-major (digits[w·n + i] = bucket << 1 | negative,
// or MSM_NO_DIGIT) and counted per (window, bucket).
extern "C" __global__ void msm_count(const fr::elem *__restrict__ scalars, uint32_t n, uint32_t c, uint32_t windows,
                                     uint32_t *counts, uint32_t *digits) {
    const uint32_t buckets = 1u << (c - 1);
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t next = 0;  // windows below `next` are written
        msm_digits(scalars[i], c, windows, [&](uint32_t w, uint32_t b, bool neg) {
            atomicAdd(&counts[w * buckets + b], 1u);
            for (; next < w; next++) digits[(size_t)next * n + i] = MSM_NO_DIGIT;
            digits[(size_t)w * n + i] = (b << 1) | (neg ? 1u : 0u);
            next = w + 1;
        });
        for (; next < windows; next++) digits[(size_t)next * n + i] = MSM_NO_DIGIT;
    }
}

// Exclusive prefix sums of counts[0..len) into offsets[0..len], offsets[len] = total, in
// three steps: sums of tiles of MSM_SCAN_TILE counts (msm_tile_sums), the tile sums'
// prefix sums (msm_scan, one block), each tile's prefix sums (msm_tile_scan).
#define MSM_SCAN_TILE 4096
#define MSM_SCAN_THREADS 256

extern "C" __global__ void __launch_bounds__(MSM_SCAN_THREADS)
    msm_tile_sums(const uint32_t *__restrict__ counts, uint32_t len, uint32_t *tile_sums) {
    __shared__ uint32_t part[MSM_SCAN_THREADS];
    const uint32_t begin = blockIdx.x * MSM_SCAN_TILE;
    uint32_t s = 0;
    for (uint32_t i = begin + threadIdx.x; i < min(begin + MSM_SCAN_TILE, len); i += MSM_SCAN_THREADS) s += counts[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (uint32_t d = MSM_SCAN_THREADS / 2; d > 0; d >>= 1) {
        if (threadIdx.x < d) part[threadIdx.x] += part[threadIdx.x + d];
        __syncthreads();
    }
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = part[0];
}

// One block of 1024 threads, each summing a contiguous chunk (for short inputs: the
// tile sums).
extern "C" __global__ void __launch_bounds__(1024)
    msm_scan(const uint32_t *__restrict__ counts, uint32_t len, uint32_t *offsets) {
    __shared__ uint32_t sums[1024];
    const uint32_t t = threadIdx.x, chunk = (len + 1023) / 1024;
    const uint32_t begin = min(t * chunk, len), end = min(begin + chunk, len);
    uint32_t s = 0;
    for (uint32_t i = begin; i < end; i++) s += counts[i];
    sums[t] = s;
    __syncthreads();
    // Inclusive scan of the 1024 chunk sums (Hillis–Steele).
    for (uint32_t d = 1; d < 1024; d <<= 1) {
        const uint32_t v = t >= d ? sums[t - d] : 0;
        __syncthreads();
        sums[t] += v;
        __syncthreads();
    }
    uint32_t run = t ? sums[t - 1] : 0;
    for (uint32_t i = begin; i < end; i++) {
        offsets[i] = run;
        run += counts[i];
    }
    if (t == 1023) offsets[len] = sums[1023];
}

// Tile b: thread t takes the MSM_SCAN_TILE / MSM_SCAN_THREADS consecutive counts from
// b·TILE + t·PER, so its exclusive prefix is the tile offset plus the earlier threads'.
extern "C" __global__ void __launch_bounds__(MSM_SCAN_THREADS)
    msm_tile_scan(const uint32_t *__restrict__ counts, uint32_t len, const uint32_t *__restrict__ tile_offsets,
                  uint32_t tiles, uint32_t *offsets) {
    const uint32_t PER = MSM_SCAN_TILE / MSM_SCAN_THREADS;
    __shared__ uint32_t sums[MSM_SCAN_THREADS];
    const uint32_t t = threadIdx.x;
    const uint32_t begin = min(blockIdx.x * MSM_SCAN_TILE + t * PER, len), end = min(begin + PER, len);
    uint32_t s = 0;
    for (uint32_t i = begin; i < end; i++) s += counts[i];
    sums[t] = s;
    __syncthreads();
    for (uint32_t d = 1; d < MSM_SCAN_THREADS; d <<= 1) {
        const uint32_t v = t >= d ? sums[t - d] : 0;
        __syncthreads();
        sums[t] += v;
        __syncthreads();
    }
    uint32_t run = tile_offsets[blockIdx.x] + (t ? sums[t - 1] : 0);
    for (uint32_t i = begin; i < end; i++) {
        offsets[i] = run;
        run += counts[i];
    }
    if (blockIdx.x == 0 && t == 0) offsets[len] = tile_offsets[tiles];
}

// Window w's entries, each written to its bucket's next free slot. One launch per
// window: the window's cursors (2^(c−1)) and the slots being filled stay in L2, where a
// launch over every window at once scattered 4-byte writes over all of memory.
// Scalar i belongs to base base_index[i] when `indexed` (a split MSM's significant
// scalars), else to base i.
extern "C" __global__ void msm_scatter(const uint32_t *__restrict__ digits, uint32_t n, uint32_t c, uint32_t w,
                                       uint32_t *cursor, uint32_t *sorted, const uint32_t *__restrict__ base_index,
                                       uint32_t indexed) {
    const uint32_t buckets = 1u << (c - 1);
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const uint32_t d = digits[(size_t)w * n + i];
        if (d == MSM_NO_DIGIT) continue;
        const uint32_t slot = atomicAdd(&cursor[w * buckets + (d >> 1)], 1u);
        sorted[slot] = ((indexed ? base_index[i] : i) << 1) | (d & 1);
    }
}

// Segment t = sorted slots [t·K, t·K + K). Buckets wholly inside are written to
// buckets[]; the bucket running in from the left goes to left[t] and the one running
// out to the right (it starts here) to right[t], with their bucket ids in left_bucket
// and right_bucket (MSM_NO_BUCKET where unused). A bucket covering the whole segment
// is a left one. With `indexed` = 0 the entries are the points themselves, in order
// (bases[pos], as batch_affine.cuh's rounds leave them), and `sorted` is not read.
template <class F>
__device__ __forceinline__ void msm_accumulate(const ec::affine<F> *__restrict__ bases,
                                               const uint32_t *__restrict__ sorted, uint32_t indexed,
                                               const uint32_t *__restrict__ offsets, uint32_t len, uint32_t k,
                                               uint32_t segments, ec::xyzz<F> *buckets, ec::xyzz<F> *left,
                                               uint32_t *left_bucket, ec::xyzz<F> *right, uint32_t *right_bucket) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= segments) return;
    const uint32_t total = offsets[len];
    const uint32_t begin = t * k, end = min(begin + k, total);
    left_bucket[t] = MSM_NO_BUCKET;
    right_bucket[t] = MSM_NO_BUCKET;
    // The host launches segments for the largest possible total (no zero digits).
    if (begin >= total) return;
    uint32_t g = msm_bucket_of(offsets, len, begin);
    uint32_t g_end = offsets[g + 1];
    ec::xyzz<F> acc = ec::infinity<F>();
    auto flush = [&]() {
        const bool from_left = offsets[g]<begin, to_right = g_end> end;
        if (from_left) {
            left[t] = acc;
            left_bucket[t] = g;
        } else if (to_right) {
            right[t] = acc;
            right_bucket[t] = g;
        } else {
            buckets[g] = acc;
        }
    };
    for (uint32_t pos = begin; pos < end; pos++) {
        if (pos == g_end) {
            flush();
            g = msm_bucket_of(offsets, len, pos);
            g_end = offsets[g + 1];
            acc = ec::infinity<F>();
        }
        ec::affine<F> p;
        if (indexed) {
            const uint32_t e = sorted[pos];
            p = bases[e >> 1];
            if (e & 1) p = ec::neg(p);
        } else {
            p = bases[pos];
        }
        acc = ec::add_affine(acc, p);
    }
    flush();
}

// One round of a segmented suffix sum over the left partials, stride d = 1, 2, 4, …:
// afterwards dst[t] = Σ left[t .. min(t + 2d, end of t's run)), where a run is a
// stretch of consecutive segments whose left partials belong to one bucket.
template <class F>
__device__ __forceinline__ void msm_partials_scan(const ec::xyzz<F> *__restrict__ src, ec::xyzz<F> *dst,
                                                  const uint32_t *__restrict__ left_bucket, uint32_t segments,
                                                  uint32_t d) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= segments) return;
    const uint32_t g = left_bucket[t];
    if (g == MSM_NO_BUCKET) return;
    ec::xyzz<F> v = src[t];
    if (t + d < segments && left_bucket[t + d] == g) v = ec::add(v, src[t + d]);
    dst[t] = v;
}

// A bucket starting in segment t and crossing into t + 1: its right partial plus the
// summed left partials of the run starting at t + 1.
template <class F>
__device__ __forceinline__ void msm_fixup(uint32_t segments, ec::xyzz<F> *buckets,
                                          const ec::xyzz<F> *__restrict__ right,
                                          const uint32_t *__restrict__ right_bucket,
                                          const ec::xyzz<F> *__restrict__ left_sums,
                                          const uint32_t *__restrict__ left_bucket) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= segments) return;
    const uint32_t g = right_bucket[t];
    if (g == MSM_NO_BUCKET) return;
    ec::xyzz<F> acc = right[t];
    if (t + 1 < segments && left_bucket[t + 1] == g) acc = ec::add(acc, left_sums[t + 1]);
    buckets[g] = acc;
}

// The bucket reduction W_w = Σ_j (j+1)·B_j is done in levels over pairs (T, Y) that
// stand for T + i·Y, i being the pair's index within its window's run (runs of equal,
// power-of-two length, one after another). A segment of M consecutive pairs, s-th of
// its run, sums to [Σ_j T_j + j·Y_j] + s·(M·Σ_j Y_j): one pair again. Each level
// divides the run by M, until one pair per window is left, whose T is W_w.

// Level 0, segment s of M buckets: T = Σ_j (j+1)·B_{sM+j}, Y = M·Σ_j B_{sM+j}
// (bucket j of a window is the pair (B_j, B_j): B_j + j·B_j).
template <class F>
__device__ __forceinline__ void msm_bucket_segments(const ec::xyzz<F> *__restrict__ buckets, uint32_t m, uint32_t log_m,
                                                    uint32_t count, ec::xyzz<F> *t_out, ec::xyzz<F> *y_out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const ec::xyzz<F> *b = buckets + (size_t)t * m;
    ec::xyzz<F> run = ec::infinity<F>(), total = ec::infinity<F>();
    for (uint32_t j = m; j-- > 0;) {
        run = ec::add(run, b[j]);
        total = ec::add(total, run);
    }
    for (uint32_t i = 0; i < log_m; i++) run = ec::dbl(run);
    t_out[t] = total;
    y_out[t] = run;
}

// A later level, segment s of M pairs: T' = Σ_j T_j + j·Y_j, Y' = M·Σ_j Y_j.
template <class F>
__device__ __forceinline__ void msm_pair_segments(const ec::xyzz<F> *__restrict__ t_in,
                                                  const ec::xyzz<F> *__restrict__ y_in, uint32_t m, uint32_t log_m,
                                                  uint32_t count, ec::xyzz<F> *t_out, ec::xyzz<F> *y_out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const size_t base = (size_t)t * m;
    // For j = M−1 … 1: run = Σ_{k≥j} Y_k, and acc gains run once per j: Σ_k k·Y_k.
    ec::xyzz<F> run = ec::infinity<F>(), acc = ec::infinity<F>();
    for (uint32_t j = m; j-- > 1;) {
        run = ec::add(run, y_in[base + j]);
        acc = ec::add(acc, run);
        acc = ec::add(acc, t_in[base + j]);
    }
    acc = ec::add(acc, t_in[base]);
    run = ec::add(run, y_in[base]);
    for (uint32_t i = 0; i < log_m; i++) run = ec::dbl(run);
    t_out[t] = acc;
    y_out[t] = run;
}

// out = Σ_w 2^(c·w)·W_w (Horner, one thread).
template <class F>
__device__ __forceinline__ void msm_combine_windows(const ec::xyzz<F> *__restrict__ window_sum, uint32_t windows,
                                                    uint32_t c, ec::xyzz<F> *out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    ec::xyzz<F> acc = window_sum[windows - 1];
    for (uint32_t w = windows - 1; w-- > 0;) {
        for (uint32_t i = 0; i < c; i++) acc = ec::dbl(acc);
        acc = ec::add(acc, window_sum[w]);
    }
    *out = acc;
}

// The batch addition of a split MSM's scalars equal to 1: thread t sums the bases
// idx[t·per .. t·per + per) into partial[t] (count indices in all).
template <class F>
__device__ __forceinline__ void msm_sum_indexed(const ec::affine<F> *__restrict__ bases,
                                                const uint32_t *__restrict__ idx, uint32_t count, uint32_t per,
                                                uint32_t threads, ec::xyzz<F> *partial) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    ec::xyzz<F> acc = ec::infinity<F>();
    const uint32_t begin = t * per, end = min(begin + per, count);
    for (uint32_t j = begin; j < end; j++) acc = ec::add_affine(acc, bases[idx[j]]);
    partial[t] = acc;
}

// One round of a pairwise tree sum: dst[t] = src[2t] + src[2t + 1] over m values.
template <class F>
__device__ __forceinline__ void msm_sum_pairs(const ec::xyzz<F> *__restrict__ src, uint32_t m, ec::xyzz<F> *dst) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (m + 1) / 2) return;
    ec::xyzz<F> v = src[2 * t];
    if (2 * t + 1 < m) v = ec::add(v, src[2 * t + 1]);
    dst[t] = v;
}

// Blocks per SM the accumulation is compiled for (its register budget), 128 threads
// each (CURVE_BLOCK in msm.rs).
#ifndef MSM_ACCUMULATE_MIN_BLOCKS
#define MSM_ACCUMULATE_MIN_BLOCKS 1
#endif

// The curve kernels of one group (G = g1 or g2, F its coordinate field).
#define MSM_CURVE_KERNELS(G, F)                                                                                        \
    extern "C" __global__ void __launch_bounds__(128, MSM_ACCUMULATE_MIN_BLOCKS) msm_accumulate_##G(                   \
        const ec::affine<F> *__restrict__ bases, const uint32_t *__restrict__ sorted, uint32_t indexed,                \
        const uint32_t *__restrict__ offsets, uint32_t len, uint32_t k, uint32_t segments, ec::xyzz<F> *buckets,       \
        ec::xyzz<F> *left, uint32_t *left_bucket, ec::xyzz<F> *right, uint32_t *right_bucket) {                        \
        msm_accumulate<F>(bases, sorted, indexed, offsets, len, k, segments, buckets, left, left_bucket, right,        \
                          right_bucket);                                                                               \
    }                                                                                                                  \
    extern "C" __global__ void msm_partials_scan_##G(const ec::xyzz<F> *__restrict__ src, ec::xyzz<F> *dst,            \
                                                     const uint32_t *__restrict__ left_bucket, uint32_t segments,      \
                                                     uint32_t d) {                                                     \
        msm_partials_scan<F>(src, dst, left_bucket, segments, d);                                                      \
    }                                                                                                                  \
    extern "C" __global__ void msm_fixup_##G(                                                                          \
        uint32_t segments, ec::xyzz<F> *buckets, const ec::xyzz<F> *__restrict__ right,                                \
        const uint32_t *__restrict__ right_bucket, const ec::xyzz<F> *__restrict__ left_sums,                          \
        const uint32_t *__restrict__ left_bucket) {                                                                    \
        msm_fixup<F>(segments, buckets, right, right_bucket, left_sums, left_bucket);                                  \
    }                                                                                                                  \
    extern "C" __global__ void msm_bucket_segments_##G(const ec::xyzz<F> *__restrict__ buckets, uint32_t m,            \
                                                       uint32_t log_m, uint32_t count, ec::xyzz<F> *t_out,             \
                                                       ec::xyzz<F> *y_out) {                                           \
        msm_bucket_segments<F>(buckets, m, log_m, count, t_out, y_out);                                                \
    }                                                                                                                  \
    extern "C" __global__ void msm_pair_segments_##G(const ec::xyzz<F> *__restrict__ t_in,                             \
                                                     const ec::xyzz<F> *__restrict__ y_in, uint32_t m, uint32_t log_m, \
                                                     uint32_t count, ec::xyzz<F> *t_out, ec::xyzz<F> *y_out) {         \
        msm_pair_segments<F>(t_in, y_in, m, log_m, count, t_out, y_out);                                               \
    }                                                                                                                  \
    extern "C" __global__ void msm_combine_windows_##G(const ec::xyzz<F> *__restrict__ window_sum, uint32_t windows,   \
                                                       uint32_t c, ec::xyzz<F> *out) {                                 \
        msm_combine_windows<F>(window_sum, windows, c, out);                                                           \
    }                                                                                                                  \
    extern "C" __global__ void msm_sum_indexed_##G(const ec::affine<F> *__restrict__ bases,                            \
                                                   const uint32_t *__restrict__ idx, uint32_t count, uint32_t per,     \
                                                   uint32_t threads, ec::xyzz<F> *partial) {                           \
        msm_sum_indexed<F>(bases, idx, count, per, threads, partial);                                                  \
    }                                                                                                                  \
    extern "C" __global__ void msm_sum_pairs_##G(const ec::xyzz<F> *__restrict__ src, uint32_t m, ec::xyzz<F> *dst) {  \
        msm_sum_pairs<F>(src, m, dst);                                                                                 \
    }

MSM_CURVE_KERNELS(g1, ec::fp_field)
MSM_CURVE_KERNELS(g2, ec::fp2_field)
MSM_AFFINE_KERNELS(g1, ec::fp_field)
MSM_AFFINE_KERNELS(g2, ec::fp2_field)
