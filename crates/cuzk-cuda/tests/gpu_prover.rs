//! The GPU proving backend against the CPU one: with r = s = 0 a proof is a function of
//! the parameters and the witness only, so both backends must return the same bytes;
//! with random r, s the GPU's proofs must verify and tampered ones must not.

mod common;

use blstrs::{G1Projective, Scalar};
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
    eprintln!("2^{log_n}: GPU proofs equal the CPU's (r = s = 0) and verify; stages: {:?}", out.timings);
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
    // The device holds what the plan counts (its parts besides the pool's MSM buffers
    // and the margin), after two callers took both slots: nothing grew past it.
    let plan = backend.plan_for(&params, None).unwrap();
    let counted = plan.total_bytes - plan.msm_small_bytes - plan.margin_bytes;
    assert_eq!(plan.slots, 2);
    assert_eq!(backend.device_bytes_held().unwrap(), counted, "the device holds other than the plan counts: {plan:?}");
    eprintln!("2^{log_n}: 12 proofs from two threads (pinned a, b, c, each circuit twice) equal the CPU's; {counted} bytes held as planned");
}

/// The GPU's fixed-base multiplications against the CPU's (independent tables: 8-bit
/// windows there, 16-bit here) for every point: random scalars over more than one chunk
/// (2^22), and the edge values 0, 1, r − 1 and digit boundaries, some inside a run of
/// the batch inversion.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_fixed_base_multiplication_matches_the_cpu() {
    use cuzk_cuda::GpuFixedBase;
    use cuzk_groth16::generator::{CpuFixedBase, FixedBaseMul};
    use ff::Field;
    let Some(g) = common::gpu() else { return };
    let gpu = GpuFixedBase::new(g).unwrap();
    let cpu = CpuFixedBase::new();
    let edge = [
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        Scalar::from(0xffffu64),
        Scalar::from(0x1_0000u64),
        Scalar::from(u64::MAX),
        Scalar::ZERO,
        Scalar::from(2u64).pow_vartime([254u64]),
    ];
    let mut g1_scalars = common::random_scalars((1 << 22) + 37, 0xf1);
    for (i, e) in edge.iter().enumerate() {
        g1_scalars[i * 3] = *e;
        g1_scalars[(1 << 22) + i] = *e;
    }
    let t = std::time::Instant::now();
    let got = gpu.g1(&g1_scalars, &NoProgress).unwrap();
    let gpu_secs = t.elapsed().as_secs_f64();
    let want = cpu.g1(&g1_scalars, &NoProgress).unwrap();
    assert_eq!(got.len(), want.len());
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("G1 point {i} differs (scalar {:?})", g1_scalars[i]);
    }
    let mut g2_scalars = common::random_scalars(20_011, 0xf2);
    g2_scalars[..edge.len()].copy_from_slice(&edge);
    let got2 = gpu.g2(&g2_scalars, &NoProgress).unwrap();
    assert_eq!(got2, cpu.g2(&g2_scalars, &NoProgress).unwrap(), "G2 points differ");
    assert!(gpu.g1(&[], &NoProgress).unwrap().is_empty());
    eprintln!("fixed-base: {} G1 points ({gpu_secs:.3} s on the GPU) and {} G2 points equal the CPU's", got.len(), got2.len());
}

/// A setup whose multiplications run on the GPU gives the CPU's parameters for the same
/// secrets, and GPU proofs made with them verify.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_setup_equals_cpu_setup() {
    use cuzk_cuda::GpuFixedBase;
    use cuzk_groth16::generator::{generate_parameters_with, CpuFixedBase, ToxicWaste};
    let Some(g) = common::gpu() else { return };
    let gpu = GpuFixedBase::new(g.clone()).unwrap();
    for log_n in [10u32, 14] {
        let shape = SyntheticShape::for_domain(log_n);
        let tw = ToxicWaste::random(&mut ChaCha20Rng::seed_from_u64(0x5e7 + log_n as u64));
        let on_gpu = generate_parameters_with(shape.circuit(0), &tw, &gpu, &NoProgress).unwrap();
        let on_cpu = generate_parameters_with(shape.circuit(0), &tw, &CpuFixedBase::new(), &NoProgress).unwrap();
        assert_eq!(on_gpu.vk, on_cpu.vk, "2^{log_n}: verifying keys differ");
        assert!(on_gpu == on_cpu, "2^{log_n}: queries differ");
        let mut rng = ChaCha20Rng::seed_from_u64(0x5e8);
        let mut synth = synthesize_many(vec![shape.circuit(7)]).unwrap();
        let inputs = synth[0].input[1..].to_vec();
        let out = CudaBackend::new(g.clone()).prove(&on_gpu, &mut synth, &[ProofRandomness::random(&mut rng)]).unwrap();
        assert!(verify_proof(&PreparedVerifyingKey::new(&on_gpu.vk), &out.proofs[0], &inputs).unwrap());
        eprintln!("2^{log_n}: GPU setup equals the CPU's; its GPU proof verifies");
    }
}

/// Circuits with a witness charge proven from two threads at once (so one call finds the
/// device held and frees its witness before waiting for it): every charge is handed its aux vector exactly once,
/// its aux and a, b, c are gone afterwards, it cannot be proven again, and the proofs
/// equal the CPU's with r = s = 0.
#[test]
#[ignore = "needs a CUDA GPU"]
fn charged_witnesses_are_freed_and_give_the_cpu_proofs() {
    use cuzk_groth16::synthesis::WitnessCharge;
    /// Records its circuit's index when the witness is freed, with the aux vector's length.
    struct Charge(usize, std::sync::Arc<std::sync::Mutex<Vec<(usize, usize)>>>);
    impl WitnessCharge for Charge {
        fn witness_freed(self: Box<Self>, aux: Vec<Scalar>) {
            self.1.lock().unwrap().push((self.0, aux.len()));
        }
    }
    let Some(g) = common::gpu() else { return };
    let backend = CudaBackend::new(g);
    let shape = SyntheticShape::for_domain(14);
    let params = generate_parameters(shape.circuit(0), &mut ChaCha20Rng::seed_from_u64(0x9c0), &NoProgress).unwrap();
    let zero = [ProofRandomness::zero(); 2];
    let seeds: Vec<u64> = (1..=8).collect();
    let want: Vec<_> = seeds
        .chunks(2)
        .flat_map(|s| {
            CpuBackend::new().prove(&params, &mut synthesize_many(vec![shape.circuit(s[0]), shape.circuit(s[1])]).unwrap(), &zero).unwrap().proofs
        })
        .collect();
    let got: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = seeds
            .chunks(4)
            .map(|chunk| {
                let (backend, params, shape) = (&backend, &params, &shape);
                scope.spawn(move || {
                    let mut proofs = Vec::new();
                    for pair in chunk.chunks(2) {
                        let mut circuits = synthesize_many(vec![shape.circuit(pair[0]), shape.circuit(pair[1])]).unwrap();
                        let released = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
                        for (i, c) in circuits.iter_mut().enumerate() {
                            c.charge_witness(Charge(i, released.clone()));
                        }
                        let aux: Vec<(usize, usize)> = circuits.iter().enumerate().map(|(i, c)| (i, c.aux.len())).collect();
                        let out = backend.prove(params, &mut circuits, &zero).unwrap();
                        assert_eq!(*released.lock().unwrap(), aux, "each circuit released once, in order, its aux vector handed back");
                        for c in &circuits {
                            assert!(c.aux.is_empty() && c.a.as_slice().is_empty(), "the witness is still held");
                        }
                        assert!(backend.prove(params, &mut circuits, &zero).is_err(), "a released circuit was proven again");
                        proofs.extend(out.proofs);
                    }
                    proofs
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(got, want, "proofs of charged circuits differ from the CPU's");
    eprintln!("2^14: 8 proofs of charged circuits from two threads equal the CPU's; every witness released");
}

/// A parameter set read from its file onto the GPU and decoded there (through small
/// staging buffers, so every query crosses many chunk boundaries) proves exactly as the
/// same set decoded on the host, points at infinity included; a malformed point is
/// reported with the host reader's error (section, index, byte offset, reason), and a
/// file that changed since its header was read is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn parameters_read_from_a_file_onto_the_gpu_prove_as_on_the_host() {
    use cuzk_cuda::params_file::{load_queries_staged, STAGING_BYTES};
    use cuzk_groth16::format::{read_params_layout, save, Section};
    use cuzk_groth16::params::QueryPoints;
    use cuzk_groth16::ParameterSet;
    let Some(g) = common::gpu() else { return };
    let shape = SyntheticShape::for_domain(12);
    let params = generate_parameters(shape.circuit(0), &mut ChaCha20Rng::seed_from_u64(0xf11e), &NoProgress).unwrap();
    // Points at infinity in H and L (the encoding with only the infinity flag set).
    let (vk, points) = params.into_parts();
    let QueryPoints::Host(mut q) = points else { panic!("a setup's points are in host memory") };
    q.h[0] = blstrs::G1Affine::default();
    q.l[3] = blstrs::G1Affine::default();
    let host = ParameterSet::new(vk, q.h, q.l, q.a, q.b_g1, q.b_g2);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.params");
    save(&host, &path).unwrap();
    let in_file = read_params_layout(&path).unwrap();
    assert_eq!(in_file.lens(), host.lens());
    assert!(in_file.size_bytes() < host.size_bytes() / 4, "only the header and the input rows stay on the host");
    assert!(CpuBackend::new().prove(&in_file, &mut synthesize_many(vec![shape.circuit(1)]).unwrap(), &[ProofRandomness::zero()]).is_err());

    let zero = [ProofRandomness::zero(); 2];
    let circuits = || synthesize_many(vec![shape.circuit(1), shape.circuit(2)]).unwrap();
    let want = CpuBackend::new().prove(&host, &mut circuits(), &zero).unwrap().proofs;
    let backend = CudaBackend::new(g.clone());
    let before = g.available_memory().unwrap();
    backend.load_params(&in_file, &NoProgress).unwrap();
    let loaded = g.available_memory().unwrap();
    assert!(before - loaded >= in_file.points_bytes(), "{before} → {loaded} bytes available; the points take {}", in_file.points_bytes());
    assert_eq!(backend.prove(&in_file, &mut circuits(), &zero).unwrap().proofs, want, "file → GPU proofs differ from the CPU's");
    assert_eq!(backend.prove(&host, &mut circuits(), &zero).unwrap().proofs, want, "host → GPU proofs differ from the CPU's");
    // Released: the points' memory is available again (the proofs' scratch stays pooled).
    let proved = g.available_memory().unwrap();
    backend.release_params(in_file.id());
    g.context().synchronize().unwrap();
    let released = g.available_memory().unwrap();
    assert!(released >= proved + in_file.points_bytes(), "{proved} → {released} bytes available after the release");

    let QueryPoints::File(f) = in_file.points() else { panic!("read_params_layout leaves the points in the file") };
    // Staging of 10 G2 / 20 G1 points: many chunks per query, the last one partial.
    load_queries_staged(&g, f, 1920, &NoProgress).unwrap();
    assert!(load_queries_staged(&g, f, 1000, &NoProgress).is_err(), "staging must hold whole points");
    const _: () = assert!(STAGING_BYTES % 192 == 0, "staging must hold whole points");

    // Each corruption, read with fresh staging: the host reader's error for that point.
    let clean = std::fs::read(&path).unwrap();
    let at = |s: &Section, i: usize| s.point_offset(i) as usize;
    let l = &f.layout;
    /// The error's start, where the damaged point lies, and the damage done to its bytes.
    type Corruption<'a> = (&'a str, usize, Box<dyn Fn(&mut [u8])>);
    let cases: Vec<Corruption> = vec![
        ("section l, point 5", at(&l.l, 5), Box::new(|b| b[90] ^= 1)),
        ("section b_g2, point 1", at(&l.b_g2, 1), Box::new(|b| b[0] |= 0x80)),
        ("section h, point 2", at(&l.h, 2), Box::new(|b| b[0] = 0x40)),
        (
            "section a, point 7",
            at(&l.a, 7),
            Box::new(|b| {
                b[0] = 0x1f;
                b[1..48].fill(0xff)
            }),
        ),
        ("section b_g1, point 0", at(&l.b_g1, 0), Box::new(|b| b[0] |= 0x20)),
    ];
    for (want, offset, corrupt) in cases {
        let mut bytes = clean.clone();
        corrupt(&mut bytes[offset..]);
        std::fs::write(&path, &bytes).unwrap();
        let e = load_queries_staged(&g, f, 1920, &NoProgress).err().unwrap_or_else(|| panic!("{want}: accepted"));
        let e = e.to_string();
        assert!(e.contains(want) && e.contains(&format!("byte offset {offset}")), "{want}: {e}");
        assert!(!e.contains("decoder bug"), "the device and host decoders disagree: {e}");
        eprintln!("rejected: {e}");
    }
    let mut longer = clean.clone();
    longer.push(0);
    std::fs::write(&path, &longer).unwrap();
    let e = load_queries_staged(&g, f, 1920, &NoProgress).err().expect("a changed file is refused").to_string();
    assert!(e.contains("was it replaced"), "{e}");
}

/// Streamed points (pinned host memory, the smallest chunk buffers, so that H, L, A and
/// B each run in several chunks with ragged ends) give the same proofs as resident ones
/// with r = s = 0, from host points and from a file; random r, s verify. The file's
/// points decoded through a staging buffer of ten G2 points equal those decoded in one
/// piece, and a malformed point is reported as the host reader reports it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streamed_parameters_prove_as_resident_ones() {
    use cuzk_cuda::msm::streamed::MIN_CHUNK_BYTES;
    use cuzk_cuda::params_file::{load_queries_to_host, STAGING_BYTES};
    use cuzk_cuda::queries::{shared, StreamedQueries};
    use cuzk_cuda::{GpuError, GpuFixedBase, Overrides};
    use cuzk_groth16::format::{read_params_layout, save};
    use cuzk_groth16::generator::{generate_parameters_with, ToxicWaste};
    use cuzk_groth16::params::QueryPoints;
    let Some(g) = common::gpu() else { return };
    let log_n = 18;
    let shape = SyntheticShape::for_domain(log_n);
    let tw = ToxicWaste::random(&mut ChaCha20Rng::seed_from_u64(0x57e));
    let params = generate_parameters_with(shape.circuit(0), &tw, &GpuFixedBase::new(g.clone()).unwrap(), &NoProgress).unwrap();
    let n = params.lens();
    eprintln!("2^{log_n}: H {} L {} A {} B {} points; G1 chunks of {} points", n.h, n.l, n.a, n.b_g1, MIN_CHUNK_BYTES / 96);
    assert!(
        n.h > MIN_CHUNK_BYTES / 96 && n.l > MIN_CHUNK_BYTES / 96 && n.a > MIN_CHUNK_BYTES / 96 && n.b_g2 > MIN_CHUNK_BYTES / 192,
        "every query must take more than one chunk (B in its G2 half)"
    );

    let zero = [ProofRandomness::zero(); 2];
    let circuits = || synthesize_many(vec![shape.circuit(1), shape.circuit(2)]).unwrap();
    let want = CudaBackend::new(g.clone()).prove(&params, &mut circuits(), &zero).unwrap().proofs;
    let stream = |chunk_bytes| Overrides { chunk_bytes: Some(chunk_bytes), ..Overrides::default() };
    let streamed = CudaBackend::new(g.clone()).with_overrides(stream(MIN_CHUNK_BYTES)).unwrap();
    let out = streamed.prove(&params, &mut circuits(), &zero).unwrap();
    assert_eq!(out.proofs, want, "streamed host points: proofs differ from the resident ones");
    let d = out.device.unwrap();
    assert!(d.bytes_up as usize > 2 * params.points_bytes(), "two partitions stream every point: {} bytes up", d.bytes_up);
    assert_eq!(d.host_syncs, 2, "one host wait per partition");
    // What the engine charges its host budget for: the pinned copy, only when streamed.
    assert_eq!(streamed.host_bytes_for(&params), params.points_bytes() as u64);
    assert_eq!(CudaBackend::new(g.clone()).host_bytes_for(&params), 0, "the set fits: nothing pinned");

    // Another backend (as another GPU's would) shares the pinned copy; once every
    // holder has released the set, it is loaded anew.
    let other = CudaBackend::new(g.clone()).with_overrides(stream(2 * MIN_CHUNK_BYTES)).unwrap();
    assert_eq!(other.prove(&params, &mut circuits(), &zero).unwrap().proofs, want, "larger chunks: proofs differ");
    let again = || shared(params.id(), || Err::<StreamedQueries, _>(GpuError::Invalid("loaded again".into())));
    assert!(again().unwrap().1, "the second backend did not share the pinned points");
    other.release_params(params.id());
    assert!(again().is_ok(), "released by one holder only: still shared");

    let mut synth = circuits();
    let inputs: Vec<_> = synth.iter().map(|s| s.input[1..].to_vec()).collect();
    let mut rng = ChaCha20Rng::seed_from_u64(0x57f);
    let rs = [ProofRandomness::random(&mut rng), ProofRandomness::random(&mut rng)];
    let pvk = PreparedVerifyingKey::new(&params.vk);
    for (p, x) in streamed.prove(&params, &mut synth, &rs).unwrap().proofs.iter().zip(&inputs) {
        assert!(verify_proof(&pvk, p, x).unwrap(), "a streamed proof does not verify");
    }
    streamed.release_params(params.id());
    assert!(again().is_err(), "released by every holder: the pinned points must be gone");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.params");
    save(&params, &path).unwrap();
    let in_file = read_params_layout(&path).unwrap();
    assert_eq!(streamed.prove(&in_file, &mut circuits(), &zero).unwrap().proofs, want, "streamed file points: proofs differ");
    // Chosen without asking: the set fits, so it stays on the device.
    assert_eq!(CudaBackend::new(g.clone()).prove(&in_file, &mut circuits(), &zero).unwrap().proofs, want);

    let QueryPoints::File(f) = in_file.points() else { panic!("read_params_layout leaves the points in the file") };
    let whole = load_queries_to_host(&g, f, STAGING_BYTES, &NoProgress).unwrap();
    let pieces = load_queries_to_host(&g, f, 1920, &NoProgress).unwrap();
    assert!(whole.h.bytes().unwrap() == pieces.h.bytes().unwrap() && whole.b_g2.bytes().unwrap() == pieces.b_g2.bytes().unwrap());
    assert!(whole.l.bytes().unwrap() == pieces.l.bytes().unwrap() && whole.a.bytes().unwrap() == pieces.a.bytes().unwrap());
    assert!(whole.b_g1.bytes().unwrap() == pieces.b_g1.bytes().unwrap());
    assert!(load_queries_to_host(&g, f, 1000, &NoProgress).is_err(), "staging must hold whole points");
    let mut bytes = std::fs::read(&path).unwrap();
    let k = n.b_g2 - 3;
    let offset = f.layout.b_g2.point_offset(k) as usize;
    bytes[offset + 100] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let e = load_queries_to_host(&g, f, 1920, &NoProgress).err().expect("a point off the curve is refused").to_string();
    assert!(e.contains(&format!("section b_g2, point {k}")) && e.contains(&format!("byte offset {offset}")), "{e}");
    eprintln!("2^{log_n}: streamed proofs equal resident ones and verify; rejected: {e}");
}

/// A circuit whose constraints mix random coefficients (and ±1, 2) over inputs and aux
/// values that are mostly 0 and 1, like a Filecoin circuit's: the products' every path.
/// Its random constraints are not satisfied, so its proofs compare but never verify.
struct MixedCircuit {
    constraints: usize,
    seed: u64,
}

impl bellpepper_core::Circuit<Scalar> for MixedCircuit {
    fn synthesize<CS: bellpepper_core::ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), bellpepper_core::SynthesisError> {
        use bellpepper_core::LinearCombination;
        use ff::Field;
        use rand::Rng;
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        let mut vars = vec![cs.alloc_input(|| "x", || Ok(Scalar::from(5u64)))?];
        let coefficients: Vec<Scalar> =
            [Scalar::ONE, -Scalar::ONE, Scalar::from(2u64)].into_iter().chain((0..40).map(|_| Scalar::random(&mut rng))).collect();
        for i in 0..self.constraints {
            let v = match rng.gen_range(0..100) {
                0..=49 => Scalar::ZERO,
                50..=96 => Scalar::ONE,
                _ => Scalar::random(&mut rng),
            };
            let var = cs.alloc(|| format!("v{i}"), || Ok(v))?;
            // Every variable in some constraint: a setup refuses unconstrained ones.
            cs.enforce(|| format!("bind{i}"), |lc| lc + var, |lc| lc + CS::one(), |lc| lc + var);
            vars.push(var);
            let mut lc = || {
                let mut lc = LinearCombination::zero();
                for _ in 0..rng.gen_range(0..6) {
                    let c = coefficients[rng.gen_range(0..coefficients.len()).min(rng.gen_range(0..coefficients.len()))];
                    lc = lc + (c, vars[rng.gen_range(0..vars.len())]);
                }
                lc
            };
            let (a, b, c) = (lc(), lc(), lc());
            cs.enforce(|| format!("c{i}"), |_| a, |_| b, |_| c);
        }
        Ok(())
    }
}

/// a, b, c on the device from the compiled matrices and the compact witness equal the
/// host's products bit for bit (and the expanded witness equals the witness), on the
/// mixed circuit and on C2-shaped synthetic ones.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_products_equal_host_products() {
    use cuzk_cuda::field::DeviceFr;
    use cuzk_cuda::groth16::products::{read_back, DeviceMatrices, DeviceWitness};
    use cuzk_cuda::groth16::row_blocks::{ProductSource, StreamedMatrices};
    use cuzk_cuda::msm::streamed::{BaseChunks, MIN_CHUNK_BYTES};
    use cuzk_groth16::matrices::compile_matrices;
    use cuzk_groth16::synthesis::EvalBuffers;
    use cuzk_groth16::{synthesize_witness, CompactWitness};
    let Some(g) = common::gpu() else { return };
    let check = |name: &str, m: cuzk_groth16::matrices::ConstraintMatrices, w: cuzk_groth16::Witness| {
        let compact = CompactWitness::new(&w);
        let len = m.num_constraints().next_power_of_two();
        let dm = DeviceMatrices::upload(&g, &m).unwrap();
        let dw = DeviceWitness::upload(&g, g.stream(), &compact).unwrap();
        let [a, b, c] = dm.products(&g, &dw, len).unwrap();
        let z: Vec<Scalar> = w.input.iter().chain(&w.aux).copied().collect();
        assert_eq!(dw.to_host(&g).unwrap(), z, "{name}: the expanded witness differs");
        let host = cuzk_groth16::SynthesizedCircuit::from_matrices(
            &m,
            w,
            EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) },
        )
        .unwrap();
        // The same matrices streamed in row blocks (blocks of 4 kB, so even the small
        // circuits take several) through chunk buffers, into vectors holding garbage.
        let streamed = StreamedMatrices::pin(&g, &m, 4096).unwrap();
        let chunks = std::sync::Mutex::new(Some(BaseChunks::new(&g, MIN_CHUNK_BYTES).unwrap()));
        let mut out: Vec<_> = (0..3).map(|_| g.stream().clone_htod(&vec![DeviceFr::default(); len]).unwrap()).collect();
        for v in &mut out {
            let junk: Vec<u8> = vec![0x5a; len * 32];
            // SAFETY: DeviceFr is plain words; the junk is overwritten by the products.
            let mut bytes = unsafe { v.transmute_mut::<u8>(len * 32) }.unwrap();
            g.stream().memcpy_htod(&junk, &mut bytes).unwrap();
        }
        let [sa, sb, sc] = &mut out[..] else { unreachable!() };
        let sent = ProductSource::Streamed(&streamed, &chunks)
            .products_into(&g, g.stream(), &dw.view().unwrap(), [&mut sa.slice_mut(..), &mut sb.slice_mut(..), &mut sc.slice_mut(..)])
            .unwrap();
        assert!(sent >= streamed.bytes, "{name}: {sent} bytes sent for {} of matrices", streamed.bytes);
        let streamed_abc: Vec<_> = out.iter().collect();
        for (i, (what, dev, cpu)) in [("a", &a, &host.a), ("b", &b, &host.b), ("c", &c, &host.c)].into_iter().enumerate() {
            let rows = cpu.as_slice().len();
            for (how, dev) in [("resident", read_back(dev).unwrap()), ("streamed", read_back(streamed_abc[i]).unwrap())] {
                assert_eq!(&dev[..rows], cpu.as_slice(), "{name}: {what} differs ({how} matrices)");
                assert!(dev[rows..].iter().all(|x| *x == Scalar::from(0u64)), "{name}: {what} is not zero past the rows ({how} matrices)");
            }
        }
        eprintln!(
            "{name}: {} rows, {} non-zeros, {} coefficients; witness {} bytes compact of {} full; {} row blocks streamed; a, b, c equal the host's",
            m.num_constraints(),
            m.non_zeros(),
            m.dictionary.len(),
            dw.bytes,
            z.len() * 32,
            streamed.block_count()
        );
    };
    for (constraints, seed) in [(1usize, 1u64), (300, 2), (70_000, 3)] {
        let m = compile_matrices(MixedCircuit { constraints, seed }).unwrap();
        let w = synthesize_witness(MixedCircuit { constraints, seed }, 0).unwrap();
        check(&format!("mixed {constraints}"), m, w);
    }
    for log_n in [10u32, 17] {
        let shape = SyntheticShape::for_domain(log_n);
        check(&format!("synthetic 2^{log_n}"), compile_matrices(shape.circuit(0)).unwrap(), synthesize_witness(shape.circuit(7), 0).unwrap());
    }
}

/// Proofs whose a, b, c the GPU computes from the compiled matrices (synthesis left
/// them pending: only the compact witness goes up) equal the CPU's proofs of the same
/// circuits synthesized in full, byte for byte with r = s = 0; with random r, s those
/// of satisfied circuits verify. Twice over, so the matrices' second use (resident) is covered, and with two
/// callers at once (both staging slots computing products).
#[test]
#[ignore = "needs a CUDA GPU"]
fn proofs_with_products_on_the_device_equal_the_full_synthesis_proofs() {
    use cuzk_groth16::matrices::compile_matrices;
    use cuzk_groth16::{synthesize_witness, Stage, SynthesizedCircuit};
    use std::sync::Arc;
    let Some(g) = common::gpu() else { return };
    let backend = CudaBackend::new(g);
    let mut rng = ChaCha20Rng::seed_from_u64(0x70d);
    let check = |name: &str,
                 params: &cuzk_groth16::ParameterSet,
                 m: Arc<cuzk_groth16::matrices::ConstraintMatrices>,
                 full: Vec<SynthesizedCircuit>,
                 witnesses: Vec<cuzk_groth16::Witness>,
                 satisfied: bool| {
        let inputs: Vec<Vec<Scalar>> = full.iter().map(|c| c.input[1..].to_vec()).collect();
        let zero = vec![ProofRandomness::zero(); full.len()];
        let cpu = CpuBackend::new().prove(params, &mut { full }, &zero).unwrap();
        let pending = |ws: &[cuzk_groth16::Witness]| -> Vec<SynthesizedCircuit> {
            ws.iter().map(|w| SynthesizedCircuit::with_pending_products(m.clone(), w.clone()).unwrap()).collect()
        };
        for round in 0..2 {
            let out = backend.prove(params, &mut pending(&witnesses), &zero).unwrap();
            assert_eq!(out.proofs, cpu.proofs, "{name}, round {round}: products on the device give other proofs");
            let d = out.device.unwrap();
            eprintln!(
                "{name}, round {round}: equal to the CPU's; products {:?}, upload {:?}, {} bytes up",
                out.timings.get(Stage::Products),
                out.timings.get(Stage::Upload),
                d.bytes_up
            );
        }
        // Two callers at once.
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..2).map(|_| s.spawn(|| backend.prove(params, &mut pending(&witnesses), &zero).unwrap().proofs)).collect();
            for r in runs {
                assert_eq!(r.join().unwrap(), cpu.proofs, "{name}: concurrent callers get other proofs");
            }
        });
        // The CPU backend computes pending products on the host: the same proofs.
        assert_eq!(CpuBackend::new().prove(params, &mut pending(&witnesses), &zero).unwrap().proofs, cpu.proofs, "{name}: CPU products");
        if !satisfied {
            return;
        }
        let rs: Vec<_> = witnesses.iter().map(|_| ProofRandomness::random(&mut ChaCha20Rng::seed_from_u64(7))).collect();
        let out = backend.prove(params, &mut pending(&witnesses), &rs).unwrap();
        let pvk = PreparedVerifyingKey::new(&params.vk);
        for (p, x) in out.proofs.iter().zip(&inputs) {
            assert!(verify_proof(&pvk, p, x).unwrap(), "{name}: a proof with products on the device does not verify");
        }
    };
    for log_n in [10u32, 16] {
        let shape = SyntheticShape::for_domain(log_n);
        let params = generate_parameters(shape.circuit(0), &mut rng, &NoProgress).unwrap();
        let m = Arc::new(compile_matrices(shape.circuit(0)).unwrap());
        let seeds = [3u64, 4];
        let full = synthesize_many(seeds.iter().map(|&s| shape.circuit(s)).collect()).unwrap();
        let witnesses = seeds.iter().map(|&s| synthesize_witness(shape.circuit(s), 0).unwrap()).collect();
        check(&format!("synthetic 2^{log_n}"), &params, m, full, witnesses, true);
    }
    let circuit = || MixedCircuit { constraints: 5000, seed: 11 };
    let params = generate_parameters(circuit(), &mut rng, &NoProgress).unwrap();
    let m = Arc::new(compile_matrices(circuit()).unwrap());
    check("mixed 5000", &params, m, synthesize_many(vec![circuit()]).unwrap(), vec![synthesize_witness(circuit(), 0).unwrap()], false);
}

/// The paths a small card's plan takes, forced at small sizes, give the CPU's proofs
/// byte for byte (r = s = 0), from full synthesis and from compiled matrices: one slot,
/// twiddles computed above stage 10, the H MSM in runs, points streamed through the
/// least chunks (list pieces cut at a chunk's bases), the witness's other values left
/// on the host (a window sent per list piece; pending a, b, c computed on the host),
/// the compiled matrices streamed in row blocks, H resident beside streamed points,
/// the streamed points' chunk buffers in the slot's arena after h (the plan's first
/// choice) and outside it. A backend capped far below the set's needs refuses it, saying what it needs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_card_paths_give_the_cpu_proofs() {
    use cuzk_cuda::msm::streamed::MIN_CHUNK_BYTES;
    use cuzk_cuda::{Overrides, Products};
    use cuzk_groth16::matrices::compile_matrices;
    use cuzk_groth16::{synthesize_witness, SynthesizedCircuit};
    use std::sync::Arc;
    let Some(g) = common::gpu() else { return };
    let log_n = 18;
    let shape = SyntheticShape::for_domain(log_n);
    let params = generate_parameters(shape.circuit(0), &mut ChaCha20Rng::seed_from_u64(0x5ca), &NoProgress).unwrap();
    let m = Arc::new(compile_matrices(shape.circuit(0)).unwrap());
    let seeds = [5u64, 6];
    let zero = [ProofRandomness::zero(); 2];
    let want =
        CpuBackend::new().prove(&params, &mut synthesize_many(seeds.iter().map(|&s| shape.circuit(s)).collect()).unwrap(), &zero).unwrap().proofs;
    let pending = || -> Vec<SynthesizedCircuit> {
        seeds
            .iter()
            .map(|&s| SynthesizedCircuit::with_pending_products(m.clone(), synthesize_witness(shape.circuit(s), 0).unwrap()).unwrap())
            .collect()
    };
    let base = Overrides { slots: Some(1), table_log: Some(10), h_piece: Some(70_000), ..Overrides::default() };
    for (name, o) in [
        ("one slot, computed twiddles, H in runs", base),
        ("streamed least chunks", Overrides { chunk_bytes: Some(MIN_CHUNK_BYTES), ..base }),
        ("other values on the host", Overrides { witness_least: true, ..base }),
        ("all of them", Overrides { chunk_bytes: Some(MIN_CHUNK_BYTES), witness_least: true, table_log: Some(12), ..base }),
        ("matrices streamed in row blocks", Overrides { chunk_bytes: Some(MIN_CHUNK_BYTES), stream_matrices: true, ..base }),
        ("H resident beside streamed points", Overrides { chunk_bytes: Some(MIN_CHUNK_BYTES), h_resident: true, ..base }),
        ("chunk buffers outside the slot", Overrides { chunk_bytes: Some(MIN_CHUNK_BYTES), chunks_outside_slot: true, ..base }),
        (
            "matrices streamed, chunk buffers outside the slot",
            Overrides { chunk_bytes: Some(MIN_CHUNK_BYTES), stream_matrices: true, chunks_outside_slot: true, ..base },
        ),
    ] {
        // Planned knowing the matrices (the pending circuits first), as the engine plans.
        let backend = CudaBackend::new(g.clone()).with_overrides(o).unwrap();
        let out = backend.prove(&params, &mut pending(), &zero).unwrap();
        assert_eq!(out.proofs, want, "{name}: compiled matrices give other proofs");
        let full = backend.prove(&params, &mut synthesize_many(seeds.iter().map(|&s| shape.circuit(s)).collect()).unwrap(), &zero).unwrap();
        assert_eq!(full.proofs, want, "{name}: full synthesis gives other proofs");
        let plan = backend.plan_for(&params, Some(&m)).unwrap();
        assert_eq!(plan.chunks_in_slot, o.chunk_bytes.is_some() && !o.chunks_outside_slot, "{name}: {plan:?}");
        eprintln!("2^{log_n}, {name}: equal to the CPU's; {} bytes up; plan {plan:?}", out.device.unwrap().bytes_up);
    }
    // Streamed matrices with two slots and two callers at once: one's products and the
    // other's MSMs share the chunk buffers (or their copy stream and its events, with
    // the MSMs' chunks in the slots).
    for outside in [false, true] {
        let o = Overrides {
            chunk_bytes: Some(MIN_CHUNK_BYTES),
            stream_matrices: true,
            slots: Some(2),
            chunks_outside_slot: outside,
            ..Overrides::default()
        };
        let backend = CudaBackend::new(g.clone()).with_overrides(o).unwrap();
        let plan = backend.plan_for(&params, Some(&m)).unwrap();
        assert!(plan.products == Products::Streamed && plan.chunks_in_slot != outside, "{plan:?}");
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..2).map(|_| s.spawn(|| backend.prove(&params, &mut pending(), &zero).unwrap().proofs)).collect();
            for r in runs {
                assert_eq!(r.join().unwrap(), want, "streamed matrices, two callers, chunks outside the slots {outside}: other proofs");
            }
        });
    }
    // 30 MiB cannot hold a, b, c of 2^18 (25 MB) with everything else.
    let capped = CudaBackend::new(g.clone()).with_memory_limit(Some(30 << 20));
    let e = capped.prove(&params, &mut pending(), &zero).unwrap_err().to_string();
    assert!(e.contains("available") && e.contains("at least"), "{e}");
    eprintln!("capped at 30 MiB: {e}");
}
