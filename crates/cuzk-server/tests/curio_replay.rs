//! Requests exactly as Curio's client sends them (issue 41; read against
//! filecoin-project/curio's `lib/cuzk/client.go` and `lib/ffi/cuzk_funcs.go`): `Prove`
//! only, plain gRPC with 256 MiB messages both ways, request ids as its client formats
//! them, `registered_proof` in its Go ABI numbering unmapped, its priority per kind, the
//! PoRep C1 in its envelope, bincode vanilla proofs, the SnapDeals commitments as the 32
//! raw bytes taken out of their CIDs. Every answer must be COMPLETED with a proof that
//! filecoin-proofs' verifier accepts for that request's own sectors.
//!
//! The case that matters most: Curio proves each partition of a WindowPoSt deadline as
//! its own request, always with partition index 0, under one request id
//! (`wdpost-<miner>-0-<the first 8 randomness bytes as Go prints a byte slice>`), so the
//! partitions of one deadline share an id and differ in their vanilla proofs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, Daemon};
use cuzk_engine::filecoin::FilecoinKind;
use cuzk_filecoin::fixtures::{fixtures_2k, Fixtures, PostFixture};
use cuzk_filecoin::CircuitKind;
use cuzk_groth16::CpuBackend;
use cuzk_server::pb::proving_engine_client::ProvingEngineClient;
use cuzk_server::pb::{self, await_proof_response::Status, Priority, ProofKind};
use tonic::transport::Channel;

/// Curio's client: 256 MiB messages each way, no token, no TLS.
const CURIO_MESSAGE_BYTES: usize = 256 << 20;

fn fixtures() -> &'static Fixtures {
    fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"))
}

async fn daemon(f: &Fixtures) -> Daemon {
    let kinds: Vec<cuzk_engine::Handler> = CircuitKind::ALL
        .into_iter()
        .map(|k| cuzk_engine::Handler::filecoin(FilecoinKind::new(k, f.param_dir.clone(), cuzk_filecoin::InputChecks::Full)))
        .collect();
    Daemon::start_with_kinds(config(), vec![Arc::new(CpuBackend::new())], kinds, cuzk_engine::Buffers::plain()).await
}

async fn curio_client(d: &Daemon) -> ProvingEngineClient<Channel> {
    ProvingEngineClient::connect(format!("http://{}", d.addr))
        .await
        .unwrap()
        .max_decoding_message_size(CURIO_MESSAGE_BYTES)
        .max_encoding_message_size(CURIO_MESSAGE_BYTES)
}

/// Go's `%d` of a byte slice: `[12 34 56]`.
fn go_bytes(b: &[u8]) -> String {
    format!("[{}]", b.iter().map(u8::to_string).collect::<Vec<_>>().join(" "))
}

/// Go's `%x` of a byte slice.
fn go_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn porep(f: &Fixtures) -> pb::SubmitProofRequest {
    let p = &f.porep;
    pb::SubmitProofRequest {
        request_id: format!("porep-{}-{}", p.miner_id, p.sector_number),
        proof_kind: ProofKind::PorepSealCommit as i32,
        sector_size: p.sector_size,
        registered_proof: p.registered_proof,
        priority: Priority::Normal as i32,
        vanilla_proof: p.envelope.clone(),
        sector_number: p.sector_number,
        miner_id: p.miner_id,
        ..Default::default()
    }
}

fn snap(f: &Fixtures, sector_number: u64) -> pb::SubmitProofRequest {
    let s = &f.snap;
    pb::SubmitProofRequest {
        request_id: format!("snap-{}-{sector_number}", f.porep.miner_id),
        proof_kind: ProofKind::SnapDealsUpdate as i32,
        sector_size: s.sector_size,
        registered_proof: s.registered_proof,
        priority: Priority::Normal as i32,
        vanilla_proofs: s.vanilla_proofs.clone(),
        sector_number,
        miner_id: f.porep.miner_id,
        comm_r_old: s.comm_r_old.to_vec(),
        comm_r_new: s.comm_r_new.to_vec(),
        comm_d_new: s.comm_d_new.to_vec(),
        ..Default::default()
    }
}

fn winning(w: &PostFixture) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: format!("winpost-{}-{}", w.miner_id, go_hex(&w.randomness[..8])),
        proof_kind: ProofKind::WinningPost as i32,
        sector_size: w.sector_size,
        registered_proof: w.registered_proof,
        priority: Priority::Critical as i32,
        vanilla_proofs: w.vanilla_proofs.clone(),
        miner_id: w.miner_id,
        randomness: w.randomness.to_vec(),
        ..Default::default()
    }
}

/// One partition of a WindowPoSt deadline as Curio sends it: partition index 0, the
/// deadline's request id.
fn window_partition(p: &PostFixture) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: format!("wdpost-{}-0-{}", p.miner_id, go_bytes(&p.randomness[..8])),
        proof_kind: ProofKind::WindowPostPartition as i32,
        sector_size: p.sector_size,
        registered_proof: p.registered_proof,
        priority: Priority::High as i32,
        vanilla_proofs: p.vanilla_proofs.clone(),
        miner_id: p.miner_id,
        randomness: p.randomness.to_vec(),
        partition_index: 0,
        ..Default::default()
    }
}

/// The deadline's partitions: the fixture's two sectors together, then each alone (a
/// partition holds 1 to 2 sectors at 2 KiB), each with its own vanilla proofs.
fn partitions(w: &PostFixture) -> Vec<PostFixture> {
    let only = |i: usize| PostFixture {
        sector_ids: vec![w.sector_ids[i]],
        comm_rs: vec![w.comm_rs[i]],
        vanilla_proofs: vec![w.vanilla_proofs[i].clone()],
        ..w.clone()
    };
    vec![w.clone(), only(0), only(1)]
}

/// `Prove`, as Curio calls it: COMPLETED is success, anything else an error.
async fn prove(c: &mut ProvingEngineClient<Channel>, r: pb::SubmitProofRequest) -> pb::AwaitProofResponse {
    let id = r.request_id.clone();
    let res = c.prove(pb::ProveRequest { submit: Some(r) }).await.unwrap_or_else(|e| panic!("{id}: {e:?}")).into_inner().result.expect("a result");
    assert_eq!(res.status, Status::Completed as i32, "{id}: {}", res.error_message);
    res
}

/// Each proof is accepted for its own partition's sectors and refused for every other
/// partition's.
fn check_partitions(parts: &[PostFixture], proofs: &[Vec<u8>]) {
    for (i, (p, proof)) in parts.iter().zip(proofs).enumerate() {
        assert_eq!(proof.len(), 192);
        assert!(p.filecoin_proofs_accepts(proof, &p.randomness, &p.comm_rs), "partition {i}'s proof is refused for its own sectors");
        for (j, q) in parts.iter().enumerate().filter(|&(j, _)| j != i) {
            assert!(!q.filecoin_proofs_accepts(proof, &q.randomness, &q.comm_rs), "partition {i}'s proof is accepted for partition {j}'s sectors");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn window_post_partitions_of_one_deadline_each_get_their_own_proof() {
    let f = fixtures();
    let all = partitions(&f.window);
    let id = window_partition(&all[0]).request_id;
    assert!(all.iter().all(|p| window_partition(p).request_id == id), "one deadline, one request id");
    for n in [2, 3] {
        let parts = &all[..n];
        // Submitted at once, as Curio's tasks for one deadline run side by side.
        let d = daemon(f).await;
        let mut calls = Vec::new();
        for p in parts {
            let (mut c, r) = (curio_client(&d).await, window_partition(p));
            calls.push(tokio::spawn(async move { prove(&mut c, r).await }));
        }
        let mut answers = Vec::new();
        for call in calls {
            answers.push(call.await.expect("a Prove call panicked"));
        }
        let jobs: std::collections::HashSet<_> = answers.iter().map(|a| a.job_id.clone()).collect();
        assert_eq!(jobs.len(), n, "{n} partitions at once: each its own job");
        check_partitions(parts, &answers.iter().map(|a| a.proof.clone()).collect::<Vec<_>>());
        d.stop(Duration::from_secs(5)).await;

        // One after another: each later partition arrives while the earlier ones are kept
        // as completed jobs under the same id.
        let d = daemon(f).await;
        let mut c = curio_client(&d).await;
        let mut answers = Vec::new();
        for p in parts {
            answers.push(prove(&mut c, window_partition(p)).await);
        }
        let jobs: std::collections::HashSet<_> = answers.iter().map(|a| a.job_id.clone()).collect();
        assert_eq!(jobs.len(), n, "{n} partitions one after another: each its own job");
        check_partitions(parts, &answers.iter().map(|a| a.proof.clone()).collect::<Vec<_>>());
        // A retried call (Curio's task run again) reattaches: the same job, the same proof.
        for (p, first) in parts.iter().zip(&answers) {
            let again = prove(&mut c, window_partition(p)).await;
            assert_eq!((&again.job_id, &again.proof), (&first.job_id, &first.proof));
        }
        d.stop(Duration::from_secs(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn porep_snap_and_winning_post_as_curio_sends_them() {
    let f = fixtures();
    let d = daemon(f).await;
    let mut c = curio_client(&d).await;
    // Go ABI numbers, unmapped: seal StackedDrg2KiBV1_1 = 5, update StackedDrg2KiBV1 = 0,
    // winning StackedDrgWinning2KiBV1 = 0, window StackedDrgWindow2KiBV1_1 = 10.
    assert_eq!((f.porep.registered_proof, f.snap.registered_proof, f.winning.registered_proof, f.window.registered_proof), (5, 0, 0, 10));

    let first_porep = prove(&mut c, porep(f)).await;
    assert!(f.porep.filecoin_proofs_accepts(&first_porep.proof, f.porep.comm_r, f.porep.seed), "verify_seal refuses the PoRep proof");
    let mut seed = f.porep.seed;
    seed[0] ^= 1;
    assert!(!f.porep.filecoin_proofs_accepts(&first_porep.proof, f.porep.comm_r, seed));

    let r = prove(&mut c, snap(f, 2)).await;
    let s = &f.snap;
    assert!(s.filecoin_proofs_accepts(&r.proof, s.comm_r_new, s.comm_d_new), "the SnapDeals proof is refused");
    let mut other = s.comm_d_new;
    other[0] ^= 1;
    assert!(!s.filecoin_proofs_accepts(&r.proof, s.comm_r_new, other));

    let w = &f.winning;
    let r = prove(&mut c, winning(w)).await;
    assert!(w.filecoin_proofs_accepts(&r.proof, &w.randomness, &w.comm_rs), "the WinningPoSt proof is refused");
    let mut other = w.randomness;
    other[0] ^= 1;
    assert!(!w.filecoin_proofs_accepts(&r.proof, &other, &w.comm_rs));

    // The same sector proved again with the same content within the hour: the same job.
    let again = prove(&mut c, porep(f)).await;
    assert_eq!((&again.job_id, &again.proof), (&first_porep.job_id, &first_porep.proof));
    d.stop(Duration::from_secs(5)).await;
}
