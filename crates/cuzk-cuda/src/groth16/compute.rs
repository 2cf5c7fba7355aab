//! One partition's proof on one GPU, top to bottom: prepare (with the device free for
//! others), take the device, enqueue the H polynomial on the staged vectors and the
//! five MSMs with no wait between them (crate::groth16::msms, in the slot's memory as
//! the device plan sizes it), synchronize once, read the five sums, give the device
//! back, assemble on the host.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use blstrs::{G1Projective, G2Projective};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;
use cuzk_groth16::backend::{DeviceReport, ProofRandomness, ProveError, Stage, StageTimings};
use cuzk_groth16::prover::assemble;
use cuzk_groth16::synthesis::SynthesizedCircuit;
use cuzk_groth16::{CompactWitness, ParameterSet, Proof, Urgency};

use super::msms;
use super::plan::DevicePlan;
use super::points::LoadedPoints;
use super::prepare::{prepare, Prepared};
use super::row_blocks::ProductSource;
use super::staging::StagingSlots;
use crate::device::{backend_error, Gpu, GpuError};
use crate::fault::{FaultPoint, Faults};
use crate::msm::streamed::BaseChunks;
use crate::msm::GpuMsm;
use crate::ntt::GpuNtt;
use crate::turn::{DeviceLock, Turn};
use cuzk_groth16::sync::lock;

/// What proves partitions on one GPU: its NTT and MSM engines, the staging slots, the
/// streamed points' chunk buffers, and the lock held around a proof's compute region.
pub struct PartitionProver {
    pub gpu: Arc<Gpu>,
    pub ntt: GpuNtt,
    pub msm: GpuMsm,
    pub staging: StagingSlots,
    /// The streamed points' device buffers, made on first use (used under `device`).
    pub chunks: Mutex<Option<BaseChunks>>,
    /// Held for a proof's compute region only, so one caller's preparation overlaps
    /// another's kernels; urgent callers get the next turn.
    pub device: DeviceLock,
    /// An injected fault (tests of failure handling); none by default.
    pub faults: Faults,
}

/// The device results of one partition: the MSMs' sums and what the device did.
struct Computed {
    h: G1Projective,
    l: G1Projective,
    a: G1Projective,
    b_g1: G1Projective,
    b_g2: G2Projective,
    report: DeviceReport,
}

fn ms(ms: f32) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3)
}

impl PartitionProver {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let device = DeviceLock::default();
        PartitionProver {
            ntt: GpuNtt::new(gpu.clone()),
            msm: GpuMsm::new(gpu.clone()),
            staging: StagingSlots::new(gpu.clone(), device.clone()),
            gpu,
            chunks: Mutex::new(None),
            device,
            faults: Faults::default(),
        }
    }

    /// The chunk buffers, of `bytes` each at least: those there are (a streamed set is
    /// planned knowing their size), made again larger where a set's plan needs more
    /// (the plans count the larger; the lock keeps every user out meanwhile, and the
    /// old buffers' drop waits for their copies and readers).
    pub fn chunk_buffers(&self, bytes: usize) -> Result<MutexGuard<'_, Option<BaseChunks>>, GpuError> {
        let mut chunks = lock(&self.chunks);
        if chunks.as_ref().is_some_and(|c| c.chunk_bytes() < bytes) {
            *chunks = None;
        }
        if chunks.is_none() {
            *chunks = Some(BaseChunks::new(&self.gpu, bytes)?);
        }
        Ok(chunks)
    }

    /// One proof of circuit `c` with the set's `points` (and, where its a, b, c are
    /// pending, its compiled `matrices` on this device). A circuit with a witness
    /// charge has its witness freed as soon as the device has it: before waiting for
    /// the device when another proof holds it, else after the proof. An urgent proof
    /// takes the next slot and the next turn of the device (crate::turn).
    #[allow(clippy::too_many_arguments)]
    pub fn prove(
        &self,
        p: &ParameterSet,
        plan: &DevicePlan,
        points: &LoadedPoints,
        matrices: Option<&ProductSource<'_>>,
        c: &mut SynthesizedCircuit,
        w: CompactWitness,
        rs: &ProofRandomness,
        urgency: Urgency,
        t: &mut StageTimings,
    ) -> Result<(Proof, DeviceReport), ProveError> {
        c.mark_consumed();
        let t0 = Instant::now();
        let mut x = prepare(&self.gpu, &self.staging, points.lens(), p, c, w, matrices, urgency)?;
        let claim = x.abc.take_claim();
        let turn = |e| backend_error("waiting for the device", e);
        let device = match self.device.try_take(claim).map_err(turn)? {
            Ok(held) => held,
            Err(claim) if c.frees_witness_early() => {
                // The device is busy: hand the witness back before waiting for it.
                let x = x.detach().map_err(|e| backend_error("uploading a, b, c", e))?;
                c.release_witness();
                let prepared = (t0, Instant::now());
                t.add(Stage::Prepare, prepared.1 - t0);
                let device = self.device.take(claim).map_err(turn)?;
                return self.finish(p, plan, points, x, device, rs, prepared, t);
            }
            Err(claim) => self.device.take(claim).map_err(turn)?,
        };
        let prepared = (t0, Instant::now());
        t.add(Stage::Prepare, prepared.1 - t0);
        let out = self.finish(p, plan, points, x, device, rs, prepared, t);
        if c.frees_witness_early() {
            c.release_witness();
        }
        out
    }

    /// The compute region (holding `device`) and the assembly of a prepared partition.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        p: &ParameterSet,
        plan: &DevicePlan,
        points: &LoadedPoints,
        mut x: Prepared<'_, '_>,
        device: Turn<'_>,
        rs: &ProofRandomness,
        prepared: (Instant, Instant),
        t: &mut StageTimings,
    ) -> Result<(Proof, DeviceReport), ProveError> {
        let computed = {
            // A panic in the region unwinds through this guard before `x`'s staged
            // a, b, c and the device's turn are dropped.
            let _settle = SettleOnUnwind(self);
            self.compute(plan, points, &mut x, t)
        };
        if computed.is_err() {
            self.settle_after_failure();
        }
        let inputs = (x.a_inputs, x.b_inputs_g1, x.b_inputs_g2);
        // The slot goes back before the device: an urgent caller waiting for a slot
        // then claims the device's next turn before an ordinary caller that is already
        // prepared can take it.
        drop(x);
        drop(device);
        let mut c = computed.map_err(|e| backend_error(&format!("proving on the GPU ({})", self.gpu.memory_summary()), e))?;
        (c.report.prepared_from, c.report.prepared_to) = (Some(prepared.0), Some(prepared.1));
        let (a, b_g1, b_g2) = (c.a + inputs.0, c.b_g1 + inputs.1, c.b_g2 + inputs.2);
        let proof = t.time(Stage::Assembly, || assemble(p, rs, c.h, c.l, a, b_g1, b_g2));
        Ok((proof, c.report))
    }

    /// The compute region: the H polynomial on the staged a, b, c (h stays in a's
    /// vector), the five MSMs, the partition's one host wait, the sums read back.
    fn compute(&self, plan: &DevicePlan, points: &LoadedPoints, x: &mut Prepared<'_, '_>, t: &mut StageTimings) -> Result<Computed, GpuError> {
        let from = Instant::now();
        self.faults.reach(FaultPoint::Copy)?;
        // At `from` on the compute stream (idle between regions): the copy stream's
        // events are placed on the host's clock against it.
        let region = self.gpu.stream().record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        let (h_start, h_end) = {
            let ([mut a, mut b, mut c], ready) = x.abc.views()?;
            self.ntt.h_polynomial_on([&mut a, &mut b, &mut c], ready)?
        };
        let mut guard = match points {
            // Held with the device: only the compute region uses the buffers. Made at
            // load; again here if a release of the last other streamed set freed them.
            LoadedPoints::Streamed { .. } => {
                let bytes = plan.backend_chunk_bytes().ok_or_else(|| GpuError::Invalid("streamed points with a plan for resident ones".into()))?;
                Some(self.chunk_buffers(bytes)?)
            }
            LoadedPoints::Resident(_) => None,
        };
        let chunks = match guard.as_mut() {
            Some(g) => Some(g.as_mut().ok_or_else(|| GpuError::Invalid("streamed points without chunk buffers".into()))?),
            None => None,
        };
        let others_host = x.others_host.take();
        let mem = x.abc.msm_memory()?;
        self.faults.reach(FaultPoint::Launch)?;
        self.faults.reach(FaultPoint::Lost)?;
        let m = msms::enqueue(&self.gpu, &self.msm, plan, points, chunks, mem, &x.witness, others_host.as_deref(), &x.lists)?;
        self.gpu.stream().synchronize()?;
        let span = |p: (&CudaEvent, &CudaEvent)| p.0.elapsed_ms(p.1).map(ms);
        let stages = [
            (Stage::HPolynomial, h_start.elapsed_ms(&h_end).map(ms)?),
            (Stage::MsmH, span(m.h.span())?),
            (Stage::MsmL, span(m.l.span())?),
            (Stage::MsmA, span(m.a.span())?),
            (Stage::MsmBG1, span(m.b_g1.span())?),
            (Stage::MsmBG2, span(m.b_g2.span())?),
        ];
        // From the first pageable upload to the end of c's (or to the products, which
        // end with c's).
        let (up, products) = match &x.abc.products_start {
            None => (x.abc.upload_start.elapsed_ms(&x.abc.uploaded[2]).map(ms)?, Duration::ZERO),
            Some(p) => (x.abc.upload_start.elapsed_ms(p).map(ms)?, p.elapsed_ms(&x.abc.uploaded[2]).map(ms)?),
        };
        let on_host = |e: &CudaEvent| -> Result<Instant, GpuError> {
            let after = region.elapsed_ms(e)?;
            let d = ms(after.abs());
            Ok(if after >= 0.0 { from + d } else { from.checked_sub(d).unwrap_or(from) })
        };
        let upload_from = on_host(&x.abc.upload_start)?;
        let (uploaded, products_span) = match &x.abc.products_start {
            None => ((upload_from, on_host(&x.abc.uploaded[2])?), None),
            Some(p) => {
                let p = on_host(p)?;
                ((upload_from, p), Some((p, on_host(&x.abc.uploaded[2])?)))
            }
        };
        let bytes_down = m.h.bytes_down() + m.l.bytes_down() + m.a.bytes_down() + m.b_g1.bytes_down() + m.b_g2.bytes_down();
        let bases_up = m.h.bytes_up() + m.l.bytes_up() + m.a.bytes_up() + m.b_g1.bytes_up() + m.b_g2.bytes_up();
        tracing::debug!(runs = m.runs, list_pieces = m.pieces, bases_gb = bases_up as f64 / 1e9, "partition MSMs");
        let (h, l, a, b_g1, b_g2) = (m.h.finish()?.0, m.l.finish()?.0, m.a.finish()?.0, m.b_g1.finish()?.0, m.b_g2.finish()?.0);
        let mut report = DeviceReport {
            held: from.elapsed(),
            held_from: Some(from),
            held_to: Some(Instant::now()),
            bytes_up: x.abc.bytes + x.list_bytes + bases_up + m.window_bytes,
            bytes_down,
            host_syncs: 1,
            uploaded: Some(uploaded),
            products: products_span,
            ..DeviceReport::default()
        };
        t.add(Stage::Upload, up);
        if !products.is_zero() {
            // On the copy stream, overlapping the previous partition's kernels.
            t.add(Stage::Products, products);
        }
        for (stage, d) in stages {
            report.busy += d;
            t.add(stage, d);
        }
        Ok(Computed { h, l, a, b_g1, b_g2, report })
    }

    /// After a failed compute region: nothing may still read the circuit's memory when
    /// its borrow ends (the staged a, b, c wait for their uploads when dropped), nor a
    /// chunk copy from streamed points that no kernel came to wait for.
    fn settle_after_failure(&self) {
        if let Err(e) = self.gpu.stream().synchronize() {
            tracing::error!(error = %e, "synchronizing after a failed proof");
        }
        if let Some(Err(e)) = lock(&self.chunks).as_ref().map(BaseChunks::synchronize) {
            tracing::error!(error = %e, "synchronizing the chunk copies after a failed proof");
        }
    }
}

/// Settles the streams when a compute region unwinds (a panic): as after its failure,
/// no copy may still be in flight into memory that the unwinding frees, or that the
/// next proof reuses once the poisoned locks are taken again (`cuzk_groth16::sync`).
struct SettleOnUnwind<'a>(&'a PartitionProver);

impl Drop for SettleOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.settle_after_failure();
        }
    }
}
