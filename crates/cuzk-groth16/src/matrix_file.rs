//! The file of a circuit shape's compiled constraint matrices: written once, then read
//! into memory when the shape's set loads (a copy: see crate::array), shared by every
//! proof of that shape.
//!
//! Layout (little-endian; every section starts at a multiple of 8 bytes, so the
//! mapped arrays are aligned):
//! - header: magic `CUZKMTX1`, format version (u32), 4 zero bytes, then u64 counts:
//!   inputs, aux, constraints, dictionary entries, non-zeros of A, B and C, and the
//!   identity's length, then the identity (UTF-8, zero-padded to 8);
//! - the dictionary (32-byte canonical scalars);
//! - for A, B, C in turn: row starts (u64), columns (u32), coefficient indices (u16);
//! - the densities' words (u64): A aux, B inputs, B aux;
//! - a 32-byte digest of everything before it: BLAKE2b-256 over the BLAKE2b-256 of
//!   each 64 MiB chunk (chunks hash in parallel: a 32 GiB PoRep file is gigabytes).
//!
//! The identity names what the matrices were compiled from (for a Filecoin circuit:
//! its id and its parameter file's name, which carries a digest of the circuit's
//! public parameters); a file with another identity or format version is stale, a
//! file whose digest or structure does not check is corrupt, and the caller recompiles.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blstrs::Scalar;
use ff::PrimeField;
use rayon::prelude::*;

use crate::array::{Array, FileBytes, Plain};
use crate::matrices::{ConstraintMatrices, SparseMatrix};
use crate::synthesis::Density;

const MAGIC: &[u8; 8] = b"CUZKMTX1";
/// Bump when the layout or the recording rules change: older files become stale.
pub const FORMAT_VERSION: u32 = 1;
const DIGEST_BYTES: usize = 32;
const CHUNK: usize = 64 << 20;
/// Header bytes before the identity: magic, version, padding, eight u64 fields.
const FIXED_HEADER: usize = 8 + 4 + 4 + 8 * 8;

#[derive(Debug, thiserror::Error)]
pub enum MatrixFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Compiled from another circuit or by another format version: recompile.
    #[error("{path}: stale compiled matrices ({reason})")]
    Stale { path: PathBuf, reason: String },
    /// Damaged or not a matrices file: recompile (and find out what damaged it).
    #[error("{path}: corrupt compiled matrices ({reason})")]
    Corrupt { path: PathBuf, reason: String },
}

impl MatrixFileError {
    /// Whether recompiling is the remedy (stale or corrupt, as opposed to I/O trouble).
    pub fn needs_recompile(&self) -> bool {
        matches!(self, MatrixFileError::Stale { .. } | MatrixFileError::Corrupt { .. })
    }
}

fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

fn as_bytes<T: Plain>(values: &[T]) -> &[u8] {
    // SAFETY: T is a plain number type (no padding, every byte initialized); the byte
    // view covers exactly the slice's memory and borrows it.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

/// The content digest of `data`.
fn digest(data: &[u8]) -> [u8; DIGEST_BYTES] {
    let chunk_digests: Vec<[u8; DIGEST_BYTES]> = data.par_chunks(CHUNK).map(|c| blake2b_256(&[c])).collect();
    let parts: Vec<&[u8]> = chunk_digests.iter().map(|d| &d[..]).collect();
    blake2b_256(&parts)
}

fn blake2b_256(parts: &[&[u8]]) -> [u8; DIGEST_BYTES] {
    let mut state = blake2b_simd::Params::new().hash_length(DIGEST_BYTES).to_state();
    for p in parts {
        state.update(p);
    }
    let mut out = [0u8; DIGEST_BYTES];
    out.copy_from_slice(state.finalize().as_bytes());
    out
}

/// Writes `m` to `path` atomically (a temporary file beside it, synced, then renamed),
/// under `identity`.
pub fn write_matrices(path: &Path, m: &ConstraintMatrices, identity: &str) -> Result<(), MatrixFileError> {
    let io = |source| MatrixFileError::Io { path: path.to_owned(), source };
    let mut bytes = Vec::with_capacity(FIXED_HEADER + pad8(identity.len()));
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    for v in [m.num_inputs, m.num_aux, m.num_constraints(), m.dictionary.len(), m.a.non_zeros(), m.b.non_zeros(), m.c.non_zeros(), identity.len()] {
        bytes.extend_from_slice(&(v as u64).to_le_bytes());
    }
    bytes.extend_from_slice(identity.as_bytes());
    bytes.resize(pad8(bytes.len()), 0);
    for s in &m.dictionary {
        bytes.extend_from_slice(&s.to_repr());
    }
    // The matrices go straight from memory to the file (gigabytes); the digest is
    // computed over the same sections in the same order.
    let mut sections: Vec<&[u8]> = vec![&bytes];
    let zeros = [0u8; 8];
    for x in [&m.a, &m.b, &m.c] {
        for s in [as_bytes(&x.row_starts), as_bytes(&x.columns), as_bytes(&x.coefficients)] {
            sections.push(s);
            sections.push(&zeros[..pad8(s.len()) - s.len()]);
        }
    }
    for d in [&m.a_aux_density, &m.b_input_density, &m.b_aux_density] {
        sections.push(as_bytes(d.words()));
    }
    let digest = digest_of_sections(&sections);
    let tmp = path.with_extension("partial");
    let mut out = BufWriter::with_capacity(8 << 20, File::create(&tmp).map_err(io)?);
    for s in &sections {
        out.write_all(s).map_err(io)?;
    }
    out.write_all(&digest).map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// The digest of the concatenation of `sections`, without concatenating them: each
/// 64 MiB chunk of the whole is gathered (across section boundaries) and hashed.
fn digest_of_sections(sections: &[&[u8]]) -> [u8; DIGEST_BYTES] {
    let total: usize = sections.iter().map(|s| s.len()).sum();
    let chunk_digests: Vec<[u8; DIGEST_BYTES]> = (0..total.div_ceil(CHUNK))
        .into_par_iter()
        .map(|k| {
            let (from, to) = (k * CHUNK, ((k + 1) * CHUNK).min(total));
            let mut parts = Vec::new();
            let mut at = 0;
            for s in sections {
                let (s_from, s_to) = (at, at + s.len());
                if s_to > from && s_from < to {
                    parts.push(&s[from.max(s_from) - s_from..to.min(s_to) - s_from]);
                }
                at = s_to;
            }
            blake2b_256(&parts)
        })
        .collect();
    let parts: Vec<&[u8]> = chunk_digests.iter().map(|d| &d[..]).collect();
    blake2b_256(&parts)
}

/// Reads `path` into memory (a copy: the file may then change or go, see
/// crate::array) and checks it: format, identity, digest, and the structure every
/// product relies on (rows in order, columns and coefficient indices in range).
pub fn read_matrices(path: &Path, identity: &str) -> Result<ConstraintMatrices, MatrixFileError> {
    let corrupt = |reason: String| MatrixFileError::Corrupt { path: path.to_owned(), reason };
    let io = |source| MatrixFileError::Io { path: path.to_owned(), source };
    let file = File::open(path).map_err(io)?;
    let copy = Arc::new(FileBytes::read(&file).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => corrupt("the file shrank while it was read".into()),
        _ => io(e),
    })?);
    let data = &copy[..];
    if data.len() < FIXED_HEADER + DIGEST_BYTES || &data[..8] != MAGIC {
        return Err(corrupt("not a compiled-matrices file".into()));
    }
    let version = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(MatrixFileError::Stale {
            path: path.to_owned(),
            reason: format!("format version {version}, this build writes {FORMAT_VERSION}"),
        });
    }
    let field = |i: usize| u64::from_le_bytes(data[16 + 8 * i..24 + 8 * i].try_into().expect("8 bytes")) as usize;
    let (num_inputs, num_aux, rows, dictionary_len) = (field(0), field(1), field(2), field(3));
    let non_zeros = [field(4), field(5), field(6)];
    let identity_len = field(7);
    let (body, stored_digest) = data.split_at(data.len() - DIGEST_BYTES);
    let mut at = FIXED_HEADER;
    let stored_identity = body.get(at..at.saturating_add(identity_len)).ok_or_else(|| corrupt("header past the end".into()))?;
    if stored_identity != identity.as_bytes() {
        let found = String::from_utf8_lossy(stored_identity);
        return Err(MatrixFileError::Stale { path: path.to_owned(), reason: format!("compiled for {found:?}, wanted {identity:?}") });
    }
    if digest(body) != stored_digest {
        return Err(corrupt("content digest does not match".into()));
    }
    at = pad8(at + identity_len);
    let mut dictionary = Vec::with_capacity(dictionary_len.min(crate::matrices::MAX_COEFFICIENTS));
    for i in 0..dictionary_len {
        let bytes: [u8; 32] = body.get(at..at + 32).and_then(|b| b.try_into().ok()).ok_or_else(|| corrupt("dictionary past the end".into()))?;
        let s = Option::<Scalar>::from(Scalar::from_repr(bytes)).ok_or_else(|| corrupt(format!("dictionary entry {i} is not a canonical scalar")))?;
        dictionary.push(s);
        at += 32;
    }
    let mut take = |len: usize, what: &str| -> Result<(usize, usize), MatrixFileError> {
        let from = at;
        at = pad8(at + len);
        (at <= body.len()).then_some((from, len)).ok_or_else(|| corrupt(format!("{what} past the end")))
    };
    let mut matrices = Vec::with_capacity(3);
    for (name, nnz) in ["A", "B", "C"].into_iter().zip(non_zeros) {
        let (o_rows, _) = take((rows + 1) * 8, name)?;
        let (o_cols, _) = take(nnz * 4, name)?;
        let (o_coef, _) = take(nnz * 2, name)?;
        fn array<T: Plain>(copy: &Arc<FileBytes>, offset: usize, len: usize) -> Option<Array<T>> {
            Array::in_file(copy.clone(), offset, len)
        }
        let misplaced = || corrupt(format!("{name} misplaced"));
        matrices.push(SparseMatrix {
            row_starts: array(&copy, o_rows, rows + 1).ok_or_else(misplaced)?,
            columns: array(&copy, o_cols, nnz).ok_or_else(misplaced)?,
            coefficients: array(&copy, o_coef, nnz).ok_or_else(misplaced)?,
        });
    }
    let mut densities = Vec::with_capacity(3);
    for len in [num_aux, num_inputs, num_aux] {
        let (o, n) = take(len.div_ceil(64) * 8, "densities")?;
        densities
            .push(Density::from_words(body[o..o + n].chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))).collect(), len));
    }
    if at != body.len() {
        return Err(corrupt(format!("{} unexpected bytes before the digest", body.len() - at)));
    }
    let variables = num_inputs + num_aux;
    for (name, m) in ["A", "B", "C"].iter().zip(&matrices) {
        check_structure(m, variables, dictionary.len()).map_err(|reason| corrupt(format!("matrix {name}: {reason}")))?;
    }
    let [a, b, c]: [SparseMatrix; 3] = matrices.try_into().expect("three matrices");
    let [a_aux_density, b_input_density, b_aux_density]: [Density; 3] = densities.try_into().expect("three densities");
    Ok(ConstraintMatrices { num_inputs, num_aux, a, b, c, dictionary, a_aux_density, b_input_density, b_aux_density, significant_aux: None })
}

/// Rows in order from 0 to the non-zero count, columns below `variables`, coefficient
/// indices inside the dictionary (checked in parallel: one pass over the arrays).
fn check_structure(m: &SparseMatrix, variables: usize, dictionary: usize) -> Result<(), String> {
    let starts = &m.row_starts[..];
    if starts.first() != Some(&0) || starts.last().map(|&l| l as usize) != Some(m.columns.len()) {
        return Err("row starts do not span the non-zeros".into());
    }
    if !starts.par_windows(2).all(|w| w[0] <= w[1]) {
        return Err("row starts out of order".into());
    }
    if !m.columns.par_iter().all(|&c| (c as usize) < variables) {
        return Err(format!("a column past the {variables} variables"));
    }
    if !m.coefficients.par_iter().all(|&k| (k as usize) < dictionary) {
        return Err(format!("a coefficient index past the {dictionary} entries"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrices::compile_matrices;
    use crate::synthesis::{synthesize, EvalBuffers};
    use crate::synthetic::SyntheticShape;
    use crate::witness::synthesize_witness;

    fn buffers() -> EvalBuffers {
        EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) }
    }

    #[test]
    fn a_written_file_reads_back_to_the_same_matrices_and_products_and_outlives_its_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shape.matrices");
        let shape = SyntheticShape::for_domain(12);
        let compiled = compile_matrices(shape.circuit(0)).unwrap();
        write_matrices(&path, &compiled, "synthetic-2^12").unwrap();
        let mapped = read_matrices(&path, "synthetic-2^12").unwrap();
        assert!(matches!(mapped.a.columns, Array::InFile { .. }), "shared from the file's copy");
        assert_eq!(mapped, compiled);
        // Truncated in place, as `cp` over it does (a mapping would now raise SIGBUS
        // at the products below): what was read stays.
        std::fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
        let full = synthesize(shape.circuit(4)).unwrap();
        let s = crate::synthesis::SynthesizedCircuit::from_matrices(&mapped, synthesize_witness(shape.circuit(4), 0).unwrap(), buffers()).unwrap();
        assert!(s.a.as_slice() == full.a.as_slice() && s.b.as_slice() == full.b.as_slice() && s.c.as_slice() == full.c.as_slice());
        assert!(!path.with_extension("partial").exists(), "no temporary left");
    }

    #[test]
    fn another_identity_or_version_is_stale_and_damage_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shape.matrices");
        write_matrices(&path, &compile_matrices(SyntheticShape::for_domain(8).circuit(0)).unwrap(), "one").unwrap();
        let err = read_matrices(&path, "two").unwrap_err();
        assert!(matches!(err, MatrixFileError::Stale { .. }) && err.needs_recompile(), "{err}");
        assert!(err.to_string().contains("\"one\""), "{err}");

        let good = std::fs::read(&path).unwrap();
        let mut old = good.clone();
        old[8] = 0;
        std::fs::write(&path, &old).unwrap();
        assert!(matches!(read_matrices(&path, "one"), Err(MatrixFileError::Stale { .. })), "another format version");

        for (what, damage) in [("a flipped bit", good.len() / 2), ("the digest", good.len() - 1)] {
            let mut bad = good.clone();
            bad[damage] ^= 1;
            std::fs::write(&path, &bad).unwrap();
            let err = read_matrices(&path, "one").unwrap_err();
            assert!(matches!(err, MatrixFileError::Corrupt { .. }), "{what}: {err}");
        }
        std::fs::write(&path, &good[..good.len() - 100]).unwrap();
        assert!(matches!(read_matrices(&path, "one"), Err(MatrixFileError::Corrupt { .. })), "truncated");
        std::fs::write(&path, b"not a matrices file at all, not at all, no").unwrap();
        assert!(read_matrices(&path, "one").unwrap_err().to_string().contains("not a compiled-matrices file"));
        let err = read_matrices(&dir.path().join("missing"), "one").unwrap_err();
        assert!(matches!(err, MatrixFileError::Io { .. }) && !err.needs_recompile());
    }

    #[test]
    fn the_digest_of_sections_is_the_digest_of_their_concatenation() {
        let a: Vec<u8> = (0..(CHUNK + 100)).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..(CHUNK / 2)).map(|i| (i % 13) as u8).collect();
        let sections: Vec<&[u8]> = vec![&a[..10], &a[10..], &[], &b];
        assert_eq!(digest_of_sections(&sections), digest(&sections.concat()));
    }
}
