//! Interoperability with bellperson 0.26, in both directions: parameter files, proofs
//! and verifying keys travel between the two implementations byte for byte.

mod common;

use bellperson::groth16 as bp;
use blstrs::{Bls12, Scalar};
use common::{sha256_bytes, Sha256Preimage};
use cuzk_groth16::format::{decode_params, decode_vk, write_params, write_vk, PointCheck};
use cuzk_groth16::generator::generate_parameters;
use cuzk_groth16::synthetic::SyntheticShape;
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{synthesize, CpuBackend, NoProgress, Proof, ProofRandomness, ProvingBackend};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn bp_proof_bytes(p: &bp::Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::new();
    p.write(&mut v).unwrap();
    v
}

/// Parameters from cuzk's setup load in bellperson; bellperson's prover then makes
/// proofs that both verifiers accept, and cuzk's proofs pass bellperson's verifier.
fn cuzk_params_into_bellperson<C>(circuit: impl Fn(u64) -> C, seed: u64)
where
    C: bellpepper_core::Circuit<Scalar> + Send,
{
    let params = generate_parameters(circuit(0), &mut rng(seed), &NoProgress).unwrap();
    let mut bytes = Vec::new();
    write_params(&mut bytes, &params).unwrap();
    let bp_params = bp::Parameters::<Bls12>::read(&bytes[..], true).expect("bellperson reads our params");
    let bp_pvk = bp::prepare_verifying_key(&bp_params.vk);
    let pvk = PreparedVerifyingKey::new(&params.vk);

    // bellperson proves with our parameters.
    let bp_proof = bp::create_random_proof(circuit(1), &bp_params, &mut rng(seed + 1)).unwrap();
    let inputs = synthesize(circuit(1)).unwrap().input[1..].to_vec();
    assert!(bp::verify_proof(&bp_pvk, &bp_proof, &inputs).unwrap());
    let ours = Proof::from_bytes(&bp_proof_bytes(&bp_proof)).unwrap();
    assert!(verify_proof(&pvk, &ours, &inputs).unwrap(), "cuzk verifies bellperson's proof");

    // cuzk proves; bellperson verifies (through the byte encoding).
    let mut s = vec![synthesize(circuit(2)).unwrap()];
    let inputs = s[0].input[1..].to_vec();
    let out = CpuBackend::new().prove(&params, &mut s, &[ProofRandomness::random(&mut rng(seed + 2))]).unwrap();
    let bp_proof = bp::Proof::<Bls12>::read(&out.proofs[0].to_bytes()[..]).unwrap();
    assert!(bp::verify_proof(&bp_pvk, &bp_proof, &inputs).unwrap(), "bellperson verifies cuzk's proof");
    let mut wrong = inputs.clone();
    wrong[0] += Scalar::from(1u64);
    assert!(!bp::verify_proof(&bp_pvk, &bp_proof, &wrong).unwrap());

    // Our .vk encoding is bellperson's.
    let mut vk_bytes = Vec::new();
    write_vk(&mut vk_bytes, &params.vk).unwrap();
    let mut bp_vk_bytes = Vec::new();
    bp_params.vk.write(&mut bp_vk_bytes).unwrap();
    assert_eq!(vk_bytes, bp_vk_bytes);
}

/// Parameters from bellperson's setup load in cuzk; cuzk's proofs verify with both.
fn bellperson_params_into_cuzk<C>(circuit: impl Fn(u64) -> C, seed: u64)
where
    C: bellpepper_core::Circuit<Scalar> + Send,
{
    let bp_params = bp::generate_random_parameters::<Bls12, _, _>(circuit(0), &mut rng(seed)).unwrap();
    let mut bytes = Vec::new();
    bp_params.write(&mut bytes).unwrap();
    let params = decode_params(&bytes, PointCheck::Subgroup).expect("cuzk reads bellperson's params");
    let mut vk_bytes = Vec::new();
    bp_params.vk.write(&mut vk_bytes).unwrap();
    assert_eq!(decode_vk(&vk_bytes, PointCheck::Subgroup).unwrap(), params.vk);
    // Writing back gives the same bytes.
    let mut again = Vec::new();
    write_params(&mut again, &params).unwrap();
    assert!(again == bytes, "re-encoding bellperson's params changes them");

    let mut s = vec![synthesize(circuit(3)).unwrap()];
    let inputs = s[0].input[1..].to_vec();
    let out = CpuBackend::new().prove(&params, &mut s, &[ProofRandomness::random(&mut rng(seed + 3))]).unwrap();
    let pvk = PreparedVerifyingKey::new(&params.vk);
    assert!(verify_proof(&pvk, &out.proofs[0], &inputs).unwrap());
    let bp_proof = bp::Proof::<Bls12>::read(&out.proofs[0].to_bytes()[..]).unwrap();
    assert!(bp::verify_proof(&bp::prepare_verifying_key(&bp_params.vk), &bp_proof, &inputs).unwrap());
}

#[test]
fn synthetic_cuzk_params_into_bellperson() {
    let shape = SyntheticShape::for_domain(10);
    cuzk_params_into_bellperson(|w| shape.circuit(w), 1);
}

#[test]
fn synthetic_bellperson_params_into_cuzk() {
    let shape = SyntheticShape::for_domain(10);
    bellperson_params_into_cuzk(|w| shape.circuit(w), 2);
}

#[test]
fn sha256_both_directions() {
    let circuit = |w: u64| Sha256Preimage { preimage: w.to_le_bytes().to_vec() };
    cuzk_params_into_bellperson(circuit, 3);
    bellperson_params_into_cuzk(circuit, 4);
    assert_eq!(synthesize(circuit(7)).unwrap().input[1..], Sha256Preimage::public_inputs(&sha256_bytes(&7u64.to_le_bytes()))[..]);
}
