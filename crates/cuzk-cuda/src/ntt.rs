//! NTTs and the H polynomial on the GPU, bit-identical to `cuzk_groth16::domain`.
//!
//! Per domain size the device keeps the stage-major twiddle tables of ω and ω^{-1}
//! (n − 1 entries each, see ntt.cuh; up to a stage only where the engine's table
//! budget says so, [`GpuNtt::set_table_bytes`]) and small two-level power tables for
//! the coset and scaling steps. Transforms run in place on device vectors, enqueued on the
//! compute stream ([`GpuNtt::h_polynomial_on`] is the prover's); the calls on host
//! data upload into a workspace of the engine's own on the copy stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaView, CudaViewMut, LaunchConfig};
use cuzk_groth16::domain::{coset_shift, powers, Domain};
use ff::{Field, PrimeField};

use crate::device::{Gpu, GpuError};
use crate::field::{as_device, as_device_mut, to_device, DeviceFr};
use cuzk_groth16::sync::lock;

/// Stages done inside contiguous shared-memory blocks (2^10 elements = 32 KiB).
const BLOCK_LOG: u32 = 10;
/// At most this many stages per strided pass (2^9 rows × 2 columns per block).
const PASS_LOG: u32 = 9;
/// Doubles per twiddle-table entry: `fr::twiddle` is five doubles (52-bit limbs) on
/// the FP64 path and one 32-byte element otherwise; fr.cuh asserts at most 40 bytes.
const TWIDDLE_WORDS: usize = 5;

/// BR_TILE_LOG in ntt.cuh: the tiled bit reversal takes log n ≥ 2 × this.
const BIT_REVERSE_TILE_LOG: u32 = 4;

/// NTT_FUSE_* in ntt.cuh.
const FUSE_PRE_MUL: u32 = 1;
const FUSE_SCALE: u32 = 2;
const FUSE_SUB: u32 = 4;

/// Low bits of the two-level power tables.
const TABLE_LO_BITS: u32 = 12;

/// v[i] = c · x^i as lo[i mod 2^b] · hi[i >> b].
struct PowerTable {
    lo: CudaSlice<DeviceFr>,
    hi: CudaSlice<DeviceFr>,
    lo_bits: u32,
}

/// c · x^bitrev(p) at bit-reversed position p = block · 2^k + local (k = the blocked
/// stages), split as col[local] · row[block] for ntt_block's fused scaling (ntt.cuh,
/// NTT_FUSE_SCALE): bitrev(p) = bitrev_k(local) · 2^(log n − k) + bitrev(block).
struct BitReversedPowers {
    /// x^(bitrev_k(local) · 2^(log n − k)), 2^k `fr::twiddle` entries.
    col: CudaSlice<f64>,
    /// c · x^bitrev(block), 2^(log n − k) entries.
    row: CudaSlice<DeviceFr>,
}

/// Bytes of the twiddle tables of ω and ω^{-1} for a domain of 2^log_n up to stage
/// `table_log` (2^table_log − 1 entries each).
pub fn twiddle_table_bytes(table_log: u32) -> usize {
    2 * 8 * TWIDDLE_WORDS * ((1usize << table_log) - 1)
}

/// The last stage (exclusive) a domain of 2^log_n keeps twiddles of in tables within
/// `budget` bytes: every stage where they fit, else as many as fit, but at least the
/// blocked stages (ntt_block reads only the table).
pub fn table_log_within(log_n: u32, budget: usize) -> u32 {
    let least = log_n.min(BLOCK_LOG);
    (least..=log_n).rev().find(|&t| twiddle_table_bytes(t) <= budget).unwrap_or(least)
}

/// Device bytes of a domain's tables besides the twiddle tables: the five two-level
/// power tables and the two bit-reversed ones (15 MB at 2^27).
pub fn small_table_bytes(log_n: u32) -> usize {
    let fr = std::mem::size_of::<DeviceFr>();
    let power = |bits: u32| {
        let lo = bits.min(TABLE_LO_BITS);
        ((1usize << lo) + (1usize << (bits - lo)).max(1)) * fr
    };
    let k = log_n.min(BLOCK_LOG);
    let bit_reversed = (1usize << k) * 8 * TWIDDLE_WORDS + (1usize << (log_n - k)) * fr;
    3 * power(log_n) + 2 * power(log_n.saturating_sub(1)) + 2 * bit_reversed
}

/// Device bytes of a domain's tables with twiddles up to stage `table_log`.
pub fn domain_bytes(log_n: u32, table_log: u32) -> usize {
    twiddle_table_bytes(table_log) + small_table_bytes(log_n)
}

/// Device tables for one domain size.
struct DeviceDomain {
    log_n: u32,
    /// Stages below this read `tw_fwd` / `tw_inv`; the others compute their twiddles
    /// from `pow_fwd` / `pow_inv`.
    table_log: u32,
    /// `fr::twiddle` entries of TWIDDLE_WORDS doubles each (ntt.cuh), 2^table_log − 1.
    tw_fwd: CudaSlice<f64>,
    tw_inv: CudaSlice<f64>,
    /// ω^x and ω^{-x} for x < n/2.
    pow_fwd: PowerTable,
    pow_inv: PowerTable,
    /// 1/n (inverse NTT scaling).
    inv_n: PowerTable,
    /// g^i (onto the coset).
    coset: PowerTable,
    /// g^{-i} / n (inverse NTT off the coset).
    inv_n_uncoset: PowerTable,
    /// g^i / n at bit-reversed positions: DIF inverse transform → coset coefficients.
    to_coset: BitReversedPowers,
    /// g^{-i} / (n · Z(g)) at bit-reversed positions: the H polynomial's last scaling.
    from_coset: BitReversedPowers,
    /// 1 / (n · Z(g)), Z(g) = g^n − 1.
    z_inv_n: DeviceFr,
}

/// Pointwise steps fused into one transform's passes (ntt.cuh, NTT_FUSE_*).
#[derive(Default)]
struct Fusion<'a> {
    /// Multiply the input elementwise by this vector first.
    pre_mul: Option<&'a CudaView<'a, DeviceFr>>,
    /// Multiply the (bit-reversed) output by these powers (DIF only).
    scale: Option<&'a BitReversedPowers>,
    /// Then subtract this vector times this constant (DIF only).
    sub: Option<(&'a CudaView<'a, DeviceFr>, DeviceFr)>,
}

/// The low `bits` bits of i in reverse order.
fn bit_reverse_index(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

/// Which transform [`GpuNtt::transform_host`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NttKind {
    Forward,
    Inverse,
    CosetForward,
    CosetInverse,
}

/// Device time of one H-polynomial call, from CUDA events. The upload of b and c
/// overlaps the computation, which may wait for them: the parts add up to more than
/// the call.
#[derive(Clone, Copy, Debug, Default)]
pub struct HPolyTimings {
    pub upload_ms: f32,
    pub compute_ms: f32,
    pub download_ms: f32,
}
/// NTT engine of one GPU.
pub struct GpuNtt {
    gpu: Arc<Gpu>,
    domains: Mutex<HashMap<u32, Arc<DeviceDomain>>>,
    /// Device bytes a domain's twiddle tables may take (usize::MAX: every stage's).
    table_bytes: AtomicUsize,
    /// Device vectors for the calls on host data ([`GpuNtt::h_polynomial`],
    /// [`GpuNtt::transform_host`]), grown on demand and held for a whole call: such
    /// calls on one engine run one at a time. The prover stages its own (crate::groth16).
    workspace: Mutex<Vec<CudaSlice<DeviceFr>>>,
}

fn grid_1d(n: u64) -> LaunchConfig {
    let blocks = n.div_ceil(256).clamp(1, 132 * 16) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }
}

impl GpuNtt {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        GpuNtt { gpu, domains: Mutex::new(HashMap::new()), table_bytes: AtomicUsize::new(usize::MAX), workspace: Mutex::new(Vec::new()) }
    }

    /// Keeps a domain's twiddle tables within `bytes` from now on (the stages past what
    /// fits compute theirs: [`table_log_within`]); tables kept with more stages than
    /// that are dropped (freed once the transforms using them are done).
    pub fn set_table_bytes(&self, bytes: usize) -> Result<(), GpuError> {
        self.table_bytes.store(bytes, Ordering::SeqCst);
        let mut cache = lock(&self.domains);
        cache.retain(|&log_n, d| d.table_log <= table_log_within(log_n, bytes));
        Ok(())
    }

    /// Device bytes of the tables kept now.
    pub fn bytes_held(&self) -> usize {
        lock(&self.domains).values().map(|d| domain_bytes(d.log_n, d.table_log)).sum()
    }

    /// Drops every table kept (freed once the transforms using them are done).
    pub fn release(&self) -> Result<(), GpuError> {
        lock(&self.domains).clear();
        Ok(())
    }

    /// The stage a domain of 2^log_n keeps twiddle tables up to here.
    pub fn table_log(&self, log_n: u32) -> u32 {
        table_log_within(log_n, self.table_bytes.load(Ordering::SeqCst))
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    fn power_table(&self, c: Scalar, x: Scalar, log_n: u32) -> Result<PowerTable, GpuError> {
        let lo_bits = log_n.min(TABLE_LO_BITS);
        let lo = powers(x, c, 1 << lo_bits);
        let step = x.pow_vartime([1u64 << lo_bits]);
        let hi = powers(step, Scalar::ONE, (1usize << (log_n - lo_bits)).max(1));
        let s = &self.gpu.stream;
        Ok(PowerTable { lo: s.clone_htod(as_device(&lo))?, hi: s.clone_htod(as_device(&hi))?, lo_bits })
    }

    fn bit_reversed_powers(&self, c: Scalar, x: Scalar, log_n: u32) -> Result<BitReversedPowers, GpuError> {
        let k = log_n.min(BLOCK_LOG);
        let row_bits = log_n - k;
        let row_powers = powers(x, c, 1 << row_bits);
        let row: Vec<Scalar> = (0..1usize << row_bits).map(|b| row_powers[bit_reverse_index(b, row_bits)]).collect();
        let col_powers = powers(x.pow_vartime([1u64 << row_bits]), Scalar::ONE, 1 << k);
        let col: Vec<Scalar> = (0..1usize << k).map(|l| col_powers[bit_reverse_index(l, k)]).collect();
        let s = &self.gpu.stream;
        let col_elems = s.clone_htod(as_device(&col))?;
        // SAFETY: fully written by to_twiddles below before any read.
        let mut col_tw = unsafe { s.alloc::<f64>(col.len() * TWIDDLE_WORDS)? };
        let len = col.len() as u64;
        // SAFETY: both buffers hold len entries.
        unsafe { self.gpu.k.to_twiddles(s, grid_1d(len), &mut col_tw, &col_elems, len)? };
        Ok(BitReversedPowers { col: col_tw, row: s.clone_htod(as_device(&row))? })
    }

    /// The stage-major twiddle table of w (ntt.cuh) of the stages below `table_log`
    /// (2^table_log − 1 entries; one unused entry for 0), filled on the device from the
    /// two-level table of w's powers, which is returned with it.
    fn twiddles(&self, w: Scalar, log_n: u32, table_log: u32) -> Result<(CudaSlice<f64>, PowerTable), GpuError> {
        let len = (1u64 << table_log) - 1;
        let t = self.power_table(Scalar::ONE, w, log_n.saturating_sub(1))?;
        let s = &self.gpu.stream;
        if len == 0 {
            return Ok((s.alloc_zeros::<f64>(TWIDDLE_WORDS)?, t));
        }
        // SAFETY: fully written by fill_stage_twiddles below before any read (each
        // entry is one fr::twiddle of at most TWIDDLE_WORDS doubles).
        let mut out = unsafe { s.alloc::<f64>(len as usize * TWIDDLE_WORDS)? };
        // SAFETY: the grid-stride loop stays within 2^table_log − 1 = len, table_log ≤
        // log_n.
        unsafe { self.gpu.k.fill_stage_twiddles(s, grid_1d(len), &mut out, &t.lo, &t.hi, t.lo_bits, log_n, table_log)? };
        Ok((out, t))
    }

    fn domain(&self, log_n: u32) -> Result<Arc<DeviceDomain>, GpuError> {
        let mut cache = lock(&self.domains);
        let table_log = self.table_log(log_n);
        if let Some(d) = cache.get(&log_n) {
            return Ok(d.clone());
        }
        let host = Domain::new(log_n).map_err(|e| GpuError::Invalid(e.to_string()))?;
        let omega = host.generator();
        // ω, n, g and Z(g) are non-zero (see cuzk_groth16::domain), so these invert.
        let omega_inv = omega.invert().unwrap();
        let n_inv = Scalar::from(1u64 << log_n).invert().unwrap();
        let g = coset_shift();
        let g_inv = g.invert().unwrap();
        let z_inv_n = host.vanishing_at(g).invert().unwrap() * n_inv;
        let ((tw_fwd, pow_fwd), (tw_inv, pow_inv)) = (self.twiddles(omega, log_n, table_log)?, self.twiddles(omega_inv, log_n, table_log)?);
        let d = Arc::new(DeviceDomain {
            log_n,
            table_log,
            tw_fwd,
            tw_inv,
            pow_fwd,
            pow_inv,
            inv_n: self.power_table(n_inv, Scalar::ONE, log_n)?,
            coset: self.power_table(Scalar::ONE, g, log_n)?,
            inv_n_uncoset: self.power_table(n_inv, g_inv, log_n)?,
            to_coset: self.bit_reversed_powers(n_inv, g, log_n)?,
            from_coset: self.bit_reversed_powers(z_inv_n, g_inv, log_n)?,
            z_inv_n: to_device(&z_inv_n),
        });
        cache.insert(log_n, d.clone());
        Ok(d)
    }

    /// The (s0, m) stage groups of the strided passes above the blocked stages,
    /// balanced so no pass is left with a stage or two alone.
    fn strided_passes(log_n: u32) -> Vec<(u32, u32)> {
        let block_log = log_n.min(BLOCK_LOG);
        let rest = log_n - block_log;
        let count = rest.div_ceil(PASS_LOG);
        let mut out = Vec::with_capacity(count as usize);
        let mut s0 = block_log;
        for i in 0..count {
            let m = (rest - (s0 - block_log)).div_ceil(count - i);
            out.push((s0, m));
            s0 += m;
        }
        out
    }

    /// All stages of a transform: DIT (stages ascending: bit-reversed in, natural
    /// out) or DIF (descending: natural in, bit-reversed out), with `fusion`'s
    /// pointwise steps. No bit reversal here.
    fn stages(&self, d: &DeviceDomain, v: &mut CudaViewMut<'_, DeviceFr>, inverse: bool, dif: bool, fusion: Fusion<'_>) -> Result<(), GpuError> {
        if (fusion.scale.is_some() || fusion.sub.is_some()) && !dif {
            return Err(GpuError::Invalid("output scaling is fused into DIF transforms only".into()));
        }
        let (s, k) = (&self.gpu.stream, &self.gpu.k);
        let log_n = d.log_n;
        let n = 1u64 << log_n;
        let (tw, pow) = if inverse { (&d.tw_inv, &d.pow_inv) } else { (&d.tw_fwd, &d.pow_fwd) };
        let dif_flag = dif as u32;
        let block_log = log_n.min(BLOCK_LOG);
        let passes = Self::strided_passes(log_n);
        // The input multiplication goes into whichever pass runs first.
        let pre_mul_in_block = !dif || passes.is_empty();
        // Unused pointer arguments get a valid table the kernel never reads.
        let unused = d.to_coset.row.as_view();
        let pre_mul = fusion.pre_mul.unwrap_or(&unused);
        let flag = |on: bool, bit: u32| if on { bit } else { 0 };
        let block_fuse = flag(fusion.pre_mul.is_some() && pre_mul_in_block, FUSE_PRE_MUL)
            | flag(fusion.scale.is_some(), FUSE_SCALE)
            | flag(fusion.sub.is_some(), FUSE_SUB);
        let strided_pre_mul = flag(fusion.pre_mul.is_some(), FUSE_PRE_MUL);
        let scale = fusion.scale.unwrap_or(&d.to_coset);
        let (sub, sub_factor) = fusion.sub.unwrap_or((&unused, d.z_inv_n));
        let block = |v: &mut CudaViewMut<'_, DeviceFr>| -> Result<(), GpuError> {
            // Runs for log n = 0 too (no stages), so fused steps still happen.
            let cfg = LaunchConfig {
                grid_dim: ((n >> block_log) as u32, 1, 1),
                block_dim: (1 << block_log.saturating_sub(2), 1, 1),
                shared_mem_bytes: 32u32 << block_log,
            };
            // SAFETY: one block per 2^k elements, shared memory for 2^k elements; its stages
            // are below k ≤ table_log (table_log_within), so twiddle indices <
            // 2^table_log − 1; pre_mul and sub hold n elements when their flags are set, the
            // scale tables 2^k and n/2^k.
            unsafe { k.ntt_block(s, cfg, &mut *v, tw, log_n, block_log, dif_flag, block_fuse, pre_mul, &scale.col, &scale.row, sub, sub_factor)? };
            Ok(())
        };
        let strided = |v: &mut CudaViewMut<'_, DeviceFr>, s0: u32, m: u32, fuse: u32| -> Result<(), GpuError> {
            // 2^m rows × L columns, 2^(m-2)·L threads (one per four elements) = 256;
            // a lone stage (m = 1) takes two elements per thread, with 512 elements.
            let cols = BLOCK_LOG - m.max(2);
            let cfg = LaunchConfig {
                grid_dim: ((n >> (m + cols)) as u32, 1, 1),
                block_dim: ((1u32 << m.saturating_sub(2)) << cols, 1, 1),
                shared_mem_bytes: 32u32 << (m + cols),
            };
            // SAFETY: s0 ≥ BLOCK_LOG ≥ cols, so column groups tile 2^s0; blocks cover n
            // exactly; pre_mul holds n elements when its flag is set; the table holds the
            // stages below table_log, the power tables ω's (or ω^{-1}'s) powers below
            // 2^(log n − 1), the exponents the others take.
            unsafe { k.ntt_strided(s, cfg, &mut *v, tw, log_n, s0, m, cols, dif_flag, fuse, pre_mul, &pow.lo, &pow.hi, pow.lo_bits, d.table_log)? };
            Ok(())
        };
        if dif {
            for (i, &(s0, m)) in passes.iter().rev().enumerate() {
                strided(v, s0, m, if i == 0 { strided_pre_mul } else { 0 })?;
            }
            block(v)?;
        } else {
            block(v)?;
            for &(s0, m) in &passes {
                strided(v, s0, m, 0)?;
            }
        }
        Ok(())
    }

    fn bit_reverse(&self, v: &mut CudaViewMut<'_, DeviceFr>, log_n: u32) -> Result<(), GpuError> {
        if log_n >= 2 * BIT_REVERSE_TILE_LOG {
            let cfg = LaunchConfig { grid_dim: (1u32 << (log_n - 2 * BIT_REVERSE_TILE_LOG), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: one block per middle index, every index formed stays below n =
            // 2^log_n = v.len().
            unsafe { self.gpu.k.bit_reverse_tiled(&self.gpu.stream, cfg, &mut *v, log_n)? };
        } else {
            // SAFETY: indices stay below n = v.len().
            unsafe { self.gpu.k.bit_reverse(&self.gpu.stream, grid_1d(1u64 << log_n), &mut *v, log_n)? };
        }
        Ok(())
    }

    /// Natural order in and out: bit reversal, then the DIT stages.
    fn passes(&self, d: &DeviceDomain, v: &mut CudaViewMut<'_, DeviceFr>, inverse: bool) -> Result<(), GpuError> {
        self.bit_reverse(v, d.log_n)?;
        self.stages(d, v, inverse, false, Fusion::default())
    }

    /// v[i] *= t(i).
    fn scale(&self, v: &mut CudaViewMut<'_, DeviceFr>, t: &PowerTable) -> Result<(), GpuError> {
        let n = v.len() as u64;
        // SAFETY: the tables cover indices < n.
        unsafe { self.gpu.k.scale_by_powers(&self.gpu.stream, grid_1d(n), &mut *v, &t.lo, &t.hi, t.lo_bits, n)? };
        Ok(())
    }

    fn log_len(v: &CudaViewMut<'_, DeviceFr>) -> Result<u32, GpuError> {
        let n = v.len();
        if !n.is_power_of_two() || n.trailing_zeros() > Scalar::S {
            return Err(GpuError::Invalid(format!("NTT length {n} is not a power of two ≤ 2^32")));
        }
        Ok(n.trailing_zeros())
    }

    /// Forward NTT in place (device data, enqueued on the compute stream).
    pub fn fft(&self, v: &mut CudaViewMut<'_, DeviceFr>) -> Result<(), GpuError> {
        let d = self.domain(Self::log_len(v)?)?;
        self.passes(&d, v, false)
    }

    /// Inverse NTT in place.
    pub fn ifft(&self, v: &mut CudaViewMut<'_, DeviceFr>) -> Result<(), GpuError> {
        let d = self.domain(Self::log_len(v)?)?;
        self.passes(&d, v, true)?;
        self.scale(v, &d.inv_n)
    }

    /// Evaluations on the coset g·D from coefficients.
    pub fn coset_fft(&self, v: &mut CudaViewMut<'_, DeviceFr>) -> Result<(), GpuError> {
        let d = self.domain(Self::log_len(v)?)?;
        self.scale(v, &d.coset)?;
        self.passes(&d, v, false)
    }

    /// Coefficients from evaluations on the coset g·D.
    pub fn icoset_fft(&self, v: &mut CudaViewMut<'_, DeviceFr>) -> Result<(), GpuError> {
        let d = self.domain(Self::log_len(v)?)?;
        self.passes(&d, v, true)?;
        self.scale(v, &d.inv_n_uncoset)
    }

    /// Enqueues h = (a·b − c)/Z on the compute stream over device vectors of equal
    /// power-of-two length, starting on each vector once its event in `ready` has
    /// fired (its upload): h replaces `a` (natural order), `b` and `c` are scratch. No
    /// host wait. Returns events on the compute stream before the first transform and
    /// after the last pass.
    ///
    /// Six NTTs where the textbook takes seven: c's coset evaluations are not needed.
    /// With A, B, C the interpolants of a, b, c on D and Q the interpolant of A·B on
    /// the coset gD, h = (Q − C)/Z(g) (Z is the constant Z(g) on gD, and interpolation
    /// on gD is linear and returns C itself, whose degree is below n). So a and b go
    /// to gD (inverse transform, scale by g^i/n, forward transform); c only to
    /// coefficients (inverse transform, kept at n·C in bit-reversed order); Q·n comes
    /// from the inverse transform of a·b, and the last pass forms
    /// (n·Q_i·g^{-i} − n·C_i) / (n·Z(g)) at bit-reversed positions. Every pointwise
    /// step is fused into a transform's first or last pass.
    pub fn h_polynomial_on(
        &self,
        [a, b, c]: [&mut CudaViewMut<'_, DeviceFr>; 3],
        ready: [&CudaEvent; 3],
    ) -> Result<(CudaEvent, CudaEvent), GpuError> {
        let log_n = Self::log_len(a)?;
        if b.len() != a.len() || c.len() != a.len() {
            return Err(GpuError::Invalid("a, b and c must have the same length".into()));
        }
        let d = self.domain(log_n)?;
        let s = &self.gpu.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        s.wait(ready[0])?;
        let start = s.record_event(timing)?;
        for ((v, ready), is_c) in [&mut *a, &mut *b, &mut *c].into_iter().zip(ready).zip([false, false, true]) {
            s.wait(ready)?;
            self.h_input(&d, v, is_c)?;
        }
        self.h_from_coset_evaluations(&d, a, b, c)?;
        Ok((start, s.record_event(timing)?))
    }

    /// One input vector of the H polynomial, given as evaluations on D: a and b
    /// (`c == false`) to evaluations on gD in natural order (inverse DIF with the
    /// scaling by g^i/n fused, then forward DIT); c to n·C in bit-reversed order.
    fn h_input(&self, d: &DeviceDomain, v: &mut CudaViewMut<'_, DeviceFr>, is_c: bool) -> Result<(), GpuError> {
        if is_c {
            return self.stages(d, v, true, true, Fusion::default());
        }
        self.stages(d, v, true, true, Fusion { scale: Some(&d.to_coset), ..Fusion::default() })?;
        self.stages(d, v, false, false, Fusion::default())
    }

    /// h into `a` in natural order, from a and b on gD and c as n·C (bit-reversed).
    fn h_from_coset_evaluations<'v>(
        &self,
        d: &DeviceDomain,
        a: &mut CudaViewMut<'v, DeviceFr>,
        b: &mut CudaViewMut<'v, DeviceFr>,
        c: &mut CudaViewMut<'v, DeviceFr>,
    ) -> Result<(), GpuError> {
        let (b, c) = (b.as_view(), c.as_view());
        let fusion = Fusion { pre_mul: Some(&b), scale: Some(&d.from_coset), sub: Some((&c, d.z_inv_n)) };
        self.stages(d, a, true, true, fusion)?;
        self.bit_reverse(a, d.log_n)
    }

    /// The workspace with three vectors of at least n elements each (larger ones
    /// replace smaller: contents are whatever the last call left).
    fn workspace(&self, n: usize) -> Result<std::sync::MutexGuard<'_, Vec<CudaSlice<DeviceFr>>>, GpuError> {
        let mut ws = lock(&self.workspace);
        if ws.len() < 3 || ws[0].len() < n {
            ws.clear();
            for _ in 0..3 {
                // SAFETY: every call writes the part of a vector it reads first (upload,
                // zero padding or poisoning).
                ws.push(unsafe { self.gpu.stream.alloc::<DeviceFr>(n.max(1))? });
            }
        }
        Ok(ws)
    }

    /// The H polynomial from host vectors: uploads a, b, c (zero-padded to the
    /// domain) on the copy stream; the compute stream starts on each vector as soon as
    /// its upload event fires, so b and c upload while a is transformed; the n
    /// coefficients are downloaded into `out`. Pinned host memory makes the transfers
    /// several times faster; any host memory works.
    pub fn h_polynomial(&self, a: &[Scalar], b: &[Scalar], c: &[Scalar], out: &mut [Scalar]) -> Result<HPolyTimings, GpuError> {
        let n = a.len().max(b.len()).max(c.len()).max(1).next_power_of_two();
        if out.len() < n {
            return Err(GpuError::Invalid(format!("output holds {} elements, the domain needs {n}", out.len())));
        }
        let r = (|| -> Result<HPolyTimings, GpuError> {
            let mut ws = self.workspace(n)?;
            let (cp, s) = (&self.gpu.copy, &self.gpu.stream);
            let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
            // The copy stream orders after the compute stream's last use of the workspace.
            cp.wait(&s.record_event(None)?)?;
            let upload_start = cp.record_event(timing)?;
            let mut uploaded = Vec::with_capacity(3);
            for (v, src) in ws.iter_mut().zip([a, b, c]) {
                cp.memcpy_htod(as_device(src), &mut v.slice_mut(..src.len()))?;
                if src.len() < n {
                    cp.memset_zeros(&mut v.slice_mut(src.len()..n))?;
                }
                uploaded.push(cp.record_event(timing)?);
            }
            let [wa, wb, wc] = &mut ws[..] else { return Err(GpuError::Invalid("the NTT workspace lacks its three vectors".into())) };
            let (mut va, mut vb, mut vc) = (wa.slice_mut(..n), wb.slice_mut(..n), wc.slice_mut(..n));
            let (start, computed) = self.h_polynomial_on([&mut va, &mut vb, &mut vc], [&uploaded[0], &uploaded[1], &uploaded[2]])?;
            // SAFETY: the H-polynomial kernels write reduced field elements.
            s.memcpy_dtoh(&va, unsafe { as_device_mut(&mut out[..n]) })?;
            let downloaded = s.record_event(timing)?;
            s.synchronize()?;
            Ok(HPolyTimings {
                upload_ms: upload_start.elapsed_ms(&uploaded[2])?,
                compute_ms: start.elapsed_ms(&computed)?,
                download_ms: computed.elapsed_ms(&downloaded)?,
            })
        })();
        self.settle(r)
    }

    /// On an error, waits for both streams so no transfer still touches the caller's
    /// host memory when the borrow ends.
    fn settle<T>(&self, r: Result<T, GpuError>) -> Result<T, GpuError> {
        if r.is_err() {
            let copy = self.gpu.copy.synchronize();
            let compute = self.gpu.stream.synchronize();
            if let Err(e) = copy.and(compute) {
                tracing::error!(error = %e, "synchronizing after a failed GPU call");
            }
        }
        r
    }

    /// Runs one transform on host data (upload, transform, download; one host sync)
    /// in the workspace.
    pub fn transform_host(&self, kind: NttKind, v: &mut [Scalar]) -> Result<(), GpuError> {
        let r = (|| -> Result<(), GpuError> {
            let n = v.len();
            let mut ws = self.workspace(n)?;
            let s = &self.gpu.stream;
            let mut view = ws[0].slice_mut(..n);
            s.memcpy_htod(as_device(v), &mut view)?;
            match kind {
                NttKind::Forward => self.fft(&mut view)?,
                NttKind::Inverse => self.ifft(&mut view)?,
                NttKind::CosetForward => self.coset_fft(&mut view)?,
                NttKind::CosetInverse => self.icoset_fft(&mut view)?,
            }
            // SAFETY: the NTT kernels write reduced field elements.
            s.memcpy_dtoh(&view, unsafe { as_device_mut(v) })?;
            s.synchronize()?;
            Ok(())
        })();
        self.settle(r)
    }

    /// Fills the workspace (at least n elements per vector) with bytes 0xff (not a
    /// reduced field element), so tests can catch elements a later call fails to write.
    pub fn poison_workspace(&self, n: usize) -> Result<(), GpuError> {
        let mut ws = self.workspace(n)?;
        for w in ws.iter_mut() {
            let garbage = vec![DeviceFr([u32::MAX; 8]); w.len()];
            self.gpu.stream.memcpy_htod(&garbage, w)?;
        }
        self.gpu.stream.synchronize()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_passes_cover_every_stage_once() {
        for log_n in 0..=32u32 {
            let passes = GpuNtt::strided_passes(log_n);
            let mut next = log_n.min(BLOCK_LOG);
            for &(s0, m) in &passes {
                assert_eq!(s0, next, "2^{log_n}: passes must be contiguous");
                assert!((1..=PASS_LOG).contains(&m), "2^{log_n}: pass of {m} stages");
                next += m;
            }
            assert_eq!(next, log_n);
        }
        assert_eq!(GpuNtt::strided_passes(27), vec![(10, 9), (19, 8)]);
    }

    #[test]
    fn twiddle_tables_shrink_to_their_budget_but_keep_the_blocked_stages() {
        // Whole at 2^27: 10.74 GB for both directions.
        assert_eq!(twiddle_table_bytes(27), 80 * ((1 << 27) - 1));
        assert_eq!(table_log_within(27, usize::MAX), 27);
        assert_eq!(table_log_within(27, twiddle_table_bytes(27)), 27);
        assert_eq!(table_log_within(27, twiddle_table_bytes(27) - 1), 26);
        assert_eq!(table_log_within(27, 1 << 30), 23);
        // Never below the blocked stages, nor above the domain.
        assert_eq!(table_log_within(27, 0), BLOCK_LOG);
        assert_eq!(table_log_within(5, 0), 5);
        // The small tables are a few MB at 2^27.
        let small = small_table_bytes(27);
        assert!((10_000_000..20_000_000).contains(&small), "{small}");
        assert_eq!(domain_bytes(27, 20), twiddle_table_bytes(20) + small);
    }
}
