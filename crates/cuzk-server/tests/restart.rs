//! A daemon restart (issue 27): a proof completed but not yet fetched is returned by the
//! next daemon on the same state directory, over the wire, under its job id and its
//! request id; without a state directory, or once the retention has passed, it is gone.
//! Real servers on real sockets, one after the other; CPU backend, synthetic circuits.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{check_proof, config, synthetic, Daemon};
use cuzk_engine::{EngineConfig, JobId, JobStatus as EngineStatus};
use cuzk_server::pb::await_proof_response::Status as JobStatus;
use cuzk_server::pb::{self};
use tonic::Code;

fn with_state(dir: Option<&Path>, retention: Duration) -> EngineConfig {
    EngineConfig { state_dir: dir.map(Path::to_path_buf), job_retention: retention, ..config() }
}

/// Submits a synthetic job over the wire and waits for it inside the engine, so no
/// client has fetched its proof when the daemon stops. Returns its job id.
async fn complete_unfetched(d: &Daemon, request_id: &str) -> String {
    let mut c = d.client().await;
    let id = c.submit_proof(synthetic(8, 2, 5, pb::Priority::Normal, request_id)).await.unwrap().into_inner().job_id;
    let (engine, job) = (d.engine.clone(), JobId(id.clone()));
    let outcome = tokio::task::spawn_blocking(move || engine.wait(&job, None)).await.unwrap().unwrap();
    assert_eq!(outcome.status, EngineStatus::Completed, "{}", outcome.error);
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completed_unfetched_proof_is_returned_after_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("cuzk-state");
    let first = Daemon::start(with_state(Some(&dir), Duration::from_secs(3600))).await;
    let id = complete_unfetched(&first, "sector-42").await;
    first.stop(Duration::from_secs(5)).await;
    assert!(dir.join(format!("{id}.proof.json")).is_file(), "no record in the state directory");

    let second = Daemon::start(with_state(Some(&dir), Duration::from_secs(3600))).await;
    let mut c = second.client().await;
    let r = c.await_proof(pb::AwaitProofRequest { job_id: id.clone(), timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert_eq!(r.job_id, id);
    check_proof(&r.proof, 8, 2, 5);
    assert!(r.total_ms >= r.synthesis_ms, "{r:?}");
    // Restored jobs are not this process's completions.
    let st = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(st.total_proofs_completed, 0);
    // The request id with its content still names the job: a resubmission gets it (and
    // its proof); other content under it is another job, as before the restart.
    let again = c.submit_proof(synthetic(8, 2, 5, pb::Priority::Normal, "sector-42")).await.unwrap().into_inner();
    assert_eq!(again.job_id, id);
    let other = c.submit_proof(synthetic(8, 2, 6, pb::Priority::Normal, "sector-42")).await.unwrap().into_inner().job_id;
    assert_ne!(other, id);
    let r = c.await_proof(pb::AwaitProofRequest { job_id: other, timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    check_proof(&r.proof, 8, 2, 6);
    // The resubmission reattached to the restored job; only the other content was proved.
    let st = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(st.total_proofs_completed, 1);
    second.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_state_directory_or_past_the_retention_the_proof_is_gone() {
    let first = Daemon::start(with_state(None, Duration::from_secs(3600))).await;
    let id = complete_unfetched(&first, "").await;
    first.stop(Duration::from_secs(5)).await;
    let second = Daemon::start(with_state(None, Duration::from_secs(3600))).await;
    let e = second.client().await.await_proof(pb::AwaitProofRequest { job_id: id, timeout_ms: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    second.stop(Duration::from_secs(5)).await;

    let state = tempfile::tempdir().unwrap();
    let first = Daemon::start(with_state(Some(state.path()), Duration::from_secs(3600))).await;
    let id = complete_unfetched(&first, "sector-43").await;
    first.stop(Duration::from_secs(5)).await;
    std::thread::sleep(Duration::from_millis(20));
    // The next daemon keeps finished jobs for 10 ms only: the record has expired.
    let second = Daemon::start(with_state(Some(state.path()), Duration::from_millis(10))).await;
    let e = second.client().await.await_proof(pb::AwaitProofRequest { job_id: id.clone(), timeout_ms: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(!state.path().join(format!("{id}.proof.json")).exists(), "an expired record was kept");
    second.stop(Duration::from_secs(5)).await;
}

#[test]
fn a_state_directory_that_cannot_be_made_stops_the_start_with_its_name() {
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let backends: Vec<std::sync::Arc<dyn cuzk_groth16::ProvingBackend>> = vec![std::sync::Arc::new(cuzk_groth16::CpuBackend::new())];
    let Err(e) = cuzk_engine::Engine::start(with_state(Some(&file.join("state")), Duration::from_secs(60)), backends, vec![]) else {
        panic!("the engine started on an unusable state directory")
    };
    assert!(e.to_string().contains("state directory") && e.to_string().contains("not-a-dir/state"), "{e}");
}
