// Experimental: Montgomery product with 29-bit limbs, 64-bit column accumulation.
#pragma once
#include "../../crates/cuzk-cuda/kernels/ff/fr.cuh"
namespace w29 {
#define W29_MASK 0x1fffffffu
// r in 29-bit limbs
struct limbs { uint32_t v[9]; };
__device__ __forceinline__ limbs split(const uint32_t x[8]) {
  limbs o;
#pragma unroll
  for (int k = 0; k < 9; k++) {
    const int s = 29 * k, w = s / 32, off = s % 32;
    uint32_t lo = x[w];
    uint32_t hi = (w + 1 < 8) ? x[w + 1] : 0;
    o.v[k] = __funnelshift_r(lo, hi, off) & W29_MASK;
  }
  return o;
}
__device__ __forceinline__ void join(uint32_t out[8], const uint32_t t[9]) {
#pragma unroll
  for (int w = 0; w < 8; w++) {
    const int s = 32 * w;
    const int k = s / 29, off = s % 29;
    uint64_t v = (uint64_t)t[k] >> off;
    int have = 29 - off;
    if (k + 1 < 9) v |= (uint64_t)t[k + 1] << have;
    if (k + 2 < 9 && have + 29 < 32) v |= (uint64_t)t[k + 2] << (have + 29);
    out[w] = (uint32_t)v;
  }
}
// P[k]: r in 29-bit limbs, filled in at compile time by the host generator below.
#include "w29_consts.h"  // defines W29_P0..W29_P8
__device__ __forceinline__ uint32_t P(int k) {
  switch (k) { case 0: return W29_P0; case 1: return W29_P1; case 2: return W29_P2; case 3: return W29_P3;
  case 4: return W29_P4; case 5: return W29_P5; case 6: return W29_P6; case 7: return W29_P7; default: return W29_P8; }
}
// a, b in 29-bit limbs (< 2r); returns a*b*2^-261 mod r, < 2r, in 29-bit limbs (last limb may be wider? no: < 2r < 2^256)
__device__ __forceinline__ void madw(uint64_t &acc, uint32_t a, uint32_t b) {
  asm("mad.wide.u32 %0, %1, %2, %0;" : "+l"(acc) : "r"(a), "r"(b));
}
__device__ __forceinline__ void mont(uint32_t t[9], const uint32_t a[9], const uint32_t b[9]) {
  uint32_t m[9];
  uint64_t acc = 0;
#pragma unroll
  for (int k = 0; k < 9; k++) {
#pragma unroll
    for (int i = 0; i < k; i++) {
      madw(acc, a[i], b[k - i]);
      madw(acc, m[i], P(k - i));
    }
    madw(acc, a[k], b[0]);
    m[k] = (0u - (uint32_t)acc) & W29_MASK;  // -r^-1 = -1 mod 2^29
    acc += m[k];                               // P(0) == 1
    acc >>= 29;
  }
#pragma unroll
  for (int k = 9; k < 17; k++) {
#pragma unroll
    for (int i = k - 8; i < 9; i++) {
      madw(acc, a[i], b[k - i]);
      madw(acc, m[i], P(k - i));
    }
    t[k - 9] = (uint32_t)acc & W29_MASK;
    acc >>= 29;
  }
  t[8] = (uint32_t)acc;
}
// x (8x32, fully reduced) times y given in 29-bit limbs and prescaled by 2^5.
__device__ __forceinline__ fr::elem mul_pre(const fr::elem &x, const limbs &y) {
  limbs a = split(x.l);
  uint32_t t[9];
  mont(t, a.v, y.v);
  uint32_t o[8];
  join(o, t);
  return fr::reduce_once(o);
}
}
