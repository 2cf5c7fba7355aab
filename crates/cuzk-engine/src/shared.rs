//! What the engine's threads share, and what several of them do with it: getting
//! memory and parameter sets (through the one memory wait), failing and cancelling
//! jobs, the status snapshot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::ProvingBackend;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::grace::{Grace, PartitionCosts};
use crate::job::{Job, JobTable};
use crate::kind::{Handler, Handlers};
use crate::memory::MemoryBudget;
use crate::metrics::Stats;
use crate::params::{ParameterCache, ParameterLease};
use crate::pool::{BufferPool, Buffers, WitnessLoan, WitnessPool};
use crate::request::{JobId, ProofKind};
use crate::scheduler::{BoundedQueue, Lane, PartitionQueue, ReadyPartition};
use crate::status::{BackendStatus, EngineStatus, QueueStatus};
use crate::store::ProofStore;
use crate::timeline::Timeline;
use cuzk_groth16::sync::lock;

fn urgent_threads() -> Option<rayon::ThreadPool> {
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    match rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("cuzk-urgent-{i}")).build() {
        Ok(pool) => Some(pool),
        Err(e) => {
            tracing::warn!(error = %e, "the urgent lanes' threads could not be started: urgent work shares the ordinary threads");
            None
        }
    }
}

/// Timeline events kept (the oldest are dropped first): about 20 MB.
const TIMELINE_EVENTS: usize = 200_000;

/// One proving backend and what it is doing.
pub(crate) struct BackendSlot {
    pub backend: Arc<dyn ProvingBackend>,
    pub current: Mutex<Option<(JobId, ProofKind)>>,
    /// Why the backend was taken out of service (its device was lost), once it was: it
    /// proves nothing more until the daemon restarts.
    pub lost: OnceLock<String>,
}

impl BackendSlot {
    pub fn in_service(&self) -> bool {
        self.lost.get().is_none()
    }
}

pub(crate) struct Shared {
    pub config: EngineConfig,
    pub handlers: Handlers,
    pub params: ParameterCache,
    pub budget: Arc<MemoryBudget>,
    pub buffers: Arc<BufferPool>,
    pub witnesses: Arc<WitnessPool>,
    /// Held while a synthesis worker gathers a partition's memory.
    pub admit: Mutex<()>,
    pub queue: PartitionQueue,
    pub ready: BoundedQueue<ReadyPartition>,
    pub jobs: Mutex<JobTable>,
    pub backends: Vec<Arc<BackendSlot>>,
    pub stats: Arc<Mutex<Stats>>,
    pub timeline: Arc<Timeline>,
    pub started: Instant,
    pub accepting: AtomicBool,
    pub next_seq: AtomicU64,
    /// Shutdown's grace period, and what partitions take (which jobs can finish in it).
    pub grace: Grace,
    pub costs: PartitionCosts,
    /// Completed proofs on disk (`state_dir`), so they outlive a restart.
    pub store: Option<ProofStore>,
    /// The urgent lanes' threads (as many as the host has cores, beside rayon's global
    /// pool, where ordinary synthesis keeps every core busy): an urgent partition's
    /// synthesis and proof then take their share of the cores at once instead of
    /// queueing behind an ordinary partition's parallel work. None where the pool could
    /// not be made (the global pool is used, and the start says so).
    pub urgent_threads: Option<rayon::ThreadPool>,
}

impl Shared {
    pub fn new(
        config: EngineConfig,
        backends: Vec<Arc<dyn ProvingBackend>>,
        handlers: &[Handler],
        by_body: Handlers,
        buffers: Buffers,
        store: Option<ProofStore>,
    ) -> Shared {
        let budget = MemoryBudget::new(config.memory_budget_bytes);
        // Enough idle buffers for every partition that can be in flight at once.
        // The urgent lanes: one synthesis worker, and one prover worker per backend.
        let in_flight =
            config.synthesis_workers.max(1) + 1 + config.synthesis_lookahead.max(1) + backends.len() * (config.workers_per_backend.max(1) + 1);
        Shared {
            buffers: BufferPool::new(buffers, budget.clone(), 3 * in_flight),
            witnesses: WitnessPool::new(budget.clone(), in_flight),
            admit: Mutex::new(()),
            handlers: by_body,
            // GPU backends read a set's points from its file onto their devices: the host
            // then keeps only the header (a C2 set: 47 GB less host memory, no decoding).
            params: ParameterCache::new(handlers.iter().map(Handler::source).collect(), backends.clone(), budget.clone()),
            budget,
            queue: PartitionQueue::new(),
            ready: BoundedQueue::new(config.synthesis_lookahead),
            jobs: Mutex::new(JobTable::default()),
            backends: backends.into_iter().map(|b| Arc::new(BackendSlot { backend: b, current: Mutex::new(None), lost: OnceLock::new() })).collect(),
            stats: Arc::new(Mutex::new(Stats::default())),
            timeline: Arc::new(Timeline::new(TIMELINE_EVENTS)),
            started: Instant::now(),
            accepting: AtomicBool::new(true),
            next_seq: AtomicU64::new(1),
            grace: Grace::default(),
            costs: PartitionCosts::default(),
            store,
            config,
            urgent_threads: urgent_threads(),
        }
    }

    /// `f` on the threads of `lane`: the urgent lanes' own pool, else rayon's global one.
    pub fn on_lane_threads<R: Send>(&self, lane: Lane, f: impl FnOnce() -> R + Send) -> R {
        match (&self.urgent_threads, lane) {
            (Some(pool), Lane::Urgent) => pool.install(f),
            _ => f(),
        }
    }

    /// Frees what only holds memory: idle pooled buffers and aux vectors, and parameter
    /// sets nobody has used for `eviction_min_idle`. Returns when the next unused set
    /// will be old enough to evict: the latest a waiter for memory needs to look again.
    pub fn make_room(&self) -> Option<Instant> {
        self.buffers.release_idle();
        self.witnesses.release_idle();
        self.params.evict_idle(self.config.eviction_min_idle)
    }

    /// The parameter set `circuit_id` (loaded and charged if needed) and the load time
    /// spent here; None if `give_up` said so while it waited for memory.
    pub fn parameters(&self, circuit_id: &str, give_up: &dyn Fn() -> bool) -> Result<Option<(ParameterLease, Duration)>, EngineError> {
        self.params.get(circuit_id, give_up, &|| self.make_room())
    }

    /// `bytes` of witness memory (an idle aux vector where one fits), making room as
    /// needed; None if `give_up` said so.
    pub fn take_witness(&self, bytes: u64, give_up: &dyn Fn() -> bool) -> Result<Option<WitnessLoan>, EngineError> {
        self.witnesses.take(bytes, give_up, &|| self.make_room())
    }

    /// a, b, c of `len` scalars from the pool, making room as needed.
    pub fn take_abc(&self, len: usize, give_up: &dyn Fn() -> bool) -> Result<Option<EvalBuffers>, EngineError> {
        self.buffers.take_abc(len, give_up, &|| self.make_room())
    }

    /// Keeps a completed job's proof on disk (where there is a store). A failed write
    /// is logged, not fatal: the proof is still held in memory and returned.
    pub fn store_completed(&self, job: &Job) {
        let (Some(store), Some(record)) = (&self.store, job.stored()) else { return };
        if let Err(e) = store.save(&record) {
            tracing::error!(job = %job.id, error = %e, "the completed proof could not be kept on disk; it is lost if the daemon restarts before it is fetched");
        }
    }

    /// Forgets finished jobs past `job_retention`, and their stored proofs.
    pub fn prune_jobs(&self) {
        let gone = lock(&self.jobs).prune(self.config.job_retention);
        if let Some(store) = &self.store {
            for id in &gone {
                if let Err(e) = store.remove(id) {
                    tracing::warn!(job = %id, error = %e, "an expired stored proof could not be removed");
                }
            }
        }
    }

    /// Takes `slot` out of service for `why` (its device is lost): its workers take no
    /// more partitions. Where no backend is left in service, the workers of every
    /// backend then take each partition only to fail its job, saying why, and new jobs
    /// are refused ([`Shared::no_backend_in_service`]).
    pub fn take_out_of_service(&self, slot: &BackendSlot, why: &str) {
        if slot.lost.set(why.to_string()).is_ok() {
            let left = self.backends.iter().filter(|b| b.in_service()).count();
            tracing::error!(
                backend = slot.backend.name(),
                why,
                backends_in_service = left,
                "backend taken out of service: it proves nothing more until the daemon restarts"
            );
            // No backend left: every unfinished job fails now, saying why, rather than
            // each partition being synthesized first.
            if let Some(why) = self.no_backend_in_service() {
                let live = lock(&self.jobs).live();
                for job in live {
                    self.fail_job(&job, why.clone());
                }
            }
            // Waiting workers look again at what they may take.
            self.ready.wake_all();
        }
    }

    /// Why no backend can prove, where none is left in service; None otherwise.
    pub fn no_backend_in_service(&self) -> Option<String> {
        if self.backends.iter().any(|b| b.in_service()) {
            return None;
        }
        let each: Vec<String> = self.backends.iter().map(|b| format!("{} ({})", b.backend.name(), b.lost.get().map_or("", |s| s.as_str()))).collect();
        Some(format!("no proving backend is in service: {} taken out of service; restart the daemon once the device is back", each.join(", ")))
    }

    pub fn fail_job(&self, job: &Job, error: String) {
        if job.fail(error.clone()) {
            self.job_ended(job);
            tracing::error!(job = %job.id, error = error.as_str(), "job failed");
        }
    }

    /// (cancelled now, was running).
    pub fn cancel_job(&self, job: &Job, why: &str) -> (bool, bool) {
        let r = job.cancel(why);
        if r.0 {
            self.job_ended(job);
        }
        r
    }

    /// In shutdown's grace period, a job that cannot finish before it ends is
    /// cancelled instead of starting another partition (which would only keep jobs
    /// that can finish from running); true if `job` was.
    pub fn cancel_if_it_cannot_finish(&self, job: &Job) -> bool {
        let Some((unstarted, _)) = job.progress() else { return false };
        let lanes = (self.config.synthesis_workers.max(1), self.backends.len() * self.config.workers_per_backend.max(1));
        let Some(why) = self.grace.refusal(&self.costs, &job.circuit_id, unstarted, lanes) else { return false };
        if self.cancel_job(job, &why).0 {
            tracing::warn!(job = %job.id, kind = %job.kind, why = why.as_str(), "cancelled: it cannot finish before the shutdown deadline");
        }
        true
    }

    /// A job failed or was cancelled: its queued partitions go, and a worker waiting
    /// for memory on its behalf gives up.
    fn job_ended(&self, job: &Job) {
        self.queue.remove_job(job.seq);
        self.budget.notify();
    }

    /// Shutdown: the queues take nothing more and every wait for memory gives up.
    pub fn close(&self) {
        self.accepting.store(false, std::sync::atomic::Ordering::SeqCst);
        self.queue.close();
        self.ready.close();
        self.budget.close();
    }

    pub fn status(&self) -> EngineStatus {
        let mut queues: HashMap<ProofKind, (u32, u32)> = HashMap::new();
        for j in lock(&self.jobs).live() {
            if let Some((pending, in_flight)) = j.progress() {
                let q = queues.entry(j.kind).or_default();
                q.0 += pending as u32;
                q.1 += in_flight as u32;
            }
        }
        let (completed, failed) = {
            let stats = lock(&self.stats);
            (stats.completed.values().sum(), stats.failed.values().sum())
        };
        let (aux_vectors_reused, aux_vectors_fresh) = self.witnesses.loans();
        EngineStatus {
            backends: self
                .backends
                .iter()
                .map(|b| BackendStatus {
                    name: b.backend.name(),
                    // A lost device is not asked: its driver calls would fail.
                    device: if b.in_service() { b.backend.device() } else { None },
                    current_job: lock(&b.current).clone(),
                    out_of_service: b.lost.get().cloned(),
                })
                .collect(),
            parameter_sets: self.params.status(),
            queues: ProofKind::all()
                .filter(|&k| self.handlers.serves(k))
                .map(|k| {
                    let (pending, in_progress) = queues.get(&k).copied().unwrap_or_default();
                    QueueStatus { kind: k, pending, in_progress }
                })
                .collect(),
            completed,
            failed,
            uptime: self.started.elapsed(),
            memory_budget_bytes: self.budget.total(),
            memory_used_bytes: self.budget.used(),
            memory_peak_bytes: self.budget.peak(),
            memory_pinned_bytes: self.budget.pinned(),
            memory_idle_bytes: self.buffers.idle_bytes() + self.witnesses.idle_bytes(),
            aux_vectors_reused,
            aux_vectors_fresh,
        }
    }
}
