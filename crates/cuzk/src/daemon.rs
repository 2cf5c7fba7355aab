//! `cuzk daemon`: the engine behind the cuzk.v1 gRPC API.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use cuzk_engine::filecoin::FilecoinKind;
use cuzk_engine::synthetic::SyntheticKind;
use cuzk_engine::{Buffers, Engine, EngineError, Handler};
use cuzk_filecoin::{CircuitKind, InputChecks};
use cuzk_groth16::{CpuBackend, ProvingBackend};
use cuzk_server::access::{check_exposure, check_socket_mode, AccessToken};
use cuzk_server::config::{CompiledMatrices, DaemonConfig};
use cuzk_server::{serve_service_tls, ListenAddr, Listener, ParameterFiles, ProvingService};

use crate::config_file::read_config;

#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Configuration file (TOML; see cuzk.example.toml). Without one, the defaults apply.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen address, overriding daemon.listen: host:port or unix:///path.
    #[arg(long)]
    pub listen: Option<String>,
    /// Timing only (daemon.timing_only): prove shape-true inputs (`cuzk fixture`) and
    /// timing parameters; vanilla proofs are not checked and no proof is verified or
    /// returned. Never for real work.
    #[arg(long)]
    pub timing_only: bool,
    /// Validate the configuration, print the effective settings (every key, with the
    /// value in force) and check the parameter files' headers, then exit: non-zero when
    /// the configuration is invalid or a circuit of srs.preload has an unusable file.
    #[arg(long)]
    pub check_config: bool,
}

/// Reads the configuration (before logging starts, so logging.level can apply);
/// returns it with the warnings to log.
pub fn load_config(args: &DaemonArgs) -> Result<(DaemonConfig, Vec<String>)> {
    let (mut config, warnings) = read_config(args.config.as_deref())?;
    if let Some(l) = &args.listen {
        config.listen = l.parse::<ListenAddr>().map_err(anyhow::Error::msg).context("--listen")?;
    }
    config.timing_only |= args.timing_only;
    config.check_together().context("--listen")?;
    Ok((config, warnings))
}

pub fn run(mut config: DaemonConfig, warnings: Vec<String>, config_path: Option<&Path>) -> Result<()> {
    for w in &warnings {
        tracing::warn!("configuration: {w}");
    }
    let (connections, lowered) = crate::descriptors::connections_allowed(&config, true)?;
    if let Some(w) = lowered {
        tracing::warn!("{w}");
    }
    config.connections.max_connections = connections;
    let Access { token, tls, warnings } = access(&config)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    // filecoin-proofs reads its parameter directory from the environment once; set it
    // before any thread starts (its verifiers read the .vk files from there).
    cuzk_filecoin::env::use_parameter_dir(&config.parameter_dir).context("srs.param_cache")?;
    // Presence, length and timing marker of the files (a few pages read), logged per
    // circuit; srs.preload's circuits that pass are loaded once the engine runs.
    let preload = crate::params::start_check(&config);
    if config.cpu_threads > 0 {
        rayon::ThreadPoolBuilder::new().num_threads(config.cpu_threads).build_global().context("setting the CPU thread count")?;
    }
    let engine = build_engine(&config, config_path)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    rt.block_on(async {
        ignore_hangups();
        tokio::spawn(crate::log_limit::report_suppressed(Duration::from_secs(10)));
        let listener = Listener::bind_with(&config.listen, &config.socket).await?;
        let shown = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|| config.listen.to_string());
        tracing::info!(address = shown.as_str(), "cuzk daemon listening");
        if let Some(addr) = config.status_listen {
            let l = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding daemon.status_listen {addr}"))?;
            // The bound address (port 0 resolved), so a test or a script can find it.
            let bound = l.local_addr().unwrap_or(addr);
            tracing::info!(address = %bound, "HTTP status endpoint listening (GET /status, /metrics, /timeline)");
            tokio::spawn(cuzk_server::status_http::serve_status_with(l, engine.clone(), token.clone()));
        }
        if !preload.is_empty() {
            let e = engine.clone();
            // In the background: the socket opens meanwhile. The engine loads one set at
            // a time, so a job's own load waits behind these.
            std::thread::Builder::new()
                .name("srs-preload".into())
                .spawn(move || {
                    for circuit in preload {
                        match e.preload(&circuit.id()) {
                            Ok((_, took)) => tracing::info!(circuit = %circuit, seconds = took.as_secs_f64(), "srs.preload: parameters loaded"),
                            Err(err) => tracing::error!(circuit = %circuit, "srs.preload: loading the parameters failed: {err}"),
                        }
                    }
                })
                .context("starting the preload thread")?;
        }
        let mut service = ProvingService::new(engine.clone())
            .checking_parameters(ParameterFiles { dir: config.parameter_dir.clone(), timing_points_allowed: config.timing_only });
        if let Some(t) = token.clone() {
            service = service.requiring_token(t);
        }
        let e = engine.clone();
        // Listened for from now on: a second signal sent right after the first is never
        // missed (a listener made after it would not see it).
        let mut signals = Signals::new();
        serve_service_tls(listener, service, &config.connections, tls, async move {
            signals.next().await;
            tracing::info!("shutting down: finishing running jobs for up to 30 s, cancelling the rest (a second signal: at once)");
            let second = e.clone();
            let cut_short = tokio::spawn(async move {
                signals.next().await;
                tracing::warn!("second signal: cancelling every unfinished job now");
                second.end_grace();
            });
            let _ = tokio::task::spawn_blocking(move || e.shutdown(Duration::from_secs(30))).await;
            cut_short.abort();
        })
        .await
        .context("serving")
    })?;
    tracing::info!("cuzk daemon stopped");
    Ok(())
}

/// What guards the daemon's sockets, read before anything starts: the token, the TLS
/// configuration, and the warnings of what `daemon.allow_insecure` allowed.
pub struct Access {
    pub token: Option<Arc<AccessToken>>,
    pub tls: Option<tonic::transport::ServerTlsConfig>,
    pub warnings: Vec<String>,
}

/// The start's access checks (`--check-config` runs the same): the token file (present,
/// long enough), the TLS files, listeners reachable from other machines without a
/// guard, a world-writable socket; each refused with the message a start gives.
pub fn access(config: &DaemonConfig) -> Result<Access> {
    let token = match &config.auth_token_file {
        Some(path) => Some(Arc::new(AccessToken::from_file(path)?)),
        None => None,
    };
    let listen_tcp = match &config.listen {
        ListenAddr::Tcp(a) => Some(*a),
        ListenAddr::Unix(_) => None,
    };
    let client_certs = config.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
    let tls = config.tls.as_ref().map(|t| t.server_config(config.connections.handshake_timeout)).transpose()?;
    let mut warnings = check_exposure(listen_tcp, config.status_listen, token.is_some(), client_certs, config.allow_insecure)?;
    if matches!(config.listen, ListenAddr::Unix(_)) {
        warnings.extend(check_socket_mode(config.socket.mode, config.allow_insecure)?);
    }
    Ok(Access { token, tls, warnings })
}

/// The engine as the daemon runs it for `config`: its backends (every GPU, else the
/// CPU), buffers, memory budget and proof kinds, with the vanilla-proof and final checks
/// on unless the configuration is timing-only. `cuzk selftest` proves through the same
/// engine. The caller has set filecoin-proofs' parameter directory and the thread pool.
pub fn build_engine(config: &DaemonConfig, config_path: Option<&Path>) -> Result<Arc<Engine>> {
    let checks = if config.timing_only {
        tracing::warn!(
            "TIMING-ONLY DAEMON (daemon.timing_only): vanilla proofs are NOT checked, proofs are NOT verified and NO proof is returned; for timing runs on shape-true inputs only, never for real work"
        );
        InputChecks::TimingOnly
    } else {
        InputChecks::Full
    };
    let engine_config = config.engine_config(crate::memory::budget_bytes(config)?);
    // On GPUs, a, b, c are synthesized into pinned buffers (pooled by the engine), so
    // their uploads run at full PCIe speed and overlap the other worker's kernels.
    let mut synthetic = SyntheticKind::new(config.synthetic_max_log_size)
        .allowing_premade(config.synthetic_allow_premade)
        .with_compiled_matrices(config.compiled_matrices == CompiledMatrices::On);
    let (backends, buffers): (Vec<Arc<dyn ProvingBackend>>, Buffers) =
        match crate::backends::cuda_backends(&config.gpu_devices, &config.device_memory_limit)? {
            Some(gpus) => {
                let gpu = gpus[0].gpu().clone();
                // Synthetic setups' fixed-base multiplications on the first GPU, taking
                // turns with its proofs.
                let first = gpus[0].clone();
                synthetic = synthetic.with_fixed_base(Box::new(move || {
                    Ok(Box::new(cuzk_cuda::GpuFixedBase::with_device_lock(first.gpu().clone(), first.device_lock()).map_err(|e| e.to_string())?)
                        as Box<dyn cuzk_groth16::generator::FixedBaseMul>)
                }));
                let pinned = Buffers::pinned(Box::new(move |len| {
                    cuzk_cuda::PinnedScalars::storage(&gpu, len)
                        .map_err(|e| EngineError::ResourceExhausted(format!("pinned host buffer of {len} scalars: {e}")))
                }));
                (gpus.into_iter().map(|g| g as Arc<dyn ProvingBackend>).collect(), pinned)
            }
            None => (vec![Arc::new(CpuBackend::new())], Buffers::plain()),
        };
    tracing::info!(
        config = %config_path.map(|p| p.display().to_string()).unwrap_or_else(|| "(defaults)".into()),
        memory_budget_bytes = engine_config.memory_budget_bytes,
        parameter_dir = %config.parameter_dir.display(),
        backends = %backends.iter().map(|b| b.name()).collect::<Vec<_>>().join(","),
        workers_per_backend = engine_config.workers_per_backend,
        "proving backends ready"
    );
    let mut kinds = vec![Handler::synthetic(synthetic)];
    for k in CircuitKind::ALL {
        let kind = FilecoinKind::new(k, config.parameter_dir.clone(), checks);
        let dir = || config.matrices_dir.clone().unwrap_or_else(|| config.parameter_dir.clone());
        kinds.push(Handler::filecoin(match config.compiled_matrices {
            CompiledMatrices::On => kind.with_compiled_matrices(dir()),
            CompiledMatrices::Auto => kind.with_compiled_matrices_in_background(dir()),
            CompiledMatrices::Off => kind,
        }));
    }
    Ok(Arc::new(Engine::start_with_buffers(engine_config, backends, kinds, buffers).context("starting the engine")?))
}

/// SIGHUP (a closed terminal, an operator's reload habit) is logged and ignored: its
/// default would end the daemon at once, losing the running jobs. The configuration is
/// read at start only.
fn ignore_hangups() {
    #[cfg(unix)]
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(mut hup) => {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    tracing::warn!("SIGHUP received and ignored: the configuration is read at start only (restart the daemon to apply a change; SIGTERM stops it gracefully)");
                }
            });
        }
        Err(e) => tracing::warn!(error = %e, "cannot listen for SIGHUP: one would end the daemon"),
    }
}

/// SIGTERM and SIGINT (Ctrl-C), each listened for once for the daemon's whole life.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let listen = |kind| match signal(kind) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for a stop signal");
                    None
                }
            };
            Signals { term: listen(SignalKind::terminate()), int: listen(SignalKind::interrupt()) }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next signal, whichever comes.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = recv(&mut self.term) => {},
                _ = recv(&mut self.int) => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
