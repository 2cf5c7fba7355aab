//! The gRPC service over a real TCP socket, driven by a client generated from the same
//! .proto; CPU backend, synthetic circuits.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{check_proof, config, synthetic, Daemon};
use cuzk_engine::EngineConfig;
use cuzk_server::pb::await_proof_response::Status as JobStatus;
use cuzk_server::pb::{self, ProofKind};
use cuzk_server::MAX_MESSAGE_BYTES;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prove_returns_verified_partition_proofs_in_order() {
    let d = Daemon::start(config()).await;
    let mut c = d.client().await;
    let r = c.prove(pb::ProveRequest { submit: Some(synthetic(8, 2, 11, pb::Priority::Normal, "")) }).await.unwrap().into_inner().result.unwrap();
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    check_proof(&r.proof, 8, 2, 11);
    assert!(r.total_ms >= r.gpu_compute_ms && r.total_ms >= r.queue_wait_ms, "{r:?}");
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn submit_await_status_metrics_preload_evict() {
    let d = Daemon::start(config()).await;
    let mut c = d.client().await;
    let id = |s: &str| pb::PreloadSrsRequest { circuit_id: s.into() };
    let p = c.preload_srs(id("synthetic-2^8")).await.unwrap().into_inner();
    assert!(!p.already_loaded);
    assert!(c.preload_srs(id("synthetic-2^8")).await.unwrap().into_inner().already_loaded);
    assert_eq!(c.preload_srs(id("porep-32g")).await.unwrap_err().code(), Code::NotFound);

    let s = c.submit_proof(synthetic(8, 1, 3, pb::Priority::High, "")).await.unwrap().into_inner();
    assert!(!s.job_id.is_empty());
    let r = c.await_proof(pb::AwaitProofRequest { job_id: s.job_id.clone(), timeout_ms: 60_000 }).await.unwrap().into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert_eq!(r.job_id, s.job_id);
    check_proof(&r.proof, 8, 1, 3);
    assert_eq!(r.srs_load_ms, 0, "the parameters were preloaded");

    let st = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(st.total_proofs_completed, 1);
    assert_eq!(st.gpus.len(), 1);
    assert_eq!(st.gpus[0].name, "cpu");
    assert!(st.loaded_srs.iter().any(|x| x.circuit_id == "synthetic-2^8" && x.size_bytes > 0));
    assert!(st.queues.iter().any(|q| q.proof_kind == "synthetic"));
    assert!(st.pinned_memory_bytes <= st.pinned_memory_limit_bytes);
    let m = c.get_metrics(pb::GetMetricsRequest {}).await.unwrap().into_inner().prometheus_text;
    assert!(m.contains("cuzk_proofs_completed_total{kind=\"synthetic\"} 1"), "{m}");
    assert!(m.contains("cuzk_partition_prove_seconds_count{kind=\"synthetic\"} 1"), "{m}");
    assert!(m.contains("cuzk_job_total_seconds_bucket{kind=\"synthetic\",le=\"+Inf\"} 1"), "{m}");
    assert!(m.contains("# TYPE cuzk_gpu_busy_ratio gauge"), "{m}");

    let ev = c.evict_srs(pb::EvictSrsRequest { circuit_id: "synthetic-2^8".into() }).await.unwrap().into_inner();
    assert!(ev.was_loaded && ev.freed_bytes > 0);
    let ev = c.evict_srs(pb::EvictSrsRequest { circuit_id: "synthetic-2^8".into() }).await.unwrap().into_inner();
    assert!(!ev.was_loaded);
    let st = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert!(st.loaded_srs.is_empty());
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_critical_job_behind_normal_ones_finishes_first() {
    let d = Daemon::start(EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() }).await;
    let mut c = d.client().await;
    c.preload_srs(pb::PreloadSrsRequest { circuit_id: "synthetic-2^10".into() }).await.unwrap();
    let mut normal = Vec::new();
    for i in 0..4 {
        normal.push(c.submit_proof(synthetic(10, 2, i * 10, pb::Priority::Normal, "")).await.unwrap().into_inner().job_id);
    }
    let critical = c.submit_proof(synthetic(10, 1, 99, pb::Priority::Critical, "")).await.unwrap().into_inner().job_id;
    let r = c.await_proof(pb::AwaitProofRequest { job_id: critical, timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32);
    let last = c.await_proof(pb::AwaitProofRequest { job_id: normal[3].clone(), timeout_ms: 1 }).await.unwrap().into_inner();
    assert_eq!(last.status, JobStatus::Timeout as i32, "the last NORMAL job finished before the CRITICAL one");
    for id in normal {
        let r = c.await_proof(pb::AwaitProofRequest { job_id: id, timeout_ms: 0 }).await.unwrap().into_inner();
        assert_eq!(r.status, JobStatus::Completed as i32);
    }
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idempotent_request_ids_and_cancel() {
    let d = Daemon::start(EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() }).await;
    let mut c = d.client().await;
    let a = c.submit_proof(synthetic(12, 6, 0, pb::Priority::Normal, "sector-7")).await.unwrap().into_inner().job_id;
    let b = c.submit_proof(synthetic(12, 6, 0, pb::Priority::Normal, "sector-7")).await.unwrap().into_inner().job_id;
    assert_eq!(a, b);
    let other = c.submit_proof(synthetic(8, 1, 0, pb::Priority::Normal, "sector-8")).await.unwrap().into_inner().job_id;
    assert_ne!(a, other);
    c.cancel_proof(pb::CancelProofRequest { job_id: a.clone() }).await.unwrap();
    let r = c.await_proof(pb::AwaitProofRequest { job_id: a.clone(), timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(r.status, JobStatus::Cancelled as i32);
    assert!(r.proof.is_empty());
    let r = c.await_proof(pb::AwaitProofRequest { job_id: other.clone(), timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32);
    // A cancelled (or failed) job's request id is free again: resubmitting it is a retry.
    let retry = c.submit_proof(synthetic(8, 1, 0, pb::Priority::Normal, "sector-7")).await.unwrap().into_inner();
    assert_ne!(retry.job_id, a, "a cancelled request id must start a new job");
    let r = c.await_proof(pb::AwaitProofRequest { job_id: retry.job_id.clone(), timeout_ms: 60_000 }).await.unwrap().into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32);
    // A completed one stays: the same job, its proof again.
    let again = c.submit_proof(synthetic(8, 1, 0, pb::Priority::Normal, "sector-7")).await.unwrap().into_inner();
    assert_eq!(again.job_id, retry.job_id);
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_get_clear_errors_and_the_daemon_keeps_serving() {
    let d = Daemon::start(config()).await;
    let mut c = d.client().await;
    let expect = |r: Result<tonic::Response<pb::SubmitProofResponse>, tonic::Status>, code: Code, needle: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.code(), code, "{e:?}");
        assert!(e.message().contains(needle), "{:?} lacks {needle:?}", e.message());
    };
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.proof_kind = ProofKind::Unspecified as i32;
    expect(c.submit_proof(r).await, Code::InvalidArgument, "unspecified");
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.proof_kind = 7;
    expect(c.submit_proof(r).await, Code::InvalidArgument, "unknown proof_kind 7");
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.proof_kind = ProofKind::PorepSealCommit as i32;
    expect(c.submit_proof(r).await, Code::InvalidArgument, "not supported");
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.vanilla_proof = b"\x00garbage".to_vec();
    expect(c.submit_proof(r).await, Code::InvalidArgument, "JSON");
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.randomness = vec![1; 5];
    expect(c.submit_proof(r).await, Code::InvalidArgument, "randomness must be 32 bytes");
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.priority = 9;
    expect(c.submit_proof(r).await, Code::InvalidArgument, "priority");
    expect(c.submit_proof(synthetic(20, 1, 0, pb::Priority::Normal, "")).await, Code::InvalidArgument, "log_size 20");
    // Over the 256 MiB message limit.
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.vanilla_proofs = vec![vec![0u8; MAX_MESSAGE_BYTES + 1024]];
    expect(c.submit_proof(r).await, Code::ResourceExhausted, "256 MiB message limit");
    let missing = |id: &str| pb::AwaitProofRequest { job_id: id.into(), timeout_ms: 10 };
    assert_eq!(c.await_proof(missing("job-none")).await.unwrap_err().code(), Code::NotFound);
    assert_eq!(c.await_proof(missing("")).await.unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(c.cancel_proof(pb::CancelProofRequest { job_id: "job-none".into() }).await.unwrap_err().code(), Code::NotFound);
    assert_eq!(c.prove(pb::ProveRequest { submit: None }).await.unwrap_err().code(), Code::InvalidArgument);
    // Still serving, on the same and on a new connection.
    c.get_status(pb::GetStatusRequest {}).await.unwrap();
    let mut c2 = d.client().await;
    let r = c2.prove(pb::ProveRequest { submit: Some(synthetic(6, 1, 1, pb::Priority::Low, "")) }).await.unwrap();
    assert_eq!(r.into_inner().result.unwrap().status, JobStatus::Completed as i32);
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn fifty_concurrent_clients_all_get_verified_proofs() {
    let budget = 256 << 20;
    let d = Daemon::start(EngineConfig { memory_budget_bytes: budget, synthesis_workers: 2, ..config() }).await;
    let mut tasks = Vec::new();
    for i in 0..50u64 {
        let mut c = d.client().await;
        tasks.push(tokio::spawn(async move {
            let req = synthetic(6, 1 + (i % 3) as u32, i * 7, pb::Priority::try_from(1 + (i % 4) as i32).unwrap(), &format!("load-{i}"));
            let r = c.prove(pb::ProveRequest { submit: Some(req) }).await.unwrap().into_inner().result.unwrap();
            (i, r)
        }));
    }
    let mut watcher = d.client().await;
    for t in tasks {
        let (i, r) = t.await.unwrap();
        assert_eq!(r.status, JobStatus::Completed as i32, "client {i}: {}", r.error_message);
        check_proof(&r.proof, 6, 1 + (i % 3) as u32, i * 7);
        let st = watcher.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
        assert!(st.pinned_memory_bytes <= budget);
    }
    let st = watcher.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(st.total_proofs_completed, 50);
    assert_eq!(st.total_proofs_failed, 0);
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_with_work_in_flight_answers_every_waiting_client() {
    let d = Daemon::start(EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() }).await;
    let mut waits = Vec::new();
    for i in 0..3 {
        let mut c = d.client().await;
        let id = c.submit_proof(synthetic(13, 3, i, pb::Priority::Normal, "")).await.unwrap().into_inner().job_id;
        waits.push(tokio::spawn(async move { c.await_proof(pb::AwaitProofRequest { job_id: id, timeout_ms: 0 }).await.unwrap().into_inner() }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    d.stop(Duration::from_millis(50)).await;
    let mut cancelled = 0;
    for w in waits {
        let r = tokio::time::timeout(Duration::from_secs(30), w).await.expect("a client was left waiting").unwrap();
        assert!(r.status == JobStatus::Completed as i32 || r.status == JobStatus::Cancelled as i32, "{r:?}");
        cancelled += (r.status == JobStatus::Cancelled as i32) as u32;
    }
    assert!(cancelled >= 1);
}

async fn http_get(addr: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_status_endpoint_shows_queues_jobs_and_metrics() {
    let d = Daemon::start(EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() }).await;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = l.local_addr().unwrap();
    tokio::spawn(cuzk_server::status_http::serve_status(l, d.engine.clone()));
    let mut c = d.client().await;
    let id = c.submit_proof(synthetic(12, 4, 0, pb::Priority::High, "")).await.unwrap().into_inner().job_id;
    let r = http_get(http, "/status").await;
    assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
    let body = &r[r.find("\r\n\r\n").unwrap() + 4..];
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert!(v["memory"]["budget_bytes"].as_u64().unwrap() > 0);
    assert!(v["memory"]["aux_vectors_reused"].is_u64() && v["memory"]["aux_vectors_fresh"].is_u64(), "{v}");
    assert!(v["memory"]["idle_bytes"].as_u64().unwrap() <= v["memory"]["used_bytes"].as_u64().unwrap(), "{v}");
    assert_eq!(v["workers"][0]["backend"], "cpu");
    // By its label: without the daemon's token, whole ids (which let a client cancel a
    // job) are not listed.
    let job = v["jobs"].as_array().unwrap().iter().find(|j| j["job_id"] == id[..8]).expect("the job is listed");
    assert!(!body.contains(&id), "a whole job id is listed");
    assert_eq!(job["partitions"].as_array().unwrap().len(), 4);
    assert_eq!(job["priority"], "High");
    let m = http_get(http, "/metrics").await;
    assert!(m.starts_with("HTTP/1.1 200 OK") && m.contains("cuzk_queue_pending_partitions"), "{m}");
    assert!(http_get(http, "/nothing").await.starts_with("HTTP/1.1 404"));
    let t = http_get(http, "/timeline").await;
    let first = t[t.find("\r\n\r\n").unwrap() + 4..].lines().next().unwrap().to_string();
    let ev: cuzk_engine::TimelineEvent = serde_json::from_str(&first).unwrap();
    assert_eq!(ev.kind, cuzk_engine::EventKind::Queued);
    assert!(!t.contains(&id), "a whole job id is in the timeline");
    c.cancel_proof(pb::CancelProofRequest { job_id: id }).await.unwrap();
    d.stop(Duration::from_secs(5)).await;
}
