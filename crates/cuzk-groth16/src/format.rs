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

pub use crate::layout::{ParamsLayout, Section};
use crate::params::{FileQueries, ParameterSet, VerifyingKey};
use crate::progress::{NoProgress, Progress};

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

/// A point type stored in these files (G1Affine, G2Affine).
pub trait FilePoint: Sized + Copy + Send + Sync {
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
        decode_points(bytes, section, start, self.check, self.progress)
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
            return Err(FormatError::TrailingData { offset: self.pos as u64, len: (self.data.len() - self.pos) as u64 });
        }
        Ok(())
    }
}

/// Decodes `bytes`, whole points of type P from byte offset `start` of `section`.
fn decode_points<P: FilePoint>(
    bytes: &[u8],
    section: &'static str,
    start: u64,
    check: PointCheck,
    progress: &dyn Progress,
) -> Result<Vec<P>, FormatError> {
    let n = bytes.len() / P::BYTES;
    if n >= PROGRESS_EVERY {
        progress.stage(&format!("reading {section}"), n as u64);
    }
    // Collecting into Result<Vec<_>> writes the points straight into the vector (no
    // per-point Result buffer); on failure one of the errors is returned.
    let points = bytes
        .par_chunks_exact(P::BYTES)
        .enumerate()
        .map(|(index, b)| {
            if index % PROGRESS_EVERY == PROGRESS_EVERY - 1 {
                progress.advance(PROGRESS_EVERY as u64);
            }
            decode_point(b, check).map_err(|reason| FormatError::InvalidPoint { section, index, offset: start + (index * P::BYTES) as u64, reason })
        })
        .collect();
    if n >= PROGRESS_EVERY {
        progress.advance((n % PROGRESS_EVERY) as u64);
    }
    points
}

/// One point, or why it is malformed.
fn decode_point<P: FilePoint>(b: &[u8], check: PointCheck) -> Result<P, &'static str> {
    if b[0] & FLAG_COMPRESSED != 0 {
        return Err("compressed flag set in an uncompressed point");
    }
    let p = P::decode(b).ok_or(if b[0] & FLAG_INFINITY != 0 { "malformed point at infinity" } else { "not a point on the curve" })?;
    if check == PointCheck::Subgroup && !p.in_subgroup() {
        return Err("not in the prime-order subgroup");
    }
    Ok(p)
}

/// The first `n` points of section `s` of a `.params` file's bytes `data` (the layout
/// parsed from the same data).
pub fn section_prefix<P: FilePoint>(data: &[u8], s: &Section, n: usize, check: PointCheck, progress: &dyn Progress) -> Result<Vec<P>, FormatError> {
    if P::BYTES != s.point_bytes || n > s.count || s.offset + s.bytes() > data.len() as u64 {
        return Err(FormatError::Inconsistent(format!(
            "section {} ({} points of {} bytes at byte offset {}) read as {n} points of {} bytes from {} bytes",
            s.name,
            s.count,
            s.point_bytes,
            s.offset,
            P::BYTES,
            data.len()
        )));
    }
    let from = s.offset as usize;
    decode_points(&data[from..from + n * P::BYTES], s.name, s.offset, check, progress)
}

/// The host reader's error for point `index` of section `s`, which another decoder (the
/// GPU's) rejected; if the host reader accepts the point, an error saying the two differ.
pub fn rejected_point<P: FilePoint>(data: &[u8], s: &Section, index: usize) -> FormatError {
    let offset = s.point_offset(index);
    let reason = match data.get(offset as usize..offset as usize + P::BYTES) {
        None => "beyond the end of the file",
        Some(b) => match decode_point::<P>(b, PointCheck::OnCurve) {
            Err(reason) => reason,
            Ok(_) => "rejected by the device's decoder but accepted by the host's (a decoder bug)",
        },
    };
    FormatError::InvalidPoint { section: s.name, index, offset, reason }
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

impl ParamsLayout {
    /// Parses the verifying key and the counts; the query points are skipped, not decoded.
    pub fn parse(data: &[u8], check: PointCheck) -> Result<(VerifyingKey, Self), FormatError> {
        let mut c = Cursor { data, pos: 0, check, progress: &NoProgress };
        let vk = read_vk_from(&mut c)?;
        let mut section = |name, point_bytes: usize| -> Result<Section, FormatError> {
            let count = c.count(name)?;
            let offset = c.pos as u64;
            c.take(name, (count * point_bytes) as u64)?;
            Ok(Section { name, offset, count, point_bytes })
        };
        let (h, l, a) = (section("h", G1_BYTES)?, section("l", G1_BYTES)?, section("a", G1_BYTES)?);
        let (b_g1, b_g2) = (section("b_g1", G1_BYTES)?, section("b_g2", G2_BYTES)?);
        c.finish()?;
        let layout = ParamsLayout { inputs: vk.ic.len(), h, l, a, b_g1, b_g2, file_len: data.len() as u64 };
        layout.check_counts()?;
        Ok((vk, layout))
    }

    fn check_counts(&self) -> Result<(), FormatError> {
        if !self.domain_size().is_power_of_two() {
            return Err(FormatError::Inconsistent(format!("H has {} points; a domain of 2^k elements needs 2^k − 1", self.h.count)));
        }
        if self.b_g1.count != self.b_g2.count {
            return Err(FormatError::Inconsistent(format!("B_G1 has {} points but B_G2 has {}", self.b_g1.count, self.b_g2.count)));
        }
        if self.inputs == 0 || self.a.count < self.inputs {
            return Err(FormatError::Inconsistent(format!("A has {} points, fewer than the {} public inputs (IC)", self.a.count, self.inputs)));
        }
        Ok(())
    }
}

/// Decodes a whole `.params` file.
pub fn decode_params(data: &[u8], check: PointCheck) -> Result<ParameterSet, FormatError> {
    decode_params_with(data, check, &NoProgress)
}

fn decode_params_with(data: &[u8], check: PointCheck, progress: &dyn Progress) -> Result<ParameterSet, FormatError> {
    let (vk, layout) = ParamsLayout::parse(data, check)?;
    Ok(ParameterSet::new(
        vk,
        section_points(data, &layout.h, check, progress)?,
        section_points(data, &layout.l, check, progress)?,
        section_points(data, &layout.a, check, progress)?,
        section_points(data, &layout.b_g1, check, progress)?,
        section_points(data, &layout.b_g2, check, progress)?,
    ))
}

/// Every point of a section found by [`ParamsLayout::parse`] on the same data.
fn section_points<P: FilePoint>(data: &[u8], s: &Section, check: PointCheck, progress: &dyn Progress) -> Result<Vec<P>, FormatError> {
    section_prefix(data, s, s.count, check, progress)
}

/// Maps a file read-only (errors name the path).
pub fn map_file(path: &Path) -> Result<memmap2::Mmap, FormatError> {
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

/// A `.params` file's verifying key and layout (its evaluation domain size among it),
/// from its header alone (the query points are skipped): sizes buffers before the
/// points load, and tells timing parameters apart.
pub fn read_params_header(path: &Path) -> Result<(VerifyingKey, ParamsLayout), FormatError> {
    ParamsLayout::parse(&map_file(path)?, PointCheck::OnCurve)
}

/// Reads a `.params` file's verifying key, layout and the public inputs' rows of the A
/// and B queries, leaving the other points in the file: the form a GPU backend reads
/// straight onto its device ([`crate::params::QueryPoints::File`]). Only the file's
/// header is read here (milliseconds).
pub fn read_params_layout(path: &Path) -> Result<ParameterSet, FormatError> {
    let data = map_file(path)?;
    let (vk, layout) = ParamsLayout::parse(&data, PointCheck::OnCurve)?;
    let inputs = layout.inputs;
    let b_inputs = inputs.min(layout.b_g1.count);
    let file = FileQueries {
        path: path.to_owned(),
        a_inputs: section_prefix(&data, &layout.a, inputs, PointCheck::OnCurve, &NoProgress)?,
        b_g1_inputs: section_prefix(&data, &layout.b_g1, b_inputs, PointCheck::OnCurve, &NoProgress)?,
        b_g2_inputs: section_prefix(&data, &layout.b_g2, b_inputs, PointCheck::OnCurve, &NoProgress)?,
        layout,
    };
    Ok(ParameterSet::in_file(vk, file))
}

/// Reads a `.params` file for a prover: with `leave_in_file`, the points stay in the
/// file for a backend that reads them itself ([`read_params_layout`]), unless `check`
/// asks for the subgroup check, which only the host reader does; else every point is
/// decoded into host memory ([`read_params_with`]).
pub fn read_params_placed(path: &Path, check: PointCheck, leave_in_file: bool, progress: &dyn Progress) -> Result<ParameterSet, FormatError> {
    if leave_in_file && check != PointCheck::Subgroup {
        read_params_layout(path)
    } else {
        read_params_with(path, check, progress)
    }
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
    let p_vk = &p.vk;
    let p = p.host().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    for (name, n) in [("H", p.h.len()), ("L", p.l.len()), ("A", p.a.len()), ("B", p.b_g1.len())] {
        if n > u32::MAX as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name} has more than 2^32 − 1 points")));
        }
    }
    write_vk(w, p_vk)?;
    w.write_all(&encode_points(&p.h))?;
    w.write_all(&encode_points(&p.l))?;
    w.write_all(&encode_points(&p.a))?;
    w.write_all(&encode_points(&p.b_g1))?;
    w.write_all(&encode_points(&p.b_g2))
}

/// `<stem>.vk` beside `<stem>.params`.
pub fn vk_path_for(params_path: &Path) -> Result<PathBuf, FormatError> {
    let vk_path = params_path.with_extension("vk");
    if vk_path == params_path {
        return Err(FormatError::Io {
            path: params_path.to_owned(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "the parameter file must not end in .vk"),
        });
    }
    Ok(vk_path)
}

/// Writes `path` through `write`: into `<path>.partial`, renamed into place once
/// complete, so an interrupted write never leaves a truncated file under the name a
/// prover reads.
pub fn write_file_atomically(path: &Path, write: impl FnOnce(&mut io::BufWriter<File>) -> io::Result<()>) -> Result<(), FormatError> {
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |source| FormatError::Io { path, source }
    };
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let mut f = io::BufWriter::with_capacity(8 << 20, File::create(&partial).map_err(io_err(&partial))?);
    let written = write(&mut f).and_then(|_| f.flush()).map_err(io_err(&partial));
    drop(f);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, path).map_err(io_err(path))
}

/// Writes `<stem>.params` and `<stem>.vk` side by side (each whole or not at all).
pub fn save(params: &ParameterSet, params_path: &Path) -> Result<(), FormatError> {
    let vk_path = vk_path_for(params_path)?;
    write_file_atomically(params_path, |f| write_params(f, params))?;
    write_file_atomically(&vk_path, |f| write_vk(f, &params.vk))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{HostQueries, QueryPoints};
    use blstrs::{G1Projective, G2Projective};
    use group::{prime::PrimeCurveAffine, Curve, Group};
    use rand::SeedableRng;

    fn sample() -> ParameterSet {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let g1 = |rng: &mut rand_chacha::ChaCha20Rng, n| -> Vec<G1Affine> { (0..n).map(|_| G1Projective::random(&mut *rng).to_affine()).collect() };
        let g2 = |rng: &mut rand_chacha::ChaCha20Rng, n| -> Vec<G2Affine> { (0..n).map(|_| G2Projective::random(&mut *rng).to_affine()).collect() };
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
        let (vk, layout) = read_params_header(&path).unwrap();
        assert_eq!((vk, layout.domain_size()), (p.vk.clone(), p.domain_size()));
        assert!(matches!(read_params_header(&path.with_extension("vk")), Err(FormatError::Truncated { section: "h", .. })));
        assert_eq!(G1Affine::identity().to_uncompressed()[0], FLAG_INFINITY);
    }

    #[test]
    fn a_layout_read_leaves_the_points_in_the_file() {
        let p = sample();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.params");
        save(&p, &path).unwrap();
        let f = read_params_layout(&path).unwrap();
        assert_eq!((&f.vk, f.lens(), f.points_bytes()), (&p.vk, p.lens(), p.points_bytes()));
        assert!(f.host().is_err() && f != p && f.size_bytes() < p.size_bytes());
        // The header alone tells what either form holds in host memory.
        let (_, layout) = read_params_header(&path).unwrap();
        assert_eq!((layout.host_bytes(true), layout.host_bytes(false)), (f.size_bytes(), p.size_bytes()));
        let host = p.host().unwrap();
        assert_eq!(f.input_rows(2, 2), Some((&host.a[..2], &host.b_g1[..2], &host.b_g2[..2])));
        assert_eq!(f.input_rows(3, 0), None, "only the inputs' rows are kept");
        let QueryPoints::File(q) = f.points() else { panic!("points read into memory") };
        assert_eq!((q.layout.l.offset, q.layout.l.count), ((L_AT + 4) as u64, 5));
        assert_eq!(q.layout.b_g2.point_offset(1), (B_G2_AT + 4 + 192) as u64);
        // Another decoder's rejection is explained with the host reader's reason.
        let mut b = bytes(&p);
        b[L_AT + 4 + 96 + 90] ^= 1;
        assert!(matches!(
            rejected_point::<G1Affine>(&b, &q.layout.l, 1),
            FormatError::InvalidPoint { section: "l", index: 1, reason: "not a point on the curve", offset } if offset as usize == L_AT + 4 + 96
        ));
        assert!(rejected_point::<G1Affine>(&b, &q.layout.l, 0).to_string().contains("accepted by the host"));
    }

    #[test]
    fn points_stay_in_the_file_only_when_asked_and_unless_the_subgroup_is_checked() {
        let p = sample();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.params");
        save(&p, &path).unwrap();
        let placed = |leave, check| read_params_placed(&path, check, leave, &NoProgress).unwrap();
        assert!(matches!(placed(true, PointCheck::OnCurve).points(), QueryPoints::File(_)));
        for (leave, check) in [(true, PointCheck::Subgroup), (false, PointCheck::OnCurve), (false, PointCheck::Subgroup)] {
            assert_eq!(placed(leave, check), p, "leave_in_file {leave}, {check:?}: decoded on the host");
        }
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
        assert!(matches!(decode_params(&b[..100], PointCheck::OnCurve), Err(FormatError::Truncated { section: "vk.beta_g1", .. })));
        assert!(matches!(decode_params(&b[..B_G2_AT + 2], PointCheck::OnCurve), Err(FormatError::Truncated { section: "b_g2", .. })));
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
        assert!(matches!(decode_params(&b, PointCheck::OnCurve), Err(FormatError::TrailingData { len: 192, .. })));
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
        assert!(matches!(decode_params(&b, PointCheck::OnCurve), Err(FormatError::InvalidPoint { section: "l", index: 0, .. })));
        // Corrupt G2 point in the verifying key.
        let mut b = b0.clone();
        b[2 * 96 + 192 + 100] ^= 4;
        assert!(matches!(decode_params(&b, PointCheck::OnCurve), Err(FormatError::InvalidPoint { section: "vk.gamma_g2", .. })));
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
        let edited = |edit: fn(&mut HostQueries)| {
            let (vk, points) = sample().into_parts();
            let QueryPoints::Host(mut q) = points else { panic!("sample() is in host memory") };
            edit(&mut q);
            ParameterSet::new(vk, q.h, q.l, q.a, q.b_g1, q.b_g2)
        };
        let p = edited(|q| {
            q.h.pop();
        });
        assert!(matches!(decode_params(&bytes(&p), PointCheck::OnCurve), Err(FormatError::Inconsistent(_))));
        let p = edited(|q| {
            q.b_g2.pop();
        });
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
