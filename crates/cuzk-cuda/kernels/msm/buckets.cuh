// Bucket lookup over a run of buckets stored one after another: bucket g holds the
// positions offsets[g] .. offsets[g + 1] (pippenger.cuh's sorted entries, or the points a
// batch-affine round leaves, batch_affine.cuh).
#pragma once
#include <stdint.h>

// The bucket holding position `pos`: the largest g < len with offsets[g] ≤ pos
// (offsets is non-decreasing; empty buckets repeat an offset; offsets[len] > pos).
__device__ __forceinline__ uint32_t msm_bucket_of(const uint32_t *offsets, uint32_t len, uint32_t pos) {
    uint32_t lo = 0, hi = len;  // offsets[lo] ≤ pos < offsets[hi]
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (offsets[mid] <= pos)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}
