//! What one kind of Filecoin circuit is, as one trait: [`Family`]. Each kind's module
//! (`crate::kinds::*`) implements it — its registered proof numbers, decoder, parameter
//! cache id, blank circuit and fixtures — and `crate::kinds` is the one place a
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

/// A kind of Filecoin circuit, at every sector size.
pub(crate) trait Family {
    /// The circuit a request's registered proof number names; an error names a number
    /// that is not of this kind.
    fn circuit(registered_proof: u64) -> Result<Circuit, FilecoinError>;

    /// Decodes and checks a request of this kind; errors name what is wrong with it.
    fn decode(request: &FilecoinRequest, checks: InputChecks) -> Result<Box<dyn FilecoinJob>, FilecoinError>;

    /// storage-proofs' cache id of the circuit at `size` ("<prefix>-<sha256 of the public
    /// parameters>"), the same for every registered proof of the kind and size.
    fn cache_id(size: SectorSize) -> anyhow::Result<String>;

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
