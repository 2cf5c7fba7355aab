// Points as `.params` files store them (uncompressed; big-endian coordinates, G2's as
// c1 then c0; flags in the top three bits of the first byte) decoded into the device's
// affine points (Montgomery form, coordinates c0 then c1, infinity as all zeros).
//
// In place: a point's encoding and its decoded form have the same size (G1 96 bytes,
// G2 192), so the raw bytes are uploaded straight into the bases' final buffer and each
// thread rewrites its own point. The checks are those of the host reader
// (format.rs, blst's decoder): no compressed flag, an infinity flag only on an all-zero
// encoding, no sort flag, coordinates below p, y² = x³ + b. A point failing one is left
// as it was and its index goes to *first_bad (atomicMin), which the host reads once per
// query and turns into the host reader's own error for that point.
#pragma once
#include "xyzz.cuh"

namespace decode {

// R² mod p, R = 2^384: fp::mul(x, R²) = x·R, x into Montgomery form.
__device__ __constant__ const uint32_t RR[12] = {0x1c341746u, 0xf4df1f34u, 0x09d104f1u, 0x0a76e6a6u,
                                                 0x4c95b6d5u, 0x8de5476cu, 0x939d83c0u, 0x67eb88a9u,
                                                 0xb519952du, 0x9a793e85u, 0x92cae3aau, 0x11988fe5u};
// 4·R mod p: the coefficient b = 4 of G1's curve y² = x³ + 4 in Montgomery form (G2's is
// 4 + 4u: this in both halves).
__device__ __constant__ const uint32_t B4[12] = {0x000cfff3u, 0xaa270000u, 0xfc34000au, 0x53cc0032u,
                                                 0x6b0a807fu, 0x478fe97au, 0xe6ba24d7u, 0xb1d37ebeu,
                                                 0xbf78ab2fu, 0x8ec9733bu, 0x3d83de7eu, 0x09d64551u};

constexpr uint32_t FLAG_COMPRESSED = 0x80, FLAG_INFINITY = 0x40, FLAG_SORT = 0x20;

// One coordinate from twelve words of big-endian bytes (as loaded, little-endian):
// limbs least significant first. Not reduced.
__device__ __forceinline__ fp::elem coordinate(const uint32_t *w) {
    fp::elem e;
#pragma unroll
    for (int i = 0; i < 12; i++) e.l[i] = __byte_perm(w[11 - i], 0, 0x0123);
    return e;
}

// x < p: the encoding is canonical.
__device__ __forceinline__ bool canonical(const fp::elem &x) {
    uint32_t d[12];
    return fp::sub_limbs(d, x.l, fp::P) == 1;
}

// Into Montgomery form; x must be canonical (fp::mul's bound).
__device__ __forceinline__ fp::elem to_montgomery(const fp::elem &x) { return fp::mul(x, fp::from_words(RR)); }

__device__ __forceinline__ fp::elem curve_b(fp::elem) { return fp::from_words(B4); }
__device__ __forceinline__ fp2::elem curve_b(fp2::elem) { return fp2::elem{fp::from_words(B4), fp::from_words(B4)}; }

template <class F>
__device__ __forceinline__ bool on_curve(const ec::affine<F> &p) {
    const typename F::elem y2 = F::sqr(p.y), x3 = F::mul(F::sqr(p.x), p.x);
    return F::equal(y2, F::add(x3, curve_b(p.x)));
}

// Coordinate c of a G1 point (x, y) or G2 point (x.c1, x.c0, y.c1, y.c0) from its words.
__device__ __forceinline__ bool read(const uint32_t *w, fp::elem &out) {
    out = coordinate(w);
    if (!canonical(out)) return false;
    out = to_montgomery(out);
    return true;
}
__device__ __forceinline__ bool read(const uint32_t *w, fp2::elem &out) {
    return read(w, out.c1) && read(w + 12, out.c0);
}

// Decodes point i of `points` (WORDS 32-bit words each) in place; false if malformed.
template <class F, int WORDS>
__device__ __forceinline__ bool decode_point(uint32_t *points, uint32_t i) {
    uint4 *p = reinterpret_cast<uint4 *>(points + (size_t)i * WORDS);  // 16-byte aligned: WORDS % 4 == 0
    uint32_t w[WORDS];
#pragma unroll
    for (int k = 0; k < WORDS / 4; k++) {
        const uint4 v = p[k];
        w[4 * k] = v.x, w[4 * k + 1] = v.y, w[4 * k + 2] = v.z, w[4 * k + 3] = v.w;
    }
    const uint32_t flags = w[0] & 0xff;  // the first byte
    ec::affine<F> a;
    if (flags & FLAG_COMPRESSED) return false;
    if (flags & FLAG_INFINITY) {
        uint32_t rest = w[0] & ~FLAG_INFINITY;
#pragma unroll
        for (int k = 1; k < WORDS; k++) rest |= w[k];
        if (rest != 0) return false;
        a.x = F::zero(), a.y = F::zero();
    } else {
        if (flags & FLAG_SORT) return false;
        if (!read(w, a.x) || !read(w + WORDS / 2, a.y) || !on_curve(a)) return false;
    }
    const uint32_t *out = reinterpret_cast<const uint32_t *>(&a);
#pragma unroll
    for (int k = 0; k < WORDS / 4; k++) p[k] = make_uint4(out[4 * k], out[4 * k + 1], out[4 * k + 2], out[4 * k + 3]);
    return true;
}

template <class F, int WORDS>
__device__ __forceinline__ void decode_points(uint32_t *points, uint32_t n, uint32_t first_index, uint32_t *first_bad) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && !decode_point<F, WORDS>(points, i)) atomicMin(first_bad, first_index + i);
}

}  // namespace decode

// points: n encoded points, decoded in place; first_index: the first one's index in its
// query (for *first_bad).
extern "C" __global__ void decode_points_g1(uint32_t *points, uint32_t n, uint32_t first_index, uint32_t *first_bad) {
    decode::decode_points<ec::fp_field, 24>(points, n, first_index, first_bad);
}
extern "C" __global__ void decode_points_g2(uint32_t *points, uint32_t n, uint32_t first_index, uint32_t *first_bad) {
    decode::decode_points<ec::fp2_field, 48>(points, n, first_index, first_bad);
}
