//! Device faults as the engine meets them (CPU backends standing in for GPUs): a
//! backend error is proved again once, then fails its job; a lost device takes its
//! backend out of service and its work goes to the others; with none left, jobs fail
//! saying so and new ones are refused. The same faults injected into the CUDA backend
//! are in cuzk-server's GPU tests (tests/gpu_faults.rs).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{check_proof, synthetic};
use cuzk_engine::synthetic::SyntheticKind;
use cuzk_engine::{Engine, EngineConfig, EngineError, JobStatus, Priority};
use cuzk_groth16::{CpuBackend, ParameterSet, ProofRandomness, ProveError, ProveOutput, ProvingBackend, SynthesizedCircuit, Urgency};

fn start(backends: Vec<Arc<dyn ProvingBackend>>) -> Engine {
    let cfg = EngineConfig { memory_budget_bytes: 1 << 30, workers_per_backend: 1, ..EngineConfig::default() };
    Engine::start(cfg, backends, vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(16))]).unwrap()
}

/// Host memory partitions hold now: what is charged beyond the loaded parameter sets
/// and the pools' idle buffers (kept for the next partition, however many there were).
fn held_by_partitions(e: &Engine) -> u64 {
    let st = e.status();
    st.memory_used_bytes - st.memory_idle_bytes - st.parameter_sets.iter().map(|p| p.size_bytes).sum::<u64>()
}

/// Asserts that every partition lets its memory go within a few seconds (a failed
/// job's outcome may be told before its last partition has unwound).
fn assert_partitions_let_go(e: &Engine) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while held_by_partitions(e) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(held_by_partitions(e), 0, "partitions kept memory after their jobs ended");
}

/// What a faulty backend does on a call.
#[derive(Clone, Copy)]
enum Fault {
    /// Fails its first `n` calls with a backend error, then proves.
    FailFirst(usize),
    /// Its device is lost on the first call: every call fails so.
    Lost,
}

struct Faulty {
    fault: Fault,
    inner: CpuBackend,
    calls: AtomicUsize,
}

impl Faulty {
    fn new(fault: Fault) -> Arc<Faulty> {
        Arc::new(Faulty { fault, inner: CpuBackend::new(), calls: AtomicUsize::new(0) })
    }
}

impl ProvingBackend for Faulty {
    fn name(&self) -> String {
        "faulty".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        match self.fault {
            Fault::FailFirst(n) if call < n => Err(ProveError::Backend("uploading a, b, c: simulated copy failure".into())),
            Fault::Lost => Err(ProveError::DeviceLost("simulated illegal address".into())),
            _ => self.inner.prove_with(u, p, c, r),
        }
    }
    /// A lost device cannot plan a set either.
    fn plan_params(&self, _: &ParameterSet, _: Option<&cuzk_groth16::matrices::ConstraintMatrices>) -> Result<(), ProveError> {
        match self.in_service() {
            true => Ok(()),
            false => Err(ProveError::DeviceLost("asked to plan a set after its loss".into())),
        }
    }
    fn in_service(&self) -> bool {
        !matches!(self.fault, Fault::Lost) || self.calls.load(Ordering::SeqCst) == 0
    }
}

#[test]
fn a_backend_error_is_proved_again_once_and_a_second_one_fails_the_job() {
    // One failure: the partition is proved again and the job completes.
    let b = Faulty::new(Fault::FailFirst(1));
    let e = start(vec![b.clone()]);
    let s = e.submit(synthetic(8, 1, 3, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, Some(Duration::from_secs(120))).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    check_proof(&out.proof, 8, 1, 3);
    assert_eq!(b.calls.load(Ordering::SeqCst), 2);
    e.shutdown(Duration::from_secs(5));

    // Two: the job fails naming the backend and the error; the next job completes.
    let b = Faulty::new(Fault::FailFirst(2));
    let e = start(vec![b.clone()]);
    let s = e.submit(synthetic(8, 1, 4, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, Some(Duration::from_secs(120))).unwrap();
    assert_eq!(out.status, JobStatus::Failed);
    assert!(out.proof.is_empty());
    assert!(
        out.error.contains("proving failed on faulty") && out.error.contains("simulated copy failure") && out.error.contains("twice"),
        "{}",
        out.error
    );
    let s = e.submit(synthetic(8, 1, 5, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, Some(Duration::from_secs(120))).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    assert_partitions_let_go(&e);
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn a_lost_device_takes_its_backend_out_of_service_and_its_work_goes_to_the_others() {
    let lost = Faulty::new(Fault::Lost);
    let e = start(vec![lost.clone(), Arc::new(CpuBackend::new())]);
    let ids: Vec<_> = (0..3).map(|i| e.submit(synthetic(8, 2, 10 + i, Priority::Normal, "")).unwrap().job_id).collect();
    for (i, id) in ids.iter().enumerate() {
        let out = e.wait(id, Some(Duration::from_secs(120))).unwrap();
        assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
        check_proof(&out.proof, 8, 2, 10 + i as u64);
    }
    // Called once (or once per worker that had taken a partition), never again.
    let calls = lost.calls.load(Ordering::SeqCst);
    assert!(calls >= 1, "the lost backend was never tried");
    let st = e.status();
    let why = st.backends[0].out_of_service.clone().unwrap_or_default();
    assert!(why.contains("device lost: simulated illegal address"), "{:?}", st.backends[0]);
    assert_eq!(st.backends[1].out_of_service, None);
    let s = e.submit(synthetic(8, 2, 20, Priority::Normal, "")).unwrap();
    assert_eq!(e.wait(&s.job_id, Some(Duration::from_secs(120))).unwrap().status, JobStatus::Completed);
    // A set loaded after the loss is planned for the backends in service only.
    e.evict("synthetic-2^8").unwrap();
    e.preload("synthetic-2^8").unwrap();
    let s = e.submit(synthetic(8, 2, 21, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, Some(Duration::from_secs(120))).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    assert_eq!(lost.calls.load(Ordering::SeqCst), calls, "an out-of-service backend was called");
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn with_no_backend_left_in_service_jobs_fail_saying_so_and_new_ones_are_refused() {
    let e = start(vec![Faulty::new(Fault::Lost)]);
    // The first is accepted; the loss may come before the others are submitted, and
    // then they are refused (below).
    let ids: Vec<_> = (0..3).filter_map(|i| e.submit(synthetic(8, 2, 30 + i, Priority::Normal, "")).ok().map(|s| s.job_id)).collect();
    assert!(!ids.is_empty(), "the first job was refused");
    for id in &ids {
        let out = e.wait(id, Some(Duration::from_secs(120))).unwrap();
        assert_eq!(out.status, JobStatus::Failed);
        assert!(out.proof.is_empty());
        assert!(out.error.contains("no proving backend is in service") && out.error.contains("faulty (device lost"), "{}", out.error);
    }
    match e.submit(synthetic(8, 1, 40, Priority::Normal, "")) {
        Err(EngineError::FailedPrecondition(m)) => assert!(m.contains("no proving backend is in service"), "{m}"),
        other => panic!("a job was accepted with no backend in service: {:?}", other.map(|s| s.job_id)),
    }
    let metrics = e.metrics_text();
    assert!(metrics.lines().any(|l| l == "cuzk_backend_in_service{backend=\"faulty\"} 0"), "{metrics}");
    assert_partitions_let_go(&e);
    e.shutdown(Duration::from_secs(5));
}

/// A device short of the memory its first plan counted on: the first placement fails
/// for want of memory, and the backend's next plan streams its points, pinning
/// `STREAMED` bytes on the host that the first plan did not.
struct ShortOnce {
    inner: CpuBackend,
    plans: AtomicUsize,
    short: std::sync::atomic::AtomicBool,
    /// The copy of the set whose placement ran short: refused from then on, as the
    /// CUDA backend refuses it (its host memory was charged for the old plan).
    refused: std::sync::Mutex<Option<cuzk_groth16::params::ParameterSetId>>,
    /// Where the shortage shows: the preload's placement, else the first proof's.
    at_preload: bool,
}

const STREAMED: u64 = 3 << 20;

impl ShortOnce {
    fn new(at_preload: bool) -> Arc<ShortOnce> {
        Arc::new(ShortOnce {
            inner: CpuBackend::new(),
            plans: AtomicUsize::new(0),
            short: Default::default(),
            refused: Default::default(),
            at_preload,
        })
    }
    /// The first placement fails; the ones of later copies succeed.
    fn place(&self, p: &ParameterSet) -> Result<(), ProveError> {
        let mut refused = self.refused.lock().unwrap();
        if *refused == Some(p.id()) {
            return Err(ProveError::DeviceMemory("this copy ran short before".into()));
        }
        match self.short.swap(true, Ordering::SeqCst) {
            false => {
                *refused = Some(p.id());
                Err(ProveError::DeviceMemory("placing the points on the device: simulated out of memory".into()))
            }
            true => Ok(()),
        }
    }
}

impl ProvingBackend for ShortOnce {
    fn name(&self) -> String {
        "short".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        self.place(p)?;
        self.inner.prove_with(u, p, c, r)
    }
    fn load_params(&self, p: &ParameterSet, _: &dyn cuzk_groth16::Progress) -> Result<(), ProveError> {
        match self.at_preload {
            true => self.place(p),
            false => Ok(()),
        }
    }
    fn plan_params(&self, _: &ParameterSet, _: Option<&cuzk_groth16::matrices::ConstraintMatrices>) -> Result<(), ProveError> {
        self.plans.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn host_bytes_for(&self, _: &ParameterSet) -> u64 {
        match self.short.load(Ordering::SeqCst) {
            false => 0,
            true => STREAMED,
        }
    }
}

/// A placement short of device memory (another process took some after the plan):
/// the set is planned and charged again, and the job completes, whether the shortage
/// shows at a preload or in the first proof. The same with the CUDA backend is in
/// cuzk-server's GPU tests (tests/gpu_faults.rs).
#[test]
fn a_device_short_of_memory_replans_the_set_and_charges_it_again() {
    for at_preload in [true, false] {
        let b = ShortOnce::new(at_preload);
        let e = start(vec![b.clone()]);
        let id = SyntheticKind::circuit_id(8);
        if at_preload {
            e.preload(&id).unwrap();
        }
        let s = e.submit(synthetic(8, 2, 70, Priority::Normal, "")).unwrap();
        let out = e.wait(&s.job_id, Some(Duration::from_secs(120))).unwrap();
        assert_eq!(out.status, JobStatus::Completed, "at_preload {at_preload}: {}", out.error);
        check_proof(&out.proof, 8, 2, 70);
        assert_eq!(b.plans.load(Ordering::SeqCst), 2, "at_preload {at_preload}: planned once more after the shortage");
        let st = e.status();
        let sets: Vec<_> = st.parameter_sets.iter().filter(|p| p.circuit_id == id).collect();
        assert_eq!(sets.len(), 1, "{:?}", st.parameter_sets);
        assert!(sets[0].size_bytes >= STREAMED, "at_preload {at_preload}: the new plan's pinned bytes are charged: {:?}", sets[0]);
        assert!(st.memory_pinned_bytes >= STREAMED, "at_preload {at_preload}: {}", st.memory_pinned_bytes);
        assert_partitions_let_go(&e);
        e.shutdown(Duration::from_secs(5));
    }
}
