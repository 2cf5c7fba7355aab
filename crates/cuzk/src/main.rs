//! `cuzk`: the command-line front of the cuzk Groth16 engine.

mod backends;
mod bench;
mod bench_compiled;
mod bench_filecoin;
mod check_config;
mod circuits;
mod compile;
mod config_file;
mod daemon;
mod descriptors;
mod fixture;
mod gpu_bench;
mod host;
mod log_limit;
mod memory;
mod params;
mod progress;
mod selftest;
mod shape;
mod submit;
mod timeline;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use cuzk_groth16::format::{read_vk, save, PointCheck};
use cuzk_groth16::generator::{generate_parameters_with, ToxicWaste};
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{synthesize, ProofRandomness, Scalar, Stage};
use ff::PrimeField;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::backends::{backend, backend_on, fixed_base_on, gpu_for, read_params_for, BackendKind};
use crate::progress::{spinner, Bars};
use crate::shape::ShapeArgs;

#[derive(Parser)]
#[command(name = "cuzk", version, about = "Groth16 proving engine for Filecoin (BLS12-381)")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Set up, prove and verify a synthetic C2-shaped circuit (default 2^16), with timings.
    Demo {
        #[command(flatten)]
        shape: ShapeArgs,
        #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
        backend: BackendKind,
    },
    /// Generate parameters (.params and .vk) for a synthetic circuit, or with --circuit
    /// for a Filecoin circuit.
    Setup {
        #[command(flatten)]
        shape: ShapeArgs,
        /// A Filecoin circuit id (porep-32g, wpost-2k, …) instead of a synthetic circuit:
        /// --out is then a parameter directory and the files get filecoin-proofs' names.
        #[arg(long, value_parser = parse_circuit_id)]
        circuit: Option<cuzk_filecoin::Circuit>,
        /// Output .params path (with --circuit: the parameter directory); the .vk is
        /// written beside it.
        #[arg(long)]
        out: PathBuf,
        /// Seed for the toxic waste (only for reproducible test fixtures; default: OS randomness).
        #[arg(long)]
        seed: Option<u64>,
        /// Write random points of the circuit's shape instead of a real setup: a file for
        /// timing provers on (`cuzk bench --params`); proofs made with it do NOT verify.
        #[arg(long)]
        timing_params: bool,
        /// Where the fixed-base multiplications run: a GPU when there is one (auto).
        #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
        backend: BackendKind,
        /// With --circuit --timing-params: take the circuit's counts from this `cuzk
        /// circuits --json` file instead of counting its blank circuit again (minutes).
        #[arg(long, requires = "circuit", requires = "timing_params")]
        shapes: Option<PathBuf>,
        /// With --circuit: replace existing parameter files (never the default: the
        /// names are those of the real files).
        #[arg(long, requires = "circuit")]
        force: bool,
        /// With --circuit (a real setup): where the circuit's compiled matrices are read,
        /// or compiled and written when missing (default: the parameter directory). The
        /// setup is made from them, a batch of points at a time, in bounded memory.
        #[arg(long, requires = "circuit", conflicts_with = "timing_params")]
        matrices: Option<PathBuf>,
    },
    /// Prove a synthetic circuit instance with a parameter file; the proof is verified before it is written.
    Prove {
        #[command(flatten)]
        shape: ShapeArgs,
        #[arg(long)]
        params: PathBuf,
        /// Seed of the witness (which instance of the circuit).
        #[arg(long, default_value_t = 1)]
        witness_seed: u64,
        /// Proof output (192 bytes); public inputs go to <out>.inputs (hex, one per line).
        #[arg(long)]
        out: PathBuf,
        #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
        backend: BackendKind,
        /// Check that every parameter point is in the prime-order subgroup (slow).
        #[arg(long)]
        check_subgroup: bool,
    },
    /// Verify a proof against a .vk file and public inputs.
    Verify {
        #[arg(long)]
        vk: PathBuf,
        #[arg(long)]
        proof: PathBuf,
        /// Public inputs, one hex scalar per line (default: <proof>.inputs).
        #[arg(long)]
        inputs: Option<PathBuf>,
    },
    /// Time synthesis and each proving stage on synthetic circuits.
    Bench(bench::BenchArgs),
    /// Time NTTs and the H polynomial (against the copy bandwidth) and G1 MSMs on a GPU, checked against the CPU.
    GpuBench(gpu_bench::GpuBenchArgs),
    /// Before a host goes into production: prove a valid synthetic sector of each
    /// circuit (default porep-32g) with the parameters in the cache, as the daemon
    /// would on this host's GPUs, and check the proof with filecoin-proofs' verifier.
    Selftest(selftest::SelftestArgs),
    /// Show the backends and devices this build can use.
    Info,
    /// Serve the cuzk.v1 gRPC API (Curio's proving client) until SIGINT/SIGTERM.
    Daemon(daemon::DaemonArgs),
    /// Turn a daemon run's events into a Chrome trace and an SVG Gantt chart; print the GPU efficiency.
    Timeline(timeline::TimelineArgs),
    /// Submit jobs (synthetic, or a request folder) to a running daemon over gRPC and report their times.
    Submit(submit::SubmitArgs),
    /// Write a shape-true input (the real structure of a kind at a sector size, random values), as Curio would send it.
    Fixture(fixture::FixtureArgs),
    /// Count every Filecoin circuit: constraints, variables, query lengths, parameter file size.
    Circuits(circuits::CircuitsArgs),
    /// Check a parameter directory: every file the circuits need, against the published digests.
    Params(params::ParamsArgs),
    /// Record circuits' constraint matrices ahead of time, beside the parameter files.
    Compile(compile::CompileArgs),
}

fn parse_circuit_id(id: &str) -> Result<cuzk_filecoin::Circuit, String> {
    circuits::parse_circuit(id).map_err(|e| e.to_string())
}

/// Logging to stderr at `default_level` (RUST_LOG wins), library lines held to
/// [`log_limit::LIBRARY_LINES_PER_SECOND`].
fn init_logging(default_level: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{filter::FilterExt, EnvFilter, Layer};
    let level = EnvFilter::try_from_default_env().unwrap_or_else(|_| default_level.into());
    let limit: &'static log_limit::LibraryLogLimit = &log_limit::LIMIT;
    tracing_subscriber::registry().with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(level.and(limit))).init();
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Daemon(args)) = &cli.command {
        // The configuration names the log level (RUST_LOG still wins).
        let (config, warnings) = daemon::load_config(args)?;
        if args.check_config {
            init_logging("warn");
            return check_config::run(&config, &warnings, args.config.as_deref());
        }
        init_logging(&config.log_level);
        return daemon::run(config, warnings, args.config.as_deref());
    }
    // The selftest prints its own report; the engine's and filecoin-proofs' steps are
    // shown only when they warn (RUST_LOG shows more).
    init_logging(if matches!(cli.command, Some(Command::Selftest(_))) { "warn" } else { "info" });
    match cli.command {
        None => demo(&ShapeArgs::default_demo(), BackendKind::Auto),
        Some(Command::Demo { shape, backend }) => demo(&shape, backend),
        Some(Command::Setup { circuit: Some(circuit), out, seed, timing_params, backend, shapes, force, matrices, .. }) => {
            setup_filecoin(circuit, &out, seed, timing_params, backend, shapes.as_deref(), matrices.as_deref(), force)
        }
        Some(Command::Setup { shape, circuit: None, out, seed, timing_params, backend, .. }) => setup(&shape, &out, seed, timing_params, backend),
        Some(Command::Prove { shape, params, witness_seed, out, backend, check_subgroup }) => {
            prove(&shape, &params, witness_seed, &out, backend, check_subgroup)
        }
        Some(Command::Verify { vk, proof, inputs }) => verify(&vk, &proof, inputs.as_deref()),
        Some(Command::Bench(args)) if args.input.is_some() => bench_filecoin::run(&args),
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::GpuBench(args)) => gpu_bench::run(&args),
        Some(Command::Selftest(args)) => selftest::run(&args),
        Some(Command::Info) => info(),
        Some(Command::Timeline(args)) => timeline::run(&args),
        Some(Command::Submit(args)) => submit::run(&args),
        Some(Command::Fixture(args)) => fixture::run(&args),
        Some(Command::Circuits(args)) => circuits::run(&args),
        Some(Command::Params(args)) => params::run(&args),
        Some(Command::Compile(args)) => compile::run(&args),
        Some(Command::Daemon(_)) => unreachable!("handled above"),
    }
}

impl ShapeArgs {
    fn default_demo() -> Self {
        // Parsing an empty command line gives every default.
        #[derive(Parser)]
        struct Defaults {
            #[command(flatten)]
            shape: ShapeArgs,
        }
        Defaults::parse_from(["cuzk"]).shape
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn demo(shape_args: &ShapeArgs, kind: BackendKind) -> Result<()> {
    let shape = shape_args.shape()?;
    let (backend, gpu) = backend_on(kind)?;
    println!(
        "cuzk demo: synthetic C2-shaped circuit, {} constraints, {} inputs, domain 2^{}, backend {}",
        shape.constraints,
        shape.inputs,
        shape.domain_size().trailing_zeros(),
        backend.name()
    );
    let bars = Bars::new();
    let t = Instant::now();
    let mul = fixed_base_on(gpu.as_ref())?;
    let tw = ToxicWaste::random(&mut rand::rngs::OsRng);
    let params = generate_parameters_with(shape.circuit(0), &tw, mul.as_ref(), &bars).context("setup failed")?;
    bars.finish();
    let setup_time = t.elapsed();

    let sp = spinner("synthesizing");
    let t = Instant::now();
    let mut circuits = vec![synthesize(shape.circuit(rand::random())).context("synthesis failed")?];
    let synth_time = t.elapsed();
    sp.finish_and_clear();
    let inputs = circuits[0].input[1..].to_vec();
    let (z, o, s) = circuits[0].aux_classes.counts();

    let sp = spinner("proving");
    let t = Instant::now();
    let out = backend.prove(&params, &mut circuits, &[ProofRandomness::random(&mut rand::rngs::OsRng)])?;
    let prove_time = t.elapsed();
    sp.finish_and_clear();

    let t = Instant::now();
    let pvk = PreparedVerifyingKey::new(&params.vk);
    let ok = verify_proof(&pvk, &out.proofs[0], &inputs)?;
    let verify_time = t.elapsed();
    if !ok {
        bail!("the proof did not verify");
    }
    println!("aux values: {z} zero, {o} one, {s} significant");
    println!("{:<18} {:>10}", "setup", secs(setup_time));
    println!("{:<18} {:>10}", "synthesis", secs(synth_time));
    println!("{:<18} {:>10}", "prove", secs(prove_time));
    for stage in Stage::ALL {
        let d = out.timings.get(stage);
        if !d.is_zero() {
            println!("  {:<16} {:>10}", stage.name(), secs(d));
        }
    }
    println!("{:<18} {:>10}", "verify", secs(verify_time));
    println!("proof ({} bytes) verified: OK", out.proofs[0].to_bytes().len());
    Ok(())
}

fn setup(shape_args: &ShapeArgs, out: &Path, seed: Option<u64>, timing_params: bool, kind: BackendKind) -> Result<()> {
    let shape = shape_args.shape()?;
    let bars = Bars::new();
    let t = Instant::now();
    let mut rng: Box<dyn rand::RngCore> = match seed {
        Some(s) => Box::new(ChaCha20Rng::seed_from_u64(s)),
        None => Box::new(rand::rngs::OsRng),
    };
    let params = if timing_params {
        let c = synthesize(shape.circuit(0)).context("synthesis failed")?;
        println!("random timing parameters: proofs made with this file will NOT verify");
        cuzk_groth16::generator::timing_parameters(&c, &mut rng, &bars)
    } else {
        let mul = fixed_base_on(gpu_for(kind)?.as_ref())?;
        generate_parameters_with(shape.circuit(0), &ToxicWaste::random(&mut rng), mul.as_ref(), &bars).context("setup failed")?
    };
    bars.finish();
    save(&params, out)?;
    println!(
        "wrote {} and {} ({:.1} MB of points, domain 2^{}) in {}",
        out.display(),
        out.with_extension("vk").display(),
        params.size_bytes() as f64 / 1e6,
        params.domain_size().trailing_zeros(),
        secs(t.elapsed())
    );
    Ok(())
}

/// A Filecoin circuit's parameters in the directory `dir`, under filecoin-proofs' names:
/// cuzk's own setup from the circuit's compiled matrices (any size; these parameters
/// verify against their own .vk only), or random points of the real query lengths for
/// timing.
#[allow(clippy::too_many_arguments)]
fn setup_filecoin(
    circuit: cuzk_filecoin::Circuit,
    dir: &Path,
    seed: Option<u64>,
    timing_params: bool,
    kind: BackendKind,
    shapes: Option<&Path>,
    matrices: Option<&Path>,
    force: bool,
) -> Result<()> {
    let mut rng: Box<dyn rand::RngCore> = match seed {
        Some(s) => Box::new(ChaCha20Rng::seed_from_u64(s)),
        None => Box::new(rand::rngs::OsRng),
    };
    let path = circuit.params_path(dir)?;
    // The files get the real parameters' names: pointed at a parameter directory by
    // mistake, this must not replace them.
    for p in [path.clone(), circuit.vk_path(dir)?] {
        if p.exists() && !force {
            bail!("{} exists: not replacing it (these are the names of {circuit}'s real parameter files; --force replaces them)", p.display());
        }
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let t = Instant::now();
    let bars = Bars::new();
    let (q, inputs) = if timing_params {
        let (shape, from) = match shapes {
            Some(file) => (circuits::shape_from_file(file, circuit)?, format!("counts read from {}", file.display())),
            None => {
                let sp = spinner(&format!("counting the blank circuit of {circuit}"));
                let shape = cuzk_filecoin::setup::blank_shape(circuit)?;
                sp.finish_and_clear();
                (shape, format!("blank circuit counted in {}", secs(t.elapsed())))
            }
        };
        println!(
            "{circuit}: {from}: {} constraints, {} aux; writing random timing points: proofs made with this file will NOT verify",
            shape.constraints, shape.aux
        );
        cuzk_groth16::generator::write_timing_params(&shape, &path, &mut rng, &bars).with_context(|| format!("writing {}", path.display()))?;
        (shape.query_lens(), shape.inputs)
    } else {
        let mul = fixed_base_on(gpu_for(kind)?.as_ref())?;
        let mdir = matrices.unwrap_or(dir);
        let (m, provenance) = cuzk_filecoin::matrices::load_or_compile(circuit, mdir, &bars)?;
        println!(
            "{circuit}: compiled matrices {} ({} constraints, {} inputs, {} aux) in {}; a real setup from them, the points made on {}",
            match provenance {
                cuzk_filecoin::matrices::Provenance::Read => format!("read from {}", mdir.display()),
                cuzk_filecoin::matrices::Provenance::Compiled(why) => format!("compiled ({why}) and written to {}", mdir.display()),
            },
            m.num_constraints(),
            m.num_inputs,
            m.num_aux,
            secs(t.elapsed()),
            mul.name()
        );
        let tw = ToxicWaste::random(&mut rng);
        let w = cuzk_groth16::streamed_setup::write_parameters_from_matrices(&m, &tw, mul.as_ref(), &path, &bars)
            .with_context(|| format!("the setup of {circuit}"))?;
        // Filecoin's names, our own points: recorded so every check says so.
        let vk_path = circuit.vk_path(dir)?;
        cuzk_filecoin::param_check::DigestTable::record_own(dir, &[&path, &vk_path], &bars)?;
        (w.lens, w.vk.ic.len())
    };
    bars.finish();
    if !timing_params {
        println!(
            "a setup of our own, recorded in {} as such: proofs made with it verify against its .vk only, never on chain",
            dir.join(cuzk_filecoin::param_check::OWN_SETUPS_FILE).display()
        );
    }
    println!(
        "wrote {} and its .vk in {}: {inputs} inputs; queries h {}, l {}, a {}, b_g1 {}, b_g2 {}; {} bytes",
        path.display(),
        secs(t.elapsed()),
        q.h,
        q.l,
        q.a,
        q.b_g1,
        q.b_g2,
        fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
    );
    Ok(())
}

fn prove(shape_args: &ShapeArgs, params_path: &Path, witness_seed: u64, out: &Path, kind: BackendKind, check_subgroup: bool) -> Result<()> {
    let shape = shape_args.shape()?;
    let check = if check_subgroup { PointCheck::Subgroup } else { PointCheck::OnCurve };
    let backend = backend(kind)?;
    let bars = Bars::new();
    let params = read_params_for(backend.as_ref(), params_path, check, &bars)?;
    bars.finish();
    let mut circuits = vec![synthesize(shape.circuit(witness_seed)).context("synthesis failed")?];
    let inputs = circuits[0].input[1..].to_vec();
    params.check_shape(&circuits[0]).with_context(|| format!("{} does not fit this circuit", params_path.display()))?;
    let t = Instant::now();
    let proofs = backend.prove(&params, &mut circuits, &[ProofRandomness::random(&mut rand::rngs::OsRng)])?.proofs;
    let prove_time = t.elapsed();
    if !verify_proof(&PreparedVerifyingKey::new(&params.vk), &proofs[0], &inputs)? {
        bail!("the proof failed verification; nothing written");
    }
    fs::write(out, proofs[0].to_bytes()).with_context(|| format!("writing {}", out.display()))?;
    let inputs_path = inputs_path(out);
    let text: String = inputs.iter().map(|x| format!("{}\n", hex(&x.to_repr()))).collect();
    fs::write(&inputs_path, text).with_context(|| format!("writing {}", inputs_path.display()))?;
    println!("proved in {}; wrote {} and {}", secs(prove_time), out.display(), inputs_path.display());
    Ok(())
}

fn inputs_path(proof: &Path) -> PathBuf {
    let mut s = proof.as_os_str().to_owned();
    s.push(".inputs");
    PathBuf::from(s)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_scalar(line: &str, n: usize) -> Result<Scalar> {
    let line = line.trim();
    if line.len() != 64 || !line.is_ascii() {
        bail!("input {n}: expected 64 hex digits (32 little-endian bytes), got {line:?}");
    }
    let mut repr = [0u8; 32];
    for (i, b) in repr.iter_mut().enumerate() {
        *b = u8::from_str_radix(&line[2 * i..2 * i + 2], 16).with_context(|| format!("input {n}: not hex: {line:?}"))?;
    }
    Option::from(Scalar::from_repr(repr)).with_context(|| format!("input {n}: not a canonical field element"))
}

fn verify(vk_path: &Path, proof_path: &Path, inputs: Option<&Path>) -> Result<()> {
    let vk = read_vk(vk_path, PointCheck::Subgroup)?;
    let bytes = fs::read(proof_path).with_context(|| format!("reading {}", proof_path.display()))?;
    let proof = cuzk_groth16::Proof::from_bytes(&bytes).with_context(|| format!("{}", proof_path.display()))?;
    let inputs_path = inputs.map(Path::to_owned).unwrap_or_else(|| inputs_path(proof_path));
    let text = fs::read_to_string(&inputs_path).with_context(|| format!("reading {}", inputs_path.display()))?;
    let inputs = text.lines().filter(|l| !l.trim().is_empty()).enumerate().map(|(i, l)| parse_scalar(l, i)).collect::<Result<Vec<_>>>()?;
    if verify_proof(&PreparedVerifyingKey::new(&vk), &proof, &inputs)? {
        println!("proof is valid");
        Ok(())
    } else {
        bail!("proof is NOT valid for these public inputs and verifying key")
    }
}

fn info() -> Result<()> {
    println!("cuzk {}", env!("CARGO_PKG_VERSION"));
    println!("cpu backend: available, {} threads", rayon::current_num_threads());
    if cuzk_cuda::kernels_built() {
        // build.rs adds compute_90 PTX to the machine code it lists.
        println!("cuda kernels: built for {} (+ compute_90 PTX, compiled by the driver for newer GPUs)", cuzk_cuda::built_architectures());
    } else {
        println!("cuda kernels: not built (no nvcc at build time; scripts/install-cuda-toolchain.sh installs one)");
    }
    // What proves here: the usable GPUs (the daemon takes all of them unless
    // gpus.devices names some; the other commands with `--backend auto` take GPU 0),
    // else the CPU.
    let backend = match cuzk_cuda::probe() {
        Ok(devices) => {
            for d in &devices {
                println!(
                    "gpu {}: {}, {:.1} GiB ({:.1} GiB free)",
                    d.ordinal,
                    d.name,
                    d.total_memory as f64 / (1u64 << 30) as f64,
                    d.free_memory as f64 / (1u64 << 30) as f64
                );
            }
            format!("cuda on {} usable GPU(s) (the daemon: those gpus.devices names, all when empty; other commands: GPU 0)", devices.len())
        }
        Err(why) => {
            println!("gpus: none usable ({why})");
            format!("cpu (no usable GPU: {why})")
        }
    };
    println!("proving backend: {backend}");
    Ok(())
}
