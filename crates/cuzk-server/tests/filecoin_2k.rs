//! Filecoin proofs at 2 KiB through the gRPC API: PoRep C2, SnapDeals, WindowPoSt and
//! WinningPoSt requests as Curio sends them (C1 in its envelope, bincode vanilla
//! proofs; sectors sealed and updated by filecoin-proofs),
//! proved by the daemon on the CPU, and the returned bytes accepted by
//! filecoin-proofs' own verifiers; altered public data is rejected by them; bad
//! requests get clear errors and the daemon keeps serving.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, Daemon};
use cuzk_engine::filecoin::FilecoinKind;
use cuzk_filecoin::fixtures::{fixtures_2k, Fixtures, PostFixture};
use cuzk_filecoin::CircuitKind;
use cuzk_groth16::CpuBackend;
use cuzk_server::pb::{self, await_proof_response::Status as JobStatus, ProofKind};
use tonic::Code;

fn fixtures() -> &'static Fixtures {
    fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"))
}

async fn daemon(param_dir: &std::path::Path) -> Daemon {
    daemon_compiling(param_dir, None).await
}

/// Every kind, on the CPU backend, with `cfg`.
async fn daemon_with(param_dir: &std::path::Path, cfg: cuzk_engine::EngineConfig) -> Daemon {
    let kinds: Vec<cuzk_engine::Handler> = CircuitKind::ALL
        .into_iter()
        .map(|k| cuzk_engine::Handler::filecoin(FilecoinKind::new(k, param_dir.to_owned(), cuzk_filecoin::InputChecks::Full)))
        .collect();
    Daemon::start_with_kinds(cfg, vec![Arc::new(CpuBackend::new())], kinds, cuzk_engine::Buffers::plain()).await
}

/// The daemon; with `matrices_dir`, proving with compiled matrices kept there.
async fn daemon_compiling(param_dir: &std::path::Path, matrices_dir: Option<&std::path::Path>) -> Daemon {
    let kinds: Vec<cuzk_engine::Handler> = CircuitKind::ALL
        .into_iter()
        .map(|k| {
            let kind = FilecoinKind::new(k, param_dir.to_owned(), cuzk_filecoin::InputChecks::Full);
            cuzk_engine::Handler::filecoin(match matrices_dir {
                Some(dir) => kind.with_compiled_matrices(dir.to_owned()),
                None => kind,
            })
        })
        .collect();
    Daemon::start_with_kinds(config(), vec![Arc::new(CpuBackend::new())], kinds, cuzk_engine::Buffers::plain()).await
}

fn request(kind: ProofKind, f: &PostFixture) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        proof_kind: kind as i32,
        sector_size: 2048,
        registered_proof: f.registered_proof,
        vanilla_proofs: f.vanilla_proofs.clone(),
        randomness: f.randomness.to_vec(),
        miner_id: f.miner_id,
        partition_index: 0,
        ..Default::default()
    }
}

/// The PoRep C2 request of the fixture, as Curio sends it (C1 in its envelope).
fn porep_request(f: &Fixtures) -> pb::SubmitProofRequest {
    let p = &f.porep;
    pb::SubmitProofRequest {
        proof_kind: ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: p.registered_proof,
        vanilla_proof: p.envelope.clone(),
        sector_number: p.sector_number,
        miner_id: p.miner_id,
        ..Default::default()
    }
}

/// The SnapDeals request of the fixture.
fn snap_request(f: &Fixtures) -> pb::SubmitProofRequest {
    let s = &f.snap;
    pb::SubmitProofRequest {
        proof_kind: ProofKind::SnapDealsUpdate as i32,
        sector_size: 2048,
        registered_proof: s.registered_proof,
        vanilla_proofs: s.vanilla_proofs.clone(),
        comm_r_old: s.comm_r_old.to_vec(),
        comm_r_new: s.comm_r_new.to_vec(),
        comm_d_new: s.comm_d_new.to_vec(),
        ..Default::default()
    }
}

async fn prove(
    c: &mut cuzk_server::pb::proving_engine_client::ProvingEngineClient<tonic::transport::Channel>,
    r: pb::SubmitProofRequest,
) -> pb::AwaitProofResponse {
    c.prove(pb::ProveRequest { submit: Some(r) }).await.expect("prove").into_inner().result.expect("a result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn post_proofs_over_grpc_are_accepted_by_filecoin_proofs() {
    let f = fixtures();
    let d = daemon(&f.param_dir).await;
    let mut c = d.client().await;

    let r = prove(&mut c, request(ProofKind::WinningPost, &f.winning)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert_eq!(r.proof.len(), 192);
    assert!(f.winning.filecoin_proofs_accepts(&r.proof, &f.winning.randomness, &f.winning.comm_rs), "filecoin-proofs accepts the WinningPoSt proof");
    let mut other = f.winning.randomness;
    other[1] ^= 1;
    assert!(!f.winning.filecoin_proofs_accepts(&r.proof, &other, &f.winning.comm_rs), "and rejects it for other randomness");

    let r = prove(&mut c, request(ProofKind::WindowPostPartition, &f.window)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert_eq!(r.proof.len(), 192);
    assert!(f.window.filecoin_proofs_accepts(&r.proof, &f.window.randomness, &f.window.comm_rs), "filecoin-proofs accepts the WindowPoSt proof");
    let swapped = [f.window.comm_rs[1], f.window.comm_rs[0]];
    assert!(!f.window.filecoin_proofs_accepts(&r.proof, &f.window.randomness, &swapped), "and rejects it for other commitments");
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_post_requests_get_clear_errors_and_the_daemon_keeps_serving() {
    let f = fixtures();
    let d = daemon(&f.param_dir).await;
    let mut c = d.client().await;
    let expect = |r: Result<tonic::Response<pb::SubmitProofResponse>, tonic::Status>, code: Code, needle: &str| {
        let e = r.expect_err("the request was accepted");
        assert_eq!(e.code(), code, "{e:?}");
        assert!(e.message().contains(needle), "{:?} lacks {needle:?}", e.message());
    };
    // One byte of a vanilla proof changed.
    let mut r = request(ProofKind::WindowPostPartition, &f.window);
    r.vanilla_proofs[1][300] ^= 0x10;
    expect(c.submit_proof(r).await, Code::InvalidArgument, "vanilla proofs");
    // A wrong sector size.
    let mut r = request(ProofKind::WinningPost, &f.winning);
    r.sector_size = 32 << 30;
    expect(c.submit_proof(r).await, Code::InvalidArgument, "sector_size");
    // A vanilla proof for another sector (the other sector's proof alone).
    let mut r = request(ProofKind::WinningPost, &f.winning);
    r.vanilla_proofs = vec![f.window.vanilla_proofs[1 - f.window.sector_ids.iter().position(|&s| s == f.winning.sector_ids[0]).unwrap()].clone()];
    expect(c.submit_proof(r).await, Code::InvalidArgument, "vanilla");
    // A registered proof of another kind.
    let mut r = request(ProofKind::WinningPost, &f.winning);
    r.registered_proof = 10;
    expect(c.submit_proof(r).await, Code::InvalidArgument, "WindowPoSt type");
    // Garbage.
    let mut r = request(ProofKind::WindowPostPartition, &f.window);
    r.vanilla_proofs = vec![b"not bincode".to_vec()];
    expect(c.submit_proof(r).await, Code::InvalidArgument, "bincode");
    // Still serving.
    let r = prove(&mut c, request(ProofKind::WinningPost, &f.winning)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    d.stop(Duration::from_secs(5)).await;

    // A daemon whose parameter directory lacks the files says which one.
    let empty = tempfile::tempdir().unwrap();
    let d = daemon(empty.path()).await;
    let mut c = d.client().await;
    let e = c.submit_proof(request(ProofKind::WinningPost, &f.winning)).await.expect_err("accepted without parameters");
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert!(e.message().contains("missing parameters") && e.message().contains("v28-proof-of-spacetime-fallback"), "{}", e.message());
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn porep_c2_over_grpc_is_accepted_by_verify_seal() {
    let f = fixtures();
    let p = &f.porep;
    let d = daemon(&f.param_dir).await;
    let mut c = d.client().await;
    let req = || porep_request(f);
    // Bad requests first: one byte of C1 changed, another miner, a wrong sector size.
    let mut bad = req();
    let mut c1 = p.c1.clone();
    let at = c1.len() / 2 + c1[c1.len() / 2..].iter().position(|b| b.is_ascii_digit()).unwrap();
    c1[at] = if c1[at] == b'1' { b'2' } else { b'1' };
    bad.vanilla_proof = c1;
    let e = c.submit_proof(bad).await.expect_err("a changed C1 was accepted");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("C1 output"), "{}", e.message());
    let e = c.submit_proof(pb::SubmitProofRequest { miner_id: p.miner_id + 1, ..req() }).await.expect_err("another miner");
    assert!(e.message().contains("replica_id"), "{}", e.message());
    let e = c.submit_proof(pb::SubmitProofRequest { sector_size: 8 << 20, ..req() }).await.expect_err("another size");
    assert!(e.message().contains("SectorSize"), "{}", e.message());

    let r = prove(&mut c, req()).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert_eq!(r.proof.len(), 192);
    assert!(p.filecoin_proofs_accepts(&r.proof, p.comm_r, p.seed), "verify_seal accepts the proof");
    let mut seed = p.seed;
    seed[2] ^= 1;
    assert!(!p.filecoin_proofs_accepts(&r.proof, p.comm_r, seed), "and rejects it for another seed");
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snap_deals_over_grpc_are_accepted_by_filecoin_proofs() {
    let f = fixtures();
    let s = &f.snap;
    let d = daemon(&f.param_dir).await;
    let mut c = d.client().await;
    let req = || snap_request(f);
    // Bad requests first: a byte of a vanilla proof changed, another comm_r_old.
    let mut bad = req();
    let mid = bad.vanilla_proofs[0].len() / 2;
    bad.vanilla_proofs[0][mid] ^= 0x21;
    let e = c.submit_proof(bad).await.expect_err("a changed vanilla proof was accepted");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let mut comm = s.comm_r_old;
    comm[1] ^= 1;
    let e = c.submit_proof(pb::SubmitProofRequest { comm_r_old: comm.to_vec(), ..req() }).await.expect_err("another comm_r_old");
    assert!(e.message().contains("vanilla proofs do not verify"), "{}", e.message());

    let r = prove(&mut c, req()).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert_eq!(r.proof.len(), 192 * s.vanilla_proofs.len());
    assert!(s.filecoin_proofs_accepts(&r.proof, s.comm_r_new, s.comm_d_new), "filecoin-proofs accepts the update proof");
    let mut other = s.comm_d_new;
    other[0] ^= 1;
    assert!(!s.filecoin_proofs_accepts(&r.proof, s.comm_r_new, other), "and rejects it for another comm_d_new");
    d.stop(Duration::from_secs(5)).await;
}

/// Every kind proved with compiled matrices (witness-only synthesis, a, b, c computed
/// by the backend from the matrices, compiled into their directory on first use): the
/// proofs are accepted by filecoin-proofs' verifiers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_kind_proved_with_compiled_matrices_is_accepted_by_filecoin_proofs() {
    let f = fixtures();
    let matrices = tempfile::tempdir().unwrap();
    let d = daemon_compiling(&f.param_dir, Some(matrices.path())).await;
    let mut c = d.client().await;

    let r = prove(&mut c, request(ProofKind::WinningPost, &f.winning)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert!(f.winning.filecoin_proofs_accepts(&r.proof, &f.winning.randomness, &f.winning.comm_rs), "WinningPoSt");
    let r = prove(&mut c, request(ProofKind::WindowPostPartition, &f.window)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert!(f.window.filecoin_proofs_accepts(&r.proof, &f.window.randomness, &f.window.comm_rs), "WindowPoSt");
    let p = &f.porep;
    let r = prove(&mut c, porep_request(f)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert!(p.filecoin_proofs_accepts(&r.proof, p.comm_r, p.seed), "PoRep");
    let s = &f.snap;
    let r = prove(&mut c, snap_request(f)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert!(s.filecoin_proofs_accepts(&r.proof, s.comm_r_new, s.comm_d_new), "SnapDeals");
    d.stop(Duration::from_secs(5)).await;
    // One matrices file per circuit (WinningPoSt and WindowPoSt at 2 KiB share theirs).
    let files =
        std::fs::read_dir(matrices.path()).unwrap().filter(|e| e.as_ref().unwrap().path().to_string_lossy().ends_with(".cuzk-matrices")).count();
    assert!(files >= 3, "{files} matrices files");
}

/// `synthesis.compiled_matrices = "auto"` with no matrices file (the default on a fresh
/// install): the first WinningPoSt proof runs on the slow path while the circuit's
/// matrices are compiled in the background; once written, the idle set is loaded again
/// with them (its host charge grows by the matrices' bytes) and the next proofs use
/// them. Every proof is accepted by filecoin-proofs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_circuit_without_matrices_gets_them_compiled_in_the_background() {
    let f = fixtures();
    let matrices = tempfile::tempdir().unwrap();
    let kinds: Vec<cuzk_engine::Handler> = vec![cuzk_engine::Handler::filecoin(
        FilecoinKind::new(CircuitKind::WinningPost, f.param_dir.clone(), cuzk_filecoin::InputChecks::Full)
            .with_compiled_matrices_in_background(matrices.path().to_owned()),
    )];
    let d = Daemon::start_with_kinds(config(), vec![Arc::new(CpuBackend::new())], kinds, cuzk_engine::Buffers::plain()).await;
    let mut c = d.client().await;
    let charged = |st: &pb::GetStatusResponse| st.loaded_srs.iter().find(|s| s.circuit_id == "winning-2k").map(|s| s.size_bytes);
    let r = prove(&mut c, request(ProofKind::WinningPost, &f.winning)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert!(f.winning.filecoin_proofs_accepts(&r.proof, &f.winning.randomness, &f.winning.comm_rs), "the slow path's proof");
    let before = charged(&c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner()).expect("winning-2k loaded");
    // The compile writes its file, then marks the circuit ready: each proof after that
    // finds the set idle, so it is loaded again with the matrices.
    let mut after = before;
    for _ in 0..120 {
        let r = prove(&mut c, request(ProofKind::WinningPost, &f.winning)).await;
        assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
        assert!(f.winning.filecoin_proofs_accepts(&r.proof, &f.winning.randomness, &f.winning.comm_rs), "a proof while or after compiling");
        after = charged(&c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner()).expect("winning-2k loaded");
        if after > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let file = std::fs::read_dir(matrices.path()).unwrap().filter_map(|e| e.ok()).find(|e| e.path().to_string_lossy().ends_with(".cuzk-matrices"));
    assert!(file.is_some(), "no matrices file was written");
    assert!(after > before, "the set was not loaded again with its matrices: charged {before} bytes, then {after}");
    d.stop(Duration::from_secs(5)).await;
}

/// Deadlines under load: with PoRep partitions filling every ordinary lane (one
/// proving, synthesized ones waiting for the prover, the synthesis workers busy), a
/// CRITICAL WinningPoSt is proved before any PoRep partition that had not started
/// proving when it came, its synthesis starts before the PoRep syntheses in progress
/// end (a lane of its own), and filecoin-proofs accepts its proof.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_critical_winning_post_is_proved_before_queued_porep_partitions() {
    use cuzk_engine::timeline::EventKind;
    use cuzk_engine::PartitionState;
    let f = fixtures();
    let cfg =
        cuzk_engine::EngineConfig { synthesis_workers: 2, synthesis_lookahead: 2, workers_per_backend: 1, memory_budget_bytes: 8 << 30, ..config() };
    let d = daemon_with(&f.param_dir, cfg).await;
    let mut c = d.client().await;
    let mut porep = Vec::new();
    for i in 0..5 {
        let r = pb::SubmitProofRequest { request_id: format!("porep-{i}"), priority: pb::Priority::Normal as i32, ..porep_request(f) };
        porep.push(c.submit_proof(r).await.expect("PoRep accepted").into_inner().job_id);
    }
    // Wait for a PoRep partition to have just started proving while another waits for
    // the prover: the proof in progress then has nearly all of its time left.
    let states = || {
        d.engine
            .job_summaries()
            .into_iter()
            .filter(|j| porep.contains(&j.job_id.0))
            .flat_map(|j| j.partitions.into_iter().map(move |p| (j.job_id.0.clone(), p)))
            .collect::<Vec<_>>()
    };
    let proving =
        |s: &[(String, PartitionState)]| s.iter().filter(|(_, p)| *p == PartitionState::Proving).map(|(j, _)| j.clone()).collect::<Vec<_>>();
    let waited = std::time::Instant::now();
    let mut seen = proving(&states());
    let at_submission = loop {
        assert!(waited.elapsed() < Duration::from_secs(1800), "no PoRep partition proving with another waiting: {:?}", states());
        let s = states();
        let now = proving(&s);
        if now.iter().any(|j| !seen.contains(j)) && s.iter().any(|(_, p)| *p == PartitionState::WaitingForProver) {
            break s;
        }
        seen = now;
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let not_started: Vec<String> = at_submission
        .iter()
        .filter(|(_, p)| matches!(p, PartitionState::Queued | PartitionState::Synthesizing | PartitionState::WaitingForProver))
        .map(|(j, _)| j.clone())
        .collect();
    let synthesizing: Vec<String> = at_submission.iter().filter(|(_, p)| *p == PartitionState::Synthesizing).map(|(j, _)| j.clone()).collect();
    let r = prove(&mut c, pb::SubmitProofRequest { priority: pb::Priority::Critical as i32, ..request(ProofKind::WinningPost, &f.winning) }).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert!(f.winning.filecoin_proofs_accepts(&r.proof, &f.winning.randomness, &f.winning.comm_rs), "filecoin-proofs accepts the WinningPoSt proof");
    // The PoRep jobs are not needed any more.
    for id in &porep {
        let _ = c.cancel_proof(pb::CancelProofRequest { job_id: id.clone() }).await;
    }
    let events = d.engine.timeline_events();
    let at = |job: &str, kind: EventKind| events.iter().filter(|e| e.job == job && e.kind == kind).map(|e| e.t_us).collect::<Vec<_>>();
    let winning_done = *at(&r.job_id, EventKind::Verified).first().expect("the WinningPoSt's proof was verified");
    for job in &not_started {
        for start in at(job, EventKind::ProveStart) {
            assert!(winning_done < start, "PoRep {job}'s proof started at {start} µs, before the WinningPoSt's was verified at {winning_done} µs");
        }
    }
    let winning_synthesis =
        at(&r.job_id, EventKind::SynthesisStart).into_iter().chain(at(&r.job_id, EventKind::WitnessStart)).min().expect("synthesized");
    for job in &synthesizing {
        for end in at(job, EventKind::SynthesisEnd) {
            assert!(winning_synthesis < end, "the WinningPoSt's synthesis waited for PoRep {job}'s, which ended at {end} µs");
        }
    }
    d.stop(Duration::from_secs(5)).await;
}
