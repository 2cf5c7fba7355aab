// Reads lines "c s" (c in decimal, s as 8 words of 8 hex digits, most significant
// first) and writes the signed digits of s, window 0 first, as computed by
// kernels/msm/digits.cuh.
#include <cstdio>

#include "cuda_shim.h"
#include "msm/digits.cuh"

int main() {
    unsigned c;
    uint32_t s[8];
    while (std::scanf("%u", &c) == 1) {
        for (int i = 7; i >= 0; i--)
            if (std::scanf("%8x", &s[i]) != 1) return 1;
        const uint32_t windows = 255 / c + 1;
        int digits[256] = {0};
        const uint32_t buckets = 1u << (c - 1);
        msm_signed_digits(s, c, windows, [&](uint32_t w, uint32_t bucket, bool negative) {
            // A bucket index out of range is printed as a digit no window can hold.
            const int d = bucket < buckets ? (int)(bucket + 1) : (1 << 30);
            digits[w] = negative ? -d : d;
        });
        for (uint32_t w = 0; w < windows; w++) std::printf("%d ", digits[w]);
        std::printf("\n");
    }
    return 0;
}
