//! The effective configuration written back as a file (`cuzk daemon --check-config`).

use std::path::PathBuf;
use std::time::Duration;

use super::{DaemonConfig, ParameterDirOrigin, PARAMETER_CACHE_ENV};

/// A size as the configuration writes it: whole GiB or MiB where exact, else bytes.
fn size_text(bytes: u64) -> String {
    match bytes {
        0 => "0".into(),
        b if b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => b.to_string(),
    }
}

/// A duration as the configuration writes it: the largest whole unit.
fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        ms if ms % 86_400_000 == 0 && ms > 0 => format!("{}d", ms / 86_400_000),
        ms if ms % 3_600_000 == 0 && ms > 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 && ms > 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

/// A path as the configuration writes it ("" for none).
fn path_text(p: Option<&PathBuf>) -> String {
    p.map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

impl DaemonConfig {
    /// The effective settings as a configuration file in the reference layout, every
    /// key cuzk reads with the value in force (`cuzk daemon --check-config`). Read back
    /// with [`DaemonConfig::from_toml`] it gives this configuration again (with
    /// srs.param_cache then coming from the file).
    pub fn to_toml(&self) -> String {
        let origin = match self.parameter_dir_origin {
            ParameterDirOrigin::File => String::new(),
            ParameterDirOrigin::Environment => format!("  # from {PARAMETER_CACHE_ENV}"),
            ParameterDirOrigin::Default => format!("  # the default ({PARAMETER_CACHE_ENV} is not set)"),
        };
        let list = |items: Vec<String>| format!("[{}]", items.join(", "));
        let budget = self.memory_budget.map(size_text).unwrap_or_else(|| "auto".into());
        let status = self.status_listen.map(|a| a.to_string()).unwrap_or_default();
        format!(
            "[daemon]\nlisten = {}\nstatus_listen = {}\ntiming_only = {}\nsocket_mode = \"{:04o}\"\nsocket_group = {}\n\
             max_connections = {}\nhandshake_timeout = {}\nidle_timeout = {}\nmax_request_bytes_in_flight = {}\nrequest_body_timeout = {}\nrequest_body_min_rate = {}\nauth_token_file = {}\nallow_insecure = {}\n\
             tls_cert_file = {}\ntls_key_file = {}\ntls_client_ca_file = {}\nstate_dir = {}\njob_retention = {}\n\n\
             [srs]\nparam_cache = {}{origin}\npreload = {}\n\n\
             [memory]\ntotal_budget = {}\nsafety_margin = {}\neviction_min_idle = {}\n\n\
             [gpus]\ndevices = {}\ngpu_threads = {}\ngpu_workers_per_device = {}\ndevice_memory_limit = {}\n\n\
             [pipeline]\nsynthesis_lookahead = {}\nsynthesis_concurrency = {}\n\n\
             [synthesis]\ncompiled_matrices = {}\nmatrices_dir = {}\n\n\
             [logging]\nlevel = {}\n\n\
             [synthetic]\nmax_log_size = {}\nallow_premade = {}\n\n\
             [admission]\nmax_queued_jobs = {}\nmax_queued_jobs_per_kind = {}\nmax_queued_partitions = {}\nmax_queued_partitions_per_kind = {}\nmax_queued_request_bytes = {}\ncritical_kinds = {}\n",
            quoted(&self.listen.to_string()),
            quoted(&status),
            self.timing_only,
            self.socket.mode,
            quoted(self.socket.group.as_deref().unwrap_or_default()),
            self.connections.max_connections,
            quoted(&duration_text(self.connections.handshake_timeout)),
            quoted(&duration_text(self.connections.idle_timeout)),
            quoted(&size_text(self.connections.max_request_bytes_in_flight)),
            quoted(&duration_text(self.connections.body_timeout)),
            quoted(&size_text(self.connections.body_min_rate)),
            quoted(&self.auth_token_file.as_ref().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()),
            self.allow_insecure,
            quoted(&path_text(self.tls.as_ref().map(|t| &t.cert))),
            quoted(&path_text(self.tls.as_ref().map(|t| &t.key))),
            quoted(&path_text(self.tls.as_ref().and_then(|t| t.client_ca.as_ref()))),
            quoted(&path_text(self.state_dir.as_ref())),
            quoted(&duration_text(self.job_retention)),
            quoted(&self.parameter_dir.to_string_lossy()),
            list(self.preload.iter().map(|p| quoted(p)).collect()),
            quoted(&budget),
            quoted(&size_text(self.safety_margin)),
            quoted(&duration_text(self.eviction_min_idle)),
            list(self.gpu_devices.iter().map(|d| d.to_string()).collect()),
            self.cpu_threads,
            self.workers_per_backend,
            match &self.device_memory_limit[..] {
                [] => quoted("all"),
                [one] => quoted(&size_text(*one)),
                many => list(many.iter().map(|b| quoted(&size_text(*b))).collect()),
            },
            self.synthesis_lookahead,
            self.synthesis_workers,
            self.compiled_matrices.to_toml(),
            quoted(&path_text(self.matrices_dir.as_ref())),
            quoted(&self.log_level),
            self.synthetic_max_log_size,
            self.synthetic_allow_premade,
            self.admission.max_queued_jobs,
            self.admission.max_queued_jobs_per_kind,
            self.admission.max_queued_partitions,
            self.admission.max_queued_partitions_per_kind,
            quoted(&size_text(self.admission.max_queued_request_bytes)),
            list(self.admission.critical_kinds.iter().map(|k| quoted(k.name())).collect()),
        )
    }
}
