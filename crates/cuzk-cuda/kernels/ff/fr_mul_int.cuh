// Montgomery product in Fr with 32-bit limbs: CIOS, each multiply-add row one PTX
// carry chain (mad.lo.cc / madc.hi.cc); a chain never spans two asm statements, since
// the carry flag does not survive between them. On Hopper each 32x32 product costs an
// IMAD plus an IMAD.HI (6 issue cycles per warp), so this runs at ~900 cycles per warp
// product there; it is the path for GPUs without fast FP64.
#pragma once
#include "fr_elem.cuh"

namespace fr {

// t[0..9] += a[0..7] * b, as two carry chains (low halves, then high halves).
__device__ __forceinline__ void mul_add_row(uint32_t t[10], const uint32_t a[8], uint32_t b) {
    asm("mad.lo.cc.u32  %0, %10, %18, %0;\n\t"
        "madc.lo.cc.u32 %1, %11, %18, %1;\n\t"
        "madc.lo.cc.u32 %2, %12, %18, %2;\n\t"
        "madc.lo.cc.u32 %3, %13, %18, %3;\n\t"
        "madc.lo.cc.u32 %4, %14, %18, %4;\n\t"
        "madc.lo.cc.u32 %5, %15, %18, %5;\n\t"
        "madc.lo.cc.u32 %6, %16, %18, %6;\n\t"
        "madc.lo.cc.u32 %7, %17, %18, %7;\n\t"
        "addc.cc.u32    %8, %8, 0;\n\t"
        "addc.u32       %9, %9, 0;"
        : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]),
          "+r"(t[9])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(b));
    asm("mad.hi.cc.u32  %1, %10, %18, %1;\n\t"
        "madc.hi.cc.u32 %2, %11, %18, %2;\n\t"
        "madc.hi.cc.u32 %3, %12, %18, %3;\n\t"
        "madc.hi.cc.u32 %4, %13, %18, %4;\n\t"
        "madc.hi.cc.u32 %5, %14, %18, %5;\n\t"
        "madc.hi.cc.u32 %6, %15, %18, %6;\n\t"
        "madc.hi.cc.u32 %7, %16, %18, %7;\n\t"
        "madc.hi.cc.u32 %8, %17, %18, %8;\n\t"
        "addc.u32       %9, %9, 0;"
        : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]),
          "+r"(t[9])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(b));
}

// t[0..9] += m * r, using r0 = 1 and r1 = 2^32 - 1: m*r0 = m, and m*r1 has low word
// -m and high word m - (m != 0), so two of the eight products need no multiplier.
// Those words are computed inside the asm: passed in as operands, the compiler may
// give one of them the register of t[0] (their values can coincide), which the
// chain overwrites first.
__device__ __forceinline__ void add_m_times_r(uint32_t t[10], uint32_t m) {
    asm("{\n\t"
        ".reg .u32 lo1;\n\t"
        "sub.u32        lo1, 0, %10;\n\t"
        "add.cc.u32     %0, %0, %10;\n\t"
        "addc.cc.u32    %1, %1, lo1;\n\t"
        "madc.lo.cc.u32 %2, %10, %11, %2;\n\t"
        "madc.lo.cc.u32 %3, %10, %12, %3;\n\t"
        "madc.lo.cc.u32 %4, %10, %13, %4;\n\t"
        "madc.lo.cc.u32 %5, %10, %14, %5;\n\t"
        "madc.lo.cc.u32 %6, %10, %15, %6;\n\t"
        "madc.lo.cc.u32 %7, %10, %16, %7;\n\t"
        "addc.cc.u32    %8, %8, 0;\n\t"
        "addc.u32       %9, %9, 0;\n\t"
        "}"
        : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]),
          "+r"(t[9])
        : "r"(m), "n"(FR_R2), "n"(FR_R3), "n"(FR_R4), "n"(FR_R5), "n"(FR_R6), "n"(FR_R7));
    asm("{\n\t"
        ".reg .u32 hi1;\n\t"
        ".reg .pred nz;\n\t"
        "setp.ne.u32    nz, %10, 0;\n\t"
        "selp.u32       hi1, 1, 0, nz;\n\t"
        "sub.u32        hi1, %10, hi1;\n\t"
        "add.cc.u32     %2, %2, hi1;\n\t"
        "madc.hi.cc.u32 %3, %10, %11, %3;\n\t"
        "madc.hi.cc.u32 %4, %10, %12, %4;\n\t"
        "madc.hi.cc.u32 %5, %10, %13, %5;\n\t"
        "madc.hi.cc.u32 %6, %10, %14, %6;\n\t"
        "madc.hi.cc.u32 %7, %10, %15, %7;\n\t"
        "madc.hi.cc.u32 %8, %10, %16, %8;\n\t"
        "addc.u32       %9, %9, 0;\n\t"
        "}"
        : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]),
          "+r"(t[9])
        : "r"(m), "n"(FR_R2), "n"(FR_R3), "n"(FR_R4), "n"(FR_R5), "n"(FR_R6), "n"(FR_R7));
}

__device__ __forceinline__ elem mul_int(const elem &a, const elem &b) {
    uint32_t t[10];
#pragma unroll
    for (int i = 0; i < 10; i++) t[i] = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        mul_add_row(t, a.l, b.l[i]);
        // m makes t divisible by 2^32: m = t0 * (-r^{-1}) mod 2^32 = -t0.
        add_m_times_r(t, t[0] * FR_INV);
        // t0 is now 0: shift down one limb.
#pragma unroll
        for (int j = 0; j < 9; j++) t[j] = t[j + 1];
        t[9] = 0;
    }
    // t < 2r < 2^256 here, so t[8] is 0 and one conditional subtraction reduces it.
    return reduce_once(t);
}

}  // namespace fr
