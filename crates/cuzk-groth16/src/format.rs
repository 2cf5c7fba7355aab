//! The `.params` and `.vk` file layout of bellperson and Filecoin.
//!
//! A `.vk` file is α_G1, β_G1, β_G2, γ_G2, δ_G1, δ_G2, a big-endian u32 count and that
//! many IC points. A `.params` file is the verifying key followed by the H, L, A, B_G1
//! and B_G2 queries, each a big-endian u32 count and the points. Every point is
//! uncompressed (G1: 96 bytes, x‖y; G2: 192 bytes, x.c1‖x.c0‖y.c1‖y.c0), with flag bits
//! in the top three bits of the first byte. There is no padding and nothing after B_G2.
//!
//! Reading maps the file and decodes the points in parallel; every malformation is an
//! error naming the section and byte offset.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use blstrs::{G1Affine, G2Affine};
use rayon::prelude::*;

use crate::params::{ParameterSet, VerifyingKey};
use crate::{NoProgress, Progress};

const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;
/// Flag bits in the first byte of an encoded point.
const FLAG_COMPRESSED: u8 = 0x80;
const FLAG_INFINITY: u8 = 0x40;

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("truncated in section {section} at byte offset {offset}: {needed} bytes needed, {available} left")]
    Truncated { section: &'static str, offset: u64, needed: u64, available: u64 },
    #[error("section {section}, point {index} at byte offset {offset}: {reason}")]
    InvalidPoint { section: &'static str, index: usize, offset: u64, reason: &'static str },
    #[error("{len} unexpected bytes after the last section, at byte offset {offset}")]
    TrailingData { offset: u64, len: u64 },
    #[error("inconsistent parameters: {0}")]
    Inconsistent(String),
}

/// How carefully points are checked when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointCheck {
    /// Each point must be on its curve (always done; cheap).
    OnCurve,
    /// Also in the prime-order subgroup (costs about a scalar multiplication per point).
    Subgroup,
}

/// A point type stored in these files.
trait FilePoint: Sized + Copy + Send + Sync {
    const BYTES: usize;
    fn encode(&self, out: &mut [u8]);
    /// Decodes an uncompressed point; `None` if it is not on the curve.
    fn decode(bytes: &[u8]) -> Option<Self>;
    fn in_subgroup(&self) -> bool;
}

macro_rules! impl_file_point {
    ($t:ty, $n:expr) => {
        impl FilePoint for $t {
            const BYTES: usize = $n;
            fn encode(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_uncompressed());
            }
            fn decode(bytes: &[u8]) -> Option<Self> {
                let arr: &[u8; $n] = bytes.try_into().ok()?;
                // blst's decoder rejects points off the curve and bad infinity encodings.
                Option::from(<$t>::from_uncompressed_unchecked(arr))
            }
            fn in_subgroup(&self) -> bool {
                bool::from(self.is_torsion_free())
            }
        }
    };
}
impl_file_point!(G1Affine, G1_BYTES);
impl_file_point!(G2Affine, G2_BYTES);

/// A reading position in a byte buffer, for error offsets.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    check: PointCheck,
    progress: &'a dyn Progress,
}

/// Points decoded between two progress reports.
const PROGRESS_EVERY: usize = 1 << 16;

impl<'a> Cursor<'a> {
    fn take(&mut self, section: &'static str, n: u64) -> Result<&'a [u8], FormatError> {
        let available = (self.data.len() - self.pos) as u64;
        if n > available {
            return Err(FormatError::Truncated { section, offset: self.pos as u64, needed: n, available });
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn count(&mut self, section: &'static str) -> Result<usize, FormatError> {
        let b = self.take(section, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn points<P: FilePoint>(&mut self, section: &'static str, n: usize) -> Result<Vec<P>, FormatError> {
        let start = self.pos as u64;
        let bytes = self.take(section, (n * P::BYTES) as u64)?;
        let (check, progress) = (self.check, self.progress);
        if n >= PROGRESS_EVERY {
            progress.stage(&format!("reading {section}"), n as u64);
        }
        // Collecting into Result<Vec<_>> writes the points straight into the vector
        // (no per-point Result buffer); on failure one of the errors is returned.
        let points = bytes
            .par_chunks_exact(P::BYTES)
            .enumerate()
            .map(|(index, b)| {
                if index % PROGRESS_EVERY == PROGRESS_EVERY - 1 {
                    progress.advance(PROGRESS_EVERY as u64);
                }
                let err = |reason| FormatError::InvalidPoint {
                    section,
                    index,
                    offset: start + (index * P::BYTES) as u64,
                    reason,
                };
                if b[0] & FLAG_COMPRESSED != 0 {
                    return Err(err("compressed flag set in an uncompressed point"));
                }
                let p = P::decode(b).ok_or_else(|| {
                    err(if b[0] & FLAG_INFINITY != 0 {
                        "malformed point at infinity"
                    } else {
                        "not a point on the curve"
                    })
                })?;
                if check == PointCheck::Subgroup && !p.in_subgroup() {
                    return Err(err("not in the prime-order subgroup"));
                }
                Ok(p)
            })
            .collect();
        if n >= PROGRESS_EVERY {
            progress.advance((n % PROGRESS_EVERY) as u64);
        }
        points
    }

    fn counted<P: FilePoint>(&mut self, section: &'static str) -> Result<Vec<P>, FormatError> {
        let n = self.count(section)?;
        self.points(section, n)
    }

    fn one<P: FilePoint>(&mut self, section: &'static str) -> Result<P, FormatError> {
        Ok(self.points::<P>(section, 1)?[0])
    }

    fn finish(&self) -> Result<(), FormatError> {
        if self.pos != self.data.len() {
            return Err(FormatError::TrailingData {
                offset: self.pos as u64,
                len: (self.data.len() - self.pos) as u64,
            });
        }
        Ok(())
    }
}

fn read_vk_from(c: &mut Cursor<'_>) -> Result<VerifyingKey, FormatError> {
    Ok(VerifyingKey {
        alpha_g1: c.one("vk.alpha_g1")?,
        beta_g1: c.one("vk.beta_g1")?,
        beta_g2: c.one("vk.beta_g2")?,
        gamma_g2: c.one("vk.gamma_g2")?,
        delta_g1: c.one("vk.delta_g1")?,
        delta_g2: c.one("vk.delta_g2")?,
        ic: c.counted("vk.ic")?,
    })
}

/// Decodes a verifying key (a whole `.vk` file).
pub fn decode_vk(data: &[u8], check: PointCheck) -> Result<VerifyingKey, FormatError> {
    let mut c = Cursor { data, pos: 0, check, progress: &NoProgress };
    let vk = read_vk_from(&mut c)?;
    c.finish()?;
    if vk.ic.is_empty() {
        return Err(FormatError::Inconsistent("IC is empty; it needs at least the constant input".into()));
    }
    Ok(vk)
}

/// Decodes a whole `.params` file.
pub fn decode_params(data: &[u8], check: PointCheck) -> Result<ParameterSet, FormatError> {
    decode_params_with(data, check, &NoProgress)
}

fn decode_params_with(data: &[u8], check: PointCheck, progress: &dyn Progress) -> Result<ParameterSet, FormatError> {
    let mut c = Cursor { data, pos: 0, check, progress };
    let vk = read_vk_from(&mut c)?;
    let h = c.counted("h")?;
    let l = c.counted("l")?;
    let a = c.counted("a")?;
    let b_g1 = c.counted("b_g1")?;
    let b_g2 = c.counted("b_g2")?;
    c.finish()?;
    let domain = h.len() + 1;
    if !domain.is_power_of_two() {
        return Err(FormatError::Inconsistent(format!(
            "H has {} points; a domain of 2^k elements needs 2^k − 1",
            h.len()
        )));
    }
    if b_g1.len() != b_g2.len() {
        return Err(FormatError::Inconsistent(format!(
            "B_G1 has {} points but B_G2 has {}",
            b_g1.len(),
            b_g2.len()
        )));
    }
    if vk.ic.is_empty() || a.len() < vk.ic.len() {
        return Err(FormatError::Inconsistent(format!(
            "A has {} points, fewer than the {} public inputs (IC)",
            a.len(),
            vk.ic.len()
        )));
    }
    Ok(ParameterSet::new(vk, h, l, a, b_g1, b_g2))
}

fn map_file(path: &Path) -> Result<memmap2::Mmap, FormatError> {
    let io = |source| FormatError::Io { path: path.to_owned(), source };
    let file = File::open(path).map_err(io)?;
    // SAFETY: requires that no process modifies or truncates the file while it is
    // mapped (parameter files are written once and then only read). If one does, the
    // read may see torn data or the process may get SIGBUS: operators must not replace
    // a parameter file in place while cuzk reads it (write a new file and rename).
    unsafe { memmap2::Mmap::map(&file) }.map_err(io)
}

/// Reads a `.params` file (memory-mapped, decoded in parallel).
pub fn read_params(path: &Path, check: PointCheck) -> Result<ParameterSet, FormatError> {
    read_params_with(path, check, &NoProgress)
}

/// [`read_params`], reporting each section's decoding to `progress` (a C2 file holds
/// 460 million points: tens of seconds).
pub fn read_params_with(path: &Path, check: PointCheck, progress: &dyn Progress) -> Result<ParameterSet, FormatError> {
    decode_params_with(&map_file(path)?, check, progress)
}

/// The evaluation domain size of a `.params` file, from its header alone (the
/// verifying key is skipped, H's count read): sizes buffers before the points load.
pub fn read_params_domain_size(path: &Path) -> Result<usize, FormatError> {
    let data = map_file(path)?;
    let mut c = Cursor { data: &data, pos: 0, check: PointCheck::OnCurve, progress: &NoProgress };
    c.take("vk", (3 * G1_BYTES + 3 * G2_BYTES) as u64)?;
    let ic = c.count("vk.ic")?;
    c.take("vk.ic", (ic * G1_BYTES) as u64)?;
    let domain = c.count("h")? + 1;
    if !domain.is_power_of_two() {
        return Err(FormatError::Inconsistent(format!("H has {} points; a domain of 2^k elements needs 2^k − 1", domain - 1)));
    }
    Ok(domain)
}

/// Reads a `.vk` file (small: read, not mapped).
pub fn read_vk(path: &Path, check: PointCheck) -> Result<VerifyingKey, FormatError> {
    let data = std::fs::read(path).map_err(|source| FormatError::Io { path: path.to_owned(), source })?;
    decode_vk(&data, check)
}

fn encode_points<P: FilePoint>(points: &[P]) -> Vec<u8> {
    let mut out = vec![0u8; 4 + points.len() * P::BYTES];
    out[..4].copy_from_slice(&(points.len() as u32).to_be_bytes());
    out[4..].par_chunks_exact_mut(P::BYTES).zip(points.par_iter()).for_each(|(o, p)| p.encode(o));
    out
}

fn encode_one<P: FilePoint>(p: &P) -> Vec<u8> {
    let mut out = vec![0u8; P::BYTES];
    p.encode(&mut out);
    out
}

/// Writes a verifying key in the `.vk` layout.
pub fn write_vk<W: Write>(w: &mut W, vk: &VerifyingKey) -> io::Result<()> {
    w.write_all(&encode_one(&vk.alpha_g1))?;
    w.write_all(&encode_one(&vk.beta_g1))?;
    w.write_all(&encode_one(&vk.beta_g2))?;
    w.write_all(&encode_one(&vk.gamma_g2))?;
    w.write_all(&encode_one(&vk.delta_g1))?;
    w.write_all(&encode_one(&vk.delta_g2))?;
    w.write_all(&encode_points(&vk.ic))
}

/// Writes a parameter set in the `.params` layout.
pub fn write_params<W: Write>(w: &mut W, p: &ParameterSet) -> io::Result<()> {
    for (name, n) in [("H", p.h.len()), ("L", p.l.len()), ("A", p.a.len()), ("B", p.b_g1.len())] {
        if n > u32::MAX as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name} has more than 2^32 − 1 points")));
        }
    }
    write_vk(w, &p.vk)?;
    w.write_all(&encode_points(&p.h))?;
    w.write_all(&encode_points(&p.l))?;
    w.write_all(&encode_points(&p.a))?;
    w.write_all(&encode_points(&p.b_g1))?;
    w.write_all(&encode_points(&p.b_g2))
}

/// Writes `<stem>.params` and `<stem>.vk` side by side.
pub fn save(params: &ParameterSet, params_path: &Path) -> Result<(), FormatError> {
    fn io(path: &Path) -> impl FnOnce(io::Error) -> FormatError + '_ {
        move |source| FormatError::Io { path: path.to_owned(), source }
    }
    let vk_path = params_path.with_extension("vk");
    if vk_path == params_path {
        return Err(FormatError::Io {
            path: params_path.to_owned(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "the parameter file must not end in .vk"),
        });
    }
    let mut f = io::BufWriter::new(File::create(params_path).map_err(io(params_path))?);
    write_params(&mut f, params).and_then(|_| f.flush()).map_err(io(params_path))?;
    let mut f = io::BufWriter::new(File::create(&vk_path).map_err(io(&vk_path))?);
    write_vk(&mut f, &params.vk).and_then(|_| f.flush()).map_err(io(&vk_path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Projective, G2Projective};
    use group::{prime::PrimeCurveAffine, Curve, Group};
    use rand::SeedableRng;

    fn sample() -> ParameterSet {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let g1 = |rng: &mut rand_chacha::ChaCha20Rng, n| -> Vec<G1Affine> {
            (0..n).map(|_| G1Projective::random(&mut *rng).to_affine()).collect()
        };
        let g2 = |rng: &mut rand_chacha::ChaCha20Rng, n| -> Vec<G2Affine> {
            (0..n).map(|_| G2Projective::random(&mut *rng).to_affine()).collect()
        };
        let vk = VerifyingKey {
            alpha_g1: g1(&mut rng, 1)[0],
            beta_g1: g1(&mut rng, 1)[0],
            beta_g2: g2(&mut rng, 1)[0],
            gamma_g2: g2(&mut rng, 1)[0],
            delta_g1: g1(&mut rng, 1)[0],
            delta_g2: g2(&mut rng, 1)[0],
            ic: g1(&mut rng, 2),
        };
        let mut l = g1(&mut rng, 5);
        l[2] = G1Affine::identity();
        ParameterSet::new(vk, g1(&mut rng, 7), l, g1(&mut rng, 6), g1(&mut rng, 3), g2(&mut rng, 3))
    }

    fn bytes(p: &ParameterSet) -> Vec<u8> {
        let mut v = Vec::new();
        write_params(&mut v, p).unwrap();
        v
    }

    /// Byte offsets of the sections in `sample()`'s encoding.
    const VK_FIXED: usize = 3 * 96 + 3 * 192;
    const H_AT: usize = VK_FIXED + 4 + 2 * 96; // count of H
    const L_AT: usize = H_AT + 4 + 7 * 96;
    const B_G2_AT: usize = L_AT + 4 + 5 * 96 + 4 + 6 * 96 + 4 + 3 * 96;

    #[test]
    fn roundtrip_file_and_bytes() {
        let p = sample();
        let b = bytes(&p);
        assert_eq!(b.len(), B_G2_AT + 4 + 3 * 192);
        assert_eq!(decode_params(&b, PointCheck::Subgroup).unwrap(), p);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.params");
        save(&p, &path).unwrap();
        assert_eq!(read_params(&path, PointCheck::OnCurve).unwrap(), p);
        assert_eq!(read_vk(&path.with_extension("vk"), PointCheck::Subgroup).unwrap(), p.vk);
        assert_eq!(read_params_domain_size(&path).unwrap(), p.domain_size());
        assert!(matches!(read_params_domain_size(&path.with_extension("vk")), Err(FormatError::Truncated { section: "h", .. })));
        assert_eq!(G1Affine::identity().to_uncompressed()[0], FLAG_INFINITY);
    }

    #[test]
    fn truncation_names_section_and_offset() {
        let b = bytes(&sample());
        match decode_params(&b[..L_AT + 10], PointCheck::OnCurve) {
            Err(FormatError::Truncated { section: "l", offset, needed, available }) => {
                assert_eq!(offset as usize, L_AT + 4);
                assert_eq!(needed, 5 * 96);
                assert_eq!(available, 6);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            decode_params(&b[..100], PointCheck::OnCurve),
            Err(FormatError::Truncated { section: "vk.beta_g1", .. })
        ));
        assert!(matches!(
            decode_params(&b[..B_G2_AT + 2], PointCheck::OnCurve),
            Err(FormatError::Truncated { section: "b_g2", .. })
        ));
        assert!(matches!(decode_params(&[], PointCheck::OnCurve), Err(FormatError::Truncated { offset: 0, .. })));
    }

    #[test]
    fn miscount_is_detected() {
        // H claims one point more than it has: everything after shifts, so L's count
        // is read from inside a point and the file runs out.
        let mut b = bytes(&sample());
        b[H_AT + 3] = 8;
        assert!(decode_params(&b, PointCheck::OnCurve).is_err());
        // B_G2 claims one point fewer: bytes are left over.
        let mut b = bytes(&sample());
        b[B_G2_AT + 3] = 2;
        assert!(matches!(
            decode_params(&b, PointCheck::OnCurve),
            Err(FormatError::TrailingData { len: 192, .. })
        ));
        // Extra bytes at the end.
        let mut b = bytes(&sample());
        b.push(0);
        assert!(matches!(decode_params(&b, PointCheck::OnCurve), Err(FormatError::TrailingData { len: 1, .. })));
    }

    #[test]
    fn corrupted_points_name_section_index_offset() {
        let b0 = bytes(&sample());
        // Flip a bit in the y coordinate of L[1]: off the curve.
        let mut b = b0.clone();
        let at = L_AT + 4 + 96 + 90;
        b[at] ^= 1;
        match decode_params(&b, PointCheck::OnCurve) {
            Err(FormatError::InvalidPoint { section: "l", index: 1, offset, .. }) => {
                assert_eq!(offset as usize, L_AT + 4 + 96)
            }
            other => panic!("unexpected {other:?}"),
        }
        // Compressed flag in an uncompressed file.
        let mut b = b0.clone();
        b[L_AT + 4] |= FLAG_COMPRESSED;
        assert!(matches!(
            decode_params(&b, PointCheck::OnCurve),
            Err(FormatError::InvalidPoint { section: "l", index: 0, .. })
        ));
        // Corrupt G2 point in the verifying key.
        let mut b = b0.clone();
        b[2 * 96 + 192 + 100] ^= 4;
        assert!(matches!(
            decode_params(&b, PointCheck::OnCurve),
            Err(FormatError::InvalidPoint { section: "vk.gamma_g2", .. })
        ));
    }

    /// A point on the G1 curve outside the prime-order subgroup (a random curve point
    /// almost never lies in it: the cofactor is about 2^126).
    fn point_outside_subgroup() -> G1Affine {
        use ff::Field;
        (1u64..)
            .find_map(|x| {
                let x = blstrs::Fp::from(x);
                let y = Option::<blstrs::Fp>::from((x.square() * x + blstrs::Fp::from(4u64)).sqrt())?;
                let p = G1Affine::from_raw_unchecked(x, y, false);
                (bool::from(p.is_on_curve()) && !bool::from(p.is_torsion_free())).then_some(p)
            })
            .expect("such points exist")
    }

    #[test]
    fn subgroup_check_is_optional() {
        let mut b = bytes(&sample());
        let at = L_AT + 4;
        b[at..at + 96].copy_from_slice(&point_outside_subgroup().to_uncompressed());
        let r = decode_params(&b, PointCheck::OnCurve);
        assert!(r.is_ok(), "{r:?}");
        assert!(matches!(
            decode_params(&b, PointCheck::Subgroup),
            Err(FormatError::InvalidPoint { section: "l", index: 0, reason: "not in the prime-order subgroup", .. })
        ));
    }

    #[test]
    fn inconsistent_counts_are_rejected() {
        let mut p = sample();
        p.h.pop();
        assert!(matches!(decode_params(&bytes(&p), PointCheck::OnCurve), Err(FormatError::Inconsistent(_))));
        let mut p = sample();
        p.b_g2.pop();
        assert!(matches!(decode_params(&bytes(&p), PointCheck::OnCurve), Err(FormatError::Inconsistent(_))));
    }

    #[test]
    fn empty_ic_is_rejected() {
        let mut vk = sample().vk;
        vk.ic.clear();
        let mut b = Vec::new();
        write_vk(&mut b, &vk).unwrap();
        assert!(matches!(decode_vk(&b, PointCheck::OnCurve), Err(FormatError::Inconsistent(_))));
    }

    #[test]
    fn missing_file_is_io_error_with_path() {
        let e = read_params(Path::new("/nonexistent/x.params"), PointCheck::OnCurve).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.params"));
    }
}
