//! The GPU proving backend: the H polynomial and every MSM on one GPU, the Groth16
//! assembly (a few scalar multiplications) on the host.
//!
//! A proof has two phases. *Prepare*, on the caller's thread with the device free for
//! others: on a staging slot's own copy stream, the aux values go up and the split
//! MSMs' lists are built from them on the device (crate::split), then a, b, c follow
//! (at full PCIe speed from pinned memory, no host wait); the public-input parts of
//! the A and B queries (a few hundred points) are summed on the host meanwhile.
//! *Compute*, holding the device: the H polynomial and the five MSMs are enqueued on
//! the compute stream with no wait between them (h stays in its slot for the H MSM),
//! then the host waits once and reads the five points. Two callers at once overlap one's prepare with the other's compute.
//!
//! The parameter set's points are loaded once per [`ParameterSet`]: onto the device,
//! where they stay, when they fit beside a partition's working memory; else into
//! pinned host memory, from which every MSM streams them up in chunks
//! (crate::streamed). The log says which, and why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use blstrs::{G1Projective, G2Projective};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaEvent, CudaStream};
use cuzk_groth16::backend::{check_inputs, prove_each, DeviceReport, ProofRandomness, ProveError, ProveOutput, ProvingBackend, Stage, StageTimings};
use cuzk_groth16::msm::msm as host_msm;
use cuzk_groth16::params::{ParameterSetId, QueryPoints};
use cuzk_groth16::{NoProgress, Progress};

use crate::params_file::{load_queries, load_queries_to_host, DeviceQueries, STAGING_BYTES};
use crate::streamed::{check_chunk_bytes, shared, BaseChunks, StreamedQueries, DEFAULT_CHUNK_BYTES, MIN_CHUNK_BYTES};
use cuzk_groth16::prover::assemble;
use cuzk_groth16::synthesis::{Density, SynthesizedCircuit};
use cuzk_groth16::{ParameterSet, Proof};

use crate::device::{Gpu, GpuError};
use crate::msm::{DeviceSplit, GpuMsm, PendingMsm, G1, G2};
use crate::ntt::{GpuNtt, StagedAbc};
use crate::split::{build_on_device, split_plan, upload_density, DeviceAux};

fn backend_error(what: &str, e: GpuError) -> ProveError {
    ProveError::Backend(format!("{what}: {e}"))
}

/// A parameter set's points where the backend keeps them.
enum LoadedPoints {
    /// On the device.
    Resident(Box<DeviceQueries>),
    /// In pinned host memory (shared with other GPUs' backends), streamed up by every
    /// MSM through chunk buffers of `chunk_bytes` each.
    Streamed { points: Arc<StreamedQueries>, chunk_bytes: usize },
}

impl LoadedPoints {
    /// The point counts of L, A and B (G1) that the split lists index.
    fn lens(&self) -> [usize; 3] {
        match self {
            LoadedPoints::Resident(q) => [q.l.len(), q.a.len(), q.b_g1.len()],
            LoadedPoints::Streamed { points: q, .. } => [q.l.len(), q.a.len(), q.b_g1.len()],
        }
    }
}

/// A set's placement: the chunk buffers' size when streamed (None: resident), and why.
type Placement = (Option<usize>, String);

/// Where a backend keeps parameter sets' points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointsPlacement {
    /// On the device when they fit beside a partition's working memory, else streamed
    /// through chunk buffers sized to the memory left ([`streamed_chunk_bytes`]).
    Auto,
    /// Always in pinned host memory, streamed through two device buffers of
    /// `chunk_bytes` each (a multiple of 192, at least crate::streamed::MIN_CHUNK_BYTES).
    Streamed { chunk_bytes: usize },
}

/// Device memory a partition of an n-point domain works in besides the points: two
/// staging slots of a, b, c (32 bytes per value each), the H MSM's digits and sorted
/// entries (4 bytes each per window, of `msm_n` scalars at a time: 13 windows from 2^24
/// scalars, 16 from 2^20), and 2 GiB for buckets and the smaller MSMs' scratch.
pub fn working_bytes(n: usize, msm_n: usize) -> usize {
    let windows = crate::msm::windows(crate::msm::window_bits::<G1>(msm_n)) as usize;
    6 * 32 * n + 2 * 4 * windows * msm_n + (2 << 30)
}

/// The chunk buffers' size for a set streamed on a device with `free` bytes for it, in
/// partitions of an n-point domain: the default, or less where that does not fit
/// beside the a, b, c slots (so a GPU with little memory to spare still proves), a
/// multiple of 192 no smaller than MIN_CHUNK_BYTES; None if not even that fits.
/// `made`: the size of the backend's chunk buffers if already made (they cost nothing
/// more, and their size stays).
pub fn streamed_chunk_bytes(free: usize, n: usize, made: Option<usize>) -> Option<usize> {
    if let Some(b) = made {
        return (working_bytes(n, b / 96) <= free).then_some(b);
    }
    // Two buffers of `chunk` bytes and the sort's 128 bytes (16 windows at most from
    // 2^20 scalars on) per G1 point of a chunk (96 bytes): 320/96 of `chunk`.
    // (Below 2^20 points a chunk's MSMs take up to 20 windows: then the least size is
    // tried on its own.)
    let fits = |c: usize| 2 * c + working_bytes(n, c / 96) <= free;
    let room = free.checked_sub(working_bytes(n, 0))?;
    let chunk = ((room / 320 * 96).min(DEFAULT_CHUNK_BYTES) / 192) * 192;
    if chunk >= MIN_CHUNK_BYTES && fits(chunk) {
        Some(chunk)
    } else {
        fits(MIN_CHUNK_BYTES).then_some(MIN_CHUNK_BYTES)
    }
}

/// Groth16 on one GPU.
pub struct CudaBackend {
    gpu: Arc<Gpu>,
    ntt: GpuNtt,
    msm: GpuMsm,
    /// Points per parameter set, loaded on first use.
    resident: Mutex<HashMap<ParameterSetId, Arc<LoadedPoints>>>,
    /// Each set's placement, decided once (see `placement_of`), with its points' bytes.
    decided: Mutex<HashMap<ParameterSetId, (Placement, usize)>>,
    /// Held while a set loads (one at a time, each placed knowing the ones before),
    /// not the map's lock: proofs with loaded sets go on meanwhile.
    loading: Mutex<()>,
    placement: PointsPlacement,
    /// The streamed points' device buffers, made on first use (used under `device`).
    chunks: Mutex<Option<BaseChunks>>,
    /// Held for a proof's compute region only (see the module comment), and by a
    /// [`crate::GpuFixedBase`] made for this backend around each of its chunks.
    device: Arc<Mutex<()>>,
}

impl CudaBackend {
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The lock around the device's compute regions.
    pub(crate) fn device_lock(&self) -> Arc<Mutex<()>> {
        self.device.clone()
    }

    pub fn new(gpu: Arc<Gpu>) -> Self {
        CudaBackend {
            ntt: GpuNtt::new(gpu.clone()),
            msm: GpuMsm::new(gpu.clone()),
            gpu,
            resident: Mutex::new(HashMap::new()),
            decided: Mutex::new(HashMap::new()),
            loading: Mutex::new(()),
            placement: PointsPlacement::Auto,
            chunks: Mutex::new(None),
            device: Arc::new(Mutex::new(())),
        }
    }

    /// The same backend keeping points as `placement` says.
    pub fn with_placement(self, placement: PointsPlacement) -> Result<Self, ProveError> {
        if let PointsPlacement::Streamed { chunk_bytes } = placement {
            check_chunk_bytes(chunk_bytes).map_err(|e| backend_error("streamed placement", e))?;
        }
        Ok(CudaBackend { placement, ..self })
    }

    /// Where a set's points go: decided once per set (what `host_bytes_for` tells the
    /// engine is then what `resident` does), forgotten when the set is released.
    fn placement_of(&self, p: &ParameterSet) -> Result<Placement, ProveError> {
        let mut decided = self.decided.lock().map_err(|_| ProveError::Backend("placement map poisoned".into()))?;
        if let Some((d, _)) = decided.get(&p.id()) {
            return Ok(d.clone());
        }
        // Sets already placed on the device but not loaded yet (the engine asks before
        // it loads): their points are not in the free figure, so count them here.
        let pending: usize = {
            let loaded = self.resident.lock().map_err(|_| ProveError::Backend("resident parameter map poisoned".into()))?;
            decided.iter().filter(|(id, (d, _))| d.0.is_none() && !loaded.contains_key(id)).map(|(_, (_, bytes))| bytes).sum()
        };
        let d = self.placement_for(p, pending)?;
        decided.insert(p.id(), (d.clone(), p.points_bytes()));
        Ok(d)
    }

    /// The chunk buffers, made of `bytes` each if there are none (else those there
    /// are: a streamed set is placed knowing their size).
    fn chunk_buffers(&self, bytes: usize) -> Result<MutexGuard<'_, Option<BaseChunks>>, GpuError> {
        let mut chunks = self.chunks.lock().map_err(|_| GpuError::Invalid("chunk buffers poisoned".into()))?;
        if chunks.is_none() {
            *chunks = Some(BaseChunks::new(&self.gpu, bytes)?);
        }
        Ok(chunks)
    }

    /// Streamed (the chunk buffers' size) or resident, for a set not loaded yet; with
    /// the reason, for the log.
    /// `pending`: points of sets placed on the device, not loaded yet.
    fn placement_for(&self, p: &ParameterSet, pending: usize) -> Result<Placement, ProveError> {
        if let PointsPlacement::Streamed { chunk_bytes } = self.placement {
            return Ok((Some(chunk_bytes), "streaming was asked for".into()));
        }
        let (points, n) = (p.points_bytes(), p.domain_size().next_power_of_two());
        let free = {
            // With the device held: a proof's compute region takes its MSM scratch from
            // the pool meanwhile, which would make the figure low by that much. (No
            // caller holds the device lock here: loads come before a proof's compute.)
            let _held = self.device.lock().map_err(|_| ProveError::Backend("device lock poisoned".into()))?;
            let available = self.gpu.available_memory().map_err(|e| backend_error("reading the free device memory", e))?;
            // The a, b, c slots an earlier proof left are reused, not allocated again.
            (available + self.ntt.staging_bytes_held(n)).saturating_sub(pending)
        };
        let gb = |b: usize| b as f64 / 1e9;
        // The H MSM runs over n − 1 scalars (16 windows at n = 2^24, not 13).
        let resident = points + working_bytes(n, n - 1);
        if resident <= free {
            return Ok((
                None,
                format!("{:.2} GB of points and {:.2} GB of working memory fit in {:.2} GB", gb(points), gb(resident - points), gb(free)),
            ));
        }
        let made = self.chunks.lock().ok().and_then(|c| c.as_ref().map(BaseChunks::chunk_bytes));
        let Some(chunk) = streamed_chunk_bytes(free, n, made) else {
            let least = match made {
                Some(b) => working_bytes(n, b / 96),
                None => 2 * MIN_CHUNK_BYTES + working_bytes(n, MIN_CHUNK_BYTES / 96),
            };
            return Err(ProveError::Backend(format!(
                "{} has {:.2} GB available: not enough for a partition of this set even with its {:.2} GB of points streamed (at least {:.2} GB needed)",
                self.name(),
                gb(free),
                gb(points),
                gb(least)
            )));
        };
        Ok((
            Some(chunk),
            format!(
                "{:.2} GB of points and {:.2} GB of working memory do not fit in {:.2} GB; chunk buffers of {:.2} GB",
                gb(points),
                gb(resident - points),
                gb(free),
                gb(chunk)
            ),
        ))
    }

    /// The parameter set's points, loaded on first use: onto the device, or into pinned
    /// host memory to be streamed (see [`PointsPlacement`]).
    fn resident(&self, p: &ParameterSet, t: &mut StageTimings, progress: &dyn Progress) -> Result<Arc<LoadedPoints>, ProveError> {
        let loaded = || -> Result<Option<Arc<LoadedPoints>>, ProveError> {
            let map = self.resident.lock().map_err(|_| ProveError::Backend("resident parameter map poisoned".into()))?;
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
        let (streamed, why) = self.placement_of(p)?;
        let start = Instant::now();
        let mut from = if matches!(p.points(), QueryPoints::File(_)) { "file, decoded on the GPU" } else { "host memory" };
        let r = t.time(Stage::Upload, || -> Result<_, ProveError> {
            let file_error = |e| ProveError::Backend(format!("reading the parameters for the GPU: {e}"));
            Ok(match (p.points(), streamed) {
                (QueryPoints::Host(q), None) => LoadedPoints::Resident(Box::new(DeviceQueries {
                    h: self.msm.upload_bases(&q.h).map_err(|e| backend_error("uploading H", e))?,
                    l: self.msm.upload_bases(&q.l).map_err(|e| backend_error("uploading L", e))?,
                    a: self.msm.upload_bases(&q.a).map_err(|e| backend_error("uploading A", e))?,
                    b_g1: self.msm.upload_bases(&q.b_g1).map_err(|e| backend_error("uploading B (G1)", e))?,
                    b_g2: self.msm.upload_bases(&q.b_g2).map_err(|e| backend_error("uploading B (G2)", e))?,
                })),
                (QueryPoints::File(f), None) => LoadedPoints::Resident(Box::new(load_queries(&self.gpu, f, progress).map_err(file_error)?)),
                (points, Some(chunk_bytes)) => {
                    let (q, was_shared) = shared(p.id(), || match points {
                        QueryPoints::Host(q) => {
                            StreamedQueries::from_host(&self.gpu, q).map_err(|e| backend_error("copying the points into pinned memory", e))
                        }
                        QueryPoints::File(f) => load_queries_to_host(&self.gpu, f, STAGING_BYTES, progress).map_err(file_error),
                    })?;
                    if was_shared {
                        from = "pinned host memory another GPU's backend loaded";
                    }
                    LoadedPoints::Streamed { points: q, chunk_bytes }
                }
            })
        })?;
        if let Some(chunk_bytes) = streamed {
            // Made now, so that a shortage shows at load rather than in a proof.
            drop(self.chunk_buffers(chunk_bytes).map_err(|e| backend_error("allocating the chunk buffers", e))?);
        }
        tracing::info!(
            backend = %self.name(),
            points = n.h + n.l + n.a + n.b_g1 + n.b_g2,
            gb = format!("{:.2}", p.points_bytes() as f64 / 1e9),
            seconds = format!("{:.2}", start.elapsed().as_secs_f64()),
            from,
            mode = match streamed {
                None => "resident on the GPU".to_string(),
                Some(b) => format!("streamed from pinned host memory through two {:.2} GB buffers", b as f64 / 1e9),
            },
            why,
            "parameter set loaded"
        );
        let r = Arc::new(r);
        let mut map = self.resident.lock().map_err(|_| ProveError::Backend("resident parameter map poisoned".into()))?;
        map.insert(p.id(), r.clone());
        Ok(r)
    }

    fn prove_with(
        &self,
        params: &ParameterSet,
        circuits: &mut [SynthesizedCircuit],
        randomness: &[ProofRandomness],
    ) -> Result<ProveOutput, ProveError> {
        let mut timings = StageTimings::default();
        // Shapes are checked before the (long, first-use) upload of the points.
        check_inputs(params, circuits, randomness)?;
        let resident = self.resident(params, &mut timings, &NoProgress)?;
        let mut device = DeviceReport::default();
        let mut out = prove_each(params, circuits, randomness, timings, |c, rs, t| {
            let (proof, report) = self.prove_one(params, &resident, c, rs, t)?;
            device.add(&report);
            Ok(proof)
        })?;
        out.device = Some(device);
        Ok(out)
    }
}

impl ProvingBackend for CudaBackend {
    fn name(&self) -> String {
        format!("cuda:{}", self.gpu.ordinal)
    }

    /// Frees a circuit's witness once a, b, c and the aux values are on the device when
    /// it carries a witness charge.
    fn prove(&self, params: &ParameterSet, circuits: &mut [SynthesizedCircuit], randomness: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        self.prove_with(params, circuits, randomness)
    }

    fn keeps_evaluations(&self) -> bool {
        true // a, b, c are only read, for the upload
    }

    fn reads_params_from_file(&self) -> bool {
        true
    }

    fn device(&self) -> Option<cuzk_groth16::DeviceInfo> {
        let (free, total) = self.gpu.memory().unwrap_or_else(|e| {
            tracing::warn!(backend = %self.name(), error = %e, "device memory query failed");
            (0, 0)
        });
        Some(cuzk_groth16::DeviceInfo {
            ordinal: self.gpu.ordinal,
            name: self.gpu.name.clone(),
            total_memory: total as u64,
            free_memory: free as u64,
        })
    }

    fn host_bytes_for(&self, params: &ParameterSet) -> u64 {
        let loaded = self.resident.lock().ok().and_then(|m| m.get(&params.id()).map(|r| matches!(**r, LoadedPoints::Streamed { .. })));
        // A set that cannot be placed at all fails to load with that error; it holds nothing.
        let streamed = loaded.unwrap_or_else(|| matches!(self.placement_of(params), Ok((Some(_), _))));
        if streamed {
            params.points_bytes() as u64
        } else {
            0
        }
    }

    /// The points leave the device once the proofs in flight with them finish (each
    /// holds its own reference).
    fn release_params(&self, id: ParameterSetId) {
        let (removed, streaming) = match self.resident.lock() {
            Ok(mut map) => (map.remove(&id).is_some(), map.values().any(|r| matches!(**r, LoadedPoints::Streamed { .. }))),
            Err(_) => {
                tracing::error!("resident parameter map poisoned: points not released");
                (false, true)
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
            if let Ok(mut chunks) = self.chunks.lock() {
                *chunks = None;
            }
        }
    }

    fn load_params(&self, params: &ParameterSet, progress: &dyn Progress) -> Result<(), ProveError> {
        self.resident(params, &mut StageTimings::default(), progress).map(drop)
    }
}

/// A partition ready for the device: a, b, c staged and the split lists built from
/// the aux values (all on the slot's copy stream), the public-input parts summed.
struct Prepared<'n, 'c> {
    abc: StagedAbc<'n, 'c>,
    l: DeviceSplit,
    a: DeviceSplit,
    /// The B query's lists, shared by its G1 and G2 MSMs.
    b: DeviceSplit,
    /// Bytes of aux values, bitmaps and list offsets sent up.
    list_bytes: u64,
    a_inputs: G1Projective,
    b_inputs_g1: G1Projective,
    b_inputs_g2: G2Projective,
}

impl<'n> Prepared<'n, '_> {
    /// Waits for the uploads from the circuit's memory, which is then free.
    fn detach(self) -> Result<Prepared<'n, 'static>, GpuError> {
        Ok(Prepared {
            abc: self.abc.detach()?,
            l: self.l,
            a: self.a,
            b: self.b,
            list_bytes: self.list_bytes,
            a_inputs: self.a_inputs,
            b_inputs_g1: self.b_inputs_g1,
            b_inputs_g2: self.b_inputs_g2,
        })
    }
}

/// The five MSMs of a partition, enqueued.
struct PendingMsms {
    h: PendingMsm<G1>,
    l: PendingMsm<G1>,
    a: PendingMsm<G1>,
    b_g1: PendingMsm<G1>,
    b_g2: PendingMsm<G2>,
}

fn ms(ms: f32) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3)
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

impl CudaBackend {
    /// The host's part of a proof, with the device free for others: per query, where
    /// each chunk's lists start (popcounts of the bitmaps); then, on the slot's copy
    /// stream, the pageable aux values and bitmaps go up and the lists are built from
    /// them, and a, b, c follow (pinned: no host wait). The public-input sums meanwhile.
    fn prepare<'n, 'c>(&'n self, p: &ParameterSet, r: &LoadedPoints, c: &'c SynthesizedCircuit) -> Result<Prepared<'n, 'c>, ProveError> {
        let num_inputs = c.num_inputs();
        let b_inputs = c.b_input_density.select(&c.input);
        // B_G2's length equals B_G1's: both were checked against the circuit (check_inputs).
        let [l_len, a_len, b_len] = r.lens();
        let (a_rows, b_g1_rows, b_g2_rows) = p
            .input_rows(num_inputs, b_inputs.len())
            .ok_or_else(|| ProveError::Backend("the parameter set lacks the public inputs' rows of A or B".into()))?;
        let t0 = Instant::now();
        let n = c.aux.len();
        let plan =
            |d: Option<&Density>, first: usize| split_plan(n, &c.aux_classes, d, first).map_err(|e| backend_error("planning the split lists", e));
        let (pl, (pa, pb)) = rayon::join(
            || plan(None, 0),
            || rayon::join(|| plan(Some(&c.a_aux_density), num_inputs), || plan(Some(&c.b_aux_density), b_inputs.len())),
        );
        let (pl, pa, pb) = (pl?, pa?, pb?);
        let t_plans = t0.elapsed();
        let lists = |s: &Arc<CudaStream>| -> Result<(DeviceSplit, DeviceSplit, DeviceSplit, u64), GpuError> {
            if n == 0 {
                let none = || DeviceSplit::new(None, None, None, 0);
                return Ok((none(), none(), none(), 0));
            }
            // Pageable uploads first (each waits for the stream's earlier work).
            let up = Instant::now();
            let aux = DeviceAux::upload(s, &c.aux, &c.aux_classes)?;
            tracing::debug!(ms = up.elapsed().as_secs_f64() * 1e3, gb = aux.bytes as f64 / 1e9, "prepare: aux values up (pageable)");
            let (da, db) = (upload_density(s, &c.a_aux_density, n)?, upload_density(s, &c.b_aux_density, n)?);
            let l = build_on_device(&self.gpu, s, l_len, &aux, None, &pl)?;
            let a = build_on_device(&self.gpu, s, a_len, &aux, Some(&da), &pa)?;
            let b = build_on_device(&self.gpu, s, b_len, &aux, Some(&db), &pb)?;
            // The aux values and classes, the A and B densities, the lists' offsets.
            let bytes = aux.bytes + 2 * n.div_ceil(64) as u64 * 8 + l.bytes + a.bytes + b.bytes;
            Ok((l, a, b, bytes))
        };
        let (staged, (a_inputs, (b_inputs_g1, b_inputs_g2))) = rayon::join(
            || {
                self.ntt
                    .stage_with(c.a.as_slice(), c.b.as_slice(), c.c.as_slice(), lists)
                    .map_err(|e| backend_error("uploading a, b, c and building the split lists", e))
            },
            || rayon::join(|| host_msm(a_rows, &c.input), || rayon::join(|| host_msm(b_g1_rows, &b_inputs), || host_msm(b_g2_rows, &b_inputs))),
        );
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(plans = ms(t_plans), enqueued = ms(t0.elapsed()), "prepare: host steps (ms from its start)");
        let (abc, (l, a, b, list_bytes)) = staged?;
        Ok(Prepared { abc, l, a, b, list_bytes, a_inputs, b_inputs_g1, b_inputs_g2 })
    }

    /// Enqueues the H polynomial and the five MSMs; no host wait. Returns them with
    /// the NTTs' events.
    fn enqueue(&self, r: &LoadedPoints, x: &mut Prepared<'_, '_>) -> Result<(PendingMsms, CudaEvent, CudaEvent), GpuError> {
        let n = x.abc.domain_size();
        let (l, a, b, msm) = (&x.l, &x.a, &x.b, &self.msm);
        self.ntt.h_polynomial_staged(&mut x.abc, |h, ev| {
            let h = h.slice(..n - 1);
            let pending = match r {
                LoadedPoints::Resident(q) => PendingMsms {
                    h: msm.enqueue_device(&q.h, &h)?,
                    l: msm.enqueue_split(&q.l, l)?,
                    a: msm.enqueue_split(&q.a, a)?,
                    b_g1: msm.enqueue_split(&q.b_g1, b)?,
                    b_g2: msm.enqueue_split(&q.b_g2, b)?,
                },
                LoadedPoints::Streamed { points: q, chunk_bytes } => {
                    // Held with the device: only the compute region uses the buffers.
                    // Made at load; again here if a release of the last other streamed
                    // set freed them meanwhile.
                    let mut guard = self.chunk_buffers(*chunk_bytes)?;
                    let chunks = guard.as_mut().ok_or_else(|| GpuError::Invalid("streamed points without chunk buffers".into()))?;
                    PendingMsms {
                        h: msm.enqueue_device_streamed(&q.h, &h, chunks)?,
                        l: msm.enqueue_split_streamed(&q.l, l, chunks)?,
                        a: msm.enqueue_split_streamed(&q.a, a, chunks)?,
                        b_g1: msm.enqueue_split_streamed(&q.b_g1, b, chunks)?,
                        b_g2: msm.enqueue_split_streamed(&q.b_g2, b, chunks)?,
                    }
                }
            };
            Ok((pending, ev.compute_start, ev.computed))
        })
    }

    /// The compute region: holds the device (`held`, or the lock taken here) from the
    /// first enqueue to the results.
    fn compute(
        &self,
        r: &LoadedPoints,
        x: &mut Prepared<'_, '_>,
        held: Option<MutexGuard<'_, ()>>,
        t: &mut StageTimings,
    ) -> Result<Computed, GpuError> {
        let _device = match held {
            Some(g) => g,
            None => self.device.lock().map_err(|_| GpuError::Invalid("device lock poisoned".into()))?,
        };
        let from = Instant::now();
        let (m, h0, h1) = self.enqueue(r, x)?;
        // The partition's one host wait.
        self.gpu.stream().synchronize()?;
        let span = |p: (&CudaEvent, &CudaEvent)| p.0.elapsed_ms(p.1).map(ms);
        let stages = [
            (Stage::HPolynomial, h0.elapsed_ms(&h1).map(ms)?),
            (Stage::MsmH, span(m.h.span())?),
            (Stage::MsmL, span(m.l.span())?),
            (Stage::MsmA, span(m.a.span())?),
            (Stage::MsmBG1, span(m.b_g1.span())?),
            (Stage::MsmBG2, span(m.b_g2.span())?),
        ];
        // From the first pageable upload to the end of c's.
        let up = x.abc.upload_start.elapsed_ms(&x.abc.uploaded[2]).map(ms)?;
        let bytes_down = m.h.bytes_down() + m.l.bytes_down() + m.a.bytes_down() + m.b_g1.bytes_down() + m.b_g2.bytes_down();
        let bases_up = m.h.bytes_up() + m.l.bytes_up() + m.a.bytes_up() + m.b_g1.bytes_up() + m.b_g2.bytes_up();
        let (h, l, a, b_g1, b_g2) = (m.h.finish()?.0, m.l.finish()?.0, m.a.finish()?.0, m.b_g1.finish()?.0, m.b_g2.finish()?.0);
        let mut report = DeviceReport {
            held: from.elapsed(),
            held_from: Some(from),
            held_to: Some(Instant::now()),
            bytes_up: x.abc.bytes + x.list_bytes + bases_up,
            bytes_down,
            host_syncs: 1,
            ..DeviceReport::default()
        };
        t.add(Stage::Upload, up);
        for (stage, d) in stages {
            report.busy += d;
            t.add(stage, d);
        }
        Ok(Computed { h, l, a, b_g1, b_g2, report })
    }

    /// The compute region and the assembly of a prepared partition.
    fn finish(
        &self,
        p: &ParameterSet,
        r: &LoadedPoints,
        mut x: Prepared<'_, '_>,
        held: Option<MutexGuard<'_, ()>>,
        rs: &ProofRandomness,
        prepared: (Instant, Instant),
        t: &mut StageTimings,
    ) -> Result<(Proof, DeviceReport), ProveError> {
        let computed = self.compute(r, &mut x, held, t);
        if computed.is_err() {
            // Nothing may still read the circuit's memory when the borrow ends (the
            // staged a, b, c wait for their uploads when dropped).
            if let Err(e) = self.gpu.stream().synchronize() {
                tracing::error!(error = %e, "synchronizing after a failed proof");
            }
            // Nor a chunk copy from streamed points no kernel came to wait for.
            if let Ok(chunks) = self.chunks.lock() {
                if let Some(Err(e)) = chunks.as_ref().map(BaseChunks::synchronize) {
                    tracing::error!(error = %e, "synchronizing the chunk copies after a failed proof");
                }
            }
        }
        let mut c = computed.map_err(|e| backend_error("proving on the GPU", e))?;
        (c.report.prepared_from, c.report.prepared_to) = (Some(prepared.0), Some(prepared.1));
        let (a, b_g1, b_g2) = (c.a + x.a_inputs, c.b_g1 + x.b_inputs_g1, c.b_g2 + x.b_inputs_g2);
        drop(x);
        let proof = t.time(Stage::Assembly, || assemble(p, rs, c.h, c.l, a, b_g1, b_g2));
        Ok((proof, c.report))
    }

    /// One proof. A circuit with a witness charge has its witness freed as soon as the
    /// device has it (before waiting for the device when another proof holds it).
    fn prove_one(
        &self,
        p: &ParameterSet,
        r: &LoadedPoints,
        c: &mut SynthesizedCircuit,
        rs: &ProofRandomness,
        t: &mut StageTimings,
    ) -> Result<(Proof, DeviceReport), ProveError> {
        c.mark_consumed();
        let t0 = Instant::now();
        let x = self.prepare(p, r, c)?;
        if !c.frees_witness_early() {
            let prepared = (t0, Instant::now());
            t.add(Stage::Prepare, prepared.1 - t0);
            return self.finish(p, r, x, None, rs, prepared, t);
        }
        match self.device.try_lock() {
            Ok(held) => {
                // The device is free: no reason to wait for the uploads first.
                let prepared = (t0, Instant::now());
                t.add(Stage::Prepare, prepared.1 - t0);
                let out = self.finish(p, r, x, Some(held), rs, prepared, t);
                c.release_witness();
                out
            }
            Err(TryLockError::WouldBlock) => {
                let x = x.detach().map_err(|e| backend_error("uploading a, b, c", e))?;
                c.release_witness();
                let prepared = (t0, Instant::now());
                t.add(Stage::Prepare, prepared.1 - t0);
                self.finish(p, r, x, None, rs, prepared, t)
            }
            Err(TryLockError::Poisoned(_)) => Err(ProveError::Backend("device lock poisoned".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C2: usize = 1 << 27;

    #[test]
    fn working_memory_counts_the_sort_windows_of_the_msm_size() {
        // a, b, c slots and 2 GiB, plus 8 bytes per window and scalar: 13 windows of
        // 20 bits from 2^24 scalars, 16 of 16 bits below.
        assert_eq!(working_bytes(C2, 0), 6 * 32 * C2 + (2 << 30));
        assert_eq!(working_bytes(C2, C2) - working_bytes(C2, 0), 8 * 13 * C2);
        assert_eq!(working_bytes(C2, 1 << 22) - working_bytes(C2, 0), 8 * 16 << 22);
    }

    #[test]
    fn streamed_chunks_shrink_to_fit_and_are_refused_below_the_least() {
        let gb = |x: f64| (x * 1e9) as usize;
        let fits = |free: usize, c: usize| c % 192 == 0 && c >= MIN_CHUNK_BYTES && 2 * c + working_bytes(C2, c / 96) <= free;
        // Room to spare: the default.
        assert_eq!(streamed_chunk_bytes(gb(141.0), C2, None), Some(DEFAULT_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(gb(8.0), 1 << 10, None), Some(DEFAULT_CHUNK_BYTES));
        // A 32 GB card beside a C2 partition's 27.9 GB of a, b, c and slack: smaller chunks.
        let c = streamed_chunk_bytes(gb(31.5), C2, None).expect("a C2 partition fits in 31.5 GB with small chunks");
        assert!(c < DEFAULT_CHUNK_BYTES && fits(gb(31.5), c), "{c}");
        // More memory never gives smaller chunks.
        let mut last = 0;
        for free in (28..40).map(|g| gb(g as f64)) {
            if let Some(c) = streamed_chunk_bytes(free, C2, None) {
                assert!(c >= last && fits(free, c), "{free}: {c}");
                last = c;
            }
        }
        // Just room for the least chunks (whose MSMs take 20 windows): those.
        let least = 2 * MIN_CHUNK_BYTES + working_bytes(C2, MIN_CHUNK_BYTES / 96);
        assert_eq!(streamed_chunk_bytes(least, C2, None), Some(MIN_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(least - 1, C2, None), None);
        // A 24 GB card cannot hold a C2 partition's a, b, c slots and scratch at all.
        assert_eq!(streamed_chunk_bytes(gb(23.0), C2, None), None);
        // Buffers already made keep their size, if the partition still fits beside them.
        assert_eq!(streamed_chunk_bytes(gb(141.0), C2, Some(MIN_CHUNK_BYTES)), Some(MIN_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(working_bytes(C2, DEFAULT_CHUNK_BYTES / 96), C2, Some(DEFAULT_CHUNK_BYTES)), Some(DEFAULT_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(working_bytes(C2, DEFAULT_CHUNK_BYTES / 96) - 1, C2, Some(DEFAULT_CHUNK_BYTES)), None);
    }
}
