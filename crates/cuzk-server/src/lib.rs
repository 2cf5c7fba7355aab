//! The gRPC service `cuzk.v1.ProvingEngine` (proto/cuzk/v1/proving.proto) over
//! [`cuzk_engine::Engine`]: request checking and conversion only, no proving logic.
//! The wire's names are mapped onto the engine's here, and only here: an SRS is a
//! parameter set (PreloadSRS → `Engine::preload`, `loaded_srs` ← the cached parameter
//! sets, `srs_load_ms` ← `parameter_load_ms`); a GPUStatus is a proving backend.

pub mod access;
pub mod authority;
pub mod codec;
pub mod config;
pub mod connections;
pub mod guard;
pub mod rejection;
pub mod request_bytes;
pub mod status_http;
pub mod unix_socket;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::synthetic::SyntheticRequest;
use cuzk_engine::{Engine, EngineError, EngineStatus, JobId, JobOutcome, JobRequest, JobStatus, Priority, ProofKind};
use cuzk_filecoin::FilecoinRequest;
use tonic::{Request, Response, Status};

pub mod pb {
    tonic::include_proto!("cuzk.v1");
}

use pb::proving_engine_server::{ProvingEngine, ProvingEngineServer};

/// The wire's SubmitProofRequest of a Filecoin request (a request folder's, `cuzk
/// fixture`), as Curio would send it: the inverse of [`request_of`]. Both structs are
/// written out whole: a field added to either does not compile until it is mapped.
pub fn submit_request_of(r: &FilecoinRequest) -> pb::SubmitProofRequest {
    let FilecoinRequest {
        kind,
        registered_proof,
        sector_size,
        vanilla_proof,
        vanilla_proofs,
        sector_number,
        miner_id,
        randomness,
        partition_index,
        comm_r_old,
        comm_r_new,
        comm_d_new,
    } = r.clone();
    pb::SubmitProofRequest {
        // The caller's to set: a folder has neither.
        request_id: String::new(),
        priority: pb::Priority::Unspecified as i32,
        proof_kind: wire_kind(ProofKind::Filecoin(kind)) as i32,
        registered_proof,
        sector_size,
        vanilla_proof,
        vanilla_proofs,
        sector_number,
        miner_id,
        randomness,
        partition_index,
        comm_r_old,
        comm_r_new,
        comm_d_new,
    }
}

/// Largest request or response, as the client uses (256 MiB).
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Where the daemon listens: `host:port` or `unix:///path/to.sock`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// Streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
pub const MAX_STREAMS_PER_CONNECTION: u32 = 128;

/// The longest path a unix socket can be bound at (Linux's sun_path, less its NUL).
pub const MAX_SOCKET_PATH_BYTES: usize = 107;

impl std::str::FromStr for ListenAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("unix://") {
            if path.is_empty() {
                return Err(format!("{s:?}: a unix:// address needs a path"));
            }
            // sockaddr_un's sun_path: 108 bytes with the closing NUL.
            if path.len() > MAX_SOCKET_PATH_BYTES {
                return Err(format!("{s:?}: the socket path is {} bytes; a unix socket's path holds at most {MAX_SOCKET_PATH_BYTES}", path.len()));
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        s.parse::<SocketAddr>().map(ListenAddr::Tcp).map_err(|e| format!("{s:?} is neither host:port nor unix:///path ({e})"))
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(a) => write!(f, "{a}"),
            ListenAddr::Unix(p) => write!(f, "unix://{}", p.display()),
        }
    }
}

/// The gRPC handlers: what each call does. Admission (the token) and what a refusal
/// says and logs are the served stack's ([`guard::GuardLayer`]).
pub struct ProvingService {
    engine: Arc<Engine>,
    parameter_files: Option<ParameterFiles>,
    /// With a token every call must carry it (checked by the guard layer), and
    /// GetStatus lists whole job ids.
    token: Option<Arc<access::AccessToken>>,
}

/// The parameter directory PreloadSRS checks a Filecoin circuit's files in before
/// loading them (presence, the length their headers imply, the timing marker:
/// `cuzk_filecoin::param_check::header_check`), so a missing or cut file is named in
/// the answer (FAILED_PRECONDITION) instead of failing deep in the load.
#[derive(Clone, Debug)]
pub struct ParameterFiles {
    pub dir: PathBuf,
    /// A timing-only daemon proves with timing parameters.
    pub timing_points_allowed: bool,
}

impl ParameterFiles {
    /// Why `circuit`'s files cannot be used, or None.
    pub fn problems(&self, circuit: cuzk_filecoin::Circuit) -> Result<Option<String>, cuzk_filecoin::FilecoinError> {
        let checks = cuzk_filecoin::param_check::header_check_circuit(circuit, &self.dir)?;
        Ok(cuzk_filecoin::param_check::problems(&checks, self.timing_points_allowed))
    }
}

impl ProvingService {
    pub fn new(engine: Arc<Engine>) -> Self {
        ProvingService { engine, parameter_files: None, token: None }
    }

    /// Checks a Filecoin circuit's parameter files in `files.dir` on PreloadSRS.
    pub fn checking_parameters(mut self, files: ParameterFiles) -> Self {
        self.parameter_files = Some(files);
        self
    }

    /// Requires `token` on every call (`authorization: Bearer <token>`).
    pub fn requiring_token(mut self, token: Arc<access::AccessToken>) -> Self {
        self.token = Some(token);
        self
    }

    /// The tonic service with the 256 MiB message limits.
    pub fn into_server(self) -> ProvingEngineServer<ProvingService> {
        ProvingEngineServer::new(self).max_decoding_message_size(MAX_MESSAGE_BYTES).max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

fn status_of(e: EngineError) -> Status {
    match e {
        EngineError::InvalidArgument(m) => Status::invalid_argument(m),
        EngineError::NotFound(m) => Status::not_found(m),
        EngineError::ResourceExhausted(m) => Status::resource_exhausted(m),
        EngineError::FailedPrecondition(m) => Status::failed_precondition(m),
        EngineError::PermissionDenied(m) => Status::permission_denied(m),
        EngineError::ShuttingDown => Status::unavailable("the daemon is shutting down"),
        EngineError::Internal(m) => Status::internal(m),
    }
}

/// The engine's kind of a wire value: the wire's value names are the engine's kind
/// names upper-cased (POREP_SEAL_COMMIT is porep_seal_commit), so a kind added to both
/// needs nothing here.
fn kind_of(v: i32) -> Result<ProofKind, Status> {
    match pb::ProofKind::try_from(v) {
        Ok(pb::ProofKind::Unspecified) => Err(Status::invalid_argument("proof_kind is unspecified")),
        Ok(pb::ProofKind::Synthetic) => Ok(ProofKind::Synthetic),
        Ok(k) => ProofKind::from_name(&k.as_str_name().to_ascii_lowercase())
            .ok_or_else(|| Status::unimplemented(format!("proof_kind {} has no kind in this daemon", k.as_str_name()))),
        Err(_) => Err(Status::invalid_argument(format!("unknown proof_kind {v}"))),
    }
}

/// The wire value of an engine kind ([`kind_of`]'s inverse).
pub fn wire_kind(k: ProofKind) -> pb::ProofKind {
    match k {
        ProofKind::Synthetic => pb::ProofKind::Synthetic,
        ProofKind::Filecoin(_) => pb::ProofKind::from_str_name(&k.name().to_ascii_uppercase()).unwrap_or(pb::ProofKind::Unspecified),
    }
}

/// The engine's request of a SubmitProofRequest: the one mapping from the wire (the
/// destructuring names every field of the message, so a field added to proving.proto
/// does not compile until it is mapped). A Filecoin kind's fields become its
/// [`FilecoinRequest`]; the synthetic kind's `vanilla_proof` is its JSON payload.
fn request_of(r: pb::SubmitProofRequest) -> Result<JobRequest, Status> {
    let pb::SubmitProofRequest {
        request_id,
        proof_kind,
        priority,
        sector_size,
        registered_proof,
        vanilla_proof,
        vanilla_proofs,
        sector_number,
        miner_id,
        randomness,
        partition_index,
        comm_r_old,
        comm_r_new,
        comm_d_new,
    } = r;
    let kind = kind_of(proof_kind)?;
    let priority = Priority::from_wire(priority).ok_or_else(|| Status::invalid_argument(format!("unknown priority {priority}")))?;
    for (name, v) in [("randomness", &randomness), ("comm_r_old", &comm_r_old), ("comm_r_new", &comm_r_new), ("comm_d_new", &comm_d_new)] {
        if !v.is_empty() && v.len() != 32 {
            return Err(Status::invalid_argument(format!("{name} must be 32 bytes, got {}", v.len())));
        }
    }
    Ok(match kind {
        ProofKind::Filecoin(kind) => JobRequest::new(
            request_id,
            priority,
            FilecoinRequest {
                kind,
                registered_proof,
                sector_size,
                vanilla_proof,
                vanilla_proofs,
                sector_number,
                miner_id,
                randomness,
                partition_index,
                comm_r_old,
                comm_r_new,
                comm_d_new,
            },
        ),
        ProofKind::Synthetic => JobRequest::new(request_id, priority, SyntheticRequest(vanilla_proof)),
    })
}

/// The wire answer for `o`. A job completed without a proof (a timing-only daemon's:
/// its note says so) is FAILED: a client such as Curio takes COMPLETED to mean a proof.
fn await_response(o: JobOutcome) -> pb::AwaitProofResponse {
    use pb::await_proof_response::Status as S;
    let status = match o.status {
        JobStatus::Completed if o.proof.is_empty() => S::Failed,
        JobStatus::Completed => S::Completed,
        JobStatus::Failed => S::Failed,
        JobStatus::Cancelled => S::Cancelled,
        JobStatus::Queued | JobStatus::Running => S::Timeout,
    };
    pb::AwaitProofResponse {
        job_id: o.job_id.0,
        status: status as i32,
        proof: o.proof,
        error_message: o.error,
        queue_wait_ms: o.timings.queue_wait_ms,
        srs_load_ms: o.timings.parameter_load_ms,
        synthesis_ms: o.timings.synthesis_ms,
        gpu_compute_ms: o.timings.gpu_compute_ms,
        total_ms: o.timings.total_ms,
    }
}

/// GetStatus from the engine's status; what each field reports is documented in
/// proving.proto.
/// Job ids are listed whole only where `whole_ids` (the caller holds the daemon's
/// token); otherwise as their labels (knowing a job's id lets a client cancel it).
fn status_response(s: &EngineStatus, whole_ids: bool) -> pb::GetStatusResponse {
    pb::GetStatusResponse {
        gpus: s
            .backends
            .iter()
            .map(|b| pb::GpuStatus {
                // A backend without a device (the CPU backend, where there is no usable
                // GPU) reports 0 for the ordinal and the memory.
                ordinal: b.device.as_ref().map_or(0, |d| d.ordinal as u32),
                name: b.name.clone(),
                vram_total_bytes: b.device.as_ref().map_or(0, |d| d.total_memory),
                vram_free_bytes: b.device.as_ref().map_or(0, |d| d.free_memory),
                current_job_id: b.current_job.as_ref().map(|(j, _)| if whole_ids { j.0.clone() } else { j.label().to_string() }).unwrap_or_default(),
                current_proof_kind: b.current_job.as_ref().map(|(_, k)| k.to_string()).unwrap_or_default(),
                // A lost device is not asked (ordinal and memory 0; its name keeps it).
                out_of_service: b.out_of_service.clone().unwrap_or_default(),
            })
            .collect(),
        loaded_srs: s
            .parameter_sets
            .iter()
            .map(|p| pb::SrsStatus {
                circuit_id: p.circuit_id.clone(),
                tier: pb::srs_status::Tier::Hot as i32,
                size_bytes: p.size_bytes,
                ref_count: p.ref_count,
            })
            .collect(),
        queues: s.queues.iter().map(|q| pb::QueueStatus { proof_kind: q.kind.to_string(), pending: q.pending, in_progress: q.in_progress }).collect(),
        total_proofs_completed: s.completed,
        total_proofs_failed: s.failed,
        uptime_seconds: s.uptime.as_secs(),
        pinned_memory_bytes: s.memory_pinned_bytes,
        // Pinned memory has no limit of its own: it is charged to the memory budget
        // with the rest of the engine's host memory, so the budget bounds it.
        pinned_memory_limit_bytes: s.memory_budget_bytes,
    }
}

impl ProvingService {
    /// AwaitProof: the job's outcome once it has finished, or its state when
    /// `timeout_ms` (0 = no limit) runs out first. Waits on the job's completion
    /// future: no thread is held and nothing polls; a call whose client went away is
    /// dropped by tonic, and its waker with it.
    async fn await_job(&self, id: JobId, timeout_ms: u64) -> Result<pb::AwaitProofResponse, Status> {
        let mut done = self.engine.completion(&id).map_err(status_of)?;
        let outcome = match timeout_ms {
            0 => (&mut done).await,
            ms => match tokio::time::timeout(Duration::from_millis(ms), &mut done).await {
                Ok(o) => o,
                Err(_) => done.snapshot(),
            },
        };
        Ok(await_response(outcome))
    }

    /// Decoding a request can take a while (a 32 GiB C1 is tens of MB of JSON whose
    /// vanilla proofs are checked), so it runs off the async workers.
    async fn submit_inner(&self, r: pb::SubmitProofRequest) -> Result<pb::SubmitProofResponse, Status> {
        let req = request_of(r)?;
        let engine = self.engine.clone();
        let s = tokio::task::spawn_blocking(move || engine.submit(req))
            .await
            .map_err(|e| Status::internal(format!("submitting: {e}")))?
            .map_err(status_of)?;
        Ok(pb::SubmitProofResponse { job_id: s.job_id.0, queue_position: s.queue_position, assigned_gpu: String::new() })
    }
}

#[tonic::async_trait]
impl ProvingEngine for ProvingService {
    async fn submit_proof(&self, req: Request<pb::SubmitProofRequest>) -> Result<Response<pb::SubmitProofResponse>, Status> {
        self.submit_inner(req.into_inner()).await.map(Response::new)
    }

    async fn await_proof(&self, req: Request<pb::AwaitProofRequest>) -> Result<Response<pb::AwaitProofResponse>, Status> {
        let r = req.into_inner();
        if r.job_id.is_empty() {
            return Err(Status::invalid_argument("job_id is empty"));
        }
        self.await_job(JobId(r.job_id), r.timeout_ms).await.map(Response::new)
    }

    async fn prove(&self, req: Request<pb::ProveRequest>) -> Result<Response<pb::ProveResponse>, Status> {
        let submit = req.into_inner().submit.ok_or_else(|| Status::invalid_argument("submit is missing"))?;
        let s = self.submit_inner(submit).await?;
        let result = self.await_job(JobId(s.job_id), 0).await?;
        Ok(Response::new(pb::ProveResponse { result: Some(result) }))
    }

    async fn cancel_proof(&self, req: Request<pb::CancelProofRequest>) -> Result<Response<pb::CancelProofResponse>, Status> {
        let was_running = self.engine.cancel(&JobId(req.into_inner().job_id)).map_err(status_of)?;
        Ok(Response::new(pb::CancelProofResponse { was_running }))
    }

    async fn get_status(&self, _: Request<pb::GetStatusRequest>) -> Result<Response<pb::GetStatusResponse>, Status> {
        Ok(Response::new(status_response(&self.engine.status(), self.token.is_some())))
    }

    async fn get_metrics(&self, _: Request<pb::GetMetricsRequest>) -> Result<Response<pb::GetMetricsResponse>, Status> {
        Ok(Response::new(pb::GetMetricsResponse { prometheus_text: self.engine.metrics_text() }))
    }

    async fn preload_srs(&self, req: Request<pb::PreloadSrsRequest>) -> Result<Response<pb::PreloadSrsResponse>, Status> {
        self.preload_inner(req.into_inner().circuit_id).await.map(Response::new)
    }

    async fn evict_srs(&self, req: Request<pb::EvictSrsRequest>) -> Result<Response<pb::EvictSrsResponse>, Status> {
        let (was_loaded, freed_bytes) = self.engine.evict(&req.into_inner().circuit_id).map_err(status_of)?;
        Ok(Response::new(pb::EvictSrsResponse { was_loaded, freed_bytes }))
    }
}

impl ProvingService {
    async fn preload_inner(&self, id: String) -> Result<pb::PreloadSrsResponse, Status> {
        if let (Some(files), Some(circuit)) = (self.parameter_files.clone(), cuzk_filecoin::Circuit::from_id(&id)) {
            let problems = tokio::task::spawn_blocking(move || files.problems(circuit))
                .await
                .map_err(|e| Status::internal(format!("checking parameter files: {e}")))?
                .map_err(|e| Status::internal(format!("checking parameter files of {circuit}: {e}")))?;
            if let Some(message) = problems {
                tracing::error!(circuit = %circuit, "PreloadSRS: {message}");
                return Err(Status::failed_precondition(message));
            }
        }
        let engine = self.engine.clone();
        let (already_loaded, took) = tokio::task::spawn_blocking(move || engine.preload(&id))
            .await
            .map_err(|e| Status::internal(format!("loading parameters: {e}")))?
            .map_err(status_of)?;
        Ok(pb::PreloadSrsResponse { already_loaded, load_time_ms: took.as_millis() as u64 })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("binding {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error(transparent)]
    Socket(#[from] unix_socket::SocketError),
    #[error("serving: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// A bound listener (bind first, so the caller learns the port before serving).
pub enum Listener {
    Tcp(tokio::net::TcpListener),
    /// The socket file is removed when the listener is done with, if still its own.
    Unix(tokio::net::UnixListener, unix_socket::SocketFile),
}

impl Listener {
    /// [`Listener::bind_with`] the default socket settings.
    pub async fn bind(addr: &ListenAddr) -> Result<Listener, ServeError> {
        Self::bind_with(addr, &unix_socket::SocketSettings::default()).await
    }

    /// Binds `addr`; a unix socket as [`unix_socket::bind`] does (a live daemon's
    /// socket or a file that is not a socket is refused, never removed).
    pub async fn bind_with(addr: &ListenAddr, socket: &unix_socket::SocketSettings) -> Result<Listener, ServeError> {
        match addr {
            ListenAddr::Tcp(a) => {
                tokio::net::TcpListener::bind(a).await.map(Listener::Tcp).map_err(|source| ServeError::Bind { addr: addr.to_string(), source })
            }
            ListenAddr::Unix(p) => {
                let (l, file) = unix_socket::bind(p, socket).await?;
                Ok(Listener::Unix(l, file))
            }
        }
    }

    /// The TCP address actually bound (port 0 resolved), if TCP.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(..) => None,
        }
    }
}

/// Serves until `shutdown` resolves; in-flight calls finish first.
pub async fn serve(listener: Listener, engine: Arc<Engine>, shutdown: impl std::future::Future<Output = ()> + Send) -> Result<(), ServeError> {
    serve_service(listener, ProvingService::new(engine), shutdown).await
}

/// [`serve`] with a service set up by the caller ([`ProvingService::checking_parameters`]).
pub async fn serve_service(
    listener: Listener,
    service: ProvingService,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_service_with(listener, service, &connections::ConnectionLimits::default(), shutdown).await
}

/// [`serve_service`] with the connections bounded by `limits`.
pub async fn serve_service_with(
    listener: Listener,
    service: ProvingService,
    limits: &connections::ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_service_tls(listener, service, limits, None, shutdown).await
}

/// [`serve_service_with`] over TLS when `tls` is given (`access::TlsFiles::server_config`).
pub async fn serve_service_tls(
    listener: Listener,
    service: ProvingService,
    limits: &connections::ConnectionLimits,
    tls: Option<tonic::transport::ServerTlsConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    use connections::Incoming;
    let guard = guard::GuardLayer::new(service.token.clone(), MAX_MESSAGE_BYTES);
    let svc = service.into_server();
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    let router = builder
        // Pings find dead peers (no answer within 20 s: closed); answering them keeps no
        // connection open, requests do (connections::RequestsLayer).
        .http2_keepalive_interval(Some(limits.keepalive_interval()))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        // Announced in SETTINGS: streams per connection are bounded (each costs the
        // server a little; Curio keeps ~10-20 calls open on one).
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        // The token and every refusal (guard.rs), before any request is counted.
        .layer(guard)
        .layer(request_bytes::RequestBytesLayer::new(
            request_bytes::InFlight::new(limits.max_request_bytes_in_flight, MAX_MESSAGE_BYTES as u64),
            limits.clone(),
        ))
        // Each connection's requests in flight: what keeps it open (connections.rs).
        .layer(connections::RequestsLayer)
        .add_service(svc);
    match listener {
        Listener::Tcp(l) => router.serve_with_incoming_shutdown(Incoming::new(l, limits.clone()), shutdown).await?,
        Listener::Unix(l, file) => {
            let r = router.serve_with_incoming_shutdown(Incoming::new(l, limits.clone()), shutdown).await;
            // Removed only while it is still this daemon's socket.
            drop(file);
            r?
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_filecoin::CircuitKind;

    #[test]
    fn every_kind_maps_to_the_wire_and_back() {
        for k in ProofKind::all() {
            assert_eq!(kind_of(wire_kind(k) as i32).unwrap(), k, "{k}");
        }
        assert!(kind_of(pb::ProofKind::Unspecified as i32).is_err());
        assert!(kind_of(99).is_err());
        // And every wire value but UNSPECIFIED has its kind (a value added to the proto
        // without one fails here, by name).
        let values: Vec<pb::ProofKind> = (0..256).filter_map(|v| pb::ProofKind::try_from(v).ok()).collect();
        assert!(values.len() > ProofKind::all().count(), "{values:?}");
        for v in values.into_iter().filter(|&v| v != pb::ProofKind::Unspecified) {
            assert_eq!(kind_of(v as i32).map(wire_kind).ok(), Some(v), "the wire value {} has no kind", v.as_str_name());
        }
    }

    /// A request folder's request reaches the engine with every field as it was.
    #[test]
    fn a_filecoin_request_survives_the_wire() {
        for kind in CircuitKind::ALL {
            let r = FilecoinRequest {
                registered_proof: 3,
                sector_size: 2048,
                vanilla_proof: vec![1],
                vanilla_proofs: vec![vec![2], vec![3, 4]],
                sector_number: 5,
                miner_id: 6,
                randomness: vec![7; 32],
                partition_index: 8,
                comm_r_old: vec![9; 32],
                comm_r_new: vec![10; 32],
                comm_d_new: vec![11; 32],
                ..FilecoinRequest::new(kind)
            };
            let back = request_of(submit_request_of(&r)).unwrap();
            assert!(matches!(&*back.body, cuzk_engine::RequestBody::Filecoin(b) if *b == r), "{:?}", back.body);
        }
    }
}
