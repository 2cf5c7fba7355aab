//! `cuzk fixture`: shape-true inputs, written as Curio would send them (see
//! cuzk-filecoin's `shape_true` and `request_files`): the real structure of a kind at
//! a sector size, seeded random values, made in seconds instead of a sealing. Their
//! vanilla proofs do not verify, so only timing runs (`--timing-only`) prove them.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use cuzk_filecoin::{shape_true, CircuitKind, SectorSize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FixtureKind {
    Porep,
    Snap,
    WindowPost,
    WinningPost,
}

impl FixtureKind {
    pub fn circuit_kind(self) -> CircuitKind {
        match self {
            FixtureKind::Porep => CircuitKind::Porep,
            FixtureKind::Snap => CircuitKind::Snap,
            FixtureKind::WindowPost => CircuitKind::WindowPost,
            FixtureKind::WinningPost => CircuitKind::WinningPost,
        }
    }
}

#[derive(Args, Debug)]
pub struct FixtureArgs {
    /// The proof kind.
    #[arg(value_enum)]
    pub kind: FixtureKind,
    /// 2KiB, 8MiB, 512MiB, 32GiB or 64GiB (or the size in bytes).
    #[arg(long, value_parser = parse_sector_size)]
    pub sector_size: SectorSize,
    /// The folder to write: request.json and the payload files.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the random values.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn parse_sector_size(s: &str) -> Result<SectorSize, String> {
    SectorSize::parse(s).ok_or_else(|| format!("{s:?} is not a Filecoin sector size (2KiB, 8MiB, 512MiB, 32GiB, 64GiB)"))
}

pub fn run(args: &FixtureArgs) -> Result<()> {
    let t = Instant::now();
    let kind = args.kind.circuit_kind();
    let request = shape_true::make(kind, args.sector_size, args.seed).with_context(|| format!("making a {kind:?} input at {}", args.sector_size))?;
    let made = t.elapsed();
    request.write(&args.out)?;
    let bytes = request.vanilla_proof.len() + request.c1.len() + request.vanilla_proofs.iter().map(Vec::len).sum::<usize>();
    println!(
        "shape-true {} input for {} (seed {}) in {}: {} payload file(s), {:.1} MB; made in {:.2} s, written in {:.2} s",
        request.fields.proof_kind,
        request.circuit()?,
        args.seed,
        args.out.display(),
        request.vanilla_proofs.len() + usize::from(!request.vanilla_proof.is_empty()),
        bytes as f64 / 1e6,
        made.as_secs_f64(),
        (t.elapsed() - made).as_secs_f64()
    );
    println!("its vanilla proofs do not verify: it is refused unless proved with --timing-only (daemon.timing_only)");
    Ok(())
}
