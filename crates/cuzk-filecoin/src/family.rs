//! What one kind of Filecoin circuit is, as one trait: [`Family`]. Each kind's module
//! (`crate::kinds::*`) implements it — its names, registered proof numbers, decoder,
//! parameter cache id, published counts, blank circuit and fixtures — and `crate::kinds` is the one place a
//! [`CircuitKind`](crate::CircuitKind) picks its module. This module sits below the
//! kinds: it names only the types their answers are made of.

use blstrs::Scalar;
use cuzk_groth16::matrices::ConstraintMatrices;
use rand_chacha::ChaCha20Rng;

use crate::error::FilecoinError;
use crate::job::{FilecoinJob, InputChecks};
use crate::registered::{Circuit, SectorSize};
use crate::request::FilecoinRequest;
use crate::request_files::RequestFiles;

/// Something done with a kind's blank circuit (no witness), whatever its type: a setup,
/// a count, a compilation of its matrices.
pub(crate) trait WithBlank {
    type Out;
    fn run<C: bellpepper_core::Circuit<Scalar>>(self, blank: C) -> Result<Self::Out, FilecoinError>;
}

/// The names of a kind, each unique among the kinds (a test in `crate::kinds` checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KindNames {
    /// The engine's proof kind name, the request folders' `proof_kind` and, upper-cased,
    /// the gRPC wire value's name ("porep_seal_commit").
    pub engine: &'static str,
    /// On cuzk's command line (`cuzk fixture porep`).
    pub cli: &'static str,
    /// Of its circuit ids and parameter sets ("porep" in "porep-32g"); no '-' in it.
    pub prefix: &'static str,
}

/// A published constraint count of one partition: the figure, and whether it counts
/// the prover's input constraints (one per public input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublishedCount {
    pub constraints: usize,
    pub with_input_constraints: bool,
}

/// A kind of Filecoin circuit, at every sector size.
pub(crate) trait Family {
    /// The kind's names.
    const NAMES: KindNames;

    /// The circuit a request's registered proof number names; an error names a number
    /// that is not of this kind.
    fn circuit(registered_proof: u64) -> Result<Circuit, FilecoinError>;

    /// Decodes and checks a request of this kind; errors name what is wrong with it.
    fn decode(request: &FilecoinRequest, checks: InputChecks) -> Result<Box<dyn FilecoinJob>, FilecoinError>;

    /// storage-proofs' cache id of the circuit at `size` ("<prefix>-<sha256 of the public
    /// parameters>"), the same for every registered proof of the kind and size.
    fn cache_id(size: SectorSize) -> anyhow::Result<String>;

    /// The published constraint count of a partition at `size` (rust-fil-proofs'
    /// figures), where there is one: compiled matrices and the count are checked
    /// against it.
    fn published_constraints(size: SectorSize) -> Option<PublishedCount>;

    /// Runs `w` on the blank circuit at `size`.
    fn with_blank<W: WithBlank>(size: SectorSize, w: W) -> Result<W::Out, FilecoinError>;

    /// A shape-true request at `size`: the real structure, values drawn from `rng`.
    fn shape_true(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError>;

    /// A valid request at `size`: its vanilla proofs verify; values drawn from `rng`.
    fn valid(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError>;

    /// The most significant aux values (neither 0 nor 1) a partition's witness is
    /// expected to have, given the circuit's compiled matrices; None where the kind
    /// cannot say better than a device plan's default.
    fn significant_aux(matrices: &ConstraintMatrices) -> Option<usize> {
        let _ = matrices;
        None
    }
}
