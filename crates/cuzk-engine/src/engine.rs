//! The engine: jobs → partitions → synthesis pool → bounded queue → prover workers
//! (N per backend; the backend serializes its own compute region, so one worker's
//! preparation overlaps another's kernels) → verification →
//! assembly in partition order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cuzk_groth16::verifier::verify_proof;
use cuzk_groth16::{DeviceReport, ProofRandomness, ProveOutput, ProvingBackend, Scalar, Stage, SynthesizedCircuit};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::budget::{BudgetGuard, MemoryBudget};
use crate::error::EngineError;
use crate::job::{ms, JobId, JobOutcome, JobRequest, JobStatus, JobTimings, Priority};
use crate::kind::{FinalCheck, KindHandler, PartitionWork, ProofKind};
use crate::params::{LoadedParams, ParamCache, ParamStatus};
use crate::pool::{vec_buffers, BufferMaker, BufferPool};
use crate::scheduler::{BoundedQueue, PartitionQueue, PartitionTask};
use crate::timeline::{EventKind, Timeline, TimelineEvent};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Partitions synthesized at once (each synthesis is itself multi-threaded).
    pub synthesis_threads: usize,
    /// Synthesized partitions allowed to wait for a prover.
    pub synthesis_lookahead: usize,
    /// Prover workers per backend: one prepares while another holds the device.
    pub workers_per_backend: usize,
    /// Host memory for synthesized partitions, in bytes.
    pub memory_budget_bytes: u64,
    /// Idle parameter sets are evicted after this long when memory is short.
    pub eviction_min_idle: Duration,
    /// How long a finished job stays answerable (AwaitProof, idempotent resubmits).
    pub job_retention: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            synthesis_threads: 1,
            synthesis_lookahead: 1,
            workers_per_backend: 2,
            memory_budget_bytes: MemoryBudget::auto_total(5 << 30).unwrap_or(16 << 30),
            eviction_min_idle: Duration::from_secs(300),
            job_retention: Duration::from_secs(3600),
        }
    }
}

pub(crate) struct Job {
    pub id: JobId,
    pub seq: u64,
    pub request_id: String,
    pub kind: ProofKind,
    pub priority: Priority,
    pub circuit_id: String,
    pub partitions: Vec<Arc<dyn PartitionWork>>,
    pub eval_len: usize,
    pub partition_bytes: u64,
    final_check: Option<Arc<FinalCheck>>,
    /// Why the job is timing-only (its proofs are neither checked nor returned).
    timing_note: Option<String>,
    submitted: Instant,
    state: Mutex<JobState>,
    changed: Condvar,
    timeline: Arc<Timeline>,
    stats: Arc<Mutex<Stats>>,
}

/// Where one partition of a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionState {
    Queued,
    Synthesizing,
    WaitingForProver,
    Proving,
    Verified,
    /// Proved in a timing-only job: not verified, and never returned.
    ProvedForTiming,
}

/// A job and the state of each of its partitions (for the status endpoint).
#[derive(Clone, Debug)]
pub struct JobSummary {
    pub job_id: JobId,
    pub kind: ProofKind,
    pub priority: Priority,
    pub status: JobStatus,
    pub partitions: Vec<PartitionState>,
}

struct JobState {
    status: JobStatus,
    parts: Vec<PartitionState>,
    proofs: Vec<Option<Vec<u8>>>,
    /// Partitions whose first attempt has started.
    started: usize,
    /// Partitions being synthesized or proved now.
    in_flight: usize,
    done: usize,
    error: String,
    timings: JobTimings,
    first_start: Option<Instant>,
    finished_at: Option<Instant>,
    proof: Vec<u8>,
}

impl Job {
    fn state(&self) -> MutexGuard<'_, JobState> {
        lock(&self.state)
    }

    pub fn is_finished(&self) -> bool {
        self.state().status.is_finished()
    }

    fn set_part(&self, index: usize, p: PartitionState) {
        if let Some(x) = self.state().parts.get_mut(index) {
            *x = p;
        }
    }

    /// Marks a partition as started; false when the job has finished meanwhile.
    fn begin_partition(&self, index: usize, attempt: u8, srs_load: Duration) -> bool {
        let mut s = self.state();
        if s.status.is_finished() {
            return false;
        }
        if let Some(x) = s.parts.get_mut(index) {
            *x = PartitionState::Synthesizing;
        }
        s.status = JobStatus::Running;
        s.first_start.get_or_insert_with(Instant::now);
        s.timings.srs_load_ms += ms(srs_load);
        if attempt == 0 {
            s.started += 1;
        }
        s.in_flight += 1;
        true
    }

    fn end_partition(&self) {
        let mut s = self.state();
        s.in_flight = s.in_flight.saturating_sub(1);
    }

    fn add_synthesis(&self, d: Duration) {
        self.state().timings.synthesis_ms += ms(d);
    }

    fn add_gpu(&self, d: Duration) {
        self.state().timings.gpu_compute_ms += ms(d);
    }

    /// Records the final event before waking waiters, so whoever sees the job
    /// finished also finds it in the timeline.
    fn finish(&self, s: &mut JobState, status: JobStatus, error: String) {
        let kind = match status {
            JobStatus::Completed => EventKind::Completed,
            JobStatus::Cancelled => EventKind::Cancelled,
            _ => EventKind::Failed,
        };
        self.timeline.record(&self.id.0, None, kind, "");
        s.status = status;
        s.error = error;
        let now = Instant::now();
        s.finished_at = Some(now);
        s.timings.total_ms = ms(now - self.submitted);
        s.timings.queue_wait_ms = ms(s.first_start.unwrap_or(now) - self.submitted);
        // Counted before waiters wake, like the timeline event.
        {
            let mut st = lock(&self.stats);
            match status {
                JobStatus::Completed => {
                    *st.completed.entry(self.kind).or_default() += 1;
                    st.queue_wait.entry(self.kind).or_default().observe(Duration::from_millis(s.timings.queue_wait_ms));
                    st.total.entry(self.kind).or_default().observe(Duration::from_millis(s.timings.total_ms));
                }
                JobStatus::Cancelled => *st.cancelled.entry(self.kind).or_default() += 1,
                _ => *st.failed.entry(self.kind).or_default() += 1,
            }
        }
        self.changed.notify_all();
    }

    /// Records a partition's proof (verified, or proved for timing as `state` says);
    /// returns the assembled proof when this was the last one missing (the job is
    /// completed by [`Job::complete`]).
    fn partition_done(&self, index: usize, proof: Vec<u8>, state: PartitionState) -> Option<Vec<u8>> {
        let mut s = self.state();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.status.is_finished() || s.proofs[index].is_some() {
            return None;
        }
        s.proofs[index] = Some(proof);
        s.parts[index] = state;
        s.done += 1;
        if s.done < s.proofs.len() {
            return None;
        }
        Some(s.proofs.iter().flat_map(|p| p.iter().flatten().copied()).collect())
    }

    /// Completes the job with its assembled proof unless it has finished meanwhile
    /// (cancelled); true if this call completed it. A timing-only job keeps no proof
    /// and says why instead.
    fn complete(&self, proof: Vec<u8>) -> bool {
        let mut s = self.state();
        if s.status.is_finished() {
            return false;
        }
        let note = match &self.timing_note {
            Some(why) => why.clone(),
            None => {
                s.proof = proof;
                String::new()
            }
        };
        self.finish(&mut s, JobStatus::Completed, note);
        true
    }

    /// Fails the job unless it has finished already; true if this call failed it.
    fn fail(&self, error: String) -> bool {
        let mut s = self.state();
        if s.status.is_finished() {
            return false;
        }
        self.finish(&mut s, JobStatus::Failed, error);
        true
    }

    /// Cancels the job unless it has finished; returns (cancelled now, was running).
    fn cancel(&self, why: &str) -> (bool, bool) {
        let mut s = self.state();
        if s.status.is_finished() {
            return (false, false);
        }
        let was_running = s.in_flight > 0;
        s.proofs.iter_mut().for_each(|p| *p = None);
        self.finish(&mut s, JobStatus::Cancelled, why.to_string());
        (true, was_running)
    }

    fn outcome(&self, s: &JobState) -> JobOutcome {
        let mut timings = s.timings;
        if !s.status.is_finished() {
            timings.total_ms = ms(self.submitted.elapsed());
            timings.queue_wait_ms = ms(s.first_start.unwrap_or_else(Instant::now) - self.submitted);
        }
        JobOutcome { job_id: self.id.clone(), status: s.status, proof: s.proof.clone(), error: s.error.clone(), timings }
    }

    fn wait(&self, timeout: Option<Duration>) -> JobOutcome {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.state();
        while !s.status.is_finished() {
            match deadline {
                None => s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    s = self.changed.wait_timeout(s, d - now).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
        self.outcome(&s)
    }
}

/// A synthesized partition on its way to a prover; its memory stays charged until
/// the proof is done.
struct ReadyPartition {
    task: PartitionTask,
    circuit: SynthesizedCircuit,
    /// The public inputs the proof is checked against (without the leading one).
    inputs: Vec<Scalar>,
    params: Arc<LoadedParams>,
    budget: BudgetGuard,
}

struct BackendSlot {
    backend: Arc<dyn ProvingBackend>,
    current: Mutex<Option<(JobId, ProofKind)>>,
}

/// Upper bounds (seconds) of the latency histogram buckets: 10 ms to 30 min.
const BUCKETS: [f64; 14] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0];

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let v = d.as_secs_f64();
        for (c, b) in self.counts.iter_mut().zip(BUCKETS) {
            if v <= b {
                *c += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

#[derive(Default)]
struct Stats {
    completed: HashMap<ProofKind, u64>,
    failed: HashMap<ProofKind, u64>,
    cancelled: HashMap<ProofKind, u64>,
    /// Stage latencies per kind.
    synthesis: HashMap<ProofKind, Histogram>,
    prove: HashMap<ProofKind, Histogram>,
    queue_wait: HashMap<ProofKind, Histogram>,
    total: HashMap<ProofKind, Histogram>,
    verify_failures: u64,
}

#[derive(Default)]
struct JobTable {
    by_id: HashMap<JobId, Arc<Job>>,
    by_request: HashMap<String, JobId>,
}

struct Inner {
    config: EngineConfig,
    handlers: HashMap<ProofKind, Arc<dyn KindHandler>>,
    params: ParamCache,
    budget: Arc<MemoryBudget>,
    buffers: Arc<BufferPool>,
    /// Held while a synthesis thread gathers a partition's memory.
    admit: Mutex<()>,
    queue: PartitionQueue,
    ready: BoundedQueue<ReadyPartition>,
    jobs: Mutex<JobTable>,
    backends: Vec<Arc<BackendSlot>>,
    stats: Arc<Mutex<Stats>>,
    timeline: Arc<Timeline>,
    started: Instant,
    accepting: AtomicBool,
    next_seq: AtomicU64,
    tag: u32,
}

/// What `submit` did.
#[derive(Clone, Debug)]
pub struct Submitted {
    pub job_id: JobId,
    /// Partitions queued ahead of this job's when it was queued.
    pub queue_position: u32,
    /// True when the request id matched a live job, which is returned instead.
    pub existing: bool,
}

#[derive(Clone, Debug)]
pub struct BackendStatus {
    pub name: String,
    pub current_job: Option<(JobId, ProofKind)>,
}

#[derive(Clone, Debug)]
pub struct QueueStatus {
    pub kind: ProofKind,
    pub pending: u32,
    pub in_progress: u32,
}

#[derive(Clone, Debug)]
pub struct EngineStatus {
    pub backends: Vec<BackendStatus>,
    pub params: Vec<ParamStatus>,
    pub queues: Vec<QueueStatus>,
    pub completed: u64,
    pub failed: u64,
    pub uptime: Duration,
    pub memory_budget_bytes: u64,
    pub memory_used_bytes: u64,
    /// The most host memory ever charged at once.
    pub memory_peak_bytes: u64,
}

/// Timeline events kept (the oldest are dropped first): about 20 MB.
const TIMELINE_EVENTS: usize = 200_000;

/// The proving engine. Cheap to share (`Arc` inside); threads stop on `shutdown`.
pub struct Engine {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// The job a resubmission of `request_id` gets: the same one while it is queued,
/// running or completed (its proof can be awaited again). A failed or cancelled job's
/// request id is released, so resubmitting it is a retry with a new job.
fn reusable(table: &mut JobTable, request_id: &str) -> Option<JobId> {
    if request_id.is_empty() {
        return None;
    }
    let id = table.by_request.get(request_id)?.clone();
    let retry = table.by_id.get(&id).is_some_and(|j| matches!(j.state().status, JobStatus::Failed | JobStatus::Cancelled));
    if retry {
        table.by_request.remove(request_id);
        return None;
    }
    Some(id)
}

impl Engine {
    /// Starts the synthesis and prover threads. Each backend gets
    /// `workers_per_backend` workers (the backend holds its device only for a proof's
    /// compute region). a, b, c are plain vectors
    /// from a reused pool.
    pub fn start(config: EngineConfig, backends: Vec<Arc<dyn ProvingBackend>>, handlers: Vec<Arc<dyn KindHandler>>) -> Result<Engine, EngineError> {
        Self::start_with_buffers(config, backends, handlers, vec_buffers())
    }

    /// As [`Engine::start`], with a, b, c made by `make_buffer` (e.g. pinned memory
    /// for a GPU backend); buffers are pooled and reused either way.
    pub fn start_with_buffers(
        config: EngineConfig,
        backends: Vec<Arc<dyn ProvingBackend>>,
        handlers: Vec<Arc<dyn KindHandler>>,
        make_buffer: Box<BufferMaker>,
    ) -> Result<Engine, EngineError> {
        if backends.is_empty() {
            return Err(EngineError::InvalidArgument("the engine needs at least one proving backend".into()));
        }
        let budget = MemoryBudget::new(config.memory_budget_bytes);
        // Enough idle buffers for every partition that can be in flight at once.
        let in_flight = config.synthesis_threads.max(1) + config.synthesis_lookahead.max(1) + backends.len() * config.workers_per_backend.max(1);
        let buffers = BufferPool::new(make_buffer, budget.clone(), 3 * in_flight);
        let relieve = {
            let b = buffers.clone();
            Box::new(move || b.release_idle()) as Box<dyn Fn() + Send + Sync>
        };
        let inner = Arc::new(Inner {
            buffers,
            admit: Mutex::new(()),
            handlers: handlers.iter().map(|h| (h.kind(), h.clone())).collect(),
            // GPU backends read a set's points from its file onto their devices: the host
            // then keeps only the header (a C2 set: 47 GB less host memory, no decoding).
            params: ParamCache::new(handlers, backends.clone(), budget.clone(), config.eviction_min_idle, relieve),
            budget,
            queue: PartitionQueue::new(),
            ready: BoundedQueue::new(config.synthesis_lookahead),
            jobs: Mutex::new(JobTable::default()),
            backends: backends.into_iter().map(|b| Arc::new(BackendSlot { backend: b, current: Mutex::new(None) })).collect(),
            stats: Arc::new(Mutex::new(Stats::default())),
            timeline: Arc::new(Timeline::new(TIMELINE_EVENTS)),
            started: Instant::now(),
            accepting: AtomicBool::new(true),
            next_seq: AtomicU64::new(1),
            tag: rand::random(),
            config,
        });
        let mut threads = Vec::new();
        for i in 0..inner.config.synthesis_threads.max(1) {
            let inner = inner.clone();
            let t = std::thread::Builder::new()
                .name(format!("cuzk-synth-{i}"))
                .spawn(move || synthesis_loop(&inner, &format!("synth-{i}")))
                .map_err(|e| EngineError::Internal(format!("starting a synthesis thread: {e}")))?;
            threads.push(t);
        }
        for (b, slot) in inner.backends.iter().enumerate() {
            for w in 0..inner.config.workers_per_backend.max(1) {
                let (inner, slot) = (inner.clone(), slot.clone());
                let t = std::thread::Builder::new()
                    .name(format!("cuzk-prove-{b}.{w}"))
                    .spawn(move || prover_loop(&inner, &slot, b, &format!("prove-{b}.{w}")))
                    .map_err(|e| EngineError::Internal(format!("starting a prover thread: {e}")))?;
                threads.push(t);
            }
        }
        tracing::info!(
            backends = inner.backends.len(),
            workers_per_backend = inner.config.workers_per_backend,
            synthesis_threads = inner.config.synthesis_threads,
            memory_budget_bytes = inner.config.memory_budget_bytes,
            "engine started"
        );
        Ok(Engine { inner, threads: Mutex::new(threads) })
    }

    pub fn submit(&self, req: JobRequest) -> Result<Submitted, EngineError> {
        let inner = &self.inner;
        if !inner.accepting.load(Ordering::SeqCst) {
            return Err(EngineError::ShuttingDown);
        }
        let handler = inner
            .handlers
            .get(&req.kind)
            .ok_or_else(|| EngineError::InvalidArgument(format!("proof kind {} is not supported by this daemon", req.kind)))?
            .clone();
        if let Some(s) = self.existing(&req.request_id) {
            return Ok(s);
        }
        let plan = handler.plan(&req)?;
        if plan.partitions.is_empty() {
            return Err(EngineError::InvalidArgument("the request has no partitions to prove".into()));
        }
        let need = plan.partition_bytes + 3 * 32 * plan.eval_len as u64;
        if need > inner.budget.total() {
            return Err(EngineError::ResourceExhausted(format!(
                "one partition needs {need} bytes of host memory; the budget is {} bytes",
                inner.budget.total()
            )));
        }
        let mut table = lock(&inner.jobs);
        self.prune(&mut table);
        if let Some(id) = reusable(&mut table, &req.request_id) {
            // Submitted concurrently under the same request id: keep the first.
            return Ok(Submitted { job_id: id, queue_position: 0, existing: true });
        }
        let seq = inner.next_seq.fetch_add(1, Ordering::SeqCst);
        let id = JobId(format!("job-{:08x}-{seq}", inner.tag));
        let n = plan.partitions.len();
        let job = Arc::new(Job {
            id: id.clone(),
            seq,
            request_id: req.request_id.clone(),
            kind: req.kind,
            priority: req.priority,
            circuit_id: plan.circuit_id,
            partitions: plan.partitions,
            eval_len: plan.eval_len,
            partition_bytes: plan.partition_bytes,
            final_check: plan.final_check,
            timing_note: plan.timing_note,
            submitted: Instant::now(),
            state: Mutex::new(JobState {
                status: JobStatus::Queued,
                parts: vec![PartitionState::Queued; n],
                proofs: vec![None; n],
                started: 0,
                in_flight: 0,
                done: 0,
                error: String::new(),
                timings: JobTimings::default(),
                first_start: None,
                finished_at: None,
                proof: Vec::new(),
            }),
            changed: Condvar::new(),
            timeline: inner.timeline.clone(),
            stats: inner.stats.clone(),
        });
        table.by_id.insert(id.clone(), job.clone());
        if !req.request_id.is_empty() {
            table.by_request.insert(req.request_id.clone(), id.clone());
        }
        drop(table);
        inner.timeline.record(&id.0, None, EventKind::Queued, "");
        let queue_position = inner.queue.len() as u32;
        for index in 0..n {
            inner.queue.push(PartitionTask { job: job.clone(), index, attempt: 0, avoid_backend: None });
        }
        tracing::info!(job = %id, kind = %req.kind, priority = ?req.priority, partitions = n, "job queued");
        Ok(Submitted { job_id: id, queue_position, existing: false })
    }

    fn existing(&self, request_id: &str) -> Option<Submitted> {
        if request_id.is_empty() {
            return None;
        }
        let id = reusable(&mut lock(&self.inner.jobs), request_id)?;
        Some(Submitted { job_id: id, queue_position: 0, existing: true })
    }

    /// Forgets finished jobs older than the retention time.
    fn prune(&self, table: &mut JobTable) {
        let keep = self.inner.config.job_retention;
        let old: Vec<JobId> =
            table.by_id.values().filter(|j| j.state().finished_at.is_some_and(|t| t.elapsed() > keep)).map(|j| j.id.clone()).collect();
        for id in old {
            if let Some(j) = table.by_id.remove(&id) {
                table.by_request.remove(&j.request_id);
            }
        }
    }

    fn job(&self, id: &JobId) -> Result<Arc<Job>, EngineError> {
        lock(&self.inner.jobs).by_id.get(id).cloned().ok_or_else(|| EngineError::NotFound(format!("no job {id}")))
    }

    /// Waits for a job to finish, at most `timeout` (None: forever). A job still
    /// queued or running when the time is up comes back with that status.
    pub fn wait(&self, id: &JobId, timeout: Option<Duration>) -> Result<JobOutcome, EngineError> {
        Ok(self.job(id)?.wait(timeout))
    }

    /// Cancels a job: its queued partitions are dropped, running ones are discarded
    /// when they finish (their memory is released then). Returns whether any of its
    /// partitions was running.
    pub fn cancel(&self, id: &JobId) -> Result<bool, EngineError> {
        let job = self.job(id)?;
        let (now, was_running) = job.cancel("cancelled by the client");
        if now {
            self.inner.queue.remove_job(job.seq);
            tracing::info!(job = %id, was_running, "job cancelled");
        }
        Ok(was_running)
    }

    /// Loads a parameter set now, and onto every backend's device; (already loaded, load
    /// time).
    pub fn preload(&self, circuit_id: &str) -> Result<(bool, Duration), EngineError> {
        if !self.inner.params.knows(circuit_id) {
            return Err(EngineError::NotFound(format!("unknown circuit id {circuit_id:?}")));
        }
        let already = self.inner.params.is_loaded(circuit_id);
        let (p, mut took) = self.inner.params.get(circuit_id)?;
        // Onto every device too, so the first partition does not pay for it (a backend
        // that has the set already returns at once).
        for slot in &self.inner.backends {
            let t = Instant::now();
            slot.backend
                .load_params(&p.set, &cuzk_groth16::NoProgress)
                .map_err(|e| EngineError::Internal(format!("loading {circuit_id} onto {}: {e}", slot.backend.name())))?;
            took += t.elapsed();
        }
        Ok((already, took))
    }

    /// Drops a parameter set from the cache; (was loaded, bytes freed once its last
    /// user finishes).
    pub fn evict(&self, circuit_id: &str) -> Result<(bool, u64), EngineError> {
        if !self.inner.params.knows(circuit_id) {
            return Err(EngineError::NotFound(format!("unknown circuit id {circuit_id:?}")));
        }
        Ok(match self.inner.params.evict(circuit_id) {
            Some(bytes) => (true, bytes),
            None => (false, 0),
        })
    }

    pub fn status(&self) -> EngineStatus {
        let inner = &self.inner;
        let mut queues: HashMap<ProofKind, (u32, u32)> = HashMap::new();
        for j in lock(&inner.jobs).by_id.values() {
            let s = j.state();
            if s.status.is_finished() {
                continue;
            }
            let q = queues.entry(j.kind).or_default();
            q.0 += (j.partitions.len() - s.started) as u32;
            q.1 += s.in_flight as u32;
        }
        let stats = lock(&inner.stats);
        EngineStatus {
            backends: inner.backends.iter().map(|b| BackendStatus { name: b.backend.name(), current_job: lock(&b.current).clone() }).collect(),
            params: inner.params.status(),
            queues: ProofKind::ALL
                .iter()
                .filter(|k| inner.handlers.contains_key(k))
                .map(|&k| {
                    let (pending, in_progress) = queues.get(&k).copied().unwrap_or_default();
                    QueueStatus { kind: k, pending, in_progress }
                })
                .collect(),
            completed: stats.completed.values().sum(),
            failed: stats.failed.values().sum(),
            uptime: inner.started.elapsed(),
            memory_budget_bytes: inner.budget.total(),
            memory_used_bytes: inner.budget.used(),
            memory_peak_bytes: inner.budget.peak(),
        }
    }

    /// The recorded stage events, oldest first (see [`crate::timeline`]).
    pub fn timeline_events(&self) -> Vec<TimelineEvent> {
        self.inner.timeline.events()
    }

    /// Unfinished jobs, oldest first, with each partition's state.
    pub fn job_summaries(&self) -> Vec<JobSummary> {
        let mut jobs: Vec<Arc<Job>> = lock(&self.inner.jobs).by_id.values().filter(|j| !j.is_finished()).cloned().collect();
        jobs.sort_by_key(|j| j.seq);
        jobs.iter()
            .map(|j| {
                let s = j.state();
                JobSummary { job_id: j.id.clone(), kind: j.kind, priority: j.priority, status: s.status, partitions: s.parts.clone() }
            })
            .collect()
    }

    /// Prometheus text exposition of the engine's counters and gauges.
    pub fn metrics_text(&self) -> String {
        use std::fmt::Write;
        let st = self.status();
        let stats = lock(&self.inner.stats);
        let mut o = String::new();
        let kinds: Vec<ProofKind> = st.queues.iter().map(|q| q.kind).collect();
        let counter = |o: &mut String, name: &str, help: &str, map: &HashMap<ProofKind, u64>| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
            for k in &kinds {
                let _ = writeln!(o, "{name}{{kind=\"{k}\"}} {}", map.get(k).copied().unwrap_or(0));
            }
        };
        counter(&mut o, "cuzk_proofs_completed_total", "Jobs completed with a verified proof.", &stats.completed);
        counter(&mut o, "cuzk_proofs_failed_total", "Jobs that failed.", &stats.failed);
        counter(&mut o, "cuzk_proofs_cancelled_total", "Jobs cancelled.", &stats.cancelled);
        for (name, help, pick) in [
            ("cuzk_queue_pending_partitions", "Partitions not yet started.", 0),
            ("cuzk_queue_in_progress_partitions", "Partitions being synthesized or proved.", 1),
        ] {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
            for q in &st.queues {
                let _ = writeln!(o, "{name}{{kind=\"{}\"}} {}", q.kind, if pick == 0 { q.pending } else { q.in_progress });
            }
        }
        for (name, help, map) in [
            ("cuzk_partition_synthesis_seconds", "Synthesis time per partition.", &stats.synthesis),
            ("cuzk_partition_prove_seconds", "Backend time per partition (device lock held).", &stats.prove),
            ("cuzk_job_queue_wait_seconds", "Submission to the first partition's synthesis.", &stats.queue_wait),
            ("cuzk_job_total_seconds", "Submission to completion of jobs that completed.", &stats.total),
        ] {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} histogram");
            for k in &kinds {
                let h = map.get(k).cloned().unwrap_or_default();
                for (b, c) in BUCKETS.iter().zip(h.counts) {
                    let _ = writeln!(o, "{name}_bucket{{kind=\"{k}\",le=\"{b}\"}} {c}");
                }
                let _ = writeln!(o, "{name}_bucket{{kind=\"{k}\",le=\"+Inf\"}} {}", h.count);
                let _ = writeln!(o, "{name}_sum{{kind=\"{k}\"}} {}\n{name}_count{{kind=\"{k}\"}} {}", h.sum, h.count);
            }
        }
        let (busy, wall) = crate::timeline::gpu_busy(&self.inner.timeline.events());
        let _ = writeln!(
            o,
            "# HELP cuzk_gpu_busy_ratio Merged prover busy time over wall time, over the recorded timeline.\n# TYPE cuzk_gpu_busy_ratio gauge\ncuzk_gpu_busy_ratio {}",
            if wall > 0 { busy as f64 / wall as f64 } else { 0.0 }
        );
        let _ = writeln!(
            o,
            "# HELP cuzk_verify_failures_total Partition proofs that failed self-verification.\n# TYPE cuzk_verify_failures_total counter\ncuzk_verify_failures_total {}",
            stats.verify_failures
        );
        let _ = writeln!(
            o,
            "# HELP cuzk_memory_budget_bytes Host memory budget.\n# TYPE cuzk_memory_budget_bytes gauge\ncuzk_memory_budget_bytes {}\n# HELP cuzk_memory_used_bytes Host memory charged (partitions and parameters).\n# TYPE cuzk_memory_used_bytes gauge\ncuzk_memory_used_bytes {}",
            st.memory_budget_bytes, st.memory_used_bytes
        );
        let _ = writeln!(
            o,
            "# HELP cuzk_uptime_seconds Seconds since the engine started.\n# TYPE cuzk_uptime_seconds gauge\ncuzk_uptime_seconds {}",
            st.uptime.as_secs()
        );
        o
    }

    /// Stops taking work, lets running jobs finish for up to `grace`, cancels the
    /// rest (their clients get CANCELLED), and joins the threads.
    pub fn shutdown(&self, grace: Duration) {
        let inner = &self.inner;
        inner.accepting.store(false, Ordering::SeqCst);
        let deadline = Instant::now() + grace;
        loop {
            let live: Vec<Arc<Job>> = lock(&inner.jobs).by_id.values().filter(|j| !j.is_finished()).cloned().collect();
            if live.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                for j in live {
                    if j.cancel("the daemon is shutting down").0 {
                        tracing::warn!(job = %j.id, "cancelled at shutdown");
                    }
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        inner.queue.close();
        inner.ready.close();
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
        tracing::info!("engine stopped");
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.inner.accepting.store(false, Ordering::SeqCst);
        self.inner.queue.close();
        self.inner.ready.close();
    }
}

impl Inner {
    /// `bytes` of the budget; when they do not fit, idle buffers and idle parameter
    /// sets are freed (once a second while waiting). None if `abandoned()` says so.
    fn charge(&self, bytes: u64, abandoned: &dyn Fn() -> bool) -> Result<Option<BudgetGuard>, EngineError> {
        if let Some(g) = self.budget.acquire(bytes, || true)? {
            return Ok(Some(g));
        }
        loop {
            self.buffers.release_idle();
            self.params.evict_idle(self.config.eviction_min_idle);
            let retry_at = Instant::now() + Duration::from_secs(1);
            if let Some(g) = self.budget.acquire(bytes, || abandoned() || Instant::now() >= retry_at)? {
                return Ok(Some(g));
            }
            if abandoned() {
                return Ok(None);
            }
        }
    }

    fn fail_job(&self, job: &Job, error: String) {
        if job.fail(error.clone()) {
            self.queue.remove_job(job.seq);
            tracing::error!(job = %job.id, error = error.as_str(), "job failed");
        }
    }
}

/// Runs `f`, turning a panic into an error, so a bug in a circuit or a backend fails
/// that job instead of killing a worker thread (and leaving the daemon without it).
fn catch_panic<T, E: std::fmt::Display>(what: &str, f: impl FnOnce() -> Result<T, E>) -> Result<T, EngineError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(|e| EngineError::Internal(e.to_string())),
        Err(p) => {
            let msg = cuzk_groth16::panic_message(p.as_ref());
            tracing::error!(what, panic = msg.as_str(), "panic caught");
            Err(EngineError::Internal(format!("internal error: {what} panicked: {msg}")))
        }
    }
}

fn synthesis_loop(inner: &Inner, lane: &str) {
    while let Some(task) = inner.queue.pop() {
        let job = task.job.clone();
        if job.is_finished() {
            continue;
        }
        inner.timeline.record(&job.id.0, Some(task.index), EventKind::Dequeued, lane);
        // Parameters first: loading them may wait for budget, which partitions
        // holding budget while waiting for parameters would never free.
        let (params, load) = match inner.params.get(&job.circuit_id) {
            Ok(p) => p,
            Err(e) => {
                inner.fail_job(&job, format!("loading parameters {}: {e}", job.circuit_id));
                continue;
            }
        };
        // One synthesis thread at a time gathers a partition's memory (its charge,
        // then three buffers): two gathering at once could each hold part of what the
        // budget has room for and wait for the rest forever.
        let admit = lock(&inner.admit);
        let guard = match inner.charge(job.partition_bytes, &|| job.is_finished()) {
            Ok(Some(g)) => g,
            Ok(None) => continue,
            Err(e) => {
                inner.fail_job(&job, e.to_string());
                continue;
            }
        };
        let abc = match inner.buffers.take_abc(job.eval_len, &|| job.is_finished()) {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(e) => {
                inner.fail_job(&job, e.to_string());
                continue;
            }
        };
        drop(admit);
        if !job.begin_partition(task.index, task.attempt, load) {
            continue;
        }
        inner.timeline.record(&job.id.0, Some(task.index), EventKind::SynthesisStart, lane);
        let t = Instant::now();
        let work = job.partitions[task.index].clone();
        let result = catch_panic("synthesis", move || work.synthesize(abc));
        let took = t.elapsed();
        inner.timeline.record(&job.id.0, Some(task.index), EventKind::SynthesisEnd, lane);
        job.add_synthesis(took);
        lock(&inner.stats).synthesis.entry(job.kind).or_default().observe(took);
        // The inputs to check the proof against, here rather than in the prover loop
        // (which feeds the device): the kind's own where it computes them.
        let result = result.and_then(|circuit| {
            let own = circuit.input.get(1..).unwrap_or_default();
            let work = job.partitions[task.index].clone();
            match catch_panic("computing public inputs", move || work.public_inputs().transpose())? {
                None => Ok((own.to_vec(), circuit)),
                Some(expected) if expected == own => Ok((expected, circuit)),
                Some(_) => Err(EngineError::Internal(
                    "the circuit's public inputs differ from those its verifier computes from the request; the vanilla proofs do not belong to these public values".into(),
                )),
            }
        });
        match result {
            Err(e) => {
                job.end_partition();
                inner.fail_job(&job, format!("partition {}: synthesis failed: {e}", task.index));
            }
            Ok((inputs, circuit)) => {
                tracing::debug!(job = %job.id, partition = task.index, ms = took.as_millis() as u64, "synthesized");
                job.set_part(task.index, PartitionState::WaitingForProver);
                if let Err(r) = inner.ready.push(ReadyPartition { task, circuit, inputs, params, budget: guard }) {
                    r.task.job.end_partition();
                    return;
                }
            }
        }
    }
}

fn prover_loop(inner: &Inner, slot: &BackendSlot, backend_index: usize, lane: &str) {
    let mut rng = ChaCha20Rng::from_entropy();
    while let Some(ready) = inner.ready.pop() {
        if ready.task.avoid_backend == Some(backend_index) && inner.backends.len() > 1 {
            // A retry of a proof this backend got wrong: leave it to another backend
            // (after a pause, so that this worker does not spin on it).
            if inner.ready.push(ready).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let ReadyPartition { task, mut circuit, inputs, params, budget } = ready;
        // The witness's memory goes back as soon as the backend has read it, so the
        // next partition's synthesis can start during this proof.
        circuit.charge_witness(budget);
        let job = task.job.clone();
        if job.is_finished() {
            job.end_partition();
            continue;
        }
        let randomness = [ProofRandomness::random(&mut rng)];
        let (result, took) = {
            *lock(&slot.current) = Some((job.id.clone(), job.kind));
            job.set_part(task.index, PartitionState::Proving);
            let t = Instant::now();
            let r = catch_panic("the backend", || {
                slot.backend.prove(&params.set, std::slice::from_mut(&mut circuit), &randomness).map_err(|e| e.to_string())
            });
            // The prover lane shows the device's compute region where the backend
            // reports it (its preparation overlaps the other worker's kernels).
            let (from, to) = match &r {
                Ok(ProveOutput { device: Some(DeviceReport { held_from: Some(a), held_to: Some(b), .. }), .. }) => (*a, *b),
                _ => (t, Instant::now()),
            };
            if let Ok(out) = &r {
                // The host preparation before the compute region, on the worker's host
                // lane: as the backend reports it, else from the call's start.
                let prepare = match out.device {
                    Some(DeviceReport { prepared_from: Some(a), prepared_to: Some(b), .. }) => Some((a, b)),
                    _ => Some(out.timings.get(Stage::Prepare)).filter(|d| !d.is_zero()).map(|d| (t, t + d)),
                };
                if let Some((a, b)) = prepare {
                    let host = lane.replacen("prove", "host", 1);
                    inner.timeline.record_at(&job.id.0, Some(task.index), EventKind::PrepareStart, &host, a);
                    inner.timeline.record_at(&job.id.0, Some(task.index), EventKind::PrepareEnd, &host, b);
                }
                tracing::debug!(job = %job.id, partition = task.index, timings = ?out.timings, device = ?out.device, "proved");
            }
            inner.timeline.record_at(&job.id.0, Some(task.index), EventKind::ProveStart, lane, from);
            inner.timeline.record_at(&job.id.0, Some(task.index), EventKind::ProveEnd, lane, to);
            *lock(&slot.current) = None;
            // The device's own time where the backend reports it (the call also
            // includes host preparation that overlaps other workers' kernels).
            let took = match &r {
                Ok(out) => out.device.map_or(t.elapsed(), |d| d.held),
                _ => t.elapsed(),
            };
            (r, took)
        };
        // The witness and a/b/c are no longer needed: release their memory before
        // verifying.
        drop(circuit);
        job.add_gpu(took);
        lock(&inner.stats).prove.entry(job.kind).or_default().observe(took);
        let proof = match result {
            Ok(out) if out.proofs.len() == 1 => out.proofs[0],
            Ok(out) => {
                job.end_partition();
                inner.fail_job(&job, format!("partition {}: the backend returned {} proofs for one circuit", task.index, out.proofs.len()));
                continue;
            }
            Err(e) => {
                job.end_partition();
                inner.fail_job(&job, format!("partition {}: proving failed on {}: {e}", task.index, slot.backend.name()));
                continue;
            }
        };
        if job.timing_note.is_some() {
            // Timing only: the proof is not checked, and it is never returned.
            if job.partition_done(task.index, proof.to_bytes().to_vec(), PartitionState::ProvedForTiming).is_some() && job.complete(Vec::new()) {
                tracing::info!(job = %job.id, kind = %job.kind, "timing-only job completed; no proof is returned");
            }
            continue;
        }
        let verified = verify_proof(&params.pvk, &proof, &inputs);
        match verified {
            Ok(true) => {
                inner.timeline.record(&job.id.0, Some(task.index), EventKind::Verified, lane);
                if let Some(assembled) = job.partition_done(task.index, proof.to_bytes().to_vec(), PartitionState::Verified) {
                    let checked = match &job.final_check {
                        None => Ok("every partition proof verified".to_string()),
                        Some(check) => check(&assembled),
                    };
                    match checked {
                        Ok(how) => {
                            if job.complete(assembled) {
                                tracing::info!(job = %job.id, kind = %job.kind, checked = how.as_str(), "job completed");
                            }
                        }
                        Err(why) => {
                            lock(&inner.stats).verify_failures += 1;
                            inner.fail_job(&job, format!("the assembled proof was refused: {why}; no proof is returned"));
                        }
                    }
                }
            }
            bad => {
                lock(&inner.stats).verify_failures += 1;
                inner.timeline.record(&job.id.0, Some(task.index), EventKind::Rejected, lane);
                let why = match bad {
                    Err(e) => format!("verification error: {e}"),
                    _ => "the proof does not verify".to_string(),
                };
                job.end_partition();
                if task.attempt == 0 {
                    tracing::warn!(job = %job.id, partition = task.index, backend = slot.backend.name(), why = why.as_str(), "partition proof rejected; proving it again");
                    job.set_part(task.index, PartitionState::Queued);
                    let avoid_backend = Some(backend_index);
                    inner.queue.push(PartitionTask { job: job.clone(), index: task.index, attempt: 1, avoid_backend });
                } else {
                    inner.fail_job(&job, format!("partition {}: {why} (twice); no proof is returned", task.index));
                }
            }
        }
    }
}
