//! The GPU proving backend: the H polynomial and every MSM on one GPU, the Groth16
//! assembly (a few scalar multiplications) on the host.
//!
//! A proof has two phases. *Prepare*, on the caller's thread with the device free for
//! others: a, b, c go into a staging slot on the copy stream (at full PCIe speed from
//! pinned memory) while the host builds the split MSMs' index lists, which follow on
//! the copy stream; the public-input parts of the A and B queries (a few hundred
//! points) are summed on the host. *Compute*, holding the device: the H polynomial
//! and the five MSMs are enqueued on the compute stream with no wait between them (h
//! stays in its slot for the H MSM), then the host waits once and reads the five
//! points. Two callers at once overlap one's prepare with the other's compute.
//!
//! The parameter set's points are uploaded once per [`ParameterSet`] and stay on the
//! device.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::{G1Projective, G2Projective, Scalar};
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;
use cuzk_groth16::backend::{
    check_inputs, prove_each, DeviceReport, ProofRandomness, ProveError, ProveOutput, ProvingBackend, Stage, StageTimings,
};
use cuzk_groth16::msm::msm as host_msm;
use cuzk_groth16::params::ParameterSetId;
use cuzk_groth16::prover::assemble;
use cuzk_groth16::synthesis::{Density, ScalarClasses, SynthesizedCircuit};
use cuzk_groth16::{ParameterSet, Proof};
use ff::Field;
use rayon::prelude::*;

use crate::device::{Gpu, GpuError};
use crate::msm::{DeviceBases, DeviceSplit, GpuMsm, PendingMsm, G1, G2};
use crate::ntt::{GpuNtt, StagedAbc};

fn backend_error(what: &str, e: GpuError) -> ProveError {
    ProveError::Backend(format!("{what}: {e}"))
}

/// A parameter set's points on the device.
struct ResidentParams {
    h: DeviceBases<G1>,
    l: DeviceBases<G1>,
    a: DeviceBases<G1>,
    b_g1: DeviceBases<G1>,
    b_g2: DeviceBases<G2>,
}

/// Groth16 on one GPU.
pub struct CudaBackend {
    gpu: Arc<Gpu>,
    ntt: GpuNtt,
    msm: GpuMsm,
    /// Points per parameter set, uploaded on first use.
    resident: Mutex<HashMap<ParameterSetId, Arc<ResidentParams>>>,
    /// Held for a proof's compute region only (see the module comment).
    device: Mutex<()>,
}

impl CudaBackend {
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    pub fn new(gpu: Arc<Gpu>) -> Self {
        CudaBackend {
            ntt: GpuNtt::new(gpu.clone()),
            msm: GpuMsm::new(gpu.clone()),
            gpu,
            resident: Mutex::new(HashMap::new()),
            device: Mutex::new(()),
        }
    }

    /// The parameter set's points on the device, uploading them on first use.
    fn resident(&self, p: &ParameterSet, t: &mut StageTimings) -> Result<Arc<ResidentParams>, ProveError> {
        let mut map = self.resident.lock().map_err(|_| ProveError::Backend("resident parameter map poisoned".into()))?;
        if let Some(r) = map.get(&p.id()) {
            return Ok(r.clone());
        }
        let up = |what: &str, points: &[blstrs::G1Affine]| {
            self.msm.upload_bases::<G1>(points).map_err(|e| backend_error(what, e))
        };
        let start = Instant::now();
        let r = t.time(Stage::Upload, || -> Result<_, ProveError> {
            Ok(ResidentParams {
                h: up("uploading H", &p.h)?,
                l: up("uploading L", &p.l)?,
                a: up("uploading A", &p.a)?,
                b_g1: up("uploading B (G1)", &p.b_g1)?,
                b_g2: self.msm.upload_bases::<G2>(&p.b_g2).map_err(|e| backend_error("uploading B (G2)", e))?,
            })
        })?;
        let gb = p.size_bytes() as f64 / 1e9;
        let secs = start.elapsed().as_secs_f64();
        tracing::info!(
            points = p.h.len() + p.l.len() + p.a.len() + p.b_g1.len() + p.b_g2.len(),
            gb = format!("{gb:.2}"),
            seconds = format!("{secs:.2}"),
            "parameter set resident on the GPU"
        );
        let r = Arc::new(r);
        map.insert(p.id(), r.clone());
        Ok(r)
    }
}

impl ProvingBackend for CudaBackend {
    fn name(&self) -> String {
        format!("cuda:{}", self.gpu.ordinal)
    }

    fn prove(
        &self,
        params: &ParameterSet,
        circuits: &mut [SynthesizedCircuit],
        randomness: &[ProofRandomness],
    ) -> Result<ProveOutput, ProveError> {
        let mut timings = StageTimings::default();
        // Shapes are checked before the (long, first-use) upload of the points.
        check_inputs(params, circuits, randomness)?;
        let resident = self.resident(params, &mut timings)?;
        let mut device = DeviceReport::default();
        let mut out = prove_each(params, circuits, randomness, timings, |c, rs, t| {
            let (proof, report) = self.prove_one(params, &resident, c, rs, t)?;
            device.add(&report);
            Ok(proof)
        })?;
        out.device = Some(device);
        Ok(out)
    }

    fn keeps_evaluations(&self) -> bool {
        true // a, b, c are only read, for the upload
    }
}

/// A split MSM's input over the aux values selected by `density` (all when None):
/// zeros dropped, the bases of the ones listed, the significant scalars with their base
/// indices. The k-th selected aux value belongs to base `first_base + k`.
#[derive(Debug, Default, PartialEq)]
pub struct SplitLists {
    pub ones: Vec<u32>,
    pub sig_index: Vec<u32>,
    pub sig_scalars: Vec<Scalar>,
}

/// Aux positions per parallel chunk (a multiple of 64: whole density words).
const LIST_CHUNK: usize = 1 << 16;

/// Bits of density word `w` that are real positions below `n` and selected.
fn selected_word(density: Option<&Density>, w: usize, n: usize) -> u64 {
    let valid = if (w + 1) * 64 <= n { u64::MAX } else { (1u64 << (n % 64)) - 1 };
    density.map_or(valid, |d| d.words()[w] & valid)
}

/// Two parallel passes, no serial merge (at C2 size the lists are ~700 MB): per chunk,
/// counts from word popcounts; then every chunk fills its own part of the outputs.
pub fn split_lists(aux: &[Scalar], classes: &ScalarClasses, density: Option<&Density>, first_base: usize) -> SplitLists {
    let n = aux.len();
    let chunks = n.div_ceil(LIST_CHUNK);
    let (one, zero) = (classes.one.words(), classes.zero.words());
    // [selected, ones, significant] per chunk.
    let counts: Vec<[usize; 3]> = (0..chunks)
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
    let (total_ones, total_sig) = counts.iter().fold((0, 0), |(o, g), c| (o + c[1], g + c[2]));
    let mut out = SplitLists {
        ones: vec![0; total_ones],
        sig_index: vec![0; total_sig],
        sig_scalars: (0..total_sig).into_par_iter().map(|_| Scalar::ZERO).collect(),
    };
    // Each chunk's slices of the three outputs, and its first base index.
    let mut parts = Vec::with_capacity(chunks);
    let (mut ones, mut idx, mut sc) = (&mut out.ones[..], &mut out.sig_index[..], &mut out.sig_scalars[..]);
    let mut k = first_base;
    for c in &counts {
        let (o, o_rest) = std::mem::take(&mut ones).split_at_mut(c[1]);
        let (i, i_rest) = std::mem::take(&mut idx).split_at_mut(c[2]);
        let (s, s_rest) = std::mem::take(&mut sc).split_at_mut(c[2]);
        parts.push((o, i, s, k));
        (ones, idx, sc) = (o_rest, i_rest, s_rest);
        k += c[0];
    }
    parts.into_par_iter().enumerate().for_each(|(ci, (o, si, ss, mut k))| {
        let (mut jo, mut js) = (0, 0);
        for i in ci * LIST_CHUNK..((ci + 1) * LIST_CHUNK).min(n) {
            if density.is_some_and(|d| !d.get(i)) {
                continue;
            }
            if classes.one.get(i) {
                o[jo] = k as u32;
                jo += 1;
            } else if !classes.zero.get(i) {
                si[js] = k as u32;
                ss[js] = aux[i];
                js += 1;
            }
            k += 1;
        }
    });
    out
}

/// A partition ready for the device: a, b, c staged, the split lists uploaded (all on
/// the copy stream), the public-input parts summed.
struct Prepared<'c> {
    abc: StagedAbc<'c>,
    l: DeviceSplit,
    a: DeviceSplit,
    /// The B query's lists, shared by its G1 and G2 MSMs.
    b: DeviceSplit,
    /// On the copy stream after the last list.
    uploaded: CudaEvent,
    a_inputs: G1Projective,
    b_inputs_g1: G1Projective,
    b_inputs_g2: G2Projective,
}

/// The five MSMs of a partition, enqueued.
struct PendingMsms {
    h: PendingMsm<G1>,
    l: PendingMsm<G1>,
    a: PendingMsm<G1>,
    b_g1: PendingMsm<G1>,
    b_g2: PendingMsm<G2>,
}

fn ms(ms: f32) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3)
}

impl CudaBackend {
    fn prepare<'c>(&'c self, p: &ParameterSet, r: &ResidentParams, c: &'c SynthesizedCircuit) -> Result<Prepared<'c>, ProveError> {
        let num_inputs = c.num_inputs();
        let b_inputs = c.b_input_density.select(&c.input);
        let t0 = Instant::now();
        // Staging returns at once from pinned memory; the lists are built meanwhile.
        let (abc, (l, (a, b))) = rayon::join(
            || {
                let r = self.ntt.stage(c.a.as_slice(), c.b.as_slice(), c.c.as_slice());
                tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "prepare: a, b, c staged");
                r
            },
            || {
                rayon::join(
                    || split_lists(&c.aux, &c.aux_classes, None, 0),
                    || {
                        rayon::join(
                            || split_lists(&c.aux, &c.aux_classes, Some(&c.a_aux_density), num_inputs),
                            || split_lists(&c.aux, &c.aux_classes, Some(&c.b_aux_density), b_inputs.len()),
                        )
                    },
                )
            },
        );
        let abc = abc.map_err(|e| backend_error("uploading a, b, c", e))?;
        let t_lists = t0.elapsed();
        // Pageable lists: each call returns once the driver has taken its bytes.
        let l = self.msm.upload_split(&r.l, &l.ones, &l.sig_index, &l.sig_scalars).map_err(|e| backend_error("uploading the L lists", e))?;
        let t_l = t0.elapsed();
        let a = self.msm.upload_split(&r.a, &a.ones, &a.sig_index, &a.sig_scalars).map_err(|e| backend_error("uploading the A lists", e))?;
        let t_a = t0.elapsed();
        if r.b_g2.len() != r.b_g1.len() {
            return Err(ProveError::Backend(format!("B query: {} G1 points but {} G2 points", r.b_g1.len(), r.b_g2.len())));
        }
        let b = self.msm.upload_split(&r.b_g1, &b.ones, &b.sig_index, &b.sig_scalars).map_err(|e| backend_error("uploading the B lists", e))?;
        let uploaded = self.gpu.copy.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| backend_error("recording an event", e.into()))?;
        // Where a preparation's host time goes (it overlaps another partition's kernels).
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(
            staged_and_lists_built = ms(t_lists),
            l_uploaded = ms(t_l),
            a_uploaded = ms(t_a),
            b_uploaded = ms(t0.elapsed()),
            "prepare: host steps (ms from its start)"
        );
        Ok(Prepared {
            abc,
            l,
            a,
            b,
            uploaded,
            a_inputs: host_msm(&p.a[..num_inputs], &c.input),
            b_inputs_g1: host_msm(&p.b_g1[..b_inputs.len()], &b_inputs),
            b_inputs_g2: host_msm(&p.b_g2[..b_inputs.len()], &b_inputs),
        })
    }

    /// Enqueues the H polynomial and the five MSMs; no host wait. Returns them with
    /// the NTTs' events.
    fn enqueue(&self, r: &ResidentParams, x: &mut Prepared<'_>) -> Result<(PendingMsms, CudaEvent, CudaEvent), GpuError> {
        let n = x.abc.domain_size();
        let (l, a, b, msm) = (&x.l, &x.a, &x.b, &self.msm);
        self.ntt.h_polynomial_staged(&mut x.abc, |h, ev| {
            let pending = PendingMsms {
                h: msm.enqueue_device(&r.h, &h.slice(..n - 1))?,
                l: msm.enqueue_split(&r.l, l)?,
                a: msm.enqueue_split(&r.a, a)?,
                b_g1: msm.enqueue_split(&r.b_g1, b)?,
                b_g2: msm.enqueue_split(&r.b_g2, b)?,
            };
            Ok((pending, ev.compute_start, ev.computed))
        })
    }

    /// The compute region: holds the device from the first enqueue to the results.
    fn compute(
        &self,
        r: &ResidentParams,
        x: &mut Prepared<'_>,
        t: &mut StageTimings,
    ) -> Result<(G1Projective, G1Projective, G1Projective, G1Projective, G2Projective, DeviceReport), GpuError> {
        let _device = self.device.lock().map_err(|_| GpuError::Invalid("device lock poisoned".into()))?;
        let held = Instant::now();
        let (m, h0, h1) = self.enqueue(r, x)?;
        // The partition's one host wait.
        self.gpu.stream().synchronize()?;
        let span = |p: (&CudaEvent, &CudaEvent)| p.0.elapsed_ms(p.1).map(ms);
        let stages = [
            (Stage::HPolynomial, h0.elapsed_ms(&h1).map(ms)?),
            (Stage::MsmH, span(m.h.span())?),
            (Stage::MsmL, span(m.l.span())?),
            (Stage::MsmA, span(m.a.span())?),
            (Stage::MsmBG1, span(m.b_g1.span())?),
            (Stage::MsmBG2, span(m.b_g2.span())?),
        ];
        let up = x.abc.upload_start.elapsed_ms(&x.uploaded).map(ms)?;
        let bytes_down = m.h.bytes_down() + m.l.bytes_down() + m.a.bytes_down() + m.b_g1.bytes_down() + m.b_g2.bytes_down();
        let (h, l, a, b_g1, b_g2) = (m.h.finish()?.0, m.l.finish()?.0, m.a.finish()?.0, m.b_g1.finish()?.0, m.b_g2.finish()?.0);
        let mut report = DeviceReport {
            held: held.elapsed(),
            held_from: Some(held),
            held_to: Some(Instant::now()),
            bytes_up: x.abc.bytes + x.l.bytes + x.a.bytes + x.b.bytes,
            bytes_down,
            host_syncs: 1,
            ..DeviceReport::default()
        };
        t.add(Stage::Upload, up);
        for (stage, d) in stages {
            report.busy += d;
            t.add(stage, d);
        }
        Ok((h, l, a, b_g1, b_g2, report))
    }

    fn prove_one(
        &self,
        p: &ParameterSet,
        r: &ResidentParams,
        c: &mut SynthesizedCircuit,
        rs: &ProofRandomness,
        t: &mut StageTimings,
    ) -> Result<(Proof, DeviceReport), ProveError> {
        c.mark_consumed();
        let t0 = Instant::now();
        let mut x = self.prepare(p, r, c)?;
        t.add(Stage::Prepare, t0.elapsed());
        let computed = self.compute(r, &mut x, t);
        if computed.is_err() {
            // Nothing may still read the circuit's memory when the borrow ends.
            for s in [&self.gpu.copy, self.gpu.stream()] {
                if let Err(e) = s.synchronize() {
                    tracing::error!(error = %e, "synchronizing after a failed proof");
                }
            }
        }
        let (h, l, a, b_g1, b_g2, report) = computed.map_err(|e| backend_error("proving on the GPU", e))?;
        let (a, b_g1, b_g2) = (a + x.a_inputs, b_g1 + x.b_inputs_g1, b_g2 + x.b_inputs_g2);
        drop(x);
        let proof = t.time(Stage::Assembly, || assemble(p, rs, h, l, a, b_g1, b_g2));
        Ok((proof, report))
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
        let got = split_lists(&aux, &classes, Some(&density), 10);
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
        let all = split_lists(&aux, &classes, None, 0);
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
        let got = split_lists(&aux, &classes, Some(&density), 3);
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
    }
}
