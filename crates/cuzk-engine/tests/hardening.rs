//! The engine against careless and hostile clients (issue 26): unguessable job ids,
//! request ids reused with other content (another job, issue 41), admission caps and the CRITICAL rule,
//! EvictSRS of a set in use, circuit-id aliases, payloads of the wrong JSON shape,
//! and shutdown's grace period.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{check_proof, synthetic, synthetic_json};
use cuzk_engine::synthetic::SyntheticKind;
use cuzk_engine::{AdmissionLimits, Engine, EngineConfig, EngineError, JobStatus, Priority, ProofKind};
use cuzk_groth16::CpuBackend;

fn config() -> EngineConfig {
    EngineConfig { memory_budget_bytes: 1 << 30, synthesis_workers: 1, workers_per_backend: 1, ..EngineConfig::default() }
}

fn engine(cfg: EngineConfig) -> Engine {
    Engine::start(cfg, vec![Arc::new(CpuBackend::new())], vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(16))]).unwrap()
}

#[test]
fn job_ids_are_128_random_bits() {
    let e = engine(config());
    let ids: Vec<String> = (0..8).map(|i| e.submit(synthetic(6, 1, i, Priority::Low, "")).unwrap().job_id.0).collect();
    for id in &ids {
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
    // No shared prefix or counter: ids of consecutive jobs differ in most of their digits.
    for w in ids.windows(2) {
        let same = w[0].bytes().zip(w[1].bytes()).filter(|(a, b)| a == b).count();
        assert!(same < 16, "{} and {} look related", w[0], w[1]);
    }
    e.end_grace();
    e.shutdown(Duration::ZERO);
}

#[test]
fn a_request_id_reused_with_other_content_is_another_job() {
    let e = engine(config());
    let a = e.submit(synthetic(8, 1, 1, Priority::Normal, "sector-1")).unwrap();
    assert!(!a.existing);
    // The same content: the same job.
    let again = e.submit(synthetic(8, 1, 1, Priority::Normal, "sector-1")).unwrap();
    assert!(again.existing && again.job_id == a.job_id);
    // Another payload, size, priority or miner under the same id (as Curio sends the
    // partitions of one WindowPoSt deadline): a job of its own, each reattached to by
    // its own resubmission (the kind is in the digest too: see request.rs's tests).
    let others = [
        synthetic(8, 1, 2, Priority::Normal, "sector-1"),
        synthetic(9, 1, 1, Priority::Normal, "sector-1"),
        synthetic(8, 2, 1, Priority::Normal, "sector-1"),
        synthetic(8, 1, 1, Priority::High, "sector-1"),
        // The same circuit, other bytes.
        synthetic_json(br#"{"seed": 1, "log_size": 8, "partitions": 1}"#, Priority::Normal, "sector-1"),
    ];
    let shapes = [(8, 1, 1), (8, 1, 2), (9, 1, 1), (8, 2, 1), (8, 1, 1), (8, 1, 1)];
    let mut ids = vec![a.job_id.clone()];
    for other in &others {
        let s = e.submit(other.clone()).unwrap();
        assert!(!s.existing && !ids.contains(&s.job_id), "{other:?} got an existing job");
        assert_eq!(e.submit(other.clone()).unwrap().job_id, s.job_id, "{other:?} resubmitted got another job");
        ids.push(s.job_id);
    }
    // Every one completes with a proof of its own request's circuit.
    for (id, (log_size, partitions, seed)) in ids.iter().zip(shapes) {
        let o = e.wait(id, None).unwrap();
        assert_eq!(o.status, JobStatus::Completed, "{}", o.error);
        check_proof(&o.proof, log_size, partitions, seed);
    }
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn queue_caps_answer_resource_exhausted_and_critical_is_for_listed_kinds() {
    let admission = AdmissionLimits {
        max_queued_jobs: 3,
        max_queued_jobs_per_kind: 2,
        max_queued_partitions: 100,
        max_queued_partitions_per_kind: 5,
        ..AdmissionLimits::default()
    };
    let e = engine(EngineConfig { admission, ..config() });
    // Big enough that none finishes during the test.
    let first = e.submit(synthetic(14, 3, 0, Priority::Normal, "")).unwrap().job_id;
    let err = e.submit(synthetic(14, 3, 1, Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::ResourceExhausted(m) if m.contains("max_queued_partitions_per_kind")), "{err}");
    let second = e.submit(synthetic(14, 2, 2, Priority::Normal, "")).unwrap().job_id;
    let err = e.submit(synthetic(6, 1, 3, Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::ResourceExhausted(m) if m.contains("max_queued_jobs_per_kind")), "{err}");
    // CRITICAL is WinningPoSt's by default.
    let err = e.submit(synthetic(6, 1, 4, Priority::Critical, "")).unwrap_err();
    assert!(matches!(&err, EngineError::PermissionDenied(m) if m.contains("winning_post")), "{err}");
    // A cancelled job no longer counts.
    e.cancel(&first).unwrap();
    let third = e.submit(synthetic(6, 1, 5, Priority::Normal, "")).unwrap().job_id;
    e.cancel(&second).unwrap();
    assert_eq!(e.wait(&third, None).unwrap().status, JobStatus::Completed);
    e.shutdown(Duration::from_secs(5));

    // The total cap, over kinds (a kind allowed CRITICAL by the configuration).
    let admission = AdmissionLimits { max_queued_jobs: 1, critical_kinds: vec![ProofKind::Synthetic], ..AdmissionLimits::default() };
    let e = engine(EngineConfig { admission, ..config() });
    let only = e.submit(synthetic(14, 2, 0, Priority::Critical, "")).unwrap().job_id;
    let err = e.submit(synthetic(6, 1, 1, Priority::Critical, "")).unwrap_err();
    assert!(matches!(&err, EngineError::ResourceExhausted(m) if m.contains("admission.max_queued_jobs")), "{err}");
    e.cancel(&only).unwrap();
    e.shutdown(Duration::from_secs(5));
}

/// The synthetic kind, counting the requests it decodes.
struct CountingDecodes(SyntheticKind, Arc<std::sync::atomic::AtomicUsize>);

impl cuzk_engine::KindHandler<cuzk_engine::SyntheticRequest> for CountingDecodes {
    fn plan(&self, body: &cuzk_engine::SyntheticRequest) -> Result<cuzk_engine::JobPlan, EngineError> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.plan(body)
    }
}

impl cuzk_engine::ParameterSource for CountingDecodes {
    fn kind(&self) -> ProofKind {
        self.0.kind()
    }
    fn owns_circuit(&self, circuit_id: &str) -> bool {
        self.0.owns_circuit(circuit_id)
    }
    fn load_params(&self, circuit_id: &str, points_in_file: bool) -> Result<cuzk_groth16::ParameterSet, EngineError> {
        self.0.load_params(circuit_id, points_in_file)
    }
}

/// A full queue refuses a request before decoding it (a 90 MB PoRep envelope took ~1.8
/// s of cores to decode and check, and was then refused).
#[test]
fn a_full_queue_refuses_before_decoding() {
    let decodes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let admission = AdmissionLimits { max_queued_jobs: 1, ..AdmissionLimits::default() };
    let kinds: Vec<cuzk_engine::Handler> = vec![cuzk_engine::Handler::synthetic(CountingDecodes(SyntheticKind::new(16), decodes.clone()))];
    let e = Engine::start(EngineConfig { admission, ..config() }, vec![Arc::new(CpuBackend::new())], kinds).unwrap();
    let first = e.submit(synthetic(14, 3, 0, Priority::Normal, "")).unwrap().job_id;
    assert_eq!(decodes.load(std::sync::atomic::Ordering::SeqCst), 1);
    let err = e.submit(synthetic(6, 1, 1, Priority::Normal, "")).unwrap_err();
    assert!(matches!(&err, EngineError::ResourceExhausted(m) if m.contains("admission.max_queued_jobs")), "{err}");
    assert_eq!(decodes.load(std::sync::atomic::Ordering::SeqCst), 1, "the refused request was decoded first");
    e.cancel(&first).unwrap();
    // Room again: decoded and queued.
    let s = e.submit(synthetic(6, 1, 2, Priority::Normal, "")).unwrap();
    assert_eq!(decodes.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(e.wait(&s.job_id, None).unwrap().status, JobStatus::Completed);
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn a_set_in_use_is_not_evicted_and_never_loaded_twice() {
    let e = engine(config());
    let id = e.submit(synthetic(13, 4, 0, Priority::Normal, "")).unwrap().job_id;
    // Wait until a partition holds the set.
    let until = Instant::now() + Duration::from_secs(60);
    let busy = |e: &Engine| {
        let st = e.status();
        st.parameter_sets.iter().any(|p| p.ref_count > 0) && st.queues.iter().any(|q| q.in_progress > 0)
    };
    while !busy(&e) {
        assert!(Instant::now() < until, "no partition started");
        std::thread::sleep(Duration::from_millis(5));
    }
    match e.evict("synthetic-2^13") {
        Err(EngineError::FailedPrecondition(m)) => assert!(m.contains("in use") && m.contains(&id.0[..8]), "{m}"),
        r => panic!("evicting a set in use: {r:?}"),
    }
    // Still cached, so a preload finds it: no second copy.
    assert!(e.preload("synthetic-2^13").unwrap().0, "the set was loaded again");
    assert_eq!(e.status().parameter_sets.len(), 1);
    assert_eq!(e.wait(&id, None).unwrap().status, JobStatus::Completed);
    // Unused now: evicted, its memory back.
    let (was_loaded, freed) = e.evict("synthetic-2^13").unwrap();
    assert!(was_loaded && freed > 0);
    assert!(e.status().parameter_sets.is_empty());
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn circuit_id_aliases_are_rejected() {
    let e = engine(config());
    e.preload("synthetic-2^8").unwrap();
    for alias in ["synthetic-2^08", "synthetic-2^+8", "synthetic-2^0008", "synthetic-2^8 ", "synthetic-2^ 8", "synthetic-2^", "synthetic-2^-8"] {
        assert!(matches!(e.preload(alias), Err(EngineError::NotFound(_))), "{alias:?} was accepted");
        assert!(matches!(e.evict(alias), Err(EngineError::NotFound(_))), "{alias:?} was accepted");
    }
    let ids: Vec<String> = e.status().parameter_sets.iter().map(|p| p.circuit_id.clone()).collect();
    assert_eq!(ids, ["synthetic-2^8"]);
    e.shutdown(Duration::from_secs(5));
}

#[test]
fn a_synthetic_payload_must_be_a_json_object() {
    let e = engine(config());
    for bad in [&b"[10]"[..], b"[10, 1, 0]", b"10", b"\"x\"", b"null"] {
        let err = e.submit(synthetic_json(bad, Priority::Normal, "")).unwrap_err();
        assert!(matches!(&err, EngineError::InvalidArgument(m) if m.contains("JSON object")), "{}: {err}", String::from_utf8_lossy(bad));
    }
    e.shutdown(Duration::from_secs(1));
}

#[test]
fn error_messages_do_not_grow_with_their_input() {
    let e = engine(config());
    let huge = "x".repeat(1 << 20);
    for err in [
        e.wait(&cuzk_engine::JobId(huge.clone()), None).unwrap_err(),
        e.preload(&huge).unwrap_err(),
        e.cancel(&cuzk_engine::JobId(huge.clone())).unwrap_err(),
    ] {
        let m = err.to_string();
        assert!(m.len() < 400 && m.contains("1048576 bytes"), "{} bytes: {}", m.len(), m.chars().take(100).collect::<String>());
    }
    let r = synthetic_json(format!(r#"{{"log_size": 8, "{}": 1}}"#, "y".repeat(8 << 20)).as_bytes(), Priority::Normal, "");
    let m = e.submit(r).unwrap_err().to_string();
    // serde names the unknown field in full; the server cuts what it sends (crates/cuzk-server).
    assert!(m.contains("unknown field"), "{}", m.chars().take(200).collect::<String>());
    e.shutdown(Duration::from_secs(1));
}

#[test]
fn in_the_grace_period_only_jobs_that_can_finish_start_partitions() {
    let e = Arc::new(engine(config()));
    // What a partition of synthetic-2^12 takes here.
    let warm = e.submit(synthetic(12, 2, 100, Priority::Normal, "")).unwrap().job_id;
    assert_eq!(e.wait(&warm, None).unwrap().status, JobStatus::Completed);
    let per_partition = {
        let t = Instant::now();
        let j = e.submit(synthetic(12, 1, 101, Priority::Normal, "")).unwrap().job_id;
        assert_eq!(e.wait(&j, None).unwrap().status, JobStatus::Completed);
        t.elapsed()
    };
    // A long job, then a short one of an unmeasured circuit behind it.
    let long = e.submit(synthetic(12, 64, 0, Priority::Normal, "")).unwrap().job_id;
    let short = e.submit(synthetic(6, 1, 0, Priority::Normal, "")).unwrap().job_id;
    let until = Instant::now() + Duration::from_secs(60);
    while e.status().queues.iter().all(|q| q.in_progress == 0) {
        assert!(Instant::now() < until, "the long job did not start");
        std::thread::sleep(Duration::from_millis(2));
    }
    // A grace that the short job fits in several times over, and the long one (about
    // 32 partition times even if synthesis and proving overlap perfectly) does not.
    let grace = per_partition * 8 + Duration::from_millis(500);
    eprintln!("one partition of synthetic-2^12: {per_partition:?}; grace {grace:?}");
    let t = Instant::now();
    let stopper = {
        let e = e.clone();
        std::thread::spawn(move || e.shutdown(grace))
    };
    let s = e.wait(&short, None).unwrap();
    assert_eq!(s.status, JobStatus::Completed, "the short job did not run in the grace period: {}", s.error);
    let l = e.wait(&long, None).unwrap();
    assert_eq!(l.status, JobStatus::Cancelled);
    assert!(l.error.contains("cannot") || l.error.contains("needs about"), "{}", l.error);
    stopper.join().unwrap();
    assert!(t.elapsed() < grace, "shutdown waited for the whole grace period ({:?})", t.elapsed());
}

#[test]
fn end_grace_cuts_a_shutdown_short() {
    let e = Arc::new(engine(config()));
    let id = e.submit(synthetic(13, 50, 0, Priority::Normal, "")).unwrap().job_id;
    let t = Instant::now();
    let stopper = {
        let e = e.clone();
        std::thread::spawn(move || e.shutdown(Duration::from_secs(120)))
    };
    std::thread::sleep(Duration::from_millis(200));
    e.end_grace();
    stopper.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    let out = e.wait(&id, Some(Duration::ZERO)).unwrap();
    assert_eq!(out.status, JobStatus::Cancelled);
    assert!(out.error.contains("shutting down"), "{}", out.error);
}
