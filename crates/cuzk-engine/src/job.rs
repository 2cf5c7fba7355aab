//! A job's life: queued → running → completed, failed or cancelled, with each of its
//! partitions' states, its proofs in partition order, its timings, and the signal
//! that tells waiters (blocking ones and async ones) it has finished.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::kind::{FinalCheck, JobPlan, PartitionWork};
use crate::metrics::Stats;
use crate::request::{ms, JobId, JobOutcome, JobRequest, JobStatus, JobTimings, Priority, ProofKind};
use crate::store::StoredProof;
use crate::timeline::{EventKind, Timeline};
use cuzk_groth16::sync::{lock, wait};

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

pub(crate) struct Job {
    pub id: JobId,
    /// Submission order (the scheduler's FIFO within a priority).
    pub seq: u64,
    pub request_id: String,
    /// [`JobRequest::digest`]: a resubmission under `request_id` must match it.
    pub request_digest: [u8; 32],
    pub kind: ProofKind,
    pub priority: Priority,
    /// The parameter set every partition uses.
    pub circuit_id: String,
    pub num_partitions: usize,
    pub eval_len: usize,
    pub partition_bytes: u64,
    /// The request's payload bytes ([`crate::RequestBody::bytes`]), counted against
    /// admission.max_queued_request_bytes while the job is unfinished.
    pub request_bytes: u64,
    /// Why the job is timing-only (its proofs are neither checked nor returned).
    pub timing_note: Option<String>,
    submitted: Instant,
    state: Mutex<JobState>,
    /// Blocking waiters ([`Job::wait`]); async ones leave a waker in the state.
    finished: Condvar,
    timeline: Arc<Timeline>,
    stats: Arc<Mutex<Stats>>,
}

/// A partition in flight, from its admission ([`Job::begin_partition`]) to its end
/// however it ends: proved ([`Job::partition_done`]), failed, cancelled, or panicked
/// (the unwinding drops it). Its job counts it in flight until then; the partition's
/// memory is held by values of its own (its witness loan, its a, b, c buffers).
pub(crate) struct PartitionTicket {
    /// None once counted out.
    job: Option<Arc<Job>>,
}

impl Drop for PartitionTicket {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            let mut s = job.state();
            s.in_flight = s.in_flight.saturating_sub(1);
        }
    }
}

struct JobState {
    status: JobStatus,
    /// The decoded request, per partition, and the check of the assembled proof (which
    /// holds it too): dropped when the job finishes, so a finished job kept for
    /// daemon.job_retention holds its proof, not its request.
    work: Vec<Arc<dyn PartitionWork>>,
    final_check: Option<Arc<FinalCheck>>,
    parts: Vec<PartitionState>,
    proofs: Vec<Option<Vec<u8>>>,
    /// Partitions that have started (each counted once, however often it is begun
    /// again: after a rejected proof, a backend error or a lost device).
    started: usize,
    /// Which partitions have started.
    begun: Vec<bool>,
    /// Partitions being synthesized or proved now.
    in_flight: usize,
    done: usize,
    error: String,
    timings: JobTimings,
    first_start: Option<Instant>,
    finished_at: Option<Instant>,
    proof: Vec<u8>,
    /// Async waiters ([`JobCompletion`]), woken when the job finishes.
    wakers: HashMap<u64, Waker>,
    next_waker: u64,
}

impl Job {
    /// `request_digest` is `req.digest()`, worked out before the job table is locked.
    pub fn new(
        id: JobId,
        seq: u64,
        req: &JobRequest,
        request_digest: [u8; 32],
        plan: JobPlan,
        timeline: Arc<Timeline>,
        stats: Arc<Mutex<Stats>>,
    ) -> Job {
        let n = plan.partitions.len();
        Job {
            id,
            seq,
            request_id: req.request_id.clone(),
            request_digest,
            kind: req.kind(),
            priority: req.priority,
            circuit_id: plan.circuit_id,
            num_partitions: n,
            eval_len: plan.eval_len,
            partition_bytes: plan.partition_bytes,
            request_bytes: req.body.bytes(),
            timing_note: plan.timing_note,
            submitted: Instant::now(),
            state: Mutex::new(JobState {
                status: JobStatus::Queued,
                work: plan.partitions,
                final_check: plan.final_check,
                parts: vec![PartitionState::Queued; n],
                proofs: vec![None; n],
                started: 0,
                begun: vec![false; n],
                in_flight: 0,
                done: 0,
                error: String::new(),
                timings: JobTimings::default(),
                first_start: None,
                finished_at: None,
                proof: Vec::new(),
                wakers: HashMap::new(),
                next_waker: 0,
            }),
            finished: Condvar::new(),
            timeline,
            stats,
        }
    }

    /// A job completed before a restart, from its stored record: finished, with its
    /// proof, answerable until `job_retention` after it completed (its age is taken
    /// from the wall clock). Not counted in this process's metrics.
    pub fn restored(p: StoredProof, timeline: Arc<Timeline>, stats: Arc<Mutex<Stats>>) -> Job {
        let now = Instant::now();
        let age = std::time::SystemTime::now().duration_since(p.finished).unwrap_or_default();
        let finished_at = now.checked_sub(age).unwrap_or(now);
        let submitted = finished_at.checked_sub(Duration::from_millis(p.timings.total_ms)).unwrap_or(finished_at);
        Job {
            id: p.job_id,
            seq: 0,
            request_id: p.request_id,
            request_digest: p.request_digest,
            kind: p.kind,
            priority: Priority::Normal,
            circuit_id: String::new(),
            num_partitions: 0,
            eval_len: 0,
            partition_bytes: 0,
            request_bytes: 0,
            timing_note: None,
            submitted,
            state: Mutex::new(JobState {
                status: JobStatus::Completed,
                work: Vec::new(),
                final_check: None,
                parts: Vec::new(),
                proofs: Vec::new(),
                started: 0,
                begun: Vec::new(),
                in_flight: 0,
                done: 0,
                error: String::new(),
                timings: p.timings,
                first_start: None,
                finished_at: Some(finished_at),
                proof: p.proof,
                wakers: HashMap::new(),
                next_waker: 0,
            }),
            finished: Condvar::new(),
            timeline,
            stats,
        }
    }

    /// The record a store keeps of this job once it has completed with a proof.
    pub fn stored(&self) -> Option<StoredProof> {
        let s = self.state();
        (s.status == JobStatus::Completed).then(|| StoredProof::of(&self.outcome(&s), &self.request_id, self.request_digest, self.kind)).flatten()
    }

    fn state(&self) -> MutexGuard<'_, JobState> {
        lock(&self.state)
    }

    /// Partition `index`'s work; None once the job has finished (its request dropped).
    pub fn work(&self, index: usize) -> Option<Arc<dyn PartitionWork>> {
        self.state().work.get(index).cloned()
    }

    /// The check of the assembled proof; None once the job has finished, or for a kind
    /// without one.
    pub fn final_check(&self) -> Option<Arc<FinalCheck>> {
        self.state().final_check.clone()
    }

    pub fn is_finished(&self) -> bool {
        self.state().status.is_finished()
    }

    pub fn set_part(&self, index: usize, p: PartitionState) {
        if let Some(x) = self.state().parts.get_mut(index) {
            *x = p;
        }
    }

    /// Marks a partition as started: its ticket, which counts it in flight until it
    /// drops (or is handed to [`Job::partition_done`]); None when the job has finished
    /// meanwhile.
    pub fn begin_partition(self: &Arc<Self>, index: usize, parameter_load: Duration) -> Option<PartitionTicket> {
        let mut s = self.state();
        if s.status.is_finished() {
            return None;
        }
        if let Some(x) = s.parts.get_mut(index) {
            *x = PartitionState::Synthesizing;
        }
        s.status = JobStatus::Running;
        s.first_start.get_or_insert_with(Instant::now);
        s.timings.parameter_load_ms += ms(parameter_load);
        if let Some(b) = s.begun.get_mut(index).filter(|b| !**b) {
            *b = true;
            s.started += 1;
        }
        s.in_flight += 1;
        Some(PartitionTicket { job: Some(self.clone()) })
    }

    pub fn add_synthesis(&self, d: Duration) {
        self.state().timings.synthesis_ms += ms(d);
    }

    pub fn add_gpu(&self, d: Duration) {
        self.state().timings.gpu_compute_ms += ms(d);
    }

    /// Records a partition's proof (verified, or proved for timing as `state` says);
    /// returns the assembled proof when this was the last one missing (the job is
    /// completed by [`Job::complete`]).
    pub fn partition_done(&self, mut ticket: PartitionTicket, index: usize, proof: Vec<u8>, state: PartitionState) -> Option<Vec<u8>> {
        let mut s = self.state();
        // Counted out under the same lock that records the proof.
        if ticket.job.take().is_some() {
            s.in_flight = s.in_flight.saturating_sub(1);
        }
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
    pub fn complete(&self, proof: Vec<u8>) -> bool {
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
    pub fn fail(&self, error: String) -> bool {
        let mut s = self.state();
        if s.status.is_finished() {
            return false;
        }
        self.finish(&mut s, JobStatus::Failed, error);
        true
    }

    /// Cancels the job unless it has finished; returns (cancelled now, was running).
    pub fn cancel(&self, why: &str) -> (bool, bool) {
        let mut s = self.state();
        if s.status.is_finished() {
            return (false, false);
        }
        let was_running = s.in_flight > 0;
        s.proofs.iter_mut().for_each(|p| *p = None);
        self.finish(&mut s, JobStatus::Cancelled, why.to_string());
        (true, was_running)
    }

    /// Records the final event and counts the job before waking waiters, so whoever
    /// sees the job finished also finds it in the timeline and the metrics.
    fn finish(&self, s: &mut JobState, status: JobStatus, error: String) {
        let kind = match status {
            JobStatus::Completed => EventKind::Completed,
            JobStatus::Cancelled => EventKind::Cancelled,
            _ => EventKind::Failed,
        };
        self.timeline.record(&self.id.0, None, kind, "");
        // The decoded request goes now (a partition in flight holds its own reference
        // until it ends).
        s.work = Vec::new();
        s.final_check = None;
        s.status = status;
        s.error = error;
        let now = Instant::now();
        s.finished_at = Some(now);
        s.timings.total_ms = ms(now - self.submitted);
        s.timings.queue_wait_ms = ms(s.first_start.unwrap_or(now) - self.submitted);
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
        self.finished.notify_all();
        // A waker only schedules its task; none runs here, under the job's lock.
        for (_, w) in s.wakers.drain() {
            w.wake();
        }
    }

    fn outcome(&self, s: &JobState) -> JobOutcome {
        let mut timings = s.timings;
        if !s.status.is_finished() {
            timings.total_ms = ms(self.submitted.elapsed());
            timings.queue_wait_ms = ms(s.first_start.unwrap_or_else(Instant::now) - self.submitted);
        }
        JobOutcome { job_id: self.id.clone(), status: s.status, proof: s.proof.clone(), error: s.error.clone(), timings }
    }

    /// Blocks until the job finishes, at most `timeout` (None: forever); returns its
    /// outcome then (still queued or running if the time ran out).
    pub fn wait(&self, timeout: Option<Duration>) -> JobOutcome {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.state();
        while !s.status.is_finished() {
            match deadline {
                None => s = wait(&self.finished, s),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    s = cuzk_groth16::sync::wait_timeout(&self.finished, s, d - now);
                }
            }
        }
        self.outcome(&s)
    }

    /// Partitions without a proof yet, of an unfinished job (0 once finished).
    pub fn remaining_partitions(&self) -> usize {
        let s = self.state();
        if s.status.is_finished() {
            0
        } else {
            self.num_partitions - s.done
        }
    }

    /// (queued partitions not yet started, partitions in flight) of an unfinished job.
    pub fn progress(&self) -> Option<(usize, usize)> {
        let s = self.state();
        (!s.status.is_finished()).then(|| (self.num_partitions - s.started, s.in_flight))
    }

    pub fn summary(&self) -> JobSummary {
        let s = self.state();
        JobSummary { job_id: self.id.clone(), kind: self.kind, priority: self.priority, status: s.status, partitions: s.parts.clone() }
    }

    fn status(&self) -> JobStatus {
        self.state().status
    }

    fn finished_at(&self) -> Option<Instant> {
        self.state().finished_at
    }
}

/// A job's completion as a future: resolves to its outcome once it has finished. It
/// wakes its task from the job's own finish (no polling, no thread held); dropping it
/// (a client that went away) forgets its waker.
pub struct JobCompletion {
    job: Arc<Job>,
    waker: Option<u64>,
}

impl JobCompletion {
    pub(crate) fn new(job: Arc<Job>) -> Self {
        JobCompletion { job, waker: None }
    }

    /// The job's outcome now (queued or running if it has not finished).
    pub fn snapshot(&self) -> JobOutcome {
        self.job.outcome(&self.job.state())
    }
}

impl Future for JobCompletion {
    type Output = JobOutcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<JobOutcome> {
        let this = &mut *self;
        let mut s = this.job.state();
        if s.status.is_finished() {
            if let Some(k) = this.waker.take() {
                s.wakers.remove(&k);
            }
            return Poll::Ready(this.job.outcome(&s));
        }
        let key = *this.waker.get_or_insert_with(|| {
            s.next_waker += 1;
            s.next_waker
        });
        s.wakers.insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for JobCompletion {
    fn drop(&mut self) {
        if let Some(k) = self.waker.take() {
            self.job.state().wakers.remove(&k);
        }
    }
}

/// A request id with its content's digest: what names one job. Curio sends the
/// partitions of one WindowPoSt deadline as separate requests under one request id
/// (each with its own vanilla proofs), so an id alone does not name a job.
type RequestKey = (String, [u8; 32]);

/// Every job the engine knows: live ones, and finished ones for `job_retention`.
#[derive(Default)]
pub(crate) struct JobTable {
    by_id: HashMap<JobId, Arc<Job>>,
    by_request: HashMap<RequestKey, JobId>,
}

impl JobTable {
    pub fn get(&self, id: &JobId) -> Option<Arc<Job>> {
        self.by_id.get(id).cloned()
    }

    /// A random id no job here has (a repeat of 128 random bits is not expected, but
    /// costs nothing to rule out).
    pub fn new_id(&self) -> JobId {
        loop {
            let id = JobId::random();
            if !self.by_id.contains_key(&id) {
                return id;
            }
        }
    }

    pub fn insert(&mut self, job: Arc<Job>) {
        if !job.request_id.is_empty() {
            self.by_request.insert((job.request_id.clone(), job.request_digest), job.id.clone());
        }
        self.by_id.insert(job.id.clone(), job);
    }

    /// The job a resubmission of `request_id` with content `digest` gets: the same one
    /// while it is queued, running or completed (its proof can be awaited again). A
    /// failed or cancelled job is not reused, so resubmitting it is a retry with a new
    /// job. The same request id with other content (another kind, priority or payload)
    /// names another job: None, so it gets a job of its own beside the first.
    pub fn reusable(&mut self, request_id: &str, digest: &[u8; 32]) -> Option<JobId> {
        if request_id.is_empty() {
            return None;
        }
        let key = (request_id.to_string(), *digest);
        let id = self.by_request.get(&key).cloned()?;
        let Some(job) = self.by_id.get(&id) else {
            self.by_request.remove(&key);
            return None;
        };
        if matches!(job.status(), JobStatus::Failed | JobStatus::Cancelled) {
            self.by_request.remove(&key);
            return None;
        }
        Some(id)
    }

    /// Forgets finished jobs older than `keep`; returns their ids.
    pub fn prune(&mut self, keep: Duration) -> Vec<JobId> {
        let old: Vec<JobId> = self.by_id.values().filter(|j| j.finished_at().is_some_and(|t| t.elapsed() > keep)).map(|j| j.id.clone()).collect();
        for id in &old {
            if let Some(j) = self.by_id.remove(id) {
                // The request may name a newer job by now (a retry): that mapping stays.
                let key = (j.request_id.clone(), j.request_digest);
                if self.by_request.get(&key) == Some(id) {
                    self.by_request.remove(&key);
                }
            }
        }
        old
    }

    /// Unfinished jobs, oldest first.
    pub fn live(&self) -> Vec<Arc<Job>> {
        let mut v: Vec<Arc<Job>> = self.by_id.values().filter(|j| !j.is_finished()).cloned().collect();
        v.sort_by_key(|j| j.seq);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its wakes.
    struct Counter(AtomicUsize);
    impl std::task::Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn job() -> Arc<Job> {
        let req = JobRequest::new("", Priority::Normal, crate::synthetic::SyntheticRequest(Vec::new()));
        let plan = JobPlan { circuit_id: "c".into(), partitions: Vec::new(), eval_len: 0, partition_bytes: 0, final_check: None, timing_note: None };
        Arc::new(Job::new(JobId("job-t".into()), 1, &req, req.digest(), plan, Arc::new(Timeline::new(16)), Arc::default()))
    }

    #[test]
    fn a_partition_ticket_counts_it_in_flight_until_it_drops_however_it_ends() {
        let j = job();
        let t = j.begin_partition(0, Duration::ZERO).expect("an unfinished job");
        assert_eq!(j.state().in_flight, 1);
        // A bug while the partition runs: the unwinding drops its ticket.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = t;
            panic!("a partition's bug");
        }));
        assert!(r.is_err());
        assert_eq!(j.state().in_flight, 0);
        let (a, b) = (j.begin_partition(0, Duration::ZERO).unwrap(), j.begin_partition(0, Duration::ZERO).unwrap());
        assert_eq!(j.state().in_flight, 2);
        drop((a, b));
        assert_eq!(j.state().in_flight, 0);
        // A finished job starts nothing.
        j.cancel("test");
        assert!(j.begin_partition(0, Duration::ZERO).is_none());
    }

    /// Never synthesized here: a job's partition count is all the tests need of it.
    struct Unused;
    impl crate::kind::PartitionWork for Unused {
        fn synthesize(&self, _: cuzk_groth16::synthesis::EvalBuffers) -> Result<cuzk_groth16::SynthesizedCircuit, crate::error::EngineError> {
            Err(crate::error::EngineError::Internal("not synthesized in these tests".into()))
        }
    }

    /// A partition begun again (its proof rejected, its backend failed or lost) is
    /// still one started partition: the queue's count of unstarted ones never wraps.
    #[test]
    fn a_partition_begun_again_is_started_once() {
        let req = JobRequest::new("", Priority::Normal, crate::synthetic::SyntheticRequest(Vec::new()));
        let partitions: Vec<Arc<dyn crate::kind::PartitionWork>> = vec![Arc::new(Unused), Arc::new(Unused)];
        let plan = JobPlan { circuit_id: "c".into(), partitions, eval_len: 0, partition_bytes: 0, final_check: None, timing_note: None };
        let j = Arc::new(Job::new(JobId("job-p".into()), 1, &req, req.digest(), plan, Arc::new(Timeline::new(16)), Arc::default()));
        assert_eq!(j.progress(), Some((2, 0)));
        let first = j.begin_partition(0, Duration::ZERO).unwrap();
        drop(first);
        let again = j.begin_partition(0, Duration::ZERO).unwrap();
        assert_eq!(j.progress(), Some((1, 1)));
        let other = j.begin_partition(1, Duration::ZERO).unwrap();
        assert_eq!(j.progress(), Some((0, 2)));
        drop((again, other));
    }

    #[test]
    fn a_completion_is_woken_by_the_finish_and_forgets_its_waker_when_dropped() {
        let j = job();
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        // Dropped while pending (a client that went away): its waker goes with it.
        let mut gone = JobCompletion::new(j.clone());
        assert!(Pin::new(&mut gone).poll(&mut cx).is_pending());
        assert_eq!(j.state().wakers.len(), 1);
        drop(gone);
        assert!(j.state().wakers.is_empty());
        // Pending, polled twice (one waker kept), then woken once by the cancel.
        let mut done = JobCompletion::new(j.clone());
        assert!(Pin::new(&mut done).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut done).poll(&mut cx).is_pending());
        assert_eq!(j.state().wakers.len(), 1);
        assert_eq!(done.snapshot().status, JobStatus::Queued);
        assert_eq!(j.cancel("test"), (true, false));
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        match Pin::new(&mut done).poll(&mut cx) {
            Poll::Ready(o) => assert_eq!((o.status, o.error.as_str()), (JobStatus::Cancelled, "test")),
            Poll::Pending => panic!("a finished job's completion is pending"),
        }
        // Finished already: ready at once, no waker left behind.
        assert!(Pin::new(&mut JobCompletion::new(j.clone())).poll(&mut cx).is_ready());
        assert!(j.state().wakers.is_empty());
    }
}
