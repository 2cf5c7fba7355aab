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
// Twiddles are stored stage by stage: tw[2^s - 1 + j] = w^(j·2^(log_n-1-s)) for
// j < 2^s, with w the forward or inverse n-th root of unity, so the butterflies of a
// stage at consecutive offsets j read consecutive twiddles (coalesced, where a single
// table of w^j would be read with a stride of 2^(log_n-1-s)). n - 1 entries in all.
//
// Shared memory holds an element as two 16-byte planes (low and high halves in
// separate arrays): consecutive elements are then 16 bytes apart, so a warp's
// 128-bit accesses to consecutive elements do not conflict on the banks.
#pragma once
#include "../ff/fr.cuh"

__device__ __forceinline__ uint32_t bitrev32(uint32_t i, uint32_t log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

// Shared-memory element arrays as two planes of 16 bytes: [0, size) low halves,
// [size, 2·size) high halves.
struct shared_elems {
    uint4 *p;
    uint32_t size;
    __device__ __forceinline__ fr::elem get(uint32_t i) const {
        const uint4 lo = p[i], hi = p[size + i];
        return fr::elem{{lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}};
    }
    __device__ __forceinline__ void set(uint32_t i, const fr::elem &v) const {
        p[i] = make_uint4(v.l[0], v.l[1], v.l[2], v.l[3]);
        p[size + i] = make_uint4(v.l[4], v.l[5], v.l[6], v.l[7]);
    }
};

// DIT: (x, y) <- (x + w·y, x − w·y).  DIF: (x, y) <- (x + y, (x − y)·w).
// The twiddle of offset j in stage s is tw[2^s - 1 + j]; j = 0 needs no product.
__device__ __forceinline__ void butterfly(fr::elem &x, fr::elem &y, const fr::elem *tw, uint32_t s, uint64_t j, bool dif) {
    const bool trivial = j == 0;
    const uint64_t widx = ((1ull << s) - 1) + j;
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
// 512 threads and at most 64 registers (what the FP64 product needs without
// spilling), so two blocks (1024 threads) fit an SM.
extern "C" __global__ void __launch_bounds__(512, 2) ntt_block(fr::elem *data, const fr::elem *__restrict__ tw, uint32_t log_n, uint32_t k,
                                     uint32_t dif) {
    extern __shared__ uint4 sh_planes[];
    const uint32_t size = 1u << k;
    const shared_elems sh{sh_planes, size};
    fr::elem *base = data + (uint64_t)blockIdx.x * size;
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) sh.set(i, base[i]);
    __syncthreads();
    const uint32_t q = threadIdx.x;
    for (uint32_t step = 0; step < k; step++) {
        const uint32_t s = dif ? k - 1 - step : step;
        const uint32_t half = 1u << s;
        const uint32_t j = q & (half - 1);
        const uint32_t i0 = ((q >> s) << (s + 1)) | j;
        fr::elem x = sh.get(i0), y = sh.get(i0 + half);
        butterfly(x, y, tw, s, j, dif);
        sh.set(i0, x);
        sh.set(i0 + half, y);
        __syncthreads();
    }
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) base[i] = sh.get(i);
}

// Stages s0..s0+m-1. The elements (hi, mid, lo) = index bits split at s0+m and s0;
// the butterflies of these stages mix only elements of equal (hi, lo). A block
// takes 2^m values of mid for L consecutive lo (L a power of two dividing 2^s0):
// blockDim.x = 2^(m-1) * L, shared memory 2^m * L elements.
extern "C" __global__ void __launch_bounds__(512, 2) ntt_strided(fr::elem *data, const fr::elem *__restrict__ tw, uint32_t log_n, uint32_t s0,
                                       uint32_t m, uint32_t log_l, uint32_t dif) {
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
        uint32_t mid = e >> log_l, l = e & (L - 1);
        sh.set(e, data[hi_base | ((uint64_t)mid << s0) | (lo0 + l)]);
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
        const uint32_t i0 = (mid0 << log_l) | l, i1 = ((mid0 + half) << log_l) | l;
        fr::elem x = sh.get(i0), y = sh.get(i1);
        butterfly(x, y, tw, s, j, dif);
        sh.set(i0, x);
        sh.set(i1, y);
        __syncthreads();
    }
    for (uint32_t e = threadIdx.x; e < rows * L; e += blockDim.x) {
        uint32_t mid = e >> log_l, l2 = e & (L - 1);
        data[hi_base | ((uint64_t)mid << s0) | (lo0 + l2)] = sh.get(e);
    }
}

// The stage-major twiddle table (see the top of this file): out[e] for e < 2^log_n - 1,
// from a two-level table of powers of w over exponents < 2^(log_n - 1).
extern "C" __global__ void fill_stage_twiddles(fr::elem *out, const fr::elem *__restrict__ lo, const fr::elem *__restrict__ hi,
                                              uint32_t lo_bits, uint32_t log_n) {
    const uint64_t len = (1ull << log_n) - 1;
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < len; e += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t s = 63 - __clzll(e + 1);
        const uint64_t j = e + 1 - (1ull << s);
        const uint64_t x = j << (log_n - 1 - s);
        out[e] = fr::mul(lo[x & ((1u << lo_bits) - 1)], hi[x >> lo_bits]);
    }
}
