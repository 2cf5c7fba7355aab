//! The shape of one Pippenger before anything runs: its window width, its batch-affine
//! rounds, and the device memory of its large buffers. Pure functions of the scalar
//! count, so the placement (crate::groth16::placement) sizes a partition's memory with
//! the same figures the MSM allocates by.

use super::group::MsmGroup;

/// The widest window the digit and reduction kernels are sized for.
pub const MAX_WINDOW_BITS: u32 = 24;
/// The most batch-affine rounds a caller may ask for ([`super::GpuMsm::with_affine_rounds`]).
pub const MAX_AFFINE_ROUNDS: u32 = 8;
/// Positions per thread of the batch-affine prefix and apply kernels (at most 16 pairs).
pub(crate) const AFFINE_SPAN: u32 = 32;

/// The window width, in bits, for n scalars of group G: log2(n) − 4 up to 16 bits, and
/// G's wide window from 2^24 scalars on. Measured on the H200 (bench/README.md): for
/// G1, 20-bit windows cut the total at 2^24 / 2^26 / 2^27 by 3 / 11 / 13 % against 16
/// (fewer additions, a larger bucket reduction); for G2 the reduction costs 3× more
/// and 20 bits lost at 2^20, so G2 stays at 16 until wider ones are measured.
pub fn window_bits<G: MsmGroup>(n: usize) -> u32 {
    let log = usize::BITS - 1 - n.max(1).leading_zeros();
    if log >= 24 {
        G::WIDE_WINDOW_BITS
    } else {
        log.saturating_sub(4).clamp(4, 16)
    }
}

/// Signed-digit windows for c-bit digits over scalars below r < 2^255.
pub(crate) fn windows(c: u32) -> u32 {
    255 / c + 1
}

/// Batch-affine rounds (kernels/msm/batch_affine.cuh) for n scalars of group G in c-bit
/// windows. A round halves every bucket at about six field products per addition where
/// the XYZZ accumulation spends ten, but costs passes over memory and an inversion per
/// 512 pairs: worth it while buckets hold several entries on average (n / 2^(c−1)),
/// and only where measured faster (G::DEFAULT_AFFINE_ROUNDS).
pub fn affine_rounds<G: MsmGroup>(n: usize, c: u32) -> u32 {
    let avg = (n as u64) >> (c - 1);
    if avg < 8 {
        0
    } else {
        // ⌊log2 avg⌋ − 2 rounds leave 4 to 8 entries per bucket for the XYZZ kernel.
        (63 - avg.leading_zeros() - 2).min(G::DEFAULT_AFFINE_ROUNDS)
    }
}

/// The batch-affine rounds of n scalars over `windows` windows of `buckets_per_window`
/// buckets, a group of windows at a time (as many as hold G::AFFINE_GROUP_ENTRIES
/// entries, at least one, unless `group_windows` fixes it): the capacities of each
/// round's input and output and the sizes of its buffers.
pub(crate) struct AffinePlan {
    pub n: u64,
    pub windows: u32,
    pub buckets_per_window: u32,
    pub rounds: u32,
    pub group: u32,
    pub group_buckets: u64,
    /// The input of round r (r = 0: the group's entries) and its output, at
    /// (in + buckets) / 2 + 1 (outputs grow when buckets hold fewer than two entries).
    pub caps: Vec<u64>,
    /// Capacity of the two output buffers rounds alternate between (even rounds write
    /// the first): each holds the largest output it receives.
    pub out_caps: [usize; 2],
    /// The largest input of a round, and the threads that cover it.
    pub max_in: u64,
    pub max_threads: u64,
}

impl AffinePlan {
    pub fn new<G: MsmGroup>(n: u64, windows: u32, buckets_per_window: u32, rounds: u32, group_windows: Option<u32>) -> Self {
        let group = group_windows.unwrap_or((G::AFFINE_GROUP_ENTRIES / n.max(1)) as u32).clamp(1, windows);
        let group_buckets = group as u64 * buckets_per_window as u64;
        let mut caps = vec![n * group as u64];
        for r in 0..rounds as usize {
            caps.push((caps[r] + group_buckets) / 2 + 1);
        }
        let cap_of = |parity: usize| caps.iter().skip(1 + parity).step_by(2).copied().max().unwrap_or(1) as usize;
        let out_caps = [cap_of(0), cap_of(1)];
        let max_in = caps[..rounds as usize].iter().copied().max().unwrap_or(1);
        let max_threads = max_in.div_ceil(AFFINE_SPAN as u64);
        AffinePlan { n, windows, buckets_per_window, rounds, group, group_buckets, caps, out_caps, max_in, max_threads }
    }

    /// Prefix products: one per pair of the largest input.
    pub fn prefix_len(&self) -> usize {
        (self.max_in / 2 + 1) as usize
    }

    /// Words of the rounds' buffers in the scratch arena: the two outputs, the prefix
    /// products, and the per-thread products and inverses.
    fn words<G: MsmGroup>(&self) -> usize {
        let (affine, field) = (words_of::<G::DeviceAffine>, words_of::<G::DeviceField>);
        affine(self.out_caps[0]) + affine(self.out_caps[1]) + field(self.prefix_len()) + 2 * field(self.max_threads as usize)
    }
}

/// Each buffer carved from the scratch arena starts at a multiple of 256 bytes (64
/// words of 4 bytes): the kernels' widest loads stay aligned.
const ARENA_ALIGN_WORDS: usize = 64;

/// Arena words (u32) that `len` values of T take, rounded up to the alignment.
pub(crate) fn words_of<T>(len: usize) -> usize {
    (len * std::mem::size_of::<T>()).div_ceil(4).next_multiple_of(ARENA_ALIGN_WORDS)
}

/// The large buffers of one Pippenger of n scalars in c-bit windows with `rounds`
/// batch-affine rounds, in arena words: the sorted bucket entries first, then the
/// digits, whose place the rounds' buffers take over once the scatter has read them
/// (every phase runs in order on one stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScratchLayout {
    /// Entries per buffer: n scalars × windows.
    pub entries: usize,
    pub sorted_words: usize,
    /// The larger of the digits and the rounds' buffers.
    pub rest_words: usize,
}

impl ScratchLayout {
    pub fn new<G: MsmGroup>(n: usize, c: u32, rounds: u32, group_windows: Option<u32>) -> Self {
        let w = windows(c);
        let entries = n * w as usize;
        let sorted_words = words_of::<u32>(entries);
        let affine = if rounds == 0 { 0 } else { AffinePlan::new::<G>(n as u64, w, 1 << (c - 1), rounds, group_windows).words::<G>() };
        ScratchLayout { entries, sorted_words, rest_words: sorted_words.max(affine) }
    }

    pub fn words(&self) -> usize {
        self.sorted_words + self.rest_words
    }
}

/// Bytes of one Pippenger's large buffers for n scalars of G with the default window
/// width and rounds ([`ScratchLayout`]).
pub fn scratch_bytes<G: MsmGroup>(n: usize) -> usize {
    let c = window_bits::<G>(n);
    4 * ScratchLayout::new::<G>(n, c, affine_rounds::<G>(n, c), None).words()
}

/// The most [`scratch_bytes`] takes for any count up to n: the arena that serves
/// every MSM of at most n scalars. Within a stretch of counts with the same window
/// width, rounds and affine group the buffers grow with the count, so the largest is
/// at a stretch's end: n itself, one below each power of two (the width and the
/// rounds change there) or where the affine group shrinks (⌊E / g⌋ for g windows).
pub fn scratch_bound<G: MsmGroup>(n: usize) -> usize {
    let powers = (1..usize::BITS).map(|k| (1usize << k) - 1);
    let groups = (1..=windows(4) as u64).map(|g| (G::AFFINE_GROUP_ENTRIES / g) as usize);
    std::iter::once(n).chain(powers).chain(groups).filter(|&m| m <= n).map(scratch_bytes::<G>).max().unwrap_or(0)
}

/// The most scalars of G an MSM may have whose scratch ([`scratch_bound`]: any count up
/// to it) fits in `budget` bytes; 0 if not even one.
pub fn max_scalars_within<G: MsmGroup>(budget: usize) -> usize {
    // The bound grows with the count: bisect between a count that fits and one that
    // does not (scalar counts stay below 2^31: crate::msm::group::check_base_count).
    let (mut lo, mut hi) = (0usize, 1usize << 31);
    if scratch_bound::<G>(hi) <= budget {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if scratch_bound::<G>(mid) <= budget {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msm::{G1, G2};

    #[test]
    fn the_most_scalars_within_a_budget_is_the_last_that_fits() {
        for budget in [0, 1 << 20, 700 << 20, 4 << 30, 14_000_000_000, 16 << 30] {
            let (g1, g2) = (max_scalars_within::<G1>(budget), max_scalars_within::<G2>(budget));
            assert!(g1 == 0 || scratch_bound::<G1>(g1) <= budget, "{budget}");
            assert!(scratch_bound::<G1>(g1 + 1) > budget, "{budget}");
            assert!(g2 == 0 || scratch_bound::<G2>(g2) <= budget, "{budget}");
            assert!(scratch_bound::<G2>(g2 + 1) > budget, "{budget}");
        }
        // The H MSM of a 32 GiB partition (2^27 − 1 scalars) needs 13.96 GB.
        assert!(max_scalars_within::<G1>(14_000_000_000) >= (1 << 27) - 1);
        assert!(max_scalars_within::<G1>(13_000_000_000) < (1 << 27) - 1);
    }

    #[test]
    fn affine_round_choice() {
        // Buckets of 8 entries on average: one round; 16: two; more: at most G's default.
        assert_eq!(affine_rounds::<G2>(7 << 15, 16), 0);
        assert_eq!(affine_rounds::<G2>(8 << 15, 16), 1);
        assert_eq!(affine_rounds::<G2>(16 << 15, 16), 2);
        assert_eq!(affine_rounds::<G2>(1 << 25, 16), G2::DEFAULT_AFFINE_ROUNDS);
        assert_eq!(affine_rounds::<G2>(1, 4), 0);
        assert_eq!(affine_rounds::<G1>(1 << 27, 20), G1::DEFAULT_AFFINE_ROUNDS);
    }

    #[test]
    fn window_choice() {
        assert_eq!(window_bits::<G1>(1), 4);
        assert_eq!(window_bits::<G1>(1 << 16), 12);
        assert_eq!(window_bits::<G1>((1 << 24) - 1), 16);
        assert_eq!(window_bits::<G1>(1 << 24), 20);
        assert_eq!(window_bits::<G1>(1 << 27), 20);
        assert_eq!(window_bits::<G2>(1 << 27), 16);
        for c in 4..=MAX_WINDOW_BITS {
            // The top window never carries out: its field has at most c − 1 bits.
            assert!(255 - (windows(c) - 1) * c < c);
        }
    }

    #[test]
    fn scratch_counts_the_sort_and_the_rounds_over_the_digits() {
        // G1 (no rounds): the sorted entries and the digits, 4 bytes per scalar and
        // window each: 13 windows of 20 bits at 2^27.
        let n = 1 << 27;
        assert_eq!(scratch_bytes::<G1>(n), 2 * 4 * 13 * n);
        // G2 at WindowPoSt's B query (91.9 M values, 16-bit windows, three rounds of one
        // window at a time): the rounds' buffers (outputs of n/2 and n/4 points of 192
        // bytes, n/2 prefix products of 96) outgrow the digits they replace.
        let n = 91_925_767;
        let l = ScratchLayout::new::<G2>(n, 16, 3, None);
        assert_eq!(l.sorted_words, words_of::<u32>(16 * n));
        let plan = AffinePlan::new::<G2>(n as u64, 16, 1 << 15, 3, None);
        assert_eq!(plan.group, 1);
        assert_eq!(plan.out_caps, [plan.caps[1] as usize, plan.caps[2] as usize]);
        assert!(l.rest_words > l.sorted_words && l.rest_words == plan.words::<G2>());
        let gb = (4 * l.words()) as f64 / 1e9;
        assert!((23.0..25.0).contains(&gb), "{gb}");
        // Every buffer starts aligned.
        assert_eq!(l.sorted_words % ARENA_ALIGN_WORDS, 0);
    }

    #[test]
    fn the_bound_covers_every_smaller_count() {
        // Just below 2^24 a G1 MSM takes 16 windows of 16 bits, more than the 13 of 20
        // bits just above: the bound of 2^24 is the count below it.
        assert!(scratch_bytes::<G1>((1 << 24) - 1) > scratch_bytes::<G1>(1 << 24));
        assert_eq!(scratch_bound::<G1>(1 << 24), scratch_bytes::<G1>((1 << 24) - 1));
        // Against every count on a coarse grid and around each power of two.
        for g in [true, false] {
            let mut worst = 0;
            let counts = (1..=1 << 12).map(|i| i << 15).chain((5..28).flat_map(|k| [(1 << k) - 2, (1 << k) - 1, 1 << k, (1 << k) + 1]));
            let mut counts: Vec<usize> = counts.collect();
            counts.sort_unstable();
            for n in counts {
                let (bytes, bound) =
                    if g { (scratch_bytes::<G1>(n), scratch_bound::<G1>(n)) } else { (scratch_bytes::<G2>(n), scratch_bound::<G2>(n)) };
                worst = worst.max(bytes);
                assert!(bound >= worst, "n = {n}: bound {bound} below {worst}");
            }
        }
    }
}
