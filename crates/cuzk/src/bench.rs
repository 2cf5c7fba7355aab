//! `cuzk bench`: synthesis and per-stage proving times on synthetic circuits (with
//! `--input`, on a Filecoin request's circuits: see `bench_filecoin`).
//!
//! Per size: one setup, one warm-up proof, then `--reps` timed proofs, each on a fresh
//! witness and each verified; medians are reported. The last line per size is a
//! `RESULT` line for scripts.
//!
//! With `--timing-params` the setup is replaced by a parameter set of random points of
//! the right shape (seconds instead of hours at full size): the proofs are timed but
//! cannot verify, so verification is skipped, and the output says so.
//!
//! On a GPU, a, b, c are synthesized into pinned buffers (allocated once, reused), and
//! the device's own figures are printed: time held, kernel time, idle share, PCIe
//! bytes, host waits. `--back-to-back N` then proves N partitions with two threads, as
//! the engine's two workers per device do (one uploads while the other computes), on
//! pre-made partitions: the last two synthesized, proven again (a GPU backend leaves
//! a, b, c unchanged).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use cuzk_groth16::generator::{generate_parameters_with, timing_parameters, FixedBaseMul, ToxicWaste};
use cuzk_groth16::matrices::compile_matrices;
use cuzk_groth16::synthesis::{synthesize_into, EvalBuffers};
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::witness::synthesize_witness;
use cuzk_groth16::{DeviceReport, ProofRandomness, ProvingBackend, Stage, SynthesizedCircuit};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::backends::{backend_planned, fixed_base_on, BackendKind};
use crate::progress::Bars;
use crate::shape::ShapeArgs;
use cuzk_groth16::sync::lock;

#[derive(Args)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    pub(crate) backend: BackendKind,
    /// Domain sizes to run, as powers of two, comma-separated (overrides --log-size).
    #[arg(long, value_delimiter = ',')]
    pub(crate) log_sizes: Vec<u32>,
    /// Timed repetitions per size (after one warm-up).
    #[arg(long, default_value_t = 3)]
    pub(crate) reps: usize,
    /// Time with random parameter points of the circuit's shape instead of a real setup.
    /// The proofs are NOT valid and are not verified: for timing only.
    #[arg(long)]
    pub(crate) timing_params: bool,
    /// Time with an existing .params file of the circuit's shape (e.g. random points
    /// from `cuzk setup --timing-params`, so other provers can be timed on the same
    /// file). Its proofs are not expected to verify: verification is skipped.
    #[arg(long, conflicts_with = "timing_params")]
    pub(crate) params: Option<std::path::PathBuf>,
    /// Then prove this many partitions back to back, two threads sharing the device
    /// (GPU backends; pre-made partitions proven again).
    #[arg(long, default_value_t = 0)]
    pub(crate) back_to_back: usize,
    /// GPU: keep the parameters' points in pinned host memory and stream them up for
    /// every MSM through two device buffers of about this many MiB each, as on a GPU
    /// too small for the set (default: on the device when they fit).
    #[arg(long, value_name = "MIB")]
    pub(crate) stream_points: Option<usize>,
    /// GPU: plan the device's memory within this many GiB (as gpus.device_memory_limit
    /// does for the daemon), standing in for a smaller card.
    #[arg(long, value_name = "GIB")]
    pub(crate) device_memory_gib: Option<f64>,
    /// A Filecoin request folder (`cuzk fixture`, or one written the same way): time
    /// its partitions (count, cuzk's synthesis, bellperson's, and the proof where
    /// --params or --param-dir is given) instead of synthetic circuits.
    #[arg(long)]
    pub(crate) input: Option<std::path::PathBuf>,
    /// With --input: the circuit id the request must be for (e.g. porep-32g).
    #[arg(long, requires = "input")]
    pub(crate) circuit: Option<String>,
    /// With --input: the partitions to time, comma-separated (default 0).
    #[arg(long, value_delimiter = ',', requires = "input")]
    pub(crate) partitions: Vec<usize>,
    /// With --input: do not check the vanilla proofs (shape-true inputs). Proofs are
    /// then not verified: for timing only.
    #[arg(long, requires = "input")]
    pub(crate) timing_only: bool,
    /// With --input: skip bellperson's synthesis of the same partitions.
    #[arg(long, requires = "input")]
    pub(crate) no_reference: bool,
    /// With --input: prove with the parameters of the request's circuit in this
    /// Filecoin parameter directory (standard file names).
    #[arg(long, requires = "input", conflicts_with = "params")]
    pub(crate) param_dir: Option<std::path::PathBuf>,
    /// With --input: also time the compiled path (witness-only synthesis on every core,
    /// the compiled matrices from this directory, compiled first when missing, and
    /// a, b, c as sparse products), checked against cuzk's full synthesis.
    #[arg(long, requires = "input", value_name = "DIR")]
    pub(crate) compiled: Option<std::path::PathBuf>,
    /// Synthetic circuits: the shape's matrices compiled once, then per proof the
    /// witness only, a, b, c left pending for the backend to compute (a GPU backend on
    /// its device, from the compact witness) instead of full synthesis.
    #[arg(long, conflicts_with = "input")]
    pub(crate) pending_products: bool,
    #[command(flatten)]
    pub(crate) shape: ShapeArgs,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// a, b, c storage for one circuit of domain size `n`, allocated before synthesis as
/// the engine's pool does: pinned on a GPU (slow to allocate: reused), else vectors.
pub(crate) fn new_buffers(gpu: Option<&Arc<cuzk_cuda::Gpu>>, n: usize) -> Result<EvalBuffers> {
    Ok(match gpu {
        Some(g) => {
            let one = || cuzk_cuda::PinnedScalars::storage(g, n).context("allocating pinned host memory");
            EvalBuffers { a: one()?, b: one()?, c: one()? }
        }
        None => {
            let one = || Box::new(vec![cuzk_groth16::Scalar::from(0u64); n]);
            EvalBuffers { a: one(), b: one(), c: one() }
        }
    })
}

/// The circuit's a, b, c storage, for the next synthesis.
fn take_buffers(mut c: SynthesizedCircuit) -> EvalBuffers {
    EvalBuffers { a: std::mem::take(&mut c.a).into_storage(), b: std::mem::take(&mut c.b).into_storage(), c: std::mem::take(&mut c.c).into_storage() }
}

pub(crate) fn print_device(d: &DeviceReport, partitions: usize) {
    let per = |x: Duration| x.as_secs_f64() / partitions.max(1) as f64;
    println!(
        "  device per partition: held {:.3} s, kernels {:.3} s, idle {:.3} s ({:.1} % of held); {:.2} GB up, {} B down; {} host wait(s)",
        per(d.held),
        per(d.busy),
        per(d.idle()),
        100.0 * d.idle().as_secs_f64() / d.held.as_secs_f64().max(1e-9),
        d.bytes_up as f64 / 1e9 / partitions.max(1) as f64,
        d.bytes_down / partitions.max(1) as u64,
        d.host_syncs as f64 / partitions.max(1) as f64,
    );
}

/// One proof's non-zero stages, then its device figures where it ran on one.
pub(crate) fn print_proof_stages(out: &cuzk_groth16::ProveOutput) {
    for s in Stage::ALL {
        let d = out.timings.get(s);
        if !d.is_zero() {
            println!("    {:<18} {:>9.3} s", s.name(), d.as_secs_f64());
        }
    }
    if let Some(d) = &out.device {
        print_device(d, 1);
    }
}

/// The GPU backend's choices: points streamed (`--stream-points`), and its device
/// memory (`--device-memory-gib`).
pub(crate) fn planned(args: &BenchArgs) -> (cuzk_cuda::Overrides, Option<usize>) {
    // Whole G1 and G2 points per buffer.
    let chunk_bytes = args.stream_points.map(|mib| (mib << 20) / 192 * 192);
    (cuzk_cuda::Overrides { chunk_bytes, ..cuzk_cuda::Overrides::default() }, args.device_memory_gib.map(|g| (g * (1u64 << 30) as f64) as usize))
}

/// `cuzk bench` on synthetic circuits (`--input` is crate::bench_filecoin's).
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let sizes = if args.log_sizes.is_empty() { vec![args.shape.log_size] } else { args.log_sizes.clone() };
    let (overrides, limit) = planned(args);
    let (backend, gpu) = backend_planned(args.backend, overrides, limit)?;
    if args.back_to_back > 0 && !backend.keeps_evaluations() {
        bail!("--back-to-back proves pre-made partitions again: {} uses a, b, c as scratch", backend.name());
    }
    println!("cuzk bench: backend {}, {} threads, {} timed reps after 1 warm-up", backend.name(), rayon::current_num_threads(), args.reps);
    // A real setup's fixed-base multiplications run where the proofs do.
    let fixed_base: Option<Box<dyn FixedBaseMul>> =
        if args.params.is_none() && !args.timing_params { Some(fixed_base_on(gpu.as_ref())?) } else { None };
    for log in sizes {
        let mut shape_args = args.shape.clone();
        shape_args.log_size = log;
        let shape = shape_args.shape()?;
        // With --constraints the domain follows from the shape, not from --log-sizes.
        let log = shape.domain_size().trailing_zeros();
        let n = shape.domain_size();
        let bars = Bars::new();
        let t = Instant::now();
        let mut setup_rng = ChaCha20Rng::seed_from_u64(log as u64);
        let mut spare: Vec<EvalBuffers> = Vec::new();
        let params = if let Some(path) = &args.params {
            let t = Instant::now();
            let p = crate::backends::read_params_for(backend.as_ref(), path, cuzk_groth16::format::PointCheck::OnCurve, &bars)?;
            let on = match p.points() {
                cuzk_groth16::params::QueryPoints::File(_) => {
                    format!("onto {}, decoded there", backend.name())
                }
                cuzk_groth16::params::QueryPoints::Host(_) => "into host memory".to_string(),
            };
            println!("read {} ({:.2} GB of points) {on} in {:.2} s", path.display(), p.points_bytes() as f64 / 1e9, t.elapsed().as_secs_f64());
            p
        } else if args.timing_params {
            let c = synthesize_into(shape.circuit(0), new_buffers(gpu.as_ref(), n)?).context("synthesis failed")?;
            let p = timing_parameters(&c, &mut setup_rng, &bars);
            spare.push(take_buffers(c));
            p
        } else {
            let mul = fixed_base.as_ref().context("no fixed-base multiplier for the setup")?;
            let tw = ToxicWaste::random(&mut setup_rng);
            generate_parameters_with(shape.circuit(0), &tw, mul.as_ref(), &bars).context("setup failed")?
        };
        bars.finish();
        let setup = t.elapsed();
        let pvk = PreparedVerifyingKey::new(&params.vk);
        let unverified = args.timing_params || args.params.is_some();
        println!(
            "\n== 2^{log}: {} constraints, {} inputs; {} {:.2} s",
            shape.constraints,
            shape.inputs,
            if args.params.is_some() {
                "parameters from a file (proofs are not expected to verify; verification skipped)".to_string()
            } else if args.timing_params {
                "random timing parameters (proofs will NOT verify; verification skipped)".to_string()
            } else {
                format!("setup ({})", fixed_base.as_ref().map_or(String::new(), |m| m.name()))
            },
            setup.as_secs_f64()
        );
        let matrices = if args.pending_products {
            let t = Instant::now();
            let m = Arc::new(compile_matrices(shape.circuit(0)).context("compiling the shape's matrices")?);
            println!(
                "  matrices compiled in {:.2} s: {} non-zeros, {:.2} GB; synthesis below is witness-only, a, b, c pending for {}",
                t.elapsed().as_secs_f64(),
                m.non_zeros(),
                m.bytes() as f64 / 1e9,
                backend.name()
            );
            Some(m)
        } else {
            None
        };
        let mut rng = ChaCha20Rng::seed_from_u64(1000 + log as u64);
        let mut synth_times = Vec::new();
        let mut prove_times = Vec::new();
        let mut stage_times: Vec<Vec<Duration>> = vec![Vec::new(); Stage::ALL.len()];
        let mut device = DeviceReport::default();
        // The last two circuits, kept for --back-to-back.
        let mut kept: VecDeque<SynthesizedCircuit> = VecDeque::new();
        for rep in 0..=args.reps {
            // Full synthesis writes a, b, c into buffers (allocated outside the timing).
            let buffers = match (&matrices, spare.pop()) {
                (Some(_), _) => None,
                (None, Some(b)) => Some(b),
                (None, None) => Some(new_buffers(gpu.as_ref(), n)?),
            };
            let t = Instant::now();
            let circuit = shape.circuit(rep as u64 + 1);
            let mut circuits = vec![match (&matrices, buffers) {
                (None, Some(buffers)) => synthesize_into(circuit, buffers).context("synthesis failed")?,
                (None, None) => bail!("no a, b, c buffers for full synthesis"),
                (Some(m), _) => {
                    let w = synthesize_witness(circuit, m.num_aux).context("witness synthesis failed")?;
                    SynthesizedCircuit::with_pending_products(m.clone(), w).context("the witness does not fit the compiled matrices")?
                }
            }];
            let synth = t.elapsed();
            let inputs = circuits[0].input[1..].to_vec();
            let t = Instant::now();
            let out = backend.prove(&params, &mut circuits, &[ProofRandomness::random(&mut rng)])?;
            let prove = t.elapsed();
            if !unverified && !verify_proof(&pvk, &out.proofs[0], &inputs)? {
                bail!("2^{log}, rep {rep}: proof failed verification");
            }
            if !unverified && rep == 0 {
                rejects_tampering(&pvk, &out.proofs[0], &inputs).with_context(|| format!("2^{log}"))?;
            }
            if rep == 0 {
                let what = if gpu.is_some() && args.params.is_none() { " (includes moving the parameters onto the device)" } else { "" };
                println!("  warm-up proof{what}: {:.3} s", prove.as_secs_f64());
            }
            let c = circuits.pop().context("no circuit")?;
            if args.back_to_back > 0 {
                kept.push_back(c);
                if kept.len() > 2 {
                    spare.extend(kept.pop_front().filter(|_| matrices.is_none()).map(take_buffers));
                }
            } else if matrices.is_none() {
                spare.push(take_buffers(c));
            }
            if rep == 0 {
                continue; // warm-up
            }
            synth_times.push(synth);
            prove_times.push(prove);
            for (i, s) in Stage::ALL.iter().enumerate() {
                stage_times[i].push(out.timings.get(*s));
            }
            if let Some(d) = out.device {
                device.add(&d);
            }
        }
        let (synth, prove) = (median(synth_times), median(prove_times));
        println!("  {:<18} {:>9.3} s", if matrices.is_some() { "witness synthesis" } else { "synthesis" }, synth.as_secs_f64());
        for (i, s) in Stage::ALL.iter().enumerate() {
            let m = median(stage_times[i].clone());
            if !m.is_zero() {
                println!("  {:<18} {:>9.3} s", s.name(), m.as_secs_f64());
            }
        }
        println!("  {:<18} {:>9.3} s", "prove (total)", prove.as_secs_f64());
        println!("  {:<18} {:>9.3} s", "synthesis + prove", (synth + prove).as_secs_f64());
        if device.held > Duration::ZERO {
            print_device(&device, args.reps);
        }
        if unverified {
            println!("  {} proofs timed, none verified (timing parameters)", args.reps + 1);
        } else {
            let altered = if shape.inputs > 1 { " and altered inputs were" } else { " was" };
            println!("  all {} proofs verified; a tampered proof{altered} rejected", args.reps + 1);
        }
        println!(
            "RESULT backend={} log_size={log} products={} synthesis_s={:.4} prove_s={:.4} total_s={:.4}",
            backend.name(),
            if matrices.is_some() { "pending" } else { "synthesis" },
            synth.as_secs_f64(),
            prove.as_secs_f64(),
            (synth + prove).as_secs_f64()
        );
        if args.back_to_back > 0 {
            back_to_back(args, &*backend, &params, (!unverified).then_some(&pvk), kept, log)?;
        }
    }
    Ok(())
}

/// `count` partitions on two threads, each proving its pre-made circuit again.
fn back_to_back(
    args: &BenchArgs,
    backend: &dyn ProvingBackend,
    params: &cuzk_groth16::ParameterSet,
    // None: timing parameters, nothing to verify against.
    pvk: Option<&PreparedVerifyingKey>,
    kept: VecDeque<SynthesizedCircuit>,
    log: u32,
) -> Result<()> {
    let count = args.back_to_back;
    let next = AtomicUsize::new(0);
    let device = Mutex::new(DeviceReport::default());
    // (prepare, upload) per partition: the work that should hide behind the other
    // thread's compute.
    let hidden = Mutex::new(Vec::new());
    let t = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = kept
            .into_iter()
            .enumerate()
            .map(|(w, mut c)| {
                let (next, device, hidden) = (&next, &device, &hidden);
                scope.spawn(move || -> Result<()> {
                    let mut rng = ChaCha20Rng::seed_from_u64(7000 + w as u64);
                    let inputs = c.input[1..].to_vec();
                    while next.fetch_add(1, Ordering::Relaxed) < count {
                        c.reuse_evaluations(backend)?;
                        let out = backend.prove(params, std::slice::from_mut(&mut c), &[ProofRandomness::random(&mut rng)])?;
                        if let Some(pvk) = pvk {
                            if !verify_proof(pvk, &out.proofs[0], &inputs)? {
                                bail!("2^{log}: a back-to-back proof failed verification");
                            }
                        }
                        if let Some(d) = out.device {
                            lock(device).add(&d);
                        }
                        let (p, u) = (out.timings.get(Stage::Prepare), out.timings.get(Stage::Upload));
                        lock(hidden).push((p, u));
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| anyhow::anyhow!("a back-to-back worker panicked"))??;
        }
        Ok(())
    })?;
    let wall = t.elapsed();
    let d = *lock(&device);
    // Steady state: from the first compute region's start to the last one's end (the
    // wall time adds the first partition's preparation, before the device has work).
    let steady = match (d.held_from, d.held_to) {
        (Some(a), Some(b)) => b.duration_since(a),
        _ => wall,
    };
    println!(
        "  back to back: {count} partitions in {:.3} s ({:.3} s each), two threads; device kernels {:.1} % of the wall time",
        wall.as_secs_f64(),
        wall.as_secs_f64() / count as f64,
        100.0 * d.busy.as_secs_f64() / wall.as_secs_f64()
    );
    println!(
        "  first compute start to last compute end: {:.3} s ({:.3} s per partition); device kernels {:.1} % of it",
        steady.as_secs_f64(),
        steady.as_secs_f64() / count as f64,
        100.0 * d.busy.as_secs_f64() / steady.as_secs_f64().max(1e-9)
    );
    print_device(&d, count);
    let hidden = hidden.into_inner().unwrap_or_else(|e| e.into_inner());
    if pvk.is_some() {
        println!("  all {count} back-to-back proofs verified");
    } else {
        println!("  {count} back-to-back proofs timed, none verified (timing parameters)");
    }
    println!(
        "  overlapped with the other thread's compute, medians: prepare {:.3} s, upload {:.3} s",
        median(hidden.iter().map(|h| h.0).collect()).as_secs_f64(),
        median(hidden.iter().map(|h| h.1).collect()).as_secs_f64()
    );
    println!(
        "RESULT_BACK_TO_BACK backend={} log_size={log} partitions={count} wall_s={:.4} per_partition_s={:.4} steady_s={:.4} kernel_share_steady={:.4}",
        backend.name(),
        wall.as_secs_f64(),
        wall.as_secs_f64() / count as f64,
        steady.as_secs_f64(),
        d.busy.as_secs_f64() / steady.as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// The verifier must reject the proof with C moved by G1's generator, and the proof
/// against inputs whose first value is changed.
fn rejects_tampering(pvk: &PreparedVerifyingKey, proof: &cuzk_groth16::Proof, inputs: &[cuzk_groth16::Scalar]) -> Result<()> {
    use group::{Curve, Group};
    let mut bad = *proof;
    bad.c = (cuzk_groth16::G1Projective::from(bad.c) + cuzk_groth16::G1Projective::generator()).to_affine();
    if verify_proof(pvk, &bad, inputs)? {
        bail!("a tampered proof verified");
    }
    if let Some(first) = inputs.first() {
        let mut altered = inputs.to_vec();
        altered[0] = *first + cuzk_groth16::Scalar::from(1u64);
        if verify_proof(pvk, proof, &altered)? {
            bail!("a proof verified against altered inputs");
        }
    }
    Ok(())
}
