//! The compiled path of `cuzk bench --input … --compiled DIR`: one partition's witness
//! by witness-only synthesis (on every core where the circuit splits), the circuit's
//! compiled matrices (read, or compiled now), and a, b, c as their sparse products
//! with the witness. Its results are fingerprinted so that full synthesis, run after
//! it (never beside it: at 32 GiB the two do not fit one 24 GiB host together), can
//! be compared value for value. With parameters, the same witness is also proven with
//! its a, b, c left pending for the backend (a GPU computes them on its device from
//! the compact witness), r = s = 0, for comparison with full synthesis's proof.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cuzk_filecoin::matrices::{load_or_compile, Provenance};
use cuzk_filecoin::reference::fingerprint;
use cuzk_filecoin::{Circuit, FilecoinJob};
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::{AuxBuffer, ParameterSet, Proof, ProofRandomness, ProvingBackend, Stage, SynthesizedCircuit, Witness};

use crate::bench::{new_buffers, print_proof_stages};
use crate::host::{measure, median, StepCost};
use crate::progress::{spinner, Bars};

/// What the compiled path produced, for the comparison with full synthesis.
pub struct CompiledRun {
    /// Fingerprints of the input and aux assignments, and of a, b, c.
    prints: [u64; 5],
    constraints: usize,
    witness: StepCost,
    /// Medians of [`WITNESS_PAIRS`] pairs: the witness synthesized into a fresh aux
    /// vector, then again into that one (as the engine's pool reuses them).
    witness_fresh: Median,
    witness_reused: Median,
    /// The circuit's own gadgets' witness-only synthesis, where the kind computes parts
    /// of its witness natively (checked equal).
    gadget_witness: Option<StepCost>,
    products: StepCost,
    matrices: Provenance,
    /// The proof with a, b, c pending (r = s = 0) and its RESULT fields.
    pub pending_proof: Option<(Proof, String)>,
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
            " compiled_matrices={} witness_wall_s={:.2} witness_core_s={} witness_peak_gb={} witness_fresh_median_wall_s={:.2} witness_fresh_median_core_s={:.2} witness_reused_median_wall_s={:.2} witness_reused_median_core_s={:.2} products_wall_s={:.2} products_core_s={}",
            match self.matrices {
                Provenance::Read => "read",
                Provenance::Compiled(_) => "compiled",
            },
            self.witness.wall.as_secs_f64(),
            self.witness.core_s(),
            self.witness.peak_rss.map_or("-".into(), |b| format!("{:.3}", b as f64 / 1e9)),
            self.witness_fresh.wall_s,
            self.witness_fresh.core_s,
            self.witness_reused.wall_s,
            self.witness_reused.core_s,
            self.products.wall.as_secs_f64(),
            self.products.core_s(),
        ) + &match &self.gadget_witness {
            Some(g) => format!(" gadget_witness_wall_s={:.2} gadget_witness_core_s={}", g.wall.as_secs_f64(), g.core_s()),
            None => String::new(),
        })
    }
}

/// Runs the compiled path on partition `k` with the matrices in `dir`; with `prove`,
/// also proves its witness with a, b, c pending on that backend and parameter set.
pub fn run(
    circuit: Circuit,
    job: &dyn FilecoinJob,
    k: usize,
    dir: &Path,
    domain: usize,
    prove: Option<(&dyn ProvingBackend, &ParameterSet)>,
) -> Result<CompiledRun> {
    let bars = Bars::new();
    let (matrices, loaded) = measure(|| load_or_compile(circuit, dir, &bars));
    bars.finish();
    let (matrices, provenance) = matrices?;
    println!(
        "  compiled matrices ({}): {} constraints, non-zeros A {} B {} C {}, {} distinct coefficients, {:.2} GB in memory ({:.2} bytes per non-zero); {}",
        match &provenance {
            Provenance::Read => "read".to_string(),
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
    let joined = cuzk_groth16::witness::joined_anyway();
    let (witness, witness_cost) = measure(|| job.witness(k, AuxBuffer::new(Some(matrices.num_aux))));
    sp.finish_and_clear();
    let witness = witness?;
    // Split kinds write their shares in place from the matrices' aux count; a layout that
    // did not hold was joined instead (and logged).
    let layout = if cuzk_groth16::witness::joined_anyway() > joined { "; its shares JOINED: the layout did not hold" } else { "" };
    println!("  witness-only synthesis ({} threads): {}{layout}", rayon::current_num_threads(), witness_cost.describe());
    let (witness, witness_fresh, witness_reused) = fresh_and_reused(job, k, matrices.num_aux, witness)?;
    // Where the kind computes parts of its witness natively, the circuit's own gadgets
    // in the same run: the reference for the time, and the values must be equal.
    let sp = spinner("witness-only synthesis with the circuit's gadgets");
    let (gadget, gadget_cost) = measure(|| job.gadget_witness(k));
    sp.finish_and_clear();
    let gadget_witness = match gadget {
        None => None,
        Some(gadget) => {
            if gadget? != witness {
                bail!("partition {k}: the native witness differs from the one the circuit's gadgets synthesize");
            }
            println!(
                "  witness-only synthesis with the circuit's gadgets ({} threads): {}; equal to the native witness",
                rayon::current_num_threads(),
                gadget_cost.describe()
            );
            Some(gadget_cost)
        }
    };
    let buffers = new_buffers(None, domain)?;
    let sp = spinner("a, b, c from the compiled matrices");
    let (synthesized, products) = measure(|| SynthesizedCircuit::from_matrices(&matrices, witness, buffers));
    sp.finish_and_clear();
    let synthesized = synthesized?;
    println!("  a, b, c as sparse products ({} threads): {}", rayon::current_num_threads(), products.describe());
    let prints = CompiledRun::fingerprints(&synthesized);
    let constraints = synthesized.num_constraints();
    let pending_proof = match prove {
        Some((backend, params)) => {
            let w = Witness { input: synthesized.input.clone(), aux: synthesized.aux.clone() };
            drop(synthesized);
            let (proof, mut fields, warm_wall) = prove_pending(backend, params, Arc::new(matrices), w)?;
            // One partition alone on a warm process: its witness, then its proof.
            let alone = witness_cost.wall.as_secs_f64() + warm_wall;
            println!("  one partition alone (warm): witness {:.2} s + proof {warm_wall:.2} s = {alone:.2} s", witness_cost.wall.as_secs_f64());
            fields += &format!(" alone_s={alone:.3}");
            Some((proof, fields))
        }
        None => None,
    };
    Ok(CompiledRun {
        prints,
        constraints,
        witness: witness_cost,
        witness_fresh,
        witness_reused,
        gadget_witness,
        products,
        matrices: provenance,
        pending_proof,
    })
}

/// Fresh and reused aux vectors timed in pairs, alternating: the witness synthesized
/// into a fresh vector, then again into that one. Three pairs at 32 GiB PoRep take
/// ~7 s on two cores.
const WITNESS_PAIRS: usize = 3;

/// The median wall time and CPU time of some runs of one step.
struct Median {
    wall_s: f64,
    core_s: f64,
}

impl Median {
    fn of(costs: &[StepCost]) -> Median {
        Median {
            wall_s: median(costs.iter().map(|c| c.wall.as_secs_f64()).collect()),
            core_s: median(costs.iter().map(|c| c.cpu.map_or(f64::NAN, |d| d.as_secs_f64())).collect()),
        }
    }
}

/// [`WITNESS_PAIRS`] pairs of partition `k`'s witness synthesis (`aux_len` values) into a
/// fresh aux vector and then into that one again, each checked equal to `first` (the
/// first fresh one, which is freed); the last witness and the medians (fresh, reused).
fn fresh_and_reused(job: &dyn FilecoinJob, k: usize, aux_len: usize, first: Witness) -> Result<(Witness, Median, Median)> {
    let (print, input) = (fingerprint(&first.aux), first.input.clone());
    let check = |w: &Witness, what: &str| {
        if fingerprint(&w.aux) != print || w.input != input {
            bail!("partition {k}: the witness synthesized into {what} differs from the first one");
        }
        Ok(())
    };
    let (mut fresh, mut reused) = (Vec::new(), Vec::new());
    let mut last = Some(first);
    let sp = spinner("witness-only synthesis into fresh and reused aux vectors");
    for _ in 0..WITNESS_PAIRS {
        // The previous vector is unmapped first, so that the fresh one is new memory.
        drop(last.take());
        let (w, cost) = measure(|| job.witness(k, AuxBuffer::new(Some(aux_len))));
        let w = w?;
        check(&w, "a fresh aux vector")?;
        fresh.push(cost);
        let (w, cost) = measure(|| job.witness(k, AuxBuffer::reusing(w.aux, Some(aux_len))));
        let w = w?;
        check(&w, "a reused aux vector")?;
        reused.push(cost);
        last = Some(w);
    }
    sp.finish_and_clear();
    let (fresh, reused) = (Median::of(&fresh), Median::of(&reused));
    println!(
        "  witness-only synthesis, medians of {WITNESS_PAIRS} pairs: into a fresh aux vector {:.2} s wall, {:.2} core-s; into the same vector again {:.2} s wall, {:.2} core-s; all equal",
        fresh.wall_s, fresh.core_s, reused.wall_s, reused.core_s
    );
    let last = last.context("no witness pair ran")?;
    Ok((last, fresh, reused))
}

/// Proves `w` with a, b, c left pending for `backend` (r = s = 0), twice: the
/// process's first proof with these matrices (they go onto the device), then a warm
/// one, which must give the same proof. The proof, its RESULT fields and the warm
/// proof's wall time.
fn prove_pending(backend: &dyn ProvingBackend, params: &ParameterSet, matrices: Arc<ConstraintMatrices>, w: Witness) -> Result<(Proof, String, f64)> {
    let mut fields = String::new();
    let mut proofs = Vec::new();
    let mut warm_wall = 0.0;
    for (run, key, w) in [("first", "pending", w.clone()), ("warm", "pending_warm", w)] {
        let mut c = [SynthesizedCircuit::with_pending_products(matrices.clone(), w).context("the witness does not fit the compiled matrices")?];
        let sp = spinner(&format!("proving with a, b, c pending on {} ({run})", backend.name()));
        let (out, cost) = measure(|| backend.prove(params, &mut c, &[ProofRandomness::zero()]));
        sp.finish_and_clear();
        let out = out?;
        println!("  prove with a, b, c pending ({run} proof; computed by {}; r = s = 0): {}", backend.name(), cost.describe());
        print_proof_stages(&out);
        fields += &format!(" {key}_prove_s={:.3} {key}_core_s={}", cost.wall.as_secs_f64(), cost.core_s());
        if let Some(d) = &out.device {
            fields += &format!(
                " {key}_held_s={:.3} {key}_kernels_s={:.3} {key}_products_s={:.3} {key}_gb_up={:.3}",
                d.held.as_secs_f64(),
                d.busy.as_secs_f64(),
                out.timings.get(Stage::Products).as_secs_f64(),
                d.bytes_up as f64 / 1e9
            );
        }
        warm_wall = cost.wall.as_secs_f64();
        proofs.push(*out.proofs.first().context("the backend returned no proof")?);
    }
    if proofs[0] != proofs[1] {
        bail!("the warm proof with a, b, c pending differs from the first (r = s = 0)");
    }
    Ok((proofs[0], fields, warm_wall))
}
