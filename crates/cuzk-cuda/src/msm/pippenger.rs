//! Pippenger on the device: signed-digit windows, the bucket sort, segment-balanced
//! accumulation (with batch-affine rounds where they pay), the bucket reduction, and
//! the batch addition of a split MSM's ones (kernels/msm/pippenger.cuh has the phases).
//! Every launch sequence of the MSM is here; [`GpuMsm`]'s public calls (crate::msm)
//! and the streamed chunks (crate::msm::streamed) enqueue through them.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut, LaunchConfig};

use super::group::{device_address, BasesAt, MsmGroup};
use super::plan::{affine_rounds, window_bits, windows, words_of, AffinePlan, ScratchLayout, AFFINE_SPAN, MAX_AFFINE_ROUNDS, MAX_WINDOW_BITS};
use crate::device::{Gpu, GpuError};
use crate::field::DeviceFr;
use crate::kernels::At;
use cuzk_groth16::sync::lock;

/// Device time of one MSM's phases, from CUDA events.
#[derive(Clone, Copy, Debug, Default)]
pub struct MsmTimings {
    /// Scalars host → device.
    pub upload_ms: f32,
    /// Digits counted, prefix sums, entries scattered to their buckets.
    pub sort_ms: f32,
    /// Of `sort_ms`, the digits (computed, stored and counted per bucket).
    pub digits_ms: f32,
    /// Bucket sums (batch-affine rounds, segments and the fix-up of crossing buckets).
    pub accumulate_ms: f32,
    /// Of `accumulate_ms`, the batch-affine rounds.
    pub affine_ms: f32,
    /// Buckets → window sums → result.
    pub reduce_ms: f32,
    /// A split MSM's batch addition of the bases whose scalar is 1.
    pub batch_add_ms: f32,
    /// The whole call on the device.
    pub total_ms: f32,
}

/// Counts per block of the prefix sums (MSM_SCAN_TILE, MSM_SCAN_THREADS in pippenger.cuh).
const SCAN_TILE: u32 = 4096;
const SCAN_THREADS: u32 = 256;
/// Buckets summed per thread in the first reduction level, and pairs per thread in the
/// later ones: short serial chains, many threads.
const REDUCE_FIRST_SEGMENT: u32 = 32;
const REDUCE_SEGMENT: u32 = 16;
/// Accumulation threads aimed for: enough to fill the GPU, few enough that the
/// partial sums of crossing buckets stay small.
const ACCUMULATE_THREADS: u64 = 1 << 18;
/// Threads of the batch addition's first step.
const SUM_THREADS: u32 = 1 << 15;
/// Threads per block of the curve kernels (up to 255 registers each).
pub(crate) const CURVE_BLOCK: u32 = 128;

pub(crate) fn blocks(threads: u64, per_block: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (threads.div_ceil(per_block as u64).max(1) as u32, 1, 1), block_dim: (per_block, 1, 1), shared_mem_bytes: 0 }
}

/// An MSM enqueued on the compute stream and not yet waited for. [`PendingMsm::finish`]
/// reads its result: call it after synchronizing the stream (else it waits itself).
pub struct PendingMsm<G: MsmGroup> {
    /// Partial sums (a Pippenger result, a batch addition's, one per streamed chunk).
    pub(super) results: Vec<CudaSlice<G::DeviceXyzz>>,
    /// Before the call's own upload of host scalars, if it made one.
    pub(super) t0: Option<CudaEvent>,
    pub(super) start: CudaEvent,
    pub(super) phases: PhaseEvents,
    pub(super) end: CudaEvent,
    /// Bytes of bases streamed up for this MSM (0 for resident bases).
    pub(super) bases_up: u64,
}

impl<G: MsmGroup> PendingMsm<G> {
    /// An MSM enqueued by another module (crate::streamed).
    pub(crate) fn enqueued(results: Vec<CudaSlice<G::DeviceXyzz>>, start: CudaEvent, phases: PhaseEvents, end: CudaEvent, bases_up: u64) -> Self {
        PendingMsm { results, t0: None, start, phases, end, bases_up }
    }

    /// Events on the compute stream before the MSM's first kernel and after its last.
    pub fn span(&self) -> (&CudaEvent, &CudaEvent) {
        (&self.start, &self.end)
    }

    /// Bytes `finish` downloads: one XYZZ point per result buffer.
    pub fn bytes_down(&self) -> u64 {
        self.results.len() as u64 * std::mem::size_of::<G::DeviceXyzz>() as u64
    }

    /// Bytes of bases sent up for this MSM (streamed parameters only).
    pub fn bytes_up(&self) -> u64 {
        self.bases_up
    }

    /// The sum, and the phases' device times. Each result is a single point: its
    /// download waits for the stream, which has already finished after a synchronization.
    pub fn finish(self) -> Result<(G::Projective, MsmTimings), GpuError> {
        let mut total = G::identity();
        for r in &self.results {
            let p = r.stream().clone_dtoh(r)?;
            total = total + G::Projective::from(G::to_affine(&p[0])?);
        }
        let mut timings = MsmTimings { total_ms: self.start.elapsed_ms(&self.end)?, ..MsmTimings::default() };
        if let Some(t0) = &self.t0 {
            timings.upload_ms = t0.elapsed_ms(&self.start)?;
            timings.total_ms += timings.upload_ms;
        }
        // The phases are told apart for one timed Pippenger run (a batch addition alone
        // is all batch addition; streamed chunks are not told apart).
        let p = &self.phases;
        if let [t1, t2, t3, t4] = &p.marks[..] {
            timings.digits_ms = self.start.elapsed_ms(t1)?;
            timings.sort_ms = self.start.elapsed_ms(t2)?;
            timings.accumulate_ms = t2.elapsed_ms(t3)?;
            timings.reduce_ms = t3.elapsed_ms(t4)?;
            for (a, b) in &p.affine {
                timings.affine_ms += a.elapsed_ms(b)?;
            }
            timings.batch_add_ms = t4.elapsed_ms(&self.end)?;
        } else if p.timed && p.marks.is_empty() {
            timings.batch_add_ms = self.start.elapsed_ms(&self.end)?;
        }
        Ok((total, timings))
    }
}

/// The phase events of a Pippenger run on the compute stream: after the digits, the
/// sort, the accumulation and the reduction, and around each group's batch-affine
/// rounds. Recorded only when timed: a streamed MSM's many chunk runs record none.
pub(crate) struct PhaseEvents {
    timed: bool,
    marks: Vec<CudaEvent>,
    affine: Vec<(CudaEvent, CudaEvent)>,
}

impl PhaseEvents {
    pub(crate) fn new(timed: bool) -> Self {
        PhaseEvents { timed, marks: Vec::new(), affine: Vec::new() }
    }

    /// An event now on `s`, if timed.
    fn event(&self, s: &CudaStream) -> Result<Option<CudaEvent>, GpuError> {
        Ok(if self.timed { Some(s.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?) } else { None })
    }

    fn mark(&mut self, s: &CudaStream) -> Result<(), GpuError> {
        let e = self.event(s)?;
        self.marks.extend(e);
        Ok(())
    }
}

/// Where an MSM keeps its large buffers ([`ScratchLayout`]): the engine's own
/// allocation (grown to fit and kept, [`GpuMsm::reserve_scratch`]), or a region the
/// caller lends for the call (the prover's: a staging slot's b and c once the H
/// polynomial no longer needs them), which must hold the MSM's layout.
pub enum Scratch<'a, 'b> {
    Own,
    Lent(&'b mut CudaViewMut<'a, u32>),
}

/// Chain totals per inverting thread of the batch-affine rounds: one inversion per 512
/// pairs (with AFFINE_SPAN). Passed to the kernels as an argument.
const AFFINE_INVERT_GROUP: u32 = 32;

/// MSM engine of one GPU.
pub struct GpuMsm {
    pub(crate) gpu: Arc<Gpu>,
    /// Fixed window width for every size (benchmarks), or None: [`window_bits`].
    window_bits: Option<u32>,
    /// Fixed batch-affine rounds (benchmarks), or None: [`affine_rounds`].
    affine_rounds: Option<u32>,
    /// Fixed windows per batch-affine group (tests of the group loop), or None: as
    /// many as hold G::AFFINE_GROUP_ENTRIES entries.
    affine_group_windows: Option<u32>,
    /// The large buffers of its MSMs ([`ScratchLayout`]): one allocation, kept and
    /// reused by every MSM in stream order. Allocated per MSM, a partition's five took
    /// and gave back blocks of a dozen sizes in the device pool, whose pieces then
    /// failed to hold a larger one beside two staged WindowPoSt partitions.
    scratch: Mutex<Option<CudaSlice<u32>>>,
}

impl GpuMsm {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        GpuMsm { gpu, window_bits: None, affine_rounds: None, affine_group_windows: None, scratch: Mutex::new(None) }
    }

    /// The same engine with a fixed window width of c bits (4..=MAX_WINDOW_BITS).
    pub fn with_window_bits(gpu: Arc<Gpu>, c: u32) -> Result<Self, GpuError> {
        if !(4..=MAX_WINDOW_BITS).contains(&c) {
            return Err(GpuError::Invalid(format!("window of {c} bits: must be 4 to {MAX_WINDOW_BITS}")));
        }
        Ok(GpuMsm { gpu, window_bits: Some(c), affine_rounds: None, affine_group_windows: None, scratch: Mutex::new(None) })
    }

    /// The same engine with a fixed number of batch-affine rounds (0 = none, up to
    /// MAX_AFFINE_ROUNDS) for every size.
    pub fn with_affine_rounds(self, rounds: u32) -> Result<Self, GpuError> {
        if rounds > MAX_AFFINE_ROUNDS {
            return Err(GpuError::Invalid(format!("{rounds} batch-affine rounds: at most {MAX_AFFINE_ROUNDS}")));
        }
        Ok(GpuMsm { affine_rounds: Some(rounds), ..self })
    }

    /// The same engine running the batch-affine rounds `windows` windows at a time
    /// (at least 1), whatever the size: for tests of the group loop.
    pub fn with_affine_group_windows(self, windows: u32) -> Self {
        GpuMsm { affine_group_windows: Some(windows.max(1)), ..self }
    }

    /// The window width used for n scalars.
    pub fn window_bits_for<G: MsmGroup>(&self, n: usize) -> u32 {
        self.window_bits.unwrap_or_else(|| window_bits::<G>(n))
    }

    /// The batch-affine rounds used for n scalars.
    pub fn affine_rounds_for<G: MsmGroup>(&self, n: usize) -> u32 {
        self.affine_rounds.unwrap_or_else(|| affine_rounds::<G>(n, self.window_bits_for::<G>(n)))
    }

    /// The scratch layout of an MSM of n scalars with this engine's settings.
    fn scratch_layout<G: MsmGroup>(&self, n: usize) -> ScratchLayout {
        ScratchLayout::new::<G>(n, self.window_bits_for::<G>(n), self.affine_rounds_for::<G>(n), self.affine_group_windows)
    }

    /// Sizes the scratch to at least `bytes` now (e.g. for the largest MSM of a
    /// partition, before its first: one allocation rather than one per larger MSM).
    pub fn reserve_scratch(&self, bytes: usize) -> Result<(), GpuError> {
        self.scratch(bytes.div_ceil(4)).map(drop)
    }

    /// Frees the scratch (in stream order, after the kernels that use it).
    pub fn release_scratch(&self) {
        *lock(&self.scratch) = None;
    }

    /// Device bytes the scratch holds.
    pub fn scratch_held(&self) -> usize {
        lock(&self.scratch).as_ref().map_or(0, |a| 4 * a.len())
    }

    /// The scratch, grown to at least `words` (the old one is freed in stream order,
    /// after the kernels that use it).
    fn scratch(&self, words: usize) -> Result<MutexGuard<'_, Option<CudaSlice<u32>>>, GpuError> {
        let mut held = lock(&self.scratch);
        let had = held.as_ref().map_or(0, |a| a.len());
        if had < words {
            *held = None;
            // SAFETY: uninitialised: every buffer carved from it is written before it is
            // read (see enqueue_pippenger and enqueue_affine_accumulate).
            let a = unsafe { self.gpu.stream.alloc::<u32>(words) }
                .map_err(|e| GpuError::Invalid(format!("allocating {:.2} GB of MSM scratch on the device: {e}", 4.0 * words as f64 / 1e9)))?;
            tracing::info!(
                gb = format!("{:.2}", 4.0 * words as f64 / 1e9),
                was_gb = format!("{:.2}", 4.0 * had as f64 / 1e9),
                "MSM scratch allocated"
            );
            *held = Some(a);
        }
        Ok(held)
    }

    /// Bytes of the scratch an MSM of n scalars of G takes with this engine's settings.
    pub fn scratch_bytes_for<G: MsmGroup>(&self, n: usize) -> usize {
        4 * self.scratch_layout::<G>(n).words()
    }

    /// Enqueues Pippenger over n scalars already on the device, its large buffers in
    /// `scratch`, marking its phases in `phases`; returns the one-point result buffer.
    /// Scalar i multiplies base `base_index[i]`, or without an index base i (i < bases.end).
    /// Every index must lie in bases.first..bases.end: upload_split checks lists from
    /// the host; device-built lists hold the indices of their query's bases by
    /// construction (crate::msm::split), and a streamed chunk holds the bases of the
    /// list piece it is loaded for.
    pub(crate) fn enqueue_pippenger<G: MsmGroup>(
        &self,
        bases: BasesAt<G>,
        d_scalars: &CudaView<'_, DeviceFr>,
        n: usize,
        base_index: Option<&CudaView<'_, u32>>,
        phases: &mut PhaseEvents,
        scratch: &mut Scratch<'_, '_>,
    ) -> Result<CudaSlice<G::DeviceXyzz>, GpuError> {
        match scratch {
            Scratch::Own => {
                let mut own = self.scratch(self.scratch_layout::<G>(n).words())?;
                let mut arena = own.as_mut().ok_or_else(|| GpuError::Invalid("MSM scratch missing".into()))?.slice_mut(..);
                self.pippenger_in(&mut arena, bases, d_scalars, n, base_index, phases)
            }
            Scratch::Lent(arena) => self.pippenger_in(arena, bases, d_scalars, n, base_index, phases),
        }
    }

    /// [`GpuMsm::enqueue_pippenger`] with its large buffers in `arena`.
    fn pippenger_in<G: MsmGroup>(
        &self,
        arena: &mut CudaViewMut<'_, u32>,
        bases: BasesAt<G>,
        d_scalars: &CudaView<'_, DeviceFr>,
        n: usize,
        base_index: Option<&CudaView<'_, u32>>,
        phases: &mut PhaseEvents,
    ) -> Result<CudaSlice<G::DeviceXyzz>, GpuError> {
        let (s, k, ck) = (&self.gpu.stream, &self.gpu.k, G::kernels(&self.gpu));
        let c = self.window_bits_for::<G>(n);
        let w = windows(c);
        let buckets_per_window = 1u32 << (c - 1);
        let len = w * buckets_per_window;
        let n32 = n as u32;
        let max_entries = n as u64 * w as u64;
        if max_entries >= 1 << 32 {
            return Err(GpuError::Invalid(format!("{n} scalars × {w} windows of {c} bits: more bucket entries than 32-bit offsets hold")));
        }
        if base_index.is_none() && n > bases.end - bases.first {
            return Err(GpuError::Invalid(format!("{n} scalars but {} bases", bases.end - bases.first)));
        }
        let m0 = REDUCE_FIRST_SEGMENT.min(buckets_per_window);
        let reduce_threads = w * (buckets_per_window / m0);
        let layout = self.scratch_layout::<G>(n);
        let held = 4 * arena.len();
        let too_small = || GpuError::Invalid(format!("MSM scratch of {held} bytes, smaller than its layout's {}", 4 * layout.words()));
        // The sorted entries, then the digits' place (taken over by the batch-affine
        // rounds once the scatter has read the digits).
        let (mut sorted_place, mut rest) = arena.try_split_at_mut(layout.sorted_words).ok_or_else(too_small)?;
        // SAFETY: (also for the digits below) every slot of `sorted` below the device-side
        // total is written by msm_scatter before msm_accumulate or the batch-affine
        // round 0 reads it, slots past the total are never read; msm_count writes every
        // (window, scalar) digit before msm_scatter reads it.
        let mut sorted = unsafe { sorted_place.transmute_mut::<u32>(max_entries as usize) }.ok_or_else(too_small)?;

        let mut counts = s.alloc_zeros::<u32>(len as usize)?;
        let mut offsets = s.alloc_zeros::<u32>(len as usize + 1)?;
        let mut bucket_sums = s.alloc_zeros::<G::DeviceXyzz>(len as usize)?;
        // The reduction's pairs (T, Y), ping-ponging between two sets of buffers.
        let mut pairs = [
            (s.alloc_zeros::<G::DeviceXyzz>(reduce_threads as usize)?, s.alloc_zeros::<G::DeviceXyzz>(reduce_threads as usize)?),
            (
                s.alloc_zeros::<G::DeviceXyzz>(reduce_threads.div_ceil(2) as usize)?,
                s.alloc_zeros::<G::DeviceXyzz>(reduce_threads.div_ceil(2) as usize)?,
            ),
        ];
        let mut result = s.alloc_zeros::<G::DeviceXyzz>(1)?;

        // SAFETY: see `sorted` above.
        let mut digits = unsafe { rest.transmute_mut::<u32>(max_entries as usize) }.ok_or_else(too_small)?;
        // SAFETY: counts holds windows·2^(c−1) entries and every (window, bucket) index is
        // below that; digits holds windows·n entries.
        unsafe { k.msm_count(s, blocks(n as u64, 256), d_scalars, n32, c, w, &mut counts, &mut digits)? };
        phases.mark(s)?;
        let tiles = len.div_ceil(SCAN_TILE);
        let mut tile_sums = s.alloc_zeros::<u32>(tiles as usize)?;
        let mut tile_offsets = s.alloc_zeros::<u32>(tiles as usize + 1)?;
        // SAFETY: one block per tile of SCAN_TILE counts, tile_sums holds `tiles` entries.
        unsafe { k.msm_tile_sums(s, blocks(tiles as u64 * SCAN_THREADS as u64, SCAN_THREADS), &counts, len, &mut tile_sums)? };
        let one_block = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: one block of 1024 threads; tile_offsets holds tiles + 1 entries.
        unsafe { k.msm_scan(s, one_block, &tile_sums, tiles, &mut tile_offsets)? };
        // SAFETY: one block per tile; offsets holds len + 1 entries, tile_offsets tiles + 1.
        unsafe { k.msm_tile_scan(s, blocks(tiles as u64 * SCAN_THREADS as u64, SCAN_THREADS), &counts, len, &tile_offsets, tiles, &mut offsets)? };
        let mut cursor = s.clone_dtod(&offsets)?;
        // An unread stand-in when the scalars are not indexed.
        let index_dummy = s.alloc_zeros::<u32>(1)?;
        let index_dummy = index_dummy.as_view();
        let indexed = base_index.is_some() as u32;
        let digits = digits.as_view();
        for window in 0..w {
            // SAFETY: reads digits[window·n .. window·n + n); each bucket's cursor runs from
            // its offset to the next one, all below the total ≤ n·windows = sorted.len();
            // base_index (read when `indexed`) holds n indices below bases.len(), checked
            // by the caller.
            unsafe {
                k.msm_scatter(
                    s,
                    blocks(n as u64, 256),
                    &digits,
                    n32,
                    c,
                    window,
                    &mut cursor,
                    &mut sorted,
                    base_index.unwrap_or(&index_dummy),
                    indexed,
                )?
            };
        }
        phases.mark(s)?;

        let rounds = self.affine_rounds_for::<G>(n);
        if rounds == 0 {
            self.enqueue_accumulate::<G>(bases.origin, (&sorted.slice(..), 1), &offsets.slice(..), len, max_entries, &mut bucket_sums.slice_mut(..))?;
        } else {
            let plan = AffinePlan::new::<G>(n as u64, w, buckets_per_window, rounds, self.affine_group_windows);
            self.enqueue_affine_accumulate::<G>(bases, &sorted.as_view(), &offsets, &plan, &mut rest, &mut bucket_sums, phases)?;
        }
        phases.mark(s)?;

        let log_m0 = m0.trailing_zeros();
        let [(sums0, weighted0), _] = &mut pairs;
        // SAFETY: m0 divides 2^(c−1), so reduce_threads·m0 = len buckets are read; the
        // outputs hold reduce_threads pairs.
        unsafe { ck.bucket_segments(s, blocks(reduce_threads as u64, CURVE_BLOCK), &bucket_sums, m0, log_m0, reduce_threads, sums0, weighted0)? };
        // Later levels: per_window pairs per window, divided by m each time.
        let mut per_window = buckets_per_window / m0;
        let mut cur = 0;
        while per_window > 1 {
            let m = REDUCE_SEGMENT.min(per_window);
            let (log_m, count) = (m.trailing_zeros(), w * (per_window / m));
            let [p0, p1] = &mut pairs;
            let (src, dst) = if cur == 0 { (&*p0, p1) } else { (&*p1, p0) };
            let (dst_sums, dst_weighted) = (&mut dst.0, &mut dst.1);
            // SAFETY: reads count·m = w·per_window pairs (what the previous level wrote),
            // writes count ≤ reduce_threads / 2 pairs (m ≥ 2).
            unsafe { ck.pair_segments(s, blocks(count as u64, CURVE_BLOCK), &src.0, &src.1, m, log_m, count, dst_sums, dst_weighted)? };
            per_window /= m;
            cur = 1 - cur;
        }
        let window_sum = &pairs[cur].0;
        // SAFETY: one thread, reading w window sums.
        unsafe { ck.combine_windows(s, blocks(1, 32), window_sum, w, c, &mut result)? };
        phases.mark(s)?;
        Ok(result)
    }

    /// Enqueues the XYZZ bucket sums of a run of `len` buckets: the entries of bucket g
    /// are positions offsets[g] .. offsets[g + 1] (offsets[0] = 0, at most max_total in
    /// all) of `sorted` into `points` when its flag is 1, else of `points` itself.
    fn enqueue_accumulate<G: MsmGroup>(
        &self,
        points: u64,
        sorted: (&CudaView<'_, u32>, u32),
        offsets: &CudaView<'_, u32>,
        len: u32,
        max_total: u64,
        buckets: &mut CudaViewMut<'_, G::DeviceXyzz>,
    ) -> Result<(), GpuError> {
        let (s, ck) = (&self.gpu.stream, G::kernels(&self.gpu));
        let seg_len = max_total.div_ceil(ACCUMULATE_THREADS).max(8) as u32;
        let segments = max_total.div_ceil(seg_len as u64).max(1) as u32;
        let mut left = s.alloc_zeros::<G::DeviceXyzz>(segments as usize)?;
        let mut left_scan = s.alloc_zeros::<G::DeviceXyzz>(segments as usize)?;
        let mut left_bucket = s.alloc_zeros::<u32>(segments as usize)?;
        let mut right = s.alloc_zeros::<G::DeviceXyzz>(segments as usize)?;
        let mut right_bucket = s.alloc_zeros::<u32>(segments as usize)?;
        // SAFETY: offsets holds len + 1 entries whose total is at most max_total ≤
        // seg_len·segments; entries (or, unindexed, positions) are indices of points held
        // at `points` (the callers' bases or round outputs); bucket ids are < len =
        // buckets.len(); the partial arrays hold `segments` entries.
        unsafe {
            ck.accumulate(
                s,
                blocks(segments as u64, CURVE_BLOCK),
                At::new(points),
                sorted.0,
                sorted.1,
                offsets,
                len,
                seg_len,
                segments,
                &mut *buckets,
                &mut left,
                &mut left_bucket,
                &mut right,
                &mut right_bucket,
            )?
        };
        // Segmented suffix sums of the left partials, ping-ponging between two buffers.
        let mut d = 1u32;
        let mut in_left = true;
        while d < segments {
            let (src, dst) = if in_left { (&left, &mut left_scan) } else { (&left_scan, &mut left) };
            // SAFETY: all arrays hold `segments` entries.
            unsafe { ck.partials_scan(s, blocks(segments as u64, CURVE_BLOCK), src, dst, &left_bucket, segments, d)? };
            in_left = !in_left;
            d *= 2;
        }
        let left_sums = if in_left { &left } else { &left_scan };
        // SAFETY: bucket ids written by msm_accumulate are < len; the partial arrays hold
        // `segments` entries.
        unsafe { ck.fixup(s, blocks(segments as u64, CURVE_BLOCK), segments, &mut *buckets, &right, &right_bucket, left_sums, &left_bucket)? };
        Ok(())
    }

    /// Enqueues the bucket sums through batch-affine rounds as `plan` says, a group of
    /// windows at a time, then the XYZZ accumulation of what the rounds leave; the
    /// rounds' buffers are carved from `place` (the scratch after the sorted entries).
    /// The rounds' spans go to `phases`.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_affine_accumulate<G: MsmGroup>(
        &self,
        bases: BasesAt<G>,
        sorted: &CudaView<'_, u32>,
        offsets: &CudaSlice<u32>,
        plan: &AffinePlan,
        place: &mut CudaViewMut<'_, u32>,
        bucket_sums: &mut CudaSlice<G::DeviceXyzz>,
        phases: &mut PhaseEvents,
    ) -> Result<(), GpuError> {
        let (s, ck) = (&self.gpu.stream, G::kernels(&self.gpu));
        let (n, windows, buckets_per_window, rounds, group, caps) =
            (plan.n, plan.windows, plan.buckets_per_window, plan.rounds, plan.group, &plan.caps);
        // Positions (round 0: into all windows' entries) and a thread's span past them
        // must stay below 2^32.
        if n * windows as u64 + AFFINE_SPAN as u64 >= 1 << 32 || caps.iter().any(|&c| c + AFFINE_SPAN as u64 >= 1 << 32) {
            return Err(GpuError::Invalid(format!(
                "{n} scalars × {windows} windows: too many entries for the batch-affine rounds' 32-bit positions"
            )));
        }
        let too_small = || GpuError::Invalid("MSM scratch smaller than the batch-affine rounds' buffers".into());
        let (affine, field) = (words_of::<G::DeviceAffine>, words_of::<G::DeviceField>);
        let threads_len = plan.max_threads as usize;
        let (mut out0, mut rest) = place.try_split_at_mut(affine(plan.out_caps[0])).ok_or_else(too_small)?;
        let (mut out1, mut rest) = rest.try_split_at_mut(affine(plan.out_caps[1])).ok_or_else(too_small)?;
        let (mut prefix_place, mut rest) = rest.try_split_at_mut(field(plan.prefix_len())).ok_or_else(too_small)?;
        let (mut prod_place, mut inv_place) = rest.try_split_at_mut(field(threads_len)).ok_or_else(too_small)?;
        // SAFETY: the outputs (like prefix, prod and inv below) are uninitialised: a round
        // writes every output slot below its total (bucket slots by msm_affine_prefix /
        // msm_affine_apply, the gap slots by msm_affine_offsets) before anything reads
        // it. Rounds alternate between the two outputs (even rounds write the first), each
        // as large as the largest output it receives (AffinePlan::out_caps).
        let mut outs = unsafe {
            [
                out0.transmute_mut::<G::DeviceAffine>(plan.out_caps[0]).ok_or_else(too_small)?,
                out1.transmute_mut::<G::DeviceAffine>(plan.out_caps[1]).ok_or_else(too_small)?,
            ]
        };
        let mut out_offsets = [s.alloc_zeros::<u32>(plan.group_buckets as usize + 1)?, s.alloc_zeros::<u32>(plan.group_buckets as usize + 1)?];
        // SAFETY: as for the outputs above (prefix slots are read only for the pairs whose
        // product msm_affine_prefix stored; prod and inv are written for every thread
        // before they are read).
        let (mut prefix, mut prod, mut inv) = unsafe {
            (
                prefix_place.transmute_mut::<G::DeviceField>(plan.prefix_len()).ok_or_else(too_small)?,
                prod_place.transmute_mut::<G::DeviceField>(threads_len).ok_or_else(too_small)?,
                inv_place.transmute_mut::<G::DeviceField>(threads_len).ok_or_else(too_small)?,
            )
        };
        let unindexed = s.alloc_zeros::<u32>(1)?;
        for first in (0..windows).step_by(group as usize) {
            let gw = group.min(windows - first);
            let nb = gw * buckets_per_window;
            let g0 = (first * buckets_per_window) as usize;
            let start = phases.event(s)?;
            for (r, &cap) in caps.iter().enumerate().take(rounds as usize) {
                let threads = if r == 0 { n * gw as u64 } else { cap }.div_ceil(AFFINE_SPAN as u64) as u32;
                let [o0, o1] = &mut outs;
                let (src, dst) = if r % 2 == 0 { (&*o1, o0) } else { (&*o0, o1) };
                let [f0, f1] = &mut out_offsets;
                let (src_off, dst_off) = if r % 2 == 0 { (&*f1, f0) } else { (&*f0, f1) };
                let (points, entries, indexed, in_off) = if r == 0 {
                    (bases.origin, sorted.slice(..), 1u32, offsets.slice(g0..g0 + nb as usize + 1))
                } else {
                    (device_address(src, s), unindexed.slice(..), 0u32, src_off.slice(..nb as usize + 1))
                };
                // SAFETY: in_off holds nb + 1 offsets, dst_off nb + 1 entries; the gap slots
                // are below (in total + nb) / 2 + 1 ≤ caps[r + 1] ≤ the buffer's capacity
                // (out_caps).
                unsafe { ck.affine_offsets(s, blocks(nb as u64 + 1, 256), &in_off, nb, &mut *dst_off, &mut *dst)? };
                let dst_offsets = &*dst_off;
                // SAFETY: threads·SPAN covers the input's positions (caps[r] at most); prefix
                // slots (p − p0)/2 < max_in/2 + 1, prod holds max_threads ≥ threads; entries
                // address bases (the caller's invariant: see enqueue_pippenger), output slots
                // are below the round's total ≤ the buffer's capacity.
                unsafe {
                    ck.affine_prefix(
                        s,
                        blocks(threads as u64, CURVE_BLOCK),
                        At::new(points),
                        &entries,
                        indexed,
                        &in_off,
                        nb,
                        AFFINE_SPAN,
                        threads,
                        dst_offsets,
                        &mut prefix,
                        &mut prod,
                        &mut *dst,
                    )?
                };
                let inverters = threads.div_ceil(AFFINE_INVERT_GROUP) as u64;
                let prod_in = prod.as_view();
                // SAFETY: both arrays hold at least `threads` elements.
                unsafe { ck.affine_invert(s, blocks(inverters, 64), &prod_in, threads, AFFINE_INVERT_GROUP, &mut inv)? };
                let (prefix_in, inv_in) = (prefix.as_view(), inv.as_view());
                // SAFETY: positions, entries and output slots as for the prefix kernel;
                // inv[t] for t < threads ≤ max_threads; prefix read only at the slots the
                // prefix kernel stored.
                unsafe {
                    ck.affine_apply(
                        s,
                        blocks(threads as u64, CURVE_BLOCK),
                        At::new(points),
                        &entries,
                        indexed,
                        &in_off,
                        nb,
                        AFFINE_SPAN,
                        threads,
                        dst_offsets,
                        &prefix_in,
                        &inv_in,
                        &mut *dst,
                    )?
                };
            }
            if let (Some(start), Some(end)) = (start, phases.event(s)?) {
                phases.affine.push((start, end));
            }
            let last = (rounds as usize - 1) % 2;
            let mut sums = bucket_sums.slice_mut(g0..g0 + nb as usize);
            self.enqueue_accumulate::<G>(
                device_address(&outs[last], s),
                (&unindexed.slice(..), 0),
                &out_offsets[last].slice(..nb as usize + 1),
                nb,
                caps[rounds as usize],
                &mut sums,
            )?;
        }
        Ok(())
    }

    /// Enqueues Σ bases[idx[j]] (the batch addition of a split MSM's ones): per-thread
    /// sums of equal runs of indices, then a pairwise tree; returns the result buffer.
    pub(crate) fn enqueue_sum_indexed<G: MsmGroup>(&self, bases: BasesAt<G>, idx: &CudaView<'_, u32>) -> Result<CudaSlice<G::DeviceXyzz>, GpuError> {
        let (s, ck) = (&self.gpu.stream, G::kernels(&self.gpu));
        let count = idx.len() as u32;
        let per = count.div_ceil(SUM_THREADS).max(8);
        let threads = count.div_ceil(per);
        let mut a = s.alloc_zeros::<G::DeviceXyzz>(threads as usize)?;
        let mut b = s.alloc_zeros::<G::DeviceXyzz>(threads as usize)?;
        // SAFETY: indices are in bases.first..bases.end (the caller's invariant: checked
        // for lists from the host; for a streamed chunk it holds by the list builder's
        // checkpoints, see crate::streamed); `a` holds `threads` sums.
        unsafe { ck.sum_indexed(s, blocks(threads as u64, CURVE_BLOCK), At::new(bases.origin), idx, count, per, threads, &mut a)? };
        let mut m = threads;
        while m > 1 {
            // SAFETY: reads m < len values, writes (m + 1) / 2.
            unsafe { ck.sum_pairs(s, blocks(m.div_ceil(2) as u64, CURVE_BLOCK), &a, m, &mut b)? };
            std::mem::swap(&mut a, &mut b);
            m = m.div_ceil(2);
        }
        Ok(a)
    }
}
