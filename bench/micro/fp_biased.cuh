// Experiment (issue 25): the Fp product of ff/fp.cuh with its column sums made cheaper.
// fp::mont subtracts the exponent bits of each half's double (2^52 for the low half,
// 2^104 for the high one) as it adds it. Both biases are multiples of 2^52, so they
// never touch a column's low 52 bits (what m and the carries read once the column is
// complete): here every column starts at minus the biases of all the halves it will
// receive, and each limb product adds the raw bits of its low half and of the previous
// product's high half in one three-operand 64-bit add.
#pragma once
#include "../../crates/cuzk-cuda/kernels/ff/fp.cuh"

namespace fp_biased {

__device__ __forceinline__ uint64_t bits(double x) { return (uint64_t)__double_as_longlong(x); }

// Halves column c receives: a low half from each limb product of i + j = c and a high
// half from each of i + j = c − 1, in a·b (i, j < 8) and in the reduction (k + j, the
// same shape); so twice the count of an 8×8 product's columns.
__device__ __forceinline__ constexpr int terms(int c) { return c < 0 || c > 14 ? 0 : (c < 8 ? c + 1 : 15 - c); }
__device__ __forceinline__ constexpr uint64_t bias(int c) {
    return 0ull - 2ull * ((uint64_t)terms(c) * LIMBS52_BITS_2P52 + (uint64_t)terms(c - 1) * LIMBS52_BITS_2P104);
}

__device__ __forceinline__ fp::elem mont(const double a[8], const double b[8]) {
    const double pl[8] = {4222124650637995.0, 4480601151241119.0, 1883421074697215.0, 329812468902415.0,
                          2080788367864709.0, 486514101631693.0,  539007656565323.0,  106513.0};
    const uint64_t PINV = 0x3fffcfffcfffdull;
    uint64_t col[17];
#pragma unroll
    for (int c = 0; c < 17; c++) col[c] = bias(c);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        uint64_t carried = 0;  // the previous limb product's high half, for column i + j
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const double hi = __fma_rz(a[i], b[j], 0x1p104);
            const double lo = __fma_rz(a[i], b[j], (0x1p104 + 0x1p52) - hi);
            col[i + j] += bits(lo) + carried;
            carried = bits(hi);
        }
        col[i + 8] += carried;
    }
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint64_t m = (col[k] * PINV) & LIMBS52_MASK;
        const double dm = limbs52::to_double((uint32_t)m, (uint32_t)(m >> 32));
        uint64_t carried = 0;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const double hi = __fma_rz(dm, pl[j], 0x1p104);
            const double lo = __fma_rz(dm, pl[j], (0x1p104 + 0x1p52) - hi);
            col[k + j] += bits(lo) + carried;
            carried = bits(hi);
        }
        col[k + 8] += carried;
        col[k + 1] += col[k] >> 52;
    }
    uint32_t o[12];
    limbs52::join<8, 12>(o, col + 8);
    return fp::reduce_once(o);
}

__device__ __noinline__ fp::elem mul(fp::elem a, fp::elem b) {
    double da[8], db[8];
    limbs52::split<12, 8, 0>(a.l, da);
    limbs52::split<12, 8, 32>(b.l, db);
    return mont(da, db);
}

}  // namespace fp_biased
