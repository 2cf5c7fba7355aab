//! The reference synthesis: bellperson 0.27, the prover filecoin-proofs 19.1 is built
//! on, run on the same circuits, so that cuzk's synthesis is measured against it in the
//! same run and its witness is checked against bellperson's.
//!
//! bellperson's prover synthesizes privately; `create_proof_batch` with a parameter
//! source that refuses its first request (the verifying key, asked for right after
//! synthesis) runs exactly that synthesis and stops. Its witness-only constraint
//! system (`WitnessCS`) gives the witness alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bellperson27::groth16::{create_proof_batch, ParameterSource, VerifyingKey};
use bellperson27::util_cs::witness_cs::WitnessCS;
use bellperson27::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use ff::{Field, PrimeField};
use rayon::prelude::*;

/// Which of bellperson's syntheses to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceSynthesis {
    /// Its prover's synthesis (assignments, a/b/c evaluations, densities).
    Prover,
    /// Its witness-only constraint system (assignments only).
    WitnessOnly,
}

/// What a reference synthesis produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReferenceWitness {
    /// Public inputs (the constant one included) and aux variables; `None` where the
    /// run does not expose them (the prover's synthesis keeps them private).
    pub inputs: Option<usize>,
    pub aux: Option<usize>,
    /// [`fingerprint`] of the aux assignment, where exposed.
    pub aux_fingerprint: Option<u64>,
}

/// A parameter source that refuses the first request and records that it came.
struct StopAtParameters {
    asked: AtomicBool,
}

type Points<A> = (Arc<Vec<A>>, usize);

impl StopAtParameters {
    fn stop<T>(&self) -> Result<T, SynthesisError> {
        self.asked.store(true, Ordering::SeqCst);
        Err(SynthesisError::AssignmentMissing)
    }
}

impl ParameterSource<Bls12> for &StopAtParameters {
    type G1Builder = Points<G1Affine>;
    type G2Builder = Points<G2Affine>;

    fn get_vk(&self, _: usize) -> Result<&VerifyingKey<Bls12>, SynthesisError> {
        self.stop()
    }
    fn get_h(&self, _: usize) -> Result<Self::G1Builder, SynthesisError> {
        self.stop()
    }
    fn get_l(&self, _: usize) -> Result<Self::G1Builder, SynthesisError> {
        self.stop()
    }
    fn get_a(&self, _: usize, _: usize) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        self.stop()
    }
    fn get_b_g1(&self, _: usize, _: usize) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        self.stop()
    }
    fn get_b_g2(&self, _: usize, _: usize) -> Result<(Self::G2Builder, Self::G2Builder), SynthesisError> {
        self.stop()
    }
}

/// Runs `circuit` through bellperson's `how`.
pub(crate) fn synthesize<C: Circuit<Scalar> + Send>(circuit: C, how: ReferenceSynthesis) -> Result<ReferenceWitness, SynthesisError> {
    match how {
        ReferenceSynthesis::Prover => {
            let stop = StopAtParameters { asked: AtomicBool::new(false) };
            match create_proof_batch::<Bls12, C, _>(vec![circuit], &stop, vec![Scalar::ZERO], vec![Scalar::ZERO]) {
                // The source refused, so the proof cannot have been made: the error is
                // the circuit's own unless the source was asked.
                Err(_) if stop.asked.load(Ordering::SeqCst) => Ok(ReferenceWitness { inputs: None, aux: None, aux_fingerprint: None }),
                Err(e) => Err(e),
                Ok(_) => Err(SynthesisError::Unsatisfiable),
            }
        }
        ReferenceSynthesis::WitnessOnly => {
            let mut cs = WitnessCS::<Scalar>::new();
            circuit.synthesize(&mut cs)?;
            Ok(ReferenceWitness {
                inputs: Some(cs.inputs_slice().len()),
                aux: Some(cs.aux_slice().len()),
                aux_fingerprint: Some(fingerprint(cs.aux_slice())),
            })
        }
    }
}

/// A 64-bit fingerprint of a vector of field elements (their canonical bytes and
/// positions), computed in parallel: equal vectors have equal fingerprints, and two
/// witnesses that differ anywhere almost surely do not.
pub fn fingerprint(values: &[Scalar]) -> u64 {
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let sum = values
        .par_iter()
        .enumerate()
        .map(|(i, v)| {
            let repr = v.to_repr();
            let mut h = mix(i as u64 ^ 0x9e37_79b9_7f4a_7c15);
            for limb in repr.as_ref().chunks_exact(8) {
                h = mix(h ^ u64::from_le_bytes(limb.try_into().unwrap_or_default()));
            }
            h
        })
        .reduce(|| 0u64, u64::wrapping_add);
    mix(sum ^ values.len() as u64)
}
