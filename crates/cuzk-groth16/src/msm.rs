//! Multi-scalar multiplication on the CPU, through blst's Pippenger.
//!
//! [`msm`] is the dense MSM Σ kᵢ·Pᵢ. [`split_msm`] is what the prover uses for the
//! queries over aux variables: it walks a density bitmap (which variables have a base
//! in the query) together with the 0/1 classes of the scalars, skips the zeros, adds up
//! the bases of the ones with batched affine additions, and gathers only the remaining
//! "significant" pairs for Pippenger.

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine, MultiPoint};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::PrimeField;
use group::Group;
use rayon::prelude::*;

use crate::density::{Density, ScalarClasses};

/// Variables per task when walking densities (a multiple of 64: whole bitmap words).
const SPLIT_CHUNK: usize = 1 << 16;

/// An affine curve point type the MSMs work over (G1 or G2 of BLS12-381).
pub trait MsmAffine: Copy + Send + Sync + 'static {
    type Projective: Group + Copy + Send + Sync + std::ops::AddAssign;
    /// Σ kᵢ·Pᵢ with `scalars_le` holding 32 little-endian bytes per scalar.
    fn pippenger(bases: &[Self], scalars_le: &[u8]) -> Self::Projective;
    /// Σ Pᵢ.
    fn sum(bases: &[Self]) -> Self::Projective;
}

macro_rules! impl_msm_affine {
    ($affine:ty, $proj:ty, $raw_affine:ty, $raw:ty) => {
        impl MsmAffine for $affine {
            type Projective = $proj;

            fn pippenger(bases: &[Self], scalars_le: &[u8]) -> $proj {
                debug_assert_eq!(scalars_le.len(), bases.len() * 32);
                if bases.is_empty() {
                    return <$proj>::identity();
                }
                // SAFETY: the blstrs affine type is #[repr(transparent)] over the blst one,
                // so the slices have identical layout and length.
                let raw = unsafe { std::slice::from_raw_parts(bases.as_ptr() as *const $raw_affine, bases.len()) };
                wrap::<$proj, $raw>(raw.mult(scalars_le, 255))
            }

            fn sum(bases: &[Self]) -> $proj {
                if bases.is_empty() {
                    return <$proj>::identity();
                }
                // SAFETY: as above, #[repr(transparent)].
                let raw = unsafe { std::slice::from_raw_parts(bases.as_ptr() as *const $raw_affine, bases.len()) };
                wrap::<$proj, $raw>(raw.add())
            }
        }
    };
}

fn wrap<P: Group + AsMut<R>, R>(raw: R) -> P {
    let mut p = P::identity();
    *p.as_mut() = raw;
    p
}

impl_msm_affine!(G1Affine, G1Projective, blst_p1_affine, blst_p1);
impl_msm_affine!(G2Affine, G2Projective, blst_p2_affine, blst_p2);

/// Canonical little-endian bytes of each scalar, in parallel.
pub fn scalars_to_bytes(scalars: &[Scalar]) -> Vec<u8> {
    let mut out = vec![0u8; scalars.len() * 32];
    out.par_chunks_mut(32 * 4096).zip(scalars.par_chunks(4096)).for_each(|(o, s)| {
        for (o, s) in o.chunks_exact_mut(32).zip(s) {
            o.copy_from_slice(&s.to_repr());
        }
    });
    out
}

/// Dense MSM Σ kᵢ·Pᵢ over the common prefix of `bases` and `scalars`.
pub fn msm<A: MsmAffine>(bases: &[A], scalars: &[Scalar]) -> A::Projective {
    let n = bases.len().min(scalars.len());
    A::pippenger(&bases[..n], &scalars_to_bytes(&scalars[..n]))
}

/// What one split MSM did, for reports and for checking the split.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitCounts {
    pub zeros: usize,
    pub ones: usize,
    pub significant: usize,
}

/// Σ over variables `i` in `density`: scalars[i] · bases[rank(i)], where rank(i) is the
/// number of density members before `i`. Without a density every variable has a base.
///
/// `bases.len()` must equal the density's member count (or `scalars.len()` without one);
/// callers check this against the parameter set before proving.
pub fn split_msm<A: MsmAffine>(bases: &[A], scalars: &[Scalar], classes: &ScalarClasses, density: Option<&Density>) -> (A::Projective, SplitCounts) {
    let n = scalars.len();
    debug_assert_eq!(classes.zero.len(), n);
    let chunks = n.div_ceil(SPLIT_CHUNK);
    // Base offset of each chunk: prefix sums of member counts.
    let mut offsets = Vec::with_capacity(chunks + 1);
    offsets.push(0usize);
    match density {
        Some(d) => {
            let counts: Vec<usize> = d.words().par_chunks(SPLIT_CHUNK / 64).map(|w| w.iter().map(|x| x.count_ones() as usize).sum()).collect();
            for c in counts {
                offsets.push(offsets.last().copied().unwrap_or(0) + c);
            }
        }
        None => (1..=chunks).for_each(|c| offsets.push((c * SPLIT_CHUNK).min(n))),
    }
    debug_assert_eq!(*offsets.last().unwrap_or(&0), bases.len());

    struct Part<A: MsmAffine> {
        ones: A::Projective,
        sig_bases: Vec<A>,
        sig_scalars: Vec<u8>,
        counts: SplitCounts,
    }
    let parts: Vec<Part<A>> = (0..chunks)
        .into_par_iter()
        .map(|ci| {
            let (lo, hi) = (ci * SPLIT_CHUNK, ((ci + 1) * SPLIT_CHUNK).min(n));
            let mut k = offsets[ci];
            let mut one_bases = Vec::new();
            let mut sig_bases = Vec::new();
            let mut sig_scalars = Vec::new();
            let mut counts = SplitCounts::default();
            for (i, scalar) in scalars.iter().enumerate().take(hi).skip(lo) {
                if let Some(d) = density {
                    if !d.get(i) {
                        continue;
                    }
                }
                let base = bases[k];
                k += 1;
                if classes.zero.get(i) {
                    counts.zeros += 1;
                } else if classes.one.get(i) {
                    counts.ones += 1;
                    one_bases.push(base);
                } else {
                    counts.significant += 1;
                    sig_bases.push(base);
                    sig_scalars.extend_from_slice(&scalar.to_repr());
                }
            }
            Part { ones: A::sum(&one_bases), sig_bases, sig_scalars, counts }
        })
        .collect();

    let mut total = A::Projective::identity();
    let mut counts = SplitCounts::default();
    let sig_len: usize = parts.iter().map(|p| p.sig_bases.len()).sum();
    let mut sig_bases = Vec::with_capacity(sig_len);
    let mut sig_scalars = Vec::with_capacity(sig_len * 32);
    for p in parts {
        total += p.ones;
        counts.zeros += p.counts.zeros;
        counts.ones += p.counts.ones;
        counts.significant += p.counts.significant;
        sig_bases.extend_from_slice(&p.sig_bases);
        sig_scalars.extend_from_slice(&p.sig_scalars);
    }
    total += A::pippenger(&sig_bases, &sig_scalars);
    (total, counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use group::{prime::PrimeCurveAffine, Curve};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn naive<A: MsmAffine>(bases: &[A], scalars: &[Scalar]) -> A::Projective
    where
        A::Projective: From<A> + std::ops::Mul<Scalar, Output = A::Projective>,
    {
        let mut acc = A::Projective::identity();
        for (b, s) in bases.iter().zip(scalars) {
            acc += A::Projective::from(*b) * *s;
        }
        acc
    }

    fn random_g1(n: usize, rng: &mut ChaCha20Rng) -> Vec<G1Affine> {
        (0..n).map(|_| G1Projective::random(&mut *rng).to_affine()).collect()
    }

    /// Scalars: 0, 1, r − 1 and random ones, by `pick`.
    fn scalars(n: usize, rng: &mut ChaCha20Rng, pick: impl Fn(usize) -> u8) -> Vec<Scalar> {
        (0..n)
            .map(|i| match pick(i) {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                2 => -Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            })
            .collect()
    }

    #[test]
    fn dense_msm_matches_naive_g1_and_g2() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        for n in [0usize, 1, 2, 3, 33, 300] {
            let b = random_g1(n, &mut rng);
            let s = scalars(n, &mut rng, |i| (i % 5) as u8);
            assert_eq!(msm(&b, &s), naive(&b, &s), "G1 n={n}");
        }
        let b2: Vec<G2Affine> = (0..40).map(|_| G2Projective::random(&mut rng).to_affine()).collect();
        let s2 = scalars(40, &mut rng, |i| (i % 4) as u8);
        assert_eq!(msm(&b2, &s2), naive(&b2, &s2));
    }

    #[test]
    fn msm_handles_identity_and_repeated_bases() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let p = G1Projective::random(&mut rng).to_affine();
        let mut b = vec![p; 70];
        b[3] = G1Affine::identity();
        b[40] = G1Affine::identity();
        let s = scalars(70, &mut rng, |_| 3);
        assert_eq!(msm(&b, &s), naive(&b, &s));
    }

    fn check_split(n: usize, pick: impl Fn(usize) -> u8, with_density: bool, seed: u64) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let s = scalars(n, &mut rng, pick);
        let classes = ScalarClasses::classify(&s);
        let density = with_density.then(|| Density::from_fn(n, |i| i % 7 != 3));
        let members: Vec<usize> = (0..n).filter(|&i| density.as_ref().map_or(true, |d| d.get(i))).collect();
        let bases = random_g1(members.len(), &mut rng);
        let dense_scalars: Vec<Scalar> = members.iter().map(|&i| s[i]).collect();
        let (got, counts) = split_msm(&bases, &s, &classes, density.as_ref());
        // Large cases compare with the dense MSM (itself checked against the naive sum).
        let want = if n > 1000 { msm(&bases, &dense_scalars) } else { naive(&bases, &dense_scalars) };
        assert_eq!(got, want, "n={n} density={with_density}");
        assert_eq!(counts.zeros + counts.ones + counts.significant, members.len());
        let ones = dense_scalars.iter().filter(|x| **x == Scalar::ONE).count();
        assert_eq!(counts.ones, ones);
    }

    #[test]
    fn split_msm_edge_cases() {
        for with_density in [false, true] {
            check_split(0, |_| 3, with_density, 3); // empty
            check_split(200, |_| 0, with_density, 4); // all zero
            check_split(200, |_| 1, with_density, 5); // all one
            check_split(200, |i| (i % 2) as u8, with_density, 6); // only 0 and 1
            check_split(200, |_| 2, with_density, 7); // r − 1 everywhere
            check_split(300, |i| (i % 4) as u8, with_density, 8); // mixed
        }
        // Spans several chunks so the base offsets across chunks matter.
        check_split(SPLIT_CHUNK * 2 + 77, |i| if i % 97 == 0 { 3 } else { (i % 2) as u8 }, true, 9);
    }

    #[test]
    fn split_msm_g2() {
        let mut rng = ChaCha20Rng::seed_from_u64(10);
        let s = scalars(64, &mut rng, |i| (i % 4) as u8);
        let classes = ScalarClasses::classify(&s);
        let d = Density::from_fn(64, |i| i % 3 == 0);
        let members: Vec<usize> = (0..64).filter(|&i| d.get(i)).collect();
        let bases: Vec<G2Affine> = members.iter().map(|_| G2Projective::random(&mut rng).to_affine()).collect();
        let dense: Vec<Scalar> = members.iter().map(|&i| s[i]).collect();
        assert_eq!(split_msm(&bases, &s, &classes, Some(&d)).0, naive(&bases, &dense));
    }
}
