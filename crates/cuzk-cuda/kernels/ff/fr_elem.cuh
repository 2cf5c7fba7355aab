// The BLS12-381 scalar field Fr in Montgomery form (R = 2^256), eight 32-bit limbs,
// least significant first: the same bytes blstrs' Scalar holds on the host, so
// buffers move between host and device unchanged. Every value is kept fully reduced
// (< r), so results are bit-identical to the CPU's.
//
// This header has the representation, addition and subtraction; fr.cuh adds the
// product.
#pragma once
#include <stdint.h>

namespace fr {

// r = 0x73eda753 299d7d48 3339d808 09a1d805 53bda402 fffe5bfe ffffffff 00000001
#define FR_R0 0x00000001u
#define FR_R1 0xffffffffu
#define FR_R2 0xfffe5bfeu
#define FR_R3 0x53bda402u
#define FR_R4 0x09a1d805u
#define FR_R5 0x3339d808u
#define FR_R6 0x299d7d48u
#define FR_R7 0x73eda753u
// -r^{-1} mod 2^32; r ≡ 1 (mod 2^32), so it is 2^32 - 1.
#define FR_INV 0xffffffffu

struct __align__(16) elem {
    uint32_t l[8];
};

// d = x - y over eight limbs; returns the borrow word (all ones if x < y, else 0).
__device__ __forceinline__ uint32_t sub_limbs(uint32_t d[8], const uint32_t x[8], const uint32_t y[8]) {
    uint32_t borrow;
    asm("sub.cc.u32  %0, %9,  %17;\n\t"
        "subc.cc.u32 %1, %10, %18;\n\t"
        "subc.cc.u32 %2, %11, %19;\n\t"
        "subc.cc.u32 %3, %12, %20;\n\t"
        "subc.cc.u32 %4, %13, %21;\n\t"
        "subc.cc.u32 %5, %14, %22;\n\t"
        "subc.cc.u32 %6, %15, %23;\n\t"
        "subc.cc.u32 %7, %16, %24;\n\t"
        "subc.u32    %8, 0, 0;"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7]), "=r"(borrow)
        : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]), "r"(x[5]), "r"(x[6]), "r"(x[7]), "r"(y[0]), "r"(y[1]),
          "r"(y[2]), "r"(y[3]), "r"(y[4]), "r"(y[5]), "r"(y[6]), "r"(y[7]));
    return borrow;
}

// x - r if x >= r, for x < 2r. Since r < 2^255, x < 2^256 always fits eight limbs.
__device__ __forceinline__ elem reduce_once(const uint32_t x[8]) {
    const uint32_t r[8] = {FR_R0, FR_R1, FR_R2, FR_R3, FR_R4, FR_R5, FR_R6, FR_R7};
    uint32_t d[8];
    const uint32_t borrow = sub_limbs(d, x, r);
    elem out;
#pragma unroll
    for (int i = 0; i < 8; i++) out.l[i] = borrow ? x[i] : d[i];
    return out;
}

__device__ __forceinline__ elem add_limbs(const uint32_t x[8], const uint32_t y[8]) {
    elem out;
    asm("add.cc.u32  %0, %8,  %16;\n\t"
        "addc.cc.u32 %1, %9,  %17;\n\t"
        "addc.cc.u32 %2, %10, %18;\n\t"
        "addc.cc.u32 %3, %11, %19;\n\t"
        "addc.cc.u32 %4, %12, %20;\n\t"
        "addc.cc.u32 %5, %13, %21;\n\t"
        "addc.cc.u32 %6, %14, %22;\n\t"
        "addc.u32    %7, %15, %23;"
        : "=r"(out.l[0]), "=r"(out.l[1]), "=r"(out.l[2]), "=r"(out.l[3]), "=r"(out.l[4]), "=r"(out.l[5]),
          "=r"(out.l[6]), "=r"(out.l[7])
        : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]), "r"(x[5]), "r"(x[6]), "r"(x[7]), "r"(y[0]), "r"(y[1]),
          "r"(y[2]), "r"(y[3]), "r"(y[4]), "r"(y[5]), "r"(y[6]), "r"(y[7]));
    return out;
}

__device__ __forceinline__ elem add(const elem &a, const elem &b) {
    // a + b < 2r < 2^256: no carry out of the top limb.
    const elem s = add_limbs(a.l, b.l);
    return reduce_once(s.l);
}

__device__ __forceinline__ elem sub(const elem &a, const elem &b) {
    uint32_t d[8];
    const uint32_t m = sub_limbs(d, a.l, b.l);
    // On borrow add r back (r masked by the borrow word).
    const uint32_t rm[8] = {FR_R0 & m, FR_R1 & m, FR_R2 & m, FR_R3 & m, FR_R4 & m, FR_R5 & m, FR_R6 & m, FR_R7 & m};
    return add_limbs(d, rm);
}

}  // namespace fr
