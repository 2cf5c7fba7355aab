//! `cuzk selftest`: the check to run before a host goes into production. With the
//! parameters in its cache (the published ones, or `cuzk setup --circuit`'s) it makes a
//! valid synthetic sector (cuzk-filecoin's `valid`: vanilla proofs filecoin-proofs
//! accepts, made in seconds), proves it through the engine the daemon builds for this
//! configuration (the same GPUs, memory plan, compiled matrices, vanilla-proof checks
//! and final check) and its gRPC service's Prove call, then checks the returned proof
//! with filecoin-proofs' verifier, and that the verifier refuses it with one public
//! input changed and for another sector.
//! It prints the verdict and the seconds each step took; any failure is an error.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use cuzk_filecoin::param_check;
use cuzk_filecoin::request_files::RequestFiles;
use cuzk_filecoin::{Circuit, InputChecks};
use cuzk_server::config::DaemonConfig;
use cuzk_server::pb;
use cuzk_server::pb::await_proof_response::Status;
use cuzk_server::pb::proving_engine_server::ProvingEngine;
use cuzk_server::{ParameterFiles, ProvingService};

#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// The circuits to prove, one sector (or PoSt partition) each: porep-32g, snap-32g,
    /// wpost-32g, winning-32g, porep-64g, …, or 2k sizes for a quick check.
    #[arg(long = "circuit", value_parser = crate::circuits::parse_circuit, default_value = "porep-32g")]
    pub circuits: Vec<Circuit>,
    /// The daemon's configuration file: the GPUs, memory limits, compiled matrices and
    /// parameter directory as the daemon would use them (default: the defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The parameter directory, instead of srs.param_cache.
    #[arg(long)]
    pub param_dir: Option<PathBuf>,
    /// Seed of the synthetic sector's random values.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The configuration to prove with: the file's (or the defaults), never timing-only,
/// completed proofs kept nowhere (the daemon's state directory is left alone).
fn config_of(args: &SelftestArgs) -> Result<DaemonConfig> {
    let (mut config, warnings) = crate::config_file::read_config(args.config.as_deref())?;
    for w in warnings {
        eprintln!("configuration: {w}");
    }
    if let Some(dir) = &args.param_dir {
        config.parameter_dir = dir.clone();
    }
    if config.timing_only {
        eprintln!("selftest: daemon.timing_only is ignored: the selftest proves and verifies in production mode");
    }
    config.timing_only = false;
    config.state_dir = None;
    Ok(config)
}

/// The parameter files of `circuit` present, whole and not timing points; else an
/// error naming what is wrong and how to get them.
fn check_parameters(circuit: Circuit, config: &DaemonConfig) -> Result<()> {
    let dir = &config.parameter_dir;
    if let Some(problem) = crate::params::directory_problem(dir) {
        bail!("{problem} (--param-dir, srs.param_cache or ${} names it)", cuzk_server::config::PARAMETER_CACHE_ENV);
    }
    let checks = param_check::header_check_circuit(circuit, dir).with_context(|| format!("checking the parameter files of {circuit}"))?;
    if let Some(problems) = param_check::problems(&checks, false) {
        bail!("{problems} (or make parameters of your own: `cuzk setup --circuit {circuit} --out {}`)", dir.display());
    }
    Ok(())
}

pub fn run(args: &SelftestArgs) -> Result<()> {
    let config = config_of(args)?;
    for &c in &args.circuits {
        check_parameters(c, &config)?;
    }
    cuzk_filecoin::env::use_parameter_dir(&config.parameter_dir).context("the parameter directory")?;
    if config.cpu_threads > 0 {
        rayon::ThreadPoolBuilder::new().num_threads(config.cpu_threads).build_global().context("setting the CPU thread count")?;
    }
    let engine = crate::daemon::build_engine(&config, args.config.as_deref())?;
    let service =
        ProvingService::new(engine.clone()).checking_parameters(ParameterFiles { dir: config.parameter_dir.clone(), timing_points_allowed: false });
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    let mut failed = Vec::new();
    let mut partitions_only = Vec::new();
    for &circuit in &args.circuits {
        println!("{circuit}: {}", crate::check_config::matrices_note(circuit, &config));
        match rt.block_on(one(&service, circuit, args.seed)) {
            Ok((line, by_filecoin_proofs)) => {
                if !by_filecoin_proofs {
                    partitions_only.push(circuit.id());
                }
                println!("{circuit}: PASS — {line}")
            }
            Err(e) => {
                println!("{circuit}: FAIL — {e:#}");
                failed.push(circuit.id());
            }
        }
    }
    drop(service);
    engine.shutdown(std::time::Duration::from_secs(5));
    if !failed.is_empty() {
        bail!("selftest failed for {}", failed.join(", "));
    }
    let how = if partitions_only.is_empty() {
        "accepted by filecoin-proofs' verifier".to_string()
    } else {
        format!("checked ({} by their partition proofs only, as each line says; the rest by filecoin-proofs' verifier)", partitions_only.join(", "))
    };
    println!("selftest passed: {} circuit(s) proved on {} and {how}", args.circuits.len(), backends(&engine));
    Ok(())
}

fn backends(engine: &cuzk_engine::Engine) -> String {
    engine.status().backends.iter().map(|b| b.name.clone()).collect::<Vec<_>>().join(", ")
}

/// One circuit: a valid sector made, loaded and proved through the service, the proof
/// checked; the line to print.
async fn one(service: &ProvingService, circuit: Circuit, seed: u64) -> Result<(String, bool)> {
    let t = Instant::now();
    let (request, other) = tokio::task::spawn_blocking(move || -> Result<(RequestFiles, RequestFiles)> {
        let make = |seed| circuit.kind.valid_request(circuit.size, seed).with_context(|| format!("making a valid {circuit} input"));
        Ok((make(seed)?, make(seed + 1)?))
    })
    .await
    .context("making the inputs")??;
    let made = t.elapsed();
    let t = Instant::now();
    service
        .preload_srs(tonic::Request::new(pb::PreloadSrsRequest { circuit_id: circuit.id() }))
        .await
        .map_err(|s| anyhow::anyhow!("loading the parameters: {}", s.message()))?;
    let loaded = t.elapsed();
    let submit = cuzk_server::submit_request_of(&request.request);
    let t = Instant::now();
    let r = service
        .prove(tonic::Request::new(pb::ProveRequest { submit: Some(submit) }))
        .await
        .map_err(|s| anyhow::anyhow!("Prove refused: {} ({:?})", s.message(), s.code()))?
        .into_inner()
        .result
        .context("Prove returned no result")?;
    let proved = t.elapsed();
    if r.status != Status::Completed as i32 {
        let status = Status::try_from(r.status).map_or_else(|_| format!("status {}", r.status), |s| s.as_str_name().to_string());
        bail!("the proof did not complete: {status}: {}", r.error_message);
    }
    // filecoin-proofs' verifier, again, outside the engine: for this sector, and for
    // another sector (which it must refuse).
    let proof = Arc::new(r.proof);
    let p = proof.clone();
    let (accepted, refused_other) = tokio::task::spawn_blocking(move || -> Result<(Checked, bool)> {
        let accepted = check_returned(request.decode(InputChecks::Full)?.as_ref(), &p, true)?;
        let other = other.decode(InputChecks::Full)?.verify(&p).is_err();
        Ok((accepted, other))
    })
    .await
    .context("verifying")??;
    if !refused_other {
        bail!("filecoin-proofs' verifier accepted the proof for another sector: the check is not working");
    }
    let by_filecoin_proofs = accepted.by_filecoin_proofs;
    let accepted = accepted.line;
    let line = format!(
        "{} proof bytes {accepted}, and refused for another sector; input made in {:.2} s, parameters loaded in {:.2} s, proved in {:.2} s (synthesis {} ms, proving {} ms)",
        proof.len(),
        made.as_secs_f64(),
        loaded.as_secs_f64(),
        proved.as_secs_f64(),
        r.synthesis_ms,
        r.gpu_compute_ms
    );
    Ok((line, by_filecoin_proofs))
}

/// How a returned proof was checked ([`check_returned`]).
pub struct Checked {
    /// The line saying what was checked.
    pub line: String,
    /// filecoin-proofs' verifier accepted it (else only its partition proofs were
    /// checked, that verifier having no entry point for it).
    pub by_filecoin_proofs: bool,
}

/// A client's check of a returned proof: filecoin-proofs' verifier accepts it for its
/// request and, with `changed_too`, refuses it with one public input changed. Where
/// that verifier has no entry point for the proof (a lone WindowPoSt partition past the
/// first), each partition proof is checked against storage-proofs' public inputs with
/// the circuit's .vk instead (and refused with an input changed), and the line says so:
/// a proof no verifier checked is never called accepted.
pub fn check_returned(job: &dyn cuzk_filecoin::FilecoinJob, proof: &[u8], changed_too: bool) -> Result<Checked> {
    let dir = || match cuzk_filecoin::env::parameter_dir() {
        Some(d) => Ok(d.to_owned()),
        None => std::env::var_os("FIL_PROOFS_PARAMETER_CACHE")
            .map(PathBuf::from)
            .context("no parameter directory for the verifying key (FIL_PROOFS_PARAMETER_CACHE)"),
    };
    // A missing key is not a refused proof: say which file is missing, before the
    // verifier fails on it.
    let vk = job.circuit().vk_path(&dir()?)?;
    if !vk.is_file() {
        bail!(
            "the verifying key {} is missing (FIL_PROOFS_PARAMETER_CACHE names the directory of the .vk files): the proof was not checked",
            vk.display()
        );
    }
    let by = job.verify(proof).context("filecoin-proofs' verifier refused the proof")?;
    match by {
        cuzk_filecoin::CheckedBy::FilecoinProofs => {
            let mut line = "accepted by filecoin-proofs' verifier".to_string();
            if changed_too {
                let (changed, r) = job.verify_one_input_changed(proof);
                if r.is_ok() {
                    bail!("filecoin-proofs' verifier accepted the proof with {changed} changed: the check is not working");
                }
                line += &format!(" and refused with {changed} changed");
            }
            Ok(Checked { line, by_filecoin_proofs: true })
        }
        cuzk_filecoin::CheckedBy::PartitionsOnly(why) => {
            let c = cuzk_filecoin::verify_partitions(job, proof, &dir()?).context("checking its partition proofs")?;
            Ok(Checked {
                line: format!(
                    "not checked by filecoin-proofs' verifier ({why}); each of its {} partition proof(s) verified against storage-proofs' public inputs with {} and refused with a public input changed",
                    c.partitions,
                    c.vk.display()
                ),
                by_filecoin_proofs: false,
            })
        }
    }
}
