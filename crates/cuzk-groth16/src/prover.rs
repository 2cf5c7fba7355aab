//! The CPU proving backend.
//!
//! Per circuit: a, b, c from the compiled matrices where synthesis left them pending, the H polynomial (six NTTs on the CPU), the H MSM (dense), the L, A
//! and B MSMs as split MSMs over their densities, then the Groth16 assembly
//!   A = α + Σ aᵢ·zᵢ + r·δ            (G1)
//!   B = β + Σ bᵢ·zᵢ + s·δ            (G2, and its twin B₁ in G1)
//!   C = s·A + r·B₁ − r·s·δ + Σ hᵢ·Hᵢ + Σ lᵢ·Lᵢ.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::{G1Affine, G1Projective, G2Projective};
use group::prime::PrimeCurveAffine;
use group::Curve;

use crate::backend::{check_inputs, prove_each, ProofRandomness, ProveError, ProveOutput, ProvingBackend, Stage, StageTimings, Urgency};
use crate::domain::Domain;
use crate::msm::{msm, split_msm, MsmAffine};
use crate::params::{HostQueries, ParameterSet};
use crate::proof::Proof;
use crate::sync::lock;
use crate::synthesis::{EvalBuffers, SynthesizedCircuit};

/// Groth16 on the CPU: NTTs with rayon, MSMs with blst's Pippenger.
#[derive(Default)]
pub struct CpuBackend {
    /// Domains (twiddle tables) by log size, built once.
    domains: Mutex<HashMap<u32, Arc<Domain>>>,
    /// Held while proving ordinary work: the CPU is this backend's device, and every
    /// proof already uses all its cores (callers take no lock, per the backend
    /// contract). Urgent proofs do not wait for it.
    busy: Mutex<()>,
}

impl CpuBackend {
    pub fn new() -> Self {
        Self::default()
    }

    fn domain(&self, min_size: usize) -> Result<Arc<Domain>, ProveError> {
        let log = min_size.max(1).next_power_of_two().trailing_zeros();
        let mut cache = lock(&self.domains);
        if let Some(d) = cache.get(&log) {
            return Ok(d.clone());
        }
        let d = Arc::new(Domain::new(log).map_err(|e| ProveError::Backend(e.to_string()))?);
        cache.insert(log, d.clone());
        Ok(d)
    }
}

impl ProvingBackend for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }

    /// An urgent proof does not wait for the ordinary one in progress: it runs beside
    /// it at once, the two sharing the cores.
    fn prove_with(
        &self,
        urgency: Urgency,
        params: &ParameterSet,
        circuits: &mut [SynthesizedCircuit],
        randomness: &[ProofRandomness],
    ) -> Result<ProveOutput, ProveError> {
        // Once, before any work: a set whose points are still in their file is refused.
        let q = params.host().map_err(|e| ProveError::Backend(e.to_string()))?;
        let checked = check_inputs(params, circuits, randomness)?;
        prove_each(checked, circuits, randomness, StageTimings::default(), |c, rs, t| {
            let domain = self.domain(c.num_constraints())?;
            let _busy = (urgency == Urgency::Ordinary).then(|| lock(&self.busy));
            prove_one(params, q, &domain, c, rs, t)
        })
    }
}

/// Σ over the B query: the selected inputs, then the split MSM over aux.
fn b_query<A: MsmAffine>(bases: &[A], c: &SynthesizedCircuit) -> A::Projective {
    let inputs = c.b_input_density.select(&c.input);
    let (input_bases, aux_bases) = bases.split_at(inputs.len());
    let mut acc = msm(input_bases, &inputs);
    acc += split_msm(aux_bases, &c.aux, &c.aux_classes, Some(&c.b_aux_density)).0;
    acc
}

fn prove_one(
    p: &ParameterSet,
    q: &HostQueries,
    domain: &Domain,
    c: &mut SynthesizedCircuit,
    rs: &ProofRandomness,
    t: &mut StageTimings,
) -> Result<Proof, ProveError> {
    let n = domain.size();
    if c.pending_products().is_some() {
        // a, b, c left to the backend: the host's parallel sparse products, into
        // vectors of the domain's size (the H polynomial works in them).
        let v = || -> Box<Vec<blstrs::Scalar>> { Box::new(Vec::with_capacity(n)) };
        t.time(Stage::Products, || c.compute_products(EvalBuffers { a: v(), b: v(), c: v() }))
            .map_err(|e| ProveError::Backend(format!("computing a, b, c from the compiled matrices: {e}")))?;
    }
    c.mark_consumed();
    for v in [&mut c.a, &mut c.b, &mut c.c] {
        v.resize(n).map_err(|_| ProveError::Buffer(format!("needs {n} elements, has {}", v.capacity())))?;
    }
    t.time(Stage::HPolynomial, || domain.h_polynomial(c.a.as_mut_slice(), c.b.as_mut_slice(), c.c.as_mut_slice()));
    let h = t.time(Stage::MsmH, || msm(&q.h, &c.a.as_slice()[..n - 1]));
    let l = t.time(Stage::MsmL, || split_msm(&q.l, &c.aux, &c.aux_classes, None).0);
    let a = t.time(Stage::MsmA, || {
        let (input_bases, aux_bases) = q.a.split_at(c.num_inputs());
        msm(input_bases, &c.input) + split_msm(aux_bases, &c.aux, &c.aux_classes, Some(&c.a_aux_density)).0
    });
    let b_g1 = t.time(Stage::MsmBG1, || b_query(&q.b_g1, c));
    let b_g2 = t.time(Stage::MsmBG2, || b_query(&q.b_g2, c));
    Ok(t.time(Stage::Assembly, || assemble(p, rs, h, l, a, b_g1, b_g2)))
}

/// Groth16 proof assembly from the five MSM results.
pub fn assemble(
    p: &ParameterSet,
    rs: &ProofRandomness,
    h: G1Projective,
    l: G1Projective,
    a: G1Projective,
    b_g1: G1Projective,
    b_g2: G2Projective,
) -> Proof {
    let vk = &p.vk;
    let (r, s) = (rs.r, rs.s);
    let delta_g1 = G1Projective::from(vk.delta_g1);
    let g_a = a + vk.alpha_g1 + delta_g1 * r;
    let g_b = b_g2 + vk.beta_g2 + G2Projective::from(vk.delta_g2) * s;
    let b1 = b_g1 + vk.beta_g1 + delta_g1 * s;
    let g_c = g_a * s + b1 * r - delta_g1 * (r * s) + h + l;
    let mut affine = [G1Affine::identity(); 2];
    G1Projective::batch_normalize(&[g_a, g_c], &mut affine);
    Proof { a: affine[0], b: g_b.to_affine(), c: affine[1] }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::generator::generate_parameters;
    use crate::matrices::compile_matrices;
    use crate::progress::NoProgress;
    use crate::synthesis::synthesize_many;
    use crate::synthetic::SyntheticShape;
    use crate::witness::synthesize_witness;
    use rand_core::SeedableRng;

    /// a, b, c left pending by synthesis and computed by the backend from the compiled
    /// matrices give the proofs of full synthesis, byte for byte with fixed r, s.
    #[test]
    fn pending_products_give_the_full_synthesis_proofs() {
        let shape = SyntheticShape::for_domain(9);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let params = generate_parameters(shape.circuit(0), &mut rng, &NoProgress).unwrap();
        let m = Arc::new(compile_matrices(shape.circuit(0)).unwrap());
        let rs = [ProofRandomness::random(&mut rng), ProofRandomness::random(&mut rng)];
        let full = CpuBackend::new().prove(&params, &mut synthesize_many(vec![shape.circuit(5), shape.circuit(6)]).unwrap(), &rs).unwrap();
        let mut pending: Vec<SynthesizedCircuit> = [5, 6]
            .iter()
            .map(|&s| SynthesizedCircuit::with_pending_products(m.clone(), synthesize_witness(shape.circuit(s), 0).unwrap()).unwrap())
            .collect();
        assert!(pending.iter().all(|c| c.pending_products().is_some() && c.a.is_empty()));
        let out = CpuBackend::new().prove(&params, &mut pending, &rs).unwrap();
        assert_eq!(out.proofs, full.proofs);
        assert!(out.timings.get(Stage::Products) > std::time::Duration::ZERO);
        // A witness of another shape is refused when it is made pending.
        let other = synthesize_witness(SyntheticShape::for_domain(8).circuit(0), 0).unwrap();
        assert!(SynthesizedCircuit::with_pending_products(m, other).is_err());
    }
}
