//! Accepted connections, bounded. Without bounds a client that opens connections and
//! never speaks holds one descriptor each, forever; at the descriptor limit the accept
//! loop spins and real clients cannot connect. Here:
//! - a connection must send its first [`HANDSHAKE_BYTES`] (the HTTP/2 preface, or a
//!   TLS ClientHello) within the handshake timeout, and is closed once it has had no
//!   request in flight for the idle timeout, whatever else it sends (keep-alive pings
//!   a peer answers keep the link checked, not the connection open); [`RequestsLayer`]
//!   counts each connection's requests;
//! - at most `max_connections` are open; a new one beyond the cap takes the place of
//!   the oldest that has not finished its handshake (a legitimate client sends its
//!   preface at once, so a flood of silent connections cannot keep it out), else of the
//!   longest idle with no request in flight (idle or hostile peers that answer pings
//!   cannot either), and is refused (closed at once) only when every open one has a
//!   request in flight; a connection whose only requests are uploads that have
//!   brought no data for [`BODY_RATE_GRACE`] counts as idle
//!   (a request waiting on the server, a Prove or an AwaitProof, never does);
//! - when accepting fails for lack of descriptors, the loop backs off (and frees the
//!   oldest silent connection's) instead of spinning;
//! - TCP connections get TCP_NODELAY (gRPC's small frames otherwise wait ~40 ms for
//!   the peer's delayed ACK).

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;
use tonic::transport::server::Connected;

use crate::authority::AuthorityFix;
use cuzk_groth16::sync::lock;

/// Bytes a client must send within the handshake timeout: the HTTP/2 client preface's
/// length (a TLS ClientHello is longer).
pub const HANDSHAKE_BYTES: usize = 24;

/// How long a request body may run before its pace is judged against the minimum rate
/// (a request's first bytes may wait on the client's own work), and how long uploads
/// that bring nothing keep their connection from counting as idle.
pub const BODY_RATE_GRACE: Duration = Duration::from_secs(10);

/// TOML `daemon.max_connections`, `daemon.handshake_timeout`, `daemon.idle_timeout`,
/// `daemon.max_request_bytes_in_flight`, `daemon.request_body_timeout`,
/// `daemon.request_body_min_rate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub handshake_timeout: Duration,
    pub idle_timeout: Duration,
    /// Bytes of request bodies being received at once, all connections together
    /// (the request-bytes layer); at least one largest message. One connection may hold
    /// half of it, one peer three quarters.
    pub max_request_bytes_in_flight: u64,
    /// How long a request's body may take to arrive, whole.
    pub body_timeout: Duration,
    /// The slowest a body may arrive (bytes per second, averaged from its start, judged
    /// after [`BODY_RATE_GRACE`]); 0: no minimum.
    pub body_min_rate: u64,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 256,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(600),
            max_request_bytes_in_flight: 1 << 30,
            body_timeout: Duration::from_secs(600),
            body_min_rate: 64 << 10,
        }
    }
}

impl ConnectionLimits {
    /// How often the server pings an HTTP/2 connection (a peer that stops answering
    /// is closed long before the idle timeout).
    pub fn keepalive_interval(&self) -> Duration {
        (self.idle_timeout / 3).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }
}

/// Who a connection belongs to, for the share of request bytes one peer may hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A TCP peer's address.
    Ip(std::net::IpAddr),
    /// A unix socket peer's user.
    Uid(u32),
    #[default]
    Unknown,
}

/// One open connection, as the registry sees it.
#[derive(Default)]
pub(crate) struct ConnectionState {
    handshaken: AtomicBool,
    closed_by_us: AtomicBool,
    waker: Mutex<Option<Waker>>,
    /// Requests being served on it now.
    in_flight: AtomicUsize,
    /// When a request last started or finished on it (its handshake, before any).
    last_request: Mutex<Option<Instant>>,
    /// Requests on it whose bodies are still arriving (the request-bytes layer counts them).
    pub(crate) uploading: AtomicUsize,
    /// When a body on it last brought data.
    last_upload: Mutex<Option<Instant>>,
    /// Request bytes it holds of the daemon's in-flight total.
    pub(crate) reserved: std::sync::atomic::AtomicU64,
    pub(crate) peer: Peer,
}

impl ConnectionState {
    /// A connection from `peer`, as the registry makes one.
    pub(crate) fn of(peer: Peer) -> Self {
        ConnectionState { peer, ..ConnectionState::default() }
    }

    fn stamp(&self) {
        *lock(&self.last_request) = Some(Instant::now());
    }

    /// A body on it brought data.
    pub(crate) fn upload_progressed(&self) {
        *lock(&self.last_upload) = Some(Instant::now());
    }

    /// How long it has had no request in flight, or (when its only requests are uploads)
    /// no upload progress for at least [`BODY_RATE_GRACE`]; None
    /// while a request is served (or before its handshake).
    fn idle_for(&self) -> Option<Duration> {
        let in_flight = self.in_flight.load(Ordering::SeqCst);
        if in_flight == 0 {
            return lock(&self.last_request).map(|t| t.elapsed());
        }
        if in_flight > self.uploading.load(Ordering::SeqCst) {
            return None;
        }
        let last = [*lock(&self.last_upload), *lock(&self.last_request)];
        let since = last.into_iter().flatten().max().map(|t| t.elapsed())?;
        (since >= BODY_RATE_GRACE).then_some(since)
    }

    fn close(&self) {
        self.closed_by_us.store(true, Ordering::SeqCst);
        if let Some(w) = lock(&self.waker).take() {
            w.wake();
        }
    }
}

/// The open connections, oldest first.
#[derive(Default)]
struct Registry {
    open: Mutex<(u64, BTreeMap<u64, Arc<ConnectionState>>)>,
}

impl Registry {
    /// A place for a new connection: its id and state, or None when every place is
    /// taken by a connection with a request in flight. At the cap the new one takes
    /// the place of the oldest that has not finished its handshake, else of the one
    /// idle longest.
    fn admit(&self, cap: usize, peer: Peer) -> Option<(u64, Arc<ConnectionState>)> {
        let mut g = lock(&self.open);
        if g.1.len() >= cap {
            let silent = g.1.iter().find(|(_, c)| !c.handshaken.load(Ordering::SeqCst)).map(|(id, _)| *id);
            let idlest = || g.1.iter().filter_map(|(id, c)| c.idle_for().map(|d| (d, *id))).max().map(|(_, id)| id);
            let victim = silent.or_else(idlest)?;
            if let Some(c) = g.1.remove(&victim) {
                c.close();
            }
        }
        g.0 += 1;
        let id = g.0;
        let state = Arc::new(ConnectionState::of(peer));
        g.1.insert(id, state.clone());
        Some((id, state))
    }

    /// Closes the oldest connection that has not finished its handshake; true if one was.
    fn close_oldest_silent(&self) -> bool {
        let mut g = lock(&self.open);
        let Some(id) = g.1.iter().find(|(_, c)| !c.handshaken.load(Ordering::SeqCst)).map(|(id, _)| *id) else { return false };
        if let Some(c) = g.1.remove(&id) {
            c.close();
        }
        true
    }

    fn remove(&self, id: u64) {
        lock(&self.open).1.remove(&id);
    }
}

/// A listener the daemon accepts from.
pub trait Acceptor: Send + Unpin + 'static {
    type Io: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static;
    /// The next connection and its peer.
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, Peer)>>;
}

impl Acceptor for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, Peer)>> {
        tokio::net::TcpListener::poll_accept(self, cx).map_ok(|(s, addr)| {
            if let Err(e) = s.set_nodelay(true) {
                tracing::debug!("setting TCP_NODELAY: {e}");
            }
            (s, Peer::Ip(addr.ip()))
        })
    }
}

impl Acceptor for tokio::net::UnixListener {
    /// gRPC C-core clients' socket-path authority made valid (crate::authority).
    type Io = AuthorityFix<tokio::net::UnixStream>;
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, Peer)>> {
        tokio::net::UnixListener::poll_accept(self, cx).map_ok(|(s, _)| {
            let peer = s.peer_cred().map(|c| Peer::Uid(c.uid())).unwrap_or_default();
            (AuthorityFix::new(s), peer)
        })
    }
}

/// Whether an accept error means the process (or system) is out of descriptors or
/// memory: retrying at once would only spin.
pub(crate) fn is_exhaustion(e: &io::Error) -> bool {
    // EMFILE 24, ENFILE 23, ENOBUFS 105, ENOMEM 12 (Linux numbering; elsewhere the
    // back-off still applies through the OutOfMemory kind).
    matches!(e.raw_os_error(), Some(24 | 23 | 105 | 12)) || e.kind() == io::ErrorKind::OutOfMemory
}

/// Logs at most one line per `every` for a kind of event, with how many were not logged.
#[derive(Debug)]
pub(crate) struct Throttled {
    last: Option<Instant>,
    skipped: u64,
}

impl Throttled {
    pub(crate) fn new() -> Self {
        Throttled { last: None, skipped: 0 }
    }

    /// Some(skipped since the last line) when a line may be logged now.
    pub(crate) fn due(&mut self, every: Duration) -> Option<u64> {
        if self.last.is_some_and(|t| t.elapsed() < every) {
            self.skipped += 1;
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.skipped))
    }
}

/// The accepted connections of `listener`, bounded by `limits`: what tonic serves.
pub struct Incoming<A: Acceptor> {
    listener: A,
    limits: ConnectionLimits,
    registry: Arc<Registry>,
    backoff: Option<Pin<Box<Sleep>>>,
    backoff_step: Duration,
    refused_log: Throttled,
    exhausted_log: Throttled,
}

impl<A: Acceptor> Incoming<A> {
    pub fn new(listener: A, limits: ConnectionLimits) -> Self {
        Incoming {
            listener,
            limits,
            registry: Arc::default(),
            backoff: None,
            backoff_step: Duration::from_millis(10),
            refused_log: Throttled::new(),
            exhausted_log: Throttled::new(),
        }
    }
}

impl<A: Acceptor> tokio_stream::Stream for Incoming<A> {
    type Item = io::Result<Bounded<A::Io>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(b) = this.backoff.as_mut() {
                if b.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.backoff = None;
            }
            let (io, peer) = match this.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(accepted)) => accepted,
                Poll::Ready(Err(e)) if is_exhaustion(&e) => {
                    let freed = this.registry.close_oldest_silent();
                    if let Some(skipped) = this.exhausted_log.due(Duration::from_secs(10)) {
                        tracing::warn!(skipped, freed_a_silent_connection = freed, "accepting a connection: {e}; backing off");
                    }
                    this.backoff = Some(Box::pin(tokio::time::sleep(this.backoff_step)));
                    this.backoff_step = (this.backoff_step * 2).min(Duration::from_secs(1));
                    continue;
                }
                // A connection reset before it was accepted, and the like: the next one.
                Poll::Ready(Err(e)) => {
                    tracing::debug!("accepting a connection: {e}");
                    continue;
                }
            };
            this.backoff_step = Duration::from_millis(10);
            match this.registry.admit(this.limits.max_connections, peer) {
                Some((id, state)) => {
                    let deadline = Box::pin(tokio::time::sleep(this.limits.handshake_timeout));
                    return Poll::Ready(Some(Ok(Bounded {
                        io,
                        id,
                        state,
                        registry: this.registry.clone(),
                        read: 0,
                        deadline,
                        idle_timeout: this.limits.idle_timeout,
                    })));
                }
                None => {
                    if let Some(skipped) = this.refused_log.due(Duration::from_secs(10)) {
                        tracing::warn!(max = this.limits.max_connections, skipped, "connection refused: daemon.max_connections are open");
                    }
                    drop(io);
                }
            }
        }
    }
}

/// An accepted connection under the handshake and idle timeouts; its place in the
/// registry goes when it is dropped.
pub struct Bounded<T> {
    io: T,
    id: u64,
    state: Arc<ConnectionState>,
    registry: Arc<Registry>,
    /// Bytes read so far, counted up to [`HANDSHAKE_BYTES`].
    read: usize,
    /// The handshake's deadline, then the next time to check for idleness.
    deadline: Pin<Box<Sleep>>,
    idle_timeout: Duration,
}

impl<T> Drop for Bounded<T> {
    fn drop(&mut self) {
        self.registry.remove(self.id);
    }
}

impl<T> Bounded<T> {
    /// An error when the connection is to be closed: taken for another, or timed out.
    /// Registers the task's waker for both.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.state.closed_by_us.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "closed: its place was needed (daemon.max_connections)"));
        }
        *lock(&self.state.waker) = Some(cx.waker().clone());
        while self.deadline.as_mut().poll(cx).is_ready() {
            if self.read < HANDSHAKE_BYTES {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no handshake within daemon.handshake_timeout"));
            }
            // Checked again when the last request could have been idle_timeout ago.
            let wait = match self.state.idle_for() {
                None => self.idle_timeout,
                Some(idle) if idle >= self.idle_timeout => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "no request for daemon.idle_timeout"));
                }
                Some(idle) => self.idle_timeout - idle,
            };
            self.deadline.as_mut().reset(tokio::time::Instant::now() + wait);
        }
        Ok(())
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Bounded<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Err(e) = this.check(cx) {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let n = buf.filled().len() - before;
            if n > 0 {
                let was = this.read;
                this.read = (this.read + n).min(HANDSHAKE_BYTES);
                if was < HANDSHAKE_BYTES && this.read >= HANDSHAKE_BYTES {
                    this.state.handshaken.store(true, Ordering::SeqCst);
                    this.state.stamp();
                    let next = tokio::time::Instant::now() + this.idle_timeout;
                    this.deadline.as_mut().reset(next);
                }
            }
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Bounded<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Err(e) = this.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.io).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// What a request learns of its connection (in its extensions; under TLS inside
/// tonic's `TlsConnectInfo`): where [`RequestsLayer`] counts it.
#[derive(Clone)]
pub struct ConnectionInfo {
    state: Arc<ConnectionState>,
}

/// The connection a request came on, from its extensions (plain or under TLS).
pub(crate) fn connection_of(e: &http::Extensions) -> Option<Arc<ConnectionState>> {
    e.get::<ConnectionInfo>()
        .or_else(|| e.get::<tonic::transport::server::TlsConnectInfo<ConnectionInfo>>().map(|t| t.get_ref()))
        .map(|i| i.state.clone())
}

impl<T> Connected for Bounded<T> {
    type ConnectInfo = ConnectionInfo;
    fn connect_info(&self) -> ConnectionInfo {
        ConnectionInfo { state: self.state.clone() }
    }
}

/// Counts each connection's requests in flight (what keeps a connection from the idle
/// timeout and from giving its place to a new one), from the call until its response
/// future ends or is dropped.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestsLayer;

impl<S> tower::Layer<S> for RequestsLayer {
    type Service = Requests<S>;
    fn layer(&self, inner: S) -> Requests<S> {
        Requests { inner }
    }
}

#[derive(Clone, Debug)]
pub struct Requests<S> {
    inner: S,
}

/// A request in flight on a connection, until dropped.
struct InFlightGuard(Arc<ConnectionState>);

impl InFlightGuard {
    fn start(state: Arc<ConnectionState>) -> Self {
        state.in_flight.fetch_add(1, Ordering::SeqCst);
        state.stamp();
        InFlightGuard(state)
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.stamp();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<S, B> tower::Service<http::Request<B>> for Requests<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let guard = connection_of(req.extensions()).map(InFlightGuard::start);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let r = fut.await;
            drop(guard);
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_registry_gives_a_silent_connections_place_to_a_new_one() {
        let r = Registry::default();
        let (_, a) = r.admit(2, Peer::Unknown).unwrap();
        let (_, b) = r.admit(2, Peer::Unknown).unwrap();
        b.handshaken.store(true, Ordering::SeqCst);
        // Full: the silent one (a) makes way.
        let (_, c) = r.admit(2, Peer::Unknown).unwrap();
        assert!(a.closed_by_us.load(Ordering::SeqCst) && !b.closed_by_us.load(Ordering::SeqCst));
        c.handshaken.store(true, Ordering::SeqCst);
        // Full of connections past their handshake, each with a request in flight: refused.
        let _b = InFlightGuard::start(b.clone());
        let _c = InFlightGuard::start(c.clone());
        assert!(r.admit(2, Peer::Unknown).is_none());
        assert!(!r.close_oldest_silent());
    }

    #[test]
    fn a_full_registry_gives_the_longest_idle_connections_place_to_a_new_one() {
        let r = Registry::default();
        let mut states = Vec::new();
        for _ in 0..3 {
            let (_, s) = r.admit(3, Peer::Unknown).unwrap();
            s.handshaken.store(true, Ordering::SeqCst);
            s.stamp();
            states.push(s);
            std::thread::sleep(Duration::from_millis(5));
        }
        // The first is busy, the second idle longest of the others: it makes way.
        let busy = InFlightGuard::start(states[0].clone());
        r.admit(3, Peer::Unknown).unwrap();
        assert!(!states[0].closed_by_us.load(Ordering::SeqCst) && states[1].closed_by_us.load(Ordering::SeqCst));
        drop(busy);
        // A finished request counts as activity: the first is now the least idle.
        assert!(states[0].idle_for().unwrap() < states[2].idle_for().unwrap());
    }

    #[test]
    fn a_connection_whose_only_requests_are_stalled_uploads_is_idle_and_a_served_one_is_not() {
        let r = Registry::default();
        let (_, s) = r.admit(2, Peer::Unknown).unwrap();
        s.handshaken.store(true, Ordering::SeqCst);
        let long_ago = Instant::now() - BODY_RATE_GRACE - Duration::from_secs(1);
        *s.last_request.lock().unwrap() = Some(long_ago);
        // One request, its body still arriving and silent since long ago: idle.
        s.in_flight.fetch_add(1, Ordering::SeqCst);
        s.uploading.fetch_add(1, Ordering::SeqCst);
        *s.last_upload.lock().unwrap() = Some(long_ago);
        assert!(s.idle_for().is_some());
        // Its body moved just now: not idle.
        s.upload_progressed();
        assert!(s.idle_for().is_none());
        // Its body done, the request waiting on the server (an AwaitProof): never idle.
        *s.last_upload.lock().unwrap() = Some(long_ago);
        s.uploading.fetch_sub(1, Ordering::SeqCst);
        assert!(s.idle_for().is_none());
    }
}
