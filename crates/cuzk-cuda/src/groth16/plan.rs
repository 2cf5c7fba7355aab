//! The device-memory plan of one GPU: for a parameter set, every byte its partitions
//! allocate on the device, counted before the set is accepted, and the configuration
//! that fits the memory the backend may use (`gpus.device_memory_limit`, else what the
//! card has free). Pure functions of the set's shape and the bytes available, so every
//! card size is tested without a GPU.
//!
//! What a partition holds, and where:
//! - **points**: resident (47.4 GB for a 32 GiB PoRep set), or in pinned host memory
//!   streamed through two chunk buffers, H's (12.9 GB) resident beside them where they
//!   fit; the chunk buffers in each slot's arena after h (`chunks_in_slot`: b and c's
//!   room, free once the H polynomial is done) where they fit there, else the
//!   backend's own;
//! - **compiled matrices** (7.5 GB at 32 GiB PoRep) on the device, where a, b, c are
//!   then computed; or in pinned host memory, sent up in row blocks through the
//!   backend's chunk buffers per partition (crate::groth16::row_blocks), a, b, c still
//!   computed on the device; else a, b, c are computed on the host and uploaded;
//! - **NTT tables**: the twiddles of every stage (10.7 GB at 2^27), or of the stages
//!   below `table_log` (the others computed, one product more per butterfly);
//! - per **staging slot** (one partition in flight each; two let the next partition's
//!   products overlap this one's MSMs): a, b, c, whose b and c turn into the split
//!   lists' pieces, the MSM scratch and (`chunks_in_slot`) the two chunk buffers once
//!   the H polynomial is done (`slot_bytes`),
//!   and the compact witness (`witness_bytes`: its bitmaps and offsets at least, its
//!   other values where they fit; else they go up a window per list piece);
//! - the MSMs' small buffers (buckets, reduction pairs: taken from the device pool per
//!   MSM and given back) and a margin for the pool and the context.
//!
//! Where memory is short the plan degrades in steps, the first that fits wins, in this
//! order: two slots → one; every twiddle stage in tables → fewer; the H MSM in one run →
//! in pieces; points resident → H resident, the others streamed → all streamed (the
//! chunks as large as fit, in the slot's arena before the backend's); matrices
//! resident → streamed in row blocks (points streamed too: they are the larger) → a, b,
//! c on the host. Leftover memory goes to the witness (up to all its values) and
//! the list pieces (up to a whole query's lists at worst).

pub use super::held::Held;
use crate::msm::split::{PieceLimits, LIST_CHUNK};
use crate::msm::streamed::{DEFAULT_CHUNK_BYTES, MIN_CHUNK_BYTES};
use crate::msm::{max_scalars_within, scratch_bound, G1, G2};
use crate::ntt::domain_bytes;

const SCALAR_BYTES: usize = 32;
const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;
/// Bytes of a list entry at worst: a significant value's index and scalar.
const LIST_ENTRY_BYTES: usize = 36;
/// The least memory a list piece may have: one chunk of positions, every one
/// significant, with its window of other values.
const LEAST_LIST_BYTES: usize = LIST_CHUNK * (LIST_ENTRY_BYTES + SCALAR_BYTES) + 4096;
/// The margin kept free: the device pool's rounding, the handful of small buffers no
/// count covers (events, the public inputs' sums, chunk tables, densities), and the
/// 192 MiB a streamed set's loading takes on the device while other sets prove.
pub(crate) const MARGIN_BYTES: usize = 768 << 20;
/// Left free in every plan where there is room beyond its least, for a small urgent
/// set (a WinningPoSt) to be loaded beside whatever else is. A 32 GiB WinningPoSt's own
/// device memory beside a loaded PoRep set is its domain's NTT tables (43 MB) and,
/// where the PoRep set keeps its points resident, the least chunk buffers its streamed
/// points need (2 × 12.6 MB): 68 MB, which 64 MiB missed on the H100 at e2b69a2
/// ("83.48 GB needed" of 83.48). Without a reserve a PoRep set planned first on a
/// 16 GiB card left no byte (15.86 GB needed of 15.82).
const URGENT_RESERVE_BYTES: usize = 128 << 20;
/// What the ladder first asks a configuration to leave free beside its least: room
/// for a small urgent set beside a streaming one (its NTT tables, 43 MB for a 32 GiB
/// WinningPoSt). Without it a WindowPoSt set on a 16 GiB card, whose a, b, c go to the
/// host once its witness area holds its significant values, took all but 0.01 GB. Less
/// than the 70 MB the measured 16 GiB PoRep plan leaves (15.75 of 15.82 GB), which it
/// keeps.
const URGENT_ROOM_BYTES: usize = 64 << 20;
/// The least twiddle table: the blocked stages (crate::ntt).
const LEAST_TABLE_LOG: u32 = 10;
/// Slots' arenas and witness areas are whole blocks of this many bytes.
const ALLOC_ALIGN: usize = 256;
/// The backend's own chunk buffers where the MSMs' are in the slots and the matrices
/// stream: the row blocks' (0.40 GB blocks moved a 32 GiB PoRep partition's 7.46 GB in
/// 0.14 s on an H100 at 5e89282, ~52 GB/s; 0.20 GB blocks still take ~4 ms each
/// against a launch's ~10 µs). With no matrices streamed the buffers are the least.
const ROW_BLOCK_BYTES: usize = 192 << 20;

/// The shape of a parameter set as the device sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetShape {
    /// The evaluation domain (a power of two).
    pub n: usize,
    /// Points of H, L, A, B (G1) and B (G2).
    pub queries: [usize; 5],
    /// Public inputs (the witness's leading values, with the constant one).
    pub inputs: usize,
    /// Aux values of a partition's witness.
    pub aux: usize,
    /// Device bytes of the circuit's compiled matrices, where it has them.
    pub matrices_bytes: Option<usize>,
    /// The most significant aux values (neither 0 nor 1) a partition's witness is
    /// expected to have, where the circuit's kind says
    /// (cuzk_groth16::matrices::ConstraintMatrices::significant_aux).
    pub significant: Option<usize>,
}

impl SetShape {
    pub fn points_bytes(&self) -> usize {
        let [h, l, a, b1, b2] = self.queries;
        G1_BYTES * (h + l + a + b1) + G2_BYTES * b2
    }

    pub(crate) fn log_n(&self) -> u32 {
        self.n.max(1).trailing_zeros()
    }

    /// Compact witness bytes when all its aux values are other values.
    fn witness_worst(&self) -> usize {
        crate::msm::compact::CompactLayout::new(self.inputs, self.aux, self.aux, true).bytes()
    }

    fn witness_least(&self) -> usize {
        crate::msm::compact::CompactLayout::least_bytes(self.inputs, self.aux)
    }

    /// The least witness area where a, b, c are computed on the device, which needs
    /// every significant value there: room for a twentieth of the aux values (a 32 GiB
    /// PoRep partition has 1.3 %), or for as many as the kind expects where it says
    /// more (a 32 GiB WindowPoSt partition has 99 %: with a twentieth, its a, b, c were
    /// computed on the host, 9.8 s of its 26.4 s on the H100 at 9a7c8eb).
    fn witness_for_products(&self) -> usize {
        let (least, worst) = (self.witness_least(), self.witness_worst());
        let twentieth = least + (worst - least) / 20;
        match self.significant {
            Some(s) => twentieth.max(crate::msm::compact::CompactLayout::new(self.inputs, self.aux, s.min(self.aux), true).bytes()),
            None => twentieth,
        }
    }

    /// The largest query's lists at worst (every value significant), with the window
    /// of other values when they are not resident.
    fn lists_worst(&self) -> usize {
        let [_, l, a, b, _] = self.queries;
        l.max(a).max(b) * (LIST_ENTRY_BYTES + SCALAR_BYTES) + 4096
    }
}

/// Where a set's points are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the device, for as long as the set is loaded.
    Resident,
    /// In pinned host memory, streamed up by every MSM through two device buffers of
    /// `chunk_bytes` each; H's points also on the device when `h_resident` (the H MSM
    /// then reads them there).
    Streamed { chunk_bytes: usize, h_resident: bool },
}

/// Where a partition's a, b, c are computed from the set's compiled matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Products {
    /// On the host, then uploaded (the matrices do not fit, or the circuit has none).
    Host,
    /// On the device, from the matrices kept there.
    Resident,
    /// On the device, from the matrices in pinned host memory sent up per partition in
    /// row blocks through the backend's chunk buffers (the points stream too).
    Streamed,
}

impl Products {
    /// Whether a, b, c are computed on the device.
    pub fn on_device(self) -> bool {
        self != Products::Host
    }
}

/// How a backend proves a set: every device allocation's size, and its total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevicePlan {
    pub points: Placement,
    /// Where a, b, c are computed, and where the compiled matrices are for it.
    pub products: Products,
    /// The streamed points' two chunk buffers are in each slot's arena, after h; the
    /// backend's own buffers then carry the matrices' row blocks only.
    pub chunks_in_slot: bool,
    /// Partitions on the device at once (staging slots).
    pub slots: usize,
    /// Twiddle tables up to this stage (crate::ntt::table_log_within): the plan's
    /// choice, or more where another loaded set's budget keeps more.
    pub table_log: u32,
    /// The NTT's twiddle-table budget with this set loaded (the largest any loaded
    /// set's plan needs): what the backend sets (crate::ntt::GpuNtt::set_table_bytes).
    pub table_budget: usize,
    /// Per slot: a, b, c; then h, the list pieces, the MSM scratch (and the chunk
    /// buffers when `chunks_in_slot`).
    pub slot_bytes: usize,
    /// Per slot: the compact witness area.
    pub witness_bytes: usize,
    /// Of a slot, after h: a list piece's memory, and the MSM scratch.
    pub lists_bytes: usize,
    pub scratch_bytes: usize,
    /// The most scalars of one Pippenger run: H's, and a list piece's significant
    /// values in G1 and in G2.
    pub h_piece: usize,
    pub g1_piece: usize,
    pub g2_piece: usize,
    pub msm_small_bytes: usize,
    pub margin_bytes: usize,
    /// What the device holds with this set planned: the other sets' parts, this set's,
    /// the shared parts at their largest.
    pub total_bytes: usize,
    /// The bytes the plan had.
    pub capacity: usize,
}

impl DevicePlan {
    /// Limits of a piece of split lists under this plan: `window` when the partition's
    /// other values are not resident; `g2` for the B query, whose lists feed G2 too.
    pub fn piece_limits(&self, window: bool, g2: bool) -> PieceLimits {
        let bases = match self.points {
            Placement::Resident => usize::MAX,
            Placement::Streamed { chunk_bytes, .. } => chunk_bytes / if g2 { G2_BYTES } else { G1_BYTES },
        };
        PieceLimits { bytes: self.lists_bytes, significant: if g2 { self.g2_piece.min(self.g1_piece) } else { self.g1_piece }, bases, window }
    }

    /// The chunk buffers' size the MSMs stream through, for a streamed set.
    pub fn chunk_bytes(&self) -> Option<usize> {
        match self.points {
            Placement::Resident => None,
            Placement::Streamed { chunk_bytes, .. } => Some(chunk_bytes),
        }
    }

    /// The size of each of the backend's two own chunk buffers, for a streamed set:
    /// the MSMs' chunks, or where those are in the slots, the matrices' row blocks.
    pub fn backend_chunk_bytes(&self) -> Option<usize> {
        let c = self.chunk_bytes()?;
        Some(if !self.chunks_in_slot {
            c
        } else if self.products == Products::Streamed {
            ROW_BLOCK_BYTES.min(c)
        } else {
            MIN_CHUNK_BYTES
        })
    }

    /// Bytes of the chunk buffers in each slot's arena.
    pub fn slot_chunk_bytes(&self) -> usize {
        if self.chunks_in_slot {
            2 * self.chunk_bytes().unwrap_or(0)
        } else {
            0
        }
    }

    /// Device bytes of the set's compiled matrices kept on the device.
    pub fn device_matrices_bytes(&self, shape: &SetShape) -> usize {
        if self.products == Products::Resident {
            shape.matrices_bytes.unwrap_or(0)
        } else {
            0
        }
    }

    /// Device bytes of the set's resident points: all of them, H's, or none.
    pub fn resident_points_bytes(&self, shape: &SetShape) -> usize {
        match self.points {
            Placement::Resident => shape.points_bytes(),
            Placement::Streamed { h_resident: true, .. } => G1_BYTES * shape.queries[0],
            Placement::Streamed { h_resident: false, .. } => 0,
        }
    }

    /// One line for the log: the choices and each part's bytes.
    pub fn summary(&self, shape: &SetShape) -> String {
        let gb = |b: usize| format!("{:.2}", b as f64 / 1e9);
        let points = match self.points {
            Placement::Resident => format!("points resident {} GB", gb(shape.points_bytes())),
            Placement::Streamed { chunk_bytes, h_resident: false } => {
                format!("points streamed through 2 × {} GB{}", gb(chunk_bytes), self.chunks_where())
            }
            Placement::Streamed { chunk_bytes, h_resident: true } => format!(
                "H resident {} GB, the other points streamed through 2 × {} GB{}",
                gb(self.resident_points_bytes(shape)),
                gb(chunk_bytes),
                self.chunks_where()
            ),
        };
        let products = match (shape.matrices_bytes, self.products) {
            (Some(m), Products::Streamed) => format!(
                "a, b, c on the device (matrices {} GB streamed in row blocks through 2 × {} GB)",
                gb(m),
                gb(self.backend_chunk_bytes().unwrap_or(0))
            ),
            (Some(m), Products::Resident) => format!("a, b, c on the device (matrices {} GB)", gb(m)),
            (Some(_), Products::Host) => "a, b, c on the host (the matrices do not fit)".to_string(),
            (None, _) => "a, b, c from synthesis".to_string(),
        };
        let log_n = shape.log_n();
        let tables = if self.table_log >= log_n {
            format!("NTT tables {} GB", gb(domain_bytes(log_n, self.table_log)))
        } else {
            format!("NTT tables {} GB (stages {}..{} computed)", gb(domain_bytes(log_n, self.table_log)), self.table_log, log_n)
        };
        let h = if self.h_piece + 1 >= shape.n { "H MSM in one run".to_string() } else { format!("H MSM in runs of {}", self.h_piece) };
        format!(
            "{points}; {products}; {tables}; {} slot(s) of {} GB + witness {} GB (lists {} GB, MSM scratch {} GB); {h}; MSM buffers {} GB; margin {} GB; {} of {} GB",
            self.slots,
            gb(self.slot_bytes),
            gb(self.witness_bytes),
            gb(self.lists_bytes),
            gb(self.scratch_bytes),
            gb(self.msm_small_bytes),
            gb(self.margin_bytes),
            gb(self.total_bytes),
            gb(self.capacity)
        )
    }
}

impl DevicePlan {
    fn chunks_where(&self) -> &'static str {
        if self.chunks_in_slot {
            " in each slot's arena after h"
        } else {
            ""
        }
    }
}

/// Device bytes of one Pippenger run's buffers besides its scratch, for at most
/// `scalars` scalars of G (counts, offsets, cursor, bucket sums, the reduction's pairs,
/// the accumulation's segment partials), mirroring crate::msm::pippenger's allocations.
fn pippenger_small_bytes(scalars: usize, xyzz: usize, wide: u32) -> usize {
    let log = usize::BITS - 1 - scalars.max(1).leading_zeros();
    let c = if log >= 24 { wide } else { log.saturating_sub(4).clamp(4, 16) };
    let w = (255 / c + 1) as usize;
    let len = w << (c - 1);
    let reduce = w * ((1usize << (c - 1)) / 32).max(1);
    let segments = (scalars * w).div_ceil(((scalars * w).div_ceil(1 << 18)).max(8)).max(1);
    3 * 4 * (len + 1) + len * xyzz + 3 * reduce * xyzz + segments * (3 * xyzz + 8) + (1 << 15) * 2 * xyzz
}

/// The MSMs' small buffers: the largest run's, twice (the device pool keeps the blocks
/// of the run before while the next takes its own).
fn msm_small_bytes(h_piece: usize, g1_piece: usize, g2_piece: usize) -> usize {
    let g1 = pippenger_small_bytes(h_piece.max(g1_piece), 192, 20);
    let g2 = pippenger_small_bytes(g2_piece, 384, 16);
    2 * g1.max(g2)
}

/// Choices a backend is told to make instead of its plan's: benchmarks (`cuzk bench
/// --stream-points`), and tests that take small cards' paths with small circuits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Points streamed through chunk buffers of this size (a multiple of 192, at least
    /// crate::msm::streamed::MIN_CHUNK_BYTES).
    pub chunk_bytes: Option<usize>,
    pub slots: Option<usize>,
    /// Twiddle tables up to this stage (at least the blocked stages, 10).
    pub table_log: Option<u32>,
    /// H MSM runs of at most this many scalars.
    pub h_piece: Option<usize>,
    /// A list piece's bytes (at least one chunk's at worst).
    pub lists_bytes: Option<usize>,
    /// The witness area holds the bitmaps and offsets only: list pieces send their
    /// window of other values, and pending a, b, c are computed on the host.
    pub witness_least: bool,
    /// Pending a, b, c on the host even where the matrices would fit.
    pub host_products: bool,
    /// With `chunk_bytes`: H's points resident beside the streamed others.
    pub h_resident: bool,
    /// The compiled matrices streamed in row blocks even where they would fit.
    pub stream_matrices: bool,
    /// Streamed points' chunk buffers the backend's own even where they would fit in
    /// the slots' arenas.
    pub chunks_outside_slot: bool,
}

impl Overrides {
    /// Refuses values no plan can take.
    pub fn check(&self) -> Result<(), String> {
        if let Some(c) = self.chunk_bytes {
            crate::msm::streamed::check_chunk_bytes(c).map_err(|e| e.to_string())?;
        }
        if self.h_resident && self.chunk_bytes.is_none() {
            return Err("H resident beside streamed points needs their chunk size".into());
        }
        if self.stream_matrices && self.host_products {
            return Err("matrices streamed and a, b, c on the host at once".into());
        }
        if self.slots == Some(0) || self.h_piece == Some(0) {
            return Err("at least one slot, and H MSM runs of at least one scalar".into());
        }
        if self.table_log.is_some_and(|t| t < LEAST_TABLE_LOG) {
            return Err(format!("twiddle tables up to stage {LEAST_TABLE_LOG} at least"));
        }
        if self.lists_bytes.is_some_and(|b| b < LEAST_LIST_BYTES) {
            return Err(format!("list pieces of at least {LEAST_LIST_BYTES} bytes"));
        }
        Ok(())
    }
}

/// One configuration the ladder tries.
#[derive(Clone, Copy, Debug)]
struct Choice {
    matrices: bool,
    streamed_matrices: bool,
    chunk_bytes: Option<usize>,
    h_resident: bool,
    in_slot: bool,
    slots: usize,
    table_log: u32,
    h_piece: usize,
}

/// The plan for `shape` on a device where the backend may hold `capacity` bytes in
/// all, beside what its other sets hold; or why no configuration fits, with the least
/// a partition needs.
pub fn plan(shape: &SetShape, capacity: usize, held: &Held, o: &Overrides) -> Result<DevicePlan, String> {
    let log_n = shape.log_n();
    let h = shape.queries[0];
    let mut least_seen = usize::MAX;
    // (a, b, c on the device, matrices streamed): resident, streamed, on the host.
    let matrices_choices: &[(bool, bool)] = match shape.matrices_bytes {
        Some(_) if o.stream_matrices => &[(true, true)],
        Some(_) if !o.host_products => &[(true, false), (true, true), (false, false)],
        _ => &[(false, false)],
    };
    // Chunk sizes from the default down (halving, whole G2 points).
    let mut sizes = Vec::new();
    let mut c = DEFAULT_CHUNK_BYTES;
    while c >= MIN_CHUNK_BYTES {
        sizes.push(c);
        c = (c / 2 / G2_BYTES * G2_BYTES).max(if c == MIN_CHUNK_BYTES { 0 } else { MIN_CHUNK_BYTES });
    }
    // Placements (chunk size, H resident) in groups, best first: every point resident;
    // H resident beside the streamed others (12.9 GB of a 32 GiB PoRep partition's 47.5
    // GB then stay off the bus); all streamed. Within a group the H MSM's runs come
    // before the chunks' size.
    let groups: Vec<Vec<(Option<usize>, bool)>> = match o.chunk_bytes {
        Some(c) => vec![vec![(Some(c), o.h_resident)]],
        None => vec![vec![(None, false)], sizes.iter().map(|&c| (Some(c), true)).collect(), sizes.iter().map(|&c| (Some(c), false)).collect()],
    };
    let slot_choices = o.slots.map_or(vec![2, 1], |s| vec![s]);
    let tables: Vec<u32> = match o.table_log {
        Some(t) => vec![t.min(log_n)],
        None => (LEAST_TABLE_LOG.min(log_n)..=log_n).rev().collect(),
    };
    // Preference, first to last: a, b, c on the device from resident matrices, from
    // streamed ones (7.5 GB over the bus per 32 GiB PoRep partition against 12.9 GB of
    // a, b, c and ~5.9 s of host products); the H MSM in as few runs as
    // the points' placement allows (each halving costs a bucket reduction per run and
    // narrower windows: ~10 % of the H MSM at 16 runs); points resident, else the
    // largest chunks; every twiddle stage in tables (each stage computed costs ~4 % of
    // an NTT); two slots (one partition's products overlap the other's MSMs: a few
    // tens of ms per partition).
    // Per place of a, b, c, first the configurations that leave room for a small urgent
    // set beside this one (URGENT_ROOM_BYTES), then, where none does, any that fits: the
    // room never costs a, b, c their place.
    let mut ladder = |keep: usize, (matrices, streamed_matrices): (bool, bool)| -> Option<DevicePlan> {
        for group in &groups {
            // Within a group: the fewest H runs first, then the largest chunks (fewer list
            // pieces), each run a chunk's points at most when they stream.
            let mut candidates = Vec::new();
            for &(chunk_bytes, h_resident) in group {
                // Streamed matrices go through the backend's chunk buffers: reached only
                // where resident matrices do not fit even with streamed points, so
                // resident points do not either.
                if streamed_matrices && chunk_bytes.is_none() {
                    continue;
                }
                let most = if h_resident { h } else { chunk_bytes.map_or(h, |c| (c / G1_BYTES).min(h)) }.max(1);
                for halvings in 0..usize::BITS {
                    let h_piece = o.h_piece.map_or(most >> halvings, |p| if halvings == 0 { p.min(most) } else { 0 });
                    if h_piece < LIST_CHUNK.min(most) || h_piece == 0 {
                        break;
                    }
                    candidates.push((h_piece, chunk_bytes, h_resident));
                }
            }
            candidates.sort_by(|x, y| y.0.cmp(&x.0).then(y.1.cmp(&x.1)));
            for (h_piece, chunk_bytes, h_resident) in candidates {
                // The chunk buffers in the slot's arena after h first: b and c's room,
                // which the lists need little of when their pieces span a chunk.
                let in_slot: &[bool] = if chunk_bytes.is_some() && !o.chunks_outside_slot { &[true, false] } else { &[false] };
                for &table_log in &tables {
                    for &slots in &slot_choices {
                        for &in_slot in in_slot {
                            let choice = Choice { matrices, streamed_matrices, chunk_bytes, h_resident, in_slot, slots, table_log, h_piece };
                            match try_choice(shape, capacity, held, choice, o, keep) {
                                Ok(p) => return Some(p),
                                Err(need) => least_seen = least_seen.min(need),
                            }
                        }
                    }
                }
            }
        }
        None
    };
    for &choice in matrices_choices {
        if let Some(p) = ladder(URGENT_ROOM_BYTES, choice).or_else(|| ladder(0, choice)) {
            return Ok(p);
        }
    }
    let gb = |b: usize| b as f64 / 1e9;
    Err(format!(
        "{:.2} GB available: not enough for a partition of this set even with its {:.2} GB of points streamed, one slot and the least tables (at least {:.2} GB needed)",
        gb(capacity),
        gb(shape.points_bytes()),
        gb(least_seen)
    ))
}

/// The plan of one configuration with its leftover handed to the witness and the
/// lists; Err(the total it needs at least) if it does not fit.
fn try_choice(shape: &SetShape, capacity: usize, held: &Held, c: Choice, o: &Overrides, keep: usize) -> Result<DevicePlan, usize> {
    let log_n = shape.log_n();
    let n = shape.n;
    // The scratch: the H runs', and at least a list chunk's significant values in G1
    // and G2 (a chunk may hold nothing else).
    let scratch = scratch_bound::<G1>(c.h_piece).max(scratch_bound::<G1>(LIST_CHUNK)).max(scratch_bound::<G2>(LIST_CHUNK));
    let least_lists = LEAST_LIST_BYTES;
    // Where a, b, c are computed on the device the witness's other values must be
    // there (a partition with more than its area holds has its a, b, c computed on the
    // host).
    let least_witness = if c.matrices && !o.witness_least { shape.witness_for_products() } else { shape.witness_least() };
    let resident_points = match (c.chunk_bytes, c.h_resident) {
        (None, _) => shape.points_bytes(),
        (Some(_), true) => G1_BYTES * shape.queries[0],
        (Some(_), false) => 0,
    };
    // Streamed matrices hold their dictionary only (a few kB, in the margin).
    let matrices = if c.matrices && !c.streamed_matrices { shape.matrices_bytes.unwrap_or(0) } else { 0 };
    // Every loaded domain keeps its own tables, within the largest plan's budget.
    let (table_budget, tables) = held.tables_with(log_n, c.table_log);
    // The backend's own chunk buffers (kept at the largest a set needs), and those in
    // each slot's arena.
    let own_chunks = match c.chunk_bytes {
        Some(cb) if c.in_slot => {
            if c.streamed_matrices {
                ROW_BLOCK_BYTES.min(cb)
            } else {
                MIN_CHUNK_BYTES
            }
        }
        other => other.unwrap_or(0),
    };
    let chunks = 2 * own_chunks.max(held.chunk_bytes);
    let slot_chunks = if c.in_slot { 2 * c.chunk_bytes.unwrap_or(0) } else { 0 };
    let slots = if held.slots > 0 { c.slots.min(held.slots) } else { c.slots };
    // Allocations are whole 256-byte blocks (a slot's arena is scalars, its witness area
    // words: the sizes the plan gives are the sizes allocated).
    let slot_for = |lists: usize| {
        (3 * SCALAR_BYTES * n).max(SCALAR_BYTES * n + lists + scratch + slot_chunks).max(held.slot_bytes).next_multiple_of(ALLOC_ALIGN)
    };
    let witness_for = |w: usize| w.max(held.witness_bytes).next_multiple_of(ALLOC_ALIGN);
    let g1_piece = max_scalars_within::<G1>(scratch);
    let g2_piece = max_scalars_within::<G2>(scratch);
    // Taken from the device pool by each run and kept there: the largest any loaded
    // set's runs take.
    let small = msm_small_bytes(c.h_piece, g1_piece, g2_piece).max(held.small_bytes);
    let fixed = held.other_sets + resident_points + matrices + tables + chunks + small;
    let margin = MARGIN_BYTES;
    let total_for = |lists: usize, witness: usize| fixed + slots * (slot_for(lists) + witness_for(witness)) + margin;
    let least = total_for(least_lists, least_witness);
    if least + keep > capacity {
        return Err(least);
    }
    // The leftover goes to the witness's other values (a, b, c computed on the device
    // need them all there) and to list pieces (fewer, larger runs), in proportion to
    // what each needs at worst beyond its least; the lists first fill the part of the
    // slot's b and c the scratch leaves, which costs nothing.
    let free_in_slot = (3 * SCALAR_BYTES * n).saturating_sub(SCALAR_BYTES * n + scratch + slot_chunks);
    // A piece's lists address a chunk's bases at most when the points stream: more
    // memory than a chunk's worth of entries (with their window) is never used.
    let lists_most = match c.chunk_bytes {
        Some(cb) => shape.lists_worst().min((cb / G1_BYTES) * (LIST_ENTRY_BYTES + SCALAR_BYTES) + 4096),
        None => shape.lists_worst(),
    }
    .max(least_lists);
    let lists_floor = free_in_slot.min(lists_most).max(least_lists);
    // Less the rounding the leftover's parts may add.
    let reserve = (capacity - least).min(URGENT_RESERVE_BYTES);
    let room = ((capacity - least - reserve) / slots.max(1)).saturating_sub(2 * ALLOC_ALIGN);
    let w_want = shape.witness_worst().saturating_sub(least_witness);
    let l_want = lists_most.saturating_sub(lists_floor);
    let w_extra = if o.witness_least || w_want == 0 { 0 } else { ((room as u128 * w_want as u128 / (w_want + l_want) as u128) as usize).min(w_want) };
    let witness = least_witness + w_extra;
    let lists = {
        let fitted = (lists_floor + (room - w_extra)).min(lists_most);
        o.lists_bytes.map_or(fitted, |b| b.min(fitted)).max(least_lists)
    };
    let slot_bytes = slot_for(lists);
    let total = total_for(lists, witness);
    debug_assert!(total <= capacity);
    Ok(DevicePlan {
        points: match c.chunk_bytes {
            None => Placement::Resident,
            // The MSMs use the backend's buffers as they are when those are theirs.
            Some(chunk_bytes) if !c.in_slot => Placement::Streamed { chunk_bytes: chunk_bytes.max(held.chunk_bytes), h_resident: c.h_resident },
            Some(chunk_bytes) => Placement::Streamed { chunk_bytes, h_resident: c.h_resident },
        },
        chunks_in_slot: c.in_slot,
        products: match (c.matrices, c.streamed_matrices) {
            (false, _) => Products::Host,
            (true, false) => Products::Resident,
            (true, true) => Products::Streamed,
        },
        slots,
        table_log: crate::ntt::table_log_within(log_n, table_budget),
        table_budget,
        slot_bytes,
        witness_bytes: witness_for(witness),
        lists_bytes: lists,
        scratch_bytes: scratch,
        h_piece: c.h_piece,
        g1_piece,
        g2_piece,
        msm_small_bytes: small,
        margin_bytes: margin,
        total_bytes: total,
        capacity,
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
pub(crate) mod tests;
