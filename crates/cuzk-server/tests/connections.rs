//! Connections against a hostile client (issue 26), over real TCP sockets: silent
//! connections time out and cannot keep a real client out, nor can idle ones that
//! answer pings; the cap refuses (instead of hanging) only when every connection is
//! busy, and small calls are not held back by Nagle's algorithm.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{config, Daemon};
use cuzk_server::connections::ConnectionLimits;
use cuzk_server::pb;

fn limits(max_connections: usize, handshake_timeout: Duration) -> ConnectionLimits {
    ConnectionLimits { max_connections, handshake_timeout, ..ConnectionLimits::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_that_never_speaks_is_closed_after_the_handshake_timeout() {
    let d = Daemon::start_with_limits(config(), limits(64, Duration::from_millis(500))).await;
    let addr = d.addr;
    let waited = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let t = Instant::now();
        // The server's own preface (its SETTINGS) comes at once; then it closes the
        // connection: end of stream (or a reset), not the 10 s read timeout.
        let mut seen = Vec::new();
        let r = s.read_to_end(&mut seen);
        assert!(!matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut), "{r:?}");
        t.elapsed()
    })
    .await
    .unwrap();
    assert!(waited >= Duration::from_millis(400) && waited < Duration::from_secs(5), "closed after {waited:?}");
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_connections_at_the_cap_make_way_for_a_real_client() {
    // A long handshake timeout: what lets the client in is the cap's rule, not a timeout.
    let d = Daemon::start_with_limits(config(), limits(8, Duration::from_secs(120))).await;
    let silent: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(d.addr).unwrap()).collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    let mut c = d.client().await;
    let st = tokio::time::timeout(Duration::from_secs(10), c.get_status(pb::GetStatusRequest {})).await;
    assert!(matches!(&st, Ok(Ok(_))), "{st:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(silent);
    d.stop(Duration::from_secs(5)).await;
}

/// At the cap a new client is refused (closed at once, not hung) only when every open
/// connection has a request in flight; once one has none, a new client takes its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn beyond_the_cap_a_client_is_refused_when_every_connection_is_busy() {
    let d = Daemon::start_with_limits(config(), limits(2, Duration::from_secs(120))).await;
    let mut a = d.client().await;
    let b = d.client().await;
    // A job of tens of seconds on the CPU (64 partitions of 2^14); both connections wait on it.
    let job = a.submit_proof(common::synthetic(14, 64, 0, pb::Priority::Normal, "")).await.unwrap().into_inner().job_id;
    let wait = |mut c: cuzk_server::pb::proving_engine_client::ProvingEngineClient<tonic::transport::Channel>, job: String| {
        tokio::spawn(async move { c.await_proof(pb::AwaitProofRequest { job_id: job, timeout_ms: 6000 }).await })
    };
    let (wa, wb) = (wait(a.clone(), job.clone()), wait(b, job.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    let third = tokio::time::timeout(Duration::from_secs(10), async {
        let mut c = cuzk_server::pb::proving_engine_client::ProvingEngineClient::connect(format!("http://{}", d.addr)).await?;
        c.get_status(pb::GetStatusRequest {}).await.map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    })
    .await;
    assert!(matches!(&third, Ok(Err(_))), "a third connection beyond max_connections 2, both busy: {third:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "refusing took {:?}", t.elapsed());
    // The waits end (the job still runs): the connections are idle, and a new client
    // takes the place of one.
    let _ = wa.await.unwrap();
    let _ = wb.await.unwrap();
    let t = Instant::now();
    let mut c = d.client().await;
    c.get_status(pb::GetStatusRequest {}).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let _ = c.cancel_proof(pb::CancelProofRequest { job_id: job }).await;
    d.stop(Duration::from_secs(5)).await;
}

/// A peer that completes the HTTP/2 handshake, then only answers the server's SETTINGS
/// and PINGs and sends no request: true when the server closed the connection (end
/// of stream or a reset) before `give_up`; the pings it answered.
fn ping_answering_peer(addr: std::net::SocketAddr, give_up: Duration, handshaken: std::sync::mpsc::Sender<()>) -> (bool, usize) {
    use std::io::Write;
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap(); // SETTINGS, empty
    let _ = handshaken.send(());
    let start = Instant::now();
    let mut pings = 0;
    loop {
        // Bounded in all, not per read: the server's pings come every second.
        let Some(left) = give_up.checked_sub(start.elapsed()).filter(|d| !d.is_zero()) else { return (false, pings) };
        s.set_read_timeout(Some(left)).unwrap();
        let mut head = [0u8; 9];
        if let Err(e) = s.read_exact(&mut head) {
            let timed_out = matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
            return (!timed_out, pings);
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).is_err() {
            return (true, pings);
        }
        let (kind, flags) = (head[3], head[4]);
        let answer: Option<Vec<u8>> = match (kind, flags & 1) {
            (4, 0) => Some(vec![0, 0, 0, 4, 1, 0, 0, 0, 0]), // SETTINGS ACK
            (6, 0) => {
                pings += 1;
                let mut f = vec![0, 0, 8, 6, 1, 0, 0, 0, 0]; // PING ACK, same payload
                f.extend_from_slice(&payload);
                Some(f)
            }
            _ => None,
        };
        if let Some(f) = answer {
            if s.write_all(&f).is_err() {
                return (true, pings);
            }
        }
    }
}

/// A connection that answers every keep-alive ping but sends no request is closed
/// after the idle timeout (pings used to count as traffic and kept it open forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_connection_that_answers_pings_is_closed_after_the_idle_timeout() {
    let idle = Duration::from_secs(3);
    let d = Daemon::start_with_limits(config(), ConnectionLimits { idle_timeout: idle, ..ConnectionLimits::default() }).await;
    let addr = d.addr;
    let t = Instant::now();
    let (closed, pings) =
        tokio::task::spawn_blocking(move || ping_answering_peer(addr, Duration::from_secs(12), std::sync::mpsc::channel().0)).await.unwrap();
    let after = t.elapsed();
    assert!(closed, "still open after {after:?} ({pings} pings answered)");
    assert!(pings >= 1, "the server sent no ping: the test did not test that answered pings do not keep it open");
    assert!(after >= idle - Duration::from_millis(200) && after < idle + Duration::from_secs(3), "closed after {after:?}");
    d.stop(Duration::from_secs(5)).await;
}

/// 256 connections (the default cap) that finish the handshake and answer pings but
/// send no request cannot keep a real client out: it is served within a second, in
/// the place of the longest idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ping_answering_idle_connections_at_the_cap_make_way_for_a_real_client() {
    let d = Daemon::start_with_limits(config(), ConnectionLimits::default()).await;
    let addr = d.addr;
    let (tx, rx) = std::sync::mpsc::channel();
    let peers: Vec<_> = (0..256)
        .map(|_| {
            let tx = tx.clone();
            std::thread::spawn(move || ping_answering_peer(addr, Duration::from_secs(8), tx))
        })
        .collect();
    for _ in 0..256 {
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    let mut c = d.client().await;
    let st = tokio::time::timeout(Duration::from_secs(5), c.get_status(pb::GetStatusRequest {})).await;
    assert!(matches!(&st, Ok(Ok(_))), "{st:?}");
    assert!(t.elapsed() < Duration::from_secs(1), "served after {:?}", t.elapsed());
    let closed = peers.into_iter().map(|p| p.join().unwrap().0).filter(|&c| c).count();
    assert!(closed >= 1, "no idle peer made way");
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_calls_over_tcp_are_not_delayed() {
    let d = Daemon::start(config()).await;
    let mut c = d.client().await;
    c.get_status(pb::GetStatusRequest {}).await.unwrap();
    let mut took: Vec<Duration> = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        c.get_status(pb::GetStatusRequest {}).await.unwrap();
        took.push(t.elapsed());
    }
    took.sort();
    // Nagle's algorithm against delayed ACKs costs ~40 ms a call; a busy 2-core CI
    // machine stays well under 15 ms at the median.
    assert!(took[took.len() / 2] < Duration::from_millis(15), "median {:?} (all: {took:?})", took[took.len() / 2]);
    d.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_requests_beyond_the_bytes_in_flight_are_resource_exhausted() {
    let limits = ConnectionLimits { max_request_bytes_in_flight: 256 << 20, ..ConnectionLimits::default() };
    let d = Daemon::start_with_limits(config(), limits).await;
    // Four 150 MiB requests at once, each on its own connection: they cannot all be
    // received under 256 MiB. (Their payload is not a synthetic one: a request that
    // gets through is INVALID_ARGUMENT.)
    let big = || {
        let mut r = common::synthetic(8, 1, 0, pb::Priority::Normal, "");
        r.vanilla_proof = vec![b' '; 150 << 20];
        r
    };
    let mut calls = Vec::new();
    for _ in 0..4 {
        let mut c = d.client().await;
        let r = big();
        calls.push(tokio::spawn(async move { c.submit_proof(r).await.map(|_| ()).map_err(|e| (e.code(), e.message().to_string())) }));
    }
    let mut codes = Vec::new();
    for call in calls {
        codes.push(call.await.unwrap().unwrap_err());
    }
    let exhausted: Vec<_> = codes.iter().filter(|(c, _)| *c == tonic::Code::ResourceExhausted).collect();
    assert!(!exhausted.is_empty(), "{codes:?}");
    assert!(exhausted.iter().all(|(_, m)| m.contains("daemon.max_request_bytes_in_flight")), "{codes:?}");
    assert!(codes.iter().any(|(c, _)| *c == tonic::Code::InvalidArgument), "none got through: {codes:?}");
    // Their bytes were given back: one more alone gets through.
    let mut c = d.client().await;
    let e = c.submit_proof(big()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    d.stop(Duration::from_secs(5)).await;
}
