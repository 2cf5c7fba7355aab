// Host stand-ins for the CUDA intrinsics the field headers use, exact to their
// definitions (round-toward-zero FMA, bit casts, funnel shift), so the kernels'
// arithmetic can be compiled and checked by a host C++ compiler on machines without
// a GPU. Compile with -frounding-math.
#pragma once
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>

#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __constant__
#define __align__(n) alignas(n)

static inline double __fma_rz(double a, double b, double c) {
    std::fesetround(FE_TOWARDZERO);
    volatile double r = std::fma(a, b, c);
    std::fesetround(FE_TONEAREST);
    return r;
}
static inline long long __double_as_longlong(double d) {
    long long x;
    std::memcpy(&x, &d, 8);
    return x;
}
static inline double __hiloint2double(int hi, int lo) {
    const uint64_t x = ((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo;
    double d;
    std::memcpy(&d, &x, 8);
    return d;
}
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t s) {
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> (s & 31));
}
