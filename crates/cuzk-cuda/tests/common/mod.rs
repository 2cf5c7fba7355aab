//! Shared by the test binaries: the base-field modulus and random elements below it,
//! and the GPU the GPU tests run on. (Each test binary uses part of it.)
#![allow(dead_code)]

use std::sync::Arc;

use blstrs::Scalar;
use cuzk_cuda::Gpu;
use ff::Field;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Device 0; None where this machine has no CUDA driver or device (the GPU tests then
/// return), unless CUZK_REQUIRE_GPU=1; any other failure panics
/// (cuzk_cuda::gpu_for_tests).
pub fn gpu() -> Option<Arc<Gpu>> {
    cuzk_cuda::gpu_for_tests()
}

/// n random scalars, filled in parallel (16 chunks, each from its own seed).
pub fn random_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    let chunk = n.div_ceil(16).max(1);
    std::thread::scope(|s| {
        for (i, c) in v.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut r = ChaCha20Rng::seed_from_u64(seed ^ (i as u64) << 32);
                c.iter_mut().for_each(|x| *x = Scalar::random(&mut r));
            });
        }
    });
    v
}

/// p, the BLS12-381 base-field modulus, as six little-endian 64-bit limbs.
pub const FP_MODULUS: [u64; 6] =
    [0xb9fe_ffff_ffff_aaab, 0x1eab_fffe_b153_ffff, 0x6730_d2a0_f6b0_f624, 0x6477_4b84_f385_12bf, 0x4b1b_a7b6_434b_acd7, 0x1a01_11ea_397f_e69a];

/// A random element below p (any value below p is a valid Montgomery form).
pub fn random_fp_limbs(rng: &mut impl RngCore) -> [u64; 6] {
    let mut l = [0u64; 6];
    l.iter_mut().for_each(|x| *x = rng.next_u64());
    l[5] %= FP_MODULUS[5];
    l
}

/// 0, 1 and p − 1.
pub fn edge_fp_limbs() -> [[u64; 6]; 3] {
    let mut pm1 = FP_MODULUS;
    pm1[0] -= 1;
    [[0; 6], [1, 0, 0, 0, 0, 0], pm1]
}
