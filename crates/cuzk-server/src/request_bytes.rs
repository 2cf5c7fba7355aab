//! Bytes of request bodies being received, all connections together, capped. A
//! request may be 256 MiB, and tonic buffers it whole (then decodes a copy) before
//! the handler sees it: without a cap, a few clients sending large requests at once
//! could take memory the engine's budget has promised to proving. A request whose
//! bytes would take the total over `daemon.max_request_bytes_in_flight` is answered
//! RESOURCE_EXHAUSTED (retry later); its bytes are released as soon as its body is
//! done with (decoded or abandoned). A request takes the whole length its gRPC message
//! declares (the first 5 bytes of its body) at once: counted only as they arrive, four
//! 150 MiB requests under a 256 MiB cap each got ~64 MiB in and all four were refused.
//!
//! Declared is not sent: four streams on one connection announcing ~256 MiB each and
//! then sending nothing took the whole 1 GiB, and every client was refused for as long
//! as that connection lived. So one connection may hold half the cap and one peer three
//! quarters (each at least one largest message), and a body must arrive within
//! `daemon.request_body_timeout` and no slower than `daemon.request_body_min_rate`:
//! a body cut for either is answered DEADLINE_EXCEEDED and logged, its bytes given back.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body::{Body as HttpBody, Frame, SizeHint};
use tonic::body::Body;
use tonic::Status;

use crate::connections::{connection_of, ConnectionLimits, ConnectionState, Peer, Throttled, BODY_RATE_GRACE};
use cuzk_groth16::sync::lock;

/// How often a body that brings nothing is judged again.
const JUDGED_EVERY: Duration = Duration::from_secs(1);

/// The bytes held by request bodies being received, their cap, and each peer's share.
#[derive(Debug)]
pub struct InFlight {
    held: AtomicU64,
    cap: u64,
    /// The least a connection's or a peer's share may be: one largest message.
    largest: u64,
    by_peer: Mutex<HashMap<Peer, u64>>,
    cut_log: Mutex<Throttled>,
}

/// Which share a body's bytes did not fit.
enum Short {
    Total,
    Connection(u64),
    Peer(u64),
}

impl InFlight {
    /// `cap` bytes in all; no share below `largest` (one largest message).
    pub fn new(cap: u64, largest: u64) -> Arc<InFlight> {
        Arc::new(InFlight { held: AtomicU64::new(0), cap, largest, by_peer: Mutex::default(), cut_log: Mutex::new(Throttled::new()) })
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// What one connection may hold: half the cap, at least one largest message.
    fn per_connection(&self) -> u64 {
        (self.cap / 2).max(self.largest).min(self.cap)
    }

    /// What one peer may hold: three quarters of the cap, at least one largest message.
    fn per_peer(&self) -> u64 {
        (self.cap / 4 * 3).max(self.largest).min(self.cap)
    }

    /// Takes `n` more bytes for a body on `conn` if they fit every share.
    fn take(&self, n: u64, conn: Option<&ConnectionState>) -> Result<(), Short> {
        let mut peers = lock(&self.by_peer);
        if let Some(c) = conn {
            if c.reserved.load(Ordering::SeqCst) + n > self.per_connection() {
                return Err(Short::Connection(self.per_connection()));
            }
            if peers.get(&c.peer).copied().unwrap_or(0) + n > self.per_peer() {
                return Err(Short::Peer(self.per_peer()));
            }
        }
        if self.held.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| h.checked_add(n).filter(|&t| t <= self.cap)).is_err() {
            return Err(Short::Total);
        }
        if let Some(c) = conn {
            c.reserved.fetch_add(n, Ordering::SeqCst);
            *peers.entry(c.peer).or_default() += n;
        }
        Ok(())
    }

    fn give_back(&self, n: u64, conn: Option<&ConnectionState>) {
        if let Some(c) = conn {
            c.reserved.fetch_sub(n, Ordering::SeqCst);
            let mut peers = lock(&self.by_peer);
            if let Some(p) = peers.get_mut(&c.peer) {
                *p = p.saturating_sub(n);
                if *p == 0 {
                    peers.remove(&c.peer);
                }
            }
        }
        self.held.fetch_sub(n, Ordering::SeqCst);
    }
}

/// The tower layer that counts every request's body against an [`InFlight`] and holds
/// it to the limits' pace.
#[derive(Clone)]
pub struct RequestBytesLayer {
    in_flight: Arc<InFlight>,
    limits: ConnectionLimits,
}

impl RequestBytesLayer {
    pub fn new(in_flight: Arc<InFlight>, limits: ConnectionLimits) -> Self {
        RequestBytesLayer { in_flight, limits }
    }
}

impl<S> tower::Layer<S> for RequestBytesLayer {
    type Service = RequestBytes<S>;
    fn layer(&self, inner: S) -> RequestBytes<S> {
        RequestBytes { inner, in_flight: self.in_flight.clone(), limits: self.limits.clone() }
    }
}

#[derive(Clone)]
pub struct RequestBytes<S> {
    inner: S,
    in_flight: Arc<InFlight>,
    limits: ConnectionLimits,
}

impl<S: tower::Service<http::Request<Body>>> tower::Service<http::Request<Body>> for RequestBytes<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let (parts, body) = req.into_parts();
        let conn = connection_of(&parts.extensions);
        if let Some(c) = &conn {
            c.uploading.fetch_add(1, Ordering::SeqCst);
            c.upload_progressed();
        }
        let counted = Counted {
            body,
            in_flight: self.in_flight.clone(),
            conn,
            uploading: true,
            held: 0,
            received: 0,
            prefix: Vec::new(),
            started: Instant::now(),
            timeout: self.limits.body_timeout,
            min_rate: self.limits.body_min_rate,
            judge: Box::pin(tokio::time::sleep(JUDGED_EVERY)),
        };
        self.inner.call(http::Request::from_parts(parts, Body::new(counted)))
    }
}

/// A request body whose data is counted while it exists (the larger of what has
/// arrived and what its gRPC message declares) and whose pace is judged while it
/// arrives.
struct Counted {
    body: Body,
    in_flight: Arc<InFlight>,
    /// The connection it came on (None outside the daemon's own listeners).
    conn: Option<Arc<ConnectionState>>,
    /// Counted in its connection's uploads until the body ends.
    uploading: bool,
    /// Bytes taken from `in_flight`.
    held: u64,
    received: u64,
    /// The gRPC message prefix (a flag byte and a big-endian u32 length) while fewer
    /// than its 5 bytes have arrived.
    prefix: Vec<u8>,
    started: Instant,
    timeout: Duration,
    min_rate: u64,
    /// When the pace of a body that brings nothing is judged next.
    judge: Pin<Box<tokio::time::Sleep>>,
}

/// Bytes of a gRPC message's prefix.
const GRPC_PREFIX: usize = 5;

/// The bytes of a body whose first gRPC message has this prefix: the prefix and the
/// length it declares; None while the prefix is incomplete.
fn declared_bytes(prefix: &[u8]) -> Option<u64> {
    let p = <[u8; GRPC_PREFIX]>::try_from(prefix).ok()?;
    Some(GRPC_PREFIX as u64 + u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as u64)
}

impl Counted {
    /// The body's bytes as far as known: what has arrived, or more if its first
    /// message declares more.
    fn wanted(&self) -> u64 {
        declared_bytes(&self.prefix).map_or(self.received, |d| d.max(self.received))
    }
}

impl Counted {
    /// Why the body is too slow to wait for, if it is.
    fn too_slow(&self) -> Option<String> {
        let elapsed = self.started.elapsed();
        let wanted = self.wanted();
        if elapsed > self.timeout {
            return Some(format!(
                "the request's body did not arrive within {} s (daemon.request_body_timeout): {} of {wanted} bytes",
                self.timeout.as_secs(),
                self.received
            ));
        }
        let expected = self.min_rate as f64 * elapsed.as_secs_f64();
        if self.min_rate > 0 && elapsed > BODY_RATE_GRACE && (self.received as f64) < expected {
            return Some(format!(
                "the request's body arrived at {:.0} bytes/s, slower than daemon.request_body_min_rate ({} bytes/s): {} of {wanted} bytes in {:.1} s",
                self.received as f64 / elapsed.as_secs_f64(),
                self.min_rate,
                self.received,
                elapsed.as_secs_f64()
            ));
        }
        None
    }

    /// The body is over (ended, or cut): no longer one of its connection's uploads.
    fn end_upload(&mut self) {
        if std::mem::take(&mut self.uploading) {
            if let Some(c) = &self.conn {
                c.uploading.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// The error a cut body ends with, logged (throttled).
    fn cut(&mut self, why: String) -> Status {
        self.end_upload();
        let peer = self.conn.as_ref().map(|c| c.peer).unwrap_or_default();
        if let Some(skipped) = lock(&self.in_flight.cut_log).due(Duration::from_secs(1)) {
            tracing::warn!(?peer, skipped, "request body cut: {why}");
        }
        Status::deadline_exceeded(why)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.end_upload();
        self.in_flight.give_back(self.held, self.conn.as_deref());
    }
}

impl HttpBody for Counted {
    type Data = <Body as HttpBody>::Data;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Status>>> {
        let this = self.get_mut();
        if !this.uploading {
            return Pin::new(&mut this.body).poll_frame(cx);
        }
        let frame = match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(other) => {
                this.end_upload();
                return Poll::Ready(other);
            }
            Poll::Pending => {
                // Nothing new: judged now and every second until data or the end comes.
                loop {
                    if let Some(why) = this.too_slow() {
                        return Poll::Ready(Some(Err(this.cut(why))));
                    }
                    if this.judge.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let next = tokio::time::Instant::now() + JUDGED_EVERY;
                    this.judge.as_mut().reset(next);
                }
            }
        };
        if let Some(data) = frame.data_ref() {
            if let Some(c) = &this.conn {
                c.upload_progressed();
            }
            let missing = GRPC_PREFIX.saturating_sub(this.prefix.len()).min(data.len());
            this.prefix.extend_from_slice(&data[..missing]);
            this.received += data.len() as u64;
            let n = this.wanted().saturating_sub(this.held);
            if n > 0 {
                if let Err(short) = this.in_flight.take(n, this.conn.as_deref()) {
                    let cap = this.in_flight.cap >> 20;
                    this.end_upload();
                    return Poll::Ready(Some(Err(Status::resource_exhausted(match short {
                        Short::Total => format!(
                            "the daemon is receiving {} MiB of requests already (daemon.max_request_bytes_in_flight is {cap} MiB); retry shortly",
                            this.in_flight.held() >> 20
                        ),
                        Short::Connection(share) => format!(
                            "this connection's requests being received would hold more than {} MiB, half of daemon.max_request_bytes_in_flight ({cap} MiB); retry once they are in",
                            share >> 20
                        ),
                        Short::Peer(share) => format!(
                            "this client's requests being received would hold more than {} MiB, three quarters of daemon.max_request_bytes_in_flight ({cap} MiB); retry once they are in",
                            share >> 20
                        ),
                    }))));
                }
                this.held += n;
            }
            // A slow drip brings data too: judged as it comes.
            if let Some(why) = this.too_slow() {
                return Poll::Ready(Some(Err(this.cut(why))));
            }
        }
        if this.body.is_end_stream() {
            this.end_upload();
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_taken_up_to_the_cap_and_given_back() {
        let f = InFlight::new(100, 0);
        assert!(f.take(60, None).is_ok() && f.take(40, None).is_ok());
        assert!(f.take(1, None).is_err(), "over the cap");
        f.give_back(60, None);
        assert_eq!(f.held(), 40);
        assert!(f.take(60, None).is_ok() && f.take(1, None).is_err());
    }

    #[test]
    fn one_connection_holds_half_and_one_peer_three_quarters() {
        let gib = 1u64 << 30;
        let f = InFlight::new(gib, 256 << 20);
        let peer = Peer::Ip("10.0.0.1".parse().unwrap());
        let (a, b, other) = (ConnectionState::of(peer), ConnectionState::of(peer), ConnectionState::of(Peer::Uid(1000)));
        // Two ~256 MiB announcements fit on one connection, a third does not.
        let m = 256 << 20;
        assert!(f.take(m, Some(&a)).is_ok() && f.take(m, Some(&a)).is_ok());
        assert!(matches!(f.take(m, Some(&a)), Err(Short::Connection(_))));
        // The same peer on another connection: one more, then its share is full.
        assert!(f.take(m, Some(&b)).is_ok());
        assert!(matches!(f.take(m, Some(&b)), Err(Short::Peer(_))));
        // Another peer still gets the rest of the total.
        assert!(f.take(m, Some(&other)).is_ok());
        assert!(matches!(f.take(1, Some(&other)), Err(Short::Total)));
        f.give_back(2 * m, Some(&a));
        assert_eq!((f.held(), a.reserved.load(Ordering::SeqCst)), (2 * m, 0));
        assert!(f.take(m, Some(&b)).is_ok());
    }

    #[test]
    fn a_body_is_known_by_its_grpc_prefix() {
        assert_eq!(declared_bytes(&[0, 0, 0, 1, 0]), Some(5 + 256));
        assert_eq!(declared_bytes(&[1, 0x09, 0x60, 0x00, 0x00]), Some(5 + (150 << 20)));
        assert_eq!(declared_bytes(&[0, 0, 0, 1]), None);
        assert_eq!(declared_bytes(&[]), None);
    }
}
