//! A decoded request as the engine sees it ([`FilecoinJob`]), what is checked of its
//! inputs ([`InputChecks`]) and of its proof ([`CheckedBy`]).

use blstrs::Scalar;
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::shape::CircuitShape;
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::witness::{AuxBuffer, Witness};
use cuzk_groth16::SynthesizedCircuit;
use ff::Field;

use crate::error::FilecoinError;
use crate::reference::{ReferenceSynthesis, ReferenceWitness};
use crate::registered::Circuit;

/// What is checked of a request's vanilla proofs before any proving.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputChecks {
    /// filecoin-proofs' checks of the vanilla proofs run, and a request that fails them
    /// is refused. The only mode for real work.
    #[default]
    Full,
    /// Timing only: the vanilla proofs are not checked, so shape-true inputs (random
    /// values) are proved. A job decoded this way says so
    /// ([`FilecoinJob::timing_only`]); its proofs are not checked and must never be
    /// returned as real ones (of shape-true inputs or timing parameters they cannot
    /// verify at all).
    TimingOnly,
}

/// How a proof was checked before it is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckedBy {
    /// filecoin-proofs' verifier for the kind accepted the assembled proof.
    FilecoinProofs,
    /// filecoin-proofs has no verifier for this piece alone (the reason is given); each
    /// partition proof was checked against storage-proofs' public inputs.
    PartitionsOnly(&'static str),
}

/// filecoin-proofs' verdict on an assembled proof (`verify_*`'s result) as the final
/// check's outcome; `what` describes the job for the error.
pub(crate) fn verdict(r: anyhow::Result<bool>, what: String) -> Result<CheckedBy, FilecoinError> {
    match r {
        Ok(true) => Ok(CheckedBy::FilecoinProofs),
        Ok(false) => Err(FilecoinError::NotVerified(what)),
        Err(e) => Err(FilecoinError::NotVerified(format!("{what}: {e:#}"))),
    }
}

/// One decoded request: its partition circuits, their public inputs, and the final
/// check of the assembled proof.
pub trait FilecoinJob: Send + Sync {
    /// The circuit (and so the parameter set) every partition uses.
    fn circuit(&self) -> Circuit;
    /// One line for logs: kind, size, partition, sectors.
    fn describe(&self) -> String;
    /// The proof is this many partition proofs concatenated in order.
    fn partitions(&self) -> usize;
    /// Synthesizes partition `partition` into `buffers`.
    fn synthesize(&self, partition: usize, buffers: EvalBuffers) -> Result<SynthesizedCircuit, FilecoinError>;
    /// Synthesizes partition `partition`'s assignment only (no constraint is built):
    /// the same input and aux values as [`FilecoinJob::synthesize`], at a fraction of
    /// its work and memory. `aux`: the circuit's aux count where known (its compiled
    /// matrices'), so that the witness is laid out ahead, and the vector whose memory
    /// takes the values (a caller's reused one, or a fresh one).
    fn witness(&self, partition: usize, aux: AuxBuffer) -> Result<Witness, FilecoinError>;
    /// Where [`FilecoinJob::witness`] computes parts of the witness natively (PoRep's
    /// labels, SnapDeals' tree_d paths), partition `partition`'s assignment by witness-only synthesis of
    /// storage-proofs' circuit as it is written: what the native one must equal. `None`
    /// for kinds whose witness is that synthesis.
    fn gadget_witness(&self, _partition: usize) -> Option<Result<Witness, FilecoinError>> {
        None
    }
    /// Records partition `partition`'s constraint matrices (no value is computed): the
    /// same for every partition and every job of this circuit shape.
    fn compile(&self, partition: usize) -> Result<ConstraintMatrices, FilecoinError>;
    /// Counts partition `partition`'s circuit: constraints, variables, query sizes
    /// (no value is computed; little memory).
    fn shape(&self, partition: usize) -> Result<CircuitShape, FilecoinError>;
    /// Synthesizes partition `partition` with bellperson's own constraint systems: the
    /// reference cuzk's synthesis is measured and checked against.
    fn reference_synthesis(&self, partition: usize, how: ReferenceSynthesis) -> Result<ReferenceWitness, FilecoinError>;
    /// The public inputs of partition `partition` (without the leading one), computed
    /// by storage-proofs from the public data alone, as its verifier does.
    fn public_inputs(&self, partition: usize) -> Result<Vec<Scalar>, FilecoinError>;
    /// Checks the assembled proof (partition proofs concatenated) with
    /// filecoin-proofs' verifier for this kind. Needs [`crate::env::use_parameter_dir`].
    /// A timing-only job refuses: there is nothing real to check.
    fn verify(&self, proof: &[u8]) -> Result<CheckedBy, FilecoinError>;
    /// [`FilecoinJob::verify`] with one public input changed, named in the result
    /// (PoRep's sector number, SnapDeals' comm_d_new, PoSt's randomness): the verifier
    /// must refuse, or it is not checking the proof against its inputs.
    fn verify_one_input_changed(&self, proof: &[u8]) -> (&'static str, Result<CheckedBy, FilecoinError>);
    /// Whether the job was decoded with [`InputChecks::TimingOnly`]: its proofs are for
    /// timing only, never checked and never returned.
    fn timing_only(&self) -> bool;
}

/// What [`verify_partitions`] checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionsChecked {
    pub partitions: usize,
    /// The verifying key's file.
    pub vk: std::path::PathBuf,
}

/// Each partition proof of `proof` checked as the engine checks it: against the public
/// inputs storage-proofs computes from the request, with the circuit's verifying key in
/// `param_dir`; and refused with its first public input changed (else the check is not
/// working). For proofs filecoin-proofs' verifier cannot take
/// ([`CheckedBy::PartitionsOnly`]), so that a client checks them itself.
pub fn verify_partitions(job: &dyn FilecoinJob, proof: &[u8], param_dir: &std::path::Path) -> Result<PartitionsChecked, FilecoinError> {
    use cuzk_groth16::format::{read_vk, PointCheck};
    use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
    let refused = |why: String| FilecoinError::NotVerified(format!("{}: {why}", job.describe()));
    let n = job.partitions();
    let size = cuzk_groth16::proof::PROOF_BYTES;
    if proof.len() != n * size {
        return Err(refused(format!("{} proof bytes for {n} partitions of {size}", proof.len())));
    }
    let path = job.circuit().vk_path(param_dir)?;
    if !path.is_file() {
        return Err(FilecoinError::MissingParameters { path });
    }
    let vk = read_vk(&path, PointCheck::Subgroup).map_err(|e| FilecoinError::invalid(format!("verifying key {}: {e}", path.display())))?;
    let pvk = PreparedVerifyingKey::new(&vk);
    for (p, bytes) in proof.chunks_exact(size).enumerate() {
        let one = cuzk_groth16::Proof::from_bytes(bytes).map_err(|e| refused(format!("partition {p}'s proof does not decode: {e}")))?;
        let mut inputs = job.public_inputs(p)?;
        let check = |inputs: &[Scalar]| verify_proof(&pvk, &one, inputs).map_err(|e| refused(format!("partition {p}: {e}")));
        if !check(&inputs)? {
            return Err(refused(format!("partition {p}'s proof does not verify against its public inputs with {}", path.display())));
        }
        let first = inputs.first_mut().ok_or_else(|| refused(format!("partition {p} has no public input")))?;
        *first += Scalar::ONE;
        if check(&inputs)? {
            return Err(refused(format!("partition {p}'s proof verifies with a public input changed: the check is not working")));
        }
    }
    Ok(PartitionsChecked { partitions: n, vk: path })
}

/// A partition index the request has (every kind's `FilecoinJob` checks it first).
pub(crate) fn check_partition(partition: usize, partitions: usize) -> Result<(), FilecoinError> {
    if partition >= partitions {
        return Err(FilecoinError::invalid(format!("partition {partition} does not exist (the proof has {partitions})")));
    }
    Ok(())
}

/// The refusal of [`FilecoinJob::verify`] for a timing-only job.
pub(crate) fn timing_only_refusal(what: String) -> FilecoinError {
    FilecoinError::TimingOnly(format!("{what}: a timing-only job (vanilla proofs not checked) has no proof to check"))
}
