//! Groth16 verification: e(A, B) = e(α, β) · e(Σ xᵢ·ICᵢ, γ) · e(C, δ).
//!
//! Batches are checked with one random linear combination: for random ρᵢ,
//! Πᵢ e(ρᵢ·Aᵢ, Bᵢ) · e(Σ ρᵢ·accᵢ, −γ) · e(Σ ρᵢ·Cᵢ, −δ) = e(α, β)^(Σ ρᵢ),
//! one Miller loop per proof plus two, and a single final exponentiation.

use blstrs::{Bls12, G1Affine, G1Projective, G2Prepared, Gt, Scalar};
use ff::PrimeField;
use group::Curve;
use pairing::{MillerLoopResult, MultiMillerLoop};
use rand_core::RngCore;
use rayon::prelude::*;

use crate::msm::msm;
use crate::params::VerifyingKey;
use crate::proof::Proof;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    #[error("{given} public inputs given, the verifying key expects {expected}")]
    InputCount { given: usize, expected: usize },
    #[error("{proofs} proofs but {inputs} public-input lists")]
    BatchShape { proofs: usize, inputs: usize },
    #[error("verifying key has no IC points (it needs one for the constant input)")]
    EmptyIc,
}

/// A verifying key with its pairing-side precomputation done once.
pub struct PreparedVerifyingKey {
    alpha_beta: Gt,
    neg_gamma: G2Prepared,
    neg_delta: G2Prepared,
    ic: Vec<G1Affine>,
}

impl PreparedVerifyingKey {
    pub fn new(vk: &VerifyingKey) -> Self {
        PreparedVerifyingKey {
            alpha_beta: blstrs::pairing(&vk.alpha_g1, &vk.beta_g2),
            neg_gamma: G2Prepared::from(-vk.gamma_g2),
            neg_delta: G2Prepared::from(-vk.delta_g2),
            ic: vk.ic.clone(),
        }
    }

    /// Σ xᵢ·ICᵢ with x₀ = 1 for the constant input.
    fn input_accumulator(&self, inputs: &[Scalar]) -> Result<G1Projective, VerifyError> {
        if self.ic.is_empty() {
            return Err(VerifyError::EmptyIc);
        }
        if inputs.len() + 1 != self.ic.len() {
            return Err(VerifyError::InputCount { given: inputs.len(), expected: self.ic.len() - 1 });
        }
        Ok(G1Projective::from(self.ic[0]) + msm(&self.ic[1..], inputs))
    }
}

/// Checks one proof against the public inputs (without the leading constant one).
pub fn verify_proof(pvk: &PreparedVerifyingKey, proof: &Proof, inputs: &[Scalar]) -> Result<bool, VerifyError> {
    let acc = pvk.input_accumulator(inputs)?.to_affine();
    let b = G2Prepared::from(proof.b);
    let ml = Bls12::multi_miller_loop(&[(&proof.a, &b), (&acc, &pvk.neg_gamma), (&proof.c, &pvk.neg_delta)]);
    Ok(ml.final_exponentiation() == pvk.alpha_beta)
}

/// Checks many proofs at once; `true` only if every proof is valid (except with
/// probability about 2^-128 over the random coefficients).
pub fn verify_proofs_batch(
    pvk: &PreparedVerifyingKey,
    proofs: &[Proof],
    inputs: &[Vec<Scalar>],
    rng: &mut impl RngCore,
) -> Result<bool, VerifyError> {
    if proofs.len() != inputs.len() {
        return Err(VerifyError::BatchShape { proofs: proofs.len(), inputs: inputs.len() });
    }
    if proofs.is_empty() {
        return Ok(true);
    }
    // 128-bit random coefficients suffice for soundness and halve the scalar work.
    let rho: Vec<Scalar> = (0..proofs.len()).map(|_| Scalar::from_u128(((rng.next_u64() as u128) << 64) | rng.next_u64() as u128)).collect();
    let accs = inputs.iter().map(|x| pvk.input_accumulator(x)).collect::<Result<Vec<_>, _>>()?;
    let acc_sum: G1Projective = accs.iter().zip(&rho).map(|(a, r)| *a * r).sum();
    let c_sum: G1Projective = proofs.iter().zip(&rho).map(|(p, r)| G1Projective::from(p.c) * r).sum();
    let terms: Vec<(G1Affine, G2Prepared)> =
        proofs.par_iter().zip(&rho).map(|(p, r)| ((G1Projective::from(p.a) * r).to_affine(), G2Prepared::from(p.b))).collect();
    let (acc_sum, c_sum) = (acc_sum.to_affine(), c_sum.to_affine());
    let mut refs: Vec<(&G1Affine, &G2Prepared)> = terms.iter().map(|(a, b)| (a, b)).collect();
    refs.push((&acc_sum, &pvk.neg_gamma));
    refs.push((&c_sum, &pvk.neg_delta));
    let lhs = Bls12::multi_miller_loop(&refs).final_exponentiation();
    let rho_sum: Scalar = rho.iter().sum();
    Ok(lhs == pvk.alpha_beta * rho_sum)
}
