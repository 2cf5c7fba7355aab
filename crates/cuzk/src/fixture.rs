//! `cuzk fixture`: synthetic inputs, written as Curio would send them (see
//! cuzk-filecoin's `shape_true`, `valid` and `request_files`), made in seconds instead of
//! a sealing. By default shape-true: the real structure of a kind at a sector size with
//! seeded random values, whose vanilla proofs do not verify, so only timing runs
//! (`--timing-only`) prove them. With `--valid`: consistent inputs whose vanilla proofs
//! filecoin-proofs accepts, proved in production mode and verified like a sealed
//! sector's.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use cuzk_filecoin::{CircuitKind, InputChecks, SectorSize};

/// A Filecoin kind by its command-line name ("porep", "snap", "window-post",
/// "winning-post"); `--help` lists them.
pub fn kind_parser() -> impl TypedValueParser<Value = CircuitKind> {
    PossibleValuesParser::new(CircuitKind::ALL.map(CircuitKind::cli_name))
        .try_map(|name| CircuitKind::from_cli_name(&name).ok_or_else(|| format!("{name:?} is not a Filecoin kind")))
}

#[derive(Args, Debug)]
pub struct FixtureArgs {
    /// The proof kind.
    #[arg(value_parser = kind_parser())]
    pub kind: CircuitKind,
    /// 2KiB, 8MiB, 512MiB, 32GiB or 64GiB (or the size in bytes).
    #[arg(long, value_parser = parse_sector_size)]
    pub sector_size: SectorSize,
    /// The folder to write: request.json and the payload files.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the random values.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Make a valid input (its vanilla proofs verify; checked before it is written)
    /// instead of a shape-true one.
    #[arg(long)]
    pub valid: bool,
}

pub fn parse_sector_size(s: &str) -> Result<SectorSize, String> {
    SectorSize::parse(s).ok_or_else(|| format!("{s:?} is not a Filecoin sector size (2KiB, 8MiB, 512MiB, 32GiB, 64GiB)"))
}

pub fn run(args: &FixtureArgs) -> Result<()> {
    let t = Instant::now();
    let kind = args.kind;
    let what = if args.valid { "valid" } else { "shape-true" };
    let made = if args.valid { kind.valid_request(args.sector_size, args.seed) } else { kind.shape_true_request(args.sector_size, args.seed) };
    let request = made.with_context(|| format!("making a {what} {kind:?} input at {}", args.sector_size))?;
    let made = t.elapsed();
    if args.valid {
        // filecoin-proofs' vanilla verification, as the daemon runs it on a request.
        request.decode(InputChecks::Full).with_context(|| format!("the {what} {kind:?} input at {} does not verify", args.sector_size))?;
    }
    let checked = t.elapsed() - made;
    request.write(&args.out)?;
    let bytes = request.request.vanilla_proof.len() + request.c1.len() + request.request.vanilla_proofs.iter().map(Vec::len).sum::<usize>();
    println!(
        "{what} {} input for {} (seed {}) in {}: {} payload file(s), {:.1} MB; made in {:.2} s{}, written in {:.2} s",
        request.kind().proof_kind_name(),
        request.circuit()?,
        args.seed,
        args.out.display(),
        request.request.vanilla_proofs.len() + usize::from(!request.request.vanilla_proof.is_empty()),
        bytes as f64 / 1e6,
        made.as_secs_f64(),
        if args.valid { format!(", vanilla proofs verified in {:.2} s", checked.as_secs_f64()) } else { String::new() },
        (t.elapsed() - made - checked).as_secs_f64()
    );
    if !args.valid {
        println!("its vanilla proofs do not verify: it is refused unless proved with --timing-only (daemon.timing_only)");
    }
    Ok(())
}
