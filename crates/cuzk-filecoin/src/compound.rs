//! A partition through filecoin-proofs' compound proof, the same way for every kind:
//! its circuit built from the vanilla proof, then synthesized into our buffers,
//! counted, or synthesized by bellperson; and its public inputs. Panics inside filecoin-proofs become errors naming the step.

use blstrs::Scalar;
use cuzk_groth16::matrices::{compile_matrices, ConstraintMatrices};
use cuzk_groth16::shape::{count_shape, CircuitShape};
use cuzk_groth16::synthesis::{synthesize_into, EvalBuffers};
use cuzk_groth16::witness::{synthesize_witness, Witness};
use cuzk_groth16::SynthesizedCircuit;
use storage_proofs_core::compound_proof::{CircuitComponent, CompoundProof};
use storage_proofs_core::parameter_cache::{CacheableParameters, ParameterSetMetadata};
use storage_proofs_core::proof::ProofScheme;

use crate::error::{guarded, FilecoinError};
use crate::reference::{ReferenceSynthesis, ReferenceWitness};

/// The circuit of partition `partition_k` of a `kind` proof (e.g. "PoRep"), built from
/// its vanilla proof as filecoin-proofs builds it.
pub(crate) fn partition_circuit<'a, S, Circ, C>(
    kind: &str,
    inputs: &S::PublicInputs,
    vanilla: &S::Proof,
    params: &S::PublicParams,
    partition_k: usize,
) -> Result<Circ, FilecoinError>
where
    S: ProofScheme<'a>,
    S::Proof: Sync + Send,
    S::PublicParams: ParameterSetMetadata + Sync + Send,
    S::PublicInputs: Clone + Sync,
    Circ: bellpepper_core::Circuit<Scalar> + CircuitComponent + Send,
    C: CompoundProof<'a, S, Circ> + CacheableParameters<Circ, S::PublicParams>,
{
    guarded(&format!("building the {kind} circuit"), || {
        C::circuit(inputs, Default::default(), vanilla, params, Some(partition_k))
            .map_err(FilecoinError::rejected(format!("building the {kind} circuit")))
    })
}

/// Synthesizes partition `partition`'s circuit into `buffers`.
pub(crate) fn synthesize<C: bellpepper_core::Circuit<Scalar>>(
    kind: &str,
    partition: usize,
    circuit: C,
    buffers: EvalBuffers,
) -> Result<SynthesizedCircuit, FilecoinError> {
    guarded(&format!("synthesizing the {kind} circuit"), || {
        synthesize_into(circuit, buffers).map_err(|e| FilecoinError::Synthesis { partition, message: e.to_string() })
    })
}

/// Synthesizes partition `partition`'s assignment only.
pub(crate) fn witness<C: bellpepper_core::Circuit<Scalar>>(
    kind: &str,
    partition: usize,
    circuit: C,
    aux_len: Option<usize>,
) -> Result<Witness, FilecoinError> {
    guarded(&format!("synthesizing the {kind} witness"), || {
        synthesize_witness(circuit, aux_len.unwrap_or(0)).map_err(|e| FilecoinError::Synthesis { partition, message: e.to_string() })
    })
}

/// A split witness synthesis's failure: building a share's circuit, or synthesizing it.
pub(crate) enum WitnessError {
    Circuit(FilecoinError),
    Synthesis(bellpepper_core::SynthesisError),
}

impl From<bellpepper_core::SynthesisError> for WitnessError {
    fn from(e: bellpepper_core::SynthesisError) -> Self {
        WitnessError::Synthesis(e)
    }
}

impl WitnessError {
    pub(crate) fn into_filecoin(self, partition: usize) -> FilecoinError {
        match self {
            WitnessError::Circuit(e) => e,
            WitnessError::Synthesis(e) => FilecoinError::Synthesis { partition, message: e.to_string() },
        }
    }
}

/// Records partition `partition`'s constraint matrices.
pub(crate) fn compile<C: bellpepper_core::Circuit<Scalar>>(kind: &str, partition: usize, circuit: C) -> Result<ConstraintMatrices, FilecoinError> {
    guarded(&format!("compiling the {kind} circuit"), || {
        compile_matrices(circuit).map_err(|e| FilecoinError::Synthesis { partition, message: e.to_string() })
    })
}

/// Counts partition `partition`'s circuit.
pub(crate) fn count<C: bellpepper_core::Circuit<Scalar>>(kind: &str, partition: usize, circuit: C) -> Result<CircuitShape, FilecoinError> {
    guarded(&format!("counting the {kind} circuit"), || {
        count_shape(circuit).map_err(|e| FilecoinError::Synthesis { partition, message: e.to_string() })
    })
}

/// Synthesizes partition `partition`'s circuit with bellperson's own constraint
/// systems (the reference).
pub(crate) fn reference<C: bellpepper_core::Circuit<Scalar> + Send>(
    kind: &str,
    partition: usize,
    circuit: C,
    how: ReferenceSynthesis,
) -> Result<ReferenceWitness, FilecoinError> {
    guarded(&format!("synthesizing the {kind} circuit with bellperson"), || {
        crate::reference::synthesize(circuit, how).map_err(|e| FilecoinError::Synthesis { partition, message: format!("bellperson: {e}") })
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
