//! Bytes of request bodies being received, all connections together, capped. A
//! request may be 256 MiB, and tonic buffers it whole (then decodes a copy) before
//! the handler sees it: without a cap, a few clients sending large requests at once
//! could take memory the engine's budget has promised to proving. A request whose
//! bytes would take the total over `daemon.max_request_bytes_in_flight` is answered
//! RESOURCE_EXHAUSTED (retry later); its bytes are released as soon as its body is
//! done with (decoded or abandoned). A request takes the whole length its gRPC message
//! declares (the first 5 bytes of its body) at once: counted only as they arrive, four
//! 150 MiB requests under a 256 MiB cap each got ~64 MiB in and all four were refused.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::{Body as HttpBody, Frame, SizeHint};
use tonic::body::Body;
use tonic::Status;

/// The bytes held by request bodies being received, and their cap.
#[derive(Debug)]
pub struct InFlight {
    held: AtomicU64,
    cap: u64,
}

impl InFlight {
    pub fn new(cap: u64) -> Arc<InFlight> {
        Arc::new(InFlight { held: AtomicU64::new(0), cap })
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// Takes `n` more bytes if they fit under the cap.
    fn take(&self, n: u64) -> bool {
        self.held.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| h.checked_add(n).filter(|&t| t <= self.cap)).is_ok()
    }

    fn give_back(&self, n: u64) {
        self.held.fetch_sub(n, Ordering::SeqCst);
    }
}

/// The tower layer that counts every request's body against an [`InFlight`].
#[derive(Clone)]
pub struct RequestBytesLayer {
    in_flight: Arc<InFlight>,
}

impl RequestBytesLayer {
    pub fn new(in_flight: Arc<InFlight>) -> Self {
        RequestBytesLayer { in_flight }
    }
}

impl<S> tower::Layer<S> for RequestBytesLayer {
    type Service = RequestBytes<S>;
    fn layer(&self, inner: S) -> RequestBytes<S> {
        RequestBytes { inner, in_flight: self.in_flight.clone() }
    }
}

#[derive(Clone)]
pub struct RequestBytes<S> {
    inner: S,
    in_flight: Arc<InFlight>,
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
        let counted = Counted { body, in_flight: self.in_flight.clone(), held: 0, received: 0, prefix: Vec::new() };
        self.inner.call(http::Request::from_parts(parts, Body::new(counted)))
    }
}

/// A request body whose data is counted while it exists: the larger of what has
/// arrived and what its gRPC message declares.
struct Counted {
    body: Body,
    in_flight: Arc<InFlight>,
    /// Bytes taken from `in_flight`.
    held: u64,
    received: u64,
    /// The gRPC message prefix (a flag byte and a big-endian u32 length) while fewer
    /// than its 5 bytes have arrived.
    prefix: Vec<u8>,
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

impl Drop for Counted {
    fn drop(&mut self) {
        self.in_flight.give_back(self.held);
    }
}

impl HttpBody for Counted {
    type Data = <Body as HttpBody>::Data;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Status>>> {
        let this = self.get_mut();
        let frame = match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            let missing = GRPC_PREFIX.saturating_sub(this.prefix.len()).min(data.len());
            this.prefix.extend_from_slice(&data[..missing]);
            this.received += data.len() as u64;
            let n = this.wanted().saturating_sub(this.held);
            if n > 0 && !this.in_flight.take(n) {
                return Poll::Ready(Some(Err(Status::resource_exhausted(format!(
                    "the daemon is receiving {} MiB of requests already (daemon.max_request_bytes_in_flight is {} MiB); retry shortly",
                    this.in_flight.held() >> 20,
                    this.in_flight.cap >> 20
                )))));
            }
            this.held += n;
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
        let f = InFlight::new(100);
        assert!(f.take(60) && f.take(40));
        assert!(!f.take(1), "over the cap");
        f.give_back(60);
        assert_eq!(f.held(), 40);
        assert!(f.take(60) && !f.take(1));
    }

    #[test]
    fn a_body_is_known_by_its_grpc_prefix() {
        assert_eq!(declared_bytes(&[0, 0, 0, 1, 0]), Some(5 + 256));
        assert_eq!(declared_bytes(&[1, 0x09, 0x60, 0x00, 0x00]), Some(5 + (150 << 20)));
        assert_eq!(declared_bytes(&[0, 0, 0, 1]), None);
        assert_eq!(declared_bytes(&[]), None);
    }
}
