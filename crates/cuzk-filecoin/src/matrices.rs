//! Compiled constraint matrices of Filecoin circuits: recorded once from the blank
//! circuit, kept beside the parameter files as `<stem>.cuzk-matrices` (the stem of
//! the `.params` file, which carries a digest of the circuit's public parameters),
//! read into memory when the set loads (a copy: a file changed in place afterwards
//! does not reach it), shared by every proof of that circuit, and rebuilt when
//! missing, stale or corrupt.

use std::path::{Path, PathBuf};

use bellpepper_core::Circuit;
use blstrs::Scalar;
use cuzk_groth16::matrices::{compile_matrices_with, ConstraintMatrices};
use cuzk_groth16::matrix_file::{read_matrices, write_matrices, MatrixFileError};
use cuzk_groth16::Progress;

use crate::error::FilecoinError;
use crate::family::WithBlank;
use crate::kinds::with_blank;

/// `<dir>/<stem>.cuzk-matrices`.
pub fn matrices_path(circuit: crate::Circuit, dir: &Path) -> Result<PathBuf, FilecoinError> {
    Ok(dir.join(format!("{}.cuzk-matrices", circuit.file_stem()?)))
}

/// What a matrices file must have been compiled from: the circuit id and its parameter
/// files' stem.
pub fn identity(circuit: crate::Circuit) -> Result<String, FilecoinError> {
    Ok(format!("{} {}", circuit.id(), circuit.file_stem()?))
}

struct Compile<'a> {
    expected: usize,
    progress: &'a dyn Progress,
}

impl WithBlank for Compile<'_> {
    type Out = ConstraintMatrices;
    fn run<C: Circuit<Scalar>>(self, blank: C) -> Result<ConstraintMatrices, FilecoinError> {
        compile_matrices_with(blank, self.expected, self.progress)
            .map_err(|e| FilecoinError::Synthesis { partition: 0, message: format!("compiling the blank circuit: {e}") })
    }
}

/// Compiles `circuit`'s matrices from its blank circuit (one core; for a 32 GiB PoRep
/// partition, minutes and gigabytes).
pub fn compile(circuit: crate::Circuit, progress: &dyn Progress) -> Result<ConstraintMatrices, FilecoinError> {
    let expected = circuit.published_constraints().map(|p| p.constraints).unwrap_or(0);
    Ok(circuit.with_witness_profile(with_blank(circuit, Compile { expected, progress })?))
}

/// Compiles `circuit`'s matrices and writes them into `dir`; returns the file's path.
pub fn compile_to(circuit: crate::Circuit, dir: &Path, progress: &dyn Progress) -> Result<(PathBuf, ConstraintMatrices), FilecoinError> {
    let path = matrices_path(circuit, dir)?;
    std::fs::create_dir_all(dir).map_err(|e| FilecoinError::invalid(format!("cannot create the matrices directory {}: {e}", dir.display())))?;
    let matrices = compile(circuit, progress)?;
    write_matrices(&path, &matrices, &identity(circuit)?).map_err(|e| FilecoinError::invalid(format!("writing compiled matrices: {e}")))?;
    Ok((path, matrices))
}

/// How [`load_or_compile`] got the matrices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Read from the file (into memory: the file may change afterwards).
    Read,
    /// Compiled now (the file was missing, stale or corrupt: the reason) and written.
    Compiled(String),
}

/// `circuit`'s matrices from `dir` where its file is there and usable; None where it
/// is missing, or cannot be read, or is stale or corrupt (each but the first logged
/// with the reason and the command that makes it again): nothing is compiled here,
/// and a proof falls back to full synthesis rather than fail.
pub fn load_if_present(circuit: crate::Circuit, dir: &Path) -> Result<Option<ConstraintMatrices>, FilecoinError> {
    let path = matrices_path(circuit, dir)?;
    match read_matrices(&path, &identity(circuit)?) {
        Ok(m) => Ok(Some(circuit.with_witness_profile(m))),
        Err(MatrixFileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.needs_recompile() => {
            tracing::warn!(
                circuit = %circuit,
                path = %path.display(),
                error = %e,
                "compiled matrices unusable; `cuzk compile --circuit {} --dir {} --force` makes them again",
                circuit.id(),
                dir.display()
            );
            Ok(None)
        }
        Err(e) => {
            tracing::warn!(circuit = %circuit, path = %path.display(), error = %e, "compiled matrices cannot be read; partitions are synthesized in full");
            Ok(None)
        }
    }
}

/// `circuit`'s matrices from `dir`, compiled and written first when the file is
/// missing, stale or corrupt (logged with the reason). Other I/O failures are errors.
pub fn load_or_compile(circuit: crate::Circuit, dir: &Path, progress: &dyn Progress) -> Result<(ConstraintMatrices, Provenance), FilecoinError> {
    let path = matrices_path(circuit, dir)?;
    let reason = match read_matrices(&path, &identity(circuit)?) {
        Ok(m) => return Ok((circuit.with_witness_profile(m), Provenance::Read)),
        Err(MatrixFileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => "missing".to_string(),
        Err(e) if e.needs_recompile() => {
            tracing::warn!(circuit = %circuit, error = %e, "compiled matrices unusable; compiling them again");
            e.to_string()
        }
        Err(e) => return Err(FilecoinError::invalid(format!("reading compiled matrices: {e}"))),
    };
    tracing::info!(circuit = %circuit, path = %path.display(), reason = %reason, "compiling constraint matrices");
    compile_to(circuit, dir, progress)?;
    let m =
        read_matrices(&path, &identity(circuit)?).map_err(|e| FilecoinError::invalid(format!("reading the compiled matrices just written: {e}")))?;
    Ok((circuit.with_witness_profile(m), Provenance::Compiled(reason)))
}
