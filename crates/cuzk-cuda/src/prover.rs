//! The GPU proving backend: the H polynomial and every MSM on one GPU, the Groth16
//! assembly (a few scalar multiplications) on the host.
//!
//! Correct end to end, not yet the pipelined one. The parameter set's points are
//! uploaded once per [`ParameterSet`] and stay on the device; a, b, c go up from host
//! memory on the copy stream, h stays on the device and the H MSM reads it there; the
//! split MSMs' index lists are rebuilt on the host per proof. The public-input parts of
//! the A and B queries (a few hundred points) are summed on the host.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk_groth16::backend::{check_inputs, prove_each, ProofRandomness, ProveError, ProveOutput, ProvingBackend, Stage, StageTimings};
use cuzk_groth16::msm::msm as host_msm;
use cuzk_groth16::params::ParameterSetId;
use cuzk_groth16::prover::assemble;
use cuzk_groth16::synthesis::{Density, ScalarClasses, SynthesizedCircuit};
use cuzk_groth16::{ParameterSet, Proof};
use ff::Field;
use rayon::prelude::*;

use crate::device::{Gpu, GpuError};
use crate::msm::{DeviceBases, GpuMsm, MsmGroup, Scalars, G1, G2};
use crate::ntt::GpuNtt;

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
}

impl CudaBackend {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        CudaBackend {
            ntt: GpuNtt::new(gpu.clone()),
            msm: GpuMsm::new(gpu.clone()),
            gpu,
            resident: Mutex::new(HashMap::new()),
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
        let r = t.time(Stage::Upload, || -> Result<_, ProveError> {
            Ok(ResidentParams {
                h: up("uploading H", &p.h)?,
                l: up("uploading L", &p.l)?,
                a: up("uploading A", &p.a)?,
                b_g1: up("uploading B (G1)", &p.b_g1)?,
                b_g2: self.msm.upload_bases::<G2>(&p.b_g2).map_err(|e| backend_error("uploading B (G2)", e))?,
            })
        })?;
        tracing::info!(points = p.h.len() + p.l.len() + p.a.len() + p.b_g1.len() + p.b_g2.len(), "parameter set resident on the GPU");
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
        prove_each(params, circuits, randomness, timings, |c, rs, t| self.prove_one(params, &resident, c, rs, t))
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

impl CudaBackend {
    fn split<G: MsmGroup>(
        &self,
        what: &str,
        bases: &DeviceBases<G>,
        lists: &SplitLists,
    ) -> Result<G::Projective, ProveError> {
        self.msm
            .msm_split(bases, &lists.ones, &lists.sig_index, &lists.sig_scalars)
            .map(|(p, _)| p)
            .map_err(|e| backend_error(what, e))
    }

    fn prove_one(
        &self,
        p: &ParameterSet,
        r: &ResidentParams,
        c: &mut SynthesizedCircuit,
        rs: &ProofRandomness,
        t: &mut StageTimings,
    ) -> Result<Proof, ProveError> {
        let n = c.domain_size();
        c.mark_consumed();
        // h stays on the device: the H MSM reads its first n − 1 coefficients where the
        // last NTT pass wrote them. One host synchronization, at the MSM's end.
        let start = std::time::Instant::now();
        let (msm_h, h_ms) = self
            .ntt
            .h_polynomial_then(c.a.as_slice(), c.b.as_slice(), c.c.as_slice(), |h, ev| {
                let (p, _) = self.msm.msm_from(&r.h, Scalars::Device(&h.slice(..n - 1)))?;
                Ok((p, ev.compute_start.elapsed_ms(&ev.computed)?))
            })
            .map_err(|e| backend_error("H polynomial and H MSM", e))?;
        // Split by the device's clock: the NTTs' time, and the rest of the call (uploads
        // of a, b, c not overlapped by the NTTs, then the MSM) as the H MSM's.
        let h_time = std::time::Duration::from_secs_f64(h_ms as f64 / 1e3);
        t.add(Stage::HPolynomial, h_time);
        t.add(Stage::MsmH, start.elapsed().saturating_sub(h_time));

        let num_inputs = c.num_inputs();
        let msm_l = t.time(Stage::MsmL, || {
            let lists = split_lists(&c.aux, &c.aux_classes, None, 0);
            self.split("L MSM", &r.l, &lists)
        })?;
        let msm_a = t.time(Stage::MsmA, || -> Result<G1Projective, ProveError> {
            let lists = split_lists(&c.aux, &c.aux_classes, Some(&c.a_aux_density), num_inputs);
            Ok(host_msm(&p.a[..num_inputs], &c.input) + self.split("A MSM", &r.a, &lists)?)
        })?;
        let b_inputs = c.b_input_density.select(&c.input);
        let b_lists = split_lists(&c.aux, &c.aux_classes, Some(&c.b_aux_density), b_inputs.len());
        let msm_b_g1 = t.time(Stage::MsmBG1, || -> Result<G1Projective, ProveError> {
            Ok(host_msm(&p.b_g1[..b_inputs.len()], &b_inputs) + self.split("B MSM (G1)", &r.b_g1, &b_lists)?)
        })?;
        let msm_b_g2 = t.time(Stage::MsmBG2, || -> Result<G2Projective, ProveError> {
            Ok(host_msm(&p.b_g2[..b_inputs.len()], &b_inputs) + self.split("B MSM (G2)", &r.b_g2, &b_lists)?)
        })?;
        Ok(t.time(Stage::Assembly, || assemble(p, rs, msm_h, msm_l, msm_a, msm_b_g1, msm_b_g2)))
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
