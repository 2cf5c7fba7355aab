//! [`CudaBackend`]: the GPU proving backend. Per parameter set it makes one device
//! plan (crate::groth16::plan) from the memory it may use, before the set is accepted;
//! it keeps the set's points where the plan puts them (loaded on first use, kept until
//! the set is released) and the compiled matrices of circuits whose a, b, c it
//! computes, and proves each circuit with its GPU's [`PartitionProver`].

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use blstrs::Scalar;
use cuzk_groth16::backend::{
    check_inputs, prove_each, DeviceReport, ProofRandomness, ProveError, ProveOutput, ProvingBackend, Stage, StageTimings, Urgency,
};
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::params::ParameterSetId;
use cuzk_groth16::synthesis::{EvalBuffers, SynthesizedCircuit};
use cuzk_groth16::{NoProgress, ParameterSet, Progress, Proof};

use super::compute::PartitionProver;
use super::plan::{plan, DevicePlan, Held, Overrides, Placement, Products, SetShape};
use super::points::{load, LoadedPoints};
use super::prepare::{compact_witness, others_fit};
use super::products::{matrices_bytes, DeviceMatrices};
use super::row_blocks::{ProductSource, StreamedMatrices};
use super::staging::SlotSizes;
use crate::device::{backend_error, Gpu};
use crate::fault::{FaultPoint, Faults};
use crate::turn::DeviceLock;
use cuzk_groth16::sync::lock;

/// A set's plan, made once, with its shape.
#[derive(Clone)]
struct Decided {
    plan: DevicePlan,
    shape: SetShape,
    /// Logged once: the first partition whose other values did not fit its witness area.
    told_host_products: Arc<std::sync::atomic::AtomicBool>,
}

/// A circuit shape's compiled matrices where this device computes its a, b, c from:
/// resident on it, or pinned on the host and streamed in row blocks.
#[derive(Clone)]
enum PlacedMatrices {
    Resident(Arc<DeviceMatrices>),
    Streamed(Arc<StreamedMatrices>),
}

impl PlacedMatrices {
    fn device_bytes(&self) -> usize {
        match self {
            PlacedMatrices::Resident(d) => d.bytes as usize,
            PlacedMatrices::Streamed(_) => 0,
        }
    }
}

/// A circuit shape's compiled matrices on the host and where this device placed them.
type ShapeMatrices = (Arc<ConstraintMatrices>, PlacedMatrices);

/// Groth16 on one GPU.
pub struct CudaBackend {
    prover: PartitionProver,
    /// Points per parameter set, loaded on first use.
    loaded: Mutex<HashMap<ParameterSetId, Arc<LoadedPoints>>>,
    /// Each set's plan, made once (see `plan_of`).
    decided: Mutex<HashMap<ParameterSetId, Decided>>,
    /// Held while a set loads (one at a time, each placed knowing the ones before),
    /// not the map's lock: proofs with loaded sets go on meanwhile.
    loading: Mutex<()>,
    overrides: Overrides,
    /// Device bytes this backend may hold (gpus.device_memory_limit); None: what the
    /// card has free.
    memory_limit: Option<usize>,
    /// Compiled matrices of the circuits whose a, b, c this device computes, by the
    /// host's copy (the engine keeps one per circuit shape): uploaded on first use where
    /// the plan puts them. An entry goes when no one else holds its host copy any more.
    matrices: Mutex<Vec<ShapeMatrices>>,
    /// Why the device is lost, once a sticky error said so: every later proof is
    /// refused with it (the driver would fail each call anyway).
    lost: std::sync::OnceLock<String>,
    /// Set where placing a set ran short of device memory (another process took some
    /// after the plan was made): the next plan measures what is free again rather than
    /// trust the first plan's figure.
    measure_again: std::sync::atomic::AtomicBool,
    /// Sets whose placement ran short: that copy is never placed again (the engine
    /// loads and charges the set anew, a new copy, for the new plan); gone when the
    /// copy is released.
    short: Mutex<std::collections::HashSet<ParameterSetId>>,
}

impl CudaBackend {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        CudaBackend {
            prover: PartitionProver::new(gpu),
            loaded: Mutex::new(HashMap::new()),
            decided: Mutex::new(HashMap::new()),
            loading: Mutex::new(()),
            overrides: Overrides::default(),
            memory_limit: None,
            matrices: Mutex::new(Vec::new()),
            lost: std::sync::OnceLock::new(),
            measure_again: std::sync::atomic::AtomicBool::new(false),
            short: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// The same backend injecting `faults` (tests of failure handling; crate::fault).
    pub fn with_faults(mut self, faults: Faults) -> Self {
        if faults.is_armed() {
            tracing::warn!(backend = %self.name(), ?faults, "this backend injects a device fault: for tests only");
        }
        self.prover.faults = faults;
        self
    }

    /// The same backend choosing as `overrides` say where its plan would choose
    /// otherwise (benchmarks; tests of the paths small cards take).
    pub fn with_overrides(self, overrides: Overrides) -> Result<Self, ProveError> {
        overrides.check().map_err(ProveError::Backend)?;
        Ok(CudaBackend { overrides, ..self })
    }

    /// The same backend holding at most `bytes` of device memory in all
    /// (`gpus.device_memory_limit`), less if the card has less free.
    pub fn with_memory_limit(self, bytes: Option<usize>) -> Self {
        CudaBackend { memory_limit: bytes, ..self }
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.prover.gpu
    }

    /// The lock held around this backend's compute regions: a setup sharing the GPU
    /// ([`crate::GpuFixedBase::with_device_lock`]) takes it around its own.
    pub fn device_lock(&self) -> DeviceLock {
        self.prover.device.clone()
    }

    /// The plan of a set, for reports and tests (made if need be).
    pub fn plan_for(&self, p: &ParameterSet, matrices: Option<&ConstraintMatrices>) -> Result<DevicePlan, ProveError> {
        Ok(self.plan_of(p, matrices)?.plan)
    }

    /// Device bytes this backend holds now: slots, chunk buffers, NTT tables, resident
    /// points and matrices.
    pub fn device_bytes_held(&self) -> Result<usize, ProveError> {
        let points: usize = lock(&self.loaded)
            .values()
            .map(|l| match &**l {
                LoadedPoints::Resident(q) => q.bytes(),
                LoadedPoints::Streamed { h, .. } => h.as_ref().map_or(0, |h| h.bytes()),
            })
            .sum();
        let matrices: usize = lock(&self.matrices).iter().map(|(_, d)| d.device_bytes()).sum();
        let chunks = lock(&self.prover.chunks).as_ref().map_or(0, |c| 2 * c.chunk_bytes());
        Ok(points + matrices + chunks + self.prover.staging.bytes_held() + self.prover.ntt.bytes_held())
    }

    /// The plan of a set: made once per set (what `host_bytes_for` tells the engine is
    /// then what `points` does), forgotten when the set is released. It counts the
    /// other sets' resident parts and keeps the shared parts (slots, tables, chunk
    /// buffers) at the largest any set needs; the slots and tables are sized now.
    fn plan_of(&self, p: &ParameterSet, matrices: Option<&ConstraintMatrices>) -> Result<Decided, ProveError> {
        let mut decided = lock(&self.decided);
        if let Some(d) = decided.get(&p.id()) {
            return Ok(d.clone());
        }
        let lens = p.lens();
        let n = p.domain_size().next_power_of_two();
        let shape = SetShape {
            n,
            queries: [lens.h, lens.l, lens.a, lens.b_g1, lens.b_g2],
            inputs: p.vk.ic.len(),
            aux: lens.l,
            matrices_bytes: matrices.map(|m| matrices_bytes(m) as usize),
            significant: matrices.and_then(|m| m.significant_aux),
        };
        let held = Held::of(decided.values().map(|d| (&d.plan, &d.shape)));
        // Beside sets already planned, the memory the first of them was planned with:
        // every byte this backend holds is in their plans, but the device pool keeps
        // blocks a count of free memory misses (at a 16 GiB cap on the H100 at e2b69a2
        // the second plan saw 15.73 GB of the first's 15.82 and refused a WinningPoSt
        // that fitted).
        let capacity = match (decided.values().map(|d| d.plan.capacity).min(), self.measure_again.swap(false, Ordering::SeqCst)) {
            (Some(first), false) => first,
            // A placement ran short: within what is free now (and never more than before).
            (Some(first), true) => first.min(self.free_capacity()?),
            (None, _) => self.free_capacity()?,
        };
        // What every loaded set holds, and what this one may use beside them.
        let each: Vec<String> = decided
            .iter()
            .map(|(id, d)| {
                format!(
                    "set {}: {:.2} GB resident",
                    id.0,
                    (d.plan.resident_points_bytes(&d.shape) + d.plan.device_matrices_bytes(&d.shape)) as f64 / 1e9
                )
            })
            .collect();
        tracing::info!(
            backend = %self.name(),
            set = %p.id().0,
            significant_aux = ?shape.significant,
            loaded = each.join("; "),
            before = held.summary(capacity),
            "planning a parameter set"
        );
        let plan = plan(&shape, capacity, &held, &self.overrides).map_err(|e| ProveError::Backend(format!("{} has {e}", self.name())))?;
        self.prover
            .staging
            .configure(SlotSizes { count: plan.slots, arena_bytes: plan.slot_bytes, witness_bytes: plan.witness_bytes })
            .map_err(|e| backend_error("sizing the staging slots", e))?;
        // The largest budget any loaded set needs: a small set loaded after a large one
        // keeps the large one's tables.
        self.prover.ntt.set_table_bytes(plan.table_budget).map_err(|e| backend_error("sizing the NTT tables", e))?;
        tracing::info!(backend = %self.name(), domain = n, plan = plan.summary(&shape), "device plan");
        let d = Decided { plan, shape, told_host_products: Arc::default() };
        decided.insert(p.id(), d.clone());
        Ok(d)
    }

    /// The device memory a first plan may use: what the card has free (less what the
    /// driver may still take), within `gpus.device_memory_limit`.
    fn free_capacity(&self) -> Result<usize, ProveError> {
        // With the device held: a proof's compute region allocates meanwhile.
        let _held = self.prover.device.lock().map_err(|e| backend_error("waiting for the device", e))?;
        let available = self.gpu().available_memory().map_err(|e| backend_error("reading the free device memory", e))?;
        // Less what the driver may still take for the kernels' local memory.
        let could = (available + self.device_bytes_held()?).saturating_sub(self.gpu().lazy_reserve);
        Ok(match self.memory_limit {
            Some(limit) if limit > could => {
                tracing::warn!(backend = %self.name(), limit_gb = limit as f64 / 1e9, free_gb = could as f64 / 1e9, "gpus.device_memory_limit is more than the card has free: planning with what is free");
                could
            }
            // The limit counts the kernels' local memory too: it is this process's.
            Some(limit) => limit.saturating_sub(self.gpu().local_memory).min(could),
            None => could,
        })
    }

    /// `m` where the plan puts it: uploaded to this device, or pinned on the host in
    /// row blocks for the plan's chunk buffers; on first use.
    fn device_matrices(&self, m: &Arc<ConstraintMatrices>, plan: &DevicePlan) -> Result<PlacedMatrices, ProveError> {
        let mut cache = lock(&self.matrices);
        cache.retain(|(k, _)| Arc::strong_count(k) > 1 || Arc::ptr_eq(k, m));
        if let Some((_, d)) = cache.iter().find(|(k, _)| Arc::ptr_eq(k, m)) {
            return Ok(d.clone());
        }
        let start = Instant::now();
        let (d, bytes) = match plan.backend_chunk_bytes() {
            Some(block_bytes) if plan.products == Products::Streamed => {
                let s = StreamedMatrices::pin(self.gpu(), m, block_bytes).map_err(|e| backend_error("pinning the compiled matrices", e))?;
                tracing::info!(
                    backend = %self.name(),
                    constraints = m.num_constraints(),
                    gb = format!("{:.2}", s.bytes as f64 / 1e9),
                    blocks = s.block_count(),
                    seconds = format!("{:.2}", start.elapsed().as_secs_f64()),
                    "compiled matrices pinned on the host, streamed to the GPU in row blocks per partition: a, b, c computed there"
                );
                (PlacedMatrices::Streamed(Arc::new(s)), 0)
            }
            _ => {
                let d = DeviceMatrices::upload(self.gpu(), m).map_err(|e| backend_error("uploading the compiled matrices", e))?;
                let bytes = d.bytes;
                (PlacedMatrices::Resident(Arc::new(d)), bytes)
            }
        };
        if bytes > 0 {
            tracing::info!(
                backend = %self.name(),
                constraints = m.num_constraints(),
                gb = format!("{:.2}", bytes as f64 / 1e9),
                seconds = format!("{:.2}", start.elapsed().as_secs_f64()),
                "compiled matrices resident on the GPU: a, b, c computed there"
            );
        }
        cache.retain(|(k, _)| !Arc::ptr_eq(k, m));
        cache.push((m.clone(), d.clone()));
        Ok(d)
    }

    /// One circuit's proof: its a, b, c computed on this device when pending, the plan
    /// has its matrices here and the witness's other values fit the slot's area; else
    /// on the host first.
    #[allow(clippy::too_many_arguments)]
    fn prove_one(
        &self,
        params: &ParameterSet,
        d: &Decided,
        points: &LoadedPoints,
        c: &mut SynthesizedCircuit,
        rs: &ProofRandomness,
        urgency: Urgency,
        t: &mut StageTimings,
    ) -> Result<(Proof, DeviceReport), ProveError> {
        let w = compact_witness(c);
        let fits = others_fit(&w, d.plan.witness_bytes);
        let matrices = match c.pending_products() {
            Some(m) if d.plan.products.on_device() && fits => Some(self.device_matrices(m, &d.plan)?),
            _ => None,
        };
        // Where a, b, c were computed on the host: the timeline shows it.
        let mut host_products = None;
        if c.pending_products().is_some() && matrices.is_none() {
            if d.plan.products.on_device() && !d.told_host_products.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(
                    backend = %self.name(),
                    other_values = w.others.len(),
                    witness_area_gb = d.plan.witness_bytes as f64 / 1e9,
                    "a partition's witness has more other values than its slot's area holds: its a, b, c are computed on the host (logged once per set)"
                );
            }
            let v = || -> Box<Vec<Scalar>> { Box::new(Vec::new()) };
            let from = std::time::Instant::now();
            t.time(Stage::Products, || c.compute_products(EvalBuffers { a: v(), b: v(), c: v() }))
                .map_err(|e| ProveError::Backend(format!("computing a, b, c from the compiled matrices on the host: {e}")))?;
            host_products = Some((from, std::time::Instant::now()));
        }
        let source = matrices.as_ref().map(|m| match m {
            PlacedMatrices::Resident(d) => ProductSource::Resident(d),
            PlacedMatrices::Streamed(s) => ProductSource::Streamed(s, &self.prover.chunks),
        });
        let (proof, mut report) = self.prover.prove(params, &d.plan, points, source.as_ref(), c, w, rs, urgency, t)?;
        report.host_products = host_products;
        Ok((proof, report))
    }

    /// The parameter set's points, loaded on first use where the plan puts them.
    fn points(
        &self,
        p: &ParameterSet,
        matrices: Option<&ConstraintMatrices>,
        t: &mut StageTimings,
        progress: &dyn Progress,
    ) -> Result<(Arc<LoadedPoints>, Decided), ProveError> {
        let loaded = || -> Result<Option<Arc<LoadedPoints>>, ProveError> {
            let map = lock(&self.loaded);
            Ok(map.get(&p.id()).cloned())
        };
        if let Some(r) = loaded()? {
            return Ok((r, self.plan_of(p, matrices)?));
        }
        let _loading = lock(&self.loading);
        // Another caller may have loaded it while this one waited.
        if let Some(r) = loaded()? {
            return Ok((r, self.plan_of(p, matrices)?));
        }
        // Its host memory was charged for the plan that ran short: placed under a new
        // plan it could pin more than was charged.
        if lock(&self.short).contains(&p.id()) {
            return Err(ProveError::DeviceMemory(format!(
                "{}: this copy of parameter set {} ran short of device memory when placed; the set is loaded again for a new plan",
                self.name(),
                p.id().0
            )));
        }
        let d = self.plan_of(p, matrices)?;
        let n = p.lens();
        let start = Instant::now();
        let mut place = || -> Result<_, ProveError> {
            self.prover.faults.reach(FaultPoint::Alloc).map_err(|e| backend_error("placing the points on the device", e))?;
            let placed = t.time(Stage::Upload, || load(self.gpu(), &self.prover.msm, p, d.plan.points, progress))?;
            // The chunk buffers and staging slots are made now too, so that a shortage
            // shows here rather than in a proof (streamed matrices go through the chunk
            // buffers too).
            if let Some(bytes) = d.plan.backend_chunk_bytes() {
                drop(self.prover.chunk_buffers(bytes).map_err(|e| backend_error("allocating the chunk buffers", e))?);
            }
            self.prover.staging.allocate_all().map_err(|e| backend_error("allocating the staging slots", e))?;
            Ok(placed)
        };
        let (points, from) = match place() {
            Ok(placed) => placed,
            Err(ProveError::DeviceMemory(why)) => {
                // Nothing of the set stays placed: its plan goes, and the chunk buffers,
                // slots and tables where no other set uses them. The engine loads the set
                // again (a new copy, charged for the new plan, which may stream); this
                // copy is refused from now on, and the next plan is made within what is
                // free then.
                self.release_params(p.id());
                lock(&self.short).insert(p.id());
                self.measure_again.store(true, Ordering::SeqCst);
                tracing::warn!(
                    backend = %self.name(),
                    set = %p.id().0,
                    plan = d.plan.summary(&d.shape),
                    why = why.as_str(),
                    "the device ran short of memory placing a parameter set as planned: it is planned again at its next use, within the memory free then"
                );
                return Err(ProveError::DeviceMemory(format!(
                    "{} placing parameter set {} as planned ({:.2} GB of device memory): {why}; planned again at its next use",
                    self.name(),
                    p.id().0,
                    d.plan.capacity as f64 / 1e9
                )));
            }
            Err(e) => return Err(e),
        };
        tracing::info!(
            backend = %self.name(),
            points = n.h + n.l + n.a + n.b_g1 + n.b_g2,
            gb = format!("{:.2}", p.points_bytes() as f64 / 1e9),
            seconds = format!("{:.2}", start.elapsed().as_secs_f64()),
            from,
            mode = match d.plan.points {
                Placement::Resident => "resident on the GPU".to_string(),
                Placement::Streamed { chunk_bytes, h_resident } => format!(
                    "streamed from pinned host memory through two {:.2} GB buffers{}{}",
                    chunk_bytes as f64 / 1e9,
                    if d.plan.chunks_in_slot { " in each staging slot" } else { "" },
                    if h_resident { ", H resident on the GPU too" } else { "" }
                ),
            },
            "parameter set loaded"
        );
        let points = Arc::new(points);
        let mut map = lock(&self.loaded);
        map.insert(p.id(), points.clone());
        Ok((points, d))
    }

    /// `f`'s proof, where the device is not known to be lost; a lost device (a sticky
    /// error from `f`) is remembered, and every later proof refused with it.
    fn unless_lost(&self, f: impl FnOnce() -> Result<ProveOutput, ProveError>) -> Result<ProveOutput, ProveError> {
        if let Some(why) = self.lost.get() {
            return Err(ProveError::DeviceLost(why.clone()));
        }
        let out = f();
        if let Err(ProveError::DeviceLost(why)) = &out {
            if self.lost.set(why.clone()).is_ok() {
                tracing::error!(backend = %self.name(), why = why.as_str(), "device lost: this backend proves nothing more");
            }
        }
        out
    }
}

impl ProvingBackend for CudaBackend {
    fn name(&self) -> String {
        format!("cuda:{}", self.gpu().ordinal)
    }

    /// Frees a circuit's witness once a, b, c and the aux values are on the device when
    /// it carries a witness charge. Urgent proofs take the next staging slot and the
    /// next turn of the device.
    fn prove_with(
        &self,
        urgency: Urgency,
        params: &ParameterSet,
        circuits: &mut [SynthesizedCircuit],
        randomness: &[ProofRandomness],
    ) -> Result<ProveOutput, ProveError> {
        self.unless_lost(|| {
            let mut timings = StageTimings::default();
            // Shapes are checked before the (long, first-use) upload of the points.
            let checked = check_inputs(params, circuits, randomness)?;
            let matrices = circuits.first().and_then(|c| c.pending_products().cloned());
            let (points, d) = self.points(params, matrices.as_deref(), &mut timings, &NoProgress)?;
            let mut device = DeviceReport::default();
            let mut out = prove_each(checked, circuits, randomness, timings, |c, rs, t| {
                // Short of memory in a proof (the NTT tables or MSM buffers, made on first
                // use): not the set's placement, which stands; a failure of this proof.
                let (proof, report) = self.prove_one(params, &d, &points, c, rs, urgency, t).map_err(|e| match e {
                    ProveError::DeviceMemory(why) => ProveError::Backend(format!("the device ran short of memory in a proof: {why}")),
                    e => e,
                })?;
                device.add(&report);
                Ok(proof)
            })?;
            out.device = Some(device);
            Ok(out)
        })
    }

    fn keeps_evaluations(&self) -> bool {
        true // a, b, c are only read, for the upload
    }

    fn in_service(&self) -> bool {
        self.lost.get().is_none()
    }

    fn device(&self) -> Option<cuzk_groth16::DeviceInfo> {
        let gpu = self.gpu();
        let (free, total) = gpu.memory().unwrap_or_else(|e| {
            tracing::warn!(backend = %self.name(), error = %e, "device memory query failed");
            (0, 0)
        });
        let pool = gpu.pool_figures().unwrap_or_else(|e| {
            tracing::warn!(backend = %self.name(), error = %e, "device pool query failed");
            None
        });
        Some(cuzk_groth16::DeviceInfo {
            ordinal: gpu.ordinal,
            name: gpu.name.clone(),
            total_memory: total as u64,
            free_memory: free as u64,
            pool_used: pool.map_or(0, |p| p.used),
            pool_used_high: pool.map_or(0, |p| p.used_high),
        })
    }

    fn reads_params_from_file(&self) -> bool {
        true
    }

    fn plan_params(&self, params: &ParameterSet, matrices: Option<&ConstraintMatrices>) -> Result<(), ProveError> {
        self.plan_of(params, matrices).map(drop)
    }

    /// Where the plan has a, b, c on the device (a partition whose witness has more
    /// significant values than the plan expected still has them computed on the host,
    /// logged once per set).
    fn computes_products(&self, params: &ParameterSet) -> bool {
        lock(&self.decided).get(&params.id()).is_some_and(|d| d.plan.products.on_device())
    }

    /// Pinned host bytes the set takes: its points where they stream, and its compiled
    /// matrices where they stream in row blocks.
    fn host_bytes_for(&self, params: &ParameterSet) -> u64 {
        let decided = lock(&self.decided).get(&params.id()).cloned();
        // A set that cannot be planned at all fails to load with that error; it holds nothing.
        let Some(d) = decided.or_else(|| self.plan_of(params, None).ok()) else { return 0 };
        let points = if d.plan.chunk_bytes().is_some() { params.points_bytes() as u64 } else { 0 };
        let matrices = if d.plan.products == Products::Streamed { d.shape.matrices_bytes.unwrap_or(0) as u64 } else { 0 };
        points + matrices
    }

    /// The points leave the device once the proofs in flight with them finish (each
    /// holds its own reference).
    fn release_params(&self, id: ParameterSetId) {
        let (removed, streaming, none_left) = {
            let mut map = lock(&self.loaded);
            (map.remove(&id).is_some(), map.values().any(|r| matches!(**r, LoadedPoints::Streamed { .. })), map.is_empty())
        };
        if removed {
            tracing::info!(backend = %self.name(), set = id.0, "parameter set released from the GPU");
        }
        lock(&self.decided).remove(&id);
        lock(&self.short).remove(&id);
        // No streamed set left: the chunk buffers go too (their drop waits for the
        // kernels that read them last).
        if !streaming {
            *lock(&self.prover.chunks) = None;
        }
        // No set left: nor the slots and tables (the next set's plan sizes them anew).
        if none_left {
            self.prover.staging.release();
            if let Err(e) = self.prover.ntt.release() {
                tracing::error!(error = %e, "releasing the NTT tables");
            }
        }
    }

    fn load_params(&self, params: &ParameterSet, progress: &dyn Progress) -> Result<(), ProveError> {
        self.points(params, None, &mut StageTimings::default(), progress).map(drop)
    }
}
