//! `cuzk bench --input DIR`: a Filecoin request's partitions measured one at a time —
//! the circuit counted (against the published constraint count), synthesized by cuzk
//! (wall time, core-seconds, peak resident memory, the witness's zeros / ones / other
//! values per query), its public inputs checked against the verifier's, proved on the
//! backend where parameters are given (per stage, device time, PCIe bytes), and the same
//! partition synthesized by bellperson 0.27's prover and its witness-only constraint
//! system in the same run, the witness compared with cuzk's.
//!
//! Shape-true inputs (`cuzk fixture`) need `--timing-only`: their vanilla proofs are
//! not checked and their proofs cannot verify. Partitions run one after another, so
//! the peaks are one partition's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cuzk_filecoin::reference::{fingerprint, ReferenceSynthesis};
use cuzk_filecoin::request_files::RequestFiles;
use cuzk_filecoin::{Circuit, FilecoinJob, InputChecks};
use cuzk_groth16::format::PointCheck;
use cuzk_groth16::shape::CircuitShape;
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{ParameterSet, ProofRandomness, ProvingBackend, SynthesizedCircuit};
use rand::SeedableRng;

use crate::backends::backend_planned;
use crate::bench::{new_buffers, planned, print_proof_stages, BenchArgs};
use crate::host::{measure, StepCost};
use crate::progress::{spinner, Bars};

/// `cuzk bench --input DIR`: a Filecoin request's partitions.
pub fn run(args: &BenchArgs) -> Result<()> {
    let Some(input) = &args.input else { anyhow::bail!("--input names the request folder to time") };
    if args.reps == 0 {
        anyhow::bail!("--reps must be at least 1");
    }
    if args.timing_params || args.back_to_back > 0 {
        anyhow::bail!("--input times the request's own circuit: --timing-params and --back-to-back are for synthetic circuits");
    }
    let (overrides, limit) = planned(args);
    let (backend, gpu) = backend_planned(args.backend, overrides, limit)?;
    FilecoinBench {
        input,
        circuit: args.circuit.as_deref(),
        partitions: &args.partitions,
        timing_only: args.timing_only,
        reference: !args.no_reference,
        params: args.params.as_deref(),
        param_dir: args.param_dir.as_deref(),
        compiled: args.compiled.as_deref(),
        backend: backend.as_ref(),
        gpu: gpu.as_ref(),
    }
    .run()
}

/// What `cuzk bench --input` was asked.
pub struct FilecoinBench<'a> {
    pub input: &'a Path,
    pub circuit: Option<&'a str>,
    pub partitions: &'a [usize],
    pub timing_only: bool,
    pub reference: bool,
    /// Parameters to prove with: a file, or the Filecoin parameter directory.
    pub params: Option<&'a Path>,
    pub param_dir: Option<&'a Path>,
    /// Where the compiled matrices are (or go): time the compiled path too.
    pub compiled: Option<&'a Path>,
    pub backend: &'a dyn ProvingBackend,
    pub gpu: Option<&'a Arc<cuzk_cuda::Gpu>>,
}

fn pct(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// "zeros 51.30 %, ones 47.40 %, other 1.31 % of 130169893".
fn shares((z, o, s): (usize, usize, usize)) -> String {
    let n = z + o + s;
    format!("zeros {:.2} %, ones {:.2} %, other {:.3} % of {n}", pct(z, n), pct(o, n), pct(s, n))
}

fn gb(b: Option<u64>) -> String {
    b.map_or("-".into(), |b| format!("{:.3}", b as f64 / 1e9))
}

impl FilecoinBench<'_> {
    pub fn run(&self) -> Result<()> {
        let request = RequestFiles::read(self.input)?;
        let circuit = request.circuit()?;
        if let Some(id) = self.circuit {
            if id != circuit.id() {
                bail!("--circuit {id}: the request in {} is for {circuit}", self.input.display());
            }
        }
        let checks = if self.timing_only { InputChecks::TimingOnly } else { InputChecks::Full };
        let sp = spinner(&format!("decoding the {circuit} request"));
        let (job, decoded) = measure(|| request.decode(checks));
        sp.finish_and_clear();
        let job = job.map_err(|e| {
            let hint = if request.shape_true_seed.is_some() && !self.timing_only { " (a shape-true input: add --timing-only)" } else { "" };
            anyhow::anyhow!("{}: {e}{hint}", self.input.display())
        })?;
        println!(
            "cuzk bench --input {}: {} ({circuit}), {} partition(s); decoded {}; backend {}, {} threads",
            self.input.display(),
            job.describe(),
            job.partitions(),
            if self.timing_only { "WITHOUT checking the vanilla proofs (timing only)" } else { "and its vanilla proofs checked" },
            self.backend.name(),
            rayon::current_num_threads()
        );
        println!("  decode: {}", decoded.describe());
        let partitions = if self.partitions.is_empty() { vec![0] } else { self.partitions.to_vec() };
        if let Some(k) = partitions.iter().find(|&&k| k >= job.partitions()) {
            bail!("--partitions {k}: the request has {} partitions", job.partitions());
        }
        let params = self.load_params(circuit)?;
        for &k in &partitions {
            self.partition(circuit, job.as_ref(), k, params.as_ref())?;
        }
        Ok(())
    }

    fn load_params(&self, circuit: Circuit) -> Result<Option<(ParameterSet, PreparedVerifyingKey)>> {
        let path: PathBuf = match (self.params, self.param_dir) {
            (Some(p), _) => p.to_owned(),
            (None, Some(dir)) => circuit.params_path(dir)?,
            (None, None) => return Ok(None),
        };
        let bars = Bars::new();
        let (p, cost) = measure(|| crate::backends::read_params_for(self.backend, &path, PointCheck::OnCurve, &bars));
        bars.finish();
        let p = p?;
        println!(
            "  parameters {} ({:.2} GB of points{}) read in {}",
            path.display(),
            p.points_bytes() as f64 / 1e9,
            if p.vk.is_timing_only() { "; TIMING parameters: random points, proofs cannot verify" } else { "" },
            cost.describe()
        );
        let pvk = PreparedVerifyingKey::new(&p.vk);
        Ok(Some((p, pvk)))
    }

    fn partition(&self, circuit: Circuit, job: &dyn FilecoinJob, k: usize, params: Option<&(ParameterSet, PreparedVerifyingKey)>) -> Result<()> {
        println!("\n== {circuit} partition {k}");
        let sp = spinner("counting the circuit");
        let (shape, counted) = measure(|| job.shape(k));
        sp.finish_and_clear();
        let shape = shape?;
        let published = match circuit.published_constraints() {
            Some(p) => {
                let ours = if p.with_input_constraints { shape.constraints } else { shape.constraints - shape.inputs };
                let what = if p.with_input_constraints { "with the input constraints" } else { "without the input constraints" };
                format!("{ours} {what}; published {}: {}", p.constraints, if ours == p.constraints { "equal" } else { "DIFFERENT" })
            }
            None => "no published count".into(),
        };
        println!(
            "  count: {} constraints ({published}), {} inputs, {} aux; A {} aux, B {} inputs + {} aux; {}",
            shape.constraints,
            shape.inputs,
            shape.aux,
            shape.a_aux,
            shape.b_inputs,
            shape.b_aux,
            counted.describe()
        );

        // The compiled path first, and dropped before full synthesis runs.
        let compiled = match self.compiled {
            Some(dir) => Some(crate::bench_compiled::run(circuit, job, k, dir, shape.domain_size(), params.map(|(p, _)| (self.backend, p)))?),
            None => None,
        };

        // cuzk's synthesis into buffers of the domain's size (pinned on a GPU), as the
        // engine gives it.
        let buffers = new_buffers(self.gpu, shape.domain_size())?;
        let sp = spinner("synthesizing (cuzk)");
        let (synthesized, cuzk) = measure(|| job.synthesize(k, buffers));
        sp.finish_and_clear();
        let mut synthesized = synthesized?;
        if CircuitShape::of(&synthesized) != shape {
            bail!("partition {k}: the synthesized circuit's shape differs from its count");
        }
        println!("  cuzk synthesis: {}", cuzk.describe());
        let classes = &synthesized.aux_classes;
        let (l, a, b) = (classes.counts(), classes.counts_within(&synthesized.a_aux_density), classes.counts_within(&synthesized.b_aux_density));
        println!("  witness, L (all aux): {}", shares(l));
        println!("  witness, A (aux in A): {}", shares(a));
        println!("  witness, B (aux in B): {}", shares(b));
        let inputs = job.public_inputs(k)?;
        if synthesized.input[1..] != inputs[..] {
            bail!("partition {k}: the circuit's public inputs differ from the verifier's");
        }
        println!("  public inputs: the circuit's {} equal the verifier's", inputs.len());
        let compiled_fields = match &compiled {
            Some(run) => run.check_against(&synthesized)?,
            None => String::new(),
        };
        let ours = fingerprint(&synthesized.aux);
        let same_proof = match (compiled.as_ref().and_then(|c| c.pending_proof.as_ref()), params) {
            (Some((pending, fields)), Some((p, _))) => self.same_proof_as(*pending, p, &mut synthesized)? + fields,
            _ => String::new(),
        };

        let proved = match params {
            Some((p, pvk)) => Some(self.prove(job, k, p, pvk, &mut synthesized, &inputs)?),
            None => None,
        };
        drop(synthesized);

        let (mut prover, mut witness) = (None, None);
        if self.reference {
            let sp = spinner("synthesizing (bellperson 0.27, its prover)");
            let (r, cost) = measure(|| job.reference_synthesis(k, ReferenceSynthesis::Prover));
            sp.finish_and_clear();
            r?;
            println!("  bellperson 0.27 prover synthesis: {}", cost.describe());
            prover = Some(cost);
            let sp = spinner("synthesizing (bellperson 0.27, WitnessCS)");
            let (r, cost) = measure(|| job.reference_synthesis(k, ReferenceSynthesis::WitnessOnly));
            sp.finish_and_clear();
            let r = r?;
            // The aux assignment is the witness; the inputs are checked against the
            // verifier's above. (bellperson's WitnessCS can list extra inputs: sub-systems
            // merged into it keep their constant one. Seen on WinningPoSt: two.)
            let same = r.aux == Some(shape.aux) && r.aux_fingerprint == Some(ours);
            println!(
                "  bellperson 0.27 WitnessCS (witness only): {}; its aux assignment {} cuzk's ({} values){}",
                cost.describe(),
                if same { "equals" } else { "DIFFERS FROM" },
                shape.aux,
                match r.inputs {
                    Some(n) if n != shape.inputs => format!("; it lists {n} inputs, the circuit allocates {}", shape.inputs),
                    _ => String::new(),
                }
            );
            if !same {
                bail!(
                    "partition {k}: bellperson's aux assignment differs from cuzk's: {:?} values (fingerprint {:?}) against {} ({ours})",
                    r.aux,
                    r.aux_fingerprint,
                    shape.aux
                );
            }
            println!("  bellperson's prover synthesis takes {:.2}x cuzk's wall time", cost_wall(prover) / cuzk.wall.as_secs_f64().max(1e-9));
            witness = Some(cost);
        }
        let total = shape.aux.max(1) as f64;
        println!(
            "RESULT_PARTITION circuit={circuit} partition={k} constraints={} count_s={:.2} cuzk_wall_s={:.2} cuzk_core_s={} cuzk_peak_gb={} bp_wall_s={} bp_core_s={} bp_peak_gb={} bpw_wall_s={} bpw_core_s={} bpw_peak_gb={} zeros={:.4} ones={:.4} other={:.5} other_a={:.5} other_b={:.5}{}",
            shape.constraints,
            counted.wall.as_secs_f64(),
            cuzk.wall.as_secs_f64(),
            cuzk.core_s(),
            gb(cuzk.peak_rss),
            prover.map_or("-".into(), |c| format!("{:.2}", c.wall.as_secs_f64())),
            prover.map_or("-".into(), |c| c.core_s()),
            prover.map_or("-".into(), |c| gb(c.peak_rss)),
            witness.map_or("-".into(), |c| format!("{:.2}", c.wall.as_secs_f64())),
            witness.map_or("-".into(), |c| c.core_s()),
            witness.map_or("-".into(), |c| gb(c.peak_rss)),
            l.0 as f64 / total,
            l.1 as f64 / total,
            l.2 as f64 / total,
            a.2 as f64 / (a.0 + a.1 + a.2).max(1) as f64,
            b.2 as f64 / (b.0 + b.1 + b.2).max(1) as f64,
            proved.unwrap_or_default() + &compiled_fields + &same_proof
        );
        Ok(())
    }

    /// Checks that full synthesis's circuit, proven with r = s = 0, gives `pending` (the
    /// proof from the same witness with a, b, c pending); the circuit stays provable.
    fn same_proof_as(&self, pending: cuzk_groth16::Proof, params: &ParameterSet, circuit: &mut SynthesizedCircuit) -> Result<String> {
        if !self.backend.keeps_evaluations() {
            println!("  (the proof with a, b, c pending is not compared: {} uses a, b, c as scratch)", self.backend.name());
            return Ok(String::new());
        }
        let out = self.backend.prove(params, std::slice::from_mut(circuit), &[ProofRandomness::zero()])?;
        circuit.reuse_evaluations(self.backend)?;
        if out.proofs.first() != Some(&pending) {
            bail!("the proof with a, b, c pending differs from full synthesis's (r = s = 0)");
        }
        println!("  the proof with a, b, c pending equals full synthesis's, byte for byte (r = s = 0)");
        Ok(" pending_proof=equal".into())
    }

    /// Proves the synthesized partition; returns the RESULT fields of the proof.
    fn prove(
        &self,
        job: &dyn FilecoinJob,
        k: usize,
        params: &ParameterSet,
        pvk: &PreparedVerifyingKey,
        circuit: &mut SynthesizedCircuit,
        inputs: &[cuzk_groth16::Scalar],
    ) -> Result<String> {
        params.check_shape(circuit).context("the parameters do not fit this circuit")?;
        let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
        let sp = spinner(&format!("proving on {}", self.backend.name()));
        let (out, cost) = measure(|| self.backend.prove(params, std::slice::from_mut(circuit), &[ProofRandomness::random(&mut rng)]));
        sp.finish_and_clear();
        let out = out?;
        println!("  prove on {}: {}", self.backend.name(), cost.describe());
        print_proof_stages(&out);
        let proof = out.proofs.first().context("the backend returned no proof")?;
        let verdict = if job.timing_only() || params.vk.is_timing_only() {
            "not checked (timing only)".to_string()
        } else if verify_proof(pvk, proof, inputs)? {
            "verified".to_string()
        } else {
            bail!("partition {k}: the proof does not verify");
        };
        println!("  proof: {verdict}");
        Ok(match &out.device {
            Some(d) => format!(
                " prove_s={:.3} held_s={:.3} kernels_s={:.3} gb_up={:.2}",
                cost.wall.as_secs_f64(),
                d.held.as_secs_f64(),
                d.busy.as_secs_f64(),
                d.bytes_up as f64 / 1e9
            ),
            None => format!(" prove_s={:.3}", cost.wall.as_secs_f64()),
        })
    }
}

fn cost_wall(c: Option<StepCost>) -> f64 {
    c.map_or(0.0, |c| c.wall.as_secs_f64())
}
