//! cuzk's CPU prover against bellperson 0.26's CPU prover, same circuit, same
//! parameters, same process, alternating runs.
//!
//! Usage: `cargo bench -p cuzk-groth16 --bench vs_bellperson -- [LOG_SIZES] [REPS]`
//! (defaults: 16,18,20 and 3). Per size: one setup (cuzk's, read by bellperson from
//! the .params bytes), one warm-up of each prover, then REPS timed runs of each,
//! alternating, each on a fresh witness, every proof verified. Times are wall-clock
//! synthesis + proving; medians are reported, with ratio = cuzk / bellperson.

use std::time::{Duration, Instant};

use bellperson::groth16 as bp;
use blstrs::Bls12;
use cuzk_groth16::format::write_params;
use cuzk_groth16::generator::generate_parameters;
use cuzk_groth16::synthetic::SyntheticShape;
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{synthesize, CpuBackend, NoProgress, Proof, ProofRandomness, ProvingBackend};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

fn main() {
    // `cargo bench` passes `--bench`; ignore flags.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let sizes: Vec<u32> = args
        .first()
        .map(|s| s.split(',').map(|x| x.parse().expect("log sizes: comma-separated integers")).collect())
        .unwrap_or_else(|| vec![16, 18, 20]);
    let reps: usize = args.get(1).map(|s| s.parse().expect("reps: an integer")).unwrap_or(3);
    println!("cuzk CPU vs bellperson 0.26 CPU: {} threads, {reps} timed reps per prover after 1 warm-up", rayon::current_num_threads());
    println!("{:>6} {:>12} {:>14} {:>14} {:>8}", "size", "constraints", "cuzk (s)", "bellperson (s)", "ratio");
    let backend = CpuBackend::new();
    for log in sizes {
        let shape = SyntheticShape::for_domain(log);
        let params = generate_parameters(shape.circuit(0), &mut ChaCha20Rng::seed_from_u64(log as u64), &NoProgress).expect("setup");
        let mut bytes = Vec::new();
        write_params(&mut bytes, &params).expect("encode params");
        let bp_params = bp::Parameters::<Bls12>::read(&bytes[..], false).expect("bellperson reads the params");
        drop(bytes);
        let pvk = PreparedVerifyingKey::new(&params.vk);
        let mut rng = ChaCha20Rng::seed_from_u64(99);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for rep in 0..=reps {
            let w = 2 * rep as u64 + 1;
            let t = Instant::now();
            let mut c = vec![synthesize(shape.circuit(w)).expect("synthesis")];
            let inputs = c[0].input[1..].to_vec();
            let proof = backend.prove(&params, &mut c, &[ProofRandomness::random(&mut rng)]).expect("prove").proofs[0];
            let ours_t = t.elapsed();
            assert!(verify_proof(&pvk, &proof, &inputs).unwrap(), "cuzk proof verifies");
            drop(c);

            let t = Instant::now();
            let bp_proof = bp::create_random_proof(shape.circuit(w + 1), &bp_params, &mut rng).expect("bellperson prove");
            let theirs_t = t.elapsed();
            let mut pb = Vec::new();
            bp_proof.write(&mut pb).unwrap();
            let inputs = synthesize(shape.circuit(w + 1)).unwrap().input[1..].to_vec();
            assert!(verify_proof(&pvk, &Proof::from_bytes(&pb).unwrap(), &inputs).unwrap(), "bellperson proof verifies");
            if rep > 0 {
                ours.push(ours_t);
                theirs.push(theirs_t);
            }
        }
        let (o, t) = (median(ours), median(theirs));
        println!("{:>6} {:>12} {:>14.3} {:>14.3} {:>8.3}", format!("2^{log}"), shape.constraints, o, t, o / t);
        println!("RESULT log_size={log} cuzk_s={o:.4} bellperson_s={t:.4} ratio={:.4}", o / t);
    }
}
