//! Parameter sets larger than the device: the points stay in pinned host memory and
//! every MSM streams them up, a chunk of bases at a time, through two device buffers.
//!
//! Pippenger's sum is additive over any partition of the bases, so a chunk's MSM is a
//! whole MSM of its own (its own buckets and reduction) and the chunks' results are
//! added on the host with the other partial sums. While the compute stream works on one
//! buffer, the next chunk is copied into the other on a stream of its own; events order
//! the two (a copy waits until the kernels reading its buffer are done, the kernels
//! wait for their copy), so the host never waits inside a partition.
//!
//! The H MSM cuts its bases at fixed counts. A split MSM's lists index the bases of a
//! whole query; they are cut where the list builder's checkpoints say the entries of a
//! range of bases start ([`DeviceSplit`]), and each chunk's kernels read the bases
//! through an address shifted by the chunk's first index, so the lists are used as
//! they are.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, PinnedHostSlice};
use rayon::prelude::*;

use super::group::{check_base_count, device_address, BasesAt, MsmGroup};
use super::pippenger::{GpuMsm, PendingMsm, PhaseEvents};
use super::split::{DeviceSplit, LIST_CHUNK};
use crate::device::{Gpu, GpuError};
use crate::field::DeviceFr;

/// One query's points in pinned host memory, as the device reads them.
pub struct HostBases<G: MsmGroup> {
    /// At least one point's memory (cudarc pins nothing for none); `len` are the query's.
    points: PinnedHostSlice<G::DeviceAffine>,
    len: usize,
}

impl<G: MsmGroup> HostBases<G> {
    /// Pinned memory for `len` points, to be filled before any copy reads it.
    ///
    /// # Safety
    /// The contents are uninitialised: every point must be written (by the host or a
    /// copy from the device) before the bases are streamed.
    pub(crate) unsafe fn uninit(gpu: &Gpu, len: usize) -> Result<Self, GpuError> {
        check_base_count(len)?;
        // Not write-combined: only the device's copies read it, but the loader writes it
        // from file reads.
        // SAFETY: forwarded to the caller (see above).
        let points = unsafe { gpu.alloc_pinned::<G::DeviceAffine>(len.max(1), false) }
            .map_err(|e| GpuError::Invalid(format!("streamed {} points: {e}", G::NAME)))?;
        Ok(HostBases { points, len })
    }

    /// A copy of host points.
    pub fn from_points(gpu: &Gpu, points: &[G::Affine]) -> Result<Self, GpuError> {
        // SAFETY: every point is written just below.
        let mut out = unsafe { Self::uninit(gpu, points.len())? };
        let dst = out.points_mut()?;
        dst.par_chunks_mut(1 << 16).zip(G::as_device(points).par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
        Ok(out)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn slice(&self) -> Result<&[G::DeviceAffine], GpuError> {
        Ok(&self.points.as_slice()?[..self.len])
    }

    pub(crate) fn points_mut(&mut self) -> Result<&mut [G::DeviceAffine], GpuError> {
        Ok(&mut self.points.as_mut_slice()?[..self.len])
    }

    /// The points' bytes as the device reads them.
    pub fn bytes(&self) -> Result<&[u8], GpuError> {
        let s = self.slice()?;
        // SAFETY: the device point types are plain 32-bit words: every byte is initialised
        // (the constructors fill them all).
        Ok(unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) })
    }

    /// The raw bytes, for the file loader to read into and decode.
    pub(crate) fn bytes_mut(&mut self) -> Result<&mut [u8], GpuError> {
        let s = self.points_mut()?;
        let len = std::mem::size_of_val(s);
        // SAFETY: the device point types are plain 32-bit words, valid for any bytes.
        Ok(unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, len) })
    }
}

/// Bytes per chunk buffer by default: 2^24 G1 or 2^23 G2 points, so a C2 partition's
/// H MSM runs in 8 chunks and the two buffers take 3.2 GB of device memory.
pub const DEFAULT_CHUNK_BYTES: usize = 192 << 23;
/// The smallest chunk buffer: a split MSM's lists can be cut only at their
/// checkpoints, LIST_CHUNK values apart, so a chunk must hold that many G2 points.
pub const MIN_CHUNK_BYTES: usize = LIST_CHUNK * 192;

/// Chunk buffers must hold whole G1 and G2 points (a multiple of 192 bytes), at least
/// [`MIN_CHUNK_BYTES`].
pub fn check_chunk_bytes(bytes: usize) -> Result<(), GpuError> {
    if bytes % 192 != 0 || bytes < MIN_CHUNK_BYTES {
        return Err(GpuError::Invalid(format!("chunk buffers of {bytes} bytes: a multiple of 192 and at least {MIN_CHUNK_BYTES} are needed")));
    }
    Ok(())
}

/// Two device buffers that chunks of bases are copied into in turn, on their own
/// stream: one per backend, reused by every MSM (no allocation per partition).
pub struct BaseChunks {
    bufs: [CudaSlice<u64>; 2],
    /// Recorded on the chunk stream after each buffer's last copy.
    loaded: [CudaEvent; 2],
    /// Recorded on the compute stream after the kernels that last read each buffer
    /// (never recorded: complete, so the first copy into a buffer waits for nothing).
    freed: [CudaEvent; 2],
    next: usize,
    bytes: usize,
    stream: Arc<CudaStream>,
}

impl BaseChunks {
    /// Two buffers of `bytes` each: a multiple of 192 (whole G1 and G2 points), at least
    /// [`MIN_CHUNK_BYTES`].
    pub fn new(gpu: &Gpu, bytes: usize) -> Result<Self, GpuError> {
        check_chunk_bytes(bytes)?;
        let stream = gpu.ctx.new_stream()?;
        // SAFETY: a buffer is read only by kernels ordered after the copy that fills
        // the part they read.
        let bufs = unsafe { [stream.alloc::<u64>(bytes / 8)?, stream.alloc::<u64>(bytes / 8)?] };
        // Reused by every chunk: a wait takes the event's last record at the time it
        // is enqueued, so recording it again later changes no earlier wait.
        let event = || gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING));
        let (loaded, freed) = ([event()?, event()?], [event()?, event()?]);
        Ok(BaseChunks { bufs, loaded, freed, next: 0, bytes, stream })
    }

    /// Waits for every copy enqueued so far (after a failed enqueue: copies may be
    /// queued that no kernel waits for).
    pub fn synchronize(&self) -> Result<(), GpuError> {
        Ok(self.stream.synchronize()?)
    }

    /// Bytes per buffer.
    pub fn chunk_bytes(&self) -> usize {
        self.bytes
    }

    /// Points of G per chunk.
    pub fn points_per_chunk<G: MsmGroup>(&self) -> usize {
        self.bytes / std::mem::size_of::<G::DeviceAffine>()
    }

    /// Copies bases[range] into the next buffer once the kernels that read it last are
    /// done, and orders the compute stream after the copy. Returns the buffer and where
    /// the kernels read the bases: by their index in the query when `indexed` (a split
    /// MSM's lists), else by their position in the range.
    fn load<G: MsmGroup>(&mut self, gpu: &Gpu, host: &HostBases<G>, range: Range<usize>, indexed: bool) -> Result<(usize, BasesAt<G>), GpuError> {
        let size = std::mem::size_of::<G::DeviceAffine>();
        let n = range.len();
        if n == 0 || n * size > self.bytes || range.end > host.len() {
            return Err(GpuError::Invalid(format!(
                "streamed chunk {range:?} of {} {} bases: empty, past the end or larger than a {}-byte buffer",
                host.len(),
                G::NAME,
                self.bytes
            )));
        }
        let slot = self.next;
        self.next = 1 - slot;
        // Waits for the kernels that last read the buffer (released after every chunk,
        // also when its kernels failed to enqueue part-way).
        self.stream.wait(&self.freed[slot])?;
        let src = &host.slice()?[range.clone()];
        // SAFETY: the buffer holds self.bytes ≥ n·size bytes, 8-byte aligned like the
        // point types, which are plain words valid for any bits.
        let mut view =
            unsafe { self.bufs[slot].transmute_mut::<G::DeviceAffine>(n) }.ok_or_else(|| GpuError::Invalid("chunk buffer too small".into()))?;
        // Asynchronous: from pinned memory, which the set keeps until its users are done.
        self.stream.memcpy_htod(src, &mut view)?;
        self.loaded[slot].record(&self.stream)?;
        gpu.stream.wait(&self.loaded[slot])?;
        let address = device_address(&self.bufs[slot], &gpu.stream);
        let at = if indexed {
            // Index i of the query is read at address + (i − first)·size.
            BasesAt { origin: address.wrapping_sub((range.start * size) as u64), first: range.start, end: range.end, group: PhantomData }
        } else {
            BasesAt { origin: address, first: 0, end: n, group: PhantomData }
        };
        Ok((slot, at))
    }

    /// Marks the buffer free once the kernels enqueued so far on the compute stream are done.
    fn release(&mut self, gpu: &Gpu, slot: usize) -> Result<(), GpuError> {
        Ok(self.freed[slot].record(&gpu.stream)?)
    }
}

impl Drop for BaseChunks {
    fn drop(&mut self) {
        // Copies into the buffers, then the kernels that read them.
        if let Err(e) = self.stream.synchronize() {
            tracing::error!(error = %e, "waiting for the copies into the chunk buffers");
        }
        for ev in &self.freed {
            if let Err(e) = ev.synchronize() {
                tracing::error!(error = %e, "waiting for the kernels reading a chunk buffer");
            }
        }
    }
}

/// A run of list checkpoints: its first and its last.
pub type ChunkRun = ([u32; 3], [u32; 3]);

/// The runs of checkpoints a split MSM's chunks cover: each run's bases (from its first
/// checkpoint's base index to its last's) fit in `per_chunk`; runs with no entries are
/// left out. An error if two neighbouring checkpoints are further apart than that.
pub fn chunk_runs(checkpoints: &[[u32; 3]], per_chunk: usize) -> Result<Vec<ChunkRun>, GpuError> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i + 1 < checkpoints.len() {
        let span = |j: usize| (checkpoints[j][0] - checkpoints[i][0]) as usize;
        if span(i + 1) > per_chunk {
            return Err(GpuError::Invalid(format!("list checkpoints {} bases apart, more than a chunk's {per_chunk}", span(i + 1))));
        }
        let mut j = i + 1;
        while j + 1 < checkpoints.len() && span(j + 1) <= per_chunk {
            j += 1;
        }
        let (from, to) = (checkpoints[i], checkpoints[j]);
        if from[1] != to[1] || from[2] != to[2] {
            runs.push((from, to));
        }
        i = j;
    }
    Ok(runs)
}

/// A streamed MSM's partial sums, as it is being enqueued (its chunks' phases are not
/// timed: only the whole MSM's span).
struct Parts<G: MsmGroup> {
    start: CudaEvent,
    results: Vec<CudaSlice<G::DeviceXyzz>>,
    phases: PhaseEvents,
    bases_up: u64,
}

impl<G: MsmGroup> Parts<G> {
    fn new(start: CudaEvent) -> Self {
        Parts { start, results: Vec::new(), phases: PhaseEvents::new(false), bases_up: 0 }
    }

    fn finish(self, end: CudaEvent) -> PendingMsm<G> {
        PendingMsm::enqueued(self.results, self.start, self.phases, end, self.bases_up)
    }
}

impl GpuMsm {
    /// Enqueues Σ scalars[i]·bases[i] with the bases streamed from host memory; no
    /// host wait.
    pub(crate) fn enqueue_device_streamed<G: MsmGroup>(
        &self,
        bases: &HostBases<G>,
        scalars: &CudaView<'_, DeviceFr>,
        chunks: &mut BaseChunks,
    ) -> Result<PendingMsm<G>, GpuError> {
        let n = scalars.len();
        if n > bases.len() {
            return Err(GpuError::Invalid(format!("{n} scalars but only {} bases", bases.len())));
        }
        let s = &self.gpu.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let mut m = Parts::<G>::new(s.record_event(timing)?);
        let per = chunks.points_per_chunk::<G>();
        for first in (0..n).step_by(per) {
            let range = first..(first + per).min(n);
            let (slot, at) = chunks.load(&self.gpu, bases, range.clone(), false)?;
            let sc = scalars.slice(range.clone());
            // Released even when the enqueue failed part-way: kernels already launched
            // may read the buffer, and the next copy into it must wait for them.
            let r = self.enqueue_pippenger(at, &sc, range.len(), None, &mut m.phases);
            chunks.release(&self.gpu, slot)?;
            m.results.push(r?);
            m.bases_up += (range.len() * std::mem::size_of::<G::DeviceAffine>()) as u64;
        }
        Ok(m.finish(s.record_event(timing)?))
    }

    /// Enqueues a split MSM (lists built on the device, with checkpoints) with the
    /// bases streamed from host memory; no host wait.
    pub(crate) fn enqueue_split_streamed<G: MsmGroup>(
        &self,
        bases: &HostBases<G>,
        split: &DeviceSplit,
        chunks: &mut BaseChunks,
    ) -> Result<PendingMsm<G>, GpuError> {
        let s = &self.gpu.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let mut m = Parts::<G>::new(s.record_event(timing)?);
        let has_entries = split.ones.is_some() || split.sig_index.is_some();
        if has_entries && split.checkpoints.is_empty() {
            return Err(GpuError::Invalid("streamed bases need split lists with checkpoints (built on the device)".into()));
        }
        if let Some(last) = split.checkpoints.last() {
            if last[0] as usize > bases.len() {
                return Err(GpuError::Invalid(format!("the lists reach base {} of {}", last[0], bases.len())));
            }
        }
        for (from, to) in chunk_runs(&split.checkpoints, chunks.points_per_chunk::<G>())? {
            let range = |k: usize| from[k] as usize..to[k] as usize;
            let (slot, at) = chunks.load(&self.gpu, bases, range(0), true)?;
            let r = self.enqueue_split_part(at, split, range(2), range(1), &mut m.results, &mut m.phases);
            chunks.release(&self.gpu, slot)?; // even after a failure: see above
            r?;
            m.bases_up += (range(0).len() * std::mem::size_of::<G::DeviceAffine>()) as u64;
        }
        Ok(m.finish(s.record_event(timing)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_runs_cover_every_entry_within_a_chunk() {
        // Bases 3.. in list chunks of 10, 30, 10 and 10 bases, the second with no entries.
        let cps = [[3, 0, 0], [13, 1, 2], [43, 1, 2], [53, 6, 7], [63, 8, 8]];
        assert_eq!(chunk_runs(&cps, 40).unwrap(), vec![(cps[0], cps[2]), (cps[2], cps[4])]);
        // With 30 bases per chunk the empty run 13..43 stands alone and is left out.
        assert_eq!(chunk_runs(&cps, 30).unwrap(), vec![(cps[0], cps[1]), (cps[2], cps[4])]);
        assert_eq!(chunk_runs(&cps, 1000).unwrap(), vec![(cps[0], cps[4])]);
        // Neighbours further apart than a chunk: refused.
        assert!(chunk_runs(&cps, 29).is_err());
        assert!(chunk_runs(&[], 10).unwrap().is_empty());
        assert!(chunk_runs(&[[5, 0, 0]], 10).unwrap().is_empty());
    }
}
