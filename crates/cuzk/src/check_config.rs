//! `cuzk daemon --check-config`: validates a configuration without starting the
//! daemon, and prints what a start would use: the effective settings (every key, with
//! the value in force and where srs.param_cache came from), the memory budget, the
//! socket's directory, the GPUs and kernels, and the parameter files' header check.
//! Fails (non-zero exit) when the configuration is invalid (reported while reading it),
//! when a start would refuse it (the same access checks: token file, TLS files,
//! exposed listeners, socket mode) or when a circuit of srs.preload has a file a start
//! would refuse to load.

use std::path::Path;

use anyhow::{bail, Result};
use cuzk_filecoin::param_check::{self, Verdict};
use cuzk_server::config::DaemonConfig;
use cuzk_server::ListenAddr;

pub fn run(config: &DaemonConfig, warnings: &[String], path: Option<&Path>) -> Result<()> {
    let name = path.map(|p| p.display().to_string()).unwrap_or_else(|| "(no file: the defaults)".into());
    println!("# cuzk daemon --check-config: {name}");
    for w in warnings {
        println!("# warning: {w}");
    }
    println!("# effective settings:\n");
    print!("{}", config.to_toml());
    println!();
    let mut failures = Vec::new();

    match crate::memory::budget_bytes(config) {
        Ok(b) => {
            let limit = crate::memory::usable_memory().map(|l| format!(" (of {} bytes, {})", l.bytes, l.source)).unwrap_or_default();
            let how = if config.memory_budget.is_some() { "memory.total_budget" } else { "auto" };
            println!("# memory budget: {b} bytes = {:.1} GiB, {how}{limit}", b as f64 / (1u64 << 30) as f64);
        }
        Err(e) => failures.push(format!("{e:#}")),
    }
    // The descriptor limit, as the start would raise it.
    match crate::descriptors::connections_allowed(config, false) {
        Ok((_, Some(w))) => println!("# warning: {w}"),
        Ok((_, None)) => {}
        Err(e) => failures.push(format!("{e:#}")),
    }
    // The access checks a start makes, with the same messages.
    match crate::daemon::access(config) {
        Ok(a) => {
            for w in a.warnings {
                println!("# warning: {w}");
            }
            let guard = match (&config.auth_token_file, &config.tls) {
                (Some(p), _) => format!("a bearer token from {}", p.display()),
                (None, Some(t)) if t.client_ca.is_some() => "client certificates".into(),
                _ => "none (loopback or a unix socket only)".into(),
            };
            println!("# access: {guard}");
        }
        Err(e) => failures.push(format!("{e:#}")),
    }
    if config.timing_only {
        println!("# warning: daemon.timing_only = true: a TIMING-ONLY daemon: vanilla proofs are not checked and no proof is returned (Curio's requests are answered FAILED); never for real work");
    }
    match &config.listen {
        ListenAddr::Unix(p) => {
            let dir = p.parent().unwrap_or(Path::new("/"));
            let state = if dir.is_dir() { "exists" } else { "does not exist yet (the systemd unit's RuntimeDirectory= creates it at start)" };
            println!("# socket: {} (directory {}: {state})", p.display(), dir.display());
            if let Some(group) = &config.socket.group {
                if let Err(e) = cuzk_server::unix_socket::group_id(group) {
                    failures.push(e.to_string());
                }
            }
        }
        ListenAddr::Tcp(a) => println!("# socket: TCP {a}"),
    }
    match &config.state_dir {
        // The start's own check, with its message.
        Some(d) => match cuzk_engine::ProofStore::check(d) {
            Err(e) => failures.push(e.to_string()),
            Ok(()) => {
                let state = if d.is_dir() { "exists" } else { "does not exist yet (made at start; the systemd unit's StateDirectory= makes it)" };
                println!("# completed proofs kept across restarts in {} ({state}) for {:?}", d.display(), config.job_retention);
            }
        },
        None => println!("# completed proofs: in memory only (daemon.state_dir): a restart loses those not yet fetched"),
    }
    match config.status_listen {
        Some(a) => println!("# status endpoint: http://{a}/status, /metrics (Prometheus), /timeline"),
        None => println!("# status endpoint: off (daemon.status_listen)"),
    }
    if cuzk_cuda::kernels_built() {
        println!("# cuda kernels: built for {}", cuzk_cuda::built_architectures());
    } else {
        println!("# cuda kernels: not built (this binary proves on the CPU only)");
    }
    match cuzk_cuda::device_count() {
        Ok(n) => {
            println!("# gpus: {n} usable; gpus.devices = {:?} ({})", config.gpu_devices, if config.gpu_devices.is_empty() { "all" } else { "these" })
        }
        Err(why) if config.gpu_devices.is_empty() => println!("# gpus: none usable ({why}): the daemon would prove on the CPU"),
        Err(why) => failures.push(format!("gpus.devices = {:?}, but there is no usable GPU: {why}", config.gpu_devices)),
    }
    if let Some(&d) = config.gpu_devices.iter().find(|&&d| cuzk_cuda::device_count().is_ok_and(|n| d as usize >= n)) {
        failures.push(format!("gpus.devices names GPU {d}, which this machine does not have"));
    }

    let dir = &config.parameter_dir;
    if let Some(m) = crate::params::directory_problem(dir) {
        if config.preload.is_empty() {
            println!("# parameters: {m}: Filecoin proofs would fail until the files are fetched into it");
        } else {
            failures.push(format!("{m} (srs.preload names {})", config.preload.join(", ")));
        }
    } else {
        let circuits = crate::params::circuits_to_check(&config.preload, dir)?;
        println!("# parameters in {}: header check of {} circuit(s) (`cuzk params check` also verifies the contents)", dir.display(), circuits.len());
        for circuit in circuits {
            let checks = param_check::header_check_circuit(circuit, dir)?;
            for c in &checks {
                let shown = if c.verdict == Verdict::Complete { "present and whole".to_string() } else { c.verdict.to_string() };
                println!("#   {:<12} {}: {shown}", circuit.id(), c.file_name());
            }
            if config.preload.contains(&circuit.id()) {
                if let Some(message) = param_check::problems(&checks, config.timing_only) {
                    failures.push(format!("srs.preload: {message}"));
                }
            }
            println!("#   {:<12} {}", circuit.id(), matrices_note(circuit, config));
        }
    }
    if !failures.is_empty() {
        bail!("the configuration would not work:\n  {}", failures.join("\n  "));
    }
    println!("# configuration OK");
    Ok(())
}

/// Whether `circuit`'s a, b, c would come from compiled matrices (the fast path) or from
/// full synthesis (the slow path: a 32 GiB PoRep sector ~10× slower), and why.
pub fn matrices_note(circuit: cuzk_filecoin::Circuit, config: &DaemonConfig) -> String {
    use cuzk_server::config::CompiledMatrices;
    let dir = config.matrices_dir.clone().unwrap_or_else(|| config.parameter_dir.clone());
    let present = cuzk_filecoin::matrices::matrices_path(circuit, &dir).map(|p| p.exists()).unwrap_or(false);
    match (config.compiled_matrices, present) {
        (CompiledMatrices::Off, _) => "compiled matrices off (synthesis.compiled_matrices): the slow path".into(),
        (_, true) => format!("compiled matrices in {}: the fast path", dir.display()),
        (CompiledMatrices::On, false) => format!("no compiled matrices in {}: compiled there on first use (minutes at 32 GiB)", dir.display()),
        (CompiledMatrices::Auto, false) => format!(
            "no compiled matrices in {}: the SLOW path until they are compiled in the background after the first load (minutes at 32 GiB; `cuzk compile --circuit {circuit}` makes them ahead)",
            dir.display()
        ),
    }
}
