//! Where a parameter set's points go: on the device when they fit beside a partition's
//! working memory, else in pinned host memory, streamed up through two chunk buffers
//! sized to the memory left. Pure functions of the device's free bytes and the set's
//! shape, so the policy is tested without a GPU.

use crate::msm::streamed::{DEFAULT_CHUNK_BYTES, MIN_CHUNK_BYTES};
use crate::msm::{window_bits, windows, MsmGroup, G1, G2};

/// Bytes of a scalar and of a G1 / G2 affine point on the device.
const SCALAR_BYTES: usize = std::mem::size_of::<crate::field::DeviceFr>();
const G1_POINT_BYTES: usize = std::mem::size_of::<<G1 as MsmGroup>::DeviceAffine>();
const G2_POINT_BYTES: usize = std::mem::size_of::<<G2 as MsmGroup>::DeviceAffine>();
/// a, b and c in each of the two staging slots (crate::groth16::staging).
const STAGED_VECTORS: usize = 3 * super::staging::STAGING_SLOTS;
/// Per window and scalar of an MSM, the sort's digit and sorted entry (4 bytes each).
const SORT_BYTES_PER_WINDOW: usize = 8;
/// Buckets, the reductions' pairs and the smaller MSMs' scratch of a partition.
const MSM_SCRATCH_BYTES: usize = 2 << 30;
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

/// Device memory a partition of an n-point domain works in besides the points: the
/// staging slots' a, b, c, the sort of an MSM of `msm_n` scalars (the widest window
/// count for that size: 13 windows from 2^24 scalars, 16 from 2^20), and the scratch.
pub fn working_bytes(n: usize, msm_n: usize) -> usize {
    let windows = windows(window_bits::<G1>(msm_n)) as usize;
    STAGED_VECTORS * SCALAR_BYTES * n + SORT_BYTES_PER_WINDOW * windows * msm_n + MSM_SCRATCH_BYTES
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
    if let Some(b) = made {
        return (working_bytes(n, b / G1_POINT_BYTES) <= free).then_some(b);
    }
    // Per G1 point of a chunk: its bytes in each buffer and the sort's bytes for an
    // MSM of a chunk's points (2^20 and more: 16 windows at most). Below 2^20 points a
    // chunk's MSMs take up to 20 windows: then the least size is tried on its own.
    let per_point = CHUNK_BUFFERS * G1_POINT_BYTES + SORT_BYTES_PER_WINDOW * windows(window_bits::<G1>(1 << 20)) as usize;
    let fits = |c: usize| CHUNK_BUFFERS * c + working_bytes(n, c / G1_POINT_BYTES) <= free;
    let room = free.checked_sub(working_bytes(n, 0))?;
    let chunk = ((room / per_point * G1_POINT_BYTES).min(DEFAULT_CHUNK_BYTES) / G2_POINT_BYTES) * G2_POINT_BYTES;
    if chunk >= MIN_CHUNK_BYTES && fits(chunk) {
        Some(chunk)
    } else {
        fits(MIN_CHUNK_BYTES).then_some(MIN_CHUNK_BYTES)
    }
}

/// The placement of a set of `points` bytes proven in partitions of an n-point domain
/// whose split lists take up to `lists` bytes ([`lists_bytes`]) on a device with `free`
/// bytes for it (`made`: the chunk buffers' size if the backend has them), with the
/// reason for the log; or why no partition of it fits at all. Resident only where the
/// lists fit at worst beside the points and a partition's working memory.
pub fn decide(points: usize, n: usize, lists: usize, free: usize, made: Option<usize>) -> Result<(Placement, String), String> {
    let gb = |b: usize| b as f64 / 1e9;
    // The H MSM runs over n − 1 scalars (16 windows at n = 2^24, not 13).
    let resident = points + working_bytes(n, n.saturating_sub(1)) + lists;
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
            Some(b) => working_bytes(n, b / G1_POINT_BYTES),
            None => CHUNK_BUFFERS * MIN_CHUNK_BYTES + working_bytes(n, MIN_CHUNK_BYTES / G1_POINT_BYTES),
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

    #[test]
    fn working_memory_counts_the_sort_windows_of_the_msm_size() {
        // a, b, c slots and 2 GiB, plus 8 bytes per window and scalar: 13 windows of
        // 20 bits from 2^24 scalars, 16 of 16 bits below.
        assert_eq!(working_bytes(C2, 0), 6 * 32 * C2 + (2 << 30));
        assert_eq!(working_bytes(C2, C2) - working_bytes(C2, 0), 8 * 13 * C2);
        assert_eq!(working_bytes(C2, 1 << 22) - working_bytes(C2, 0), (8 * 16) << 22);
    }

    #[test]
    fn streamed_chunks_shrink_to_fit_and_are_refused_below_the_least() {
        let gb = |x: f64| (x * 1e9) as usize;
        let fits = |free: usize, c: usize| c % 192 == 0 && c >= MIN_CHUNK_BYTES && 2 * c + working_bytes(C2, c / 96) <= free;
        // Room to spare: the default.
        assert_eq!(streamed_chunk_bytes(gb(141.0), C2, None), Some(DEFAULT_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(gb(8.0), 1 << 10, None), Some(DEFAULT_CHUNK_BYTES));
        // A 32 GB card beside a C2 partition's 27.9 GB of a, b, c and slack: smaller chunks.
        let c = streamed_chunk_bytes(gb(31.5), C2, None).expect("a C2 partition fits in 31.5 GB with small chunks");
        assert!(c < DEFAULT_CHUNK_BYTES && fits(gb(31.5), c), "{c}");
        // More memory never gives smaller chunks.
        let mut last = 0;
        for free in (28..40).map(|g| gb(g as f64)) {
            if let Some(c) = streamed_chunk_bytes(free, C2, None) {
                assert!(c >= last && fits(free, c), "{free}: {c}");
                last = c;
            }
        }
        // Just room for the least chunks (whose MSMs take 20 windows): those.
        let least = 2 * MIN_CHUNK_BYTES + working_bytes(C2, MIN_CHUNK_BYTES / 96);
        assert_eq!(streamed_chunk_bytes(least, C2, None), Some(MIN_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(least - 1, C2, None), None);
        // A 24 GB card cannot hold a C2 partition's a, b, c slots and scratch at all.
        assert_eq!(streamed_chunk_bytes(gb(23.0), C2, None), None);
        // Buffers already made keep their size, if the partition still fits beside them.
        assert_eq!(streamed_chunk_bytes(gb(141.0), C2, Some(MIN_CHUNK_BYTES)), Some(MIN_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(working_bytes(C2, DEFAULT_CHUNK_BYTES / 96), C2, Some(DEFAULT_CHUNK_BYTES)), Some(DEFAULT_CHUNK_BYTES));
        assert_eq!(streamed_chunk_bytes(working_bytes(C2, DEFAULT_CHUNK_BYTES / 96) - 1, C2, Some(DEFAULT_CHUNK_BYTES)), None);
    }

    #[test]
    fn a_set_is_resident_when_it_fits_beside_a_partition_else_streamed_else_refused() {
        let gb = |x: f64| (x * 1e9) as usize;
        let points = gb(47.37);
        // The C2 set on an H200 (its lists at worst): resident, with the reason.
        let lists = lists_bytes(130_169_893, 129_753_620, 33_112_282);
        let (p, why) = decide(points, C2, lists, gb(149.55), None).unwrap();
        assert_eq!(p, Placement::Resident);
        assert!(why.contains("fit in 149.55 GB"), "{why}");
        // Exactly the points, a partition's working memory and the lists: still
        // resident; a byte less: streamed through chunks that fit beside the lists.
        let need = points + working_bytes(C2, C2 - 1) + lists;
        assert_eq!(decide(points, C2, lists, need, None).unwrap().0, Placement::Resident);
        match decide(points, C2, lists, need - 1, None).unwrap().0 {
            Placement::Streamed { chunk_bytes } => assert_eq!(Some(chunk_bytes), streamed_chunk_bytes(need - 1, C2, None)),
            p => panic!("{p:?}"),
        }
        // Chunk buffers already made keep their size.
        assert_eq!(decide(points, C2, 0, gb(40.0), Some(MIN_CHUNK_BYTES)).unwrap().0, Placement::Streamed { chunk_bytes: MIN_CHUNK_BYTES });
        // A 24 GB card: refused, saying how much a partition needs. A 48 GB card still
        // streams (the lists' worst case is not held against streaming).
        let e = decide(points, C2, lists, gb(23.0), None).unwrap_err();
        assert!(e.contains("23.00 GB available") && e.contains("at least"), "{e}");
        assert!(matches!(decide(points, C2, lists, gb(48.0), None).unwrap().0, Placement::Streamed { .. }));
    }

    #[test]
    fn the_lists_count_every_value_as_neither_0_nor_1_in_both_slots() {
        // WindowPoSt 32 GiB: 15.4 GB per slot; with its 60.78 GB of points still
        // resident on an H200, where two slots' lists ran out of memory uncounted.
        let lists = lists_bytes(126_902_376, 96_205_645, 91_925_767);
        assert_eq!(lists, 2 * (32 * 126_902_376 + 36 * (126_902_376 + 96_205_645 + 91_925_767)));
        let gb = |x: f64| (x * 1e9) as usize;
        assert_eq!(decide(gb(60.78), C2, lists, gb(149.55), None).unwrap().0, Placement::Resident);
    }
}
