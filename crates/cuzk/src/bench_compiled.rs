//! The compiled path of `cuzk bench --input … --compiled DIR`: one partition's witness
//! by witness-only synthesis (on every core where the circuit splits), the circuit's
//! compiled matrices (mapped, or compiled now), and a, b, c as their sparse products
//! with the witness. Its results are fingerprinted so that full synthesis, run after
//! it (never beside it: at 32 GiB the two do not fit one 24 GiB host together), can
//! be compared value for value.

use std::path::Path;

use anyhow::{bail, Result};
use cuzk_filecoin::matrices::{load_or_compile, Provenance};
use cuzk_filecoin::reference::fingerprint;
use cuzk_filecoin::{Circuit, FilecoinJob};
use cuzk_groth16::SynthesizedCircuit;

use crate::bench::new_buffers;
use crate::host::{measure, StepCost};
use crate::progress::{spinner, Bars};

/// What the compiled path produced, for the comparison with full synthesis.
pub struct CompiledRun {
    /// Fingerprints of the input and aux assignments, and of a, b, c.
    prints: [u64; 5],
    constraints: usize,
    witness: StepCost,
    products: StepCost,
    matrices: Provenance,
}

impl CompiledRun {
    fn fingerprints(c: &SynthesizedCircuit) -> [u64; 5] {
        [fingerprint(&c.input), fingerprint(&c.aux), fingerprint(c.a.as_slice()), fingerprint(c.b.as_slice()), fingerprint(c.c.as_slice())]
    }

    /// Fails unless `full` (cuzk's full synthesis of the same partition) has the same
    /// assignment and a, b, c; returns the RESULT fields.
    pub fn check_against(&self, full: &SynthesizedCircuit) -> Result<String> {
        let names = ["inputs", "aux", "a", "b", "c"];
        let full_prints = Self::fingerprints(full);
        let differing: Vec<&str> = names.iter().zip(self.prints.iter().zip(&full_prints)).filter(|(_, (x, y))| x != y).map(|(n, _)| *n).collect();
        if self.constraints != full.num_constraints() || !differing.is_empty() {
            bail!("the compiled path differs from full synthesis: {differing:?} (constraints {} vs {})", self.constraints, full.num_constraints());
        }
        println!("  compiled path: inputs, aux, a, b and c equal full synthesis's");
        Ok(format!(
            " compiled_matrices={} witness_wall_s={:.2} witness_core_s={} witness_peak_gb={} products_wall_s={:.2} products_core_s={}",
            match self.matrices {
                Provenance::Mapped => "mapped",
                Provenance::Compiled(_) => "compiled",
            },
            self.witness.wall.as_secs_f64(),
            self.witness.cpu.map_or("-".into(), |c| format!("{:.2}", c.as_secs_f64())),
            self.witness.peak_rss.map_or("-".into(), |b| format!("{:.3}", b as f64 / 1e9)),
            self.products.wall.as_secs_f64(),
            self.products.cpu.map_or("-".into(), |c| format!("{:.2}", c.as_secs_f64())),
        ))
    }
}

/// Runs the compiled path on partition `k` with the matrices in `dir`.
pub fn run(circuit: Circuit, job: &dyn FilecoinJob, k: usize, dir: &Path, domain: usize) -> Result<CompiledRun> {
    let bars = Bars::new();
    let (matrices, loaded) = measure(|| load_or_compile(circuit, dir, &bars));
    bars.finish();
    let (matrices, provenance) = matrices?;
    println!(
        "  compiled matrices ({}): {} constraints, non-zeros A {} B {} C {}, {} distinct coefficients, {:.2} GB in memory ({:.2} bytes per non-zero); {}",
        match &provenance {
            Provenance::Mapped => "mapped".to_string(),
            Provenance::Compiled(why) => format!("compiled now: {why}"),
        },
        matrices.num_constraints(),
        matrices.a.non_zeros(),
        matrices.b.non_zeros(),
        matrices.c.non_zeros(),
        matrices.dictionary.len(),
        matrices.bytes() as f64 / 1e9,
        matrices.bytes() as f64 / matrices.non_zeros().max(1) as f64,
        loaded.describe()
    );
    let sp = spinner("witness-only synthesis");
    let (witness, witness_cost) = measure(|| job.witness(k));
    sp.finish_and_clear();
    let witness = witness?;
    println!("  witness-only synthesis ({} threads): {}", rayon::current_num_threads(), witness_cost.describe());
    let buffers = new_buffers(None, domain)?;
    let sp = spinner("a, b, c from the compiled matrices");
    let (synthesized, products) = measure(|| SynthesizedCircuit::from_matrices(&matrices, witness, buffers));
    sp.finish_and_clear();
    let synthesized = synthesized?;
    println!("  a, b, c as sparse products ({} threads): {}", rayon::current_num_threads(), products.describe());
    Ok(CompiledRun {
        prints: CompiledRun::fingerprints(&synthesized),
        constraints: synthesized.num_constraints(),
        witness: witness_cost,
        products,
        matrices: provenance,
    })
}
