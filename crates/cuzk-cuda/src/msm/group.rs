//! The groups the GPU MSM runs in (G1 over Fp, G2 over Fp2): host and device point
//! types, their conversions, and bases resident on the device.

use std::marker::PhantomData;

use blst::{
    blst_fp, blst_fp2, blst_fp2_inverse, blst_fp2_mul, blst_fp_inverse, blst_fp_mul, blst_p1_affine, blst_p1_affine_serialize, blst_p2_affine,
    blst_p2_affine_serialize,
};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use group::prime::PrimeCurveAffine;
use group::Group;

use crate::device::{Gpu, GpuError};
use crate::kernels::{CurveKernels, CurveTypes, Words, G1, G2};

impl<const N: usize> Words<N> {
    /// Six 64-bit limbs (one Fp element, Montgomery form) starting at word 12·i.
    fn fp(&self, i: usize) -> blst_fp {
        let mut l = [0u64; 6];
        for (j, limb) in l.iter_mut().enumerate() {
            *limb = self.0[12 * i + 2 * j] as u64 | (self.0[12 * i + 2 * j + 1] as u64) << 32;
        }
        blst_fp { l }
    }
}

const _: () = assert!(std::mem::size_of::<G1Affine>() == 96 && std::mem::align_of::<G1Affine>() == 8);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192 && std::mem::align_of::<G2Affine>() == 8);

/// A group the GPU MSM runs in: its host and device point types.
pub trait MsmGroup: CurveTypes + Sized {
    type Affine: Copy + cuzk_groth16::format::FilePoint;
    type Projective: Copy + std::fmt::Debug + From<Self::Affine> + std::ops::Add<Output = Self::Projective>;
    const NAME: &'static str;
    /// The most batch-affine rounds [`affine_rounds`] picks for this group.
    const DEFAULT_AFFINE_ROUNDS: u32;
    /// Bucket entries a batch-affine group of windows is sized for ([`GpuMsm`]'s rounds
    /// keep about 100 (G1) or 200 (G2) bytes of scratch per entry of a group; a group
    /// has at least one window, so above this many scalars it holds more).
    const AFFINE_GROUP_ENTRIES: u64;
    /// Window width from 2^24 scalars on ([`window_bits`]).
    const WIDE_WINDOW_BITS: u32;
    fn as_device(points: &[Self::Affine]) -> &[Self::DeviceAffine];
    /// The same view, to receive points computed on the device (which must be points
    /// of the group: the bytes are valid for the type whatever they are, but
    /// everything built on it assumes curve points).
    fn as_device_mut(points: &mut [Self::Affine]) -> &mut [Self::DeviceAffine];
    fn kernels(gpu: &Gpu) -> &CurveKernels<Self>;
    /// The affine point of an XYZZ result, checked to be in the group: a device result
    /// that is not is an error rather than a wrong proof later.
    fn to_affine(p: &Self::DeviceXyzz) -> Result<Self::Affine, GpuError>;
    fn identity() -> Self::Projective;
}

fn not_in_group(name: &str) -> GpuError {
    GpuError::Invalid(format!("the device's {name} MSM result is not a point of {name}"))
}

impl MsmGroup for G1 {
    type Affine = G1Affine;
    type Projective = G1Projective;
    const NAME: &'static str = "G1";
    /// None: on the H200 the rounds cost more than the XYZZ additions they replace
    /// (2^24: one round 173.9–187.8 ms against 170.6 without; bench/README.md).
    const DEFAULT_AFFINE_ROUNDS: u32 = 0;
    const AFFINE_GROUP_ENTRIES: u64 = 1 << 27;
    const WIDE_WINDOW_BITS: u32 = 20;

    fn as_device(points: &[G1Affine]) -> &[Words<24>] {
        // SAFETY: same size and alignment (checked above); G1Affine is
        // #[repr(transparent)] over blst_p1_affine, #[repr(C)] of two [u64; 6], whose
        // bytes on a little-endian host are the 24 u32 limbs in order.
        unsafe { std::slice::from_raw_parts(points.as_ptr() as *const Words<24>, points.len()) }
    }

    fn as_device_mut(points: &mut [G1Affine]) -> &mut [Words<24>] {
        // SAFETY: as in `as_device`; any 96 bytes are a valid blst_p1_affine value.
        unsafe { std::slice::from_raw_parts_mut(points.as_mut_ptr() as *mut Words<24>, points.len()) }
    }

    fn kernels(gpu: &Gpu) -> &CurveKernels<G1> {
        &gpu.g1
    }

    fn to_affine(p: &Words<48>) -> Result<G1Affine, GpuError> {
        let (x, y, zz, zzz) = (p.fp(0), p.fp(1), p.fp(2), p.fp(3));
        if zz.l == [0; 6] {
            return Ok(G1Affine::identity());
        }
        let (mut zz_inv, mut zzz_inv, mut a) = (blst_fp::default(), blst_fp::default(), blst_p1_affine::default());
        let mut bytes = [0u8; 96];
        // SAFETY: blst field operations on initialised values, outputs distinct from
        // inputs; 96 writable bytes for an uncompressed G1 point.
        unsafe {
            blst_fp_inverse(&mut zz_inv, &zz);
            blst_fp_inverse(&mut zzz_inv, &zzz);
            blst_fp_mul(&mut a.x, &x, &zz_inv);
            blst_fp_mul(&mut a.y, &y, &zzz_inv);
            blst_p1_affine_serialize(bytes.as_mut_ptr(), &a);
        }
        Option::from(G1Affine::from_uncompressed(&bytes)).ok_or_else(|| not_in_group(Self::NAME))
    }

    fn identity() -> G1Projective {
        G1Projective::identity()
    }
}

impl MsmGroup for G2 {
    type Affine = G2Affine;
    type Projective = G2Projective;
    const NAME: &'static str = "G2";
    /// Three: 2^24 in 492.5 ms against 602.3 without, and four or five gain < 1 %.
    const DEFAULT_AFFINE_ROUNDS: u32 = 3;
    const AFFINE_GROUP_ENTRIES: u64 = 1 << 26;
    const WIDE_WINDOW_BITS: u32 = 16;

    fn as_device(points: &[G2Affine]) -> &[Words<48>] {
        // SAFETY: same size and alignment (checked above); G2Affine is
        // #[repr(transparent)] over blst_p2_affine, #[repr(C)] of two blst_fp2 (each two
        // [u64; 6]), whose bytes on a little-endian host are the 48 u32 limbs in order.
        unsafe { std::slice::from_raw_parts(points.as_ptr() as *const Words<48>, points.len()) }
    }

    fn as_device_mut(points: &mut [G2Affine]) -> &mut [Words<48>] {
        // SAFETY: as in `as_device`; any 192 bytes are a valid blst_p2_affine value.
        unsafe { std::slice::from_raw_parts_mut(points.as_mut_ptr() as *mut Words<48>, points.len()) }
    }

    fn kernels(gpu: &Gpu) -> &CurveKernels<G2> {
        &gpu.g2
    }

    fn to_affine(p: &Words<96>) -> Result<G2Affine, GpuError> {
        let fp2 = |i: usize| blst_fp2 { fp: [p.fp(2 * i), p.fp(2 * i + 1)] };
        let (x, y, zz, zzz) = (fp2(0), fp2(1), fp2(2), fp2(3));
        if zz.fp[0].l == [0; 6] && zz.fp[1].l == [0; 6] {
            return Ok(G2Affine::identity());
        }
        let (mut zz_inv, mut zzz_inv, mut a) = (blst_fp2::default(), blst_fp2::default(), blst_p2_affine::default());
        let mut bytes = [0u8; 192];
        // SAFETY: blst field operations on initialised values, outputs distinct from
        // inputs; 192 writable bytes for an uncompressed G2 point.
        unsafe {
            blst_fp2_inverse(&mut zz_inv, &zz);
            blst_fp2_inverse(&mut zzz_inv, &zzz);
            blst_fp2_mul(&mut a.x, &x, &zz_inv);
            blst_fp2_mul(&mut a.y, &y, &zzz_inv);
            blst_p2_affine_serialize(bytes.as_mut_ptr(), &a);
        }
        Option::from(G2Affine::from_uncompressed(&bytes)).ok_or_else(|| not_in_group(Self::NAME))
    }

    fn identity() -> G2Projective {
        G2Projective::identity()
    }
}

/// Bases uploaded once, resident on the device.
pub struct DeviceBases<G: MsmGroup> {
    points: CudaSlice<G::DeviceAffine>,
}

impl<G: MsmGroup> DeviceBases<G> {
    /// Bases already on the device (decoded there: crate::params_file).
    pub(crate) fn from_points(points: CudaSlice<G::DeviceAffine>) -> Self {
        DeviceBases { points }
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Device bytes held.
    pub fn bytes(&self) -> usize {
        self.points.len() * std::mem::size_of::<G::DeviceAffine>()
    }

    /// Where kernels read these bases (all of them, from index 0).
    pub(crate) fn at(&self, s: &CudaStream) -> BasesAt<G> {
        BasesAt { origin: device_address(&self.points, s), first: 0, end: self.points.len(), group: PhantomData }
    }

    /// Records the bases as read by everything enqueued on `s` so far: kernels take
    /// their address as a plain number, so without this their free (stream-ordered)
    /// would not wait for those kernels.
    pub(crate) fn read_until_now(&self, s: &CudaStream) {
        device_address(&self.points, s);
    }
}

/// The device address of a buffer's first element, for kernels that take a base
/// address computed on the host. Reads through it are not tracked by cudarc: callers
/// order them with events (resident bases were written before any MSM) and keep the
/// buffer alive until the stream reading it has been synchronized (CudaBackend holds
/// a set's points through each partition's synchronization).
pub(crate) fn device_address<T>(v: &impl DevicePtr<T>, s: &CudaStream) -> u64 {
    let (address, _recorded) = v.device_ptr(s);
    address
}

/// The bases an enqueued MSM reads: base index i (for i in first..end) at device
/// address `origin + i·size_of::<G::DeviceAffine>()`. Resident bases start at index 0;
/// a streamed chunk holds a range of a query's bases, so the indices in a split MSM's
/// lists address it unchanged (crate::streamed).
pub(crate) struct BasesAt<G: MsmGroup> {
    pub(crate) origin: u64,
    pub(crate) first: usize,
    pub(crate) end: usize,
    pub(crate) group: PhantomData<G>,
}

impl<G: MsmGroup> BasesAt<G> {
    /// The `len` bases from index `start` on, read by their position in that range
    /// (unindexed scalars): the caller keeps start + len within these bases.
    pub(crate) fn offset(self, start: usize, len: usize) -> Self {
        let size = std::mem::size_of::<G::DeviceAffine>() as u64;
        BasesAt { origin: self.origin + start as u64 * size, first: 0, end: len, group: PhantomData }
    }
}

impl<G: MsmGroup> Clone for BasesAt<G> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<G: MsmGroup> Copy for BasesAt<G> {}

/// A query's bases are indexed by 32-bit signed values in the kernels: fewer than 2^31.
pub(crate) fn check_base_count(n: usize) -> Result<(), GpuError> {
    if n >= 1 << 31 {
        return Err(GpuError::Invalid(format!("{n} bases: at most 2^31 − 1 are supported")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Scalar;
    use group::Curve;

    /// Words of (x·λ², y·λ³, λ², λ³) for P = (x, y) and λ = 7, from `coords`, which gives
    /// the Fp elements of a coordinate (one for G1, two for G2).
    fn xyzz_words<const N: usize>(coords: [Vec<blst_fp>; 4]) -> Words<N> {
        let mut d = Words::<N>::default();
        for (k, f) in coords.iter().flatten().enumerate() {
            for (j, limb) in f.l.iter().enumerate() {
                d.0[12 * k + 2 * j] = *limb as u32;
                d.0[12 * k + 2 * j + 1] = (*limb >> 32) as u32;
            }
        }
        d
    }

    #[test]
    fn xyzz_to_affine_keeps_the_point() {
        // An XYZZ representation of P = (x, y) is (x·λ², y·λ³, λ², λ³) for any λ ≠ 0;
        // λ = 7 in Fp (and in Fp2, as 7 + 0·u).
        let (mut lambda, mut l2, mut l3) = (blst_fp::default(), blst_fp::default(), blst_fp::default());
        // SAFETY: blst field operations on initialised values.
        unsafe {
            blst::blst_fp_from_uint64(&mut lambda, [7u64, 0, 0, 0, 0, 0].as_ptr());
            blst::blst_fp_sqr(&mut l2, &lambda);
            blst_fp_mul(&mut l3, &l2, &lambda);
        }
        let scale = |a: &blst_fp, b: &blst_fp| {
            let mut o = blst_fp::default();
            // SAFETY: as above.
            unsafe { blst_fp_mul(&mut o, a, b) };
            o
        };
        let zero = blst_fp::default();

        let p1 = (G1Projective::generator() * Scalar::from(12345u64)).to_affine();
        let r: &blst_p1_affine = p1.as_ref();
        let mut d1: Words<48> = xyzz_words([vec![scale(&r.x, &l2)], vec![scale(&r.y, &l3)], vec![l2], vec![l3]]);
        assert_eq!(G1::to_affine(&d1).unwrap(), p1);
        assert!(bool::from(G1::to_affine(&Words::default()).unwrap().is_identity()));
        d1.0[0] ^= 1; // off the curve: refused
        assert!(G1::to_affine(&d1).is_err());

        let p2 = (G2Projective::generator() * Scalar::from(54321u64)).to_affine();
        let r: &blst_p2_affine = p2.as_ref();
        let mut d2: Words<96> = xyzz_words([
            vec![scale(&r.x.fp[0], &l2), scale(&r.x.fp[1], &l2)],
            vec![scale(&r.y.fp[0], &l3), scale(&r.y.fp[1], &l3)],
            vec![l2, zero],
            vec![l3, zero],
        ]);
        assert_eq!(G2::to_affine(&d2).unwrap(), p2);
        assert!(bool::from(G2::to_affine(&Words::default()).unwrap().is_identity()));
        d2.0[0] ^= 1;
        assert!(G2::to_affine(&d2).is_err());
    }
}
