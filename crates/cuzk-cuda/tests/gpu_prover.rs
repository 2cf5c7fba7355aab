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

/// Two callers at once (one's upload overlapping the other's compute, through the two
/// staging slots and the backend's device lock), a, b, c in pinned buffers, each
/// circuit proven twice: every proof must equal the CPU's with r = s = 0, which also
/// shows that proving leaves a, b, c unchanged (`keeps_evaluations`).
#[test]
#[ignore = "needs a CUDA GPU"]
fn concurrent_callers_with_pinned_buffers_get_the_cpu_proofs() {
    use cuzk_cuda::PinnedScalars;
    use cuzk_groth16::synthesis::{synthesize_into, EvalBuffers};
    let Some(g) = common::gpu() else { return };
    let backend = CudaBackend::new(g.clone());
    assert!(backend.keeps_evaluations());
    let log_n = 12;
    let shape = SyntheticShape::for_domain(log_n);
    let params = generate_parameters(shape.circuit(0), &mut ChaCha20Rng::seed_from_u64(0x9b0), &NoProgress).unwrap();
    let seeds: Vec<u64> = (1..=6).collect();
    let zero = [ProofRandomness::zero()];
    let want: Vec<_> = seeds
        .iter()
        .map(|&s| CpuBackend::new().prove(&params, &mut synthesize_many(vec![shape.circuit(s)]).unwrap(), &zero).unwrap().proofs[0])
        .collect();
    let n = shape.domain_size();
    let pinned = || -> Box<dyn cuzk_groth16::synthesis::EvalStorage> { Box::new(PinnedScalars::new(&g, n).unwrap()) };
    let got: Vec<Vec<_>> = std::thread::scope(|scope| {
        let workers: Vec<_> = seeds
            .chunks(3)
            .map(|chunk| {
                let (backend, params, shape) = (&backend, &params, &shape);
                scope.spawn(move || {
                    let mut proofs = Vec::new();
                    for &s in chunk {
                        let buffers = EvalBuffers { a: pinned(), b: pinned(), c: pinned() };
                        let mut c = synthesize_into(shape.circuit(s), buffers).unwrap();
                        for round in 0..2 {
                            if round > 0 {
                                c.reuse_evaluations(backend).unwrap();
                            }
                            let out = backend.prove(params, std::slice::from_mut(&mut c), &zero).unwrap();
                            let d = out.device.expect("a device report");
                            assert_eq!(d.host_syncs, 1, "one host wait per partition");
                            assert!(d.busy <= d.held, "kernel time {:?} above the time held {:?}", d.busy, d.held);
                            proofs.push((s, out.proofs[0]));
                        }
                    }
                    proofs
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let got: Vec<_> = got.into_iter().flatten().collect();
    assert_eq!(got.len(), 12);
    for (s, p) in got {
        assert_eq!(p, want[s as usize - 1], "witness {s}: a GPU proof differs from the CPU's");
    }
    eprintln!("2^{log_n}: 12 proofs from two threads (pinned a, b, c, each circuit twice) equal the CPU's");
}
