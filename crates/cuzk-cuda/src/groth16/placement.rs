//! Where a parameter set's points go: on the device when they fit beside a partition's
//! working memory, else in pinned host memory, streamed up through two chunk buffers
//! sized to the memory left. Pure functions of the device's free bytes and the set's
//! shape, so the policy is tested without a GPU.

use crate::msm::streamed::{DEFAULT_CHUNK_BYTES, MIN_CHUNK_BYTES};
use crate::msm::{scratch_bound, MsmGroup, G1, G2};

/// Bytes of a scalar and of a G1 / G2 affine point on the device.
const SCALAR_BYTES: usize = std::mem::size_of::<crate::field::DeviceFr>();
const G1_POINT_BYTES: usize = std::mem::size_of::<<G1 as MsmGroup>::DeviceAffine>();
const G2_POINT_BYTES: usize = std::mem::size_of::<<G2 as MsmGroup>::DeviceAffine>();
/// a, b and c in each of the two staging slots (crate::groth16::staging).
const STAGED_VECTORS: usize = 3 * super::staging::STAGING_SLOTS;
/// Besides the MSMs' scratch (its large buffers: [`msm_scratch_bytes`]): buckets, the
/// reductions' pairs and bucket offsets of an MSM (1.4 GB for 2^27 scalars in 20-bit
/// windows: 13 · 2^19 buckets of 192 bytes, offsets and counts) and the public inputs'
/// small MSMs.
const MSM_SMALL_BYTES: usize = 2 << 30;
/// The chunk buffers of streamed points.
const CHUNK_BUFFERS: usize = 2;

const _: () = assert!(SCALAR_BYTES == 32 && G1_POINT_BYTES == 96 && G2_POINT_BYTES == 192);

/// Where a backend keeps a set's points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the device, for as long as the set is loaded.
    Resident,
    /// In pinned host memory, streamed up by every MSM through two device buffers of
    /// `chunk_bytes` each.
    Streamed { chunk_bytes: usize },
}

/// The MSM scratch (crate::msm::GpuMsm, one allocation kept for all its MSMs) that
/// serves every MSM of a partition: G1 MSMs of up to `g1` scalars, G2 of up to `g2`.
pub fn msm_scratch_bytes(g1: usize, g2: usize) -> usize {
    scratch_bound::<G1>(g1).max(scratch_bound::<G2>(g2))
}

/// Device memory a partition of an n-point domain works in besides the points: the
/// staging slots' a, b, c, the MSM scratch for G1 MSMs of up to `g1` scalars and G2
/// of up to `g2`, and the MSMs' smaller buffers.
pub fn working_bytes(n: usize, g1: usize, g2: usize) -> usize {
    STAGED_VECTORS * SCALAR_BYTES * n + msm_scratch_bytes(g1, g2) + MSM_SMALL_BYTES
}

/// The most scalars of a partition's G1 and G2 MSMs with resident points, for an
/// n-point domain and L, A and B queries of `queries` points: the H MSM's n − 1 or a
/// whole query in G1, the B query in G2.
fn resident_msm_counts(n: usize, queries: [usize; 3]) -> (usize, usize) {
    let [l, a, b] = queries;
    (n.saturating_sub(1).max(l).max(a).max(b), b)
}

/// The MSM scratch of partitions with resident points ([`resident_msm_counts`]).
pub fn resident_msm_scratch_bytes(n: usize, queries: [usize; 3]) -> usize {
    let (g1, g2) = resident_msm_counts(n, queries);
    msm_scratch_bytes(g1, g2)
}

/// The MSM scratch of partitions whose points stream through chunk buffers of
/// `chunk_bytes`: each MSM runs over a chunk's points at most.
pub fn streamed_msm_scratch_bytes(chunk_bytes: usize) -> usize {
    msm_scratch_bytes(chunk_bytes / G1_POINT_BYTES, chunk_bytes / G2_POINT_BYTES)
}

/// Device memory a partition whose points stream through chunk buffers of `chunk_bytes`
/// works in besides those buffers: each MSM runs over a chunk's points at most.
fn streamed_working_bytes(n: usize, chunk_bytes: usize) -> usize {
    working_bytes(n, chunk_bytes / G1_POINT_BYTES, chunk_bytes / G2_POINT_BYTES)
}

/// Device memory a partition with resident points works in besides them
/// ([`working_bytes`]) and the split lists of two partitions at worst ([`lists_bytes`]).
pub fn resident_working_bytes(n: usize, queries: [usize; 3]) -> usize {
    let (g1, g2) = resident_msm_counts(n, queries);
    let [l, a, b] = queries;
    working_bytes(n, g1, g2) + lists_bytes(l, a, b)
}

/// Device memory the split MSMs' lists of the two staging slots' partitions can take,
/// for L, A and B queries of `l`, `a` and `b` points (`l`: one per aux value): each
/// slot's aux values, and per query an index for each 1 and an index and a scalar for
/// each other value. At worst every value is neither 0 nor 1 — WindowPoSt's 99 %:
/// 15.4 GB per 32 GiB partition, which two slots beside its 60.8 GB of points and a
/// partition's working memory did run out of on an H200.
pub fn lists_bytes(l: usize, a: usize, b: usize) -> usize {
    super::staging::STAGING_SLOTS * (SCALAR_BYTES * l + (SCALAR_BYTES + 4) * (l + a + b))
}

/// The chunk buffers' size for a set streamed on a device with `free` bytes for it, in
/// partitions of an n-point domain: the default, or less where that does not fit
/// beside the a, b, c slots (so a GPU with little memory to spare still proves), a
/// whole number of G1 and G2 points no smaller than MIN_CHUNK_BYTES; None if not even
/// that fits. `made`: the size of the backend's chunk buffers if already made (they
/// cost nothing more, and their size stays).
pub fn streamed_chunk_bytes(free: usize, n: usize, made: Option<usize>) -> Option<usize> {
    let need = |c: usize| streamed_working_bytes(n, c);
    if let Some(b) = made {
        return (need(b) <= free).then_some(b);
    }
    // The largest whole number of G2 points from the least size to the default whose
    // buffers fit beside the rest (what fits only shrinks as chunks grow: the scratch
    // bound never falls as the count grows).
    let fits = |points: usize| CHUNK_BUFFERS * points * G2_POINT_BYTES + need(points * G2_POINT_BYTES) <= free;
    let (mut lo, mut hi) = (MIN_CHUNK_BYTES / G2_POINT_BYTES, DEFAULT_CHUNK_BYTES / G2_POINT_BYTES);
    if !fits(lo) {
        return None;
    }
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo * G2_POINT_BYTES)
}

/// The placement of a set of `points` bytes proven in partitions of an n-point domain
/// with L, A and B queries of `queries` points on a device with `free` bytes for it
/// (`made`: the chunk buffers' size if the backend has them), with the reason for the
/// log; or why no partition of it fits at all. Resident only where the split lists fit
/// at worst beside the points and a partition's working memory.
pub fn decide(points: usize, n: usize, queries: [usize; 3], free: usize, made: Option<usize>) -> Result<(Placement, String), String> {
    let gb = |b: usize| b as f64 / 1e9;
    let resident = points + resident_working_bytes(n, queries);
    if resident <= free {
        let why = format!("{:.2} GB of points and {:.2} GB of working memory fit in {:.2} GB", gb(points), gb(resident - points), gb(free));
        return Ok((Placement::Resident, why));
    }
    // Streamed chunks are sized without the lists' worst case: a 32 GiB PoRep partition
    // (lists of ~5 GB per slot) still streams on a 48 GB card, which the worst case
    // (~15 GB per slot) would refuse. A set of mostly non-bit values (WindowPoSt) on
    // such a card can still run short with two partitions' lists in flight: sizing
    // them from the witness's classes at staging is the fix for that.
    let Some(chunk_bytes) = streamed_chunk_bytes(free, n, made) else {
        let least = match made {
            Some(b) => streamed_working_bytes(n, b),
            None => CHUNK_BUFFERS * MIN_CHUNK_BYTES + streamed_working_bytes(n, MIN_CHUNK_BYTES),
        };
        return Err(format!(
            "{:.2} GB available: not enough for a partition of this set even with its {:.2} GB of points streamed (at least {:.2} GB needed)",
            gb(free),
            gb(points),
            gb(least)
        ));
    };
    let why = format!(
        "{:.2} GB of points and {:.2} GB of working memory do not fit in {:.2} GB; chunk buffers of {:.2} GB",
        gb(points),
        gb(resident - points),
        gb(free),
        gb(chunk_bytes)
    );
    Ok((Placement::Streamed { chunk_bytes }, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    const C2: usize = 1 << 27;
    /// L, A and B query lengths of the 32 GiB PoRep (C2) and WindowPoSt sets.
    const C2_QUERIES: [usize; 3] = [130_169_893, 129_753_620, 33_112_282];
    const WPOST_QUERIES: [usize; 3] = [126_902_376, 96_205_645, 91_925_767];

    fn gb(x: f64) -> usize {
        (x * 1e9) as usize
    }

    #[test]
    fn working_memory_counts_the_largest_msm_of_either_group() {
        // a, b, c slots, the small buffers, and the scratch of the larger MSM.
        assert_eq!(working_bytes(C2, 0, 0), 6 * 32 * C2 + (2 << 30) + msm_scratch_bytes(0, 0));
        assert_eq!(working_bytes(C2, C2 - 1, 0) - working_bytes(C2, 0, 0), scratch_bound::<G1>(C2 - 1) - msm_scratch_bytes(0, 0));
        // C2: the H MSM's sort (13 windows of 20 bits: 14.0 GB) is below the G2 MSM's
        // sort and batch-affine rounds over B's 33 M points (15.3 GB).
        let h = scratch_bound::<G1>(C2 - 1);
        assert!((13.9e9..14.0e9).contains(&(h as f64)), "{h}");
        assert_eq!(resident_msm_scratch_bytes(C2, C2_QUERIES), scratch_bound::<G2>(C2_QUERIES[2]));
        // WindowPoSt: B's 91.9 M points in G2 take 24.1 GB, which the H MSM's sort
        // (all that was counted) undercounted by 10 GB.
        let w = resident_msm_scratch_bytes(C2, WPOST_QUERIES);
        assert!((24.0e9..24.2e9).contains(&(w as f64)), "{w}");
    }

    #[test]
    fn streamed_chunks_shrink_to_fit_and_are_refused_below_the_least() {
        let fits = |free: usize, c: usize| c % 192 == 0 && c >= MIN_CHUNK_BYTES && 2 * c + working_bytes(C2, c / 96, c / 192) <= free;
        // Room to spare: the default.
        assert_eq!(streamed_chunk_bytes(gb(141.0), C2, None), Some(DEFAULT_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(gb(24.0), 1 << 10, None), Some(DEFAULT_CHUNK_BYTES));
        // More memory never gives smaller chunks; each one chosen fits, and the next
        // whole number of G2 points would not (or it is the default).
        let (mut last, mut shrunk) = (0, false);
        for free in (280..600).map(|g| gb(g as f64 / 10.0)) {
            if let Some(c) = streamed_chunk_bytes(free, C2, None) {
                assert!(c >= last && fits(free, c), "{free}: {c}");
                assert!(c == DEFAULT_CHUNK_BYTES || !fits(free, c + 192), "{free}: {c}");
                shrunk |= c < DEFAULT_CHUNK_BYTES;
                last = c;
            }
        }
        assert!(shrunk && last == DEFAULT_CHUNK_BYTES);
        // Just room for the least chunks: those.
        let least = 2 * MIN_CHUNK_BYTES + working_bytes(C2, MIN_CHUNK_BYTES / 96, MIN_CHUNK_BYTES / 192);
        assert_eq!(streamed_chunk_bytes(least, C2, None), Some(MIN_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(least - 1, C2, None), None);
        // A 24 GB card cannot hold a C2 partition's a, b, c slots and scratch at all.
        assert_eq!(streamed_chunk_bytes(gb(23.0), C2, None), None);
        // Buffers already made keep their size, if the partition still fits beside them.
        assert_eq!(streamed_chunk_bytes(gb(141.0), C2, Some(MIN_CHUNK_BYTES)), Some(MIN_CHUNK_BYTES));
        let beside_default = working_bytes(C2, DEFAULT_CHUNK_BYTES / 96, DEFAULT_CHUNK_BYTES / 192);
        assert_eq!(streamed_chunk_bytes(beside_default, C2, Some(DEFAULT_CHUNK_BYTES)), Some(DEFAULT_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(beside_default - 1, C2, Some(DEFAULT_CHUNK_BYTES)), None);
    }

    #[test]
    fn a_set_is_resident_when_it_fits_beside_a_partition_else_streamed_else_refused() {
        let points = gb(47.37);
        // The C2 set on an H200 (its lists at worst): resident, with the reason.
        let (p, why) = decide(points, C2, C2_QUERIES, gb(149.55), None).unwrap();
        assert_eq!(p, Placement::Resident);
        assert!(why.contains("fit in 149.55 GB"), "{why}");
        // Exactly the points, a partition's working memory and the lists: still
        // resident; a byte less: streamed through chunks that fit beside them.
        let need = points + resident_working_bytes(C2, C2_QUERIES);
        assert_eq!(decide(points, C2, C2_QUERIES, need, None).unwrap().0, Placement::Resident);
        match decide(points, C2, C2_QUERIES, need - 1, None).unwrap().0 {
            Placement::Streamed { chunk_bytes } => assert_eq!(Some(chunk_bytes), streamed_chunk_bytes(need - 1, C2, None)),
            p => panic!("{p:?}"),
        }
        // Chunk buffers already made keep their size.
        assert_eq!(decide(points, C2, C2_QUERIES, gb(40.0), Some(MIN_CHUNK_BYTES)).unwrap().0, Placement::Streamed { chunk_bytes: MIN_CHUNK_BYTES });
        // A 24 GB card: refused, saying how much a partition needs. A 48 GB card still
        // streams (the lists' worst case is not held against streaming).
        let e = decide(points, C2, C2_QUERIES, gb(23.0), None).unwrap_err();
        assert!(e.contains("23.00 GB available") && e.contains("at least"), "{e}");
        assert!(matches!(decide(points, C2, C2_QUERIES, gb(48.0), None).unwrap().0, Placement::Streamed { .. }));
    }

    #[test]
    fn the_lists_count_every_value_as_neither_0_nor_1_in_both_slots() {
        // WindowPoSt 32 GiB: 15.4 GB per slot.
        let [l, a, b] = WPOST_QUERIES;
        assert_eq!(lists_bytes(l, a, b), 2 * (32 * l + 36 * (l + a + b)));
        // With its 60.78 GB of points, two slots' lists and its G2 MSM's scratch, the
        // set is still resident on an H200 (143.6 of 149.55 GB).
        let need = gb(60.78) + resident_working_bytes(C2, WPOST_QUERIES);
        assert!((143.0e9..144.0e9).contains(&(need as f64)), "{need}");
        assert_eq!(decide(gb(60.78), C2, WPOST_QUERIES, gb(149.55), None).unwrap().0, Placement::Resident);
    }
}
