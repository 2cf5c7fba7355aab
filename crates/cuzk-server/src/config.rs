//! The daemon's TOML configuration. It accepts the reference daemon's layout (so an
//! operator's existing file keeps working); keys that mean nothing to cuzk draw a
//! warning, not an error. `cuzk.example.toml` at the repository root documents every
//! key with its default. The reference keys are mapped onto cuzk's names here, in
//! [`DaemonConfig::from_toml`] and nowhere else (each field says its key).

use std::time::Duration;

use cuzk_engine::{EngineConfig, MemoryBudget};

use crate::ListenAddr;

#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    /// daemon.listen: "host:port" or "unix:///path".
    pub listen: ListenAddr,
    /// daemon.status_listen: HTTP status endpoint (host:port); None = off.
    pub status_listen: Option<std::net::SocketAddr>,
    /// srs.param_cache: the Filecoin parameter directory (their parameter sets'
    /// files).
    pub parameter_dir: std::path::PathBuf,
    /// memory.total_budget: the engine's memory budget; None = auto (MemTotal −
    /// safety margin).
    pub memory_budget: Option<u64>,
    /// memory.safety_margin.
    pub safety_margin: u64,
    /// memory.eviction_min_idle.
    pub eviction_min_idle: Duration,
    /// gpus.devices: ordinals to use; empty = all.
    pub gpu_devices: Vec<u32>,
    /// gpus.gpu_workers_per_device: prover workers per backend (one backend per GPU).
    pub workers_per_backend: usize,
    /// gpus.gpu_threads / synthesis.threads: CPU threads for synthesis and CPU
    /// proving; 0 = all.
    pub cpu_threads: usize,
    /// pipeline.synthesis_concurrency (capped by pipeline.max_parallel_synthesis):
    /// synthesis workers, partitions synthesized at once.
    pub synthesis_workers: usize,
    /// pipeline.synthesis_lookahead: synthesized partitions waiting for a prover.
    pub synthesis_lookahead: usize,
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
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            listen: ListenAddr::Unix("/run/curio/cuzk.sock".into()),
            status_listen: None,
            parameter_dir: "/data/zk/params".into(),
            memory_budget: None,
            safety_margin: 5 << 30,
            eviction_min_idle: Duration::from_secs(300),
            gpu_devices: Vec::new(),
            workers_per_backend: 2,
            cpu_threads: 0,
            synthesis_workers: 1,
            synthesis_lookahead: 1,
            synthetic_max_log_size: 20,
            synthetic_allow_premade: false,
            timing_only: false,
            log_level: "info".into(),
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

fn bad(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Value { key: key.to_string(), message: message.into() }
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

fn as_str<'a>(key: &str, v: &'a toml::Value) -> Result<&'a str, ConfigError> {
    v.as_str().ok_or_else(|| bad(key, format!("expected a string, found {}", v.type_str())))
}

fn as_count(key: &str, v: &toml::Value) -> Result<usize, ConfigError> {
    match v.as_integer() {
        Some(i) if i >= 0 => Ok(i as usize),
        _ => Err(bad(key, format!("expected a non-negative integer, found {v}"))),
    }
}

fn as_bool(key: &str, v: &toml::Value) -> Result<bool, ConfigError> {
    v.as_bool().ok_or_else(|| bad(key, format!("expected true or false, found {v}")))
}

impl DaemonConfig {
    /// The engine's settings (the budget resolved where it is "auto").
    pub fn engine_config(&self) -> Result<EngineConfig, ConfigError> {
        let memory_budget_bytes = match self.memory_budget {
            Some(b) => b,
            None => MemoryBudget::auto_total(self.safety_margin)
                .ok_or_else(|| bad("memory.total_budget", "\"auto\" needs /proc/meminfo; set a size instead"))?,
        };
        Ok(EngineConfig {
            synthesis_workers: self.synthesis_workers,
            synthesis_lookahead: self.synthesis_lookahead,
            workers_per_backend: self.workers_per_backend,
            memory_budget_bytes,
            eviction_min_idle: self.eviction_min_idle,
            ..EngineConfig::default()
        })
    }

    /// Parses a configuration; returns it with warnings for keys it ignores.
    pub fn from_toml(text: &str) -> Result<(DaemonConfig, Vec<String>), ConfigError> {
        let root: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::Syntax(e.to_string()))?;
        let mut c = DaemonConfig::default();
        let mut warnings = Vec::new();
        let mut pipeline_enabled = true;
        let mut max_parallel_synthesis: Option<usize> = None;
        for (section, body) in &root {
            let Some(table) = body.as_table() else {
                warnings.push(format!("top-level key {section:?} is not a section; ignored"));
                continue;
            };
            for (key, v) in table {
                let full = format!("{section}.{key}");
                let k = full.as_str();
                match k {
                    "daemon.listen" => c.listen = as_str(k, v)?.parse().map_err(|e: String| bad(k, e))?,
                    "daemon.status_listen" => {
                        let s = as_str(k, v)?;
                        c.status_listen =
                            if s.is_empty() { None } else { Some(s.parse().map_err(|e| bad(k, format!("{s:?} is not host:port ({e})")))?) };
                    }
                    "daemon.timing_only" => c.timing_only = as_bool(k, v)?,
                    "srs.param_cache" => c.parameter_dir = as_str(k, v)?.into(),
                    "memory.total_budget" => {
                        let s = as_str(k, v)?;
                        c.memory_budget = if s.eq_ignore_ascii_case("auto") {
                            None
                        } else {
                            Some(parse_size(s).ok_or_else(|| bad(k, format!("{s:?} is not \"auto\" or a size like \"256GiB\"")))?)
                        };
                    }
                    "memory.safety_margin" => {
                        let s = as_str(k, v)?;
                        c.safety_margin = parse_size(s).ok_or_else(|| bad(k, format!("{s:?} is not a size like \"5GiB\"")))?;
                    }
                    "memory.eviction_min_idle" => {
                        let s = as_str(k, v)?;
                        c.eviction_min_idle = parse_duration(s).ok_or_else(|| bad(k, format!("{s:?} is not a duration like \"5m\"")))?;
                    }
                    "gpus.devices" => {
                        let arr = v.as_array().ok_or_else(|| bad(k, "expected a list of device ordinals"))?;
                        c.gpu_devices = arr
                            .iter()
                            .map(|x| match x.as_integer() {
                                Some(i) if (0..=u32::MAX as i64).contains(&i) => Ok(i as u32),
                                _ => Err(bad(k, format!("{x} is not a device ordinal"))),
                            })
                            .collect::<Result<_, _>>()?;
                    }
                    "gpus.gpu_threads" | "synthesis.threads" => {
                        let n = as_count(k, v)?;
                        if n > 0 {
                            c.cpu_threads = n;
                        }
                    }
                    "gpus.gpu_workers_per_device" => {
                        c.workers_per_backend = as_count(k, v)?;
                        if c.workers_per_backend == 0 {
                            return Err(bad(k, "must be at least 1"));
                        }
                    }
                    "pipeline.enabled" => pipeline_enabled = as_bool(k, v)?,
                    "pipeline.synthesis_lookahead" => c.synthesis_lookahead = as_count(k, v)?.max(1),
                    "pipeline.synthesis_concurrency" => c.synthesis_workers = as_count(k, v)?.max(1),
                    "pipeline.max_parallel_synthesis" => max_parallel_synthesis = Some(as_count(k, v)?.max(1)),
                    "scheduler.max_batch_size" | "scheduler.max_batch_wait_ms" | "scheduler.sort_by_type" => {
                        warnings.push(format!("{k}: accepted for compatibility; cuzk schedules single partitions by priority, so it has no effect"));
                    }
                    "logging.level" => c.log_level = as_str(k, v)?.to_string(),
                    "synthetic.max_log_size" => {
                        let n = as_count(k, v)?;
                        if !(1..=27).contains(&n) {
                            return Err(bad(k, "must be within 1..=27"));
                        }
                        c.synthetic_max_log_size = n as u32;
                    }
                    "synthetic.allow_premade" => c.synthetic_allow_premade = as_bool(k, v)?,
                    _ => warnings.push(format!("{k}: unknown key; ignored")),
                }
            }
        }
        if !pipeline_enabled {
            // Without the pipeline the reference proves one partition at a time.
            warnings.push("pipeline.enabled = false: synthesis and proving still overlap in cuzk; lookahead set to 1".into());
            c.synthesis_lookahead = 1;
        }
        if let Some(cap) = max_parallel_synthesis {
            c.synthesis_workers = c.synthesis_workers.min(cap);
        }
        Ok((c, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(c.parameter_dir, std::path::PathBuf::from("/var/tmp/params"));
        assert_eq!(c.memory_budget, Some(256 << 30));
        assert_eq!(c.safety_margin, 10 << 30);
        assert_eq!(c.eviction_min_idle, Duration::from_secs(600));
        assert_eq!(c.gpu_devices, vec![0, 1]);
        assert_eq!(c.cpu_threads, 32);
        assert_eq!(c.workers_per_backend, 3);
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
}
