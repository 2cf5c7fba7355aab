//! `Engine`: the public API. A request's way through the engine, in the order the
//! modules take it up:
//!
//! 1. [`Engine::submit`]: the kind plans the job ([`crate::kind`]), the job is
//!    recorded ([`crate::job`]) and its partitions queued ([`crate::scheduler`]);
//! 2. a synthesis worker ([`crate::workers`], `synthesis`) takes the next partition
//!    by priority, gets its parameter set ([`crate::params`]) and its memory
//!    ([`crate::memory`], [`crate::pool`]), synthesizes it and hands it on through the
//!    bounded queue;
//! 3. a prover worker (`prover`) proves it on its backend, verifies it, and keeps it
//!    in the job, which completes with its last partition;
//! 4. [`Engine::wait`] or [`Engine::completion`] give the job's outcome.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cuzk_groth16::ProvingBackend;

use crate::config::EngineConfig;
use crate::error::{shown, EngineError};
use crate::job::{Job, JobCompletion, JobSummary};
use crate::kind::{Handler, Handlers};
use crate::metrics::prometheus_text;
use crate::params::Eviction;
use crate::pool::Buffers;
use crate::request::{JobId, JobOutcome, JobRequest};
use crate::scheduler::{Lane, PartitionTask};
use crate::shared::Shared;
use crate::status::EngineStatus;
use crate::store::ProofStore;
use crate::timeline::{EventKind, TimelineEvent};
use crate::workers::{prover_loop, synthesis_loop};
use cuzk_groth16::sync::lock;

/// What `submit` did.
#[derive(Clone, Debug)]
pub struct Submitted {
    pub job_id: JobId,
    /// Partitions queued ahead of this job's when it was queued.
    pub queue_position: u32,
    /// True when the request id matched a live job, which is returned instead.
    pub existing: bool,
}

/// The proving engine. Cheap to share (`Arc` inside); threads stop on `shutdown`.
pub struct Engine {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Engine {
    /// Starts the synthesis and prover workers, a, b, c in plain vectors from a reused
    /// pool. Each backend gets `workers_per_backend` workers (the backend holds its
    /// device only for a proof's compute region).
    pub fn start(config: EngineConfig, backends: Vec<Arc<dyn ProvingBackend>>, handlers: Vec<Handler>) -> Result<Engine, EngineError> {
        Self::start_with_buffers(config, backends, handlers, Buffers::plain())
    }

    /// As [`Engine::start`], with a, b, c from `buffers` (pinned memory for a GPU
    /// backend); buffers are pooled and reused either way.
    pub fn start_with_buffers(
        config: EngineConfig,
        backends: Vec<Arc<dyn ProvingBackend>>,
        handlers: Vec<Handler>,
        buffers: Buffers,
    ) -> Result<Engine, EngineError> {
        if backends.is_empty() {
            return Err(EngineError::InvalidArgument("the engine needs at least one proving backend".into()));
        }
        let store = match &config.state_dir {
            Some(dir) => Some(ProofStore::open(dir).map_err(|e| EngineError::InvalidArgument(e.to_string()))?),
            None => None,
        };
        let shared = Arc::new(Shared::new(config, backends, &handlers, Handlers::new(&handlers)?, buffers, store));
        restore_completed(&shared)?;
        let engine = Engine { shared: shared.clone(), threads: Mutex::new(Vec::new()) };
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            let t = std::thread::Builder::new().name(name.clone()).spawn(f).map_err(|e| EngineError::Internal(format!("starting {name}: {e}")))?;
            lock(&engine.threads).push(t);
            Ok::<_, EngineError>(())
        };
        for i in 0..shared.config.synthesis_workers.max(1) {
            let s = shared.clone();
            spawn(format!("cuzk-synth-{i}"), Box::new(move || synthesis_loop(&s, &format!("synth-{i}"), Lane::Any)))?;
        }
        // The urgent lanes: a synthesis worker and a prover worker per backend that take
        // urgent partitions only, so that a WinningPoSt never waits for a worker busy
        // with PoRep.
        let s = shared.clone();
        spawn("cuzk-synth-urgent".into(), Box::new(move || synthesis_loop(&s, "synth-u", Lane::Urgent)))?;
        for (b, slot) in shared.backends.iter().enumerate() {
            let lanes = (0..shared.config.workers_per_backend.max(1)).map(|w| (w.to_string(), Lane::Any)).chain([("u".to_string(), Lane::Urgent)]);
            for (w, takes) in lanes {
                let (s, slot) = (shared.clone(), slot.clone());
                spawn(format!("cuzk-prove-{b}.{w}"), Box::new(move || prover_loop(&s, &slot, b, &format!("prove-{b}.{w}"), takes)))?;
            }
        }
        tracing::info!(
            backends = shared.backends.len(),
            workers_per_backend = shared.config.workers_per_backend,
            synthesis_workers = shared.config.synthesis_workers,
            memory_budget_bytes = shared.config.memory_budget_bytes,
            "engine started"
        );
        Ok(engine)
    }

    pub fn submit(&self, req: JobRequest) -> Result<Submitted, EngineError> {
        let shared = &self.shared;
        if !shared.accepting.load(Ordering::SeqCst) {
            return Err(EngineError::ShuttingDown);
        }
        if let Some(why) = shared.no_backend_in_service() {
            return Err(EngineError::FailedPrecondition(why));
        }
        let planner = shared
            .handlers
            .planner(&req.body)
            .ok_or_else(|| EngineError::InvalidArgument(format!("proof kind {} is not supported by this daemon", req.kind())))?;
        shared.config.admission.check_priority(req.kind(), req.priority)?;
        let digest = req.digest();
        shared.prune_jobs();
        {
            let mut table = lock(&shared.jobs);
            if let Some(id) = table.reusable(&req.request_id, &digest) {
                return Ok(Submitted { job_id: id, queue_position: 0, existing: true });
            }
            // The caps that need no decoding (jobs, request bytes, partitions already
            // queued), before the decode: a full queue refuses a 90 MB PoRep envelope
            // without spending ~1.8 s of cores on it. Checked again, whole, below.
            shared.config.admission.check_room(req.kind(), 1, req.body.bytes(), &table.live())?;
        }
        // An urgent request is decoded (its vanilla proofs checked: storage-proofs' PoSt
        // verifier runs on rayon) on the urgent lanes' threads: on the global pool it
        // waited behind PoRep work (a WinningPoSt's 5 ms decode took 2.7 s while a PoRep
        // set loaded at a 16 GiB cap on the H100 at e2b69a2).
        let lane = if req.priority.urgent() { Lane::Urgent } else { Lane::Any };
        let plan = shared.on_lane_threads(lane, || planner.plan())?;
        if plan.partitions.is_empty() {
            return Err(EngineError::InvalidArgument("the request has no partitions to prove".into()));
        }
        let need = crate::memory::partition_need(plan.partition_bytes, plan.eval_len, true);
        if need > shared.budget.total() {
            return Err(EngineError::ResourceExhausted(format!(
                "one partition needs {need} bytes of host memory; the budget is {} bytes",
                shared.budget.total()
            )));
        }
        let mut table = lock(&shared.jobs);
        // Checked again under the lock: a shutdown that began while this request was
        // planned has already cancelled what was live, and must not find a new job.
        if !shared.accepting.load(Ordering::SeqCst) {
            return Err(EngineError::ShuttingDown);
        }
        if let Some(id) = table.reusable(&req.request_id, &digest) {
            // The same request submitted concurrently: keep the first.
            return Ok(Submitted { job_id: id, queue_position: 0, existing: true });
        }
        // Under the table's lock, so concurrent submissions cannot overshoot the caps.
        shared.config.admission.check_room(req.kind(), plan.partitions.len(), req.body.bytes(), &table.live())?;
        let seq = shared.next_seq.fetch_add(1, Ordering::SeqCst);
        let id = table.new_id();
        let n = plan.partitions.len();
        let job = Arc::new(Job::new(id.clone(), seq, &req, digest, plan, shared.timeline.clone(), shared.stats.clone()));
        table.insert(job.clone());
        drop(table);
        shared.timeline.record(&id.0, None, EventKind::Queued, "");
        let queue_position = shared.queue.len() as u32;
        for index in 0..n {
            shared.queue.push(PartitionTask { job: job.clone(), index, attempt: 0, avoid_backend: None });
        }
        tracing::info!(job = %id, kind = %req.kind(), priority = ?req.priority, partitions = n, "job queued");
        Ok(Submitted { job_id: id, queue_position, existing: false })
    }

    fn job(&self, id: &JobId) -> Result<Arc<Job>, EngineError> {
        lock(&self.shared.jobs).get(id).ok_or_else(|| EngineError::NotFound(format!("no job {}", shown(&id.0))))
    }

    /// Blocks until a job finishes, at most `timeout` (None: forever). A job still
    /// queued or running when the time is up comes back with that status.
    pub fn wait(&self, id: &JobId, timeout: Option<Duration>) -> Result<JobOutcome, EngineError> {
        Ok(self.job(id)?.wait(timeout))
    }

    /// A job's completion as a future (for async callers: no thread waits), resolving
    /// to its outcome once it has finished.
    pub fn completion(&self, id: &JobId) -> Result<JobCompletion, EngineError> {
        Ok(JobCompletion::new(self.job(id)?))
    }

    /// Cancels a job: its queued partitions are dropped, running ones are discarded
    /// when they finish (their memory is released then). Returns whether any of its
    /// partitions was running.
    pub fn cancel(&self, id: &JobId) -> Result<bool, EngineError> {
        let job = self.job(id)?;
        let (now, was_running) = self.shared.cancel_job(&job, "cancelled by the client");
        if now {
            tracing::info!(job = %id, was_running, "job cancelled");
        }
        Ok(was_running)
    }

    /// Loads a parameter set now, and onto every backend's device; (already loaded,
    /// load time). The wire's PreloadSRS.
    pub fn preload(&self, circuit_id: &str) -> Result<(bool, Duration), EngineError> {
        let shared = &self.shared;
        if !shared.params.knows(circuit_id) {
            return Err(EngineError::NotFound(format!("unknown circuit id {}", shown(circuit_id))));
        }
        let already = shared.params.is_loaded(circuit_id);
        let mut took = Duration::ZERO;
        // A device short of the memory its plan counted on re-plans the set: it is
        // loaded (and charged) again for the new plan, once.
        let mut again = true;
        loop {
            let (set, t) = shared.parameters(circuit_id, &|| false)?.ok_or(EngineError::ShuttingDown)?;
            took += t;
            // Onto every device in service too, so the first partition does not pay for it
            // (a backend that has the set already returns at once).
            let mut short = None;
            for slot in shared.backends.iter().filter(|s| s.in_service()) {
                let t = Instant::now();
                let r = slot.backend.load_params(&set.set, &cuzk_groth16::NoProgress);
                took += t.elapsed();
                match r {
                    Ok(()) => {}
                    Err(e @ cuzk_groth16::ProveError::DeviceMemory(_)) if again => short = Some(e),
                    Err(e) => return Err(EngineError::Internal(format!("loading {circuit_id} onto {}: {e}", slot.backend.name()))),
                }
            }
            let Some(e) = short else { return Ok((already, took)) };
            tracing::warn!(circuit_id, error = %e, "loading again for the new device plan");
            let copy = set.set.id();
            drop(set);
            shared.params.forget(circuit_id, copy);
            again = false;
        }
    }

    /// Drops a parameter set from the cache; (was loaded, bytes freed). A set that
    /// partitions are using is not evicted (FailedPrecondition naming their jobs): it
    /// would free nothing until they finish, and a copy loaded meanwhile would hold
    /// the memory twice. The wire's EvictSRS.
    pub fn evict(&self, circuit_id: &str) -> Result<(bool, u64), EngineError> {
        if !self.shared.params.knows(circuit_id) {
            return Err(EngineError::NotFound(format!("unknown circuit id {}", shown(circuit_id))));
        }
        match self.shared.params.evict(circuit_id) {
            Eviction::Evicted { bytes } => Ok((true, bytes)),
            Eviction::NotLoaded => Ok((false, 0)),
            Eviction::InUse { users } => {
                // Jobs by label: the caller may be another client, who must not learn ids.
                let jobs: Vec<String> = lock(&self.shared.jobs)
                    .live()
                    .iter()
                    .filter(|j| j.circuit_id == circuit_id && j.progress().is_some_and(|(_, in_flight)| in_flight > 0))
                    .map(|j| format!("{} ({})", j.id.label(), j.kind))
                    .collect();
                let named = if jobs.is_empty() { "a preload or partitions finishing".to_string() } else { format!("jobs {}", jobs.join(", ")) };
                Err(EngineError::FailedPrecondition(format!(
                    "parameter set {circuit_id} is in use ({users} user(s): {named}); not evicted: evict it once they finish"
                )))
            }
        }
    }

    pub fn status(&self) -> EngineStatus {
        self.shared.status()
    }

    /// The recorded stage events, oldest first (see [`crate::timeline`]).
    pub fn timeline_events(&self) -> Vec<TimelineEvent> {
        self.shared.timeline.events()
    }

    /// Unfinished jobs, oldest first, with each partition's state.
    pub fn job_summaries(&self) -> Vec<JobSummary> {
        let live = lock(&self.shared.jobs).live();
        live.iter().map(|j| j.summary()).collect()
    }

    /// Prometheus text exposition of the engine's counters and gauges.
    pub fn metrics_text(&self) -> String {
        let st = self.status();
        let busy = crate::timeline::gpu_busy(&self.shared.timeline.events());
        prometheus_text(&st, &lock(&self.shared.stats), busy)
    }

    /// Stops taking work, lets running jobs finish for up to `grace`, cancels the
    /// rest (their clients get CANCELLED), and joins the threads. In the grace period
    /// a partition starts only for a job that can finish before it ends (from what
    /// its circuit's partitions took so far); [`Engine::end_grace`] ends it early.
    pub fn shutdown(&self, grace: Duration) {
        let shared = &self.shared;
        shared.accepting.store(false, Ordering::SeqCst);
        shared.grace.end_by(Instant::now() + grace);
        loop {
            // end_grace may have moved the deadline closer.
            let deadline = shared.grace.deadline().unwrap_or_else(Instant::now);
            let live = lock(&shared.jobs).live();
            let Some(oldest) = live.first() else { break };
            let now = Instant::now();
            if now >= deadline {
                for j in &live {
                    if shared.cancel_job(j, "the daemon is shutting down").0 {
                        tracing::warn!(job = %j.id, "cancelled at shutdown");
                    }
                }
                break;
            }
            // Woken by that job's end (then the next one is waited for) or the deadline.
            oldest.wait(Some(deadline - now));
        }
        shared.close();
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
        tracing::info!("engine stopped");
    }
}

/// Puts the proofs a previous daemon completed (and kept in the state directory) back
/// in the job table under their ids and request ids: AwaitProof and a resubmission
/// return them as before the restart.
fn restore_completed(shared: &Shared) -> Result<(), EngineError> {
    let Some(store) = &shared.store else {
        tracing::info!("completed proofs are kept in memory only (no state directory): a restart loses those not yet fetched");
        return Ok(());
    };
    let loaded = store.load(shared.config.job_retention).map_err(|e| EngineError::Internal(format!("reading stored proofs: {e}")))?;
    for (path, why) in &loaded.set_aside {
        tracing::warn!(file = %path.display(), why = why.as_str(), "a stored proof could not be read; set aside");
    }
    let restored = loaded.proofs.len();
    let mut table = lock(&shared.jobs);
    for p in loaded.proofs {
        table.insert(Arc::new(Job::restored(p, shared.timeline.clone(), shared.stats.clone())));
    }
    tracing::info!(dir = %store.dir().display(), restored, expired = loaded.expired, set_aside = loaded.set_aside.len(), "completed proofs from before the restart");
    Ok(())
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl Engine {
    /// Ends shutdown's grace period now (an operator's second signal): stops taking
    /// work and cancels every unfinished job, so a [`Engine::shutdown`] under way
    /// returns at once. Before a shutdown, the next one has no grace period.
    pub fn end_grace(&self) {
        let shared = &self.shared;
        shared.accepting.store(false, Ordering::SeqCst);
        shared.grace.end_by(Instant::now());
        let live = lock(&shared.jobs).live();
        for j in live {
            if shared.cancel_job(&j, "the daemon is shutting down (the grace period was cut short)").0 {
                tracing::warn!(job = %j.id, "cancelled: shutdown without grace");
            }
        }
    }
}
