// Signed c-bit digits of a canonical scalar (below r < 2^255), for the MSM's buckets.
//
// Windows of c bits, read from the least significant; a window value above 2^(c−1)
// becomes the negative digit value − 2^c with a carry of 1 into the next window, so
// every digit d has |d| ≤ 2^(c−1) and a window needs 2^(c−1) buckets (bucket |d| − 1).
// With windows = ⌊255/c⌋ + 1 the top window has at most c − 1 bits plus a carry, so
// it never carries out: Σ d_w·2^(c·w) = s exactly (tests/host_arith.rs checks this).
#pragma once
#include <stdint.h>

// The c-bit field of s starting at bit `pos` (bits past 255 are 0).
__device__ __forceinline__ uint32_t msm_bits(const uint32_t s[8], uint32_t pos, uint32_t c) {
    const uint32_t w = pos >> 5, off = pos & 31;
    if (w >= 8) return 0;
    uint64_t v = s[w];
    if (w + 1 < 8) v |= (uint64_t)s[w + 1] << 32;
    return (uint32_t)(v >> off) & ((1u << c) - 1);
}

// Calls f(window, bucket, negative) for every non-zero digit of the canonical s.
template <typename F>
__device__ __forceinline__ void msm_signed_digits(const uint32_t s[8], uint32_t c, uint32_t windows, F f) {
    const uint32_t half = 1u << (c - 1);
    uint32_t carry = 0;
    for (uint32_t w = 0; w < windows; w++) {
        const uint32_t raw = msm_bits(s, w * c, c) + carry;
        if (raw == (1u << c)) {
            carry = 1;  // digit 0, carry 1
        } else if (raw > half) {
            f(w, (1u << c) - raw - 1, true);  // digit raw − 2^c < 0, |d| − 1 = 2^c − raw − 1
            carry = 1;
        } else {
            if (raw != 0) f(w, raw - 1, false);
            carry = 0;
        }
    }
}
