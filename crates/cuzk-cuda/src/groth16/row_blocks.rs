//! Compiled matrices that do not fit the device beside a partition's working memory
//! (a 16 GB card: 7.5 GB of 32 GiB PoRep matrices beside 12.9 GB of a, b, c): kept in
//! pinned host memory ([`StreamedMatrices`]) and sent up per partition in blocks of
//! whole rows through the streamed points' two chunk buffers
//! (crate::msm::streamed::BaseChunks), one block's products computed while the next
//! crosses the bus.
//!
//! Per partition that sends the matrices' bytes (7.46 GB at 32 GiB PoRep) instead of
//! a, b, c (12.9 GB), and the host computes no products (~5.9 s per 32 GiB PoRep
//! partition on 16 cores, which made a 16 GB card host-bound).
//!
//! A block in a chunk buffer (64-bit words): its rows' starts (rows + 1, the whole
//! matrix's offsets), then its columns (32-bit), then its coefficient indices (16-bit),
//! each part starting on a word. The products kernel subtracts the block's first
//! offset (crate::groth16::products::launch_rows).
//!
//! [`ProductSource`] is the seam the prover takes: matrices resident or streamed.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut, PinnedHostSlice};
use cuzk_groth16::matrices::{ConstraintMatrices, SparseMatrix};
use rayon::prelude::*;

use super::products::{check_products, launch_rows, DeviceMatrices, RowBlock};
use crate::device::{Gpu, GpuError};
use crate::field::{as_device, DeviceFr};
use crate::msm::compact::CompactView;
use crate::msm::streamed::BaseChunks;
use cuzk_groth16::sync::lock;

/// Where a partition's a, b, c are computed from: matrices resident on the device, or
/// streamed from the host through the backend's chunk buffers (locked while the
/// products are enqueued).
pub enum ProductSource<'a> {
    Resident(&'a DeviceMatrices),
    Streamed(&'a StreamedMatrices, &'a Mutex<Option<BaseChunks>>),
}

impl ProductSource<'_> {
    /// a, b, c of `z` into `out` (as [`DeviceMatrices::products_into`]), enqueued on
    /// `stream`; the bytes sent up for them.
    pub fn products_into(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        z: &CompactView<'_>,
        out: [&mut CudaViewMut<'_, DeviceFr>; 3],
    ) -> Result<u64, GpuError> {
        match self {
            ProductSource::Resident(m) => m.products_into(gpu, stream, z, out).map(|()| 0),
            ProductSource::Streamed(m, chunks) => {
                let mut guard = lock(chunks);
                let chunks = guard.as_mut().ok_or_else(|| GpuError::Invalid("streamed matrices without chunk buffers".into()))?;
                let r = m.products_into(gpu, stream, chunks, z, out);
                if r.is_err() {
                    // Copies may be queued that nothing came to wait for.
                    if let Err(e) = chunks.synchronize() {
                        tracing::error!(error = %e, "synchronizing the chunk copies after failed products");
                    }
                }
                r
            }
        }
    }
}

/// One block of a matrix: its rows and the range of non-zeros they hold.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Block {
    rows: Range<usize>,
    non_zeros: Range<u64>,
}

impl Block {
    /// Words of a chunk buffer the block takes: row starts, columns, coefficients.
    fn words(rows: usize, non_zeros: usize) -> usize {
        rows + 1 + non_zeros.div_ceil(2) + non_zeros.div_ceil(4)
    }
}

/// The blocks of whole rows of a matrix with these row starts, each at most `words`
/// 64-bit words, in row order; Err naming a row that alone is larger.
fn blocks_of(row_starts: &[u64], words: usize) -> Result<Vec<Block>, String> {
    let rows = row_starts.len().saturating_sub(1);
    let need = |r0: usize, r1: usize| Block::words(r1 - r0, (row_starts[r1] - row_starts[r0]) as usize);
    let mut out = Vec::new();
    let mut r0 = 0;
    while r0 < rows {
        // The last r1 in (r0, rows] whose block fits: the need grows with r1.
        let (mut lo, mut hi) = (r0, rows);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if need(r0, mid) <= words {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        if lo == r0 {
            return Err(format!(
                "row {r0} has {} non-zeros: more than a chunk buffer of {} bytes holds",
                row_starts[r0 + 1] - row_starts[r0],
                words * 8
            ));
        }
        out.push(Block { rows: r0..lo, non_zeros: row_starts[r0]..row_starts[lo] });
        r0 = lo;
    }
    Ok(out)
}

/// One matrix in pinned host memory, and its blocks.
struct HostCsr {
    row_starts: PinnedHostSlice<u64>,
    columns: PinnedHostSlice<u32>,
    coefficients: PinnedHostSlice<u16>,
    blocks: Vec<Block>,
}

impl HostCsr {
    fn pin(gpu: &Gpu, m: &SparseMatrix, words: usize) -> Result<Self, GpuError> {
        let blocks = blocks_of(&m.row_starts, words).map_err(GpuError::Invalid)?;
        Ok(HostCsr { row_starts: pin(gpu, &m.row_starts)?, columns: pin(gpu, &m.columns)?, coefficients: pin(gpu, &m.coefficients)?, blocks })
    }
}

/// A copy of `src` in pinned host memory (one value at least: cudarc pins nothing for none).
fn pin<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Copy + Default + Send + Sync>(
    gpu: &Gpu,
    src: &[T],
) -> Result<PinnedHostSlice<T>, GpuError> {
    // Not write-combined: the copy below reads nothing back, but block bounds are read
    // from the source, and plain pinned memory uploads as fast.
    // SAFETY: every value is written just below (the one spare of an empty source too).
    let mut out = unsafe { gpu.alloc_pinned::<T>(src.len().max(1), false)? };
    let dst = out.as_mut_slice()?;
    if src.is_empty() {
        dst[0] = T::default();
    } else {
        dst.par_chunks_mut(1 << 20).zip(src.par_chunks(1 << 20)).for_each(|(d, s)| d.copy_from_slice(s));
    }
    Ok(out)
}

/// A circuit shape's compiled matrices in pinned host memory, cut into row blocks for
/// chunk buffers of a given size, and its coefficient dictionary on the device.
pub struct StreamedMatrices {
    matrices: [HostCsr; 3],
    dictionary: CudaSlice<DeviceFr>,
    num_inputs: usize,
    num_aux: usize,
    rows: usize,
    /// The chunk buffers' least size the blocks were cut for.
    block_bytes: usize,
    /// Pinned host bytes held (what a partition sends up).
    pub bytes: u64,
}

impl StreamedMatrices {
    /// Pins a copy of `m` (seconds for gigabytes) cut into blocks of at most
    /// `block_bytes` (the chunk buffers' size).
    pub fn pin(gpu: &Gpu, m: &ConstraintMatrices, block_bytes: usize) -> Result<Self, GpuError> {
        let rows = m.num_constraints();
        if [&m.b, &m.c].iter().any(|x| x.rows() != rows) || m.dictionary.is_empty() {
            return Err(GpuError::Invalid("matrices of unequal row counts or without a dictionary".into()));
        }
        // One word spare: an empty block's columns still get a view.
        let words = (block_bytes / 8).saturating_sub(1);
        let matrices = [HostCsr::pin(gpu, &m.a, words)?, HostCsr::pin(gpu, &m.b, words)?, HostCsr::pin(gpu, &m.c, words)?];
        let bytes = [&m.a, &m.b, &m.c].iter().map(|s| (s.row_starts.len() * 8 + s.columns.len() * 4 + s.coefficients.len() * 2) as u64).sum();
        let dictionary = gpu.stream().clone_htod(as_device(&m.dictionary))?;
        Ok(StreamedMatrices { matrices, dictionary, num_inputs: m.num_inputs, num_aux: m.num_aux, rows, block_bytes, bytes })
    }

    /// Blocks per partition, over the three matrices.
    pub fn block_count(&self) -> usize {
        self.matrices.iter().map(|m| m.blocks.len()).sum()
    }

    /// a, b, c of `z` into `out` (equal lengths ≥ rows, zero past the rows), enqueued
    /// on `stream` with every block's copy through `chunks`; the bytes sent.
    pub fn products_into(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        chunks: &mut BaseChunks,
        z: &CompactView<'_>,
        out: [&mut CudaViewMut<'_, DeviceFr>; 3],
    ) -> Result<u64, GpuError> {
        check_products(self.num_inputs, self.num_aux, self.rows, z, &out)?;
        if chunks.chunk_bytes() < self.block_bytes {
            return Err(GpuError::Invalid(format!("chunk buffers of {} bytes for row blocks cut for {}", chunks.chunk_bytes(), self.block_bytes)));
        }
        let mut sent = 0u64;
        for (m, v) in self.matrices.iter().zip(out) {
            if v.len() > self.rows {
                stream.memset_zeros(&mut v.slice_mut(self.rows..))?;
            }
            let (starts, columns, coefficients) = (m.row_starts.as_slice()?, m.columns.as_slice()?, m.coefficients.as_slice()?);
            for b in &m.blocks {
                let (rows, nz) = (b.rows.len(), (b.non_zeros.start as usize)..(b.non_zeros.end as usize));
                let (w_columns, w_coefficients) = (rows + 1, rows + 1 + nz.len().div_ceil(2));
                let slot = chunks.load_with(stream, |copy, buf| {
                    // Asynchronous: from pinned memory, which the set keeps while its
                    // proofs run.
                    copy.memcpy_htod(&starts[b.rows.start..=b.rows.end], &mut buf.slice_mut(..rows + 1))?;
                    if !nz.is_empty() {
                        let short = || GpuError::Invalid("a row block larger than its chunk buffer".into());
                        let mut c = buf.slice_mut(w_columns..);
                        // SAFETY: u32 and u16 are valid for any bits; the views lie within
                        // the buffer (transmute checks the lengths).
                        copy.memcpy_htod(&columns[nz.clone()], &mut unsafe { c.transmute_mut::<u32>(nz.len()) }.ok_or_else(short)?)?;
                        let mut f = buf.slice_mut(w_coefficients..);
                        // SAFETY: as for the columns just above.
                        copy.memcpy_htod(&coefficients[nz.clone()], &mut unsafe { f.transmute_mut::<u16>(nz.len()) }.ok_or_else(short)?)?;
                    }
                    Ok(())
                })?;
                let buf = chunks.buffer(slot);
                let short = || GpuError::Invalid("a row block larger than its chunk buffer".into());
                let (c, f) = (buf.slice(w_columns..), buf.slice(w_coefficients..));
                let block = RowBlock {
                    row_starts: buf.slice(..rows + 1),
                    base: b.non_zeros.start,
                    // SAFETY: as above; an empty block's views hold one unread value
                    // (the spare word kept by `pin`).
                    columns: unsafe { c.transmute::<u32>(nz.len().max(1)) }.ok_or_else(short)?,
                    // SAFETY: as for the columns just above.
                    coefficients: unsafe { f.transmute::<u16>(nz.len().max(1)) }.ok_or_else(short)?,
                };
                // SAFETY: the block's row starts are the matrix's own (ascending; minus
                // the block's first offset, within its columns and coefficients, copied
                // just before on the ordered chunk stream); the matrix's columns and
                // coefficient indices are valid for z's shape (checked above) and its
                // dictionary; `out` has the block's rows.
                unsafe { launch_rows(gpu, stream, &block, &self.dictionary, z, &mut v.slice_mut(b.rows.clone()))? };
                chunks.release_on(stream, slot)?;
                sent += (Block::words(rows, nz.len()) * 8) as u64;
            }
        }
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_every_row_once_within_their_words() {
        // Rows of 0, 1, 5, 0, 9, 2 non-zeros.
        let starts = [0u64, 0, 1, 6, 6, 15, 17];
        for words in [14usize, 16, 20, 64] {
            let blocks = blocks_of(&starts, words).unwrap();
            let mut next = 0;
            for b in &blocks {
                assert_eq!(b.rows.start, next, "{words}: {blocks:?}");
                assert!(!b.rows.is_empty());
                assert_eq!(b.non_zeros, starts[b.rows.start]..starts[b.rows.end]);
                assert!(Block::words(b.rows.len(), b.non_zeros.clone().count()) <= words, "{words}: {b:?}");
                // As many rows as fit: the next row would not.
                if b.rows.end < 6 {
                    let more = Block::words(b.rows.len() + 1, (starts[b.rows.end + 1] - starts[b.rows.start]) as usize);
                    assert!(more > words, "{words}: {b:?} could take another row");
                }
                next = b.rows.end;
            }
            assert_eq!(next, 6, "{words}");
        }
        assert_eq!(blocks_of(&starts, 64).unwrap().len(), 1);
        // The row of 9 non-zeros alone takes 2 + 5 + 3 = 10 words.
        let e = blocks_of(&starts, 9).unwrap_err();
        assert!(e.contains("row 4 has 9 non-zeros"), "{e}");
        assert!(blocks_of(&[0u64], 4).unwrap().is_empty());
    }
}
