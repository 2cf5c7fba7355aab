//! The input lists of a split MSM (L, A and B of a proof): over the aux values a
//! density selects, zeros dropped, the bases of the ones listed, the significant
//! scalars kept with their base indices. The k-th selected value belongs to base
//! `first_base + k`.
//!
//! The prover builds them on the device ([`build_piece`], kernels/msm/split.cuh) from
//! the compact aux vector (crate::msm::compact) and the density bitmaps: the host only
//! counts bits per chunk of positions (cheap popcounts, [`split_plan`]), so the lists
//! never cross PCIe. They are built a piece at a time, each piece a run of chunks whose
//! lists fit the memory the prover has for them ([`SplitPlan::pieces`]): a witness of
//! any share of significant values is proved in bounded memory. [`split_lists`] builds
//! the same lists on the host: the reference the device's are tested against, and the
//! input of the MSM benchmarks.

use std::ops::Range;
use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceSlice};
use cuzk_groth16::synthesis::{Density, ScalarClasses};
use ff::Field;
use rayon::prelude::*;

use super::compact::CompactView;
use super::group::{device_address, BasesAt, MsmGroup};
use super::pippenger::{blocks, GpuMsm, PhaseEvents, Scratch};
use crate::device::{Gpu, GpuError};
use crate::field::{as_device, DeviceFr};
use crate::kernels::At;

/// A split MSM's lists on the device, uploaded from the host ([`GpuMsm::upload_split`]).
pub struct DeviceSplit {
    pub(crate) sig_scalars: Option<CudaSlice<DeviceFr>>,
    pub(crate) sig_index: Option<CudaSlice<u32>>,
    pub(crate) ones: Option<CudaSlice<u32>>,
    /// Bytes sent to the device.
    pub bytes: u64,
}

impl DeviceSplit {
    /// The lists as an MSM reads them.
    pub fn view(&self) -> SplitView<'_> {
        SplitView {
            sig_scalars: self.sig_scalars.as_ref().map(|v| v.slice(..)),
            sig_index: self.sig_index.as_ref().map(|v| v.slice(..)),
            ones: self.ones.as_ref().map(|v| v.slice(..)),
        }
    }
}

/// A split MSM's lists (or a piece of them) on the device, as an MSM reads them: every
/// index below the count of the bases it is enqueued over, as many indices as
/// significant scalars, fewer than 2^31 of each.
pub struct SplitView<'a> {
    pub(crate) sig_scalars: Option<CudaView<'a, DeviceFr>>,
    pub(crate) sig_index: Option<CudaView<'a, u32>>,
    pub(crate) ones: Option<CudaView<'a, u32>>,
}

impl SplitView<'_> {
    /// The lists, read back (waits for the stream that wrote them): for tests.
    pub fn to_host(&self) -> Result<SplitLists, GpuError> {
        let down = |v: &Option<CudaView<'_, u32>>| -> Result<Vec<u32>, GpuError> {
            Ok(match v {
                Some(d) => d.stream().clone_dtoh(d)?,
                None => Vec::new(),
            })
        };
        let sig_scalars = match &self.sig_scalars {
            Some(d) => {
                let mut out = vec![Scalar::from(0u64); d.len()];
                // SAFETY: the lists hold aux values copied unchanged: canonical scalars.
                d.stream().memcpy_dtoh(d, unsafe { crate::field::as_device_mut(&mut out) })?;
                d.stream().synchronize()?;
                out
            }
            None => Vec::new(),
        };
        Ok(SplitLists { ones: down(&self.ones)?, sig_index: down(&self.sig_index)?, sig_scalars })
    }
}

/// A split MSM's lists on the host.
#[derive(Debug, Default, PartialEq)]
pub struct SplitLists {
    pub ones: Vec<u32>,
    pub sig_index: Vec<u32>,
    pub sig_scalars: Vec<Scalar>,
}

/// Aux positions per chunk (a multiple of 64: whole density words). The device kernel
/// takes one chunk per block: SPLIT_CHUNK_WORDS · 64 in kernels/msm/split.cuh.
pub const LIST_CHUNK: usize = 1 << 16;

/// Bits of density word `w` that are real positions below `n` and selected.
fn selected_word(density: Option<&Density>, w: usize, n: usize) -> u64 {
    let valid = if (w + 1) * 64 <= n { u64::MAX } else { (1u64 << (n % 64)) - 1 };
    density.map_or(valid, |d| d.words()[w] & valid)
}

/// Where every chunk's part of a split MSM's lists starts.
#[derive(Debug, PartialEq)]
pub struct SplitPlan {
    /// Per chunk: its first base index, its first one and its first significant value.
    pub chunks: Vec<[u32; 3]>,
    /// Per chunk: the index of its positions' first other value (selected or not:
    /// where the window of the compact vector's other values it reads starts).
    pub others: Vec<u32>,
    pub ones: usize,
    pub significant: usize,
    /// Other values at all positions.
    pub total_others: usize,
    /// first_base + the number selected: one past the last base index in the lists.
    pub end: usize,
}

/// What one piece of a split MSM's lists may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceLimits {
    /// Device bytes of its lists (and of its window of other values, with `window`).
    pub bytes: usize,
    /// Significant values (the Pippenger it feeds has scratch for this many).
    pub significant: usize,
    /// The span of base indices it addresses (streamed bases: a chunk buffer's points).
    pub bases: usize,
    /// Whether the piece's window of other values is sent up with it (the compact
    /// vector's other values are not on the device).
    pub window: bool,
}

/// A run of chunks of a split MSM's lists: its chunks, the ranges of the whole lists'
/// ones and significant entries it holds, the base indices they address, and the other
/// values of its positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub chunks: Range<usize>,
    pub ones: Range<usize>,
    pub sig: Range<usize>,
    pub bases: Range<usize>,
    pub others: Range<usize>,
}

/// The parts of a piece's memory in u32 words (ones, significant indices, significant
/// scalars, the window of other values), each aligned to 256 bytes.
fn piece_parts(ones: usize, sig: usize, window: usize) -> [Range<usize>; 4] {
    let words = |bytes: usize| bytes.div_ceil(4).next_multiple_of(64);
    let mut at = 0;
    [ones * 4, sig * 4, sig * 32, window * 32].map(|b| {
        let r = at..at + words(b);
        at = r.end;
        r
    })
}

impl Piece {
    /// Device bytes its lists take (with its window of other values, if `window`).
    pub fn bytes(&self, window: bool) -> usize {
        4 * piece_parts(self.ones.len(), self.sig.len(), if window { self.others.len() } else { 0 })[3].end
    }
}

/// Counts per chunk (popcounts of the bitmaps, in parallel) and their prefix sums.
/// An error if a density or class bitmap is shorter than `n` positions, or if a base
/// index would not fit in 32 bits.
pub fn split_plan(n: usize, classes: &ScalarClasses, density: Option<&Density>, first_base: usize) -> Result<SplitPlan, GpuError> {
    let words = n.div_ceil(64);
    let short = |what: &str, have: usize| GpuError::Invalid(format!("the {what} bitmap has {have} words, {words} needed"));
    let (one, zero) = (classes.one.words(), classes.zero.words());
    if one.len() < words || zero.len() < words {
        return Err(short("scalar classes", one.len().min(zero.len())));
    }
    if let Some(d) = density {
        if d.words().len() < words {
            return Err(short("density", d.words().len()));
        }
    }
    if first_base + n >= 1 << 32 {
        return Err(GpuError::Invalid(format!("{} bases: more than 32-bit indices hold", first_base + n)));
    }
    // [selected, ones, significant, others] per chunk.
    let counts: Vec<[usize; 4]> = (0..n.div_ceil(LIST_CHUNK))
        .into_par_iter()
        .map(|ci| {
            let mut c = [0usize; 4];
            for w in ci * LIST_CHUNK / 64..(((ci + 1) * LIST_CHUNK).min(n)).div_ceil(64) {
                let sel = selected_word(density, w, n);
                let other = selected_word(None, w, n) & !one[w] & !zero[w];
                c[0] += sel.count_ones() as usize;
                c[1] += (sel & one[w]).count_ones() as usize;
                c[2] += (sel & other).count_ones() as usize;
                c[3] += other.count_ones() as usize;
            }
            c
        })
        .collect();
    let mut run = [first_base, 0, 0, 0];
    let mut others = Vec::with_capacity(counts.len());
    let mut chunks = Vec::with_capacity(counts.len());
    for c in &counts {
        // Below first_base + n < 2^32 (checked above).
        chunks.push([run[0] as u32, run[1] as u32, run[2] as u32]);
        others.push(run[3] as u32);
        for j in 0..4 {
            run[j] += c[j];
        }
    }
    Ok(SplitPlan { chunks, others, ones: run[1], significant: run[2], total_others: run[3], end: run[0] })
}

impl SplitPlan {
    /// Chunk `i`'s start, or the lists' end for i = the chunk count: (base index,
    /// position in the ones, position in the significant lists, first other value).
    fn at(&self, i: usize) -> [usize; 4] {
        match self.chunks.get(i) {
            Some(c) => [c[0] as usize, c[1] as usize, c[2] as usize, self.others[i] as usize],
            None => [self.end, self.ones, self.significant, self.total_others],
        }
    }

    fn piece(&self, chunks: Range<usize>) -> Piece {
        let (a, b) = (self.at(chunks.start), self.at(chunks.end));
        Piece { chunks, bases: a[0]..b[0], ones: a[1]..b[1], sig: a[2]..b[2], others: a[3]..b[3] }
    }

    /// The whole lists as one piece.
    pub fn whole(&self) -> Piece {
        self.piece(0..self.chunks.len())
    }

    /// The lists cut into pieces of whole chunks, each within `limits`, in order;
    /// pieces with no entries are left out. An error if one chunk alone exceeds them.
    pub fn pieces(&self, limits: PieceLimits) -> Result<Vec<Piece>, GpuError> {
        let fits = |p: &Piece| p.bytes(limits.window) <= limits.bytes && p.sig.len() <= limits.significant && p.bases.len() <= limits.bases;
        let mut out = Vec::new();
        let mut start = 0;
        while start < self.chunks.len() {
            let one = self.piece(start..start + 1);
            if !fits(&one) {
                return Err(GpuError::Invalid(format!(
                    "one chunk of split lists ({} bytes, {} significant values, {} bases) exceeds a piece's limits {limits:?}",
                    one.bytes(limits.window),
                    one.sig.len(),
                    one.bases.len()
                )));
            }
            // The longest run from `start` that fits (a run's needs grow with its length).
            let (mut lo, mut hi) = (start + 1, self.chunks.len());
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if fits(&self.piece(start..mid)) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            let p = self.piece(start..lo);
            if !p.ones.is_empty() || !p.sig.is_empty() {
                out.push(p);
            }
            start = lo;
        }
        Ok(out)
    }

    /// The per-chunk starts as the list kernel reads them, sent on `stream`.
    pub fn upload_chunks(&self, stream: &Arc<CudaStream>) -> Result<CudaSlice<u32>, GpuError> {
        let flat: Vec<u32> = self.chunks.iter().flatten().copied().collect();
        Ok(stream.clone_htod(if flat.is_empty() { &[0u32][..] } else { &flat })?)
    }
}

/// The lists on the host, in two parallel passes (the plan's counts, then every chunk
/// fills its own part of the outputs): no serial merge of the ~700 MB of a C2 partition.
pub fn split_lists(aux: &[Scalar], classes: &ScalarClasses, density: Option<&Density>, first_base: usize) -> Result<SplitLists, GpuError> {
    let n = aux.len();
    let plan = split_plan(n, classes, density, first_base)?;
    let mut out = SplitLists {
        ones: vec![0; plan.ones],
        sig_index: vec![0; plan.significant],
        sig_scalars: (0..plan.significant).into_par_iter().map(|_| Scalar::ZERO).collect(),
    };
    // Each chunk's slices of the three outputs, and its first base index.
    let mut parts = Vec::with_capacity(plan.chunks.len());
    let (mut ones, mut idx, mut sc) = (&mut out.ones[..], &mut out.sig_index[..], &mut out.sig_scalars[..]);
    for (ci, start) in plan.chunks.iter().enumerate() {
        let next = plan.chunks.get(ci + 1).map_or([0, plan.ones as u32, plan.significant as u32], |c| *c);
        let (o, o_rest) = std::mem::take(&mut ones).split_at_mut((next[1] - start[1]) as usize);
        let (i, i_rest) = std::mem::take(&mut idx).split_at_mut((next[2] - start[2]) as usize);
        let (s, s_rest) = std::mem::take(&mut sc).split_at_mut((next[2] - start[2]) as usize);
        parts.push((o, i, s, start[0]));
        (ones, idx, sc) = (o_rest, i_rest, s_rest);
    }
    parts.into_par_iter().enumerate().for_each(|(ci, (o, si, ss, mut k))| {
        let (mut jo, mut js) = (0, 0);
        let first = ci * LIST_CHUNK;
        for (i, value) in aux.iter().enumerate().take(((ci + 1) * LIST_CHUNK).min(n)).skip(first) {
            if density.is_some_and(|d| !d.get(i)) {
                continue;
            }
            if classes.one.get(i) {
                o[jo] = k;
                jo += 1;
            } else if !classes.zero.get(i) {
                si[js] = k;
                ss[js] = *value;
                js += 1;
            }
            k += 1;
        }
    });
    Ok(out)
}

/// Uploads a density's words (the first ⌈n/64⌉) on `stream`.
pub fn upload_density(stream: &Arc<CudaStream>, density: &Density, n: usize) -> Result<CudaSlice<u64>, GpuError> {
    let words = n.div_ceil(64);
    let w = density.words().get(..words).ok_or_else(|| GpuError::Invalid(format!("a density of {} words, {words} needed", density.words().len())))?;
    Ok(stream.clone_htod(w)?)
}

/// What a query's list pieces are built from: the compact aux vector, the query's
/// density (None: every position selected), the plan's chunk table on the device
/// ([`SplitPlan::upload_chunks`]), and, where the device does not hold the other
/// values, the host's (a piece sends its window of them first).
pub struct ListSource<'a> {
    pub compact: &'a CompactView<'a>,
    pub density: Option<&'a CudaSlice<u64>>,
    pub chunk_table: &'a CudaSlice<u32>,
    pub others_host: Option<&'a [Scalar]>,
}

/// Builds `piece` of `plan`'s lists into `region` on `stream` (the piece's window of
/// other values sent first when the device does not hold them): no host wait. The
/// lists are read on `stream` (or after it, in stream order); `region` must hold
/// [`Piece::bytes`].
pub fn build_piece<'r>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    src: &ListSource<'_>,
    plan: &SplitPlan,
    piece: &Piece,
    region: &'r mut CudaViewMut<'_, u32>,
) -> Result<SplitView<'r>, GpuError> {
    let n = src.compact.layout.len;
    if plan.chunks.len() != n.div_ceil(LIST_CHUNK) || piece.chunks.end > plan.chunks.len() || plan.total_others != src.compact.layout.others {
        return Err(GpuError::Invalid(format!("a plan of {} chunks for {n} aux values, or a piece outside it", plan.chunks.len())));
    }
    let window = src.compact.others.is_none();
    let parts = piece_parts(piece.ones.len(), piece.sig.len(), if window { piece.others.len() } else { 0 });
    if region.len() < parts[3].end {
        return Err(GpuError::Invalid(format!("a region of {} words for a list piece of {}", region.len(), parts[3].end)));
    }
    let short = || GpuError::Invalid("list piece parts too small".into());
    let others_at = if window {
        let host = src.others_host.ok_or_else(|| GpuError::Invalid("the other values are neither on the device nor given".into()))?;
        let w = host.get(piece.others.clone()).ok_or_else(|| GpuError::Invalid("the host's other values end before the piece's window".into()))?;
        if !w.is_empty() {
            let mut place = region.slice_mut(parts[3].clone());
            // SAFETY: the part holds 32 bytes per value of the window (piece_parts);
            // DeviceFr is plain words, written here before the kernel reads them.
            let mut dst = unsafe { place.transmute_mut::<DeviceFr>(w.len()) }.ok_or_else(short)?;
            stream.memcpy_htod(as_device(w), &mut dst)?;
        }
        // Other value k of the vector is read at window + (k − first)·32.
        (device_address(region, stream) + 4 * parts[3].start as u64).wrapping_sub(32 * piece.others.start as u64)
    } else {
        let others = src.compact.others.as_ref().ok_or_else(short)?;
        device_address(others, stream)
    };
    let base = device_address(region, stream);
    // The kernel writes the whole lists' entry k at out + k·size: each output's address
    // is shifted back by the piece's first entry.
    let ones_at = (base + 4 * parts[0].start as u64).wrapping_sub(4 * piece.ones.start as u64);
    let index_at = (base + 4 * parts[1].start as u64).wrapping_sub(4 * piece.sig.start as u64);
    let sig_at = (base + 4 * parts[2].start as u64).wrapping_sub(32 * piece.sig.start as u64);
    let c = &src.compact;
    let (n64, first_chunk) = (n as u64, piece.chunks.start as u64);
    let table = src.chunk_table.slice(3 * piece.chunks.start..3 * piece.chunks.end);
    if !piece.chunks.is_empty() {
        // SAFETY: one block of 256 threads per chunk of the piece, `table` its chunks'
        // three starts each; the bitmaps and offsets hold ⌈n/64⌉ words (CompactView); the
        // density (null where there is none) ⌈n/64⌉ words; the piece's chunks write
        // exactly the entries piece.ones / piece.sig of the whole lists, which the shifted
        // addresses put at the starts of their parts, each sized for them (piece_parts);
        // the other values they read are those of the piece's positions, in the window
        // (or in the resident values).
        unsafe {
            gpu.k.msm_split_lists(
                stream,
                blocks(piece.chunks.len() as u64 * 256, 256),
                &c.one,
                &c.zero,
                &c.offsets,
                At::new(others_at),
                n64,
                src.density,
                &table,
                first_chunk,
                At::new(ones_at),
                At::new(index_at),
                At::new(sig_at),
            )?
        };
    }
    piece_view(src, piece, region)
}

/// The lists of `piece` as [`build_piece`] left them in `region` (from its last build
/// there: the kernels that read them must come before the next build, in stream order).
pub fn piece_view<'r>(src: &ListSource<'_>, piece: &Piece, region: &'r CudaViewMut<'_, u32>) -> Result<SplitView<'r>, GpuError> {
    let window = src.compact.others.is_none();
    let parts = piece_parts(piece.ones.len(), piece.sig.len(), if window { piece.others.len() } else { 0 });
    if region.len() < parts[3].end {
        return Err(GpuError::Invalid(format!("a region of {} words for a list piece of {}", region.len(), parts[3].end)));
    }
    let view = |r: &Range<usize>| region.slice(r.clone());
    let (ones, sig_index, sig) = (view(&parts[0]), view(&parts[1]), view(&parts[2]));
    let short = || GpuError::Invalid("list piece parts too small".into());
    Ok(SplitView {
        // SAFETY: written by build_piece's kernel: the piece's scalars, copied unchanged.
        sig_scalars: if piece.sig.is_empty() { None } else { Some(unsafe { sig.transmute::<DeviceFr>(piece.sig.len()) }.ok_or_else(short)?) },
        sig_index: (!piece.sig.is_empty()).then(|| sig_index.slice(..piece.sig.len())),
        ones: (!piece.ones.is_empty()).then(|| ones.slice(..piece.ones.len())),
    })
}

impl GpuMsm {
    /// Enqueues a split MSM's significant entries and ones (of the lists or a piece of
    /// them) over `at`, pushing their partial sums; empty lists enqueue nothing.
    pub(crate) fn enqueue_split_view<G: MsmGroup>(
        &self,
        at: BasesAt<G>,
        split: &SplitView<'_>,
        results: &mut Vec<CudaSlice<G::DeviceXyzz>>,
        phases: &mut PhaseEvents,
        scratch: &mut Scratch<'_, '_>,
    ) -> Result<(), GpuError> {
        if let (Some(sc), Some(idx)) = (&split.sig_scalars, &split.sig_index) {
            results.push(self.enqueue_pippenger(at, sc, sc.len(), Some(idx), phases, scratch)?);
        }
        if let Some(d) = &split.ones {
            results.push(self.enqueue_sum_indexed(at, d)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_lists_follow_the_density_and_the_classes() {
        // 200 aux values cycling 0, 1, 5, 7; density: every third position.
        let aux: Vec<Scalar> = (0..200u64).map(|i| Scalar::from([0, 1, 5, 7][(i % 4) as usize])).collect();
        let classes = ScalarClasses::classify(&aux);
        let density = Density::from_fn(aux.len(), |i| i % 3 == 0);
        let got = split_lists(&aux, &classes, Some(&density), 10).unwrap();
        let mut want = SplitLists::default();
        for (k, i) in (0..200).filter(|i| i % 3 == 0).enumerate() {
            match i % 4 {
                0 => {}
                1 => want.ones.push(10 + k as u32),
                _ => {
                    want.sig_index.push(10 + k as u32);
                    want.sig_scalars.push(aux[i]);
                }
            }
        }
        assert_eq!(got, want);
        // No density: every aux value has its own base.
        let all = split_lists(&aux, &classes, None, 0).unwrap();
        assert_eq!(all.ones.len(), 50);
        assert_eq!(all.sig_index.len(), 100);
        assert_eq!(all.sig_index[0], 2);
        assert_eq!(all.ones[1], 5);
    }

    #[test]
    fn split_lists_cross_chunk_boundaries() {
        // More than two chunks, with a density whose counts differ per chunk.
        let n = 2 * LIST_CHUNK + 1000;
        let aux: Vec<Scalar> = (0..n as u64).map(|i| Scalar::from(i % 3)).collect();
        let classes = ScalarClasses::classify(&aux);
        let density = Density::from_fn(n, |i| i % 5 != 0 || i > LIST_CHUNK + 7);
        let got = split_lists(&aux, &classes, Some(&density), 3).unwrap();
        let mut k = 3u32;
        let (mut ones, mut sig) = (Vec::new(), Vec::new());
        for i in 0..n {
            if !density.get(i) {
                continue;
            }
            match i % 3 {
                0 => {}
                1 => ones.push(k),
                _ => sig.push(k),
            }
            k += 1;
        }
        assert_eq!(got.ones, ones);
        assert_eq!(got.sig_index, sig);
        assert_eq!(got.sig_scalars.len(), sig.len());
        let plan = split_plan(n, &classes, Some(&density), 3).unwrap();
        assert_eq!(plan.chunks.len(), 3);
        assert_eq!((plan.ones, plan.significant), (ones.len(), sig.len()));
        assert_eq!(plan.chunks[0], [3, 0, 0]);
        // Every chunk's entries address the bases of its own positions, and the other
        // values of its positions are counted from where the last chunk's end.
        let one_chunk = PieceLimits { bytes: usize::MAX, significant: usize::MAX, bases: LIST_CHUNK, window: true };
        let pieces = plan.pieces(one_chunk).unwrap();
        assert_eq!(pieces.len(), 3);
        for p in &pieces {
            assert_eq!(p.chunks.len(), 1);
            let within = |v: &[u32]| v.iter().all(|&b| p.bases.contains(&(b as usize)));
            assert!(within(&ones[p.ones.clone()]) && within(&sig[p.sig.clone()]), "{p:?}");
            let positions = p.chunks.start * LIST_CHUNK..(p.chunks.end * LIST_CHUNK).min(n);
            assert_eq!(p.others.len(), positions.filter(|i| i % 3 == 2).count(), "{p:?}");
        }
        assert_eq!((plan.total_others, pieces[2].others.end), ((0..n).filter(|i| i % 3 == 2).count(), plan.total_others));
    }

    #[test]
    fn pieces_cover_the_lists_in_order_within_their_limits() {
        // 10 chunks; the density leaves chunk 4 with nothing selected.
        let n = 10 * LIST_CHUNK - 100;
        let aux: Vec<Scalar> = (0..n as u64).map(|i| Scalar::from(i % 4)).collect();
        let classes = ScalarClasses::classify(&aux);
        let density = Density::from_fn(n, |i| i / LIST_CHUNK != 4);
        let plan = split_plan(n, &classes, Some(&density), 0).unwrap();
        let per_chunk = Piece { chunks: 0..1, ones: 0..LIST_CHUNK / 4, sig: 0..LIST_CHUNK / 2, bases: 0..LIST_CHUNK, others: 0..LIST_CHUNK / 2 };
        for (limits, most) in [
            // Room for three chunks' lists; two chunks' significant values; unbounded.
            (PieceLimits { bytes: 3 * per_chunk.bytes(false), significant: usize::MAX, bases: usize::MAX, window: false }, 3),
            (PieceLimits { bytes: usize::MAX, significant: LIST_CHUNK, bases: usize::MAX, window: true }, 2),
            (PieceLimits { bytes: usize::MAX, significant: usize::MAX, bases: usize::MAX, window: false }, 10),
        ] {
            let pieces = plan.pieces(limits).unwrap();
            let (mut ones, mut sig, mut chunk) = (0, 0, 0);
            for p in &pieces {
                assert!(p.bytes(limits.window) <= limits.bytes && p.sig.len() <= limits.significant, "{p:?}");
                assert!(p.chunks.clone().filter(|&c| c != 4).count() <= most, "{limits:?}: {p:?}");
                // In order, nothing missed: only the empty chunk 4 may be left out.
                assert!(p.chunks.start == chunk || (p.chunks.start == chunk + 1 && chunk == 4), "{p:?}");
                assert_eq!((p.ones.start, p.sig.start), (ones, sig));
                (ones, sig, chunk) = (p.ones.end, p.sig.end, p.chunks.end);
            }
            assert_eq!((ones, sig, chunk), (plan.ones, plan.significant, 10));
        }
        assert_eq!(plan.whole().sig, 0..plan.significant);
        // A chunk larger than a piece may be: refused, saying so.
        let tight = PieceLimits { bytes: usize::MAX, significant: 100, bases: usize::MAX, window: false };
        assert!(plan.pieces(tight).unwrap_err().to_string().contains("exceeds a piece's limits"));
    }

    #[test]
    fn short_bitmaps_and_oversized_indices_are_errors() {
        let aux: Vec<Scalar> = (0..100u64).map(Scalar::from).collect();
        let classes = ScalarClasses::classify(&aux);
        let short = Density::from_fn(10, |_| true);
        assert!(split_plan(aux.len(), &classes, Some(&short), 0).is_err());
        assert!(split_plan(aux.len(), &classes, None, (1 << 32) - 50).is_err());
        assert!(split_plan(aux.len(), &classes, None, 0).is_ok());
    }
}
