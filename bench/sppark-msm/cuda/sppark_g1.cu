// The reference MSM for issue 25: sppark's BLS12-381 G1 Pippenger, bases resident on
// the device, behind three C functions. Only the types and the entry points are ours;
// the MSM is the published sppark crate's, compiled from its headers.

#include <cuda.h>

#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>
#include <ff/bls12-381.hpp>

using namespace bls12_381;

// sppark's layout matches blst's: affine (x, y) and Jacobian (X, Y, Z) in Montgomery
// form, 48-byte coordinates; scalars are blst_fr (Montgomery form: `mont` = true).
typedef jacobian_t<fp_t> point_t;
typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;
typedef fr_t scalar_t;

#include <msm/pippenger.cuh>

typedef msm_t<bucket_t, point_t, affine_t, scalar_t> resident_msm_t;

static_assert(sizeof(affine_t) == 96, "affine_t must be blst_p1_affine's size");
static_assert(sizeof(point_t) == 144, "point_t must be blst_p1's size");
static_assert(sizeof(scalar_t) == 32, "scalar_t must be blst_fr's size");

// Uploads `n` bases once; null on failure (the message goes to stderr).
extern "C" void* sppark_g1_bases_new(const affine_t* bases, size_t n) {
    try {
        return new resident_msm_t(bases, n);
    } catch (const cuda_error& e) {
        fprintf(stderr, "sppark: uploading %zu bases failed: %s\n", n, e.what());
        return nullptr;
    }
}

// out = sum scalars[i] * bases[i] over the first `n` resident bases; scalars in host
// memory (uploaded by sppark). Returns sppark's error code, 0 on success.
extern "C" int sppark_g1_msm(void* msm, point_t* out, const scalar_t* scalars, size_t n) {
    // Null bases: the resident ones.
    const affine_t* resident = nullptr;
    RustError e = static_cast<resident_msm_t*>(msm)->invoke(*out, resident, n, scalars, true);
    if (e.code != 0) fprintf(stderr, "sppark: MSM of %zu failed: %s\n", n, e.message ? e.message : "no message");
    free(e.message);
    return e.code;
}

extern "C" void sppark_g1_bases_free(void* msm) { delete static_cast<resident_msm_t*>(msm); }
