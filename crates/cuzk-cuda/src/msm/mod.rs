//! Multi-scalar multiplication in G1 and G2 on the GPU: Pippenger with signed digits,
//! bucket sorting and segment-balanced accumulation, all on the device (kernels/msm/
//! pippenger.cuh has the phases). Bases are uploaded once into [`DeviceBases`] and
//! stay resident; a call uploads the scalars, enqueues every phase on the compute
//! stream and synchronises the host once, at its end. The prover
//! (crate::groth16::msms) enqueues the parts itself: Pippenger runs over pieces of
//! split lists built on the device from a compact scalar vector ([`compact`],
//! [`split`]), in scratch it lends, over resident or streamed bases ([`streamed`]),
//! and [`PendingMsm::finish`] after one synchronization for every MSM of a partition.

pub mod compact;
mod group;
mod pippenger;
mod plan;
pub mod split;
pub mod streamed;

use blstrs::Scalar;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaView;
use rayon::prelude::*;

pub(crate) use self::group::{check_base_count, device_address, BasesAt};
pub use self::group::{DeviceBases, MsmGroup};
pub use crate::kernels::{Words, G1, G2};
pub(crate) use pippenger::{blocks, PhaseEvents, CURVE_BLOCK};
pub use pippenger::{GpuMsm, MsmTimings, PendingMsm, Scratch};
pub use plan::{affine_rounds, max_scalars_within, scratch_bound, window_bits, MAX_AFFINE_ROUNDS, MAX_WINDOW_BITS};
pub use split::{DeviceSplit, SplitView};

use crate::device::GpuError;
use crate::field::{as_device, DeviceFr};

/// Where an MSM's scalars are: host memory (uploaded by the call) or already on the
/// device (e.g. the H polynomial's coefficients, left where the NTTs wrote them).
#[derive(Clone, Copy)]
pub enum Scalars<'a> {
    Host(&'a [Scalar]),
    Device(&'a CudaView<'a, DeviceFr>),
}

impl GpuMsm {
    /// Uploads bases once; they stay on the device for every later MSM.
    pub fn upload_bases<G: MsmGroup>(&self, bases: &[G::Affine]) -> Result<DeviceBases<G>, GpuError> {
        check_base_count(bases.len())?;
        let s = &self.gpu.stream;
        let points = s.clone_htod(G::as_device(bases))?;
        s.synchronize()?;
        Ok(DeviceBases::from_points(points))
    }

    /// Uploads bases kept in pinned host memory (a streamed set's query that the plan
    /// also keeps on the device); they stay there for every later MSM.
    pub fn upload_host_bases<G: MsmGroup>(&self, bases: &streamed::HostBases<G>) -> Result<DeviceBases<G>, GpuError> {
        let s = &self.gpu.stream;
        let points = s.clone_htod(bases.slice()?)?;
        s.synchronize()?;
        Ok(DeviceBases::from_points(points))
    }

    /// The split MSM: Σ_i sig_scalars[i]·bases[sig_index[i]] + Σ_j bases[ones[j]]. The
    /// caller has already dropped the zero scalars and listed the bases whose scalar is
    /// 1 (the prover knows both from synthesis); only the significant scalars go
    /// through Pippenger.
    pub fn msm_split<G: MsmGroup>(
        &self,
        bases: &DeviceBases<G>,
        ones: &[u32],
        sig_index: &[u32],
        sig_scalars: &[Scalar],
    ) -> Result<(G::Projective, MsmTimings), GpuError> {
        let r = (|| {
            let split = self.upload_split(bases, ones, sig_index, sig_scalars)?;
            let pending = self.enqueue_split(bases, &split)?;
            self.gpu.stream.synchronize()?;
            pending.finish()
        })();
        self.settle(r)
    }

    /// On an error, waits for both streams so nothing still reads the caller's memory
    /// when the borrow ends.
    fn settle<T>(&self, r: Result<T, GpuError>) -> Result<T, GpuError> {
        if r.is_err() {
            for s in [&self.gpu.copy, &self.gpu.stream] {
                if let Err(e) = s.synchronize() {
                    tracing::error!(error = %e, "synchronizing after a failed MSM");
                }
            }
        }
        r
    }

    /// Σ scalars[i]·bases[i] over the first scalars.len() bases.
    pub fn msm<G: MsmGroup>(&self, bases: &DeviceBases<G>, scalars: &[Scalar]) -> Result<(G::Projective, MsmTimings), GpuError> {
        self.msm_from(bases, Scalars::Host(scalars))
    }

    /// [`GpuMsm::msm`] with the scalars in host or device memory. Device scalars must
    /// have been written on this GPU's compute stream (or before it, in stream order).
    pub fn msm_from<G: MsmGroup>(&self, bases: &DeviceBases<G>, scalars: Scalars<'_>) -> Result<(G::Projective, MsmTimings), GpuError> {
        let r = (|| {
            let (uploaded, t0);
            let d = match scalars {
                Scalars::Host([]) => return Ok((G::identity(), MsmTimings::default())),
                Scalars::Host(h) => {
                    t0 = Some(self.gpu.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?);
                    uploaded = self.gpu.stream.clone_htod(as_device(h))?;
                    uploaded.as_view()
                }
                Scalars::Device(v) => {
                    t0 = None;
                    v.slice(..)
                }
            };
            let mut pending = self.enqueue_device(bases, &d)?;
            pending.t0 = t0;
            self.gpu.stream.synchronize()?;
            pending.finish()
        })();
        self.settle(r)
    }

    /// Uploads a split MSM's lists on the copy stream (after checking them against
    /// the bases). The compute stream waits for them when it first reads them.
    pub fn upload_split<G: MsmGroup>(
        &self,
        bases: &DeviceBases<G>,
        ones: &[u32],
        sig_index: &[u32],
        sig_scalars: &[Scalar],
    ) -> Result<DeviceSplit, GpuError> {
        let n = sig_scalars.len();
        if sig_index.len() != n {
            return Err(GpuError::Invalid(format!("{n} scalars but {} base indices", sig_index.len())));
        }
        if n >= 1 << 31 || ones.len() >= 1 << 31 {
            return Err(GpuError::Invalid("at most 2^31 − 1 scalars or ones per MSM".into()));
        }
        let in_range = |v: &[u32]| v.par_iter().all(|&i| (i as usize) < bases.len());
        if !in_range(sig_index) || !in_range(ones) {
            return Err(GpuError::Invalid(format!("a base index is not below the {} bases", bases.len())));
        }
        let cp = &self.gpu.copy;
        let up = |v: &[u32]| if v.is_empty() { Ok(None) } else { cp.clone_htod(v).map(Some) };
        let sig_scalars = if n == 0 { None } else { Some(cp.clone_htod(as_device(sig_scalars))?) };
        let bytes = (ones.len() + sig_index.len()) as u64 * 4 + n as u64 * std::mem::size_of::<Scalar>() as u64;
        Ok(DeviceSplit { sig_scalars, sig_index: up(sig_index)?, ones: up(ones)?, bytes })
    }

    /// Enqueues a split MSM on the compute stream; no host wait.
    pub fn enqueue_split<G: MsmGroup>(&self, bases: &DeviceBases<G>, split: &DeviceSplit) -> Result<PendingMsm<G>, GpuError> {
        let s = &self.gpu.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = s.record_event(timing)?;
        let mut phases = PhaseEvents::new(true);
        let mut results = Vec::with_capacity(2);
        self.enqueue_split_view(bases.at(s), &split.view(), &mut results, &mut phases, &mut Scratch::Own)?;
        bases.read_until_now(s);
        let end = s.record_event(timing)?;
        Ok(PendingMsm { results, t0: None, start, phases, end, bases_up: 0 })
    }

    /// Enqueues Σ scalars[i]·bases[i] over scalars already on the device (written on
    /// the compute stream or ordered before it); no host wait.
    pub fn enqueue_device<G: MsmGroup>(&self, bases: &DeviceBases<G>, scalars: &CudaView<'_, DeviceFr>) -> Result<PendingMsm<G>, GpuError> {
        let n = scalars.len();
        if n > bases.len() {
            return Err(GpuError::Invalid(format!("{n} scalars but only {} bases", bases.len())));
        }
        if n >= 1 << 31 {
            return Err(GpuError::Invalid("at most 2^31 − 1 scalars per MSM".into()));
        }
        let s = &self.gpu.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = s.record_event(timing)?;
        let mut phases = PhaseEvents::new(true);
        let mut results = Vec::with_capacity(1);
        if n > 0 {
            results.push(self.enqueue_pippenger(bases.at(s), scalars, n, None, &mut phases, &mut Scratch::Own)?);
        }
        bases.read_until_now(s);
        let end = s.record_event(timing)?;
        Ok(PendingMsm { results, t0: None, start, phases, end, bases_up: 0 })
    }
}
