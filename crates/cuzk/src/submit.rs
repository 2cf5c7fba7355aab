//! `cuzk submit`: a gRPC client of a running daemon, for synthetic jobs or a Filecoin
//! request folder (`cuzk fixture`). It submits several jobs at once, waits for them,
//! and reports each job's times and the steady-state seconds per job (the spacing of
//! completions), so the engine can be measured end to end, over the wire, where no
//! other client is installed.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use cuzk_server::pb;
use cuzk_server::pb::await_proof_response::Status;
use cuzk_server::pb::proving_engine_client::ProvingEngineClient;
use cuzk_server::MAX_MESSAGE_BYTES;

#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// The daemon's gRPC address (TCP).
    #[arg(long, default_value = "http://127.0.0.1:9820")]
    pub to: String,
    /// The synthetic payload (JSON), e.g. '{"log_size": 27, "c2": true, "partitions": 10, "premade": true}'.
    #[arg(long, required_unless_present = "request", conflicts_with = "request")]
    pub synthetic: Option<String>,
    /// A Filecoin request folder (request.json and its payload files, as `cuzk fixture`
    /// writes them), submitted as Curio would send it.
    #[arg(long)]
    pub request: Option<std::path::PathBuf>,
    /// Jobs to submit at once (the same payload; seeds as given).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Load this parameter set first (PreloadSRS), so its setup or loading is not
    /// part of the jobs' times (e.g. synthetic-c2, synthetic-2^20).
    #[arg(long)]
    pub preload: Option<String>,
    #[arg(long, value_enum, default_value_t = PriorityArg::Normal)]
    pub priority: PriorityArg,
    /// The daemon's token file (daemon.auth_token_file), when it requires one.
    #[arg(long)]
    pub token_file: Option<std::path::PathBuf>,
    /// With --request, after the last job: check every returned proof with
    /// filecoin-proofs' verifier (it must accept), and the first with one public input
    /// changed (it must refuse). The request is decoded with every check on; the
    /// parameter directory (its .vk files) is FIL_PROOFS_PARAMETER_CACHE's.
    #[arg(long, requires = "request")]
    pub verify: bool,
}

/// The `authorization` value a call carries, from --token-file.
type Authorization = Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>;

fn authorization(args: &SubmitArgs) -> Result<Authorization> {
    let Some(path) = &args.token_file else { return Ok(None) };
    let token = std::fs::read_to_string(path).with_context(|| format!("reading --token-file {}", path.display()))?;
    let value = format!("Bearer {}", token.trim()).parse().map_err(|_| anyhow::anyhow!("--token-file {}: not a printable token", path.display()))?;
    Ok(Some(value))
}

/// `message` as a call, with the token when there is one.
fn call<T>(message: T, auth: &Authorization) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    if let Some(v) = auth {
        r.metadata_mut().insert("authorization", v.clone());
    }
    r
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PriorityArg {
    Low,
    Normal,
    High,
    Critical,
}

impl PriorityArg {
    fn wire(self) -> pb::Priority {
        match self {
            PriorityArg::Low => pb::Priority::Low,
            PriorityArg::Normal => pb::Priority::Normal,
            PriorityArg::High => pb::Priority::High,
            PriorityArg::Critical => pb::Priority::Critical,
        }
    }
}

pub fn run(args: &SubmitArgs) -> Result<()> {
    if args.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    // clap's `requires` does not hold a flag to it: checked here, never ignored.
    if args.verify && args.request.is_none() {
        bail!("--verify checks the proofs of a --request folder with filecoin-proofs' verifier; a --synthetic job has none to check");
    }
    if !args.to.starts_with("http://") {
        if args.to.parse::<std::net::SocketAddr>().is_ok() || args.to.starts_with("localhost:") {
            bail!("--to {}: the address needs its scheme: --to http://{}", args.to, args.to);
        }
        if args.to.starts_with("unix://") || args.to.starts_with('/') {
            bail!("--to {}: this client speaks TCP only; give the daemon's TCP address (http://host:port)", args.to);
        }
        bail!("--to {}: not an address this client takes (http://host:port)", args.to);
    }
    let request = match (&args.synthetic, &args.request) {
        (Some(payload), _) => {
            serde_json::from_str::<serde_json::Value>(payload).context("--synthetic is not JSON")?;
            pb::SubmitProofRequest { proof_kind: pb::ProofKind::Synthetic as i32, vanilla_proof: payload.clone().into_bytes(), ..Default::default() }
        }
        (None, Some(dir)) => filecoin_request(dir)?,
        (None, None) => bail!("give --synthetic or --request"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    rt.block_on(submit(args, request))
}

/// The SubmitProofRequest of a request folder.
fn filecoin_request(dir: &std::path::Path) -> Result<pb::SubmitProofRequest> {
    let files = cuzk_filecoin::request_files::RequestFiles::read(dir)?;
    if files.shape_true_seed.is_some() {
        println!("{}: a shape-true input; only a timing-only daemon (daemon.timing_only) proves it", dir.display());
    }
    Ok(cuzk_server::submit_request_of(&files.request))
}

async fn submit(args: &SubmitArgs, base: pb::SubmitProofRequest) -> Result<()> {
    let auth = authorization(args)?;
    let client = ProvingEngineClient::connect(args.to.clone())
        .await
        .with_context(|| format!("connecting to {}", args.to))?
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    if let Some(id) = &args.preload {
        let t = Instant::now();
        let r = client
            .clone()
            .preload_srs(call(pb::PreloadSrsRequest { circuit_id: id.clone() }, &auth))
            .await
            .with_context(|| format!("PreloadSRS {id}"))?
            .into_inner();
        println!("preloaded {id} ({}) in {:.2} s", if r.already_loaded { "already loaded" } else { "loaded now" }, t.elapsed().as_secs_f64());
    }
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(args.jobs);
    for i in 0..args.jobs {
        let mut c = client.clone();
        let req = pb::SubmitProofRequest { priority: args.priority.wire() as i32, ..base.clone() };
        let auth = auth.clone();
        tasks.push(tokio::spawn(async move {
            let r = c.prove(call(pb::ProveRequest { submit: Some(req) }, &auth)).await;
            (i, r, start.elapsed())
        }));
        // Spaced submissions, so that FIFO scheduling most likely sees them in order.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut done = Vec::with_capacity(args.jobs);
    let mut proofs = Vec::new();
    let mut failed = 0;
    for t in tasks {
        let (i, r, at) = t.await.context("a client task failed")?;
        // One failed call is reported with the others, not instead of them.
        let r = match r.map(|r| r.into_inner().result) {
            Ok(Some(r)) => r,
            Ok(None) => {
                failed += 1;
                println!("job {i}: Prove returned no result");
                continue;
            }
            Err(e) => {
                failed += 1;
                println!("job {i}: Prove failed: {} ({:?})", e.message(), e.code());
                continue;
            }
        };
        // A timing-only daemon's job is proved but FAILED, with no proof: a timing run's
        // result all the same.
        let timed = r.status == Status::Failed as i32 && r.error_message.starts_with(cuzk_engine::TIMING_ONLY_NOTE);
        if r.status == Status::Completed as i32 || timed {
            println!(
                "job {i} ({}): completed at {:.2} s, {} proof bytes; total {} ms, queued {} ms, synthesis {} ms, GPU {} ms{}",
                r.job_id,
                at.as_secs_f64(),
                r.proof.len(),
                r.total_ms,
                r.queue_wait_ms,
                r.synthesis_ms,
                r.gpu_compute_ms,
                if r.error_message.is_empty() { String::new() } else { format!(" ({})", r.error_message) }
            );
            done.push(at);
            proofs.push((i, r.proof));
        } else {
            failed += 1;
            let status = Status::try_from(r.status).map_or_else(|_| format!("status {}", r.status), |s| s.as_str_name().to_string());
            println!("job {i} ({}): {status} — {}", r.job_id, r.error_message);
        }
    }
    done.sort();
    if done.len() > 1 {
        let span = (*done.last().unwrap_or(&Duration::ZERO) - done[0]).as_secs_f64();
        println!(
            "{} jobs completed in {:.2} s; steady state (first to last completion): {:.3} s per job",
            done.len(),
            start.elapsed().as_secs_f64(),
            span / (done.len() - 1) as f64
        );
    }
    if failed > 0 {
        bail!("{failed} of {} jobs did not complete", args.jobs);
    }
    if let (true, Some(dir)) = (args.verify, &args.request) {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || verify(&dir, &proofs)).await.context("the verifying task failed")??;
    }
    Ok(())
}

/// `cuzk submit --verify`: every returned proof checked as a client would.
fn verify(dir: &std::path::Path, proofs: &[(usize, Vec<u8>)]) -> Result<()> {
    let t = Instant::now();
    let job = cuzk_filecoin::request_files::RequestFiles::read(dir)?
        .decode(cuzk_filecoin::InputChecks::Full)
        .with_context(|| format!("decoding {} with every check on", dir.display()))?;
    println!("verify: {} decoded with every check on in {:.2} s", dir.display(), t.elapsed().as_secs_f64());
    let mut by_filecoin_proofs = 0;
    for (n, (i, proof)) in proofs.iter().enumerate() {
        let t = Instant::now();
        // The first with one public input changed too (the verifier must refuse it).
        let checked = crate::selftest::check_returned(job.as_ref(), proof, n == 0).with_context(|| format!("job {i}'s proof"))?;
        by_filecoin_proofs += usize::from(checked.by_filecoin_proofs);
        println!("verify: job {i}: {} ({:.2} s)", checked.line, t.elapsed().as_secs_f64());
    }
    let partitions_only = proofs.len() - by_filecoin_proofs;
    if partitions_only == 0 {
        println!("verify: all {} returned proofs accepted by filecoin-proofs' verifier", proofs.len());
    } else {
        println!(
            "verify: all {} returned proofs checked: {by_filecoin_proofs} accepted by filecoin-proofs' verifier, {partitions_only} by their partition proofs only (filecoin-proofs' verifier cannot take them)",
            proofs.len()
        );
    }
    Ok(())
}
