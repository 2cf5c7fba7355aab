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
// Twiddles are stored stage by stage, in fr::twiddle form: tw[2^s - 1 + j] =
// w^(j·2^(log_n-1-s)) for j < 2^s, with w the forward or inverse n-th root of unity, so the butterflies of a
// stage at consecutive offsets j read consecutive twiddles (coalesced, where a single
// table of w^j would be read with a stride of 2^(log_n-1-s)). n - 1 entries in all
// (40 bytes each: 10.7 GB for the two tables at 2^27). Where device memory is short
// the table stops at a stage (stage_twiddles): the stages above compute their
// twiddles from two small power tables, one more product per butterfly.
//
// Shared memory holds an element as two 16-byte planes (low and high halves in
// separate arrays): consecutive elements are then 16 bytes apart, so a warp's
// 128-bit accesses to consecutive elements do not conflict on the banks. Slots are
// also swizzled (below) for the strided patterns of the first stages.
#pragma once
#include "../ff/fr.cuh"

__device__ __forceinline__ uint32_t bitrev32(uint32_t i, uint32_t log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

// Shared-memory element arrays as two planes of 16 bytes: [0, size) low halves,
// [size, 2·size) high halves. A 128-bit access by 8 threads is conflict-free when
// their slots differ mod 8. Element u sits in slot u ^ g(u >> 3), with
// g(i) = (i & 3) | ((i & 2) << 1), a permutation inside each aligned group of 8 slots
// (sizes are powers of two ≥ 8 or tiny): runs of 8 consecutive u stay conflict-free,
// and so do the patterns u = 4q + c (stage pair t = 0) and u = (q & 3) + 16(q >> 2) + 4c
// (t = 2), which would otherwise fall on 4 and 2 distinct banks groups.
struct shared_elems {
    uint4 *p;
    uint32_t size;
    __device__ __forceinline__ static uint32_t slot(uint32_t u) {
        const uint32_t i = u >> 3;
        return u ^ ((i & 3) | ((i & 2) << 1));
    }
    __device__ __forceinline__ fr::elem get(uint32_t u) const {
        const uint32_t i = slot(u);
        const uint4 lo = p[i], hi = p[size + i];
        return fr::elem{{lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}};
    }
    __device__ __forceinline__ void set(uint32_t u, const fr::elem &v) const {
        const uint32_t i = slot(u);
        p[i] = make_uint4(v.l[0], v.l[1], v.l[2], v.l[3]);
        p[size + i] = make_uint4(v.l[4], v.l[5], v.l[6], v.l[7]);
    }
};

// The twiddles of a transform: stage s < table_log reads the stage-major table; a
// stage above computes w^x, x = j·2^(log_n-1-s), as lo[x mod 2^lo_bits] · hi[x >> lo_bits]
// (the same product the table was filled with, so the result is the same bits).
struct stage_twiddles {
    const fr::twiddle *table;
    const fr::elem *lo, *hi;
    uint32_t table_log, lo_bits, log_n;

    // v times the twiddle of offset j in stage s.
    __device__ __forceinline__ fr::elem mul(const fr::elem &v, uint32_t s, uint64_t j) const {
        if (s < table_log) return fr::mul_twiddle(v, table[((1ull << s) - 1) + j]);
        const uint64_t x = j << (log_n - 1 - s);
        return fr::mul(v, fr::mul(lo[x & ((1u << lo_bits) - 1)], hi[x >> lo_bits]));
    }
};

// DIT: (x, y) <- (x + w·y, x − w·y).  DIF: (x, y) <- (x + y, (x − y)·w).
// w is the twiddle of offset j in stage s; j = 0 needs no product.
__device__ __forceinline__ void butterfly(fr::elem &x, fr::elem &y, const stage_twiddles &tw, uint32_t s, uint64_t j,
                                          bool dif) {
    const bool trivial = j == 0;
    if (dif) {
        fr::elem d = fr::sub(x, y);
        x = fr::add(x, y);
        y = trivial ? d : tw.mul(d, s, j);
    } else {
        fr::elem t = trivial ? y : tw.mul(y, s, j);
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

// The same permutation for log_n ≥ 2·BR_TILE_LOG, moving whole tiles: with the index
// split as (a, mid, c), a and c of BR_TILE_LOG bits, the element (a, mid, c) goes to
// (rev(c), rev(mid), rev(a)). Block `mid` loads the 16×16 tiles of mid and rev(mid)
// (rows a, contiguous runs of c), then writes each into the other's place transposed
// (rows rev(c), runs of rev(a)), so device memory is read and written in 512-byte
// runs; blocks with mid > rev(mid) have nothing to do. Shared rows are padded by one
// 16-byte slot, so reading a column hits eight distinct bank groups.
#define BR_TILE_LOG 4
extern "C" __global__ void __launch_bounds__(256) ntt_bit_reverse_tiled(fr::elem *data, uint32_t log_n) {
    constexpr uint32_t T = 1u << BR_TILE_LOG, ROW = T + 1, PLANE = T * ROW;
    __shared__ uint4 tiles[2][2][PLANE];  // [tile][low/high half][slot]
    const uint32_t mid_bits = log_n - 2 * BR_TILE_LOG;
    const uint64_t mid = blockIdx.x, rmid = bitrev32((uint32_t)mid, mid_bits);
    if (mid > rmid) return;
    const uint32_t ntiles = mid == rmid ? 1 : 2;
    const uint32_t a_shift = log_n - BR_TILE_LOG;
    const uint64_t mids[2] = {mid, rmid};
    for (uint32_t e = threadIdx.x; e < T * T; e += blockDim.x) {
        const uint32_t a = e >> BR_TILE_LOG, c = e & (T - 1);
        for (uint32_t t = 0; t < ntiles; t++) {
            const fr::elem v = data[((uint64_t)a << a_shift) | (mids[t] << BR_TILE_LOG) | c];
            tiles[t][0][a * ROW + c] = make_uint4(v.l[0], v.l[1], v.l[2], v.l[3]);
            tiles[t][1][a * ROW + c] = make_uint4(v.l[4], v.l[5], v.l[6], v.l[7]);
        }
    }
    __syncthreads();
    for (uint32_t e = threadIdx.x; e < T * T; e += blockDim.x) {
        const uint32_t a2 = e >> BR_TILE_LOG, c2 = e & (T - 1);
        // Destination (a2, ·, c2) of tile t's mirror receives source (rev(c2), ·, rev(a2)).
        const uint32_t src = bitrev32(c2, BR_TILE_LOG) * ROW + bitrev32(a2, BR_TILE_LOG);
        for (uint32_t t = 0; t < ntiles; t++) {
            const uint4 lo = tiles[t][0][src], hi = tiles[t][1][src];
            data[((uint64_t)a2 << a_shift) | (mids[ntiles - 1 - t] << BR_TILE_LOG) | c2] =
                fr::elem{{lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}};
        }
    }
}

// Stages s_base..s_base+M-1 of the transform on 2^M elements in shared memory,
// for each of the L = 2^log_l columns of the tile: logical element u of column l
// sits at (u << log_l) | l, and stage s_base + t pairs u with u + 2^t. The butterfly
// whose lower element is u has twiddle offset j = ((u mod 2^t) << s_base) | jlo(l).
//
// Stages go two at a time: a thread loads the four elements u0 + {0, 2^t, 2^(t+1),
// 2^t + 2^(t+1)}, runs both stages' four butterflies in registers (two independent
// products at a time) and stores them back, so shared memory is crossed and the
// block synchronized once per two stages. An odd last stage runs as a single step.
// Threads: nq = max(1, 2^(M-2)) per column, q < nq its index in the column.
__device__ __forceinline__ void shared_stages(const shared_elems &sh, uint32_t M, uint32_t log_l, uint32_t l,
                                              uint32_t q, uint32_t nq, uint32_t s_base, uint64_t jlo,
                                              const stage_twiddles &tw, bool dif) {
    const uint32_t pairs = M / 2, steps = pairs + (M & 1);
    auto at = [&](uint32_t u) { return (u << log_l) | l; };
    auto joff = [&](uint32_t u, uint32_t t) { return ((uint64_t)(u & ((1u << t) - 1)) << s_base) | jlo; };
    for (uint32_t step = 0; step < steps; step++) {
        const uint32_t idx = dif ? steps - 1 - step : step;
        if (idx < pairs) {
            const uint32_t t = 2 * idx, h = 1u << t;
            const uint32_t u0 = ((q >> t) << (t + 2)) | (q & (h - 1));
            const uint32_t u1 = u0 + h, u2 = u0 + 2 * h, u3 = u2 + h;
            fr::elem x0 = sh.get(at(u0)), x1 = sh.get(at(u1)), x2 = sh.get(at(u2)), x3 = sh.get(at(u3));
            const uint32_t sa = s_base + t, sb = sa + 1;
            const uint64_t ja = joff(u0, t), jb0 = joff(u0, t + 1), jb1 = joff(u1, t + 1);
            if (dif) {
                butterfly(x0, x2, tw, sb, jb0, true);
                butterfly(x1, x3, tw, sb, jb1, true);
                butterfly(x0, x1, tw, sa, ja, true);
                butterfly(x2, x3, tw, sa, ja, true);
            } else {
                butterfly(x0, x1, tw, sa, ja, false);
                butterfly(x2, x3, tw, sa, ja, false);
                butterfly(x0, x2, tw, sb, jb0, false);
                butterfly(x1, x3, tw, sb, jb1, false);
            }
            sh.set(at(u0), x0);
            sh.set(at(u1), x1);
            sh.set(at(u2), x2);
            sh.set(at(u3), x3);
        } else {
            const uint32_t t = M - 1, h = 1u << t;
            for (uint32_t b = q; b < h; b += nq) {
                const uint32_t u0 = ((b >> t) << (t + 1)) | (b & (h - 1));
                fr::elem x = sh.get(at(u0)), y = sh.get(at(u0 + h));
                butterfly(x, y, tw, s_base + t, joff(u0, t), dif);
                sh.set(at(u0), x);
                sh.set(at(u0 + h), y);
            }
        }
        __syncthreads();
    }
}

// Pointwise steps of the H polynomial fused into a transform's passes, so they cost
// no pass over device memory of their own (bits of `fuse`; a pointer whose bit is
// clear is never read):
//   NTT_FUSE_PRE_MUL  the first pass multiplies each element as it loads it by
//                     pre_mul at the same index (the product of two evaluation vectors);
//   NTT_FUSE_SCALE    ntt_block (the last pass of a DIF transform) multiplies each
//                     output by col[local] · row[block]: a factor c·g^bitrev(p) at
//                     bit-reversed position p = block·2^k + local factors into a
//                     2^k-entry table over local and a 2^(log n − k)-entry one over block;
//   NTT_FUSE_SUB      then ntt_block subtracts sub[p] · sub_factor.
#define NTT_FUSE_PRE_MUL 1u
#define NTT_FUSE_SCALE 2u
#define NTT_FUSE_SUB 4u

// Stages 0..k-1 on each block of 2^k contiguous elements; blockDim.x = max(1, 2^(k-2)).
// 256 threads of at most 80 registers, three blocks per SM: measured faster than two
// blocks of 128 registers despite a few spilled words (H200, 2^27: 53.5 against 56.7 ms).
extern "C" __global__ void __launch_bounds__(256, 3)
    ntt_block(fr::elem *data, const fr::twiddle *__restrict__ tw, uint32_t log_n, uint32_t k, uint32_t dif,
              uint32_t fuse, const fr::elem *__restrict__ pre_mul, const fr::twiddle *__restrict__ col,
              const fr::elem *__restrict__ row, const fr::elem *__restrict__ sub, fr::elem sub_factor) {
    extern __shared__ uint4 sh_planes[];
    const uint32_t size = 1u << k;
    const uint64_t first = (uint64_t)blockIdx.x * size;
    const shared_elems sh{sh_planes, size};
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
        fr::elem v = data[first + i];
        if (fuse & NTT_FUSE_PRE_MUL) v = fr::mul(v, pre_mul[first + i]);
        sh.set(i, v);
    }
    __syncthreads();
    // The blocked stages are below every table's end (table_log ≥ k, see ntt.rs).
    const stage_twiddles stw{tw, nullptr, nullptr, 64, 0, log_n};
    shared_stages(sh, k, 0, 0, threadIdx.x, blockDim.x, 0, 0, stw, dif);
    fr::twiddle row_w, sub_w;
    if (fuse & NTT_FUSE_SCALE) row_w = fr::to_twiddle(row[blockIdx.x]);
    if (fuse & NTT_FUSE_SUB) sub_w = fr::to_twiddle(sub_factor);
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
        fr::elem v = sh.get(i);
        if (fuse & NTT_FUSE_SCALE) v = fr::mul_twiddle(fr::mul_twiddle(v, col[i]), row_w);
        if (fuse & NTT_FUSE_SUB) v = fr::sub(v, fr::mul_twiddle(sub[first + i], sub_w));
        data[first + i] = v;
    }
}

// Stages s0..s0+m-1. The elements (hi, mid, lo) = index bits split at s0+m and s0;
// the butterflies of these stages mix only elements of equal (hi, lo). A block
// takes 2^m values of mid for L consecutive lo (L a power of two dividing 2^s0):
// blockDim.x = max(1, 2^(m-2)) * L, shared memory 2^m * L elements.
// `fuse` takes NTT_FUSE_PRE_MUL only. Stages from table_log on compute their twiddles
// from pow_lo and pow_hi (stage_twiddles).
extern "C" __global__ void __launch_bounds__(256, 3)
    ntt_strided(fr::elem *data, const fr::twiddle *__restrict__ tw, uint32_t log_n, uint32_t s0, uint32_t m,
                uint32_t log_l, uint32_t dif, uint32_t fuse, const fr::elem *__restrict__ pre_mul,
                const fr::elem *__restrict__ pow_lo, const fr::elem *__restrict__ pow_hi, uint32_t lo_bits,
                uint32_t table_log) {
    extern __shared__ uint4 sh_planes[];
    const uint32_t L = 1u << log_l;
    const uint32_t groups_per_hi = 1u << (s0 - log_l);
    const uint64_t hi = blockIdx.x / groups_per_hi;
    const uint32_t lo0 = (blockIdx.x % groups_per_hi) << log_l;
    const uint32_t rows = 1u << m;
    const uint64_t hi_base = hi << (s0 + m);
    const shared_elems sh{sh_planes, rows * L};
    // Load: consecutive threads take consecutive lo, so global reads come in runs of L.
    for (uint32_t e = threadIdx.x; e < rows * L; e += blockDim.x) {
        const uint32_t mid = e >> log_l, l = e & (L - 1);
        const uint64_t idx = hi_base | ((uint64_t)mid << s0) | (lo0 + l);
        fr::elem v = data[idx];
        if (fuse & NTT_FUSE_PRE_MUL) v = fr::mul(v, pre_mul[idx]);
        sh.set(e, v);
    }
    __syncthreads();
    const uint32_t l = threadIdx.x & (L - 1);
    const stage_twiddles stw{tw, pow_lo, pow_hi, table_log, lo_bits, log_n};
    shared_stages(sh, m, log_l, l, threadIdx.x >> log_l, blockDim.x >> log_l, s0, lo0 + l, stw, dif);
    for (uint32_t e = threadIdx.x; e < rows * L; e += blockDim.x) {
        const uint32_t mid = e >> log_l, l2 = e & (L - 1);
        data[hi_base | ((uint64_t)mid << s0) | (lo0 + l2)] = sh.get(e);
    }
}

// The stage-major twiddle table (see the top of this file) of the stages below
// table_log: out[e] for e < 2^table_log - 1, from a two-level table of powers of w over
// exponents < 2^(log_n - 1).
extern "C" __global__ void fill_stage_twiddles(fr::twiddle *out, const fr::elem *__restrict__ lo,
                                               const fr::elem *__restrict__ hi, uint32_t lo_bits, uint32_t log_n,
                                               uint32_t table_log) {
    const uint64_t len = (1ull << table_log) - 1;
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < len; e += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t s = 63 - __clzll(e + 1);
        const uint64_t j = e + 1 - (1ull << s);
        const uint64_t x = j << (log_n - 1 - s);
        out[e] = fr::to_twiddle(fr::mul(lo[x & ((1u << lo_bits) - 1)], hi[x >> lo_bits]));
    }
}

// out[i] = the twiddle form of in[i] (tables the fused scaling reads).
extern "C" __global__ void to_twiddles(fr::twiddle *out, const fr::elem *__restrict__ in, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        out[i] = fr::to_twiddle(in[i]);
}
