// Comparison point (issue 25): the Fp product as it was before fp::mont started its
// columns at minus their halves' exponent biases: here each limb product subtracts the
// exponent bits of its two halves as it adds them (limbs52::mul_acc).
#pragma once
#include "../../crates/cuzk-cuda/kernels/ff/fp.cuh"

namespace fp_per_product {

__device__ __forceinline__ fp::elem mont(const double a[8], const double b[8]) {
    const double pl[8] = {4222124650637995.0, 4480601151241119.0, 1883421074697215.0, 329812468902415.0,
                          2080788367864709.0, 486514101631693.0,  539007656565323.0,  106513.0};
    const uint64_t PINV = 0x3fffcfffcfffdull;
    uint64_t col[17];
#pragma unroll
    for (int i = 0; i < 17; i++) col[i] = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) limbs52::mul_acc(col[i + j], col[i + j + 1], a[i], b[j]);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint64_t m = (col[k] * PINV) & LIMBS52_MASK;
        const double dm = limbs52::to_double((uint32_t)m, (uint32_t)(m >> 32));
#pragma unroll
        for (int j = 0; j < 8; j++) limbs52::mul_acc(col[k + j], col[k + j + 1], dm, pl[j]);
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

}  // namespace fp_per_product
