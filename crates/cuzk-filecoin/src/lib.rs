//! Filecoin proof kinds for cuzk: PoRep C2, SnapDeals, WindowPoSt and WinningPoSt.
//!
//! A request (the payload fields Curio sends) is decoded into a [`FilecoinJob`]: its
//! partition circuits are filecoin-proofs' own (storage-proofs' compound circuits built
//! from the vanilla proofs), synthesized by cuzk-groth16 into the engine's buffers and
//! proved by cuzk's backends; filecoin-proofs' proving path is never used. Public
//! inputs and the final check come from filecoin-proofs as well, so a proof cuzk
//! returns is one filecoin-proofs accepts.
//!
//! filecoin-proofs reads its settings (the parameter directory among them) from
//! `FIL_PROOFS_*` environment variables once per process: [`env::use_parameter_dir`]
//! must run before anything else here.

mod compound;
pub mod env;
mod error;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod ids;
pub mod param_check;
mod payload;
mod porep;
mod post;
pub mod reference;
pub mod registered;
pub mod request_files;
pub mod setup;
pub mod shape_true;
mod snap;

use blstrs::Scalar;
use cuzk_groth16::shape::CircuitShape;
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::SynthesizedCircuit;
use reference::{ReferenceSynthesis, ReferenceWitness};

pub use error::FilecoinError;
pub use porep::PorepRequest;
pub use post::PostRequest;
pub use registered::{Circuit, CircuitKind, PostProof, SealProof, SectorSize, UpdateProof};
pub use snap::SnapRequest;

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
    /// filecoin-proofs' verifier for this kind. Needs [`env::use_parameter_dir`].
    /// A timing-only job refuses: there is nothing real to check.
    fn verify(&self, proof: &[u8]) -> Result<CheckedBy, FilecoinError>;
    /// Whether the job was decoded with [`InputChecks::TimingOnly`]: its proofs are for
    /// timing only, never checked and never returned.
    fn timing_only(&self) -> bool;
}

/// The refusal of [`FilecoinJob::verify`] for a timing-only job.
pub(crate) fn timing_only_refusal(what: String) -> FilecoinError {
    FilecoinError::TimingOnly(format!("{what}: a timing-only job (vanilla proofs not checked) has no proof to check"))
}

/// Decodes a PoRep C2 request.
pub fn decode_porep(req: &PorepRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    porep::decode(req)
}

/// Decodes a SnapDeals (empty sector update) request.
pub fn decode_snap(req: &SnapRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    snap::decode(req)
}

/// Decodes a WindowPoSt partition request.
pub fn decode_window_post(req: &PostRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    post::decode(true, req)
}

/// Decodes a WinningPoSt request.
pub fn decode_winning_post(req: &PostRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    post::decode(false, req)
}
