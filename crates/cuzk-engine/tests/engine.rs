//! The engine on the CPU backend with synthetic circuits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{check_proof, synthetic, synthetic_json};
use cuzk_engine::synthetic::SyntheticKind;
use cuzk_engine::{AdmissionLimits, Engine, EngineConfig, EngineError, JobRequest, JobStatus, Priority, ProofKind};
use cuzk_filecoin::{CircuitKind, FilecoinRequest};
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{
    synthesize, CpuBackend, ParameterSet, Proof, ProofRandomness, ProveError, ProveOutput, ProvingBackend, SynthesizedCircuit, Urgency, SCALAR_BYTES,
};

fn config() -> EngineConfig {
    // Synthetic jobs stand in for every kind here, CRITICAL ones too.
    let admission =
        AdmissionLimits { critical_kinds: vec![ProofKind::Filecoin(CircuitKind::WinningPost), ProofKind::Synthetic], ..AdmissionLimits::default() };
    EngineConfig { memory_budget_bytes: 1 << 30, admission, ..EngineConfig::default() }
}

fn engine_with(backend: Arc<dyn ProvingBackend>, cfg: EngineConfig) -> Engine {
    Engine::start(cfg, vec![backend], vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(16))]).unwrap()
}

#[test]
fn a_job_of_three_partitions_completes_with_verified_proofs_in_order() {
    let e = engine_with(Arc::new(CpuBackend::new()), config());
    let s = e.submit(synthetic(8, 3, 40, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, None).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    check_proof(&out.proof, 8, 3, 40);
    // (Not total ≥ compute: two prover workers prove partitions at once, so the summed
    // compute time may exceed the wall time.)
    assert!(out.timings.total_ms >= out.timings.queue_wait_ms);
    let st = e.status();
    assert_eq!(st.completed, 1);
    assert_eq!(st.parameter_sets.len(), 1);
    assert_eq!(st.parameter_sets[0].circuit_id, "synthetic-2^8");
    assert!(e.metrics_text().contains("cuzk_proofs_completed_total{kind=\"synthetic\"} 1"));
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn critical_job_submitted_behind_normal_ones_finishes_first() {
    let cfg = EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() };
    let e = engine_with(Arc::new(CpuBackend::new()), cfg);
    e.preload("synthetic-2^10").unwrap();
    let normal: Vec<_> = (0..4).map(|i| e.submit(synthetic(10, 2, i * 10, Priority::Normal, "")).unwrap().job_id).collect();
    let critical = e.submit(synthetic(10, 1, 99, Priority::Critical, "")).unwrap().job_id;
    let c = e.wait(&critical, None).unwrap();
    assert_eq!(c.status, JobStatus::Completed);
    // When the critical job is done, the last normal job cannot be.
    let last = e.wait(&normal[3], Some(Duration::ZERO)).unwrap();
    assert!(!last.status.is_finished(), "the last NORMAL job finished before the CRITICAL one");
    for id in &normal {
        assert_eq!(e.wait(id, None).unwrap().status, JobStatus::Completed);
    }
    e.shutdown(Duration::from_secs(5));
}

/// Polls `f` on this thread, parked between wakes: resolves only if the future wakes
/// its task (a future that never does would hang here).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn a_job_completion_resolves_when_the_job_completes_or_is_cancelled() {
    let cfg = EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() };
    let e = Arc::new(engine_with(Arc::new(CpuBackend::new()), cfg));
    let s = e.submit(synthetic(8, 2, 7, Priority::Normal, "")).unwrap();
    let out = block_on(e.completion(&s.job_id).unwrap());
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    check_proof(&out.proof, 8, 2, 7);
    // A long job, awaited on another thread, cancelled from this one.
    let long = e.submit(synthetic(14, 4, 0, Priority::Normal, "")).unwrap().job_id;
    let done = e.completion(&long).unwrap();
    let waiter = std::thread::spawn(move || block_on(done));
    std::thread::sleep(Duration::from_millis(50));
    e.cancel(&long).unwrap();
    assert_eq!(waiter.join().unwrap().status, JobStatus::Cancelled);
    assert!(matches!(e.completion(&cuzk_engine::JobId("job-nope".into())), Err(EngineError::NotFound(_))));
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn resubmitting_a_live_request_id_returns_the_same_job() {
    let e = engine_with(Arc::new(CpuBackend::new()), config());
    let a = e.submit(synthetic(8, 1, 1, Priority::Normal, "req-1")).unwrap();
    let b = e.submit(synthetic(8, 1, 1, Priority::Normal, "req-1")).unwrap();
    assert_eq!(a.job_id, b.job_id);
    assert!(b.existing && !a.existing);
    let c = e.submit(synthetic(8, 1, 1, Priority::Normal, "req-2")).unwrap();
    assert_ne!(a.job_id, c.job_id);
    assert_eq!(e.wait(&a.job_id, None).unwrap().status, JobStatus::Completed);
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn cancel_drops_queued_work_and_unknown_ids_are_not_found() {
    let cfg = EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() };
    let e = engine_with(Arc::new(CpuBackend::new()), cfg);
    let first = e.submit(synthetic(12, 2, 0, Priority::Normal, "")).unwrap().job_id;
    let second = e.submit(synthetic(12, 4, 0, Priority::Normal, "")).unwrap().job_id;
    e.cancel(&second).unwrap();
    let out = e.wait(&second, None).unwrap();
    assert_eq!(out.status, JobStatus::Cancelled);
    assert!(out.proof.is_empty());
    assert_eq!(e.wait(&first, None).unwrap().status, JobStatus::Completed);
    let missing = cuzk_engine::JobId("job-nope".into());
    assert!(matches!(e.wait(&missing, None), Err(EngineError::NotFound(_))));
    assert!(matches!(e.cancel(&missing), Err(EngineError::NotFound(_))));
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn bad_requests_get_clear_errors() {
    let e = engine_with(Arc::new(CpuBackend::new()), config());
    let err = e.submit(synthetic_json(b"{not json", Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::InvalidArgument(m) if m.contains("JSON")), "{err}");
    let err = e.submit(synthetic(30, 1, 0, Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::InvalidArgument(m) if m.contains("log_size 30")), "{err}");
    let err = e.submit(synthetic(8, 0, 0, Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::InvalidArgument(m) if m.contains("partitions 0")), "{err}");
    let err = e.submit(JobRequest::new("", Priority::Normal, FilecoinRequest::new(CircuitKind::Porep))).unwrap_err();
    assert!(matches!(&err, EngineError::InvalidArgument(m) if m.contains("porep_seal_commit")), "{err}");
    assert!(matches!(e.preload("porep-32g"), Err(EngineError::NotFound(_))));
    // A partition larger than the whole budget is refused up front.
    let small = EngineConfig { memory_budget_bytes: 1 << 20, ..config() };
    let e2 = engine_with(Arc::new(CpuBackend::new()), small);
    assert!(matches!(e2.submit(synthetic(16, 1, 0, Priority::Normal, "")), Err(EngineError::ResourceExhausted(_))));
    // A partition that fits the budget, but not beside its parameter set (a budget of
    // exactly the set's size): the job fails saying so (it used to wait forever).
    e.preload("synthetic-2^11").unwrap();
    let set = e.status().parameter_sets.iter().find(|p| p.circuit_id == "synthetic-2^11").map(|p| p.size_bytes).unwrap();
    let e3 = engine_with(Arc::new(CpuBackend::new()), EngineConfig { memory_budget_bytes: set, ..config() });
    let id = e3.submit(synthetic(11, 1, 0, Priority::Normal, "")).unwrap().job_id;
    let o = e3.wait(&id, Some(Duration::from_secs(120))).unwrap();
    assert_eq!(o.status, JobStatus::Failed, "{}", o.error);
    assert!(o.error.contains("memory budget"), "{}", o.error);
    // And a set larger than the whole budget fails at its load.
    let e4 = engine_with(Arc::new(CpuBackend::new()), EngineConfig { memory_budget_bytes: set - 1, ..config() });
    let id = e4.submit(synthetic(11, 1, 0, Priority::Normal, "")).unwrap().job_id;
    let o = e4.wait(&id, Some(Duration::from_secs(120))).unwrap();
    assert_eq!(o.status, JobStatus::Failed, "{}", o.error);
    assert!(o.error.contains("more than the whole memory budget"), "{}", o.error);
    e3.shutdown(Duration::from_secs(1));
    e4.shutdown(Duration::from_secs(1));
    e.shutdown(Duration::from_secs(1));
    e2.shutdown(Duration::from_secs(1));
}

/// A backend whose first `bad` proofs are corrupted (A negated): they fail
/// verification.
struct Corrupting {
    inner: CpuBackend,
    bad: usize,
    calls: AtomicUsize,
}

impl ProvingBackend for Corrupting {
    fn name(&self) -> String {
        "corrupting".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        let mut out = self.inner.prove_with(u, p, c, r)?;
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.bad {
            for proof in &mut out.proofs {
                proof.a = -proof.a;
            }
        }
        Ok(out)
    }
}

#[test]
fn a_rejected_proof_is_retried_once_then_the_job_fails_without_a_proof() {
    // One bad proof: the retry succeeds.
    let once = Arc::new(Corrupting { inner: CpuBackend::new(), bad: 1, calls: AtomicUsize::new(0) });
    let e = engine_with(once, config());
    let s = e.submit(synthetic(8, 2, 5, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, None).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    check_proof(&out.proof, 8, 2, 5);
    assert!(e.metrics_text().contains("cuzk_verify_failures_total 1"));
    e.shutdown(Duration::from_secs(5));
    // Always bad: FAILED, the reason given, no proof bytes.
    let always = Arc::new(Corrupting { inner: CpuBackend::new(), bad: usize::MAX, calls: AtomicUsize::new(0) });
    let e = engine_with(always, config());
    let s = e.submit(synthetic(8, 1, 5, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, None).unwrap();
    assert_eq!(out.status, JobStatus::Failed);
    assert!(out.error.contains("does not verify"), "{}", out.error);
    assert!(out.proof.is_empty());
    assert_eq!(e.status().failed, 1);
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn shutdown_cancels_work_it_cannot_finish_in_the_grace_period() {
    let cfg = EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() };
    let e = engine_with(Arc::new(CpuBackend::new()), cfg);
    let ids: Vec<_> = (0..3).map(|i| e.submit(synthetic(14, 2, i, Priority::Normal, "")).unwrap().job_id).collect();
    e.shutdown(Duration::from_millis(10));
    for id in &ids {
        let out = e.wait(id, Some(Duration::ZERO)).unwrap();
        assert!(out.status.is_finished(), "{id}: {:?}", out.status);
    }
    assert!(ids.iter().any(|id| e.wait(id, Some(Duration::ZERO)).unwrap().status == JobStatus::Cancelled));
    assert!(matches!(e.submit(synthetic(8, 1, 0, Priority::Normal, "")), Err(EngineError::ShuttingDown)));
}

#[test]
fn the_timeline_records_every_stage_of_every_partition() {
    use cuzk_engine::timeline::{chrome_trace, gpu_busy, partition_waits, spans, svg_gantt};
    use cuzk_engine::EventKind;
    let cfg = EngineConfig { synthesis_workers: 2, workers_per_backend: 2, ..config() };
    let e = engine_with(Arc::new(CpuBackend::new()), cfg);
    let ids: Vec<_> = (0..3).map(|i| e.submit(synthetic(10, 2, i * 5, Priority::Normal, "")).unwrap().job_id).collect();
    for id in &ids {
        assert_eq!(e.wait(id, None).unwrap().status, JobStatus::Completed);
    }
    let ev = e.timeline_events();
    for id in &ids {
        let mine: Vec<_> = ev.iter().filter(|x| x.job == id.0).collect();
        assert_eq!(mine.first().unwrap().kind, EventKind::Queued);
        assert_eq!(mine.last().unwrap().kind, EventKind::Completed);
        for p in 0..2u32 {
            let order: Vec<EventKind> = mine.iter().filter(|x| x.partition == Some(p)).map(|x| x.kind).collect();
            assert_eq!(
                order,
                [
                    EventKind::Dequeued,
                    EventKind::SynthesisStart,
                    EventKind::SynthesisEnd,
                    EventKind::ProveStart,
                    EventKind::ProveEnd,
                    EventKind::Verified
                ]
            );
        }
    }
    // Per partition: admission (waiting for parameters and memory), synthesis, proof.
    let sp = spans(&ev);
    assert_eq!(sp.len(), 18);
    assert!(sp.iter().all(|s| s.lane.starts_with("synth-") || s.lane.starts_with("prove-0.")));
    let (busy, wall) = gpu_busy(&ev);
    assert!(busy > 0 && busy <= wall, "{busy} / {wall}");
    assert_eq!(chrome_trace(&ev)["traceEvents"].as_array().unwrap().iter().filter(|x| x["ph"] == "X").count(), 18);
    let waits = partition_waits(&ev);
    assert_eq!((waits.queue_us.len(), waits.admission_us.len(), waits.prover_us.len()), (6, 6, 6));
    assert!(svg_gantt(&ev).starts_with("<svg"));
    e.shutdown(Duration::from_secs(5));
}

/// Panics on its first call, then proves normally.
struct PanicsOnce {
    inner: CpuBackend,
    calls: AtomicUsize,
}

impl ProvingBackend for PanicsOnce {
    fn name(&self) -> String {
        "panics-once".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("simulated backend bug");
        }
        self.inner.prove_with(u, p, c, r)
    }
}

#[test]
fn a_panicking_backend_fails_the_job_and_the_worker_keeps_serving() {
    let cfg = EngineConfig { workers_per_backend: 1, ..config() };
    let e = engine_with(Arc::new(PanicsOnce { inner: CpuBackend::new(), calls: AtomicUsize::new(0) }), cfg);
    let s = e.submit(synthetic(8, 1, 1, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, None).unwrap();
    assert_eq!(out.status, JobStatus::Failed);
    assert!(out.error.contains("panicked: simulated backend bug"), "{}", out.error);
    let after_failure = e.status().memory_used_bytes;
    let s = e.submit(synthetic(8, 1, 2, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, Some(Duration::from_secs(60))).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    check_proof(&out.proof, 8, 1, 2);
    // The panicked partition gave back all it held, as the completed one did.
    assert_eq!(e.status().memory_used_bytes, after_failure);
    eprintln!("memory in use after the failure and after the completion: {after_failure}");
    e.shutdown(Duration::from_secs(5));
}

/// Proves correctly, but only once `go` is set (so another backend is called first).
struct WaitsFor {
    inner: CpuBackend,
    go: Arc<std::sync::atomic::AtomicBool>,
}

impl ProvingBackend for WaitsFor {
    fn name(&self) -> String {
        "waits".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        let t = std::time::Instant::now();
        while !self.go.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.inner.prove_with(u, p, c, r)
    }
}

/// Always wrong (A negated); sets `called` on its first call.
struct AlwaysBad {
    inner: CpuBackend,
    called: Arc<std::sync::atomic::AtomicBool>,
}

impl ProvingBackend for AlwaysBad {
    fn name(&self) -> String {
        "always-bad".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        let mut out = self.inner.prove_with(u, p, c, r)?;
        out.proofs.iter_mut().for_each(|x| x.a = -x.a);
        self.called.store(true, Ordering::SeqCst);
        Ok(out)
    }
}

#[test]
fn a_rejected_proof_is_retried_on_another_backend() {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let bad: Arc<dyn ProvingBackend> = Arc::new(AlwaysBad { inner: CpuBackend::new(), called: flag.clone() });
    let good: Arc<dyn ProvingBackend> = Arc::new(WaitsFor { inner: CpuBackend::new(), go: flag });
    let cfg = EngineConfig { workers_per_backend: 1, synthesis_lookahead: 2, ..config() };
    let e = Engine::start(cfg, vec![bad, good], vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(16))]).unwrap();
    let s = e.submit(synthetic(8, 4, 20, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, Some(Duration::from_secs(120))).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    check_proof(&out.proof, 8, 4, 20);
    assert!(!e.metrics_text().contains("cuzk_verify_failures_total 0"), "the bad backend was never used");
    e.shutdown(Duration::from_secs(5));
}

/// Memory pressure: a budget with room for the parameters and one partition only
/// (its evaluation buffers and its charge), against three jobs of three partitions
/// with two synthesis threads and two workers. Synthesis must wait for room rather
/// than overrun the budget, and every proof must still come back verified.
#[test]
fn a_budget_for_one_partition_serializes_the_work_and_every_proof_verifies() {
    let log = 10u32;
    let params = SyntheticKind::parameters(log).unwrap().size_bytes() as u64;
    let one = (4 * SCALAR_BYTES as u64) << log; // three a/b/c buffers and the partition's own charge
    let budget = params + one + one / 2;
    let cfg = EngineConfig { memory_budget_bytes: budget, synthesis_workers: 2, workers_per_backend: 2, ..config() };
    let e = engine_with(Arc::new(CpuBackend::new()), cfg);
    let ids: Vec<_> = (0..3u64).map(|j| e.submit(synthetic(log, 3, 10 * j, Priority::Normal, &format!("pressure-{j}"))).unwrap().job_id).collect();
    for (j, id) in ids.iter().enumerate() {
        let out = e.wait(id, Some(Duration::from_secs(120))).unwrap();
        assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
        check_proof(&out.proof, log, 3, 10 * j as u64);
    }
    let st = e.status();
    assert!(st.memory_peak_bytes <= budget, "peak {} over the budget {budget}", st.memory_peak_bytes);
    assert!(st.memory_peak_bytes >= params + one, "peak {}: the parameters and one partition were never charged together", st.memory_peak_bytes);
    e.shutdown(Duration::from_secs(5));
}

/// `premade` partitions copy one kept witness (seed `seed` for every partition) instead
/// of synthesizing: each proof verifies against that witness's inputs, and a second
/// job reuses the kept witness. `c2` needs log_size 27.
#[test]
fn premade_partitions_prove_the_kept_witness() {
    let off = engine_with(Arc::new(CpuBackend::new()), config());
    let err = off.submit(synthetic_json(br#"{"log_size": 8, "premade": true}"#, Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::InvalidArgument(m) if m.contains("allow_premade")), "{err}");
    off.shutdown(Duration::from_secs(1));
    let kind = SyntheticKind::new(16).allowing_premade(true);
    let e = Engine::start(config(), vec![Arc::new(CpuBackend::new())], vec![cuzk_engine::Handler::synthetic(kind)]).unwrap();
    let premade = |seed: u64| {
        synthetic_json(format!(r#"{{"log_size": 8, "partitions": 3, "seed": {seed}, "premade": true}}"#).as_bytes(), Priority::Normal, "")
    };
    let params = SyntheticKind::parameters(8).unwrap();
    let pvk = PreparedVerifyingKey::new(&params.vk);
    let shape = cuzk_groth16::synthetic::SyntheticShape::for_domain(8);
    for seed in [5u64, 5, 6] {
        let s = e.submit(premade(seed)).unwrap();
        let out = e.wait(&s.job_id, None).unwrap();
        assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
        let inputs = synthesize(shape.circuit(seed)).unwrap().input[1..].to_vec();
        for i in 0..3 {
            let proof = Proof::from_bytes(&out.proof[i * 192..(i + 1) * 192]).unwrap();
            assert!(verify_proof(&pvk, &proof, &inputs).unwrap(), "seed {seed}, partition {i} does not verify");
        }
    }
    let err = e.submit(synthetic_json(br#"{"log_size": 8, "c2": true}"#, Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::InvalidArgument(m) if m.contains("needs log_size 27")), "{err}");
    e.shutdown(Duration::from_secs(5));
}

/// The synthetic kind with its plans changed by `change`.
struct Changed {
    inner: SyntheticKind,
    change: Box<dyn Fn(cuzk_engine::JobPlan) -> cuzk_engine::JobPlan + Send + Sync>,
}

impl Changed {
    fn new(change: impl Fn(cuzk_engine::JobPlan) -> cuzk_engine::JobPlan + Send + Sync + 'static) -> Self {
        Changed { inner: SyntheticKind::new(16), change: Box::new(change) }
    }
}

impl cuzk_engine::KindHandler<cuzk_engine::SyntheticRequest> for Changed {
    fn plan(&self, r: &cuzk_engine::SyntheticRequest) -> Result<cuzk_engine::JobPlan, EngineError> {
        Ok((self.change)(self.inner.plan(r)?))
    }
}

impl cuzk_engine::ParameterSource for Changed {
    fn kind(&self) -> ProofKind {
        ProofKind::Synthetic
    }
    fn owns_circuit(&self, id: &str) -> bool {
        self.inner.owns_circuit(id)
    }
    fn load_params(&self, id: &str, points_in_file: bool) -> Result<ParameterSet, EngineError> {
        self.inner.load_params(id, points_in_file)
    }
}

struct WrongInputs(Arc<dyn cuzk_engine::PartitionWork>);

impl cuzk_engine::PartitionWork for WrongInputs {
    fn synthesize(&self, b: cuzk_groth16::synthesis::EvalBuffers) -> Result<SynthesizedCircuit, EngineError> {
        self.0.synthesize(b)
    }
    fn public_inputs(&self) -> Option<Result<Vec<cuzk_groth16::Scalar>, EngineError>> {
        Some(Ok(vec![cuzk_groth16::Scalar::from(7u64)]))
    }
}

#[test]
fn a_refused_final_check_or_wrong_public_inputs_fail_the_job_without_a_proof() {
    for wrong_inputs in [false, true] {
        // A final check that refuses every proof, or public inputs (the kind's own
        // computation) that differ from the circuit's.
        let kind = cuzk_engine::Handler::synthetic(Changed::new(move |mut plan| {
            if wrong_inputs {
                plan.partitions = plan.partitions.into_iter().map(|p| Arc::new(WrongInputs(p)) as Arc<dyn cuzk_engine::PartitionWork>).collect();
            } else {
                plan.final_check = Some(Arc::new(|proof: &[u8]| Err(format!("refused {} bytes", proof.len()))));
            }
            plan
        }));
        let e = Engine::start(config(), vec![Arc::new(CpuBackend::new())], vec![kind]).unwrap();
        let s = e.submit(synthetic(8, 2, 1, Priority::Normal, "")).unwrap();
        let out = e.wait(&s.job_id, Some(Duration::from_secs(120))).unwrap();
        assert_eq!(out.status, JobStatus::Failed);
        assert!(out.proof.is_empty(), "a refused proof was returned");
        let needle = if wrong_inputs { "public inputs differ" } else { "refused 384 bytes; no proof is returned" };
        assert!(out.error.contains(needle), "{}", out.error);
        e.shutdown(Duration::from_secs(5));
    }
}

/// A CPU backend that records what the engine tells it about parameter sets.
#[derive(Default)]
struct Recording {
    inner: CpuBackend,
    loaded: std::sync::Mutex<Vec<cuzk_groth16::ParameterSetId>>,
    released: std::sync::Mutex<Vec<cuzk_groth16::ParameterSetId>>,
}

impl ProvingBackend for Recording {
    fn name(&self) -> String {
        "recording".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        self.inner.prove_with(u, p, c, r)
    }
    fn load_params(&self, p: &ParameterSet, _: &dyn cuzk_groth16::Progress) -> Result<(), ProveError> {
        self.loaded.lock().unwrap().push(p.id());
        Ok(())
    }
    fn release_params(&self, id: cuzk_groth16::ParameterSetId) {
        self.released.lock().unwrap().push(id);
    }
}

#[test]
fn preloaded_sets_go_onto_the_backends_and_are_released_once_evicted_and_unused() {
    let b = Arc::new(Recording::default());
    let e = engine_with(b.clone(), config());
    e.preload("synthetic-2^8").unwrap();
    let first = b.loaded.lock().unwrap().clone();
    assert_eq!(first.len(), 1, "preload puts the set onto the backend");
    let s = e.submit(synthetic(8, 2, 5, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, None).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    assert!(b.released.lock().unwrap().is_empty(), "released while cached");
    assert!(e.evict("synthetic-2^8").unwrap().0);
    // The job is done; its workers drop their references as they return.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while b.released.lock().unwrap().is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(*b.released.lock().unwrap(), first, "the evicted set is released once, after its last use");
    e.preload("synthetic-2^8").unwrap();
    let loaded = b.loaded.lock().unwrap().clone();
    assert!(loaded.len() == 2 && loaded[1] != first[0], "loaded again as a new set: {loaded:?}");
    e.shutdown(Duration::from_secs(5));
}

/// A backend that would keep a set's points pinned in host memory (as a GPU backend
/// streaming a set too large for its device does).
#[derive(Default)]
struct Pinning {
    inner: CpuBackend,
}

const PINNED: u64 = 123_456_789;

impl ProvingBackend for Pinning {
    fn name(&self) -> String {
        "pinning".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        self.inner.prove_with(u, p, c, r)
    }
    fn host_bytes_for(&self, _: &ParameterSet) -> u64 {
        PINNED
    }
}

#[test]
fn host_memory_a_backend_pins_for_a_set_is_charged_with_it() {
    let charged = |b: Arc<dyn ProvingBackend>| {
        let e = engine_with(b, config());
        e.preload("synthetic-2^8").unwrap();
        let size = e.status().parameter_sets.iter().find(|p| p.circuit_id == "synthetic-2^8").map(|p| p.size_bytes);
        e.shutdown(Duration::from_secs(5));
        size.expect("the preloaded set is cached")
    };
    let plain = charged(Arc::new(Recording::default()));
    assert_eq!(charged(Arc::new(Pinning::default())), plain + PINNED);
}

/// With compiled matrices the synthetic kind synthesizes witnesses only (a, b, c from
/// the matrices: the CPU backend does not compute them itself, so synthesis does, into
/// counted buffers): the proofs verify, the timeline shows witness spans in place of
/// synthesis, and the budget charges the set's matrices with it.
#[test]
fn compiled_matrices_give_verified_proofs_from_witness_only_synthesis() {
    use cuzk_engine::EventKind;
    let kind = SyntheticKind::new(16).with_compiled_matrices(true);
    let e = Engine::start(config(), vec![Arc::new(CpuBackend::new())], vec![cuzk_engine::Handler::synthetic(kind)]).unwrap();
    let s = e.submit(synthetic(10, 3, 70, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, None).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    check_proof(&out.proof, 10, 3, 70);
    let ev = e.timeline_events();
    let kinds: Vec<EventKind> = ev.iter().filter(|x| x.job == s.job_id.0 && x.partition == Some(1)).map(|x| x.kind).collect();
    assert_eq!(
        kinds,
        [EventKind::Dequeued, EventKind::WitnessStart, EventKind::WitnessEnd, EventKind::ProveStart, EventKind::ProveEnd, EventKind::Verified]
    );
    let waits = cuzk_engine::timeline::partition_waits(&ev);
    assert_eq!(waits.admission_us.len(), 3);
    // The set's charge covers its matrices: more than the parameters alone.
    let st = e.status();
    let params_only = SyntheticKind::parameters(10).unwrap().size_bytes() as u64;
    assert!(st.parameter_sets[0].size_bytes > params_only, "{} ≤ {params_only}", st.parameter_sets[0].size_bytes);
    // A second job's witnesses go into the aux vectors the first one's left idle.
    let first = (st.aux_vectors_reused, st.aux_vectors_fresh);
    assert_eq!(first.0 + first.1, 3, "{first:?}");
    let s = e.submit(synthetic(10, 3, 71, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, None).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    check_proof(&out.proof, 10, 3, 71);
    let st = e.status();
    let second = (st.aux_vectors_reused - first.0, st.aux_vectors_fresh - first.1);
    assert_eq!(second.0 + second.1, 3, "{second:?}");
    // Every vector the first job made was idle when the second began (a partition's
    // vector goes back before its proof is recorded).
    assert!(second.0 >= first.1, "reused {} of the first job's {} vectors", second.0, first.1);
    e.shutdown(Duration::from_secs(5));
}

/// The CPU backend, saying it computes a, b, c from compiled matrices itself (as a GPU
/// whose plan has them on its device does; the CPU backend can).
struct ComputesProducts(CpuBackend);

impl ProvingBackend for ComputesProducts {
    fn name(&self) -> String {
        "computes-products".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        self.0.prove_with(u, p, c, r)
    }
    fn computes_products(&self, _: &ParameterSet) -> bool {
        true
    }
}

/// a, b, c made on the host are counted wherever they are made: by synthesis from the
/// compiled matrices where the backend does not compute them (the CPU; a GPU whose
/// plan has no room for them), and not at all where it does.
#[test]
fn a_b_c_computed_on_the_host_from_compiled_matrices_are_counted() {
    let peak = |b: Arc<dyn ProvingBackend>| {
        let kind = SyntheticKind::new(16).with_compiled_matrices(true);
        let e = Engine::start(config(), vec![b], vec![cuzk_engine::Handler::synthetic(kind)]).unwrap();
        let s = e.submit(synthetic(12, 1, 80, Priority::Normal, "")).unwrap();
        let out = e.wait(&s.job_id, None).unwrap();
        assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
        check_proof(&out.proof, 12, 1, 80);
        let peak = e.status().memory_peak_bytes;
        e.shutdown(Duration::from_secs(5));
        peak
    };
    let on_host = peak(Arc::new(CpuBackend::new()));
    let by_backend = peak(Arc::new(ComputesProducts(CpuBackend::new())));
    // Three buffers of the 2^12 domain's scalars at least.
    assert!(on_host >= by_backend + 3 * 32 * (1 << 12), "{on_host} vs {by_backend}");
}

/// A partition holding a token: what a decoded request holds.
struct HoldsToken(Arc<dyn cuzk_engine::PartitionWork>, #[allow(dead_code)] Arc<()>);

impl cuzk_engine::PartitionWork for HoldsToken {
    fn synthesize(&self, b: cuzk_groth16::synthesis::EvalBuffers) -> Result<SynthesizedCircuit, EngineError> {
        self.0.synthesize(b)
    }
}

/// A finished job, kept for job_retention, no longer holds its decoded request; and
/// the payload bytes of unfinished jobs are capped (admission.max_queued_request_bytes).
#[test]
fn a_finished_job_drops_its_request_and_queued_request_bytes_are_capped() {
    let token = Arc::new(());
    // Its partitions and final check hold the token, as a decoded request would.
    let held = token.clone();
    let kind = cuzk_engine::Handler::synthetic(Changed::new(move |mut plan| {
        plan.partitions = plan.partitions.into_iter().map(|p| Arc::new(HoldsToken(p, held.clone())) as Arc<dyn cuzk_engine::PartitionWork>).collect();
        let t = held.clone();
        plan.final_check = Some(Arc::new(move |_: &[u8]| Ok(format!("checked ({} holders)", Arc::strong_count(&t)))));
        plan
    }));
    let e = Engine::start(config(), vec![Arc::new(CpuBackend::new())], vec![kind]).unwrap();
    let s = e.submit(synthetic(8, 2, 3, Priority::Normal, "")).unwrap();
    let out = e.wait(&s.job_id, None).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{}", out.error);
    assert_eq!(e.wait(&s.job_id, Some(Duration::ZERO)).unwrap().status, JobStatus::Completed, "still answerable");
    assert_eq!(Arc::strong_count(&token), 2, "the finished job still holds its request (the test and the kind hold the other two)");
    e.shutdown(Duration::from_secs(5));

    let payload = synthetic(10, 64, 0, Priority::Normal, "").body.bytes();
    let admission = AdmissionLimits { max_queued_request_bytes: payload * 3 / 2, ..config().admission };
    let e = engine_with(Arc::new(CpuBackend::new()), EngineConfig { admission, ..config() });
    let first = e.submit(synthetic(10, 64, 0, Priority::Normal, "")).unwrap();
    let err = e.submit(synthetic(10, 64, 1, Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::ResourceExhausted(m) if m.contains("admission.max_queued_request_bytes")), "{err}");
    e.cancel(&first.job_id).unwrap();
    let again = e.submit(synthetic(10, 64, 1, Priority::Normal, "")).unwrap();
    e.cancel(&again.job_id).unwrap();
    e.shutdown(Duration::from_secs(5));
}
