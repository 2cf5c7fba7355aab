//! Request bodies against a hostile client (hardening, third pass), over real TCP
//! sockets and raw HTTP/2 frames: one connection announcing ~1 GiB of requests and
//! sending nothing no longer locks every client out; connections whose only requests
//! are stalled uploads make way for a real client; the server announces its stream
//! limit; and a call waiting on the server (a long AwaitProof) outlives every body and
//! idle timeout.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{config, Daemon};
use cuzk_server::connections::ConnectionLimits;
use cuzk_server::pb;

/// One HTTP/2 frame: its header (length, type, flags, stream) and payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A SubmitProof request's headers, HPACK literals without indexing or Huffman.
fn submit_headers() -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/cuzk.v1.ProvingEngine/SubmitProof"),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        block.push(0);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    block
}

/// A raw client connection past its handshake (the preface and an empty SETTINGS).
fn raw_connection(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    s.write_all(&frame(4, 0, 0, &[])).unwrap();
    s
}

/// Opens `stream` with a SubmitProof's headers and no end of stream; with `announce`,
/// also the 5-byte gRPC prefix of a message that long, and nothing more.
fn stalled_upload(s: &mut TcpStream, stream: u32, announce: Option<u32>) {
    s.write_all(&frame(1, 0x4, stream, &submit_headers())).unwrap();
    if let Some(len) = announce {
        let mut prefix = vec![0];
        prefix.extend_from_slice(&len.to_be_bytes());
        s.write_all(&frame(0, 0, stream, &prefix)).unwrap();
    }
}

/// Reads frames until `deadline`, answering SETTINGS and PINGs; calls `seen` with each
/// frame's (type, flags, stream, payload); stops when it returns true. False at the
/// deadline or when the server closes the connection.
fn read_frames(s: &mut TcpStream, deadline: Instant, mut seen: impl FnMut(u8, u8, u32, &[u8]) -> bool) -> bool {
    loop {
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else { return false };
        s.set_read_timeout(Some(left)).unwrap();
        let mut head = [0u8; 9];
        if s.read_exact(&mut head).is_err() {
            return false;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).is_err() {
            return false;
        }
        let (kind, flags, stream) = (head[3], head[4], u32::from_be_bytes([head[5] & 0x7f, head[6], head[7], head[8]]));
        match (kind, flags & 1) {
            (4, 0) => {
                let _ = s.write_all(&frame(4, 1, 0, &[]));
            }
            (6, 0) => {
                let _ = s.write_all(&frame(6, 1, 0, &payload));
            }
            _ => {}
        }
        if seen(kind, flags, stream, &payload) {
            return true;
        }
    }
}

/// Whether a frame ends `stream` from the server's side (a reset, or headers or data
/// with END_STREAM).
fn ends(kind: u8, flags: u8) -> bool {
    kind == 3 || (matches!(kind, 0 | 1) && flags & 1 == 1)
}

/// Four streams on one connection, each announcing ~256 MiB and sending nothing more:
/// the connection holds at most half of the 1 GiB in flight (two are refused at once),
/// another client is served meanwhile, and the two it holds are cut once they are
/// plainly too slow (after the 10 s grace), their bytes given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_connection_announcing_a_gibibyte_locks_nobody_out() {
    let d = Daemon::start_with_limits(config(), ConnectionLimits::default()).await;
    let addr = d.addr;
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let raw = tokio::task::spawn_blocking(move || {
        let mut s = raw_connection(addr);
        let t = Instant::now();
        for stream in [1, 3, 5, 7] {
            stalled_upload(&mut s, stream, Some((256 << 20) - 64));
        }
        started_tx.send(()).unwrap();
        let mut ended: Vec<(u32, Duration)> = Vec::new();
        read_frames(&mut s, t + Duration::from_secs(40), |kind, flags, stream, _| {
            if stream != 0 && ends(kind, flags) && !ended.iter().any(|(s, _)| *s == stream) {
                ended.push((stream, t.elapsed()));
            }
            ended.len() == 4
        });
        ended
    });
    started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Another client, another connection: served, not RESOURCE_EXHAUSTED.
    let mut c = d.client().await;
    let r = c.prove(pb::ProveRequest { submit: Some(common::synthetic(8, 1, 1, pb::Priority::Normal, "")) }).await;
    let r = r.unwrap_or_else(|e| panic!("another client was refused while one connection announced 1 GiB: {e:?}")).into_inner();
    assert_eq!(r.result.unwrap().status, pb::await_proof_response::Status::Completed as i32);
    let ended = raw.await.unwrap();
    assert_eq!(ended.len(), 4, "streams ended: {ended:?}");
    let at_once = ended.iter().filter(|(_, t)| *t < Duration::from_secs(5)).count();
    let cut = ended.iter().filter(|(_, t)| *t >= Duration::from_secs(9) && *t < Duration::from_secs(30)).count();
    assert_eq!((at_once, cut), (2, 2), "two refused at once (the connection's half), two cut after the grace: {ended:?}");
    d.stop(Duration::from_secs(5)).await;
}

/// Every place taken by a connection with one request whose body never comes (HEADERS
/// without END_STREAM): a real client gets in once they have been silent for the
/// grace, in the place of one of them (no minimum rate here, so nothing cuts them:
/// what lets the client in is that stalled uploads count as idle). The server's
/// SETTINGS announce its stream limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_whose_only_requests_are_stalled_uploads_make_way() {
    let limits = ConnectionLimits { max_connections: 8, body_min_rate: 0, ..ConnectionLimits::default() };
    let d = Daemon::start_with_limits(config(), limits).await;
    let addr = d.addr;
    let stalled = tokio::task::spawn_blocking(move || {
        (0..8)
            .map(|i| {
                let mut s = raw_connection(addr);
                stalled_upload(&mut s, 1, None);
                let mut max_streams = None;
                if i == 0 {
                    read_frames(&mut s, Instant::now() + Duration::from_secs(5), |kind, flags, _, payload| {
                        if kind == 4 && flags & 1 == 0 {
                            max_streams = payload
                                .chunks_exact(6)
                                .find(|p| u16::from_be_bytes([p[0], p[1]]) == 3)
                                .map(|p| u32::from_be_bytes([p[2], p[3], p[4], p[5]]));
                            return true;
                        }
                        false
                    });
                }
                (s, max_streams)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert_eq!(stalled[0].1, Some(cuzk_server::MAX_STREAMS_PER_CONNECTION), "SETTINGS_MAX_CONCURRENT_STREAMS not announced");
    // (Before the grace a newcomer is refused once the server has seen all 8 requests;
    // when that is, the test cannot tell: the unit test of connections.rs checks it.)
    tokio::time::sleep(cuzk_server::connections::BODY_RATE_GRACE + Duration::from_secs(1)).await;
    let t = Instant::now();
    let served = tokio::time::timeout(Duration::from_secs(10), async { d.client().await.get_status(pb::GetStatusRequest {}).await }).await;
    assert!(matches!(&served, Ok(Ok(_))), "{served:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(stalled);
    d.stop(Duration::from_secs(5)).await;
}

/// A call that waits on the server is no stalled upload: an AwaitProof open far longer
/// than the idle timeout, the body timeout and the minimum rate's grace would allow an
/// upload gets its proof (the limits scaled down: 1 s idle, 1 s per body).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_await_proof_outlives_every_body_and_idle_timeout() {
    let limits = ConnectionLimits {
        idle_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        body_min_rate: 1 << 20,
        ..ConnectionLimits::default()
    };
    let d = Daemon::start_with_limits(config(), limits).await;
    let mut c = d.client().await;
    // A job of 64 partitions: seconds on a CPU.
    let s = c.submit_proof(common::synthetic(14, 64, 6, pb::Priority::Normal, "")).await.unwrap().into_inner();
    let t = Instant::now();
    let r = c.await_proof(pb::AwaitProofRequest { job_id: s.job_id, timeout_ms: 0 }).await.unwrap().into_inner();
    let waited = t.elapsed();
    assert_eq!(r.status, pb::await_proof_response::Status::Completed as i32, "{}", r.error_message);
    assert!(waited > Duration::from_secs(3), "the job took {waited:?}: too short to show an AwaitProof outliving a 1 s idle timeout");
    d.stop(Duration::from_secs(5)).await;
}
