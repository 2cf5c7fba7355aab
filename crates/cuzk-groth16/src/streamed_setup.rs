//! A setup written as it is made, from a circuit's compiled matrices: the 32 GiB
//! circuits' parameters (47–61 GB of points) never sit in memory whole.
//!
//! The same maths as [`crate::generator`]: the Lagrange basis at τ from one inverse NTT
//! of τ's powers; each variable's uᵢ(τ), vᵢ(τ), wᵢ(τ) the sum of its column of A, B, C
//! against that basis; the queries' scalars from them; every point a fixed-base
//! multiplication. Here the columns are summed from the compressed rows through one
//! transposition per matrix (a column's entries gathered by atomic cursors, then summed
//! in parallel), and each query's points are made and written a batch at a time, so
//! the memory is the matrices, u, v and w (96 bytes a variable), one query's scalars
//! and one batch of points. For the same secrets the file equals, byte for byte, what
//! [`crate::generator::generate_parameters_with`] makes from the circuit.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use blstrs::{G1Affine, G2Affine, Scalar};
use ff::Field;
use rayon::prelude::*;

use crate::domain::{powers, Domain};
use crate::format::{write_file_atomically, FilePoint, FormatError};
use crate::generator::{query_scalars, verifying_key, FixedBaseMul, QapAtTau, SetupError, ToxicWaste};
use crate::matrices::{ConstraintMatrices, SparseMatrix};
use crate::params::{QueryLens, VerifyingKey};
use crate::progress::Progress;

/// Points made and written per step: 2^22 G1 points are 403 MB in memory.
const BATCH: usize = 1 << 22;

/// What a streamed setup wrote.
#[derive(Clone, Debug)]
pub struct WrittenSetup {
    pub vk: VerifyingKey,
    pub lens: QueryLens,
}

/// Σ over each column of `x` of coefficient · lagrange[row]: one value per variable
/// (inputs first, as the matrices' columns are).
fn column_sums(x: &SparseMatrix, dictionary: &[Scalar], lagrange: &[Scalar], vars: usize) -> Vec<Scalar> {
    let columns = &x.columns[..];
    let coefficients = &x.coefficients[..];
    let row_starts = &x.row_starts[..];
    // Entries per column, then where each column's entries start.
    let counts: Vec<AtomicU32> = (0..vars).into_par_iter().map(|_| AtomicU32::new(0)).collect();
    columns.par_iter().for_each(|&c| {
        counts[c as usize].fetch_add(1, Ordering::Relaxed);
    });
    let mut starts = Vec::with_capacity(vars + 1);
    let mut at = 0u64;
    for c in &counts {
        starts.push(at);
        at += c.swap(0, Ordering::Relaxed) as u64;
    }
    starts.push(at);
    // Each entry as (row << 16 | coefficient index), in its column's range; the order
    // within a column is any (the sum is exact).
    let entries: Vec<AtomicU64> = (0..columns.len()).into_par_iter().map(|_| AtomicU64::new(0)).collect();
    (0..x.rows()).into_par_iter().with_min_len(1 << 12).for_each(|r| {
        for k in row_starts[r] as usize..row_starts[r + 1] as usize {
            let c = columns[k] as usize;
            let slot = starts[c] + counts[c].fetch_add(1, Ordering::Relaxed) as u64;
            entries[slot as usize].store(((r as u64) << 16) | coefficients[k] as u64, Ordering::Relaxed);
        }
    });
    (0..vars)
        .into_par_iter()
        .with_min_len(1 << 12)
        .map(|c| {
            entries[starts[c] as usize..starts[c + 1] as usize].iter().fold(Scalar::ZERO, |sum, e| {
                let e = e.load(Ordering::Relaxed);
                let (row, coefficient) = ((e >> 16) as usize, (e & 0xffff) as usize);
                // The dictionary's first two are one and minus one (crate::matrices).
                match coefficient {
                    0 => sum + lagrange[row],
                    1 => sum - lagrange[row],
                    k => sum + dictionary[k] * lagrange[row],
                }
            })
        })
        .collect()
}

/// uᵢ(τ), vᵢ(τ) or wᵢ(τ) for every variable, split into inputs and aux.
fn qap_at_tau(x: &SparseMatrix, m: &ConstraintMatrices, lagrange: &[Scalar]) -> QapAtTau {
    let mut all = column_sums(x, &m.dictionary, lagrange, m.num_inputs + m.num_aux);
    let aux = all.split_off(m.num_inputs);
    QapAtTau { input: all, aux }
}

/// A section: its count, then `n` points, k·G for the scalars `scalars(range)` gives,
/// made by `mul` `batch` at a time.
fn write_section<P: FilePoint>(
    out: &mut impl Write,
    n: usize,
    batch: usize,
    scalars: impl Fn(std::ops::Range<usize>) -> Vec<Scalar>,
    mul: impl Fn(&[Scalar]) -> Result<Vec<P>, SetupError>,
) -> Result<(), SetupError> {
    let count = u32::try_from(n).map_err(|_| SetupError::Write(format!("a section of {n} points: more than 2^32 − 1")))?;
    let io = |e: std::io::Error| SetupError::Write(e.to_string());
    out.write_all(&count.to_be_bytes()).map_err(io)?;
    let mut bytes = Vec::new();
    for first in (0..n).step_by(batch.max(1)) {
        let range = first..(first + batch.max(1)).min(n);
        let ks = scalars(range.clone());
        let points = mul(&ks)?;
        if points.len() != ks.len() {
            return Err(SetupError::FixedBase { on: "the multiplier".into(), reason: format!("{} points for {} scalars", points.len(), ks.len()) });
        }
        bytes.resize(points.len() * P::BYTES, 0);
        bytes.par_chunks_mut(P::BYTES).zip(points.par_iter()).for_each(|(b, p)| p.encode(b));
        out.write_all(&bytes).map_err(io)?;
    }
    Ok(())
}

/// Writes the parameters of the circuit `m` was compiled from, for the secrets `tw`,
/// to `params_path` and its `.vk`, each whole or not at all.
pub fn write_parameters_from_matrices(
    m: &ConstraintMatrices,
    tw: &ToxicWaste,
    mul: &dyn FixedBaseMul,
    params_path: &Path,
    progress: &dyn Progress,
) -> Result<WrittenSetup, SetupError> {
    write_in_batches(m, tw, mul, params_path, progress, BATCH)
}

fn write_in_batches(
    m: &ConstraintMatrices,
    tw: &ToxicWaste,
    mul: &dyn FixedBaseMul,
    params_path: &Path,
    progress: &dyn Progress,
    batch: usize,
) -> Result<WrittenSetup, SetupError> {
    if [tw.tau, tw.alpha, tw.beta, tw.gamma, tw.delta].iter().any(|x| x.is_zero_vartime()) {
        return Err(SetupError::ZeroSecret);
    }
    let domain = Domain::for_size(m.num_constraints())?;
    let size = domain.size();
    if tw.tau.pow_vartime([size as u64]) == Scalar::ONE {
        return Err(SetupError::ZeroSecret);
    }
    let t = std::time::Instant::now();
    progress.stage("setup: the QAP at τ (A, B, C)", 3);
    let mut lagrange = powers(tw.tau, Scalar::ONE, size);
    domain.ifft(&mut lagrange);
    let u = qap_at_tau(&m.a, m, &lagrange);
    progress.advance(1);
    let v = qap_at_tau(&m.b, m, &lagrange);
    progress.advance(1);
    let w = qap_at_tau(&m.c, m, &lagrange);
    progress.advance(1);
    drop(lagrange);
    tracing::info!(domain = size, inputs = m.num_inputs, aux = m.num_aux, secs = t.elapsed().as_secs_f64(), "setup: QAP evaluated at τ");
    let q = query_scalars(tw, u, v, w, &m.a_aux_density, &m.b_input_density, &m.b_aux_density)?;
    let h_len = size - 1;
    let z_over_delta = domain.vanishing_at(tw.tau) * q.delta_inv;
    let lens = QueryLens { h: h_len, l: q.l.len(), a: q.a.len(), b_g1: q.b.len(), b_g2: q.b.len() };

    let t = std::time::Instant::now();
    progress.stage(&format!("setup: G1 points ({})", mul.name()), (q.ic.len() + h_len + lens.l + lens.a + lens.b_g1) as u64);
    let ic = mul.g1(&q.ic, progress)?;
    if ic.len() != q.ic.len() {
        return Err(SetupError::FixedBase { on: mul.name(), reason: format!("IC: {} points for {} scalars", ic.len(), q.ic.len()) });
    }
    let vk = verifying_key(tw, ic);
    let g1 = |ks: &[Scalar]| mul.g1(ks, progress);
    let g2 = |ks: &[Scalar]| mul.g2(ks, progress);
    let mut failed = None;
    let written = write_file_atomically(params_path, |out| {
        let run = |out: &mut std::io::BufWriter<std::fs::File>| -> Result<(), SetupError> {
            crate::format::write_vk(out, &vk).map_err(|e| SetupError::Write(e.to_string()))?;
            let tau = tw.tau;
            write_section::<G1Affine>(out, h_len, batch, |r| powers(tau, tau.pow_vartime([r.start as u64]) * z_over_delta, r.len()), g1)?;
            write_section::<G1Affine>(out, lens.l, batch, |r| q.l[r].to_vec(), g1)?;
            write_section::<G1Affine>(out, lens.a, batch, |r| q.a[r].to_vec(), g1)?;
            write_section::<G1Affine>(out, lens.b_g1, batch, |r| q.b[r].to_vec(), g1)?;
            progress.stage(&format!("setup: G2 points ({})", mul.name()), lens.b_g2 as u64);
            write_section::<G2Affine>(out, lens.b_g2, batch, |r| q.b[r].to_vec(), g2)
        };
        run(out).map_err(|e| {
            let message = e.to_string();
            failed = Some(e);
            std::io::Error::other(message)
        })
    });
    if let Some(e) = failed {
        return Err(e);
    }
    written.map_err(|e| SetupError::Write(e.to_string()))?;
    let vk_path = crate::format::vk_path_for(params_path).map_err(|e: FormatError| SetupError::Write(e.to_string()))?;
    write_file_atomically(&vk_path, |f| crate::format::write_vk(f, &vk)).map_err(|e| SetupError::Write(e.to_string()))?;
    tracing::info!(on = %mul.name(), secs = t.elapsed().as_secs_f64(), "setup: points made and written");
    Ok(WrittenSetup { vk, lens })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{generate_parameters_with, CpuFixedBase};
    use crate::matrices::compile_matrices;
    use crate::progress::NoProgress;
    use crate::synthetic::SyntheticShape;
    use rand::SeedableRng;

    /// For the same secrets, the file written from the compiled matrices a few points at
    /// a time (batches that cut every section, H's powers continued across them) is the
    /// in-memory setup's, byte for byte, and so is its .vk.
    #[test]
    fn the_streamed_setup_writes_the_in_memory_setups_file() {
        let shape = SyntheticShape::for_domain(9);
        let tw = ToxicWaste::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(17));
        let mul = CpuFixedBase::new();
        let dir = tempfile::tempdir().unwrap();
        let (want, got) = (dir.path().join("want.params"), dir.path().join("got.params"));
        crate::format::save(&generate_parameters_with(shape.circuit(0), &tw, &mul, &NoProgress).unwrap(), &want).unwrap();
        let m = compile_matrices(shape.circuit(0)).unwrap();
        let written = write_in_batches(&m, &tw, &mul, &got, &NoProgress, 37).unwrap();
        assert_eq!(std::fs::read(&got).unwrap(), std::fs::read(&want).unwrap(), "params differ");
        assert_eq!(std::fs::read(got.with_extension("vk")).unwrap(), std::fs::read(want.with_extension("vk")).unwrap(), "vk differs");
        let p = crate::format::read_params(&got, crate::format::PointCheck::Subgroup).unwrap();
        assert_eq!(p.lens(), written.lens);
        assert!(written.lens.h > 37 && written.lens.l > 37, "{:?}", written.lens);
    }

    /// Secrets that make no setup are refused before anything is written.
    #[test]
    fn a_zero_secret_writes_nothing() {
        let shape = SyntheticShape::for_domain(6);
        let m = compile_matrices(shape.circuit(0)).unwrap();
        let mut tw = ToxicWaste::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(3));
        tw.delta = Scalar::ZERO;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.params");
        assert!(matches!(write_parameters_from_matrices(&m, &tw, &CpuFixedBase::new(), &path, &NoProgress), Err(SetupError::ZeroSecret)));
        assert!(!path.exists());
    }
}
