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
//! The two buffers are the backend's own ([`BaseChunks`]), or two regions of a staging
//! slot's arena that the device plan gives the MSMs once the H polynomial is done
//! ([`ChunkRegions`]: b and c's room, on a card too small for both); the copy stream
//! and its events are the backend's either way.
//!
//! The prover (crate::groth16::msms) cuts the H MSM at a chunk's count of bases, and a
//! split MSM into pieces whose base indices span a chunk at most
//! (crate::msm::split::PieceLimits::bases); each chunk's kernels read the bases through
//! an address shifted by the chunk's first index, so the lists are used as they are.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice};
use rayon::prelude::*;

use super::group::{check_base_count, device_address, BasesAt, MsmGroup};
use super::split::LIST_CHUNK;
use crate::device::{Gpu, GpuError};

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
/// The smallest chunk buffer: a split MSM's lists can be cut only between chunks of
/// LIST_CHUNK positions, so a chunk buffer must hold that many G2 points.
pub const MIN_CHUNK_BYTES: usize = LIST_CHUNK * 192;

/// Chunk buffers must hold whole G1 and G2 points (a multiple of 192 bytes), at least
/// [`MIN_CHUNK_BYTES`].
pub fn check_chunk_bytes(bytes: usize) -> Result<(), GpuError> {
    if bytes % 192 != 0 || bytes < MIN_CHUNK_BYTES {
        return Err(GpuError::Invalid(format!("chunk buffers of {bytes} bytes: a multiple of 192 and at least {MIN_CHUNK_BYTES} are needed")));
    }
    Ok(())
}

/// Two device regions, outside any buffer [`BaseChunks`] owns, that one partition's
/// chunks go to instead of its buffers: a staging slot's arena after h.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkRegions {
    /// Each region's device address (8-byte aligned).
    pub(crate) addresses: [u64; 2],
    pub(crate) bytes: usize,
}

/// Two device buffers that chunks of bases are copied into in turn, on their own
/// stream: one per backend, reused by every MSM (no allocation per partition).
pub struct BaseChunks {
    bufs: [CudaSlice<u64>; 2],
    /// Recorded on the chunk stream after each buffer's last copy: the own buffers'
    /// (indices 0, 1), then a slot's regions' (2, 3), apart so that neither's readers
    /// ever replace the other's record.
    loaded: [CudaEvent; 4],
    /// Recorded on the compute stream after the kernels that last read each buffer
    /// (never recorded: complete, so the first copy into a buffer waits for nothing).
    freed: [CudaEvent; 4],
    /// The next own buffer, and the next region.
    next: usize,
    next_region: usize,
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
        let (loaded, freed) = ([event()?, event()?, event()?, event()?], [event()?, event()?, event()?, event()?]);
        Ok(BaseChunks { bufs, loaded, freed, next: 0, next_region: 0, bytes, stream })
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

    /// Copies bases[range] into the next buffer (of `regions` when given, else its
    /// own) once the kernels that read it last are done, and orders the compute stream
    /// after the copy. Returns the buffer and where the kernels read the bases: by their
    /// index in the query when `indexed` (a split MSM's lists), else by their position
    /// in the range.
    pub(crate) fn load<G: MsmGroup>(
        &mut self,
        gpu: &Gpu,
        host: &HostBases<G>,
        range: Range<usize>,
        indexed: bool,
        regions: Option<&ChunkRegions>,
    ) -> Result<(usize, BasesAt<G>), GpuError> {
        let size = std::mem::size_of::<G::DeviceAffine>();
        let n = range.len();
        let bytes = regions.map_or(self.bytes, |r| r.bytes);
        if n == 0 || n * size > bytes || range.end > host.len() {
            return Err(GpuError::Invalid(format!(
                "streamed chunk {range:?} of {} {} bases: empty, past the end or larger than a {bytes}-byte buffer",
                host.len(),
                G::NAME,
            )));
        }
        let slot = match regions {
            Some(_) => {
                self.next_region = 1 - self.next_region;
                3 - self.next_region
            }
            None => {
                self.next = 1 - self.next;
                1 - self.next
            }
        };
        // Waits for the kernels that last read the buffer (released after every chunk,
        // also when its kernels failed to enqueue part-way).
        self.stream.wait(&self.freed[slot])?;
        let src = &host.slice()?[range.clone()];
        // Asynchronous: from pinned memory, which the set keeps until its users are done.
        let address = match regions {
            Some(r) => {
                // SAFETY: the region is r.bytes ≥ n·size bytes of device memory that the
                // plan gives the chunks alone (crate::groth16::msms carves it from the
                // slot's arena after the lists and the scratch) and that lives until the
                // compute region's end; the copy waits (freed, recorded on the compute
                // stream when the regions were handed out and after each chunk's kernels)
                // for all earlier work on it. A raw copy: the arena's own event tracking
                // would order the copy after the kernels of the chunk before.
                unsafe { cudarc::driver::result::memcpy_htod_async(r.addresses[slot - 2], src, self.stream.cu_stream()) }?;
                r.addresses[slot - 2]
            }
            None => {
                // SAFETY: the buffer holds self.bytes ≥ n·size bytes, 8-byte aligned like
                // the point types, which are plain words valid for any bits.
                let mut view = unsafe { self.bufs[slot].transmute_mut::<G::DeviceAffine>(n) }
                    .ok_or_else(|| GpuError::Invalid("chunk buffer too small".into()))?;
                self.stream.memcpy_htod(src, &mut view)?;
                device_address(&self.bufs[slot], &gpu.stream)
            }
        };
        self.loaded[slot].record(&self.stream)?;
        gpu.stream.wait(&self.loaded[slot])?;
        let at = if indexed {
            // Index i of the query is read at address + (i − first)·size.
            BasesAt { origin: address.wrapping_sub((range.start * size) as u64), first: range.start, end: range.end, group: PhantomData }
        } else {
            BasesAt { origin: address, first: 0, end: n, group: PhantomData }
        };
        Ok((slot, at))
    }

    /// Marks the buffer free once the kernels enqueued so far on the compute stream are done.
    pub(crate) fn release(&mut self, gpu: &Gpu, slot: usize) -> Result<(), GpuError> {
        self.release_on(&gpu.stream, slot)
    }

    /// Hands out a slot's regions for the chunks that follow: their first copies wait
    /// for the work enqueued so far on `consumer` (what the regions held before).
    pub(crate) fn regions_from_now(&mut self, consumer: &CudaStream) -> Result<(), GpuError> {
        self.freed[2].record(consumer)?;
        self.freed[3].record(consumer)?;
        Ok(())
    }

    /// The next buffer filled by `fill`'s copies (on the chunk stream, once the work
    /// that read the buffer last is done), with `consumer` ordered after them: for data
    /// other than points (compiled matrices' row blocks, crate::groth16::row_blocks).
    /// Returns the buffer's index, for [`BaseChunks::buffer`] and
    /// [`BaseChunks::release_on`].
    pub(crate) fn load_with(
        &mut self,
        consumer: &CudaStream,
        fill: impl FnOnce(&Arc<CudaStream>, &mut CudaSlice<u64>) -> Result<(), GpuError>,
    ) -> Result<usize, GpuError> {
        let slot = self.next;
        self.next = 1 - slot;
        self.stream.wait(&self.freed[slot])?;
        fill(&self.stream, &mut self.bufs[slot])?;
        self.loaded[slot].record(&self.stream)?;
        consumer.wait(&self.loaded[slot])?;
        Ok(slot)
    }

    /// Buffer `slot`, to read in work ordered after its copies.
    pub(crate) fn buffer(&self, slot: usize) -> &CudaSlice<u64> {
        &self.bufs[slot & 1]
    }

    /// Marks buffer `slot` (an index [`BaseChunks::load`] or [`BaseChunks::load_with`]
    /// returned) free once the work enqueued so far on `consumer` is done.
    pub(crate) fn release_on(&self, consumer: &CudaStream, slot: usize) -> Result<(), GpuError> {
        Ok(self.freed[slot & 3].record(consumer)?)
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
