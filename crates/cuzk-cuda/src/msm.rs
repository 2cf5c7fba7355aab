//! Multi-scalar multiplication in G1 on the GPU: Pippenger with signed digits, bucket
//! sorting and segment-balanced accumulation, all on the device (kernels/msm/
//! pippenger.cuh has the phases). Bases are uploaded once into [`DeviceBases`] and
//! stay resident; a call uploads the scalars, enqueues every phase on the compute
//! stream and synchronises the host once, at its end.

use std::sync::Arc;

use blst::{blst_fp, blst_fp_inverse, blst_fp_mul, blst_p1_affine, blst_p1_affine_serialize};
use blstrs::{G1Affine, G1Projective, Scalar};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
use group::prime::PrimeCurveAffine;
use group::Group;

use crate::device::{Gpu, GpuError};
use crate::field::as_device;

/// An affine G1 point in device memory: x then y, twelve 32-bit limbs each, Montgomery
/// form; exactly the bytes of blstrs' `G1Affine` (blst_p1_affine: two [u64; 6]) on a
/// little-endian host. (0, 0) is the point at infinity, as in blst.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct DeviceG1Affine(pub [u32; 24]);

// SAFETY: plain old data of 96 bytes; the kernels' `g1::affine` has the same layout.
unsafe impl DeviceRepr for DeviceG1Affine {}
// SAFETY: all-zero bits are the point at infinity.
unsafe impl ValidAsZeroBits for DeviceG1Affine {}

const _: () = assert!(std::mem::size_of::<G1Affine>() == 96 && std::mem::size_of::<DeviceG1Affine>() == 96);
const _: () = assert!(std::mem::align_of::<G1Affine>() == 8);

/// A G1 point in XYZZ coordinates on the device (x, y, zz, zzz; kernels/ec/g1.cuh).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(8))]
struct DeviceXyzz([u32; 48]);

impl Default for DeviceXyzz {
    fn default() -> Self {
        DeviceXyzz([0; 48])
    }
}

// SAFETY: plain old data of 192 bytes, the layout of `g1::xyzz`.
unsafe impl DeviceRepr for DeviceXyzz {}
// SAFETY: all-zero bits are the point at infinity (zz = 0).
unsafe impl ValidAsZeroBits for DeviceXyzz {}

impl DeviceXyzz {
    fn coordinate(&self, i: usize) -> blst_fp {
        let mut l = [0u64; 6];
        for (j, limb) in l.iter_mut().enumerate() {
            *limb = self.0[12 * i + 2 * j] as u64 | (self.0[12 * i + 2 * j + 1] as u64) << 32;
        }
        blst_fp { l }
    }

    /// The affine point (X/ZZ, Y/ZZZ), checked to be in G1: a device result that is
    /// not is an error rather than a wrong proof later.
    fn to_affine(self) -> Result<G1Affine, GpuError> {
        let (x, y, zz, zzz) = (
            self.coordinate(0),
            self.coordinate(1),
            self.coordinate(2),
            self.coordinate(3),
        );
        if zz.l == [0; 6] {
            return Ok(G1Affine::identity());
        }
        let (mut zz_inv, mut zzz_inv) = (blst_fp::default(), blst_fp::default());
        let p = {
            let mut p = blst_p1_affine::default();
            // SAFETY: blst field operations on initialised values; outputs are distinct
            // from inputs.
            unsafe {
                blst_fp_inverse(&mut zz_inv, &zz);
                blst_fp_inverse(&mut zzz_inv, &zzz);
                blst_fp_mul(&mut p.x, &x, &zz_inv);
                blst_fp_mul(&mut p.y, &y, &zzz_inv);
            }
            p
        };
        let mut bytes = [0u8; 96];
        // SAFETY: 96 writable bytes, the size of an uncompressed G1 point.
        unsafe { blst_p1_affine_serialize(bytes.as_mut_ptr(), &p) };
        Option::from(G1Affine::from_uncompressed(&bytes))
            .ok_or_else(|| GpuError::Invalid("the device's MSM result is not a point of G1".into()))
    }
}

/// Views affine points as device points (no copy).
pub fn as_device_points(p: &[G1Affine]) -> &[DeviceG1Affine] {
    // SAFETY: same size (checked above) and alignment; G1Affine is #[repr(transparent)]
    // over blst_p1_affine, #[repr(C)] of two [u64; 6], whose bytes on a little-endian
    // host are the 24 u32 limbs in order.
    unsafe { std::slice::from_raw_parts(p.as_ptr() as *const DeviceG1Affine, p.len()) }
}

/// Bases uploaded once, resident on the device.
pub struct DeviceBases {
    points: CudaSlice<DeviceG1Affine>,
}

impl DeviceBases {
    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// Device time of one MSM's phases, from CUDA events.
#[derive(Clone, Copy, Debug, Default)]
pub struct MsmTimings {
    /// Scalars host → device.
    pub upload_ms: f32,
    /// Digits counted, prefix sums, entries scattered to their buckets.
    pub sort_ms: f32,
    /// Bucket sums (segments and the fix-up of crossing buckets).
    pub accumulate_ms: f32,
    /// Buckets → window sums → result.
    pub reduce_ms: f32,
    /// The whole call on the device.
    pub total_ms: f32,
}

/// The window width, in bits, for n scalars.
pub fn window_bits(n: usize) -> u32 {
    let log = usize::BITS - 1 - n.max(1).leading_zeros();
    log.saturating_sub(4).clamp(4, 16)
}

/// Signed-digit windows for c-bit digits over scalars below r < 2^255.
fn windows(c: u32) -> u32 {
    255 / c + 1
}

/// Buckets summed per thread in the first reduction step.
const REDUCE_SEGMENT: u32 = 128;
/// Accumulation threads aimed for: enough to fill the GPU, few enough that the
/// partial sums of crossing buckets stay small.
const ACCUMULATE_THREADS: u64 = 1 << 18;
/// Threads per block of the curve kernels (up to 255 registers each).
const CURVE_BLOCK: u32 = 128;

fn blocks(threads: u64, per_block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (threads.div_ceil(per_block as u64).max(1) as u32, 1, 1),
        block_dim: (per_block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// MSM engine of one GPU.
pub struct GpuMsm {
    gpu: Arc<Gpu>,
}

impl GpuMsm {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        GpuMsm { gpu }
    }

    /// Uploads bases once; they stay on the device for every later MSM.
    pub fn upload_bases(&self, bases: &[G1Affine]) -> Result<DeviceBases, GpuError> {
        if bases.len() >= 1 << 31 {
            return Err(GpuError::Invalid(format!(
                "{} bases: at most 2^31 − 1 are supported",
                bases.len()
            )));
        }
        let s = &self.gpu.stream;
        let points = s.clone_htod(as_device_points(bases))?;
        s.synchronize()?;
        Ok(DeviceBases { points })
    }

    /// Σ scalars[i]·bases[i] over the first scalars.len() bases.
    pub fn msm_g1(&self, bases: &DeviceBases, scalars: &[Scalar]) -> Result<(G1Projective, MsmTimings), GpuError> {
        let r = self.msm_g1_inner(bases, scalars);
        if r.is_err() {
            // Nothing may still read the caller's scalars when the borrow ends.
            if let Err(e) = self.gpu.stream.synchronize() {
                tracing::error!(error = %e, "synchronizing after a failed MSM");
            }
        }
        r
    }

    fn msm_g1_inner(&self, bases: &DeviceBases, scalars: &[Scalar]) -> Result<(G1Projective, MsmTimings), GpuError> {
        let n = scalars.len();
        if n > bases.len() {
            return Err(GpuError::Invalid(format!("{n} scalars but only {} bases", bases.len())));
        }
        if n == 0 {
            return Ok((G1Projective::identity(), MsmTimings::default()));
        }
        let (s, k) = (&self.gpu.stream, &self.gpu.k);
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let c = window_bits(n);
        let w = windows(c);
        let buckets_per_window = 1u32 << (c - 1);
        let len = w * buckets_per_window;
        let n32 = n as u32;
        let max_entries = n as u64 * w as u64;
        let seg_len = max_entries.div_ceil(ACCUMULATE_THREADS).max(8) as u32;
        let segments = max_entries.div_ceil(seg_len as u64) as u32;
        let m = REDUCE_SEGMENT.min(buckets_per_window);
        let per_window = buckets_per_window / m;
        let reduce_threads = w * per_window;

        let t0 = s.record_event(timing)?;
        let d_scalars = s.clone_htod(as_device(scalars))?;
        let t1 = s.record_event(timing)?;
        let mut counts = s.alloc_zeros::<u32>(len as usize)?;
        let mut offsets = s.alloc_zeros::<u32>(len as usize + 1)?;
        // SAFETY: every slot below the (device-side) total is written by msm_scatter
        // before msm_accumulate reads it; slots past the total are never read.
        let mut sorted = unsafe { s.alloc::<u32>(max_entries as usize)? };
        let mut bucket_sums = s.alloc_zeros::<DeviceXyzz>(len as usize)?;
        let mut left = s.alloc_zeros::<DeviceXyzz>(segments as usize)?;
        let mut left_scan = s.alloc_zeros::<DeviceXyzz>(segments as usize)?;
        let mut left_bucket = s.alloc_zeros::<u32>(segments as usize)?;
        let mut right = s.alloc_zeros::<DeviceXyzz>(segments as usize)?;
        let mut right_bucket = s.alloc_zeros::<u32>(segments as usize)?;
        let mut seg_total = s.alloc_zeros::<DeviceXyzz>(reduce_threads as usize)?;
        let mut seg_sum = s.alloc_zeros::<DeviceXyzz>(reduce_threads as usize)?;
        let mut window_sum = s.alloc_zeros::<DeviceXyzz>(w as usize)?;
        let mut result = s.alloc_zeros::<DeviceXyzz>(1)?;

        let mut b = s.launch_builder(&k.msm_count);
        b.arg(&d_scalars).arg(&n32).arg(&c).arg(&w).arg(&mut counts);
        // SAFETY: matches `msm_count(const fr*, u32, u32, u32, u32*)`; counts holds
        // windows·2^(c−1) entries and every (window, bucket) index is below that.
        unsafe { b.launch(blocks(n as u64, 256))? };
        let mut b = s.launch_builder(&k.msm_scan);
        b.arg(&counts).arg(&len).arg(&mut offsets);
        // SAFETY: matches `msm_scan(const u32*, u32, u32*)`; one block of 1024 threads;
        // offsets holds len + 1 entries.
        unsafe {
            b.launch(LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (1024, 1, 1),
                shared_mem_bytes: 0,
            })?
        };
        let mut cursor = s.clone_dtod(&offsets)?;
        let mut b = s.launch_builder(&k.msm_scatter);
        b.arg(&d_scalars)
            .arg(&n32)
            .arg(&c)
            .arg(&w)
            .arg(&mut cursor)
            .arg(&mut sorted);
        // SAFETY: matches `msm_scatter(const fr*, u32, u32, u32, u32*, u32*)`; each
        // bucket's cursor runs from its offset to the next one, all below the total ≤
        // n·windows = sorted.len().
        unsafe { b.launch(blocks(n as u64, 256))? };
        let t2 = s.record_event(timing)?;

        let mut b = s.launch_builder(&k.msm_accumulate);
        b.arg(&bases.points)
            .arg(&sorted)
            .arg(&offsets)
            .arg(&len)
            .arg(&seg_len)
            .arg(&segments);
        b.arg(&mut bucket_sums).arg(&mut left).arg(&mut left_bucket).arg(&mut right).arg(&mut right_bucket);
        // SAFETY: matches `msm_accumulate(const affine*, const u32*, const u32*, u32, u32,
        // u32, xyzz*, xyzz*, u32*, xyzz*, u32*)`; point indices are < n ≤ bases.len();
        // the partial arrays hold `segments` entries, bucket_sums len.
        unsafe { b.launch(blocks(segments as u64, CURVE_BLOCK))? };
        // Segmented suffix sums of the left partials, ping-ponging between two buffers.
        let mut d = 1u32;
        let mut in_left = true;
        while d < segments {
            let (src, dst) = if in_left { (&left, &mut left_scan) } else { (&left_scan, &mut left) };
            let mut b = s.launch_builder(&k.msm_partials_scan);
            b.arg(src).arg(dst).arg(&left_bucket).arg(&segments).arg(&d);
            // SAFETY: matches `msm_partials_scan(const xyzz*, xyzz*, const u32*, u32, u32)`;
            // all arrays hold `segments` entries.
            unsafe { b.launch(blocks(segments as u64, CURVE_BLOCK))? };
            in_left = !in_left;
            d *= 2;
        }
        let left_sums = if in_left { &left } else { &left_scan };
        let mut b = s.launch_builder(&k.msm_fixup);
        b.arg(&segments).arg(&mut bucket_sums).arg(&right).arg(&right_bucket).arg(left_sums).arg(&left_bucket);
        // SAFETY: matches `msm_fixup(u32, xyzz*, const xyzz*, const u32*, const xyzz*,
        // const u32*)`; bucket ids written by msm_accumulate are < len.
        unsafe { b.launch(blocks(segments as u64, CURVE_BLOCK))? };
        let t3 = s.record_event(timing)?;

        let mut b = s.launch_builder(&k.msm_bucket_segments);
        b.arg(&bucket_sums)
            .arg(&buckets_per_window)
            .arg(&m)
            .arg(&reduce_threads);
        b.arg(&mut seg_total).arg(&mut seg_sum);
        // SAFETY: matches `msm_bucket_segments(const xyzz*, u32, u32, u32, xyzz*, xyzz*)`;
        // m divides 2^(c−1); outputs hold reduce_threads entries.
        unsafe { b.launch(blocks(reduce_threads as u64, CURVE_BLOCK))? };
        let log_m = m.trailing_zeros();
        let mut b = s.launch_builder(&k.msm_window_sums);
        b.arg(&seg_total)
            .arg(&seg_sum)
            .arg(&per_window)
            .arg(&log_m)
            .arg(&w)
            .arg(&mut window_sum);
        // SAFETY: matches `msm_window_sums(const xyzz*, const xyzz*, u32, u32, u32, xyzz*)`.
        unsafe { b.launch(blocks(w as u64, 32))? };
        let mut b = s.launch_builder(&k.msm_combine_windows);
        b.arg(&window_sum).arg(&w).arg(&c).arg(&mut result);
        // SAFETY: matches `msm_combine_windows(const xyzz*, u32, u32, xyzz*)`; one thread.
        unsafe { b.launch(blocks(1, 32))? };
        let t4 = s.record_event(timing)?;
        let out = s.clone_dtoh(&result)?;
        s.synchronize()?;
        let timings = MsmTimings {
            upload_ms: t0.elapsed_ms(&t1)?,
            sort_ms: t1.elapsed_ms(&t2)?,
            accumulate_ms: t2.elapsed_ms(&t3)?,
            reduce_ms: t3.elapsed_ms(&t4)?,
            total_ms: t0.elapsed_ms(&t4)?,
        };
        Ok((G1Projective::from(out[0].to_affine()?), timings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;

    #[test]
    fn xyzz_to_affine_keeps_the_point() {
        // An XYZZ representation of P = (x, y): (x·λ², y·λ³, λ², λ³) for any λ ≠ 0.
        let p = (G1Projective::generator() * Scalar::from(12345u64)).to_affine();
        let raw: &blst_p1_affine = p.as_ref();
        let (mut lambda, mut l2, mut l3) = (blst_fp::default(), blst_fp::default(), blst_fp::default());
        let (mut x, mut y) = (blst_fp::default(), blst_fp::default());
        // SAFETY: blst field operations on initialised values.
        unsafe {
            blst::blst_fp_from_uint64(&mut lambda, [7u64, 0, 0, 0, 0, 0].as_ptr());
            blst::blst_fp_sqr(&mut l2, &lambda);
            blst_fp_mul(&mut l3, &l2, &lambda);
            blst_fp_mul(&mut x, &raw.x, &l2);
            blst_fp_mul(&mut y, &raw.y, &l3);
        }
        let mut d = DeviceXyzz::default();
        for (i, f) in [x, y, l2, l3].iter().enumerate() {
            for (j, limb) in f.l.iter().enumerate() {
                d.0[12 * i + 2 * j] = *limb as u32;
                d.0[12 * i + 2 * j + 1] = (*limb >> 32) as u32;
            }
        }
        assert_eq!(d.to_affine().unwrap(), p);
        assert!(bool::from(DeviceXyzz::default().to_affine().unwrap().is_identity()));
        // A point off the curve is refused.
        d.0[0] ^= 1;
        assert!(d.to_affine().is_err());
    }

    #[test]
    fn window_choice() {
        assert_eq!(window_bits(1), 4);
        assert_eq!(window_bits(1 << 16), 12);
        assert_eq!(window_bits(1 << 27), 16);
        for c in 4..=16 {
            // The top window never carries out: its field has at most c − 1 bits.
            assert!(255 - (windows(c) - 1) * c <= c - 1);
        }
    }
}
