//! `cuzk bench`: synthesis and per-stage proving times on synthetic circuits.
//!
//! Per size: one setup, one warm-up proof, then `--reps` timed proofs, each on a fresh
//! witness and each verified; medians are reported. The last line per size is a
//! `RESULT` line for scripts.
//!
//! With `--timing-params` the setup is replaced by a parameter set of random points of
//! the right shape (seconds instead of hours at full size): the proofs are timed but
//! cannot verify, so verification is skipped, and the output says so.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use cuzk_groth16::generator::{generate_parameters, timing_parameters};
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{synthesize, ProofRandomness, Stage};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::progress::Bars;
use crate::shape::ShapeArgs;
use crate::{backend, BackendKind};

#[derive(Args)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    backend: BackendKind,
    /// Domain sizes to run, as powers of two, comma-separated (overrides --log-size).
    #[arg(long, value_delimiter = ',')]
    log_sizes: Vec<u32>,
    /// Timed repetitions per size (after one warm-up).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Time with random parameter points of the circuit's shape instead of a real setup.
    /// The proofs are NOT valid and are not verified: for timing only.
    #[arg(long)]
    timing_params: bool,
    #[command(flatten)]
    shape: ShapeArgs,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn run(args: &BenchArgs) -> Result<()> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let sizes = if args.log_sizes.is_empty() { vec![args.shape.log_size] } else { args.log_sizes.clone() };
    let backend = backend(args.backend)?;
    println!("cuzk bench: backend {}, {} threads, {} timed reps after 1 warm-up", backend.name(), rayon::current_num_threads(), args.reps);
    for log in sizes {
        let mut shape_args = args.shape.clone();
        shape_args.log_size = log;
        let shape = shape_args.shape()?;
        // With --constraints the domain follows from the shape, not from --log-sizes.
        let log = shape.domain_size().trailing_zeros();
        let bars = Bars::new();
        let t = Instant::now();
        let mut setup_rng = ChaCha20Rng::seed_from_u64(log as u64);
        let params = if args.timing_params {
            let c = synthesize(shape.circuit(0)).context("synthesis failed")?;
            timing_parameters(&c, &mut setup_rng, &bars)
        } else {
            generate_parameters(shape.circuit(0), &mut setup_rng, &bars).context("setup failed")?
        };
        bars.finish();
        let setup = t.elapsed();
        let pvk = PreparedVerifyingKey::new(&params.vk);
        println!(
            "\n== 2^{log}: {} constraints, {} inputs; {} {:.2} s",
            shape.constraints,
            shape.inputs,
            if args.timing_params { "random timing parameters (proofs will NOT verify; verification skipped)" } else { "setup" },
            setup.as_secs_f64()
        );
        let mut rng = ChaCha20Rng::seed_from_u64(1000 + log as u64);
        let mut synth_times = Vec::new();
        let mut prove_times = Vec::new();
        let mut stage_times: Vec<Vec<Duration>> = vec![Vec::new(); Stage::ALL.len()];
        for rep in 0..=args.reps {
            let t = Instant::now();
            let mut circuits = vec![synthesize(shape.circuit(rep as u64 + 1)).context("synthesis failed")?];
            let synth = t.elapsed();
            let inputs = circuits[0].input[1..].to_vec();
            let t = Instant::now();
            let out = backend.prove(&params, &mut circuits, &[ProofRandomness::random(&mut rng)])?;
            let prove = t.elapsed();
            if !args.timing_params && !verify_proof(&pvk, &out.proofs[0], &inputs)? {
                bail!("2^{log}, rep {rep}: proof failed verification");
            }
            if rep == 0 {
                continue; // warm-up
            }
            synth_times.push(synth);
            prove_times.push(prove);
            for (i, s) in Stage::ALL.iter().enumerate() {
                stage_times[i].push(out.timings.get(*s));
            }
        }
        let (synth, prove) = (median(synth_times), median(prove_times));
        println!("  {:<18} {:>9.3} s", "synthesis", synth.as_secs_f64());
        for (i, s) in Stage::ALL.iter().enumerate() {
            let m = median(stage_times[i].clone());
            if !m.is_zero() {
                println!("  {:<18} {:>9.3} s", s.name(), m.as_secs_f64());
            }
        }
        println!("  {:<18} {:>9.3} s", "prove (total)", prove.as_secs_f64());
        println!("  {:<18} {:>9.3} s", "synthesis + prove", (synth + prove).as_secs_f64());
        if args.timing_params {
            println!("  {} proofs timed, none verified (random timing parameters)", args.reps + 1);
        } else {
            println!("  all {} proofs verified", args.reps + 1);
        }
        println!(
            "RESULT backend={} log_size={log} synthesis_s={:.4} prove_s={:.4} total_s={:.4}",
            backend.name(),
            synth.as_secs_f64(),
            prove.as_secs_f64(),
            (synth + prove).as_secs_f64()
        );
    }
    Ok(())
}
