//! Fixed-base scalar multiplication on the GPU: the query points of a setup,
//! k_i·G for hundreds of millions of scalars (kernels/ec/fixed_base.cuh).
//!
//! The window tables are built once on the host (16-bit windows: one mixed addition per
//! digit, 16 per point, no doublings) and stay on the device. Scalars go up and affine
//! points come back in chunks, so device memory stays bounded whatever the query size.
//! A sample of every result is recomputed on the CPU by plain scalar multiplication
//! (independent of the tables): a kernel or a table that went wrong is an error, not a
//! parameter file that makes no valid proof.

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::CudaSlice;
use cuzk_groth16::generator::{BatchAffine, FixedBase, FixedBaseMul, SetupError};
use cuzk_groth16::Progress;
use ff::PrimeField;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};

use crate::device::{Gpu, GpuError};
use crate::field::{as_device, DeviceFr};
use crate::msm::{blocks, MsmGroup, CURVE_BLOCK, G1, G2};
use crate::turn::DeviceLock;

/// Window width of the device tables: 2^16 points per window.
const WINDOW_BITS: u32 = 16;
/// Scalars per chunk: 2^22 G2 points in XYZZ form take 1.6 GB of device memory.
const CHUNK: usize = 1 << 22;
/// Points per batch inversion (FIXED_BASE_BATCH in the kernel).
const BATCH: usize = 16;
/// One result in this many is recomputed on the CPU (and always the first and last).
const CHECK_EVERY: usize = 1 << 16;

/// A generator's window tables on the device: window w's digit d at w·2^c + d.
struct Table<G: MsmGroup> {
    device: CudaSlice<G::DeviceAffine>,
}

/// [`FixedBaseMul`] on one GPU.
pub struct GpuFixedBase {
    gpu: Arc<Gpu>,
    g1: Table<G1>,
    g2: Table<G2>,
    /// A proving backend's device lock, held around each chunk: the chunks then never
    /// run inside a proof's compute region (whose kernels are timed with events).
    device: Option<DeviceLock>,
}

impl GpuFixedBase {
    /// Builds the generators' tables on the host (~1M additions per group, in
    /// parallel) and uploads them (300 MB).
    pub fn new(gpu: Arc<Gpu>) -> Result<Self, GpuError> {
        let (g1, g2) = rayon::join(
            || FixedBase::<G1Affine>::new(G1Projective::generator(), WINDOW_BITS as usize),
            || FixedBase::<G2Affine>::new(G2Projective::generator(), WINDOW_BITS as usize),
        );
        let g1 = upload::<G1>(&gpu, g1)?;
        let g2 = upload::<G2>(&gpu, g2)?;
        Ok(GpuFixedBase { gpu, g1, g2, device: None })
    }

    /// On a GPU a proving backend also uses, taking turns with its proofs (per chunk of
    /// scalars) under its `device` lock ([`crate::CudaBackend::device_lock`]).
    pub fn with_device_lock(gpu: Arc<Gpu>, device: DeviceLock) -> Result<Self, GpuError> {
        let mut f = Self::new(gpu)?;
        f.device = Some(device);
        Ok(f)
    }

    /// k·G for every k, in order.
    fn mul_many<G: MsmGroup>(&self, table: &Table<G>, ks: &[Scalar], progress: &dyn Progress) -> Result<Vec<G::Affine>, GpuError>
    where
        G::Affine: PrimeCurveAffine<Scalar = Scalar> + Send + Sync + PartialEq,
        <G::Affine as PrimeCurveAffine>::Curve: Curve<AffineRepr = G::Affine> + BatchAffine + Send + Sync,
    {
        let mut out = vec![G::Affine::identity(); ks.len()];
        if ks.is_empty() {
            return Ok(out);
        }
        let (s, ck) = (&self.gpu.stream, G::kernels(&self.gpu));
        let windows = Scalar::NUM_BITS.div_ceil(WINDOW_BITS);
        // The kernel reads table[w·2^c + d] for w < windows, d < 2^c, and limb
        // w·c / 32 < 8 of the scalar (windows·c = 256 bits).
        if table.device.len() != (windows as usize) << WINDOW_BITS || windows * WINDOW_BITS > 256 {
            return Err(GpuError::Invalid(format!(
                "fixed-base table of {} points, {windows} windows of {WINDOW_BITS} bits need {}",
                table.device.len(),
                (windows as usize) << WINDOW_BITS
            )));
        }
        let chunk = CHUNK.min(ks.len());
        let mut xyzz = s.alloc_zeros::<G::DeviceXyzz>(chunk)?;
        let mut affine = s.alloc_zeros::<G::DeviceAffine>(chunk)?;
        let mut scalars = s.alloc_zeros::<DeviceFr>(chunk)?;
        for (k, o) in ks.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
            let _held = match &self.device {
                Some(m) => Some(m.lock()?),
                None => None,
            };
            let n = k.len() as u32;
            s.memcpy_htod(as_device(k), &mut scalars.slice_mut(..k.len()))?;
            // SAFETY: the table holds windows·2^c points and every digit is below 2^c;
            // scalars and xyzz hold at least n entries.
            unsafe { ck.fixed_base_mul(s, blocks(n as u64, CURVE_BLOCK), &table.device, WINDOW_BITS, windows, &scalars, n, &mut xyzz)? };
            // SAFETY: reads and writes n entries, which both buffers hold.
            unsafe { ck.fixed_base_to_affine(s, blocks(k.len().div_ceil(BATCH) as u64, CURVE_BLOCK), &xyzz, n, &mut affine)? };
            // Into pageable memory: the copy has finished when the call returns, so an
            // early return cannot leave the device writing into `out`.
            s.memcpy_dtoh(&affine.slice(..k.len()), G::as_device_mut(o))?;
            progress.advance(k.len() as u64);
        }
        s.synchronize()?;
        check_sample::<G>(ks, &out)?;
        Ok(out)
    }
}

/// The flattened tables on the device: window w's digit d at w·2^c + d.
fn upload<G: MsmGroup>(gpu: &Gpu, host: FixedBase<G::Affine>) -> Result<Table<G>, GpuError>
where
    G::Affine: PrimeCurveAffine + Send + Sync,
    <G::Affine as PrimeCurveAffine>::Curve: Curve<AffineRepr = G::Affine> + BatchAffine + Send + Sync,
{
    let flat: Vec<G::Affine> = host.windows().iter().flatten().copied().collect();
    let device = gpu.stream.clone_htod(G::as_device(&flat))?;
    gpu.stream.synchronize()?;
    Ok(Table { device })
}

/// Recomputes every CHECK_EVERY-th point (and the last) on the CPU as k·G.
fn check_sample<G: MsmGroup>(ks: &[Scalar], out: &[G::Affine]) -> Result<(), GpuError>
where
    G::Affine: PrimeCurveAffine<Scalar = Scalar> + Send + Sync + PartialEq,
    <G::Affine as PrimeCurveAffine>::Curve: Curve<AffineRepr = G::Affine> + Send + Sync,
{
    use rayon::prelude::*;
    let last = ks.len() - 1;
    let bad = (0..ks.len())
        .into_par_iter()
        .step_by(CHECK_EVERY)
        .chain(rayon::iter::once(last))
        .find_any(|&i| (G::Affine::generator() * ks[i]).to_affine() != out[i]);
    match bad {
        Some(i) => Err(GpuError::Invalid(format!("the device's fixed-base {} multiplication {i} of {} differs from the CPU's", G::NAME, ks.len()))),
        None => Ok(()),
    }
}

impl FixedBaseMul for GpuFixedBase {
    fn name(&self) -> String {
        format!("GPU {} ({})", self.gpu.ordinal, self.gpu.name)
    }

    fn g1(&self, ks: &[Scalar], progress: &dyn Progress) -> Result<Vec<G1Affine>, SetupError> {
        self.mul_many::<G1>(&self.g1, ks, progress).map_err(|e| self.failed(e))
    }

    fn g2(&self, ks: &[Scalar], progress: &dyn Progress) -> Result<Vec<G2Affine>, SetupError> {
        self.mul_many::<G2>(&self.g2, ks, progress).map_err(|e| self.failed(e))
    }
}

impl GpuFixedBase {
    fn failed(&self, e: GpuError) -> SetupError {
        SetupError::FixedBase { on: self.name(), reason: e.to_string() }
    }
}
