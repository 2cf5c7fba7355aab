//! PoRep C2 of the 2 KiB fixture sector: cuzk (decode with the vanilla check,
//! synthesis, CPU proving, filecoin-proofs' verify_seal) against filecoin-proofs' own
//! `seal_commit_phase2` (bellperson on the CPU; its synthesis, proving and
//! verification are one call), same machine, same parameter file, alternating runs
//! after one warm-up each. Every proof is checked by verify_seal.
//!
//! Run: cargo bench -p cuzk-filecoin --bench c2_vs_filecoin_proofs -- [reps]

use std::time::{Duration, Instant};

use cuzk_filecoin::fixtures::fixtures_2k;
use cuzk_filecoin::ids::{porep_config, prover_id};
use cuzk_filecoin::{InputChecks, SealProof};
use cuzk_groth16::format::{read_params, PointCheck};
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::{CpuBackend, ProofRandomness, ProvingBackend};
use filecoin_proofs::{SealCommitPhase1Output, SectorShape2KiB};
use rand::SeedableRng;
use storage_proofs_core::sector::SectorId;

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

fn main() {
    let reps: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(3);
    let f = fixtures_2k().expect("fixtures");
    let p = &f.porep;
    let cfg = porep_config(SealProof::from_registered(p.registered_proof).unwrap()).unwrap();
    // filecoin-proofs' own C1 type, from the api-shaped JSON the fixture holds.
    let mut api: serde_json::Value = serde_json::from_slice(&p.c1).unwrap();
    let vanilla = api["vanilla_proofs"]["StackedDrg2KiBV1"].take();
    api["vanilla_proofs"] = vanilla;
    // (Its C1 type is not Clone: parsed again for every run, outside the timing.)
    let c1 = || -> SealCommitPhase1Output<SectorShape2KiB> { serde_json::from_value(api.clone()).unwrap() };

    let t = Instant::now();
    let params = read_params(&cuzk_filecoin::Circuit::from_id("porep-2k").unwrap().params_path(&f.param_dir).unwrap(), PointCheck::OnCurve).unwrap();
    println!("parameters read by cuzk in {:.2} s (domain {})", t.elapsed().as_secs_f64(), params.domain_size());
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let (mut decode, mut synth, mut prove, mut verify) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for rep in 0..=reps {
        // cuzk
        let t0 = Instant::now();
        let job = p.request().decode(InputChecks::Full).unwrap();
        let t1 = Instant::now();
        let mut c = job.synthesize(0, EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) }).unwrap();
        let t2 = Instant::now();
        let out = CpuBackend::new().prove(&params, std::slice::from_mut(&mut c), &[ProofRandomness::random(&mut rng)]).unwrap();
        let t3 = Instant::now();
        let proof = out.proofs[0].to_bytes();
        job.verify(&proof).expect("verify_seal accepts cuzk's proof");
        let t4 = Instant::now();
        // filecoin-proofs
        let input = c1();
        let t5 = Instant::now();
        let fp = filecoin_proofs::seal_commit_phase2::<SectorShape2KiB>(&cfg, input, prover_id(p.miner_id), SectorId::from(p.sector_number)).unwrap();
        let t6 = Instant::now();
        assert!(p.filecoin_proofs_accepts(&fp.proof, p.comm_r, p.seed));
        println!(
            "{} cuzk: decode {:.2} s, synthesis {:.2} s, proving {:.2} s, verify_seal {:.2} s, total {:.2} s | filecoin-proofs seal_commit_phase2 {:.2} s",
            if rep == 0 { "warm-up" } else { "run    " },
            (t1 - t0).as_secs_f64(),
            (t2 - t1).as_secs_f64(),
            (t3 - t2).as_secs_f64(),
            (t4 - t3).as_secs_f64(),
            (t4 - t0).as_secs_f64(),
            (t6 - t5).as_secs_f64()
        );
        if rep > 0 {
            decode.push(t1 - t0);
            synth.push(t2 - t1);
            prove.push(t3 - t2);
            verify.push(t4 - t3);
            ours.push(t4 - t0);
            theirs.push(t6 - t5);
        }
    }
    let (o, t) = (median(ours), median(theirs));
    println!(
        "median of {reps}: cuzk {o:.2} s (decode {:.2}, synthesis {:.2}, proving {:.2}, verify_seal {:.2}); filecoin-proofs {t:.2} s; ratio cuzk/filecoin-proofs {:.3}",
        median(decode),
        median(synth),
        median(prove),
        median(verify),
        o / t
    );
}
