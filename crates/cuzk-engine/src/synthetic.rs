//! The synthetic proof kind: C2-shaped circuits of a chosen size, for tests, demos and
//! load tests of the engine and the daemon.
//!
//! Payload (`vanilla_proof`): JSON `{"log_size": 10, "partitions": 2, "seed": 7}`.
//! Partition i proves the synthetic circuit of domain 2^log_size with witness seed
//! `seed + i`. Parameters are made on first use by cuzk's setup from a fixed seed per
//! size, so anyone can rebuild the same verifying key (`SyntheticKind::parameters`).
//!
//! Two options serve GPU benchmarks of the engine: `"c2": true` (with `log_size` 27)
//! is the PoRep C2 partition shape itself (130,278,869 constraints; circuit id
//! `synthetic-c2`), and `"premade": true` replaces synthesis by a copy of one
//! pre-synthesized witness (seed `seed`, made once and kept by the kind, outside the
//! memory budget), so the GPU rather than the CPU is the bottleneck.

use std::sync::{Arc, Mutex};

use cuzk_groth16::generator::{generate_parameters_with, CpuFixedBase, FixedBaseMul, ToxicWaste};
use cuzk_groth16::matrices::{compile_matrices, ConstraintMatrices};
use cuzk_groth16::synthesis::{synthesize, synthesize_into, EvalBuffers};
use cuzk_groth16::synthetic::SyntheticShape;
use cuzk_groth16::{synthesize_witness_in, AuxBuffer, NoProgress, ParameterSet, SynthesizedCircuit, Witness, SCALAR_BYTES};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Deserialize;

use crate::error::EngineError;
use crate::kind::{JobPlan, KindHandler, ParameterSource, PartitionWork};
use crate::request::ProofKind;
pub use crate::request::SyntheticRequest;
use cuzk_groth16::sync::lock;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SyntheticPayload {
    log_size: u32,
    #[serde(default = "one")]
    partitions: u32,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    c2: bool,
    #[serde(default)]
    premade: bool,
}

fn one() -> u32 {
    1
}

/// Partitions per synthetic request at most (the real kinds have at most 16).
pub const MAX_SYNTHETIC_PARTITIONS: u32 = 64;

/// Makes the fixed-base multiplier of a setup (on a GPU where the daemon has one).
pub type FixedBaseMaker = dyn Fn() -> Result<Box<dyn FixedBaseMul>, String> + Send + Sync;

/// The domain of the C2 shape.
const C2_LOG_SIZE: u32 = 27;

pub struct SyntheticKind {
    max_log_size: u32,
    fixed_base: Box<FixedBaseMaker>,
    premade: Arc<Premade>,
    allow_premade: bool,
    /// Prove with the shapes' compiled matrices (made in memory on first use):
    /// witness-only synthesis, a, b, c computed by the backend.
    compiled: bool,
}

impl SyntheticKind {
    /// Accepts sizes 2^1..2^max_log_size; setups run on the CPU.
    pub fn new(max_log_size: u32) -> Self {
        SyntheticKind {
            max_log_size: max_log_size.clamp(1, C2_LOG_SIZE),
            fixed_base: Box::new(|| Ok(Box::new(CpuFixedBase::new()))),
            premade: Arc::new(Premade::default()),
            allow_premade: false,
            compiled: false,
        }
    }

    /// Whether partitions are proven with compiled matrices (witness-only synthesis,
    /// a, b, c computed by the backend) rather than synthesized in full.
    pub fn with_compiled_matrices(mut self, compiled: bool) -> Self {
        self.compiled = compiled;
        self
    }

    /// Whether `"premade": true` requests are accepted (off by default: the kept
    /// witness is held outside the memory budget; for benchmarks).
    pub fn allowing_premade(mut self, allow: bool) -> Self {
        self.allow_premade = allow;
        self
    }

    /// Setups' fixed-base multiplications by `make`'s multiplier (a GPU's).
    pub fn with_fixed_base(mut self, make: Box<FixedBaseMaker>) -> Self {
        self.fixed_base = make;
        self
    }

    pub fn circuit_id(log_size: u32) -> String {
        format!("synthetic-2^{log_size}")
    }

    /// The circuit id of the C2 shape.
    pub const C2_CIRCUIT_ID: &'static str = "synthetic-c2";

    /// The parameter set of `synthetic-2^log_size` (deterministic), made on the CPU.
    pub fn parameters(log_size: u32) -> Result<ParameterSet, EngineError> {
        Self::parameters_on(SyntheticShape::for_domain(log_size), log_size, &CpuFixedBase::new())
    }

    /// The parameter set of `shape` from the secrets of seed `0x5eed_0000 + seed`.
    fn parameters_on(shape: SyntheticShape, seed: u32, mul: &dyn FixedBaseMul) -> Result<ParameterSet, EngineError> {
        let tw = ToxicWaste::random(&mut ChaCha20Rng::seed_from_u64(0x5eed_0000 + seed as u64));
        generate_parameters_with(shape.circuit(0), &tw, mul, &NoProgress)
            .map_err(|e| EngineError::Internal(format!("setup of a synthetic circuit ({} constraints): {e}", shape.constraints)))
    }

    /// The shape and setup seed of a circuit id this kind accepts.
    fn parse_circuit_id(&self, id: &str) -> Option<(SyntheticShape, u32)> {
        if id == Self::C2_CIRCUIT_ID {
            return (self.max_log_size >= C2_LOG_SIZE).then_some((SyntheticShape::c2(), 0xc2));
        }
        // One id per set: only the form `circuit_id` writes (decimal digits, no sign, no
        // leading zero), so aliases such as "synthetic-2^011" are not separate entries.
        let digits = id.strip_prefix("synthetic-2^")?;
        if digits.is_empty() || digits.len() > 2 || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let log: u32 = digits.parse().ok()?;
        (1..=self.max_log_size).contains(&log).then_some((SyntheticShape::for_domain(log), log))
    }
}

/// Which instance a kept witness is: (constraints of its shape, witness seed).
type InstanceKey = (usize, u64);

/// The one pre-synthesized witness the kind keeps for `premade` requests.
#[derive(Default)]
struct Premade {
    kept: Mutex<Option<(InstanceKey, Arc<SynthesizedCircuit>)>>,
}

impl Premade {
    /// The instance of `shape` with witness seed `seed`, synthesized on first use
    /// (callers wait meanwhile); a request for another one replaces it (the old one
    /// lives on while partitions still hold it: benchmarks use one seed).
    fn get(&self, shape: SyntheticShape, seed: u64) -> Result<Arc<SynthesizedCircuit>, EngineError> {
        // A panic while synthesizing left `kept` empty (it is cleared first): still consistent.
        let mut kept = lock(&self.kept);
        let key = (shape.constraints, seed);
        if let Some((k, c)) = &*kept {
            if *k == key {
                return Ok(c.clone());
            }
        }
        *kept = None;
        let c = Arc::new(synthesize(shape.circuit(seed)).map_err(|e| EngineError::Internal(format!("synthesis: {e}")))?);
        *kept = Some((key, c.clone()));
        Ok(c)
    }
}

struct SyntheticPartition {
    shape: SyntheticShape,
    witness_seed: u64,
    /// Copy the kept witness of `witness_seed` instead of synthesizing.
    premade: Option<Arc<Premade>>,
}

impl PartitionWork for SyntheticPartition {
    fn synthesize(&self, buffers: EvalBuffers) -> Result<SynthesizedCircuit, EngineError> {
        let r = match &self.premade {
            None => synthesize_into(self.shape.circuit(self.witness_seed), buffers),
            Some(p) => p.get(self.shape, self.witness_seed)?.copy_into(buffers),
        };
        r.map_err(|e| EngineError::Internal(format!("synthesis: {e}")))
    }

    fn witness(&self, aux: AuxBuffer) -> Result<Witness, EngineError> {
        match &self.premade {
            None => synthesize_witness_in(self.shape.circuit(self.witness_seed), aux)
                .map_err(|e| EngineError::Internal(format!("witness synthesis: {e}"))),
            Some(p) => {
                let c = p.get(self.shape, self.witness_seed)?;
                let mut values = aux.into_vec();
                values.extend_from_slice(&c.aux);
                Ok(Witness { input: c.input.clone(), aux: values })
            }
        }
    }
}

impl ParameterSource for SyntheticKind {
    fn kind(&self) -> ProofKind {
        ProofKind::Synthetic
    }

    fn owns_circuit(&self, circuit_id: &str) -> bool {
        self.parse_circuit_id(circuit_id).is_some()
    }

    fn load_matrices(&self, circuit_id: &str) -> Result<Option<ConstraintMatrices>, EngineError> {
        if !self.compiled {
            return Ok(None);
        }
        let (shape, _) = self
            .parse_circuit_id(circuit_id)
            .ok_or_else(|| EngineError::NotFound(format!("not a synthetic circuit id: {}", crate::error::shown(circuit_id))))?;
        let t = std::time::Instant::now();
        let m = compile_matrices(shape.circuit(0)).map_err(|e| EngineError::Internal(format!("compiling the matrices of {circuit_id}: {e}")))?;
        tracing::info!(
            circuit_id,
            gb = format!("{:.2}", m.bytes() as f64 / 1e9),
            secs = format!("{:.2}", t.elapsed().as_secs_f64()),
            "synthetic matrices compiled: partitions are synthesized witness-only"
        );
        Ok(Some(m))
    }

    /// Made in memory: `points_in_file` does not apply.
    fn load_params(&self, circuit_id: &str, _points_in_file: bool) -> Result<ParameterSet, EngineError> {
        let (shape, seed) = self
            .parse_circuit_id(circuit_id)
            .ok_or_else(|| EngineError::NotFound(format!("not a synthetic circuit id: {}", crate::error::shown(circuit_id))))?;
        let mul = (self.fixed_base)().map_err(|e| EngineError::Internal(format!("setup of {circuit_id}: {e}")))?;
        let t = std::time::Instant::now();
        let p = Self::parameters_on(shape, seed, mul.as_ref())?;
        tracing::info!(circuit_id, on = %mul.name(), secs = t.elapsed().as_secs_f64(), "synthetic parameters made");
        Ok(p)
    }
}

impl KindHandler<SyntheticRequest> for SyntheticKind {
    fn plan(&self, body: &SyntheticRequest) -> Result<JobPlan, EngineError> {
        let bad = |e: serde_json::Error| {
            EngineError::InvalidArgument(format!(
                "synthetic payload: vanilla_proof must be a JSON object like {{\"log_size\": 10, \"partitions\": 1, \"seed\": 0}}: {e}"
            ))
        };
        // An object only: serde would also take a struct from a JSON array (`[10]`).
        let object: serde_json::Map<String, serde_json::Value> = cuzk_filecoin::strict_json::from_slice(&body.0).map_err(bad)?;
        let p: SyntheticPayload = serde_json::from_value(serde_json::Value::Object(object)).map_err(bad)?;
        if !(1..=self.max_log_size).contains(&p.log_size) {
            return Err(EngineError::InvalidArgument(format!("synthetic payload: log_size {} is outside 1..={}", p.log_size, self.max_log_size)));
        }
        if !(1..=MAX_SYNTHETIC_PARTITIONS).contains(&p.partitions) {
            return Err(EngineError::InvalidArgument(format!(
                "synthetic payload: partitions {} is outside 1..={MAX_SYNTHETIC_PARTITIONS}",
                p.partitions
            )));
        }
        if p.premade && !self.allow_premade {
            return Err(EngineError::InvalidArgument(
                "synthetic payload: \"premade\": true is off in this daemon (synthetic.allow_premade turns it on, for benchmarks)".into(),
            ));
        }
        if p.c2 && p.log_size != C2_LOG_SIZE {
            return Err(EngineError::InvalidArgument(format!("synthetic payload: \"c2\": true needs log_size {C2_LOG_SIZE}, not {}", p.log_size)));
        }
        let (shape, circuit_id) = if p.c2 {
            (SyntheticShape::c2(), Self::C2_CIRCUIT_ID.to_string())
        } else {
            (SyntheticShape::for_domain(p.log_size), Self::circuit_id(p.log_size))
        };
        let premade = p.premade.then(|| self.premade.clone());
        let partitions = (0..p.partitions as u64)
            .map(|i| {
                // Pre-made partitions all copy the witness of `seed`.
                let witness_seed = if p.premade { p.seed } else { p.seed.wrapping_add(i) };
                Arc::new(SyntheticPartition { shape, witness_seed, premade: premade.clone() }) as Arc<dyn PartitionWork>
            })
            .collect();
        // The aux assignment: one scalar per variable, about one per constraint.
        let eval_len = 1usize << p.log_size;
        let partition_bytes = (SCALAR_BYTES * eval_len) as u64;
        Ok(JobPlan { circuit_id, partitions, eval_len, partition_bytes, final_check: None, timing_note: None })
    }
}
