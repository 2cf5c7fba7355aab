//! Parameter files for Filecoin circuits made by cuzk's own setup (test sizes, and
//! timing runs): storage-proofs' blank circuit of the kind and size, cuzk-groth16's
//! generator, written under the names filecoin-proofs looks for.
//!
//! Such parameters come from one party's randomness, not Filecoin's ceremony: proofs
//! made with them verify against their own `.vk` only, never on chain.

use std::path::Path;

use bellpepper_core::Circuit;
use blstrs::Scalar;
use cuzk_groth16::generator::{generate_parameters_with, FixedBaseMul, ToxicWaste};
use cuzk_groth16::shape::{count_shape, CircuitShape};
use cuzk_groth16::{ParameterSet, Progress};

use crate::error::FilecoinError;
use crate::family::WithBlank;
use crate::kinds::with_blank;

/// A setup from the secrets `tw`.
struct Setup<'a> {
    tw: &'a ToxicWaste,
    mul: &'a dyn FixedBaseMul,
    progress: &'a dyn Progress,
}

impl WithBlank for Setup<'_> {
    type Out = ParameterSet;
    fn run<C: Circuit<Scalar>>(self, blank: C) -> Result<ParameterSet, FilecoinError> {
        generate_parameters_with(blank, self.tw, self.mul, self.progress)
            .map_err(|e| FilecoinError::Synthesis { partition: 0, message: format!("setup: {e}") })
    }
}

/// A count of the blank circuit: the shape of the parameter file.
struct Count;

impl WithBlank for Count {
    type Out = CircuitShape;
    fn run<C: Circuit<Scalar>>(self, blank: C) -> Result<CircuitShape, FilecoinError> {
        count_shape(blank).map_err(|e| FilecoinError::Synthesis { partition: 0, message: format!("counting the blank circuit: {e}") })
    }
}

/// Generates a parameter set for `circuit` from the secrets `tw`.
pub fn generate(circuit: crate::Circuit, tw: &ToxicWaste, mul: &dyn FixedBaseMul, progress: &dyn Progress) -> Result<ParameterSet, FilecoinError> {
    with_blank(circuit, Setup { tw, mul, progress })
}

/// The shape of `circuit`'s parameter file, from a count of its blank circuit (one
/// core, little memory; about a minute for a 32 GiB PoRep partition).
pub fn blank_shape(circuit: crate::Circuit) -> Result<CircuitShape, FilecoinError> {
    with_blank(circuit, Count)
}

/// Writes `params` as `<dir>/<stem>.params` and `<dir>/<stem>.vk`, the names
/// filecoin-proofs reads for `circuit`.
pub fn write_files(params: &ParameterSet, circuit: crate::Circuit, dir: &Path) -> Result<(), FilecoinError> {
    std::fs::create_dir_all(dir).map_err(|e| FilecoinError::invalid(format!("cannot create parameter directory {}: {e}", dir.display())))?;
    let path = circuit.params_path(dir)?;
    cuzk_groth16::format::save(params, &path).map_err(|e| FilecoinError::invalid(format!("writing {}: {e}", path.display())))
}
