//! What the daemon tests share: an in-process server on a loopback TCP port, a client
//! generated from the .proto, synthetic requests and the check of returned proofs.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::synthetic::SyntheticKind;
use cuzk_engine::{Engine, EngineConfig};
use cuzk_groth16::synthetic::SyntheticShape;
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{synthesize, CpuBackend, Proof, ProvingBackend};
use cuzk_server::connections::ConnectionLimits;
use cuzk_server::pb::proving_engine_client::ProvingEngineClient;
use cuzk_server::pb::{self, ProofKind};
use cuzk_server::{serve_service_with, ListenAddr, Listener, ParameterFiles, ProvingService, MAX_MESSAGE_BYTES};
use tonic::transport::Channel;

pub struct Daemon {
    pub addr: SocketAddr,
    pub engine: Arc<Engine>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl Daemon {
    /// On the CPU backend.
    pub async fn start(cfg: EngineConfig) -> Daemon {
        Daemon::start_with(cfg, vec![Arc::new(CpuBackend::new())]).await
    }

    pub async fn start_with(cfg: EngineConfig, backends: Vec<Arc<dyn ProvingBackend>>) -> Daemon {
        Daemon::start_with_buffers(cfg, backends, cuzk_engine::Buffers::plain()).await
    }

    /// With a, b, c in `buffers` (pinned memory on a GPU).
    pub async fn start_with_buffers(cfg: EngineConfig, backends: Vec<Arc<dyn ProvingBackend>>, buffers: cuzk_engine::Buffers) -> Daemon {
        Daemon::start_with_kinds(cfg, backends, vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(14))], buffers).await
    }

    /// With the given proof kinds.
    pub async fn start_with_kinds(
        cfg: EngineConfig,
        backends: Vec<Arc<dyn ProvingBackend>>,
        kinds: Vec<cuzk_engine::Handler>,
        buffers: cuzk_engine::Buffers,
    ) -> Daemon {
        Daemon::start_checking(cfg, backends, kinds, buffers, None).await
    }

    /// With the given proof kinds, PreloadSRS checking parameter files when `files` is given.
    pub async fn start_checking(
        cfg: EngineConfig,
        backends: Vec<Arc<dyn ProvingBackend>>,
        kinds: Vec<cuzk_engine::Handler>,
        buffers: cuzk_engine::Buffers,
        files: Option<ParameterFiles>,
    ) -> Daemon {
        Daemon::start_limited(cfg, backends, kinds, buffers, files, ConnectionLimits::default(), None).await
    }

    /// On the CPU backend with synthetic circuits, every call requiring `token`.
    pub async fn start_with_token(cfg: EngineConfig, token: &str) -> Daemon {
        let kinds: Vec<cuzk_engine::Handler> = vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(14))];
        let token = Arc::new(cuzk_server::access::AccessToken::new(token).unwrap());
        let (backends, buffers) = (vec![Arc::new(CpuBackend::new()) as Arc<dyn ProvingBackend>], cuzk_engine::Buffers::plain());
        Daemon::start_limited(cfg, backends, kinds, buffers, None, ConnectionLimits::default(), Some(token)).await
    }

    /// On the CPU backend with synthetic circuits, the connections bounded by `limits`.
    pub async fn start_with_limits(cfg: EngineConfig, limits: ConnectionLimits) -> Daemon {
        let kinds: Vec<cuzk_engine::Handler> = vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(14))];
        Daemon::start_limited(cfg, vec![Arc::new(CpuBackend::new())], kinds, cuzk_engine::Buffers::plain(), None, limits, None).await
    }

    async fn start_limited(
        cfg: EngineConfig,
        backends: Vec<Arc<dyn ProvingBackend>>,
        kinds: Vec<cuzk_engine::Handler>,
        buffers: cuzk_engine::Buffers,
        files: Option<ParameterFiles>,
        limits: ConnectionLimits,
        token: Option<Arc<cuzk_server::access::AccessToken>>,
    ) -> Daemon {
        let engine = Arc::new(Engine::start_with_buffers(cfg, backends, kinds, buffers).unwrap());
        let listener = Listener::bind(&"127.0.0.1:0".parse::<ListenAddr>().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut service = ProvingService::new(engine.clone());
        if let Some(files) = files {
            service = service.checking_parameters(files);
        }
        if let Some(token) = token {
            service = service.requiring_token(token);
        }
        let served = tokio::spawn(async move {
            serve_service_with(listener, service, &limits, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Daemon { addr, engine, stop: Some(stop), served: Some(served) }
    }

    pub async fn client(&self) -> ProvingEngineClient<Channel> {
        ProvingEngineClient::connect(format!("http://{}", self.addr))
            .await
            .unwrap()
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES + (4 << 20))
    }

    /// Engine shutdown with the given grace, then the server.
    pub async fn stop(mut self, grace: Duration) {
        let e = self.engine.clone();
        tokio::task::spawn_blocking(move || e.shutdown(grace)).await.unwrap();
        let _ = self.stop.take().unwrap().send(());
        self.served.take().unwrap().await.unwrap();
    }
}

pub fn config() -> EngineConfig {
    // Synthetic jobs stand in for every kind here, CRITICAL ones too.
    let admission = cuzk_engine::AdmissionLimits {
        critical_kinds: vec![cuzk_engine::ProofKind::Filecoin(cuzk_filecoin::CircuitKind::WinningPost), cuzk_engine::ProofKind::Synthetic],
        ..Default::default()
    };
    EngineConfig { memory_budget_bytes: 2 << 30, admission, ..EngineConfig::default() }
}

pub fn synthetic(log_size: u32, partitions: u32, seed: u64, priority: pb::Priority, request_id: &str) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: request_id.into(),
        proof_kind: ProofKind::Synthetic as i32,
        priority: priority as i32,
        vanilla_proof: format!(r#"{{"log_size": {log_size}, "partitions": {partitions}, "seed": {seed}}}"#).into_bytes(),
        ..Default::default()
    }
}

pub fn check_proof(bytes: &[u8], log_size: u32, partitions: u32, seed: u64) {
    assert_eq!(bytes.len(), 192 * partitions as usize);
    let params = SyntheticKind::parameters(log_size).unwrap();
    let pvk = PreparedVerifyingKey::new(&params.vk);
    let shape = SyntheticShape::for_domain(log_size);
    for i in 0..partitions as usize {
        let chunk = &bytes[i * 192..(i + 1) * 192];
        let inputs = synthesize(shape.circuit(seed + i as u64)).unwrap().input[1..].to_vec();
        assert!(verify_proof(&pvk, &Proof::from_bytes(chunk).unwrap(), &inputs).unwrap(), "partition {i}");
        // A tampered proof does not verify (or does not even decode).
        let mut bad = chunk.to_vec();
        bad[100] ^= 1;
        let ok = Proof::from_bytes(&bad).map(|p| verify_proof(&pvk, &p, &inputs).unwrap_or(false)).unwrap_or(false);
        assert!(!ok, "a tampered partition {i} proof verified");
    }
}
