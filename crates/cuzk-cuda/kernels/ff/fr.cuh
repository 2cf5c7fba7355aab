// The BLS12-381 scalar field Fr on the device: fr_elem.cuh (representation, add, sub)
// and the Montgomery product, which has two implementations with bit-identical results:
// fr_mul_fp64.cuh (52-bit limbs on the FP64 units; GPUs with full-rate FP64: A100,
// H100/H200) and fr_mul_int.cuh (32-bit integer carry chains; GPUs whose FP64 runs at
// 1/64 rate: RTX 30xx/40xx/50xx). `mul` picks one per architecture at compile time.
#pragma once
#include "fr_elem.cuh"
#include "fr_mul_fp64.cuh"
#include "fr_mul_int.cuh"
#include "fp64_rate.cuh"

namespace fr {

__device__ __forceinline__ elem mul(const elem &a, const elem &b) {
#ifdef CUZK_FULL_RATE_FP64
    return mul_fp64(a, b);
#else
    return mul_int(a, b);
#endif
}

// A constant factor stored ready for the product (NTT twiddles): on the FP64 path its
// limbs are split once, when the table is built, instead of in every product. At most
// 40 bytes on every architecture, so the host sizes tables without knowing the path.
#ifdef CUZK_FULL_RATE_FP64
typedef limbs52 twiddle;
__device__ __forceinline__ twiddle to_twiddle(const elem &w) { return split52<4>(w.l); }
__device__ __forceinline__ elem mul_twiddle(const elem &a, const twiddle &w) { return mont52(split52<0>(a.l), w); }
#else
typedef elem twiddle;
__device__ __forceinline__ twiddle to_twiddle(const elem &w) { return w; }
__device__ __forceinline__ elem mul_twiddle(const elem &a, const twiddle &w) { return mul_int(a, w); }
#endif
static_assert(sizeof(twiddle) <= 40, "host twiddle tables have 40-byte entries");

// s out of Montgomery form, s·R · 1 · R^-1: the canonical value, whose bits are the
// scalar's digits (MSM windows, fixed-base tables).
__device__ __forceinline__ elem from_montgomery(const elem &s) {
    const elem one_plain{{1, 0, 0, 0, 0, 0, 0, 0}};
    return mul(s, one_plain);
}

}  // namespace fr
