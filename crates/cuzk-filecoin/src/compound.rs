//! A partition through filecoin-proofs' compound proof, the same way for every kind:
//! its circuit built from the vanilla proof and synthesized into our buffers, and its
//! public inputs. Panics inside filecoin-proofs become errors naming the step.

use blstrs::Scalar;
use cuzk_groth16::synthesis::{synthesize_into, EvalBuffers};
use cuzk_groth16::SynthesizedCircuit;
use storage_proofs_core::compound_proof::{CircuitComponent, CompoundProof};
use storage_proofs_core::parameter_cache::{CacheableParameters, ParameterSetMetadata};
use storage_proofs_core::proof::ProofScheme;

use crate::error::{guarded, FilecoinError};

/// Synthesizes partition `partition` of a `kind` proof (e.g. "PoRep"): the circuit of
/// `vanilla` for compound partition index `partition_k`.
pub(crate) fn synthesize_partition<'a, S, Circ, C>(
    kind: &str,
    inputs: &S::PublicInputs,
    vanilla: &S::Proof,
    params: &S::PublicParams,
    partition: usize,
    partition_k: usize,
    buffers: EvalBuffers,
) -> Result<SynthesizedCircuit, FilecoinError>
where
    S: ProofScheme<'a>,
    S::Proof: Sync + Send,
    S::PublicParams: ParameterSetMetadata + Sync + Send,
    S::PublicInputs: Clone + Sync,
    Circ: bellpepper_core::Circuit<Scalar> + CircuitComponent + Send,
    C: CompoundProof<'a, S, Circ> + CacheableParameters<Circ, S::PublicParams>,
{
    guarded(&format!("synthesizing the {kind} circuit"), || {
        let circuit = C::circuit(inputs, Default::default(), vanilla, params, Some(partition_k))
            .map_err(FilecoinError::rejected(format!("building the {kind} circuit")))?;
        synthesize_into(circuit, buffers).map_err(|e| FilecoinError::Synthesis { partition, message: e.to_string() })
    })
}

/// The public inputs of compound partition `partition_k` of a `kind` proof.
pub(crate) fn partition_public_inputs<'a, S, Circ, C>(
    kind: &str,
    inputs: &S::PublicInputs,
    params: &S::PublicParams,
    partition_k: usize,
) -> Result<Vec<Scalar>, FilecoinError>
where
    S: ProofScheme<'a>,
    S::Proof: Sync + Send,
    S::PublicParams: ParameterSetMetadata + Sync + Send,
    S::PublicInputs: Clone + Sync,
    Circ: bellpepper_core::Circuit<Scalar> + CircuitComponent + Send,
    C: CompoundProof<'a, S, Circ> + CacheableParameters<Circ, S::PublicParams>,
{
    guarded(&format!("computing the {kind} public inputs"), || {
        C::generate_public_inputs(inputs, params, Some(partition_k)).map_err(FilecoinError::rejected(format!("the {kind} public inputs")))
    })
}
