//! `cuzk params`: the parameter directory checked against what the circuits need
//! (cuzk_filecoin::param_check): `check` reads every byte and compares the published
//! digests, `digest` prints a file's digest as parameters.json lists it. The daemon
//! runs the header part of the check at start ([`start_check`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use cuzk_filecoin::param_check::{self, DigestTable, FileCheck, Verdict};
use cuzk_filecoin::{Circuit, CircuitKind, SectorSize};
use cuzk_groth16::Progress;
use cuzk_server::config::DaemonConfig;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Args, Debug)]
pub struct ParamsArgs {
    #[command(subcommand)]
    command: ParamsCommand,
}

#[derive(Subcommand, Debug)]
enum ParamsCommand {
    /// Check every file the circuits need: present, whole, real points (not timing ones)
    /// and, unless --quick, the content digest published in parameters.json (reads
    /// every byte: about a minute per 47 GB file). Exits non-zero when a file is
    /// missing, truncated, corrupt, unreadable or timing points.
    Check(CheckArgs),
    /// Print files' content digests as parameters.json lists them (BLAKE2b-512, the
    /// first 32 hex digits).
    Digest {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// Circuit ids (porep-32g, wpost-32g, …; repeat the flag or separate by commas).
    /// Default: srs.preload of --config; when that is empty, every circuit with at least
    /// one file in the directory.
    #[arg(long = "circuit", value_delimiter = ',')]
    circuits: Vec<String>,
    /// The parameter directory. Default: srs.param_cache of --config, else
    /// $FIL_PROOFS_PARAMETER_CACHE, else /data/zk/params (the daemon's own default).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The daemon's configuration file, for srs.param_cache and srs.preload.
    #[arg(long)]
    config: Option<PathBuf>,
    /// More digests, in parameters.json's layout, added to the published ones (for
    /// files of your own setup; an entry replaces a published one of the same name).
    #[arg(long)]
    digests: Option<PathBuf>,
    /// The header check only (presence, length, timing marker): seconds, not minutes.
    #[arg(long)]
    quick: bool,
}

pub fn run(args: &ParamsArgs) -> Result<()> {
    match &args.command {
        ParamsCommand::Check(a) => check(a),
        ParamsCommand::Digest { files } => {
            for f in files {
                let bar = ByteBar::new();
                let d = param_check::file_digest(f, &bar).with_context(|| format!("reading {}", f.display()))?;
                bar.finish();
                println!("{d}  {}", f.display());
            }
            Ok(())
        }
    }
}

/// A bar of bytes read, on stderr (hidden when stderr is not a terminal).
struct ByteBar {
    bar: ProgressBar,
}

impl ByteBar {
    fn new() -> Self {
        let style = ProgressStyle::with_template("{msg:.bold} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        ByteBar { bar: ProgressBar::new(0).with_style(style) }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for ByteBar {
    fn stage(&self, name: &str, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(0);
        self.bar.set_message(name.to_string());
    }

    fn advance(&self, n: u64) {
        self.bar.inc(n);
    }
}

/// Every Filecoin circuit, smallest sectors first.
fn all_circuits() -> Vec<Circuit> {
    SectorSize::ALL.into_iter().flat_map(|size| CircuitKind::ALL.into_iter().map(move |kind| Circuit { kind, size })).collect()
}

/// The circuits to check: `ids` when given, else every circuit with at least one of its
/// files in `dir` (a download that stopped between a circuit's two files shows up).
pub fn circuits_to_check(ids: &[String], dir: &Path) -> Result<Vec<Circuit>> {
    if !ids.is_empty() {
        return ids.iter().map(|id| crate::circuits::parse_circuit(id)).collect();
    }
    let mut present = Vec::new();
    for c in all_circuits() {
        if param_check::circuit_files(c, dir)?.iter().any(|(_, p)| p.exists()) {
            present.push(c);
        }
    }
    Ok(present)
}

fn check(args: &CheckArgs) -> Result<()> {
    let config = match &args.config {
        Some(path) => Some(crate::config_file::read_config(Some(path.as_path()))?.0),
        None => None,
    };
    let dir = match (&args.dir, &config) {
        (Some(d), _) => d.clone(),
        (None, Some(c)) => c.parameter_dir.clone(),
        (None, None) => DaemonConfig::defaults_with(cuzk_server::config::parameter_dir_from_env()).parameter_dir,
    };
    let ids: &[String] = if !args.circuits.is_empty() { &args.circuits } else { config.as_ref().map(|c| c.preload.as_slice()).unwrap_or(&[]) };
    if let Some(problem) = directory_problem(&dir) {
        bail!("{problem} (--dir, srs.param_cache or $FIL_PROOFS_PARAMETER_CACHE names it)");
    }
    let circuits = circuits_to_check(ids, &dir)?;
    if circuits.is_empty() {
        bail!("no parameter file of any Filecoin circuit in {}; fetch them with `curio fetch-params <sector size>` or `lotus fetch-params <sector size>`", dir.display());
    }
    let mut table = DigestTable::published();
    if let Some(extra) = &args.digests {
        let text = std::fs::read_to_string(extra).with_context(|| format!("reading {}", extra.display()))?;
        table.add_json(&text).with_context(|| format!("in {}", extra.display()))?;
    }
    println!(
        "checking {} circuit(s) in {} ({}): {}",
        circuits.len(),
        dir.display(),
        if args.quick { "header check: presence, length, timing marker" } else { "content digests against parameters.json" },
        circuits.iter().map(|c| c.id()).collect::<Vec<_>>().join(", ")
    );
    let own = DigestTable::own(&dir)?;
    let bar = ByteBar::new();
    let mut results: Vec<FileCheck> = Vec::new();
    for circuit in circuits {
        for (role, path) in param_check::circuit_files(circuit, &dir)? {
            let verdict =
                if args.quick { param_check::header_check_own(&path, role, &own) } else { param_check::full_check(&path, role, &table, &own, &bar) };
            bar.bar.suspend(|| println!("{:<11} {:<12} {}{}", verdict.word(), circuit.id(), file_name(&path), detail(&verdict)));
            results.push(FileCheck { circuit, role, path, verdict });
        }
    }
    bar.finish();
    let count = |w: &str| results.iter().filter(|r| r.verdict.word() == w).count();
    let bad = results.iter().filter(|r| !r.verdict.usable(false)).count();
    println!(
        "{} files: {} ok, {} complete (not hashed), {} unpublished, {} our own setup's, {} missing, {} truncated, {} corrupt, {} timing, {} unreadable",
        results.len(),
        count("ok"),
        count("complete"),
        count("unpublished"),
        count("own"),
        count("missing"),
        count("truncated"),
        count("corrupt"),
        count("timing"),
        count("unreadable")
    );
    if let Some(message) = param_check::problems(&results, false) {
        bail!("{bad} file(s) not usable. {message}");
    }
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The verdict's explanation after the name, for the verdicts that have one.
fn detail(v: &Verdict) -> String {
    match v {
        Verdict::Verified | Verdict::Complete | Verdict::Missing => String::new(),
        other => format!(": {other}"),
    }
}

/// Why `dir` cannot be the parameter directory (missing, a file, unreadable), or None.
pub fn directory_problem(dir: &std::path::Path) -> Option<String> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some(format!("parameter directory {} is a file, not a directory", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!("parameter directory {} does not exist", dir.display())),
        Err(e) => Some(format!("parameter directory {}: {e}", dir.display())),
    }
}

/// The daemon's header check at start: srs.preload's circuits, else every circuit with
/// a file in the directory; logged per circuit. Returns the srs.preload circuits whose
/// files are usable (the ones to load). Never fails the start: a daemon that cannot
/// prove one kind still proves the others (a WindowPoSt deadline must not be missed
/// over a bad PoRep file).
pub fn start_check(config: &DaemonConfig) -> Vec<Circuit> {
    let dir = &config.parameter_dir;
    if let Some(problem) = directory_problem(dir) {
        tracing::error!(
            "{problem} (srs.param_cache, or {}): Filecoin proofs will fail until the parameters are fetched into it",
            cuzk_server::config::PARAMETER_CACHE_ENV
        );
        return Vec::new();
    }
    let circuits = match circuits_to_check(&config.preload, dir) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("checking the parameter directory: {e:#}");
            return Vec::new();
        }
    };
    if circuits.is_empty() {
        tracing::warn!(dir = %dir.display(), "no parameter file of any Filecoin circuit in the parameter directory: Filecoin proofs will fail until they are fetched");
    }
    let mut usable = Vec::new();
    for circuit in circuits {
        let checks = match param_check::header_check_circuit(circuit, dir) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(circuit = %circuit, "checking its parameter files: {e}");
                continue;
            }
        };
        match param_check::problems(&checks, config.timing_only) {
            None => {
                let timing = checks.iter().any(|c| c.verdict == Verdict::TimingPoints);
                tracing::info!(circuit = %circuit, timing_points = timing, "parameter files present and whole");
                if config.preload.contains(&circuit.id()) {
                    usable.push(circuit);
                }
            }
            Some(message) => tracing::error!(circuit = %circuit, "{message}"),
        }
    }
    usable
}
