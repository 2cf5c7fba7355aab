//! The input lists of a split MSM (L, A and B of a proof): over the aux values a
//! density selects, zeros dropped, the bases of the ones listed, the significant
//! scalars kept with their base indices. The k-th selected value belongs to base
//! `first_base + k`.
//!
//! The prover builds them on the device ([`build_on_device`], kernels/msm/split.cuh)
//! from the aux vector and the bitmaps synthesis made: the host only counts bits per
//! chunk (cheap popcounts, no pass over the 4 GB of aux values), so a preparation
//! costs the host little and the lists never cross PCIe. [`split_lists`] builds the
//! same lists on the host: the reference the device's are tested against, and the
//! input of the MSM benchmarks.

use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, PushKernelArg};
use cuzk_groth16::synthesis::{Density, ScalarClasses};
use ff::Field;
use rayon::prelude::*;

use super::group::{BasesAt, MsmGroup};
use super::pippenger::{blocks, GpuMsm, PhaseEvents};
use crate::device::{Gpu, GpuError};
use crate::field::{as_device, DeviceFr};

/// A split MSM's lists on the device ([`GpuMsm::upload_split`], or built there by
/// [`crate::split::build_on_device`]).
pub struct DeviceSplit {
    pub(crate) sig_scalars: Option<CudaSlice<DeviceFr>>,
    pub(crate) sig_index: Option<CudaSlice<u32>>,
    pub(crate) ones: Option<CudaSlice<u32>>,
    /// Bytes sent to the device.
    pub bytes: u64,
    /// Ascending (base index, position in `ones`, position in the significant lists):
    /// every list entry at or after a checkpoint's positions and before the next
    /// checkpoint's has a base index in between. Empty when unknown (lists uploaded
    /// from the host); streamed bases need them (crate::streamed).
    pub(crate) checkpoints: Vec<[u32; 3]>,
}

impl DeviceSplit {
    /// Lists the caller has checked: indices below the bases' count, as many indices
    /// as significant scalars, fewer than 2^31 of each.
    pub(crate) fn new(sig_scalars: Option<CudaSlice<DeviceFr>>, sig_index: Option<CudaSlice<u32>>, ones: Option<CudaSlice<u32>>, bytes: u64) -> Self {
        DeviceSplit { sig_scalars, sig_index, ones, bytes, checkpoints: Vec::new() }
    }

    /// The lists with their checkpoints (see the field).
    pub(crate) fn with_checkpoints(self, checkpoints: Vec<[u32; 3]>) -> Self {
        DeviceSplit { checkpoints, ..self }
    }

    /// The lists, read back (waits for the stream that wrote them): for tests.
    pub fn to_host(&self) -> Result<SplitLists, GpuError> {
        let down = |v: &Option<CudaSlice<u32>>| -> Result<Vec<u32>, GpuError> {
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
    pub ones: usize,
    pub significant: usize,
    /// first_base + the number selected: one past the last base index in the lists.
    pub end: usize,
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
    // [selected, ones, significant] per chunk.
    let counts: Vec<[usize; 3]> = (0..n.div_ceil(LIST_CHUNK))
        .into_par_iter()
        .map(|ci| {
            let mut c = [0usize; 3];
            for w in ci * LIST_CHUNK / 64..(((ci + 1) * LIST_CHUNK).min(n)).div_ceil(64) {
                let sel = selected_word(density, w, n);
                c[0] += sel.count_ones() as usize;
                c[1] += (sel & one[w]).count_ones() as usize;
                c[2] += (sel & !one[w] & !zero[w]).count_ones() as usize;
            }
            c
        })
        .collect();
    let mut run = [first_base, 0, 0];
    let chunks = counts
        .iter()
        .map(|c| {
            // Below first_base + n < 2^32 (checked above).
            let start = run.map(|v| v as u32);
            for j in 0..3 {
                run[j] += c[j];
            }
            start
        })
        .collect();
    Ok(SplitPlan { chunks, ones: run[1], significant: run[2], end: run[0] })
}

impl SplitPlan {
    /// Each chunk's start, then the lists' end: (base index, position in the ones,
    /// position in the significant lists), ascending. The entries between two
    /// checkpoints address the bases between them: what streamed bases are cut by.
    pub fn checkpoints(&self) -> Vec<[u32; 3]> {
        // Each value is at most first_base + n < 2^32 (checked by split_plan).
        let end = [self.end as u32, self.ones as u32, self.significant as u32];
        self.chunks.iter().copied().chain(std::iter::once(end)).collect()
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

/// A partition's aux values and their 0 / 1 classes on the device: what its split
/// lists are built from.
pub struct DeviceAux {
    /// The aux values from index `first` on (a device witness keeps its inputs before
    /// them: [`crate::groth16::products::DeviceWitness`]).
    values: CudaSlice<DeviceFr>,
    first: usize,
    one: CudaSlice<u64>,
    zero: CudaSlice<u64>,
    /// Bytes sent to the device for it.
    pub bytes: u64,
}

impl DeviceAux {
    /// Uploads on `stream`. From pageable memory the driver copies before returning, so
    /// call this before queueing anything long on the stream (a pageable copy waits for
    /// the stream's earlier work).
    pub fn upload(stream: &Arc<CudaStream>, aux: &[Scalar], classes: &ScalarClasses) -> Result<Self, GpuError> {
        let words = aux.len().div_ceil(64);
        let (one, zero) = (classes.one.words(), classes.zero.words());
        if aux.is_empty() || one.len() < words || zero.len() < words {
            return Err(GpuError::Invalid(format!("{} aux values with class bitmaps of {} and {} words", aux.len(), one.len(), zero.len())));
        }
        let bytes = (aux.len() * 32 + 2 * words * 8) as u64;
        Ok(DeviceAux {
            values: stream.clone_htod(as_device(aux))?,
            first: 0,
            one: stream.clone_htod(&one[..words])?,
            zero: stream.clone_htod(&zero[..words])?,
            bytes,
        })
    }

    /// Values already on the device: the aux values are `values[first..]`, classed by
    /// the bitmaps `one` and `zero` (⌈aux/64⌉ words each). Nothing is sent.
    pub fn on_device(values: CudaSlice<DeviceFr>, first: usize, one: CudaSlice<u64>, zero: CudaSlice<u64>) -> Result<Self, GpuError> {
        let n = values.len().saturating_sub(first);
        if first > values.len() || one.len() < n.div_ceil(64) || zero.len() < n.div_ceil(64) {
            return Err(GpuError::Invalid(format!("{n} aux values with class bitmaps of {} and {} words", one.len(), zero.len())));
        }
        Ok(DeviceAux { values, first, one, zero, bytes: 0 })
    }

    pub fn len(&self) -> usize {
        self.values.len() - self.first
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every value: the aux values from [`DeviceAux::first`] on.
    pub fn values(&self) -> &CudaSlice<DeviceFr> {
        &self.values
    }

    /// The index of the first aux value in [`DeviceAux::values`].
    pub fn first(&self) -> usize {
        self.first
    }

    /// The aux values only.
    pub fn aux(&self) -> CudaView<'_, DeviceFr> {
        self.values.slice(self.first..)
    }
}

/// Uploads a density's words (the first ⌈n/64⌉) on `stream`.
pub fn upload_density(stream: &Arc<CudaStream>, density: &Density, n: usize) -> Result<CudaSlice<u64>, GpuError> {
    let words = n.div_ceil(64);
    let w = density.words().get(..words).ok_or_else(|| GpuError::Invalid(format!("a density of {} words, {words} needed", density.words().len())))?;
    Ok(stream.clone_htod(w)?)
}

/// Builds a split MSM's lists on `stream` from `aux` (`density` the words uploaded by
/// [`upload_density`] for `plan`'s density, None for every value) for `bases` bases: no
/// host wait. The compute stream waits for them when it first reads them.
pub fn build_on_device(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    bases: usize,
    aux: &DeviceAux,
    density: Option<&CudaSlice<u64>>,
    plan: &SplitPlan,
) -> Result<DeviceSplit, GpuError> {
    let n = aux.len();
    if plan.chunks.len() != n.div_ceil(LIST_CHUNK) {
        return Err(GpuError::Invalid(format!("a plan of {} chunks for {n} aux values", plan.chunks.len())));
    }
    if plan.end > bases {
        return Err(GpuError::Invalid(format!("the lists reach base {} of {bases}", plan.end)));
    }
    let chunks: Vec<u32> = plan.chunks.iter().flatten().copied().collect();
    let d_chunks = stream.clone_htod(&chunks)?;
    // SAFETY: the kernel writes every entry below the plan's totals, which are the
    // buffers' lengths; nothing reads them before it.
    let mut ones = unsafe { stream.alloc::<u32>(plan.ones.max(1))? };
    // SAFETY: as for `ones`.
    let mut sig_index = unsafe { stream.alloc::<u32>(plan.significant.max(1))? };
    // SAFETY: as for `ones`.
    let mut sig_scalars = unsafe { stream.alloc::<DeviceFr>(plan.significant.max(1))? };
    let n64 = n as u64;
    let null: u64 = 0;
    let values = aux.aux();
    let mut b = stream.launch_builder(&gpu.k.msm_split_lists);
    b.arg(&values).arg(&n64).arg(&aux.one).arg(&aux.zero);
    match density {
        Some(d) => b.arg(d),
        None => b.arg(&null),
    };
    b.arg(&d_chunks).arg(&mut ones).arg(&mut sig_index).arg(&mut sig_scalars);
    // SAFETY: matches `msm_split_lists(const fr*, u64, const u64*, const u64*, const
    // u64* (nullable), const u32*, u32*, u32*, fr*)`; one block of 256 threads per
    // chunk; the bitmaps hold ⌈n/64⌉ words (checked at upload); `chunks` holds 3 per
    // block; each chunk writes [its offset, the next chunk's) of every output, and the
    // totals are the outputs' lengths.
    unsafe { b.launch(blocks(plan.chunks.len() as u64 * 256, 256))? };
    let bytes = (chunks.len() * 4) as u64;
    Ok(DeviceSplit::new(
        (plan.significant > 0).then_some(sig_scalars),
        (plan.significant > 0).then_some(sig_index),
        (plan.ones > 0).then_some(ones),
        bytes,
    )
    .with_checkpoints(plan.checkpoints()))
}

impl GpuMsm {
    /// Enqueues the significant entries `sig` and the ones `ones` (ranges of the lists)
    /// of a split MSM over `at`, pushing their partial sums; empty ranges enqueue nothing.
    pub(crate) fn enqueue_split_part<G: MsmGroup>(
        &self,
        at: BasesAt<G>,
        split: &DeviceSplit,
        sig: std::ops::Range<usize>,
        ones: std::ops::Range<usize>,
        results: &mut Vec<CudaSlice<G::DeviceXyzz>>,
        phases: &mut PhaseEvents,
    ) -> Result<(), GpuError> {
        if let (Some(sc), Some(idx), false) = (&split.sig_scalars, &split.sig_index, sig.is_empty()) {
            let (sc, idx) = (sc.slice(sig.clone()), idx.slice(sig.clone()));
            results.push(self.enqueue_pippenger(at, &sc, sig.len(), Some(&idx), phases)?);
        }
        if let (Some(d), false) = (&split.ones, ones.is_empty()) {
            results.push(self.enqueue_sum_indexed(at, &d.slice(ones))?);
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
        // Every entry lies between the checkpoints around its position.
        let cps = plan.checkpoints();
        assert_eq!(cps.len(), 4);
        assert_eq!(cps[3], [k, ones.len() as u32, sig.len() as u32]);
        for w in cps.windows(2) {
            let (from, to) = (w[0], w[1]);
            let within = |v: &[u32]| v.iter().all(|&b| b >= from[0] && b < to[0]);
            assert!(within(&ones[from[1] as usize..to[1] as usize]));
            assert!(within(&sig[from[2] as usize..to[2] as usize]));
        }
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
