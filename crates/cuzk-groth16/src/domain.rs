//! The radix-2 evaluation domain of the scalar field and its NTTs.
//!
//! A domain of size n = 2^k has generator ω (a primitive n-th root of unity). The
//! coset used for the H polynomial is g·D with g = 7, the field's multiplicative
//! generator, so the vanishing polynomial Z(x) = x^n − 1 is the constant g^n − 1 there.
//!
//! The NTT is an in-place iterative Cooley–Tukey: a bit-reversal permutation, then the
//! first stages inside cache-sized blocks in one pass, then each larger stage across
//! the whole vector, all parallel with rayon.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

/// Stages whose butterflies span at most this many elements run block by block.
const BLOCK_LOG: u32 = 12;
/// Elements per rayon task in elementwise passes.
const CHUNK: usize = 1 << 14;

#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    #[error("evaluation domain of 2^{0} elements exceeds the field's 2-adicity of 2^{1}")]
    TooLarge(u32, u32),
}

/// An evaluation domain of size 2^k with its twiddle factors.
#[derive(Clone, Debug)]
pub struct Domain {
    log_n: u32,
    omega: Scalar,
    n_inv: Scalar,
    /// ω^j for j < n/2.
    twiddles: Vec<Scalar>,
    /// ω^{-j} for j < n/2.
    inv_twiddles: Vec<Scalar>,
}

/// The coset shift g used for the H polynomial.
pub fn coset_shift() -> Scalar {
    Scalar::MULTIPLICATIVE_GENERATOR
}

impl Domain {
    /// The smallest domain with at least `min_size` elements.
    pub fn for_size(min_size: usize) -> Result<Self, DomainError> {
        let log_n = min_size.max(1).next_power_of_two().trailing_zeros();
        Self::new(log_n)
    }

    pub fn new(log_n: u32) -> Result<Self, DomainError> {
        if log_n > Scalar::S {
            return Err(DomainError::TooLarge(log_n, Scalar::S));
        }
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        // ω is a root of unity and n < r: both are non-zero, so the inverses exist.
        let omega_inv = omega.invert().unwrap();
        let n = 1u64 << log_n;
        let n_inv = Scalar::from(n).invert().unwrap();
        let half = (n / 2) as usize;
        Ok(Domain { log_n, omega, n_inv, twiddles: powers(omega, Scalar::ONE, half), inv_twiddles: powers(omega_inv, Scalar::ONE, half) })
    }

    pub fn size(&self) -> usize {
        1 << self.log_n
    }

    pub fn log_size(&self) -> u32 {
        self.log_n
    }

    pub fn generator(&self) -> Scalar {
        self.omega
    }

    /// Z(x) = x^n − 1 evaluated at `x`.
    pub fn vanishing_at(&self, x: Scalar) -> Scalar {
        x.pow_vartime([self.size() as u64]) - Scalar::ONE
    }

    /// Evaluations at ω^i from coefficients (natural order both).
    pub fn fft(&self, v: &mut [Scalar]) {
        assert_eq!(v.len(), self.size(), "NTT input length must equal the domain size");
        ntt_in_place(v, &self.twiddles, self.log_n);
    }

    /// Coefficients from evaluations at ω^i.
    pub fn ifft(&self, v: &mut [Scalar]) {
        assert_eq!(v.len(), self.size(), "NTT input length must equal the domain size");
        ntt_in_place(v, &self.inv_twiddles, self.log_n);
        scale(v, self.n_inv);
    }

    /// Evaluations on the coset g·D from coefficients.
    pub fn coset_fft(&self, v: &mut [Scalar]) {
        distribute_powers(v, coset_shift(), Scalar::ONE);
        self.fft(v);
    }

    /// Coefficients from evaluations on the coset g·D.
    pub fn icoset_fft(&self, v: &mut [Scalar]) {
        assert_eq!(v.len(), self.size(), "NTT input length must equal the domain size");
        ntt_in_place(v, &self.inv_twiddles, self.log_n);
        // 1/n and g^{-i} in one pass.
        // g = 7 is non-zero.
        distribute_powers(v, coset_shift().invert().unwrap(), self.n_inv);
    }

    /// The H polynomial's coefficients from a, b, c evaluated on D (each zero-padded to
    /// n): h = (a·b − c) / Z. The result is written into `a`; `b` and `c` are used as
    /// scratch.
    ///
    /// Six NTTs rather than the textbook seven: with A, B, C the interpolants of a, b,
    /// c on D and Q the interpolant on the coset gD of A·B's values there, h = (Q − C)/Z(g),
    /// because Z is the constant Z(g) on gD and interpolating C's values on gD returns C
    /// (degree < n). So c needs only its coefficients, not its coset evaluations.
    pub fn h_polynomial(&self, a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]) {
        for v in [&mut *a, &mut *b] {
            self.ifft(v);
            self.coset_fft(v);
        }
        self.ifft(c);
        a.par_chunks_mut(CHUNK).zip(b.par_chunks(CHUNK)).for_each(|(a, b)| {
            a.iter_mut().zip(b).for_each(|(a, b)| *a *= b);
        });
        self.icoset_fft(a);
        // g is not an n-th root of unity (it generates the whole multiplicative group),
        // so Z(g) = g^n − 1 ≠ 0.
        let z_inv = self.vanishing_at(coset_shift()).invert().unwrap();
        a.par_chunks_mut(CHUNK).zip(c.par_chunks(CHUNK)).for_each(|(a, c)| {
            a.iter_mut().zip(c).for_each(|(a, c)| *a = (*a - c) * z_inv);
        });
    }
}

/// [start, start·x, start·x², …] of length `len`, in parallel.
pub fn powers(x: Scalar, start: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ONE; len];
    distribute_powers(&mut out, x, start);
    out
}

/// v[i] *= start · x^i, in parallel.
fn distribute_powers(v: &mut [Scalar], x: Scalar, start: Scalar) {
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, chunk)| {
        let mut p = start * x.pow_vartime([(ci * CHUNK) as u64]);
        for e in chunk.iter_mut() {
            *e *= p;
            p *= x;
        }
    });
}

fn scale(v: &mut [Scalar], k: Scalar) {
    v.par_chunks_mut(CHUNK).for_each(|c| c.iter_mut().for_each(|x| *x *= k));
}

#[inline]
fn bitrev(i: usize, log_n: u32) -> usize {
    if log_n == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - log_n)
    }
}

fn bit_reverse_permute(v: &mut [Scalar], log_n: u32) {
    let n = v.len();
    if n <= CHUNK {
        for i in 0..n {
            let j = bitrev(i, log_n);
            if i < j {
                v.swap(i, j);
            }
        }
        return;
    }
    struct Ptr(*mut Scalar);
    // SAFETY: the pointer is only used for swaps of disjoint pairs (see below).
    unsafe impl Sync for Ptr {}
    let p = Ptr(v.as_mut_ptr());
    let p = &p;
    (0..n / CHUNK).into_par_iter().for_each(|ci| {
        for i in ci * CHUNK..(ci + 1) * CHUNK {
            let j = bitrev(i, log_n);
            if i < j {
                // SAFETY: bit reversal is an involution, so the pair {i, j} with i < j is
                // swapped by exactly one iteration of the whole loop; no two tasks touch
                // the same element, and both indices are < n.
                unsafe { std::ptr::swap(p.0.add(i), p.0.add(j)) };
            }
        }
    });
}

/// In-place DIT NTT, natural order in and out. `tw[j] = w^j` for j < n/2, w of order n.
fn ntt_in_place(v: &mut [Scalar], tw: &[Scalar], log_n: u32) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    bit_reverse_permute(v, log_n);

    // Stages with half-span < 2^(BLOCK_LOG) stay inside blocks of 2^BLOCK_LOG elements.
    let block = n.min(1 << BLOCK_LOG);
    let first_big = block.trailing_zeros();
    v.par_chunks_mut(block).for_each(|blk| {
        for s in 0..first_big {
            let half = 1usize << s;
            let stride = n / (2 * half);
            for pair in blk.chunks_mut(2 * half) {
                let (lo, hi) = pair.split_at_mut(half);
                butterflies(lo, hi, tw, 0, stride);
            }
        }
    });
    for s in first_big..log_n {
        let half = 1usize << s;
        let stride = n / (2 * half);
        v.par_chunks_mut(2 * half).for_each(|pair| {
            let (lo, hi) = pair.split_at_mut(half);
            lo.par_chunks_mut(CHUNK).zip(hi.par_chunks_mut(CHUNK)).enumerate().for_each(|(ci, (lo, hi))| butterflies(lo, hi, tw, ci * CHUNK, stride));
        });
    }
}

/// (lo[j], hi[j]) ← (lo[j] + t, lo[j] − t) with t = w^{(j0+j)·stride} · hi[j].
#[inline]
fn butterflies(lo: &mut [Scalar], hi: &mut [Scalar], tw: &[Scalar], j0: usize, stride: usize) {
    for (j, (l, h)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let k = (j0 + j) * stride;
        let t = if k == 0 { *h } else { *h * tw[k] };
        *h = *l - t;
        *l += t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn random_vec(n: usize, seed: u64) -> Vec<Scalar> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        (0..n).map(|_| Scalar::random(&mut rng)).collect()
    }

    /// Naive O(n²) evaluation at ω^i.
    fn naive_dft(coeffs: &[Scalar], omega: Scalar) -> Vec<Scalar> {
        (0..coeffs.len())
            .map(|i| {
                let x = omega.pow_vartime([i as u64]);
                coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c)
            })
            .collect()
    }

    #[test]
    fn fft_matches_naive_dft() {
        for log_n in [0u32, 1, 2, 3, 5, 8] {
            let d = Domain::new(log_n).unwrap();
            let v = random_vec(d.size(), log_n as u64);
            let mut w = v.clone();
            d.fft(&mut w);
            assert_eq!(w, naive_dft(&v, d.generator()), "size 2^{log_n}");
        }
    }

    #[test]
    fn inverse_undoes_forward_across_block_boundary() {
        // 2^15 exercises both the blocked and the cross-block stages and the parallel
        // bit reversal.
        for log_n in [10u32, 13, 15] {
            let d = Domain::new(log_n).unwrap();
            let v = random_vec(d.size(), 7);
            let mut w = v.clone();
            d.fft(&mut w);
            assert_ne!(w, v);
            d.ifft(&mut w);
            assert_eq!(w, v);
            d.coset_fft(&mut w);
            d.icoset_fft(&mut w);
            assert_eq!(w, v);
        }
    }

    #[test]
    fn coset_fft_evaluates_on_coset() {
        let d = Domain::new(4).unwrap();
        let v = random_vec(16, 3);
        let mut w = v.clone();
        d.coset_fft(&mut w);
        for (i, e) in w.iter().enumerate() {
            let x = coset_shift() * d.generator().pow_vartime([i as u64]);
            let direct = v.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
            assert_eq!(*e, direct);
        }
    }

    #[test]
    fn h_polynomial_divides_exactly() {
        // Choose a, b on D, set c = a·b on D: then a·b − c vanishes on D and h·Z = A·B − C
        // as polynomials. Check at a random point.
        let d = Domain::new(6).unwrap();
        let a = random_vec(64, 1);
        let b = random_vec(64, 2);
        let c: Vec<_> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
        let (mut ha, mut hb, mut hc) = (a.clone(), b.clone(), c.clone());
        d.h_polynomial(&mut ha, &mut hb, &mut hc);
        assert!(ha[63].is_zero_vartime(), "h has degree ≤ n − 2");
        let x = Scalar::from(123456789u64);
        let eval = |coeffs: &[Scalar]| coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
        let (mut pa, mut pb, mut pc) = (a, b, c);
        d.ifft(&mut pa);
        d.ifft(&mut pb);
        d.ifft(&mut pc);
        assert_eq!(eval(&ha) * d.vanishing_at(x), eval(&pa) * eval(&pb) - eval(&pc));
    }

    /// The textbook H polynomial: all three vectors to the coset, (a·b − c)/Z(g) there,
    /// back to coefficients (seven NTTs).
    fn h_polynomial_seven_ntts(d: &Domain, a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]) {
        for v in [&mut *a, &mut *b, &mut *c] {
            d.ifft(v);
            d.coset_fft(v);
        }
        let z_inv = d.vanishing_at(coset_shift()).invert().unwrap();
        for ((a, b), c) in a.iter_mut().zip(&*b).zip(&*c) {
            *a = (*a * b - c) * z_inv;
        }
        d.icoset_fft(a);
    }

    #[test]
    fn h_polynomial_equals_the_seven_ntt_computation() {
        for log_n in [0u32, 1, 2, 5, 10, 12] {
            let n = 1usize << log_n;
            let d = Domain::new(log_n).unwrap();
            // Arbitrary a, b, c (not a satisfied system): the identity holds for any input.
            let (a, b, c) = (random_vec(n, 10 + log_n as u64), random_vec(n, 20), random_vec(n, 30));
            let (mut a6, mut b6, mut c6) = (a.clone(), b.clone(), c.clone());
            d.h_polynomial(&mut a6, &mut b6, &mut c6);
            let (mut a7, mut b7, mut c7) = (a, b, c);
            h_polynomial_seven_ntts(&d, &mut a7, &mut b7, &mut c7);
            assert!(a6 == a7, "2^{log_n}: six-NTT H polynomial differs from the textbook one");
        }
    }

    #[test]
    fn too_large_domain_is_an_error() {
        assert!(matches!(Domain::new(33), Err(DomainError::TooLarge(33, 32))));
    }
}
