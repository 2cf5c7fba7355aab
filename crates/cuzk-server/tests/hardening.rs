//! The gRPC service against careless and hostile clients (issue 26), over a real TCP
//! socket: bounded error texts, request ids reused with other content, admission caps
//! and the CRITICAL rule, EvictSRS of a set in use, circuit-id aliases, unguessable
//! job ids. CPU backend, synthetic circuits.

mod common;

use std::time::{Duration, Instant};

use common::{check_proof, config, synthetic, Daemon};
use cuzk_engine::{AdmissionLimits, EngineConfig};
use cuzk_server::pb;
use cuzk_server::rejection::MESSAGE_BYTES;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn error_texts_are_bounded_whatever_the_input() {
    let d = Daemon::start(config()).await;
    let mut c = d.client().await;
    // A 1 MiB job id: NOT_FOUND, not "Stream removed" from a 1 MiB grpc-message.
    let huge = "j".repeat(1 << 20);
    let e = c.await_proof(pb::AwaitProofRequest { job_id: huge.clone(), timeout_ms: 1 }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{}", &e.message()[..e.message().len().min(200)]);
    assert!(e.message().len() < 400 && e.message().contains("1048576 bytes"), "{} bytes", e.message().len());
    let e = c.cancel_proof(pb::CancelProofRequest { job_id: huge.clone() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().len() < 400);
    let e = c.preload_srs(pb::PreloadSrsRequest { circuit_id: huge.clone() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().len() < 400);
    // An 8 MiB bad JSON payload (serde quotes the unknown field in full).
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.vanilla_proof = format!(r#"{{"log_size": 8, "{}": 1}}"#, "y".repeat(8 << 20)).into_bytes();
    let e = c.submit_proof(r).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().len() <= MESSAGE_BYTES + 64 && e.message().contains("message cut"), "{} bytes", e.message().len());
    // A request id of 20,000 characters reused with other content: another job.
    let rid = "r".repeat(20_000);
    let first = c.submit_proof(synthetic(8, 1, 0, pb::Priority::Normal, &rid)).await.unwrap().into_inner().job_id;
    let second = c.submit_proof(synthetic(8, 1, 1, pb::Priority::Normal, &rid)).await.unwrap().into_inner().job_id;
    assert_ne!(first, second);
    d.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reused_request_id_with_other_content_is_another_job() {
    let d = Daemon::start(config()).await;
    let mut c = d.client().await;
    let a = c.submit_proof(synthetic(8, 1, 5, pb::Priority::Normal, "sector-9")).await.unwrap().into_inner().job_id;
    assert_eq!(a.len(), 32, "a job id is 128 random bits in hex: {a}");
    assert!(a.bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
    let same = c.submit_proof(synthetic(8, 1, 5, pb::Priority::Normal, "sector-9")).await.unwrap().into_inner().job_id;
    assert_eq!(same, a);
    // Other content under the same id (as Curio's WindowPoSt partitions of one deadline
    // come): a job of its own, with a proof of its own request.
    let mut jobs = vec![(a, 5)];
    for (other, seed) in [(synthetic(8, 1, 6, pb::Priority::Normal, "sector-9"), 6), (synthetic(8, 1, 5, pb::Priority::High, "sector-9"), 5)] {
        let id = c.submit_proof(other).await.unwrap().into_inner().job_id;
        assert!(jobs.iter().all(|(j, _)| *j != id), "another content got an existing job");
        jobs.push((id, seed));
    }
    for (id, seed) in jobs {
        let r = c.await_proof(pb::AwaitProofRequest { job_id: id, timeout_ms: 0 }).await.unwrap().into_inner();
        assert_eq!(r.status, pb::await_proof_response::Status::Completed as i32, "{}", r.error_message);
        check_proof(&r.proof, 8, 1, seed);
    }
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn caps_answer_resource_exhausted_and_critical_is_reserved() {
    let admission = AdmissionLimits { max_queued_jobs: 2, max_queued_partitions: 4, ..AdmissionLimits::default() };
    let d = Daemon::start(EngineConfig { admission, synthesis_workers: 1, workers_per_backend: 1, ..config() }).await;
    let mut c = d.client().await;
    // CRITICAL is WinningPoSt's by default: a synthetic job may not use it.
    let e = c.submit_proof(synthetic(8, 1, 0, pb::Priority::Critical, "")).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("winning_post"), "{}", e.message());
    let big = c.submit_proof(synthetic(14, 3, 0, pb::Priority::Normal, "")).await.unwrap().into_inner().job_id;
    let e = c.submit_proof(synthetic(8, 2, 1, pb::Priority::Normal, "")).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("admission.max_queued_partitions"), "{}", e.message());
    let small = c.submit_proof(synthetic(8, 1, 2, pb::Priority::Normal, "")).await.unwrap().into_inner().job_id;
    let e = c.submit_proof(synthetic(8, 1, 3, pb::Priority::Normal, "")).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(e.message().contains("admission.max_queued_jobs"), "{}", e.message());
    c.cancel_proof(pb::CancelProofRequest { job_id: big }).await.unwrap();
    let r = c.await_proof(pb::AwaitProofRequest { job_id: small, timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(r.status, pb::await_proof_response::Status::Completed as i32);
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn evicting_a_set_in_use_is_refused_and_aliases_are_not_found() {
    let d = Daemon::start(EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() }).await;
    let mut c = d.client().await;
    let id = c.submit_proof(synthetic(13, 4, 0, pb::Priority::Normal, "")).await.unwrap().into_inner().job_id;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let st = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
        if st.loaded_srs.iter().any(|s| s.ref_count > 0) && st.queues.iter().any(|q| q.in_progress > 0) {
            break;
        }
        assert!(Instant::now() < until, "no partition started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let e = c.evict_srs(pb::EvictSrsRequest { circuit_id: "synthetic-2^13".into() }).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("in use") && e.message().contains(&id[..8]) && !e.message().contains(&id), "{}", e.message());
    let p = c.preload_srs(pb::PreloadSrsRequest { circuit_id: "synthetic-2^13".into() }).await.unwrap().into_inner();
    assert!(p.already_loaded, "a second copy was loaded");
    for alias in ["synthetic-2^013", "synthetic-2^+13"] {
        let e = c.preload_srs(pb::PreloadSrsRequest { circuit_id: alias.into() }).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{alias}");
    }
    let r = c.await_proof(pb::AwaitProofRequest { job_id: id, timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(r.status, pb::await_proof_response::Status::Completed as i32);
    let ev = c.evict_srs(pb::EvictSrsRequest { circuit_id: "synthetic-2^13".into() }).await.unwrap().into_inner();
    assert!(ev.was_loaded && ev.freed_bytes > 0);
    let st = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(st.loaded_srs.len(), 0);
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_a_token_every_call_needs_it_and_status_shows_whole_ids() {
    const TOKEN: &str = "0b9e4f7c2d1a8e3f6b5c4d2e1f0a9b8c";
    let d = Daemon::start_with_token(EngineConfig { synthesis_workers: 1, workers_per_backend: 1, ..config() }, TOKEN).await;
    let mut c = d.client().await;
    let with = |token: &str, m: pb::SubmitProofRequest| {
        let mut r = tonic::Request::new(m);
        r.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        r
    };
    let e = c.submit_proof(synthetic(8, 1, 0, pb::Priority::Normal, "")).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let e = c.submit_proof(with("0b9e4f7c2d1a8e3f6b5c4d2e1f0a9b8d", synthetic(8, 1, 0, pb::Priority::Normal, ""))).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    assert_eq!(c.get_status(pb::GetStatusRequest {}).await.unwrap_err().code(), Code::Unauthenticated);
    assert_eq!(c.cancel_proof(pb::CancelProofRequest { job_id: "x".into() }).await.unwrap_err().code(), Code::Unauthenticated);
    let id = c.submit_proof(with(TOKEN, synthetic(13, 3, 0, pb::Priority::Normal, ""))).await.unwrap().into_inner().job_id;
    // GetStatus with the token: the running job by its whole id.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let mut r = tonic::Request::new(pb::GetStatusRequest {});
        r.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        let st = c.get_status(r).await.unwrap().into_inner();
        if st.gpus.iter().any(|g| g.current_job_id == id) {
            break;
        }
        assert!(st.gpus.iter().all(|g| g.current_job_id.is_empty()), "{:?}", st.gpus);
        assert!(Instant::now() < until, "the job never ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut r = tonic::Request::new(pb::CancelProofRequest { job_id: id });
    r.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    c.cancel_proof(r).await.unwrap();

    // The status endpoint: 401 without the token, whole ids with it.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = l.local_addr().unwrap();
    let token = std::sync::Arc::new(cuzk_server::access::AccessToken::new(TOKEN).unwrap());
    tokio::spawn(cuzk_server::status_http::serve_status_with(l, d.engine.clone(), Some(token)));
    let get = |auth: &'static str| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(http).await.unwrap();
        s.write_all(format!("GET /status HTTP/1.1\r\nHost: x\r\n{auth}\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };
    assert!(get("").await.starts_with("HTTP/1.1 401"));
    assert!(get("Authorization: Bearer wrong\r\n").await.starts_with("HTTP/1.1 401"));
    let ok = get("authorization: Bearer 0b9e4f7c2d1a8e3f6b5c4d2e1f0a9b8c\r\n").await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    d.stop(Duration::from_secs(5)).await;
}

/// Bytes sent as a call's message verbatim, and the answer's bytes as they come.
#[derive(Clone, Default)]
struct Raw;

struct RawEncoder;
struct RawDecoder;

impl tonic::codec::Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl tonic::codec::Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, buf: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), tonic::Status> {
        prost::bytes::BufMut::put_slice(buf, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, buf: &mut tonic::codec::DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        use prost::bytes::Buf;
        let v = buf.copy_to_bytes(buf.remaining()).to_vec();
        Ok(Some(v))
    }
}

/// Every method answers a message that does not decode with INVALID_ARGUMENT naming
/// the message (prost's codec says INTERNAL), and the daemon serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn undecodable_messages_are_invalid_arguments() {
    let d = Daemon::start(config()).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", d.addr)).unwrap().connect().await.unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let methods = ["SubmitProof", "AwaitProof", "Prove", "CancelProof", "GetStatus", "GetMetrics", "PreloadSRS", "EvictSRS"];
    // A truncated varint; a length-delimited field longer than the message; wire type 7
    // (none); field number 0; a group end with no start; a 2-byte length of a 1-byte rest.
    let garbage: [&[u8]; 6] = [&[0x08], &[0x0a, 0x05, 0x01], &[0x0f, 0x00], &[0x00, 0x01], &[0x0c], &[0x12, 0x80, 0x01, 0x41]];
    let mut cases = 0;
    for m in methods {
        for g in garbage {
            grpc.ready().await.unwrap();
            let path = http::uri::PathAndQuery::try_from(format!("/cuzk.v1.ProvingEngine/{m}")).unwrap();
            let e = grpc.unary(tonic::Request::new(g.to_vec()), path, Raw).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{m} with {g:02x?}: {}", e.message());
            assert!(e.message().contains("message does not decode"), "{m} with {g:02x?}: {}", e.message());
            cases += 1;
        }
    }
    assert_eq!(cases, 48);
    // Still serving.
    let mut c = d.client().await;
    assert!(c.get_status(pb::GetStatusRequest {}).await.is_ok());
    d.stop(Duration::from_secs(10)).await;
}

/// A synthetic payload with a repeated key is refused naming it (it used to prove the
/// last value's partitions).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn repeated_json_keys_are_refused() {
    let d = Daemon::start(config()).await;
    let mut c = d.client().await;
    let mut r = synthetic(8, 1, 0, pb::Priority::Normal, "");
    r.vanilla_proof = br#"{"log_size": 8, "partitions": 1, "partitions": 3}"#.to_vec();
    let e = c.submit_proof(r).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("\"partitions\" appears twice"), "{}", e.message());
    d.stop(Duration::from_secs(10)).await;
}
