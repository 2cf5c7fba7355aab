//! A `.params` file's query points read straight onto the device.
//!
//! Decoding on the host costs ~300 ns per G1 point and core (blst's byte-order and
//! Montgomery conversions and the curve check), longer than reading the 47 GB of a C2
//! file from the page cache. So the raw bytes go up instead, in chunks through two
//! pinned staging buffers (one filling from the file by parallel reads while the other's
//! copy runs), straight into the bases' final buffer, where a kernel decodes each chunk
//! in place (kernels/ec/decode.cuh, the host reader's checks). The host waits for the
//! device once per query, at its end, to read the index of the first malformed point;
//! that point is then reported with the host reader's own error.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice};
use cuzk_groth16::format::{map_file, rejected_point, FormatError, Section};
use cuzk_groth16::params::FileQueries;
use cuzk_groth16::Progress;
use rayon::prelude::*;

use crate::device::{Gpu, GpuError};
use crate::msm::streamed::HostBases;
use crate::msm::{check_base_count, DeviceBases, MsmGroup, G1, G2};
use crate::queries::{DeviceQueries, Queries, StreamedQueries};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Format(#[from] FormatError),
}

impl From<cudarc::driver::DriverError> for LoadError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        LoadError::Gpu(e.into())
    }
}

/// Bytes per staging buffer: a whole number of G1 and of G2 points, large enough that
/// a chunk's copy and kernel launch cost little beside its read, small enough that the
/// two buffers are a small pinned allocation.
pub const STAGING_BYTES: usize = 192 << 20;
/// Bytes per read call: the reads of one chunk run in parallel.
const READ_BYTES: usize = 4 << 20;

/// Reads the queries of `file` onto `gpu`, checking every point as the host reader does
/// (on the curve; the subgroup is not checked). `progress` counts bytes.
pub fn load_queries(gpu: &Gpu, file: &FileQueries, progress: &dyn Progress) -> Result<DeviceQueries, LoadError> {
    load_queries_staged(gpu, file, STAGING_BYTES, progress)
}

/// [`load_queries`] through staging buffers of `staging_bytes` each, a multiple of 192
/// (whole G1 and G2 points): tests use small ones to cross many chunk boundaries.
pub fn load_queries_staged(gpu: &Gpu, file: &FileQueries, staging_bytes: usize, progress: &dyn Progress) -> Result<DeviceQueries, LoadError> {
    let what = ("points onto the GPU (bytes)", "query points read onto the GPU and decoded there");
    load_sections(gpu, file, staging_bytes, progress, what, |src| {
        let mut staging = Vec::with_capacity(2);
        for _ in 0..2 {
            // SAFETY: the buffer is only read (by copies) after a chunk has been read
            // into the part that is copied.
            let buf = unsafe { gpu.alloc_pinned::<u64>(staging_bytes / 8, false)? };
            staging.push(Staging { buf, copied: None });
        }
        Ok(OntoDevice { src, staging })
    })
}

/// Reads the queries of `file` into pinned host memory for streaming
/// (crate::msm::streamed), decoded and checked on `gpu` as [`load_queries`] does: each
/// query's raw bytes are read into its pinned buffer, then go up through one device
/// buffer of `staging_bytes` (a multiple of 192), are decoded there and come back.
pub fn load_queries_to_host(gpu: &Gpu, file: &FileQueries, staging_bytes: usize, progress: &dyn Progress) -> Result<StreamedQueries, LoadError> {
    let what = (
        "points into pinned host memory, decoded on the GPU (bytes)",
        "query points read into pinned host memory and decoded on the GPU, for streaming",
    );
    load_sections(gpu, file, staging_bytes, progress, what, |src| {
        // SAFETY: each chunk is copied in before the decoder reads it.
        let scratch = unsafe { src.stream.alloc::<u64>(staging_bytes / 8)? };
        Ok(IntoHost { src, scratch })
    })
}

/// The five queries as a loader holds them.
type Loaded<L> = Queries<<L as SectionLoader>::Bases<G1>, <L as SectionLoader>::Bases<G2>>;

/// One way of loading a query's points from its section of the file.
trait SectionLoader {
    type Bases<G: MsmGroup>;
    fn query<G: MsmGroup>(&mut self, s: &Section) -> Result<Self::Bases<G>, LoadError>;
}

/// What both loaders share: the staging size checked, the file reopened and checked
/// unchanged, a stream of the load's own, progress over every point's bytes, the five
/// sections in file order, and the stream settled before the loader's buffers go.
fn load_sections<'a, L: SectionLoader>(
    gpu: &'a Gpu,
    file: &'a FileQueries,
    staging_bytes: usize,
    progress: &'a dyn Progress,
    (stage, done): (&str, &str),
    new: impl FnOnce(Source<'a>) -> Result<L, LoadError>,
) -> Result<Loaded<L>, LoadError> {
    check_staging(staging_bytes)?;
    let (path, layout) = (file.path.as_path(), &file.layout);
    let f = open_unchanged(file)?;
    let stream = gpu.ctx.new_stream()?;
    let total: u64 = layout.sections().iter().map(|s| s.bytes()).sum();
    progress.stage(stage, total);
    let start = Instant::now();
    // Dropped after `settled` (the returned expression): nothing may copy to or from
    // its buffers once they are freed.
    let mut loader = new(Source { gpu, stream: stream.clone(), file: f, path, progress })?;
    let r = (|| {
        Ok(Queries {
            h: loader.query::<G1>(&layout.h)?,
            l: loader.query::<G1>(&layout.l)?,
            a: loader.query::<G1>(&layout.a)?,
            b_g1: loader.query::<G1>(&layout.b_g1)?,
            b_g2: loader.query::<G2>(&layout.b_g2)?,
        })
    })();
    settled(&stream, r, path, total, start, done)
}

/// A load's result once its stream has finished (nothing may still copy to or from a
/// buffer the load frees, on success or failure), logged.
fn settled<T>(stream: &CudaStream, r: Result<T, LoadError>, path: &Path, total: u64, start: Instant, what: &str) -> Result<T, LoadError> {
    let synced = stream.synchronize();
    let loaded = r?;
    synced?;
    let secs = start.elapsed().as_secs_f64();
    tracing::info!(
        path = %path.display(),
        gb = format!("{:.2}", total as f64 / 1e9),
        seconds = format!("{secs:.2}"),
        gb_per_s = format!("{:.2}", total as f64 / 1e9 / secs),
        "{what}"
    );
    Ok(loaded)
}

/// Staging buffers must hold whole G1 and G2 points: a positive multiple of 192 bytes.
fn check_staging(bytes: usize) -> Result<(), LoadError> {
    if bytes == 0 || bytes % 192 != 0 {
        return Err(GpuError::Invalid(format!("staging buffers of {bytes} bytes: a positive multiple of 192 is needed")).into());
    }
    Ok(())
}

/// Opens the set's file, checking that it still has the length its header was read at.
fn open_unchanged(file: &FileQueries) -> Result<File, LoadError> {
    let path = file.path.as_path();
    let io = |source| FormatError::Io { path: path.to_owned(), source };
    let f = File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len != file.layout.file_len {
        return Err(FormatError::Inconsistent(format!(
            "{} is {len} bytes long, but {} when its header was read: was it replaced?",
            path.display(),
            file.layout.file_len
        ))
        .into());
    }
    Ok(f)
}

/// A section's points must be G's.
fn check_section<G: MsmGroup>(s: &Section) -> Result<(), LoadError> {
    if s.point_bytes != std::mem::size_of::<G::DeviceAffine>() {
        return Err(GpuError::Invalid(format!("section {} holds {}-byte points, not {}", s.name, s.point_bytes, G::NAME)).into());
    }
    Ok(())
}

/// Fills `buf` from the file at byte offset `at`, READ_BYTES per parallel read,
/// telling `done` each read's length.
fn read_parallel(f: &File, path: &Path, buf: &mut [u8], at: u64, done: impl Fn(u64) + Sync) -> Result<(), LoadError> {
    buf.par_chunks_mut(READ_BYTES)
        .enumerate()
        .try_for_each(|(i, part)| {
            f.read_exact_at(part, at + (i * READ_BYTES) as u64)?;
            done(part.len() as u64);
            Ok(())
        })
        .map_err(|source: std::io::Error| FormatError::Io { path: path.to_owned(), source }.into())
}

/// Enqueues the decoding of `n` points in place (their first index in the query
/// `first`); the first malformed index found is written to `first_bad` (it holds
/// u32::MAX until then).
fn enqueue_decode<G: MsmGroup>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    points: &mut cudarc::driver::CudaViewMut<'_, G::DeviceAffine>,
    first: usize,
    first_bad: &mut CudaSlice<u32>,
) -> Result<(), LoadError> {
    let (n32, first32) = (points.len() as u32, first as u32);
    let cfg = LaunchConfig { grid_dim: (n32.div_ceil(128), 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: `points` holds n points of the group's size, first_bad one word.
    unsafe { G::kernels(gpu).decode_points(stream, cfg, points, n32, first32, first_bad)? };
    Ok(())
}

/// The query's one host wait: the first malformed point, reported with the host
/// reader's error.
fn check_decoded<G: MsmGroup>(stream: &Arc<CudaStream>, first_bad: &CudaSlice<u32>, path: &Path, s: &Section) -> Result<(), LoadError> {
    let bad = stream.clone_dtoh(first_bad)?[0];
    if bad != u32::MAX {
        let data = map_file(path)?;
        return Err(rejected_point::<G::Affine>(&data, s, bad as usize).into());
    }
    Ok(())
}

/// A pinned buffer a chunk is read into, and the event after its last copy out.
struct Staging {
    buf: PinnedHostSlice<u64>,
    copied: Option<CudaEvent>,
}

/// What a loader reads from and works with: the GPU, the load's stream, the file
/// (checked unchanged) and where progress goes.
struct Source<'a> {
    gpu: &'a Gpu,
    stream: Arc<CudaStream>,
    file: File,
    path: &'a Path,
    progress: &'a dyn Progress,
}

/// Points onto the device: each chunk read into one of two pinned staging buffers
/// while the other's copy runs, copied into the query's device buffer and decoded there.
struct OntoDevice<'a> {
    src: Source<'a>,
    staging: Vec<Staging>,
}

impl SectionLoader for OntoDevice<'_> {
    type Bases<G: MsmGroup> = DeviceBases<G>;

    fn query<G: MsmGroup>(&mut self, s: &Section) -> Result<DeviceBases<G>, LoadError> {
        let src = &self.src;
        check_section::<G>(s)?;
        check_base_count(s.count).map_err(|e| GpuError::Invalid(format!("section {}: {e}", s.name)))?;
        let point_bytes = std::mem::size_of::<G::DeviceAffine>();
        // SAFETY: every point is written by the chunks' copies below before any read.
        let mut points: CudaSlice<G::DeviceAffine> = unsafe { src.stream.alloc(s.count)? };
        let mut first_bad = src.stream.clone_htod(&[u32::MAX])?;
        let st_bytes = self.staging[0].buf.len() * 8;
        let per_chunk = st_bytes / point_bytes;
        for (k, first) in (0..s.count).step_by(per_chunk).enumerate() {
            let n = per_chunk.min(s.count - first);
            let bytes = n * point_bytes;
            let st = &mut self.staging[k % 2];
            if let Some(ev) = st.copied.take() {
                ev.synchronize()?;
            }
            // SAFETY: the buffer's last copy has finished (waited for above), and the
            // memory is plain bytes: any value is valid for u8.
            let buf = unsafe { std::slice::from_raw_parts_mut(st.buf.as_mut_ptr()? as *mut u8, st_bytes) };
            read_parallel(&src.file, src.path, &mut buf[..bytes], s.point_offset(first), |_| ())?;
            // SAFETY: the staging memory is 8-byte aligned (page-aligned pinned memory),
            // `bytes` is n whole points and G::DeviceAffine is plain words of that size
            // and alignment, valid for any bits (the kernel decodes them in place).
            let raw = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const G::DeviceAffine, n) };
            // Asynchronous: from pinned memory, which stays untouched until `copied`.
            let mut view = points.slice_mut(first..first + n);
            src.stream.memcpy_htod(raw, &mut view)?;
            enqueue_decode::<G>(src.gpu, &src.stream, &mut view, first, &mut first_bad)?;
            st.copied = Some(src.stream.record_event(None)?);
            src.progress.advance(bytes as u64);
        }
        check_decoded::<G>(&src.stream, &first_bad, src.path, s)?;
        Ok(DeviceBases::from_points(points))
    }
}

/// Points into pinned host memory: a query's raw bytes read into its pinned buffer,
/// then each chunk up into one device buffer, decoded there and back down.
struct IntoHost<'a> {
    src: Source<'a>,
    scratch: CudaSlice<u64>,
}

impl SectionLoader for IntoHost<'_> {
    type Bases<G: MsmGroup> = HostBases<G>;

    fn query<G: MsmGroup>(&mut self, s: &Section) -> Result<HostBases<G>, LoadError> {
        check_section::<G>(s)?;
        let (src, scratch) = (&self.src, &mut self.scratch);
        let (stream, progress) = (&src.stream, src.progress);
        // SAFETY: every byte is read from the file below before any copy reads it.
        let mut host = unsafe { HostBases::<G>::uninit(src.gpu, s.count)? };
        // Half of a byte's progress for its read, half for its decoding.
        read_parallel(&src.file, src.path, host.bytes_mut()?, s.point_offset(0), |n| progress.advance(n / 2))?;
        let size = std::mem::size_of::<G::DeviceAffine>();
        let per = scratch.len() * 8 / size;
        let mut first_bad = stream.clone_htod(&[u32::MAX])?;
        let points = host.points_mut()?;
        let mut decode = || -> Result<(), LoadError> {
            for first in (0..s.count).step_by(per) {
                let part = &mut points[first..(first + per).min(s.count)];
                // SAFETY: the scratch holds staging_bytes ≥ part.len()·size bytes, 8-byte
                // aligned like the point types, which are plain words valid for any bits.
                let mut view = unsafe { scratch.transmute_mut::<G::DeviceAffine>(part.len()) }
                    .ok_or_else(|| GpuError::Invalid("staging buffer too small".into()))?;
                // All on one stream, in order: up, decoded in place, back down (pinned:
                // asynchronous; the host reads the points only after the wait below).
                stream.memcpy_htod(&*part, &mut view)?;
                enqueue_decode::<G>(src.gpu, stream, &mut view, first, &mut first_bad)?;
                stream.memcpy_dtoh(&view, part)?;
                let done = std::mem::size_of_val(part) as u64;
                progress.advance(done - done / 2);
            }
            Ok(())
        };
        // `host` is freed on an error: no copy into it may still be queued.
        let r = decode();
        let synced = stream.synchronize();
        r?;
        synced?;
        check_decoded::<G>(stream, &first_bad, src.path, s)?;
        Ok(host)
    }
}
