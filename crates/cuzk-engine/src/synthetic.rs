//! The synthetic proof kind: C2-shaped circuits of a chosen size, for tests, demos and
//! load tests of the engine and the daemon.
//!
//! Payload (`vanilla_proof`): JSON `{"log_size": 10, "partitions": 2, "seed": 7}`.
//! Partition i proves the synthetic circuit of domain 2^log_size with witness seed
//! `seed + i`. Parameters are made on first use by cuzk's setup from a fixed seed per
//! size, so anyone can rebuild the same verifying key (`SyntheticKind::parameters`).

use std::sync::Arc;

use cuzk_groth16::generator::generate_parameters;
use cuzk_groth16::synthetic::SyntheticShape;
use cuzk_groth16::synthesis::{synthesize_into, EvalBuffers};
use cuzk_groth16::{NoProgress, ParameterSet, SynthesizedCircuit};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Deserialize;

use crate::error::EngineError;
use crate::job::JobRequest;
use crate::kind::{JobPlan, KindHandler, PartitionWork, ProofKind};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SyntheticPayload {
    log_size: u32,
    #[serde(default = "one")]
    partitions: u32,
    #[serde(default)]
    seed: u64,
}

fn one() -> u32 {
    1
}

/// Partitions per synthetic request at most (the real kinds have at most 16).
pub const MAX_SYNTHETIC_PARTITIONS: u32 = 64;

pub struct SyntheticKind {
    max_log_size: u32,
}

impl SyntheticKind {
    /// Accepts sizes 2^1..2^max_log_size.
    pub fn new(max_log_size: u32) -> Self {
        SyntheticKind { max_log_size: max_log_size.clamp(1, 27) }
    }

    pub fn circuit_id(log_size: u32) -> String {
        format!("synthetic-2^{log_size}")
    }

    /// The parameter set of `synthetic-2^log_size` (deterministic).
    pub fn parameters(log_size: u32) -> Result<ParameterSet, EngineError> {
        let shape = SyntheticShape::for_domain(log_size);
        generate_parameters(shape.circuit(0), &mut ChaCha20Rng::seed_from_u64(0x5eed_0000 + log_size as u64), &NoProgress)
            .map_err(|e| EngineError::Internal(format!("setup of synthetic-2^{log_size}: {e}")))
    }

    fn parse_circuit_id(&self, id: &str) -> Option<u32> {
        let log: u32 = id.strip_prefix("synthetic-2^")?.parse().ok()?;
        (1..=self.max_log_size).contains(&log).then_some(log)
    }
}

struct SyntheticPartition {
    shape: SyntheticShape,
    witness_seed: u64,
}

impl PartitionWork for SyntheticPartition {
    fn synthesize(&self, buffers: EvalBuffers) -> Result<SynthesizedCircuit, EngineError> {
        synthesize_into(self.shape.circuit(self.witness_seed), buffers)
            .map_err(|e| EngineError::Internal(format!("synthesis: {e}")))
    }
}

impl KindHandler for SyntheticKind {
    fn kind(&self) -> ProofKind {
        ProofKind::Synthetic
    }

    fn plan(&self, request: &JobRequest) -> Result<JobPlan, EngineError> {
        let p: SyntheticPayload = serde_json::from_slice(&request.payload.vanilla_proof).map_err(|e| {
            EngineError::InvalidArgument(format!(
                "synthetic payload: vanilla_proof must be JSON like {{\"log_size\": 10, \"partitions\": 1, \"seed\": 0}}: {e}"
            ))
        })?;
        if !(1..=self.max_log_size).contains(&p.log_size) {
            return Err(EngineError::InvalidArgument(format!(
                "synthetic payload: log_size {} is outside 1..={}",
                p.log_size, self.max_log_size
            )));
        }
        if !(1..=MAX_SYNTHETIC_PARTITIONS).contains(&p.partitions) {
            return Err(EngineError::InvalidArgument(format!(
                "synthetic payload: partitions {} is outside 1..={MAX_SYNTHETIC_PARTITIONS}",
                p.partitions
            )));
        }
        let shape = SyntheticShape::for_domain(p.log_size);
        let partitions = (0..p.partitions as u64)
            .map(|i| {
                Arc::new(SyntheticPartition { shape, witness_seed: p.seed.wrapping_add(i) }) as Arc<dyn PartitionWork>
            })
            .collect();
        // The aux assignment: 32 bytes per variable, about one per constraint.
        let eval_len = 1usize << p.log_size;
        let partition_bytes = 32 * eval_len as u64;
        Ok(JobPlan { circuit_id: Self::circuit_id(p.log_size), partitions, eval_len, partition_bytes })
    }

    fn owns_circuit(&self, circuit_id: &str) -> bool {
        self.parse_circuit_id(circuit_id).is_some()
    }

    fn load_params(&self, circuit_id: &str) -> Result<ParameterSet, EngineError> {
        let log = self
            .parse_circuit_id(circuit_id)
            .ok_or_else(|| EngineError::NotFound(format!("not a synthetic circuit id: {circuit_id:?}")))?;
        Self::parameters(log)
    }
}
