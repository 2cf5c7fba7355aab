//! The GPU proving backend against the CPU one: with r = s = 0 a proof is a function of
//! the parameters and the witness only, so both backends must return the same bytes;
//! with random r, s the GPU's proofs must verify and tampered ones must not.

mod common;

use blstrs::G1Projective;
use cuzk_cuda::CudaBackend;
use cuzk_groth16::generator::generate_parameters;
use cuzk_groth16::synthetic::SyntheticShape;
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{synthesize_many, CpuBackend, NoProgress, ProofRandomness, ProvingBackend};
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn check_domain(backend: &CudaBackend, log_n: u32) {
    let shape = SyntheticShape::for_domain(log_n);
    let mut rng = ChaCha20Rng::seed_from_u64(0x9a0 + log_n as u64);
    let params = generate_parameters(shape.circuit(0), &mut rng, &NoProgress).unwrap();
    let circuits = || vec![shape.circuit(1), shape.circuit(2)];

    let zero = [ProofRandomness::zero(); 2];
    let cpu = CpuBackend::new().prove(&params, &mut synthesize_many(circuits()).unwrap(), &zero).unwrap();
    let gpu = backend.prove(&params, &mut synthesize_many(circuits()).unwrap(), &zero).unwrap();
    assert_eq!(gpu.proofs, cpu.proofs, "2^{log_n}: GPU and CPU proofs differ with r = s = 0");

    let mut synth = synthesize_many(circuits()).unwrap();
    let inputs: Vec<_> = synth.iter().map(|s| s.input[1..].to_vec()).collect();
    let rs = [ProofRandomness::random(&mut rng), ProofRandomness::random(&mut rng)];
    let out = backend.prove(&params, &mut synth, &rs).unwrap();
    let pvk = PreparedVerifyingKey::new(&params.vk);
    for (p, x) in out.proofs.iter().zip(&inputs) {
        assert!(verify_proof(&pvk, p, x).unwrap(), "2^{log_n}: a GPU proof does not verify");
    }
    let mut bad = out.proofs[0];
    bad.c = (G1Projective::from(bad.c) + G1Projective::generator()).to_affine();
    assert!(!verify_proof(&pvk, &bad, &inputs[0]).unwrap(), "2^{log_n}: a tampered proof verifies");
    eprintln!(
        "2^{log_n}: GPU proofs equal the CPU's (r = s = 0) and verify; stages: {:?}",
        out.timings
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_proofs_equal_cpu_proofs_and_verify() {
    let Some(g) = common::gpu() else { return };
    let backend = CudaBackend::new(g);
    for log_n in [6u32, 10, 16] {
        check_domain(&backend, log_n);
    }
}
