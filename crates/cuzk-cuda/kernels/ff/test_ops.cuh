// Elementwise kernels for testing the field arithmetic against the host.
#pragma once
#include "fp.cuh"
#include "fr.cuh"

// Test kernel: out[i] = op(x[i], y[i]) for op 0 add, 1 sub, 2 mul, 3 the integer
// product, 4 the FP64 product (both tested on any GPU, whichever `mul` uses).
extern "C" __global__ void fr_binary_op(fr::elem *out, const fr::elem *__restrict__ x, const fr::elem *__restrict__ y,
                                        uint32_t op, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        out[i] = op == 0   ? fr::add(x[i], y[i])
                 : op == 1 ? fr::sub(x[i], y[i])
                 : op == 2 ? fr::mul(x[i], y[i])
                 : op == 3 ? fr::mul_int(x[i], y[i])
                           : fr::mul_fp64(x[i], y[i]);
    }
}

// Test kernel: out[i] = op(x[i], y[i]) in Fp for op 0 add, 1 sub, 2 mul.
extern "C" __global__ void fp_binary_op(fp::elem *out, const fp::elem *__restrict__ x, const fp::elem *__restrict__ y,
                                        uint32_t op, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        out[i] = op == 0 ? fp::add(x[i], y[i]) : op == 1 ? fp::sub(x[i], y[i]) : fp::mul(x[i], y[i]);
    }
}
