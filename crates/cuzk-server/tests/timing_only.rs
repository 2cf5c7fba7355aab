//! Shape-true inputs (`cuzk fixture`) and timing parameters (`cuzk setup
//! --timing-params`) over the gRPC API: a daemon for real work refuses both with a
//! clear error; a timing-only daemon proves shape-true inputs without checking them and
//! answers FAILED with a note naming the mode and no proof (never COMPLETED without one).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{config, Daemon};
use cuzk_engine::filecoin::FilecoinKind;
use cuzk_filecoin::fixtures::fixtures_2k;
use cuzk_filecoin::{setup, Circuit, CircuitKind, InputChecks, SectorSize};
use cuzk_groth16::CpuBackend;
use cuzk_server::pb::{self, await_proof_response::Status as JobStatus};
use cuzk_server::submit_request_of;
use rand::SeedableRng;
use tonic::Code;

async fn daemon(param_dir: &Path, checks: InputChecks) -> Daemon {
    let kinds: Vec<cuzk_engine::Handler> =
        CircuitKind::ALL.into_iter().map(|k| cuzk_engine::Handler::filecoin(FilecoinKind::new(k, param_dir.to_owned(), checks))).collect();
    Daemon::start_with_kinds(config(), vec![Arc::new(CpuBackend::new())], kinds, cuzk_engine::Buffers::plain()).await
}

/// Timing parameters of `circuit` in `dir`, under filecoin-proofs' names.
fn timing_params(circuit: Circuit, dir: &Path) {
    let shape = setup::blank_shape(circuit).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
    cuzk_groth16::generator::write_timing_params(&shape, &circuit.params_path(dir).unwrap(), &mut rng, &cuzk_groth16::NoProgress).unwrap();
}

fn shape_true_request(kind: CircuitKind) -> pb::SubmitProofRequest {
    submit_request_of(&kind.shape_true_request(SectorSize::S2KiB, 3).unwrap().request)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_daemon_for_real_work_refuses_shape_true_inputs_and_timing_parameters() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let d = daemon(&f.param_dir, InputChecks::Full).await;
    let mut c = d.client().await;
    for kind in [CircuitKind::WinningPost, CircuitKind::WindowPost, CircuitKind::Porep, CircuitKind::Snap] {
        let e = c.submit_proof(shape_true_request(kind)).await.expect_err("a shape-true input was accepted");
        assert_eq!(e.code(), Code::InvalidArgument, "{kind:?}: {e:?}");
        assert!(e.message().contains("do not verify"), "{kind:?}: {}", e.message());
    }
    d.stop(Duration::from_secs(5)).await;

    // Real inputs, but timing parameters where the real ones should be.
    let dir = tempfile::tempdir().unwrap();
    timing_params(Circuit { kind: CircuitKind::WinningPost, size: SectorSize::S2KiB }, dir.path());
    let d = daemon(dir.path(), InputChecks::Full).await;
    let mut c = d.client().await;
    let real = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::WinningPost as i32,
        sector_size: 2048,
        registered_proof: f.winning.registered_proof,
        vanilla_proofs: f.winning.vanilla_proofs.clone(),
        randomness: f.winning.randomness.to_vec(),
        miner_id: f.winning.miner_id,
        ..Default::default()
    };
    let e = c.submit_proof(real).await.expect_err("a job on timing parameters was accepted");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("timing parameters"), "{}", e.message());
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_timing_only_daemon_proves_shape_true_inputs_and_returns_no_proof() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [CircuitKind::WinningPost, CircuitKind::WindowPost] {
        timing_params(Circuit { kind, size: SectorSize::S2KiB }, dir.path());
    }
    let d = daemon(dir.path(), InputChecks::TimingOnly).await;
    let mut c = d.client().await;
    for kind in [CircuitKind::WinningPost, CircuitKind::WindowPost] {
        let r = c
            .prove(pb::ProveRequest { submit: Some(shape_true_request(kind)) })
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e:?}"))
            .into_inner()
            .result
            .unwrap();
        // Proved, but never COMPLETED without a proof: FAILED, naming the mode.
        assert_eq!(r.status, JobStatus::Failed as i32, "{kind:?}: {}", r.error_message);
        assert!(r.error_message.starts_with(cuzk_engine::TIMING_ONLY_NOTE), "{kind:?}: {}", r.error_message);
        assert!(r.proof.is_empty(), "{kind:?}: a timing-only job returned {} proof bytes", r.proof.len());
        assert!(r.error_message.contains("timing only") && r.error_message.contains("not returned"), "{kind:?}: {}", r.error_message);
        assert!(r.gpu_compute_ms > 0 || r.synthesis_ms > 0, "{kind:?}: the job's times are reported");
    }
    d.stop(Duration::from_secs(5)).await;
}
