//! The daemon's TOML configuration. It accepts the reference daemon's layout (so an
//! operator's existing file keeps working); keys that mean nothing to cuzk draw a
//! warning, not an error. `cuzk.example.toml` at the repository root documents every
//! key with its default. The file's form is `file`'s serde structs, one per section and
//! one field per key; they are laid onto [`DaemonConfig`] (each field says its key) there
//! and nowhere else.

use std::path::PathBuf;
use std::time::Duration;

use cuzk_engine::{AdmissionLimits, EngineConfig};

use crate::access::TlsFiles;
use crate::connections::ConnectionLimits;
use crate::unix_socket::SocketSettings;
use crate::ListenAddr;

mod file;
mod render;

/// The variable Curio, Lotus and filecoin-proofs read the parameter directory from
/// (their `fetch-params` commands download into it): srs.param_cache's default when set.
pub const PARAMETER_CACHE_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";

/// The state directory systemd makes for a unit with `StateDirectory=` (the first, when
/// it names several): daemon.state_dir's default when set.
pub const STATE_DIRECTORY_ENV: &str = "STATE_DIRECTORY";

/// [`STATE_DIRECTORY_ENV`] of this process, when set and not empty.
pub fn state_dir_from_env() -> Option<PathBuf> {
    let v = std::env::var_os(STATE_DIRECTORY_ENV)?;
    let first = v.to_string_lossy().split(':').next().unwrap_or_default().to_string();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

/// srs.param_cache when neither the file nor the environment names one (the reference
/// daemon's default).
pub const DEFAULT_PARAMETER_DIR: &str = "/data/zk/params";

/// Where srs.param_cache came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParameterDirOrigin {
    /// The configuration file's srs.param_cache.
    File,
    /// [`PARAMETER_CACHE_ENV`], the file naming none.
    Environment,
    /// [`DEFAULT_PARAMETER_DIR`].
    Default,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    /// daemon.listen: "host:port" or "unix:///path".
    pub listen: ListenAddr,
    /// daemon.status_listen: HTTP status endpoint (host:port); None = off.
    pub status_listen: Option<std::net::SocketAddr>,
    /// srs.param_cache: the Filecoin parameter directory.
    pub parameter_dir: PathBuf,
    /// Where `parameter_dir` came from.
    pub parameter_dir_origin: ParameterDirOrigin,
    /// srs.preload: Filecoin circuit ids ("porep-32g", …) whose files are checked and
    /// loaded at start (in the background: the socket opens at once).
    pub preload: Vec<String>,
    /// memory.total_budget: None = auto (MemTotal − safety margin).
    pub memory_budget: Option<u64>,
    /// memory.safety_margin.
    pub safety_margin: u64,
    /// memory.eviction_min_idle.
    pub eviction_min_idle: Duration,
    /// gpus.devices: ordinals to use; empty = all.
    pub gpu_devices: Vec<u32>,
    /// gpus.gpu_workers_per_device: prover workers per backend (one backend per GPU).
    pub workers_per_backend: usize,
    /// gpus.device_memory_limit: device bytes each GPU backend may hold (cuzk's own
    /// key). Empty: all the card has free; one value: every GPU; else one per GPU, in
    /// the order gpus.devices lists them (or of their ordinals).
    pub device_memory_limit: Vec<u64>,
    /// gpus.gpu_threads / synthesis.threads: CPU threads for synthesis and CPU
    /// proving; 0 = all.
    pub cpu_threads: usize,
    /// pipeline.synthesis_concurrency (capped by pipeline.max_parallel_synthesis):
    /// synthesis workers, partitions synthesized at once.
    pub synthesis_workers: usize,
    /// pipeline.synthesis_lookahead: synthesized partitions waiting for a prover.
    pub synthesis_lookahead: usize,
    /// synthesis.compiled_matrices (cuzk's own key, "auto" by default): prove with
    /// each circuit's compiled constraint matrices, so partitions are synthesized
    /// witness-only and the backend computes a, b, c (a GPU on its device, from the
    /// compact witness).
    pub compiled_matrices: CompiledMatrices,
    /// synthesis.matrices_dir: where compiled matrices of Filecoin circuits are kept
    /// (made there by `cuzk compile`, or on first use); None = the parameter directory.
    pub matrices_dir: Option<PathBuf>,
    /// synthetic.max_log_size: largest synthetic circuit accepted (cuzk's own key).
    pub synthetic_max_log_size: u32,
    /// synthetic.allow_premade: accept `"premade": true` synthetic jobs (benchmarks).
    pub synthetic_allow_premade: bool,
    /// daemon.timing_only (cuzk's own key, off by default): prove shape-true inputs
    /// and timing parameters for timing runs. Vanilla proofs are then not checked and
    /// no proof is verified or returned; never for real work.
    pub timing_only: bool,
    /// logging.level.
    pub log_level: String,
    /// daemon.socket_mode, daemon.socket_group: how a unix socket file is made.
    pub socket: SocketSettings,
    /// [admission]: caps on unfinished work, and the kinds allowed CRITICAL.
    pub admission: AdmissionLimits,
    /// daemon.max_connections, daemon.handshake_timeout, daemon.idle_timeout.
    pub connections: ConnectionLimits,
    /// daemon.auth_token_file: the bearer token every client must send; None = none.
    pub auth_token_file: Option<PathBuf>,
    /// daemon.allow_insecure: start a listener reachable from other machines without a
    /// token (logged as a warning).
    pub allow_insecure: bool,
    /// daemon.tls_cert_file, daemon.tls_key_file, daemon.tls_client_ca_file: TLS on
    /// daemon.listen; None = plain.
    pub tls: Option<TlsFiles>,
    /// daemon.state_dir: where completed proofs are kept across restarts; None = in
    /// memory only.
    pub state_dir: Option<PathBuf>,
    /// daemon.job_retention: how long a finished job stays answerable (AwaitProof, a
    /// resubmitted request id), in memory and in the state directory.
    pub job_retention: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            listen: ListenAddr::Unix("/run/curio/cuzk.sock".into()),
            status_listen: None,
            parameter_dir: DEFAULT_PARAMETER_DIR.into(),
            parameter_dir_origin: ParameterDirOrigin::Default,
            preload: Vec::new(),
            memory_budget: None,
            safety_margin: 5 << 30,
            eviction_min_idle: Duration::from_secs(300),
            gpu_devices: Vec::new(),
            workers_per_backend: 2,
            device_memory_limit: Vec::new(),
            cpu_threads: 0,
            synthesis_workers: 1,
            synthesis_lookahead: 1,
            compiled_matrices: CompiledMatrices::Auto,
            matrices_dir: None,
            synthetic_max_log_size: 20,
            synthetic_allow_premade: false,
            timing_only: false,
            log_level: "info".into(),
            socket: SocketSettings::default(),
            admission: AdmissionLimits::default(),
            connections: ConnectionLimits::default(),
            auth_token_file: None,
            allow_insecure: false,
            tls: None,
            state_dir: None,
            job_retention: Duration::from_secs(3600),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("the configuration is not valid TOML: {0}")]
    Syntax(String),
    #[error("{key}: {message}")]
    Value { key: String, message: String },
}

/// "256GiB", "5 GiB", "512MiB", "10GB", "4096" (bytes).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = (s[..split].trim(), s[split..].trim());
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    let v: f64 = num.parse().ok()?;
    (v >= 0.0 && v.is_finite()).then_some((v * mult as f64) as u64)
}

/// The smallest memory.total_budget: below it not even a 2 KiB proof's buffers fit,
/// and every job would wait for memory forever.
pub const MIN_MEMORY_BUDGET: u64 = 256 << 20;

/// The most gpus.gpu_workers_per_device: each worker holds a staging slot of device
/// memory; two keep a GPU busy (measured: 98-100 % busy with two on an H100).
pub const MAX_WORKERS_PER_DEVICE: usize = 16;

/// The levels a log filter names.
pub const LOG_LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

/// `filter` when every directive of it names a level ([`LOG_LEVELS`], any case): a bare
/// level or `target=level`, comma-separated; else why not. `logging.level` and the start
/// both go through here, so a typo is refused before the daemon runs instead of turning
/// its log off.
pub fn check_log_level(filter: &str) -> Result<&str, String> {
    let is_level = |s: &str| LOG_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(s.trim()));
    let hint = || format!("use one of {}, or directives like \"info,cuzk_engine=debug\"", LOG_LEVELS.join(", "));
    if filter.trim().is_empty() {
        return Err(format!("is empty: {}", hint()));
    }
    for d in filter.split(',') {
        let ok = match d.split_once('=') {
            Some((target, level)) => !target.trim().is_empty() && is_level(level),
            None => is_level(d),
        };
        if !ok {
            return Err(format!("{:?} is not a log level ({d:?} is none): {}", filter, hint()));
        }
    }
    Ok(filter)
}

/// "5m", "30s", "1h", "500ms", "2d".
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let n: u64 = s[..split].parse().ok()?;
    Some(match &s[split..] {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        "d" => Duration::from_secs(n * 86400),
        _ => return None,
    })
}

/// synthesis.compiled_matrices: when Filecoin circuits are proven with compiled matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompiledMatrices {
    /// `false`: never (full synthesis).
    Off,
    /// `"auto"`: for the circuits whose matrices file is in the matrices directory
    /// (`cuzk compile` makes it ahead); full synthesis for the others, said in the log.
    /// Nothing is compiled while a request waits. The synthetic kind: full synthesis.
    Auto,
    /// `true`: always, every kind; a missing, stale or corrupt file is compiled on first
    /// use (minutes for a 32 GiB circuit, while that circuit's first request waits).
    On,
}

impl CompiledMatrices {
    fn to_toml(self) -> &'static str {
        match self {
            CompiledMatrices::Off => "false",
            CompiledMatrices::Auto => "\"auto\"",
            CompiledMatrices::On => "true",
        }
    }
}

/// [`PARAMETER_CACHE_ENV`] of this process, when set and not empty.
pub fn parameter_dir_from_env() -> Option<PathBuf> {
    std::env::var_os(PARAMETER_CACHE_ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

impl DaemonConfig {
    /// The checks of keys taken together (the file's, and again after `--listen`):
    /// the status port is not the gRPC port.
    pub fn check_together(&self) -> Result<(), ConfigError> {
        if let (ListenAddr::Tcp(grpc), Some(status)) = (&self.listen, self.status_listen) {
            let same_host = grpc.ip() == status.ip() || grpc.ip().is_unspecified() || status.ip().is_unspecified();
            if grpc.port() == status.port() && grpc.port() != 0 && same_host {
                return Err(ConfigError::Value {
                    key: "daemon.status_listen".into(),
                    message: format!("{status} takes daemon.listen's port ({grpc}); give the status endpoint a port of its own"),
                });
            }
        }
        Ok(())
    }

    /// Relative paths the file named, made relative to `dir` (the file's folder): a
    /// service's working directory (systemd's is /) is not the operator's shell's.
    /// Paths the file did not set (the defaults, the environment's) are left alone.
    pub fn anchor_paths(&mut self, dir: &std::path::Path) {
        let anchor = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        if self.parameter_dir_origin == ParameterDirOrigin::File {
            anchor(&mut self.parameter_dir);
        }
        if let ListenAddr::Unix(p) = &mut self.listen {
            anchor(p);
        }
        let DaemonConfig { matrices_dir, state_dir, auth_token_file, tls, .. } = self;
        for p in [matrices_dir, state_dir, auth_token_file].into_iter().flatten() {
            anchor(p);
        }
        if let Some(t) = tls {
            anchor(&mut t.cert);
            anchor(&mut t.key);
            t.client_ca.iter_mut().for_each(anchor);
        }
    }

    /// The engine's settings, with the memory budget resolved (memory.total_budget, or
    /// "auto" worked out by the caller from the machine's limits).
    pub fn engine_config(&self, memory_budget_bytes: u64) -> EngineConfig {
        EngineConfig {
            synthesis_workers: self.synthesis_workers,
            synthesis_lookahead: self.synthesis_lookahead,
            workers_per_backend: self.workers_per_backend,
            memory_budget_bytes,
            eviction_min_idle: self.eviction_min_idle,
            admission: self.admission.clone(),
            state_dir: self.state_dir.clone(),
            job_retention: self.job_retention,
        }
    }

    /// The defaults, srs.param_cache taken from `env_parameter_dir` (the value of
    /// [`PARAMETER_CACHE_ENV`]) when there is one.
    pub fn defaults_with(env_parameter_dir: Option<PathBuf>) -> DaemonConfig {
        match env_parameter_dir {
            Some(dir) => DaemonConfig { parameter_dir: dir, parameter_dir_origin: ParameterDirOrigin::Environment, ..DaemonConfig::default() },
            None => DaemonConfig::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_engine::ProofKind;
    use cuzk_filecoin::CircuitKind;

    #[test]
    fn defaults_without_a_file() {
        let (c, w) = DaemonConfig::from_toml("").unwrap();
        assert_eq!(c, DaemonConfig::default());
        assert!(w.is_empty());
    }

    #[test]
    fn the_reference_layout_parses_with_warnings_for_what_has_no_effect() {
        let text = r#"
[daemon]
listen = "127.0.0.1:9820"
status_listen = "127.0.0.1:9821"
[srs]
param_cache = "/var/tmp/params"
[memory]
total_budget = "256GiB"
safety_margin = "10GiB"
eviction_min_idle = "10m"
[gpus]
devices = [0, 1]
gpu_threads = 32
gpu_workers_per_device = 3
device_memory_limit = "24GiB"
[scheduler]
max_batch_size = 1
max_batch_wait_ms = 10000
sort_by_type = true
[synthesis]
threads = 0
[pipeline]
enabled = true
synthesis_lookahead = 2
synthesis_concurrency = 4
max_parallel_synthesis = 3
[logging]
level = "debug"
[gpu]
old_key = 1
"#;
        let (c, w) = DaemonConfig::from_toml(text).unwrap();
        assert_eq!(c.listen, ListenAddr::Tcp("127.0.0.1:9820".parse().unwrap()));
        assert_eq!(c.status_listen, Some("127.0.0.1:9821".parse().unwrap()));
        assert_eq!(c.parameter_dir, PathBuf::from("/var/tmp/params"));
        assert_eq!(c.memory_budget, Some(256 << 30));
        assert_eq!(c.safety_margin, 10 << 30);
        assert_eq!(c.eviction_min_idle, Duration::from_secs(600));
        assert_eq!(c.gpu_devices, vec![0, 1]);
        assert_eq!(c.cpu_threads, 32);
        assert_eq!(c.workers_per_backend, 3);
        assert_eq!(c.device_memory_limit, vec![24 << 30]);
        assert_eq!(c.synthesis_lookahead, 2);
        assert_eq!(c.synthesis_workers, 3);
        assert_eq!(c.log_level, "debug");
        assert_eq!(w.iter().filter(|m| m.starts_with("scheduler.")).count(), 3);
        assert!(w.iter().any(|m| m.starts_with("gpu.old_key: unknown key")));
    }

    #[test]
    fn the_example_file_parses_to_the_defaults() {
        let text = include_str!("../../../cuzk.example.toml");
        let (c, w) = DaemonConfig::from_toml(text).unwrap();
        assert_eq!(c, DaemonConfig::default());
        // Only the three scheduler keys, which cuzk accepts without using.
        assert_eq!(w.len(), 3, "{w:?}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let e = DaemonConfig::from_toml("[memory]\ntotal_budget = \"lots\"").unwrap_err();
        assert!(matches!(&e, ConfigError::Value { key, .. } if key == "memory.total_budget"), "{e}");
        let e = DaemonConfig::from_toml("[daemon]\nlisten = \"nowhere\"").unwrap_err();
        assert!(matches!(&e, ConfigError::Value { key, .. } if key == "daemon.listen"), "{e}");
        let e = DaemonConfig::from_toml("[gpus]\ngpu_workers_per_device = \"two\"").unwrap_err();
        assert!(e.to_string().starts_with("gpus.gpu_workers_per_device: expected a non-negative integer"), "{e}");
        assert!(matches!(DaemonConfig::from_toml("[daemon"), Err(ConfigError::Syntax(_))));
        let e = DaemonConfig::from_toml("[synthesis]\ncompiled_matrices = \"yes\"").unwrap_err();
        assert!(e.to_string().starts_with("synthesis.compiled_matrices: expected true, false or \"auto\""), "{e}");
    }

    #[test]
    fn compiled_matrices_are_used_where_present_unless_told_otherwise() {
        assert_eq!(DaemonConfig::default().compiled_matrices, CompiledMatrices::Auto);
        for (text, want) in [("true", CompiledMatrices::On), ("false", CompiledMatrices::Off), ("\"auto\"", CompiledMatrices::Auto)] {
            let (c, _) = DaemonConfig::from_toml(&format!("[synthesis]\ncompiled_matrices = {text}")).unwrap();
            assert_eq!(c.compiled_matrices, want, "{text}");
        }
    }

    #[test]
    fn the_parameter_directory_defaults_to_the_environment_and_the_file_wins() {
        let env = Some(PathBuf::from("/var/tmp/filecoin-proof-parameters"));
        let (c, _) = DaemonConfig::from_toml_over("[daemon]\nlisten = \"127.0.0.1:1\"", DaemonConfig::defaults_with(env.clone())).unwrap();
        assert_eq!(c.parameter_dir, PathBuf::from("/var/tmp/filecoin-proof-parameters"));
        assert_eq!(c.parameter_dir_origin, ParameterDirOrigin::Environment);
        let (c, _) = DaemonConfig::from_toml_over("[srs]\nparam_cache = \"/p\"", DaemonConfig::defaults_with(env)).unwrap();
        assert_eq!((c.parameter_dir, c.parameter_dir_origin), (PathBuf::from("/p"), ParameterDirOrigin::File));
        let c = DaemonConfig::defaults_with(None);
        assert_eq!((c.parameter_dir, c.parameter_dir_origin), (PathBuf::from(DEFAULT_PARAMETER_DIR), ParameterDirOrigin::Default));
        assert!(DaemonConfig::from_toml("[srs]\nparam_cache = \"\"").is_err());
    }

    #[test]
    fn preload_takes_filecoin_circuit_ids_only() {
        let (c, w) = DaemonConfig::from_toml("[srs]\npreload = [\"porep-32g\", \"wpost-32g\"]").unwrap();
        assert_eq!(c.preload, ["porep-32g", "wpost-32g"]);
        assert!(w.is_empty(), "{w:?}");
        let e = DaemonConfig::from_toml("[srs]\npreload = [\"porep-31g\"]").unwrap_err();
        assert!(matches!(&e, ConfigError::Value { key, message } if key == "srs.preload" && message.contains("porep-31g")), "{e}");
        assert!(DaemonConfig::from_toml("[srs]\npreload = \"porep-32g\"").is_err());
    }

    #[test]
    fn the_effective_settings_read_back_to_the_same_configuration() {
        let text = r#"
[daemon]
listen = "unix:///run/x/cuzk.sock"
status_listen = "127.0.0.1:9821"
[srs]
param_cache = "/var/tmp/p \"q\""
preload = ["snap-32g"]
[memory]
total_budget = "1536MiB"
safety_margin = "12345"
eviction_min_idle = "90s"
[gpus]
devices = [1, 3]
gpu_threads = 7
gpu_workers_per_device = 3
[pipeline]
synthesis_lookahead = 4
synthesis_concurrency = 2
[logging]
level = "debug"
[synthetic]
max_log_size = 12
allow_premade = true
[admission]
max_queued_jobs = 9
max_queued_jobs_per_kind = 8
max_queued_partitions = 70
max_queued_partitions_per_kind = 60
max_queued_request_bytes = "3GiB"
critical_kinds = ["winning_post", "window_post_partition"]
"#;
        let text = text.replace(
            "[daemon]\n",
            "[daemon]\nsocket_mode = \"0600\"\nsocket_group = \"curio\"\nmax_connections = 17\nhandshake_timeout = \"3s\"\nidle_timeout = \"2m\"\nmax_request_bytes_in_flight = \"768MiB\"\nrequest_body_timeout = \"5m\"\nrequest_body_min_rate = \"32KiB\"\nauth_token_file = \"/etc/cuzk/token\"\nallow_insecure = true\n\
             tls_cert_file = \"/etc/cuzk/cert.pem\"\ntls_key_file = \"/etc/cuzk/key.pem\"\ntls_client_ca_file = \"/etc/cuzk/ca.pem\"\n",
        );
        let (c, _) = DaemonConfig::from_toml(&text).unwrap();
        assert_eq!(c.socket, SocketSettings { mode: 0o600, group: Some("curio".into()) });
        assert_eq!(c.admission.critical_kinds, [ProofKind::Filecoin(CircuitKind::WinningPost), ProofKind::Filecoin(CircuitKind::WindowPost)]);
        assert_eq!(c.admission.max_queued_request_bytes, 3 << 30);
        let limits = ConnectionLimits {
            max_connections: 17,
            handshake_timeout: Duration::from_secs(3),
            idle_timeout: Duration::from_secs(120),
            max_request_bytes_in_flight: 768 << 20,
            body_timeout: Duration::from_secs(300),
            body_min_rate: 32 << 10,
        };
        assert_eq!(c.connections, limits);
        assert_eq!((c.auth_token_file.as_deref(), c.allow_insecure), (Some(std::path::Path::new("/etc/cuzk/token")), true));
        let tls = TlsFiles { cert: "/etc/cuzk/cert.pem".into(), key: "/etc/cuzk/key.pem".into(), client_ca: Some("/etc/cuzk/ca.pem".into()) };
        assert_eq!(c.tls, Some(tls));
        let shown = c.to_toml();
        let (back, w) = DaemonConfig::from_toml(&shown).unwrap();
        assert_eq!(back, c, "{shown}");
        assert!(w.is_empty(), "{w:?}");
        assert!(shown.contains("total_budget = \"1536MiB\"") && shown.contains("eviction_min_idle = \"90s\""), "{shown}");
        let (d, _) = DaemonConfig::from_toml(&DaemonConfig::defaults_with(Some("/e".into())).to_toml()).unwrap();
        assert_eq!(d.parameter_dir, PathBuf::from("/e"));
        assert!(DaemonConfig::default().to_toml().contains(&format!("# the default ({PARAMETER_CACHE_ENV} is not set)")));
    }

    #[test]
    fn socket_modes_and_proof_kinds_are_checked() {
        let (c, _) = DaemonConfig::from_toml("[daemon]\nsocket_mode = 0o640").unwrap();
        assert_eq!(c.socket.mode, 0o640);
        for bad_mode in ["\"0999\"", "\"rw-rw----\"", "\"01777\"", "true"] {
            let e = DaemonConfig::from_toml(&format!("[daemon]\nsocket_mode = {bad_mode}")).unwrap_err();
            assert!(matches!(&e, ConfigError::Value { key, .. } if key == "daemon.socket_mode"), "{bad_mode}: {e}");
        }
        for (key, value) in
            [("max_connections", "0"), ("handshake_timeout", "\"0s\""), ("idle_timeout", "\"soon\""), ("max_request_bytes_in_flight", "\"100MiB\"")]
        {
            let e = DaemonConfig::from_toml(&format!("[daemon]\n{key} = {value}")).unwrap_err();
            assert!(e.to_string().starts_with(&format!("daemon.{key}:")), "{e}");
        }
        for (text, key) in [
            ("tls_cert_file = \"c.pem\"", "daemon.tls_key_file"),
            ("tls_key_file = \"k.pem\"", "daemon.tls_cert_file"),
            ("tls_client_ca_file = \"ca.pem\"", "daemon.tls_client_ca_file"),
        ] {
            let e = DaemonConfig::from_toml(&format!("[daemon]\n{text}")).unwrap_err();
            assert!(matches!(&e, ConfigError::Value { key: k, .. } if k == key), "{text}: {e}");
        }
        let e = DaemonConfig::from_toml("[admission]\ncritical_kinds = [\"winning\"]").unwrap_err();
        assert!(e.to_string().contains("winning_post"), "{e}");
        let (c, _) = DaemonConfig::from_toml("[admission]\ncritical_kinds = []").unwrap();
        assert!(c.admission.critical_kinds.is_empty());
    }

    #[test]
    fn unknown_keys_are_warned_of_wherever_they_are() {
        let text =
            "stray = 1\n[daemon]\nlisten = \"127.0.0.1:1\"\nlisen = \"x\"\n[daemon.extra]\na = 1\n[gpu]\nold_key = 1\nother = \"x\"\n[memory]\n";
        let (c, w) = DaemonConfig::from_toml(text).unwrap();
        assert_eq!(c.listen, ListenAddr::Tcp("127.0.0.1:1".parse().unwrap()));
        // In the order of their keys, as --check-config prints them.
        let want = [
            "daemon.extra: unknown key; ignored",
            "daemon.lisen: unknown key; ignored",
            "gpu.old_key: unknown key; ignored",
            "gpu.other: unknown key; ignored",
            "top-level key \"stray\" is not a section; ignored",
        ];
        assert_eq!(w, want);
        // A known key's bad value is an error naming it, also next to unknown keys.
        let e = DaemonConfig::from_toml("[gpu]\nx = 1\n[synthetic]\nmax_log_size = 40").unwrap_err();
        assert_eq!(e, ConfigError::Value { key: "synthetic.max_log_size".into(), message: "must be within 1..=27".into() });
        // Errors come in the order of the keys, each value's before the checks across keys.
        let e = DaemonConfig::from_toml("[daemon]\ntls_cert_file = \"c.pem\"\n[srs]\nparam_cache = \"\"").unwrap_err();
        assert!(matches!(&e, ConfigError::Value { key, .. } if key == "srs.param_cache"), "{e}");
        let e = DaemonConfig::from_toml("[admission]\nmax_queued_request_bytes = \"lots\"").unwrap_err();
        assert_eq!(e.to_string(), "admission.max_queued_request_bytes: \"lots\" is not a size like \"2GiB\"");
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("5GiB"), Some(5 << 30));
        assert_eq!(parse_size("1.5 GiB"), Some(3 << 29));
        assert_eq!(parse_size("10GB"), Some(10_000_000_000));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("5 parsecs"), None);
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("5"), None);
    }

    /// What a start would fail on, or a typo that would silence the daemon, is refused
    /// while reading the file (`--check-config` and the start read it alike).
    #[test]
    fn settings_that_would_silence_or_stall_the_daemon_are_refused() {
        let refused = |text: &str, key: &str, says: &str| {
            let e = DaemonConfig::from_toml(text).expect_err(text);
            assert!(matches!(&e, ConfigError::Value { key: k, .. } if k == key), "{text}: {e}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        };
        // A level typo would be read as a target's name, and nothing else logged.
        for level in ["verbose", "", "information", "debg", "info,cuzk=loud", "=debug"] {
            refused(&format!("[logging]\nlevel = {level:?}"), "logging.level", "use one of error, warn, info");
        }
        for level in ["INFO", "warn", "info,cuzk_engine=debug", "off", "h2=warn,debug"] {
            let (c, _) = DaemonConfig::from_toml(&format!("[logging]\nlevel = {level:?}")).unwrap();
            assert_eq!(c.log_level, level);
        }
        refused(
            "[daemon]\nsocket_mode = 660",
            "daemon.socket_mode",
            "660 is a decimal number (0o1224), not the mode 0660: write it as \"0660\" or 0o660",
        );
        refused("[memory]\ntotal_budget = \"0\"", "memory.total_budget", "below 256 MiB");
        refused("[memory]\ntotal_budget = \"1\"", "memory.total_budget", "no job would ever be admitted");
        refused("[admission]\nmax_queued_jobs = 0", "admission.max_queued_jobs", "at least 1");
        refused("[admission]\nmax_queued_partitions_per_kind = 0", "admission.max_queued_partitions_per_kind", "at least 1");
        refused("[admission]\nmax_queued_request_bytes = \"0\"", "admission.max_queued_request_bytes", "at least one largest request");
        refused("[gpus]\ngpu_workers_per_device = 100000", "gpus.gpu_workers_per_device", "within 1..=16");
        refused("[gpus]\ngpu_workers_per_device = 0", "gpus.gpu_workers_per_device", "within 1..=16");
        let long = format!("/run/{}/cuzk.sock", "d".repeat(100));
        refused(&format!("[daemon]\nlisten = \"unix://{long}\""), "daemon.listen", "holds at most 107");
        refused("[daemon]\nlisten = \"127.0.0.1:9820\"\nstatus_listen = \"127.0.0.1:9820\"", "daemon.status_listen", "a port of its own");
        refused("[daemon]\nlisten = \"0.0.0.0:9820\"\nstatus_listen = \"127.0.0.1:9820\"", "daemon.status_listen", "daemon.listen's port");
        // Other ports, and port 0 (each its own free port), are fine.
        DaemonConfig::from_toml("[daemon]\nlisten = \"127.0.0.1:9820\"\nstatus_listen = \"127.0.0.1:9821\"").unwrap();
        DaemonConfig::from_toml("[daemon]\nlisten = \"127.0.0.1:0\"\nstatus_listen = \"127.0.0.1:0\"").unwrap();
    }

    #[test]
    fn relative_paths_are_the_files_folders() {
        let text = "[daemon]\nlisten = \"unix://run/cuzk.sock\"\nstate_dir = \"state\"\n[srs]\nparam_cache = \"params\"\n[synthesis]\nmatrices_dir = \"/abs/m\"";
        let (mut c, _) = DaemonConfig::from_toml(text).unwrap();
        c.anchor_paths(std::path::Path::new("/etc/cuzk"));
        assert_eq!(c.listen, ListenAddr::Unix("/etc/cuzk/run/cuzk.sock".into()));
        assert_eq!(c.state_dir, Some("/etc/cuzk/state".into()));
        assert_eq!(c.parameter_dir, PathBuf::from("/etc/cuzk/params"));
        assert_eq!(c.matrices_dir, Some("/abs/m".into()));
        // The environment's directory is not the file's to anchor.
        let mut c = DaemonConfig::defaults_with(Some("rel".into()));
        c.anchor_paths(std::path::Path::new("/etc/cuzk"));
        assert_eq!(c.parameter_dir, PathBuf::from("rel"));
    }
}
