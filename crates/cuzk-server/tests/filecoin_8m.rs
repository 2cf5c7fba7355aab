//! Filecoin proofs at 8 MiB, the largest size a development machine seals in minutes:
//! PoRep C2, SnapDeals, WindowPoSt and WinningPoSt requests as Curio sends them
//! (sectors sealed and updated by filecoin-proofs, parameters from cuzk's setup),
//! proved by the daemon on the CPU over gRPC and accepted by filecoin-proofs' own
//! verifiers; altered public data is rejected by them.
//!
//! Ignored in CI (making the fixtures takes minutes, most of it the setups of the 2^24
//! SnapDeals and 2^22 PoRep circuits: 95 s and 34 s on 16 cores, 17 min for PoRep's on
//! two busy ones; proving them takes minutes more, SnapDeals' the longest):
//! `cargo test --release -p cuzk-server --test filecoin_8m -- --ignored` (one kind:
//! add its name, e.g. `snap`). With `CUZK_8M_BACKEND=cuda` the daemon proves on the
//! first GPU instead (the device machine; no GPU is then a failure, never the CPU).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, Daemon};
use cuzk_engine::filecoin::FilecoinKind;
use cuzk_filecoin::fixtures::{fixtures_8m, Fixtures, PostFixture};
use cuzk_filecoin::CircuitKind;
use cuzk_filecoin::InputChecks;
use cuzk_groth16::CpuBackend;
use cuzk_server::pb::{self, await_proof_response::Status as JobStatus, ProofKind};

const SIZE: u64 = 8 << 20;

fn fixtures() -> &'static Fixtures {
    fixtures_8m().unwrap_or_else(|e| panic!("8 MiB fixtures: {e}"))
}

/// The daemon on the CPU; with `matrices`, proving with compiled matrices kept there
/// (witness-only synthesis, a, b, c from the matrices).
async fn daemon(f: &Fixtures, matrices: Option<&std::path::Path>) -> Daemon {
    let kinds: Vec<cuzk_engine::Handler> = CircuitKind::ALL
        .into_iter()
        .map(|k| {
            let kind = FilecoinKind::new(k, f.param_dir.clone(), InputChecks::Full);
            cuzk_engine::Handler::filecoin(match matrices {
                Some(dir) => kind.with_compiled_matrices(dir.to_owned()),
                None => kind,
            })
        })
        .collect();
    // SnapDeals' 8 MiB circuit is a 2^24 domain: its parameters take 4.3 GB and a
    // partition's a, b, c 1.6 GB (a 4 GiB budget left it waiting for memory forever,
    // before the engine refused what cannot fit).
    let cfg = cuzk_engine::EngineConfig { memory_budget_bytes: 12 << 30, ..config() };
    Daemon::start_with_kinds(cfg, vec![backend()], kinds, cuzk_engine::Buffers::plain()).await
}

/// The CPU, or with `CUZK_8M_BACKEND=cuda` the first GPU.
fn backend() -> Arc<dyn cuzk_groth16::ProvingBackend> {
    match std::env::var("CUZK_8M_BACKEND").as_deref() {
        Err(_) | Ok("cpu") => Arc::new(CpuBackend::new()),
        Ok("cuda") => {
            let gpu = cuzk_cuda::gpu_for_tests().expect("CUZK_8M_BACKEND=cuda: no usable GPU");
            eprintln!("proving on the GPU: {}", gpu.memory_summary());
            Arc::new(cuzk_cuda::CudaBackend::new(gpu))
        }
        Ok(other) => panic!("CUZK_8M_BACKEND={other}: cpu or cuda"),
    }
}

async fn prove(
    c: &mut cuzk_server::pb::proving_engine_client::ProvingEngineClient<tonic::transport::Channel>,
    r: pb::SubmitProofRequest,
) -> pb::AwaitProofResponse {
    let t = std::time::Instant::now();
    let r = c.prove(pb::ProveRequest { submit: Some(r) }).await.expect("prove").into_inner().result.expect("a result");
    eprintln!(
        "proved in {:.1} s ({} bytes; synthesis {} ms, proving {} ms)",
        t.elapsed().as_secs_f64(),
        r.proof.len(),
        r.synthesis_ms,
        r.gpu_compute_ms
    );
    r
}

fn post_request(kind: ProofKind, f: &PostFixture) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        proof_kind: kind as i32,
        sector_size: SIZE,
        registered_proof: f.registered_proof,
        vanilla_proofs: f.vanilla_proofs.clone(),
        randomness: f.randomness.to_vec(),
        miner_id: f.miner_id,
        ..Default::default()
    }
}

// One test per kind (they share the fixtures, made once and cached), so each can be
// run and recorded on its own: `... --ignored snap`; each also with compiled matrices
// (`... --ignored compiled`).

/// Runs `check` against a daemon synthesizing in full, or with compiled matrices (kept
/// in a temporary directory).
async fn with_daemon<F: std::future::Future<Output = ()>>(compiled: bool, check: impl FnOnce(Daemon, &'static Fixtures) -> F) {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(f, compiled.then_some(dir.path())).await;
    check(d, f).await;
}

macro_rules! both_paths {
    ($full:ident, $compiled:ident, $check:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        #[ignore = "minutes: 8 MiB sectors sealed, four setups, proofs on the CPU"]
        async fn $full() {
            with_daemon(false, $check).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        #[ignore = "minutes: 8 MiB sectors sealed, four setups, proofs on the CPU"]
        async fn $compiled() {
            with_daemon(true, $check).await;
        }
    };
}

both_paths!(
    winning_post_at_8mib_over_grpc_is_accepted_by_filecoin_proofs,
    winning_post_at_8mib_compiled_is_accepted_by_filecoin_proofs,
    winning_post
);
both_paths!(window_post_at_8mib_over_grpc_is_accepted_by_filecoin_proofs, window_post_at_8mib_compiled_is_accepted_by_filecoin_proofs, window_post);
both_paths!(porep_at_8mib_over_grpc_is_accepted_by_filecoin_proofs, porep_at_8mib_compiled_is_accepted_by_filecoin_proofs, porep);
both_paths!(snap_deals_at_8mib_over_grpc_is_accepted_by_filecoin_proofs, snap_deals_at_8mib_compiled_is_accepted_by_filecoin_proofs, snap_deals);

async fn winning_post(d: Daemon, f: &'static Fixtures) {
    let mut c = d.client().await;
    let r = prove(&mut c, post_request(ProofKind::WinningPost, &f.winning)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "WinningPoSt: {}", r.error_message);
    assert!(f.winning.filecoin_proofs_accepts(&r.proof, &f.winning.randomness, &f.winning.comm_rs), "filecoin-proofs accepts WinningPoSt");
    let mut other = f.winning.randomness;
    other[1] ^= 1;
    assert!(!f.winning.filecoin_proofs_accepts(&r.proof, &other, &f.winning.comm_rs), "and rejects it for other randomness");
    d.stop(Duration::from_secs(5)).await;
}

async fn window_post(d: Daemon, f: &'static Fixtures) {
    let mut c = d.client().await;
    let r = prove(&mut c, post_request(ProofKind::WindowPostPartition, &f.window)).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "WindowPoSt: {}", r.error_message);
    assert!(f.window.filecoin_proofs_accepts(&r.proof, &f.window.randomness, &f.window.comm_rs), "filecoin-proofs accepts WindowPoSt");
    let swapped = [f.window.comm_rs[1], f.window.comm_rs[0]];
    assert!(!f.window.filecoin_proofs_accepts(&r.proof, &f.window.randomness, &swapped), "and rejects it for other commitments");
    d.stop(Duration::from_secs(5)).await;
}

async fn porep(d: Daemon, f: &'static Fixtures) {
    let mut c = d.client().await;
    let p = &f.porep;
    let r = prove(
        &mut c,
        pb::SubmitProofRequest {
            proof_kind: ProofKind::PorepSealCommit as i32,
            sector_size: SIZE,
            registered_proof: p.registered_proof,
            vanilla_proof: p.envelope.clone(),
            sector_number: p.sector_number,
            miner_id: p.miner_id,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(r.status, JobStatus::Completed as i32, "PoRep: {}", r.error_message);
    assert!(p.filecoin_proofs_accepts(&r.proof, p.comm_r, p.seed), "verify_seal accepts the PoRep proof");
    let mut seed = p.seed;
    seed[2] ^= 1;
    assert!(!p.filecoin_proofs_accepts(&r.proof, p.comm_r, seed), "and rejects it for another seed");
    d.stop(Duration::from_secs(5)).await;
}

async fn snap_deals(d: Daemon, f: &'static Fixtures) {
    let mut c = d.client().await;
    let s = &f.snap;
    let r = prove(
        &mut c,
        pb::SubmitProofRequest {
            proof_kind: ProofKind::SnapDealsUpdate as i32,
            sector_size: SIZE,
            registered_proof: s.registered_proof,
            vanilla_proofs: s.vanilla_proofs.clone(),
            comm_r_old: s.comm_r_old.to_vec(),
            comm_r_new: s.comm_r_new.to_vec(),
            comm_d_new: s.comm_d_new.to_vec(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(r.status, JobStatus::Completed as i32, "SnapDeals: {}", r.error_message);
    assert_eq!(r.proof.len(), 192 * s.vanilla_proofs.len());
    assert!(s.filecoin_proofs_accepts(&r.proof, s.comm_r_new, s.comm_d_new), "filecoin-proofs accepts the update proof");
    let mut other = s.comm_d_new;
    other[0] ^= 1;
    assert!(!s.filecoin_proofs_accepts(&r.proof, s.comm_r_new, other), "and rejects it for other data");
    d.stop(Duration::from_secs(5)).await;
}
