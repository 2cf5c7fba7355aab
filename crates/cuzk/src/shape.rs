//! Command-line description of a synthetic circuit.

use clap::Args;
use cuzk_groth16::synthetic::SyntheticShape;

/// Which synthetic circuit to use (defaults: the C2 witness model of the brief).
#[derive(Args, Clone, Debug)]
pub struct ShapeArgs {
    /// Domain size as a power of two: constraints + inputs = 2^LOG_SIZE.
    #[arg(long, default_value_t = 16, conflicts_with = "constraints")]
    pub log_size: u32,
    /// Exact number of constraints instead of --log-size (130278869 for a C2 partition).
    #[arg(long)]
    pub constraints: Option<usize>,
    /// Public inputs including the constant one (default 328, fewer for tiny domains).
    #[arg(long)]
    pub inputs: Option<usize>,
    /// Share of aux variables in the A query.
    #[arg(long, default_value_t = 0.997)]
    pub a_density: f64,
    /// Share of aux variables in the B query.
    #[arg(long, default_value_t = 0.254)]
    pub b_density: f64,
    /// Share of aux values that are neither 0 nor 1 (default: a real 32 GiB PoRep
    /// partition's).
    #[arg(long, default_value_t = cuzk_groth16::synthetic::C2_SIGNIFICANT)]
    pub significant: f64,
    /// Share of B-query aux values that are neither 0 nor 1 (default: as measured).
    #[arg(long, default_value_t = cuzk_groth16::synthetic::C2_SIGNIFICANT_IN_B)]
    pub significant_in_b: f64,
    /// Seed of the circuit's structure (which positions are which kind).
    #[arg(long, default_value_t = 0x00c2_5eed)]
    pub structure_seed: u64,
}

impl ShapeArgs {
    pub fn shape(&self) -> anyhow::Result<SyntheticShape> {
        if self.log_size > 27 {
            anyhow::bail!("--log-size {} is larger than a C2 partition (27)", self.log_size);
        }
        let mut s = SyntheticShape::for_domain(self.log_size);
        if let Some(c) = self.constraints {
            s.constraints = c;
            s.inputs = self.inputs.unwrap_or(cuzk_groth16::synthetic::C2_INPUTS);
        } else if let Some(i) = self.inputs {
            let n = 1usize << self.log_size;
            anyhow::ensure!(i >= 1 && i < n, "--inputs {i} must be between 1 and 2^{} − 1", self.log_size);
            s.inputs = i;
            s.constraints = n - i;
        }
        anyhow::ensure!(s.inputs >= 1, "--inputs must count the constant one (at least 1)");
        for (name, v) in [
            ("--a-density", self.a_density),
            ("--b-density", self.b_density),
            ("--significant", self.significant),
            ("--significant-in-b", self.significant_in_b),
        ] {
            anyhow::ensure!((0.0..=1.0).contains(&v), "{name} {v} is not a share between 0 and 1");
        }
        s.a_density = self.a_density;
        s.b_density = self.b_density;
        s.significant = self.significant;
        s.significant_in_b = self.significant_in_b;
        s.structure_seed = self.structure_seed;
        Ok(s)
    }
}
