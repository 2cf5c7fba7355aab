//! End-to-end: setup, synthesis, CPU proving and verification with our own stack.

mod common;

use blstrs::{G1Projective, Scalar};
use common::{sha256_bytes, Constant, InputsOnly, Sha256Preimage};
use cuzk_groth16::generator::generate_parameters;
use cuzk_groth16::synthetic::SyntheticShape;
use cuzk_groth16::verifier::{verify_proof, verify_proofs_batch, PreparedVerifyingKey, VerifyError};
use cuzk_groth16::{synthesize, synthesize_many, CpuBackend, NoProgress, ParameterSet, Proof, ProofRandomness, ProveError, ProvingBackend};
use ff::Field;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// Proves `circuits` with fresh randomness and checks each proof verifies, alone and as
/// a batch; returns the proofs and their public inputs.
fn prove_and_check<C>(params: &ParameterSet, circuits: Vec<C>, seed: u64) -> (Vec<Proof>, Vec<Vec<Scalar>>)
where
    C: bellpepper_core::Circuit<Scalar> + Send,
{
    let mut rng = rng(seed);
    let mut synth = synthesize_many(circuits).unwrap();
    let inputs: Vec<Vec<Scalar>> = synth.iter().map(|s| s.input[1..].to_vec()).collect();
    let rs: Vec<_> = synth.iter().map(|_| ProofRandomness::random(&mut rng)).collect();
    let out = CpuBackend::new().prove(params, &mut synth, &rs).unwrap();
    let pvk = PreparedVerifyingKey::new(&params.vk);
    for (p, x) in out.proofs.iter().zip(&inputs) {
        assert!(verify_proof(&pvk, p, x).unwrap());
        assert_eq!(Proof::from_bytes(&p.to_bytes()).unwrap(), *p);
    }
    assert!(verify_proofs_batch(&pvk, &out.proofs, &inputs, &mut rng).unwrap());
    (out.proofs, inputs)
}

#[test]
fn synthetic_circuits_of_several_sizes_prove_and_verify() {
    for log_n in [6u32, 10, 13] {
        let shape = SyntheticShape::for_domain(log_n);
        let params = generate_parameters(shape.circuit(0), &mut rng(log_n as u64), &NoProgress).unwrap();
        assert_eq!(params.domain_size(), 1 << log_n);
        let (proofs, inputs) = prove_and_check(&params, vec![shape.circuit(1), shape.circuit(2)], 10 + log_n as u64);
        let pvk = PreparedVerifyingKey::new(&params.vk);

        // Tampered proof: C moved by the generator.
        let mut bad = proofs[0];
        bad.c = (G1Projective::from(bad.c) + G1Projective::generator()).to_affine();
        assert!(!verify_proof(&pvk, &bad, &inputs[0]).unwrap());
        // Swapped A and the other proof's A.
        let mut mixed = proofs[0];
        mixed.a = proofs[1].a;
        assert!(!verify_proof(&pvk, &mixed, &inputs[0]).unwrap());
        // Wrong public input.
        let mut wrong = inputs[0].clone();
        wrong[0] += Scalar::ONE;
        assert!(!verify_proof(&pvk, &proofs[0], &wrong).unwrap());
        // Another circuit's inputs.
        assert!(!verify_proof(&pvk, &proofs[0], &inputs[1]).unwrap());
        // One bad proof spoils a batch.
        assert!(!verify_proofs_batch(&pvk, &[proofs[1], bad], &inputs, &mut rng(3)).unwrap());
        // Wrong input count is an error, not a "false".
        assert_eq!(
            verify_proof(&pvk, &proofs[0], &inputs[0][1..]),
            Err(VerifyError::InputCount { given: inputs[0].len() - 1, expected: inputs[0].len() })
        );
    }
}

#[test]
fn sha256_preimage_proves_and_verifies() {
    assert_eq!(sha256_bytes(b"abc")[..4], [0xba, 0x78, 0x16, 0xbf], "the test's own SHA-256 matches the standard vector");
    let preimage = b"cuzk proves Filecoin".to_vec();
    let circuit = Sha256Preimage { preimage: preimage.clone() };
    let params = generate_parameters(circuit.clone(), &mut rng(1), &NoProgress).unwrap();
    let (proofs, inputs) = prove_and_check(&params, vec![circuit], 2);
    let expected = Sha256Preimage::public_inputs(&sha256_bytes(&preimage));
    assert_eq!(inputs[0], expected);
    let pvk = PreparedVerifyingKey::new(&params.vk);
    let other = Sha256Preimage::public_inputs(&sha256_bytes(b"another preimage"));
    assert!(!verify_proof(&pvk, &proofs[0], &other).unwrap());
}

#[test]
fn degenerate_circuits_prove_and_verify() {
    // Empty aux: no L, no aux part of A or B; the domain holds only input constraints.
    let c = InputsOnly { values: vec![Scalar::from(5u64), Scalar::from(7u64)] };
    let params = generate_parameters(c.clone(), &mut rng(1), &NoProgress).unwrap();
    assert_eq!(params.lens().l, 0);
    prove_and_check(&params, vec![c], 1);
    // Only the constant input.
    let c = InputsOnly { values: vec![] };
    let params = generate_parameters(c.clone(), &mut rng(2), &NoProgress).unwrap();
    prove_and_check(&params, vec![c], 2);
    // Aux all zero, all one, all "significant".
    for (i, v) in [Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(9u64)].into_iter().enumerate() {
        let c = Constant { n: 100, value: v };
        let params = generate_parameters(c.clone(), &mut rng(3 + i as u64), &NoProgress).unwrap();
        let s = synthesize(c.clone()).unwrap();
        let (z, o, _) = s.aux_classes.counts();
        assert_eq!((z == 100, o == 100), (v == Scalar::ZERO, v == Scalar::ONE));
        prove_and_check(&params, vec![c], 4 + i as u64);
    }
}

#[test]
fn deterministic_proofs_with_zero_randomness() {
    let shape = SyntheticShape::for_domain(8);
    let params = generate_parameters(shape.circuit(0), &mut rng(1), &NoProgress).unwrap();
    let prove = || {
        let mut s = vec![synthesize(shape.circuit(5)).unwrap()];
        CpuBackend::new().prove(&params, &mut s, &[ProofRandomness::zero()]).unwrap().proofs[0]
    };
    assert_eq!(prove(), prove());
}

#[test]
fn mismatched_parameters_and_randomness_are_errors() {
    let small = SyntheticShape::for_domain(8);
    let params = generate_parameters(small.circuit(0), &mut rng(1), &NoProgress).unwrap();
    let mut other = vec![synthesize(SyntheticShape::for_domain(9).circuit(1)).unwrap()];
    let backend = CpuBackend::new();
    let r = backend.prove(&params, &mut other, &[ProofRandomness::zero()]);
    assert!(matches!(r, Err(ProveError::Shape(_))), "{r:?}");
    let mut one = vec![synthesize(small.circuit(1)).unwrap()];
    let r = backend.prove(&params, &mut one, &[]);
    assert!(matches!(r, Err(ProveError::RandomnessCount { circuits: 1, randomness: 0 })));
    // Proving the same synthesized circuit twice: refused, its a/b/c were scratch.
    backend.prove(&params, &mut one, &[ProofRandomness::zero()]).unwrap();
    let r = backend.prove(&params, &mut one, &[ProofRandomness::zero()]);
    assert!(matches!(r, Err(ProveError::Consumed { index: 0 })), "{r:?}");
    let mut sha = vec![synthesize(Sha256Preimage { preimage: vec![1, 2, 3] }).unwrap()];
    assert!(backend.prove(&params, &mut sha, &[ProofRandomness::zero()]).is_err());
}
