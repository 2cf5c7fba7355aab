//! The configuration file's form and [`DaemonConfig::from_toml`]: one serde struct per
//! section and one field per key, named as in the file; each value's type checks it and says what is wrong, and
//! [`ConfigFile::read`] puts the key in front (serde_path_to_error) and warns of every key
//! no struct takes (serde_ignored). [`ConfigFile::over`] then lays the keys present over
//! a base configuration; it destructures every section, so a key added here and not
//! applied does not compile.

use std::path::PathBuf;
use std::time::Duration;

use cuzk_engine::ProofKind;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;

use super::{parse_duration, parse_size, CompiledMatrices, ConfigError, DaemonConfig, ParameterDirOrigin};
use crate::access::TlsFiles;
use crate::ListenAddr;

fn bad(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Value { key: key.to_string(), message: message.into() }
}

/// A key's value type: read as any TOML value, then `$check`ed; a refusal's message is
/// the error's, after the key.
macro_rules! value_type {
    ($(#[$doc:meta])* $name:ident($t:ty) = $check:expr) => {
        $(#[$doc])*
        struct $name($t);
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = toml::Value::deserialize(d)?;
                let check: fn(&toml::Value) -> Result<$t, String> = $check;
                check(&v).map($name).map_err(D::Error::custom)
            }
        }
    };
}

fn text(v: &toml::Value) -> Result<&str, String> {
    v.as_str().ok_or_else(|| format!("expected a string, found {}", v.type_str()))
}

fn count(v: &toml::Value) -> Result<usize, String> {
    match v.as_integer() {
        Some(i) if i >= 0 => Ok(i as usize),
        _ => Err(format!("expected a non-negative integer, found {v}")),
    }
}

fn size(v: &toml::Value, example: &str) -> Result<u64, String> {
    let s = text(v)?;
    parse_size(s).ok_or_else(|| format!("{s:?} is not a size like \"{example}\""))
}

/// A size that holds at least one largest request (crate::MAX_MESSAGE_BYTES): a cap
/// below it would refuse such a request forever.
fn message_room(v: &toml::Value, example: &str) -> Result<u64, String> {
    match size(v, example)? {
        n if n < crate::MAX_MESSAGE_BYTES as u64 => Err(format!("must hold at least one largest request ({} MiB)", crate::MAX_MESSAGE_BYTES >> 20)),
        n => Ok(n),
    }
}

value_type!(Text(String) = |v| text(v).map(str::to_string));
value_type!(Flag(bool) = |v| v.as_bool().ok_or_else(|| format!("expected true or false, found {v}")));
value_type!(Count(usize) = count);
value_type!(
    /// A count of at least one.
    AtLeastOne(usize) = |v| match count(v)? {
        0 => Err("must be at least 1".into()),
        n => Ok(n),
    }
);
value_type!(
    /// A path; "" for none.
    PathOrNone(Option<PathBuf>) = |v| text(v).map(|s| (!s.is_empty()).then(|| PathBuf::from(s)))
);
value_type!(Size(u64) = |v| size(v, "5GiB"));
value_type!(
    /// Bytes of queued requests: at least one largest request, else such a request
    /// would be told to retry forever.
    QueueBytes(u64) = |v| message_room(v, "2GiB")
);
value_type!(
    /// Prover workers per GPU: 1..=[`super::MAX_WORKERS_PER_DEVICE`].
    Workers(usize) = |v| match count(v)? {
        n @ 1..=super::MAX_WORKERS_PER_DEVICE => Ok(n),
        _ => Err(format!("must be within 1..={}", super::MAX_WORKERS_PER_DEVICE)),
    }
);
value_type!(
    /// A directory that must be named ("": an error, the key is left out for the
    /// default).
    ParamDir(PathBuf) = |v| match text(v)? {
        "" => Err("is empty; leave the key out for the default".into()),
        s => Ok(PathBuf::from(s)),
    }
);
value_type!(
    /// "auto" (None) or a size of at least [`super::MIN_MEMORY_BUDGET`].
    Budget(Option<u64>) = |v| match text(v)? {
        s if s.eq_ignore_ascii_case("auto") => Ok(None),
        s => match parse_size(s) {
            Some(n) if n >= super::MIN_MEMORY_BUDGET => Ok(Some(n)),
            Some(_) => Err(format!("{s:?} is below {} MiB: no job would ever be admitted", super::MIN_MEMORY_BUDGET >> 20)),
            None => Err(format!("{s:?} is not \"auto\" or a size like \"256GiB\"")),
        },
    }
);
value_type!(
    /// A duration, zero allowed ("5m").
    Span(Duration) = |v| {
        let s = text(v)?;
        parse_duration(s).ok_or_else(|| format!("{s:?} is not a duration like \"5m\""))
    }
);
value_type!(
    /// A duration above zero ("10s").
    PositiveSpan(Duration) = |v| {
        let s = text(v)?;
        match parse_duration(s) {
            Some(d) if !d.is_zero() => Ok(d),
            _ => Err(format!("{s:?} is not a duration above zero like \"10s\"")),
        }
    }
);
value_type!(Listen(ListenAddr) = |v| text(v)?.parse());
value_type!(
    /// host:port; "" for none.
    StatusListen(Option<std::net::SocketAddr>) = |v| match text(v)? {
        "" => Ok(None),
        s => s.parse().map(Some).map_err(|e| format!("{s:?} is not host:port ({e})")),
    }
);
value_type!(
    /// A file mode: a string of octal digits ("0660") or a TOML integer (0o660).
    SocketMode(u32) = |v| {
        let mode = match v {
            toml::Value::String(s) => {
                u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|_| format!("{s:?} is not an octal mode like \"0660\""))?
            }
            // 660 in TOML is six hundred and sixty (0o1224), not the mode 0660 meant.
            toml::Value::Integer(i) if *i > 0o777 && i.to_string().bytes().all(|b| (b'0'..=b'7').contains(&b)) => {
                return Err(format!("{i} is a decimal number (0o{i:o}), not the mode 0{i}: write it as \"0{i}\" or 0o{i}"))
            }
            toml::Value::Integer(i) => u32::try_from(*i).map_err(|_| format!("{i} is not a file mode"))?,
            other => return Err(format!("expected an octal mode like \"0660\", found {other}")),
        };
        match mode {
            m if m > 0o777 => Err(format!("{m:o} has bits beyond 0777")),
            m => Ok(m),
        }
    }
);
value_type!(
    /// A size that holds at least one largest gRPC message.
    RequestBytes(u64) = |v| message_room(v, "1GiB")
);
value_type!(
    /// A list of proof kind names ("winning_post", …).
    ProofKinds(Vec<ProofKind>) = |v| {
        let names = || ProofKind::all().map(ProofKind::name).collect::<Vec<_>>().join(", ");
        let list = v.as_array().ok_or_else(|| format!("expected a list of proof kinds ({})", names()))?;
        list.iter().map(|x| x.as_str().and_then(ProofKind::from_name).ok_or_else(|| format!("{x} is not a proof kind ({})", names()))).collect()
    }
);
value_type!(
    /// A list of Filecoin circuit ids ("porep-32g", …).
    CircuitIds(Vec<String>) = |v| {
        let list = v.as_array().ok_or("expected a list of circuit ids like [\"porep-32g\", \"wpost-32g\"]")?;
        list.iter()
            .map(|x| match x.as_str() {
                Some(id) if cuzk_filecoin::Circuit::from_id(id).is_some() => Ok(id.to_string()),
                _ => Err(format!("{x} is not a Filecoin circuit id (porep-, snap-, wpost-, winning- and 2k, 8m, 512m, 32g, 64g)")),
            })
            .collect()
    }
);
value_type!(
    /// A list of GPU ordinals.
    Ordinals(Vec<u32>) = |v| {
        let list = v.as_array().ok_or("expected a list of device ordinals")?;
        list.iter()
            .map(|x| match x.as_integer() {
                Some(i) if (0..=u32::MAX as i64).contains(&i) => Ok(i as u32),
                _ => Err(format!("{x} is not a device ordinal")),
            })
            .collect()
    }
);
value_type!(
    /// "all" (empty), one size for every GPU, or one per GPU; each at least 1 GiB.
    DeviceLimits(Vec<u64>) = |v| {
        let one = |x: &toml::Value| -> Result<u64, String> {
            let s = x.as_str().ok_or_else(|| format!("{x} is not a size like \"24GiB\""))?;
            match parse_size(s) {
                Some(n) if n >= 1 << 30 => Ok(n),
                Some(_) => Err(format!("{s:?} is below 1 GiB: no Filecoin circuit proves in that")),
                None => Err(format!("{s:?} is not \"all\" or a size like \"24GiB\"")),
            }
        };
        match v {
            toml::Value::String(s) if s.eq_ignore_ascii_case("all") => Ok(Vec::new()),
            toml::Value::Array(a) => a.iter().map(one).collect(),
            x => Ok(vec![one(x)?]),
        }
    }
);
value_type!(
    /// 1..=27.
    LogSize(u32) = |v| match count(v)? {
        n @ 1..=27 => Ok(n as u32),
        _ => Err("must be within 1..=27".into()),
    }
);
value_type!(
    /// A log filter: a level, or comma-separated `target=level` directives beside at
    /// most one bare level ("info,cuzk_engine=debug"). A bare word that is no level
    /// ("verbose", "debg") is refused: tracing would read it as a target's name and log
    /// nothing else at all.
    LogLevel(String) = |v| super::check_log_level(text(v)?).map(str::to_string)
);
value_type!(
    /// true, false or "auto".
    Compiled(CompiledMatrices) = |v| match v {
        toml::Value::Boolean(true) => Ok(CompiledMatrices::On),
        toml::Value::Boolean(false) => Ok(CompiledMatrices::Off),
        toml::Value::String(s) if s == "auto" => Ok(CompiledMatrices::Auto),
        _ => Err(format!("expected true, false or \"auto\", found {v}")),
    }
);

impl DaemonConfig {
    /// Parses a configuration over the plain defaults (the environment not consulted);
    /// returns it with warnings for keys it ignores.
    pub fn from_toml(text: &str) -> Result<(DaemonConfig, Vec<String>), ConfigError> {
        Self::from_toml_over(text, DaemonConfig::default())
    }

    /// Parses a configuration; keys it does not set keep their values in `base`
    /// ([`DaemonConfig::defaults_with`]).
    pub fn from_toml_over(text: &str, base: DaemonConfig) -> Result<(DaemonConfig, Vec<String>), ConfigError> {
        let mut root: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::Syntax(e.to_string()))?;
        let mut warnings = Warnings::default();
        root.retain(|key, body| {
            let section = body.is_table();
            if !section {
                warnings.key(key, "", format!("top-level key {key:?} is not a section; ignored"));
            }
            section
        });
        let c = ConfigFile::read(root, &mut warnings)?.over(base, &mut warnings)?;
        c.check_together()?;
        Ok((c, warnings.in_order()))
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Daemon {
    listen: Option<Listen>,
    status_listen: Option<StatusListen>,
    timing_only: Option<Flag>,
    socket_mode: Option<SocketMode>,
    socket_group: Option<Text>,
    auth_token_file: Option<PathOrNone>,
    allow_insecure: Option<Flag>,
    state_dir: Option<PathOrNone>,
    job_retention: Option<PositiveSpan>,
    tls_cert_file: Option<PathOrNone>,
    tls_key_file: Option<PathOrNone>,
    tls_client_ca_file: Option<PathOrNone>,
    max_connections: Option<AtLeastOne>,
    handshake_timeout: Option<PositiveSpan>,
    idle_timeout: Option<PositiveSpan>,
    max_request_bytes_in_flight: Option<RequestBytes>,
    request_body_timeout: Option<PositiveSpan>,
    request_body_min_rate: Option<Size>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Admission {
    max_queued_jobs: Option<AtLeastOne>,
    max_queued_jobs_per_kind: Option<AtLeastOne>,
    max_queued_partitions: Option<AtLeastOne>,
    max_queued_partitions_per_kind: Option<AtLeastOne>,
    max_queued_request_bytes: Option<QueueBytes>,
    critical_kinds: Option<ProofKinds>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Srs {
    param_cache: Option<ParamDir>,
    preload: Option<CircuitIds>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Memory {
    total_budget: Option<Budget>,
    safety_margin: Option<Size>,
    eviction_min_idle: Option<Span>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Gpus {
    devices: Option<Ordinals>,
    gpu_threads: Option<Count>,
    gpu_workers_per_device: Option<Workers>,
    device_memory_limit: Option<DeviceLimits>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Pipeline {
    enabled: Option<Flag>,
    synthesis_lookahead: Option<Count>,
    synthesis_concurrency: Option<Count>,
    max_parallel_synthesis: Option<Count>,
}

/// The reference daemon's batching keys: accepted, with a warning.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Scheduler {
    max_batch_size: Option<toml::Value>,
    max_batch_wait_ms: Option<toml::Value>,
    sort_by_type: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Logging {
    level: Option<LogLevel>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Synthetic {
    max_log_size: Option<LogSize>,
    allow_premade: Option<Flag>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Synthesis {
    threads: Option<Count>,
    compiled_matrices: Option<Compiled>,
    matrices_dir: Option<PathOrNone>,
}

/// The file: the reference daemon's sections and cuzk's own.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ConfigFile {
    daemon: Daemon,
    admission: Admission,
    srs: Srs,
    memory: Memory,
    gpus: Gpus,
    pipeline: Pipeline,
    scheduler: Scheduler,
    logging: Logging,
    synthetic: Synthetic,
    synthesis: Synthesis,
}

/// The warnings of a file: those about a key in the order the keys sort in (sections,
/// then keys within them: the order `--check-config` has always printed them in), then
/// the others.
#[derive(Default)]
struct Warnings {
    keyed: Vec<(String, String, String)>,
    last: Vec<String>,
}

impl Warnings {
    fn key(&mut self, section: &str, key: &str, message: String) {
        self.keyed.push((section.to_string(), key.to_string(), message));
    }

    fn in_order(mut self) -> Vec<String> {
        self.keyed.sort();
        self.keyed.into_iter().map(|(_, _, m)| m).chain(self.last).collect()
    }
}

/// `*target = value` where the key is present.
fn set<T>(target: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *target = v;
    }
}

impl ConfigFile {
    /// Reads the file's sections (`root`, its top-level keys all tables); a key no
    /// section takes adds "KEY: unknown key; ignored" to `warnings`.
    fn read(root: toml::Table, warnings: &mut Warnings) -> Result<ConfigFile, ConfigError> {
        let mut ignored = Vec::new();
        let value = toml::Value::Table(root.clone());
        let file = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut |path: serde_ignored::Path| {
            ignored.push(path.to_string())
        }))
        .map_err(|e| bad(&e.path().to_string(), e.inner().message()))?;
        for path in ignored {
            match root.get(&path).and_then(toml::Value::as_table) {
                // A section cuzk has no use for: each of its keys.
                Some(section) => {
                    for key in section.keys() {
                        warnings.key(&path, key, format!("{path}.{key}: unknown key; ignored"));
                    }
                }
                None => {
                    let (section, key) = path.split_once('.').unwrap_or((&path, ""));
                    warnings.key(section, key, format!("{path}: unknown key; ignored"));
                }
            }
        }
        Ok(file)
    }

    /// `base` with every key present in the file laid over it.
    fn over(self, base: DaemonConfig, warnings: &mut Warnings) -> Result<DaemonConfig, ConfigError> {
        let mut c = base;
        let ConfigFile { daemon, admission, srs, memory, gpus, pipeline, scheduler, logging, synthetic, synthesis } = self;

        let Daemon {
            listen,
            status_listen,
            timing_only,
            socket_mode,
            socket_group,
            auth_token_file,
            allow_insecure,
            state_dir,
            job_retention,
            tls_cert_file,
            tls_key_file,
            tls_client_ca_file,
            max_connections,
            handshake_timeout,
            idle_timeout,
            max_request_bytes_in_flight,
            request_body_timeout,
            request_body_min_rate,
        } = daemon;
        set(&mut c.listen, listen.map(|v| v.0));
        set(&mut c.status_listen, status_listen.map(|v| v.0));
        set(&mut c.timing_only, timing_only.map(|v| v.0));
        set(&mut c.socket.mode, socket_mode.map(|v| v.0));
        set(&mut c.socket.group, socket_group.map(|v| (!v.0.is_empty()).then_some(v.0)));
        set(&mut c.auth_token_file, auth_token_file.map(|v| v.0));
        set(&mut c.allow_insecure, allow_insecure.map(|v| v.0));
        set(&mut c.state_dir, state_dir.map(|v| v.0));
        set(&mut c.job_retention, job_retention.map(|v| v.0));
        set(&mut c.connections.max_connections, max_connections.map(|v| v.0));
        set(&mut c.connections.handshake_timeout, handshake_timeout.map(|v| v.0));
        set(&mut c.connections.idle_timeout, idle_timeout.map(|v| v.0));
        set(&mut c.connections.max_request_bytes_in_flight, max_request_bytes_in_flight.map(|v| v.0));
        set(&mut c.connections.body_timeout, request_body_timeout.map(|v| v.0));
        set(&mut c.connections.body_min_rate, request_body_min_rate.map(|v| v.0));
        // The three TLS files, each over the base's, are checked together.
        let base_tls = c.tls.take();
        let cert = tls_cert_file.map_or_else(|| base_tls.as_ref().map(|t| t.cert.clone()), |v| v.0);
        let key = tls_key_file.map_or_else(|| base_tls.as_ref().map(|t| t.key.clone()), |v| v.0);
        let client_ca = tls_client_ca_file.map_or_else(|| base_tls.as_ref().and_then(|t| t.client_ca.clone()), |v| v.0);
        c.tls = match (cert, key) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key, client_ca }),
            (None, None) if client_ca.is_none() => None,
            (None, None) => return Err(bad("daemon.tls_client_ca_file", "needs daemon.tls_cert_file and daemon.tls_key_file")),
            (Some(_), None) => return Err(bad("daemon.tls_key_file", "is missing: daemon.tls_cert_file needs it")),
            (None, Some(_)) => return Err(bad("daemon.tls_cert_file", "is missing: daemon.tls_key_file needs it")),
        };

        let Admission {
            max_queued_jobs,
            max_queued_jobs_per_kind,
            max_queued_partitions,
            max_queued_partitions_per_kind,
            max_queued_request_bytes,
            critical_kinds,
        } = admission;
        set(&mut c.admission.max_queued_jobs, max_queued_jobs.map(|v| v.0));
        set(&mut c.admission.max_queued_jobs_per_kind, max_queued_jobs_per_kind.map(|v| v.0));
        set(&mut c.admission.max_queued_partitions, max_queued_partitions.map(|v| v.0));
        set(&mut c.admission.max_queued_partitions_per_kind, max_queued_partitions_per_kind.map(|v| v.0));
        set(&mut c.admission.max_queued_request_bytes, max_queued_request_bytes.map(|v| v.0));
        set(&mut c.admission.critical_kinds, critical_kinds.map(|v| v.0));

        let Srs { param_cache, preload } = srs;
        if let Some(ParamDir(dir)) = param_cache {
            c.parameter_dir = dir;
            c.parameter_dir_origin = ParameterDirOrigin::File;
        }
        set(&mut c.preload, preload.map(|v| v.0));

        let Memory { total_budget, safety_margin, eviction_min_idle } = memory;
        set(&mut c.memory_budget, total_budget.map(|v| v.0));
        set(&mut c.safety_margin, safety_margin.map(|v| v.0));
        set(&mut c.eviction_min_idle, eviction_min_idle.map(|v| v.0));

        let Gpus { devices, gpu_threads, gpu_workers_per_device, device_memory_limit } = gpus;
        set(&mut c.gpu_devices, devices.map(|v| v.0));
        set(&mut c.workers_per_backend, gpu_workers_per_device.map(|v| v.0));
        set(&mut c.device_memory_limit, device_memory_limit.map(|v| v.0));
        // gpus.gpu_threads and synthesis.threads name one setting; 0 leaves it as it
        // was, and synthesis.threads wins where both are set.
        let Synthesis { threads, compiled_matrices, matrices_dir } = synthesis;
        for n in [gpu_threads, threads].into_iter().flatten() {
            if n.0 > 0 {
                c.cpu_threads = n.0;
            }
        }
        set(&mut c.compiled_matrices, compiled_matrices.map(|v| v.0));
        set(&mut c.matrices_dir, matrices_dir.map(|v| v.0));

        let Pipeline { enabled, synthesis_lookahead, synthesis_concurrency, max_parallel_synthesis } = pipeline;
        set(&mut c.synthesis_lookahead, synthesis_lookahead.map(|v| v.0.max(1)));
        set(&mut c.synthesis_workers, synthesis_concurrency.map(|v| v.0.max(1)));
        if let Some(Flag(false)) = enabled {
            // Without the pipeline the reference proves one partition at a time.
            warnings.last.push("pipeline.enabled = false: synthesis and proving still overlap in cuzk; lookahead set to 1".into());
            c.synthesis_lookahead = 1;
        }
        if let Some(cap) = max_parallel_synthesis {
            c.synthesis_workers = c.synthesis_workers.min(cap.0.max(1));
        }

        let Scheduler { max_batch_size, max_batch_wait_ms, sort_by_type } = scheduler;
        for (key, value) in [("max_batch_size", max_batch_size), ("max_batch_wait_ms", max_batch_wait_ms), ("sort_by_type", sort_by_type)] {
            if value.is_some() {
                let message =
                    format!("scheduler.{key}: accepted for compatibility; cuzk schedules single partitions by priority, so it has no effect");
                warnings.key("scheduler", key, message);
            }
        }

        let Logging { level } = logging;
        set(&mut c.log_level, level.map(|v| v.0));

        let Synthetic { max_log_size, allow_premade } = synthetic;
        set(&mut c.synthetic_max_log_size, max_log_size.map(|v| v.0));
        set(&mut c.synthetic_allow_premade, allow_premade.map(|v| v.0));
        Ok(c)
    }
}
