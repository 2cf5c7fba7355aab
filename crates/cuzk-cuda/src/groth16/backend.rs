//! [`CudaBackend`]: the GPU proving backend. It keeps each parameter set's points
//! where the placement puts them (loaded on first use, kept until the set is
//! released) and the compiled matrices of circuits whose a, b, c it computes, and
//! proves each circuit with its GPU's [`PartitionProver`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use blstrs::Scalar;
use cuzk_groth16::backend::{check_inputs, prove_each, DeviceReport, ProofRandomness, ProveError, ProveOutput, ProvingBackend, Stage, StageTimings};
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::params::ParameterSetId;
use cuzk_groth16::synthesis::{EvalBuffers, SynthesizedCircuit};
use cuzk_groth16::{NoProgress, ParameterSet, Progress, Proof};

use super::compute::PartitionProver;
use super::placement::{decide, resident_msm_scratch_bytes, resident_working_bytes, Placement};
use super::points::{load, LoadedPoints};
use super::products::{matrices_bytes, DeviceMatrices};
use super::staging::STAGING_SLOTS;
use crate::device::{backend_error, DeviceLock, Gpu};
use crate::field::DeviceFr;
use crate::msm::streamed::{check_chunk_bytes, BaseChunks};

/// Where a backend keeps parameter sets' points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointsPlacement {
    /// On the device when they fit beside a partition's working memory, else streamed
    /// through chunk buffers sized to the memory left
    /// ([`crate::groth16::streamed_chunk_bytes`]).
    Auto,
    /// Always in pinned host memory, streamed through two device buffers of
    /// `chunk_bytes` each (a multiple of 192, at least crate::msm::streamed::MIN_CHUNK_BYTES).
    Streamed { chunk_bytes: usize },
}

/// A set's placement, decided once, with the reason for the log and its points' bytes.
#[derive(Clone)]
struct Decided {
    placement: Placement,
    why: String,
    points_bytes: usize,
}

/// A circuit shape's compiled matrices on the host and, where they fit, on the device.
type ShapeMatrices = (Arc<ConstraintMatrices>, Option<Arc<DeviceMatrices>>);

/// Groth16 on one GPU.
pub struct CudaBackend {
    prover: PartitionProver,
    /// Points per parameter set, loaded on first use.
    loaded: Mutex<HashMap<ParameterSetId, Arc<LoadedPoints>>>,
    /// Each set's placement, decided once (see `placement_of`).
    decided: Mutex<HashMap<ParameterSetId, Decided>>,
    /// Held while a set loads (one at a time, each placed knowing the ones before),
    /// not the map's lock: proofs with loaded sets go on meanwhile.
    loading: Mutex<()>,
    policy: PointsPlacement,
    /// Compiled matrices of the circuits whose a, b, c this device computes, by the
    /// host's copy (the engine keeps one per circuit shape): uploaded on first use, or
    /// None where they do not fit beside a partition's working memory (their a, b, c
    /// are then computed on the host and uploaded; logged once). An entry goes when no
    /// one else holds its host copy any more.
    matrices: Mutex<Vec<ShapeMatrices>>,
}

impl CudaBackend {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        CudaBackend {
            prover: PartitionProver::new(gpu),
            loaded: Mutex::new(HashMap::new()),
            decided: Mutex::new(HashMap::new()),
            loading: Mutex::new(()),
            policy: PointsPlacement::Auto,
            matrices: Mutex::new(Vec::new()),
        }
    }

    /// The same backend keeping points as `policy` says.
    pub fn with_placement(self, policy: PointsPlacement) -> Result<Self, ProveError> {
        if let PointsPlacement::Streamed { chunk_bytes } = policy {
            check_chunk_bytes(chunk_bytes).map_err(|e| backend_error("streamed placement", e))?;
        }
        Ok(CudaBackend { policy, ..self })
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.prover.gpu
    }

    /// Device bytes this backend's MSM scratch holds (one allocation, sized for the
    /// largest partition proven so far: [`crate::groth16::placement`]).
    pub fn msm_scratch_bytes(&self) -> usize {
        self.prover.msm.scratch_held()
    }

    /// The lock held around this backend's compute regions: a setup sharing the GPU
    /// ([`crate::GpuFixedBase::with_device_lock`]) takes it around its own.
    pub fn device_lock(&self) -> DeviceLock {
        self.prover.device.clone()
    }

    /// Where a set's points go: decided once per set (what `host_bytes_for` tells the
    /// engine is then what `points` does), forgotten when the set is released.
    fn placement_of(&self, p: &ParameterSet) -> Result<Decided, ProveError> {
        let mut decided = self.decided.lock().map_err(|_| ProveError::Backend("placement map poisoned".into()))?;
        if let Some(d) = decided.get(&p.id()) {
            return Ok(d.clone());
        }
        // Sets already placed on the device but not loaded yet (the engine asks before
        // it loads): their points are not in the free figure, so count them here.
        let pending: usize = {
            let loaded = self.loaded.lock().map_err(|_| ProveError::Backend("loaded parameter map poisoned".into()))?;
            decided.iter().filter(|(id, d)| d.placement == Placement::Resident && !loaded.contains_key(id)).map(|(_, d)| d.points_bytes).sum()
        };
        let (placement, why) = match self.policy {
            PointsPlacement::Streamed { chunk_bytes } => (Placement::Streamed { chunk_bytes }, "streaming was asked for".to_string()),
            PointsPlacement::Auto => self.place(p, pending)?,
        };
        let d = Decided { placement, why, points_bytes: p.points_bytes() };
        decided.insert(p.id(), d.clone());
        Ok(d)
    }

    /// The placement a set not loaded yet gets from the free device memory.
    /// `pending`: points of sets placed on the device, not loaded yet.
    fn place(&self, p: &ParameterSet, pending: usize) -> Result<(Placement, String), ProveError> {
        let n = p.domain_size().next_power_of_two();
        let free = {
            // With the device held: a proof's compute region takes its MSM scratch from
            // the pool meanwhile, which would make the figure low by that much. (No
            // caller holds the device lock here: loads come before a proof's compute.)
            let _held = self.prover.device.lock().map_err(|_| ProveError::Backend("device lock poisoned".into()))?;
            self.reusable_memory(p)?.saturating_sub(pending)
        };
        let made = self.prover.chunks.lock().ok().and_then(|c| c.as_ref().map(BaseChunks::chunk_bytes));
        decide(p.points_bytes(), n, set_queries(p), free, made).map_err(|e| ProveError::Backend(format!("{} has {e}", self.name())))
    }

    /// Device memory a partition of set `p` can have: what the device can still
    /// allocate, and what earlier proofs left that it reuses (the a, b, c slots of its
    /// domain or larger, and of the MSM scratch as much as it needs). Read with the
    /// device held by the caller.
    fn reusable_memory(&self, p: &ParameterSet) -> Result<usize, ProveError> {
        let n = p.domain_size().next_power_of_two();
        let available = self.gpu().available_memory().map_err(|e| backend_error("reading the free device memory", e))?;
        let scratch = self.prover.msm.scratch_held().min(resident_msm_scratch_bytes(n, set_queries(p)));
        Ok(available + self.prover.staging.bytes_held(n) + scratch)
    }

    /// `m` on this device for partitions of an n-point domain of `params`: uploaded on
    /// first use when the matrices, two partitions' expanded witnesses, their split
    /// lists and a partition's working memory fit in the free memory; else None
    /// (decided once per shape, logged).
    fn device_matrices(&self, m: &Arc<ConstraintMatrices>, n: usize, params: &ParameterSet) -> Result<Option<Arc<DeviceMatrices>>, ProveError> {
        let mut cache = self.matrices.lock().map_err(|_| ProveError::Backend("compiled matrices map poisoned".into()))?;
        cache.retain(|(k, _)| Arc::strong_count(k) > 1 || Arc::ptr_eq(k, m));
        if let Some((_, d)) = cache.iter().find(|(k, _)| Arc::ptr_eq(k, m)) {
            return Ok(d.clone());
        }
        let gb = |b: usize| format!("{:.2}", b as f64 / 1e9);
        let need = matrices_bytes(m) as usize;
        // z and its class bitmaps, in each of the two staging slots' partitions.
        let witnesses = STAGING_SLOTS * (m.num_inputs + m.num_aux) * (std::mem::size_of::<DeviceFr>() + 1);
        // The lists' own aux-value term stands here for each slot's compact witness as
        // it goes up (WindowPoSt's is nearly all values: as large as the expanded one).
        let working = resident_working_bytes(n, set_queries(params));
        let free = {
            let _held = self.prover.device.lock().map_err(|_| ProveError::Backend("device lock poisoned".into()))?;
            self.reusable_memory(params)?
        };
        let d = if need + witnesses + working <= free {
            let start = Instant::now();
            let d = DeviceMatrices::upload(self.gpu(), m).map_err(|e| backend_error("uploading the compiled matrices", e))?;
            tracing::info!(backend = %self.name(), constraints = m.num_constraints(), gb = gb(need), seconds = format!("{:.2}", start.elapsed().as_secs_f64()), "compiled matrices resident on the GPU: a, b, c computed there");
            Some(Arc::new(d))
        } else {
            tracing::warn!(
                backend = %self.name(),
                constraints = m.num_constraints(),
                matrices_gb = gb(need),
                witnesses_gb = gb(witnesses),
                working_gb = gb(working),
                free_gb = gb(free),
                "compiled matrices do not fit beside a partition's working memory: a, b, c computed on the host and uploaded"
            );
            None
        };
        cache.push((m.clone(), d.clone()));
        Ok(d)
    }

    /// One circuit's proof: its a, b, c computed on this device when pending and its
    /// matrices fit here, else on the host first.
    fn prove_one(
        &self,
        params: &ParameterSet,
        points: &LoadedPoints,
        c: &mut SynthesizedCircuit,
        rs: &ProofRandomness,
        t: &mut StageTimings,
    ) -> Result<(Proof, DeviceReport), ProveError> {
        let matrices = match c.pending_products() {
            Some(m) => self.device_matrices(m, c.domain_size(), params)?,
            None => None,
        };
        if c.pending_products().is_some() && matrices.is_none() {
            let v = || -> Box<Vec<Scalar>> { Box::new(Vec::new()) };
            t.time(Stage::Products, || c.compute_products(EvalBuffers { a: v(), b: v(), c: v() }))
                .map_err(|e| ProveError::Backend(format!("computing a, b, c from the compiled matrices on the host: {e}")))?;
        }
        self.prover.prove(params, points, matrices.as_deref(), c, rs, t)
    }

    /// The parameter set's points, loaded on first use where the placement puts them.
    fn points(&self, p: &ParameterSet, t: &mut StageTimings, progress: &dyn Progress) -> Result<Arc<LoadedPoints>, ProveError> {
        let loaded = || -> Result<Option<Arc<LoadedPoints>>, ProveError> {
            let map = self.loaded.lock().map_err(|_| ProveError::Backend("loaded parameter map poisoned".into()))?;
            Ok(map.get(&p.id()).cloned())
        };
        if let Some(r) = loaded()? {
            return Ok(r);
        }
        let _loading = self.loading.lock().map_err(|_| ProveError::Backend("parameter loading lock poisoned".into()))?;
        // Another caller may have loaded it while this one waited.
        if let Some(r) = loaded()? {
            return Ok(r);
        }
        let n = p.lens();
        let d = self.placement_of(p)?;
        let start = Instant::now();
        let (points, from) = t.time(Stage::Upload, || load(self.gpu(), &self.prover.msm, p, d.placement, progress))?;
        if let Placement::Streamed { chunk_bytes } = d.placement {
            // Made now, so that a shortage shows at load rather than in a proof.
            drop(self.prover.chunk_buffers(chunk_bytes).map_err(|e| backend_error("allocating the chunk buffers", e))?);
        }
        tracing::info!(
            backend = %self.name(),
            points = n.h + n.l + n.a + n.b_g1 + n.b_g2,
            gb = format!("{:.2}", p.points_bytes() as f64 / 1e9),
            seconds = format!("{:.2}", start.elapsed().as_secs_f64()),
            from,
            mode = match d.placement {
                Placement::Resident => "resident on the GPU".to_string(),
                Placement::Streamed { chunk_bytes } => format!("streamed from pinned host memory through two {:.2} GB buffers", chunk_bytes as f64 / 1e9),
            },
            why = d.why,
            "parameter set loaded"
        );
        let points = Arc::new(points);
        let mut map = self.loaded.lock().map_err(|_| ProveError::Backend("loaded parameter map poisoned".into()))?;
        map.insert(p.id(), points.clone());
        Ok(points)
    }
}

impl ProvingBackend for CudaBackend {
    fn name(&self) -> String {
        format!("cuda:{}", self.gpu().ordinal)
    }

    /// Frees a circuit's witness once a, b, c and the aux values are on the device when
    /// it carries a witness charge.
    fn prove(&self, params: &ParameterSet, circuits: &mut [SynthesizedCircuit], randomness: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        let mut timings = StageTimings::default();
        // Shapes are checked before the (long, first-use) upload of the points.
        check_inputs(params, circuits, randomness)?;
        let points = self.points(params, &mut timings, &NoProgress)?;
        let mut device = DeviceReport::default();
        let mut out = prove_each(params, circuits, randomness, timings, |c, rs, t| {
            let (proof, report) = self.prove_one(params, &points, c, rs, t)?;
            device.add(&report);
            Ok(proof)
        })?;
        out.device = Some(device);
        Ok(out)
    }

    fn keeps_evaluations(&self) -> bool {
        true // a, b, c are only read, for the upload
    }

    fn device(&self) -> Option<cuzk_groth16::DeviceInfo> {
        let gpu = self.gpu();
        let (free, total) = gpu.memory().unwrap_or_else(|e| {
            tracing::warn!(backend = %self.name(), error = %e, "device memory query failed");
            (0, 0)
        });
        Some(cuzk_groth16::DeviceInfo { ordinal: gpu.ordinal, name: gpu.name.clone(), total_memory: total as u64, free_memory: free as u64 })
    }

    fn reads_params_from_file(&self) -> bool {
        true
    }

    fn host_bytes_for(&self, params: &ParameterSet) -> u64 {
        let loaded = self.loaded.lock().ok().and_then(|m| m.get(&params.id()).map(|r| matches!(**r, LoadedPoints::Streamed { .. })));
        // A set that cannot be placed at all fails to load with that error; it holds nothing.
        let streamed = loaded.unwrap_or_else(|| matches!(self.placement_of(params), Ok(Decided { placement: Placement::Streamed { .. }, .. })));
        if streamed {
            params.points_bytes() as u64
        } else {
            0
        }
    }

    /// The points leave the device once the proofs in flight with them finish (each
    /// holds its own reference).
    fn release_params(&self, id: ParameterSetId) {
        let (removed, streaming, none_left) = match self.loaded.lock() {
            Ok(mut map) => (map.remove(&id).is_some(), map.values().any(|r| matches!(**r, LoadedPoints::Streamed { .. })), map.is_empty()),
            Err(_) => {
                tracing::error!("loaded parameter map poisoned: points not released");
                (false, true, false)
            }
        };
        if removed {
            tracing::info!(backend = %self.name(), set = id.0, "parameter set released from the GPU");
        }
        if let Ok(mut decided) = self.decided.lock() {
            decided.remove(&id);
        }
        // No streamed set left: the chunk buffers go too (their drop waits for the
        // kernels that read them last).
        if !streaming {
            if let Ok(mut chunks) = self.prover.chunks.lock() {
                *chunks = None;
            }
        }
        // No set left: nor the MSM scratch, sized for the largest of them (the next
        // set's first proof sizes it anew).
        if none_left {
            self.prover.msm.release_scratch();
        }
    }

    fn load_params(&self, params: &ParameterSet, progress: &dyn Progress) -> Result<(), ProveError> {
        self.points(params, &mut StageTimings::default(), progress).map(drop)
    }
}

/// The lengths of a set's L, A and B (G1) queries.
fn set_queries(p: &ParameterSet) -> [usize; 3] {
    let q = p.lens();
    [q.l, q.a, q.b_g1]
}
