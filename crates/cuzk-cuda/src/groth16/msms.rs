//! The five MSMs of a partition, enqueued on the compute stream with no host wait, in
//! the memory the device plan gave them (crate::groth16::plan): h where the H
//! polynomial left it; the split lists built a piece at a time into the slot's arena
//! after h; every Pippenger run's scratch after them ([`Scratch::Lent`]).
//!
//! Where the plan puts the streamed points' chunk buffers in the slot
//! (`chunks_in_slot`), they are the arena's last bytes, after the scratch.
//!
//! H runs over pieces of at most `h_piece` scalars (one where the scratch allows). L, A
//! and B run over list pieces within the plan's limits (one per query for a Filecoin
//! witness on any card with room for its lists; a witness of mostly significant values
//! on a small card takes several). Streamed points go up a chunk per run: H's pieces
//! are a chunk at most, a list piece's bases span a chunk at most. B's pieces feed its
//! G1 MSM and then its G2 MSM (rebuilt for G2 when there is more than one).

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use super::plan::DevicePlan;
use super::points::LoadedPoints;
use super::prepare::QueryLists;
use super::staging::MsmMemory;
use crate::device::{Gpu, GpuError};
use crate::field::DeviceFr;
use crate::msm::compact::{CompactLayout, CompactView};
use crate::msm::split::{build_piece, ListSource, Piece};
use crate::msm::streamed::{BaseChunks, ChunkRegions, HostBases};
use crate::msm::{device_address, BasesAt, DeviceBases, GpuMsm, MsmGroup, PendingMsm, PhaseEvents, Scratch, G1, G2};

/// The five MSMs of a partition, enqueued.
pub struct PendingMsms {
    pub h: PendingMsm<G1>,
    pub l: PendingMsm<G1>,
    pub a: PendingMsm<G1>,
    pub b_g1: PendingMsm<G1>,
    pub b_g2: PendingMsm<G2>,
    /// Pippenger runs and list pieces enqueued, and the bytes of other values sent up
    /// with list pieces.
    pub runs: usize,
    pub pieces: usize,
    pub window_bytes: u64,
}

/// A query's bases, where they are.
enum Bases<'a, G: MsmGroup> {
    Resident(&'a DeviceBases<G>),
    Streamed(&'a HostBases<G>),
}

/// What every run of a partition's MSMs shares.
struct Runs<'m, 'r> {
    gpu: &'m Gpu,
    msm: &'m GpuMsm,
    chunks: Option<&'m mut BaseChunks>,
    /// The chunks' regions in the slot's arena, where the plan puts them there.
    regions: Option<ChunkRegions>,
    scratch: CudaViewMut<'r, u32>,
    runs: usize,
}

/// One MSM being enqueued: its partial sums and span.
struct Sums<G: MsmGroup> {
    start: cudarc::driver::CudaEvent,
    results: Vec<CudaSlice<G::DeviceXyzz>>,
    phases: PhaseEvents,
    bases_up: u64,
}

impl<G: MsmGroup> Sums<G> {
    fn new(gpu: &Gpu, timed: bool) -> Result<Self, GpuError> {
        Ok(Sums {
            start: gpu.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?,
            results: Vec::new(),
            phases: PhaseEvents::new(timed),
            bases_up: 0,
        })
    }

    fn finish(self, gpu: &Gpu) -> Result<PendingMsm<G>, GpuError> {
        let end = gpu.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        Ok(PendingMsm::enqueued(self.results, self.start, self.phases, end, self.bases_up))
    }
}

impl Runs<'_, '_> {
    /// The bases of `range` (`indexed`: read by their index in the query, as split lists
    /// address them) for one run: resident ones in place, streamed ones loaded into a
    /// chunk buffer (released by `done`).
    fn bases<G: MsmGroup>(
        &mut self,
        q: &Bases<'_, G>,
        range: std::ops::Range<usize>,
        indexed: bool,
        sums: &mut Sums<G>,
    ) -> Result<(BasesAt<G>, Option<usize>), GpuError> {
        match q {
            Bases::Resident(b) => {
                let at = b.at(&self.gpu.stream);
                Ok((if indexed { at } else { at.offset(range.start, range.len()) }, None))
            }
            Bases::Streamed(h) => {
                let chunks = self.chunks.as_deref_mut().ok_or_else(|| GpuError::Invalid("streamed points without chunk buffers".into()))?;
                let (slot, at) = chunks.load(self.gpu, h, range.clone(), indexed, self.regions.as_ref())?;
                sums.bases_up += (range.len() * std::mem::size_of::<G::DeviceAffine>()) as u64;
                Ok((at, Some(slot)))
            }
        }
    }

    /// After a run's kernels (also after a failed enqueue: kernels already launched may
    /// read the bases): resident bases are recorded as read by them (their free waits
    /// for them), a chunk buffer is marked free once they are done.
    fn done<G: MsmGroup>(&mut self, q: &Bases<'_, G>, slot: Option<usize>) -> Result<(), GpuError> {
        if let Bases::Resident(b) = q {
            b.read_until_now(&self.gpu.stream);
        }
        if let (Some(slot), Some(chunks)) = (slot, self.chunks.as_deref_mut()) {
            chunks.release(self.gpu, slot)?;
        }
        Ok(())
    }

    /// Σ h[i]·bases[i] in runs of at most `piece` scalars.
    fn dense<G: MsmGroup>(&mut self, q: &Bases<'_, G>, h: &CudaView<'_, DeviceFr>, piece: usize, sums: &mut Sums<G>) -> Result<(), GpuError> {
        let n = h.len();
        for first in (0..n).step_by(piece.max(1)) {
            let range = first..(first + piece).min(n);
            let (at, slot) = self.bases(q, range.clone(), false, sums)?;
            let r =
                self.msm.enqueue_pippenger(at, &h.slice(range.clone()), range.len(), None, &mut sums.phases, &mut Scratch::Lent(&mut self.scratch));
            self.done(q, slot)?;
            sums.results.push(r?);
            self.runs += 1;
        }
        Ok(())
    }

    /// One list piece's split MSM.
    fn split<G: MsmGroup>(&mut self, q: &Bases<'_, G>, piece: &Piece, lists: &crate::msm::SplitView<'_>, sums: &mut Sums<G>) -> Result<(), GpuError> {
        let (at, slot) = self.bases(q, piece.bases.clone(), true, sums)?;
        let r = self.msm.enqueue_split_view(at, lists, &mut sums.results, &mut sums.phases, &mut Scratch::Lent(&mut self.scratch));
        self.done(q, slot)?;
        self.runs += 1;
        r
    }
}

/// A set's five queries (H, L, A, B in G1, B in G2) as the runs read them.
type QueryBases<'a> = (Bases<'a, G1>, Bases<'a, G1>, Bases<'a, G1>, Bases<'a, G1>, Bases<'a, G2>);

/// The queries' points as the runs read them.
fn queries(points: &LoadedPoints) -> QueryBases<'_> {
    match points {
        LoadedPoints::Resident(q) => {
            (Bases::Resident(&q.h), Bases::Resident(&q.l), Bases::Resident(&q.a), Bases::Resident(&q.b_g1), Bases::Resident(&q.b_g2))
        }
        LoadedPoints::Streamed { points: q, h, .. } => (
            h.as_ref().map_or(Bases::Streamed(&q.h), Bases::Resident),
            Bases::Streamed(&q.l),
            Bases::Streamed(&q.a),
            Bases::Streamed(&q.b_g1),
            Bases::Streamed(&q.b_g2),
        ),
    }
}

/// Enqueues the partition's five MSMs (see the module's text) in `mem`, as `plan` says;
/// `witness` lays out the compact witness in the slot's area, `others_host` holds its
/// other values where the area does not.
#[allow(clippy::too_many_arguments)]
pub fn enqueue(
    gpu: &Gpu,
    msm: &GpuMsm,
    plan: &DevicePlan,
    points: &LoadedPoints,
    chunks: Option<&mut BaseChunks>,
    mem: MsmMemory<'_>,
    witness: &CompactLayout,
    others_host: Option<&[blstrs::Scalar]>,
    lists: &[QueryLists; 3],
) -> Result<PendingMsms, GpuError> {
    let MsmMemory { a, mut rest, witness: area } = mem;
    let h = a.slice(..a.len().saturating_sub(1));
    let words = rest.len() * 8;
    // SAFETY: the rest of the arena is written (list pieces, the MSMs' buffers) before
    // it is read as words; any bits are valid u32s.
    let mut rest = unsafe { rest.transmute_mut::<u32>(words) }.ok_or_else(|| GpuError::Invalid("the arena's rest as words".into()))?;
    let list_words = plan.lists_bytes.div_ceil(4).next_multiple_of(64);
    let streamed = matches!(points, LoadedPoints::Streamed { .. });
    let chunk_words = if streamed { plan.slot_chunk_bytes() / 4 } else { 0 };
    if rest.len() < list_words + plan.scratch_bytes / 4 + chunk_words {
        return Err(GpuError::Invalid(format!(
            "a slot with {} bytes after h for {} of list pieces, {} of MSM scratch and {} of chunk buffers: the plan was made for another set",
            4 * rest.len(),
            plan.lists_bytes,
            plan.scratch_bytes,
            4 * chunk_words
        )));
    }
    let at_end = rest.len() - chunk_words;
    let (mut rest, tail) = rest.split_at_mut(at_end);
    let mut chunks = chunks;
    let regions = match (chunk_words, chunks.as_deref_mut()) {
        (0, _) => None,
        (_, None) => return Err(GpuError::Invalid("streamed points without chunk buffers".into())),
        (_, Some(c)) => {
            // The regions held b and c until the H polynomial, enqueued before now on the
            // compute stream: the first copies into them wait for it.
            c.regions_from_now(&gpu.stream)?;
            let bytes = 2 * chunk_words;
            // 8-byte aligned: the arena is, and h, the lists and the scratch before the
            // regions are whole 8-byte words (the plan's chunks are multiples of 192).
            let first = device_address(&tail, &gpu.stream);
            Some(ChunkRegions { addresses: [first, first + bytes as u64], bytes })
        }
    };
    let (mut region, scratch) = rest.split_at_mut(list_words);
    let compact = CompactView::of(area, witness)?;
    let window = compact.others.is_none();
    let (qh, ql, qa, qb1, qb2) = queries(points);
    let mut runs = Runs { gpu, msm, chunks, regions, scratch, runs: 0 };
    let (mut pieces, mut window_bytes) = (0usize, 0u64);
    // A lone run is timed phase by phase (bench reports); pieces are not told apart.
    let one_run = |count: usize| count <= 1;

    // Where a failure happened (a device error alone does not say).
    let at = |what: String| move |e: GpuError| GpuError::Invalid(format!("{what}: {e}"));
    let h_runs = h.len().div_ceil(plan.h_piece.max(1));
    let mut sh = Sums::<G1>::new(gpu, one_run(h_runs))?;
    runs.dense(&qh, &h, plan.h_piece, &mut sh).map_err(at(format!("the H MSM ({h_runs} runs of at most {})", plan.h_piece)))?;
    let h_msm = sh.finish(gpu)?;

    // L and A, one pass each; B for G1 then for G2 over the same pieces.
    let mut g1 = Vec::with_capacity(3);
    for (i, (q, bases)) in lists.iter().zip([&ql, &qa, &qb1]).enumerate() {
        let is_b = i == 2;
        let ps = q.plan.pieces(plan.piece_limits(window, is_b))?;
        let mut sums = Sums::<G1>::new(gpu, one_run(ps.len()))?;
        let query = ["L", "A", "B (G1)"][i];
        for (k, piece) in ps.iter().enumerate() {
            let where_ =
                || format!("the {query} MSM, list piece {k} of {} ({} ones, {} significant values)", ps.len(), piece.ones.len(), piece.sig.len());
            let view = build_piece(gpu, &gpu.stream, &source(&compact, q, others_host), &q.plan, piece, &mut region).map_err(at(where_()))?;
            runs.split(bases, piece, &view, &mut sums).map_err(at(where_()))?;
            pieces += 1;
            if window {
                window_bytes += 32 * piece.others.len() as u64;
            }
        }
        g1.push(sums.finish(gpu)?);
        if is_b {
            // B in G2: the last piece's lists are still in place; earlier ones are built again.
            let mut s2 = Sums::<G2>::new(gpu, one_run(ps.len()))?;
            for (k, piece) in ps.iter().enumerate().rev() {
                let view = if k + 1 == ps.len() {
                    rebuild_view(gpu, &source(&compact, q, others_host), &q.plan, piece, &mut region, false)?
                } else {
                    pieces += 1;
                    if window {
                        window_bytes += 32 * piece.others.len() as u64;
                    }
                    rebuild_view(gpu, &source(&compact, q, others_host), &q.plan, piece, &mut region, true)?
                };
                runs.split(&qb2, piece, &view, &mut s2).map_err(at(format!("the B (G2) MSM, list piece {k} of {}", ps.len())))?;
            }
            let b_g2 = s2.finish(gpu)?;
            let [l, a, b_g1]: [PendingMsm<G1>; 3] = g1.try_into().map_err(|_| GpuError::Invalid("three G1 MSMs".into()))?;
            return Ok(PendingMsms { h: h_msm, l, a, b_g1, b_g2, runs: runs.runs, pieces, window_bytes });
        }
    }
    Err(GpuError::Invalid("the B query's lists were not enqueued".into()))
}

/// What a query's list pieces are built from.
fn source<'a>(compact: &'a CompactView<'a>, q: &'a QueryLists, others_host: Option<&'a [blstrs::Scalar]>) -> ListSource<'a> {
    ListSource { compact, density: q.density.as_ref(), chunk_table: &q.chunk_table, others_host }
}

/// A piece's lists in `region`: built again (`build`), or the views of the ones still
/// there from the piece's last build.
fn rebuild_view<'r>(
    gpu: &Gpu,
    src: &ListSource<'_>,
    plan: &crate::msm::split::SplitPlan,
    piece: &Piece,
    region: &'r mut CudaViewMut<'_, u32>,
    build: bool,
) -> Result<crate::msm::SplitView<'r>, GpuError> {
    if build {
        build_piece(gpu, &gpu.stream, src, plan, piece, region)
    } else {
        crate::msm::split::piece_view(src, piece, region)
    }
}
