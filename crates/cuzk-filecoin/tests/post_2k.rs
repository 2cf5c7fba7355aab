//! WindowPoSt and WinningPoSt at 2 KiB, end to end through the library: a request
//! decoded from vanilla proofs filecoin-proofs made for sealed sectors, the circuit
//! synthesized and proved by cuzk's CPU backend with parameters from cuzk's setup,
//! and the proof checked by filecoin-proofs' own verifier. Bad requests must give
//! errors naming what is wrong.

use cuzk_filecoin::fixtures::{fixtures_2k, prove_on_cpu, refusal, PostFixture};
use cuzk_filecoin::{CheckedBy, CircuitKind, FilecoinRequest, InputChecks};

fn fixtures() -> &'static cuzk_filecoin::fixtures::Fixtures {
    fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"))
}

#[test]
fn winning_post_2k_is_accepted_by_filecoin_proofs() {
    let f = fixtures();
    let job = f.winning.request().decode(InputChecks::Full).expect("decode");
    assert_eq!(job.circuit().id(), "winning-2k");
    let proof = prove_on_cpu(job.as_ref(), &f.param_dir, 3).expect("proving");
    assert_eq!(proof.len(), 192);
    assert_eq!(job.verify(&proof).expect("filecoin-proofs accepts it"), CheckedBy::FilecoinProofs);

    // The same proof for other public data: filecoin-proofs must reject it.
    let w = &f.winning;
    assert!(w.filecoin_proofs_accepts(&proof, &w.randomness, &w.comm_rs), "filecoin-proofs accepts it when called directly");
    let mut other = w.randomness;
    other[0] ^= 1;
    assert!(!w.filecoin_proofs_accepts(&proof, &other, &w.comm_rs), "another randomness");
    // (The prover id is not among the circuit's public inputs: the chain binds the
    // miner through the sector's commitment and the randomness it draws.)
    let mut tampered = proof.clone();
    tampered[100] ^= 1;
    assert!(!w.filecoin_proofs_accepts(&tampered, &w.randomness, &w.comm_rs), "a tampered proof");
}

#[test]
fn window_post_2k_is_accepted_by_filecoin_proofs() {
    let f = fixtures();
    let job = f.window.request().decode(InputChecks::Full).expect("decode");
    assert_eq!(job.circuit().id(), "wpost-2k");
    let proof = prove_on_cpu(job.as_ref(), &f.param_dir, 3).expect("proving");
    assert_eq!(job.verify(&proof).expect("filecoin-proofs accepts it"), CheckedBy::FilecoinProofs);

    let w = &f.window;
    assert!(w.filecoin_proofs_accepts(&proof, &w.randomness, &w.comm_rs));
    let mut other = w.randomness;
    other[5] ^= 1;
    assert!(!w.filecoin_proofs_accepts(&proof, &other, &w.comm_rs), "another randomness");
    let swapped = [w.comm_rs[1], w.comm_rs[0]];
    assert!(!w.filecoin_proofs_accepts(&proof, &w.randomness, &swapped), "the sectors' commitments swapped");
}

/// The request decoded as a WindowPoSt (`window`) or a WinningPoSt, whatever its
/// registered proof says.
fn decode_err(window: bool, req: &FilecoinRequest) -> String {
    let kind = if window { CircuitKind::WindowPost } else { CircuitKind::WinningPost };
    refusal(FilecoinRequest { kind, ..req.clone() }.decode(InputChecks::Full)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn bad_post_requests_get_clear_errors() {
    let f = fixtures();
    let w: &PostFixture = &f.window;

    // One byte of a vanilla proof changed: either it no longer decodes, or the
    // vanilla proof no longer verifies; both name the proof.
    for at in [0usize, 9, 200, w.vanilla_proofs[0].len() / 2, w.vanilla_proofs[0].len() - 1] {
        let mut proofs = w.vanilla_proofs.clone();
        proofs[0][at] ^= 0x5a;
        let e = decode_err(true, &FilecoinRequest { vanilla_proofs: proofs.to_vec(), ..w.request() });
        assert!(e.contains("vanilla"), "byte {at}: {e}");
    }
    // Wrong sector size for the registered proof.
    let e = decode_err(true, &FilecoinRequest { sector_size: 8 << 20, ..w.request() });
    assert!(e.contains("sector_size"), "{e}");
    // The vanilla proof of another sector: sector 2's proof under sector 1's id.
    let mut proofs = w.vanilla_proofs.clone();
    proofs.swap(0, 1);
    let e = decode_err(true, &FilecoinRequest { vanilla_proofs: proofs.to_vec(), ..w.request() });
    assert!(e.contains("ascending"), "{e}");
    let only_second = vec![w.vanilla_proofs[1].clone()];
    let mut r = f.winning.request();
    r.vanilla_proofs = only_second.clone();
    let e = decode_err(false, &r);
    assert!(e.contains("vanilla"), "{e}");
    // A sector id that is not the one the vanilla proof was made for.
    let mut winning = f.winning.vanilla_proofs.clone();
    winning[0][0] ^= 0x04;
    let mut r = f.winning.request();
    r.vanilla_proofs = winning.clone();
    let e = decode_err(false, &r);
    assert!(e.contains("vanilla"), "{e}");
    // Randomness that is not what the vanilla proofs were made for.
    let mut other = w.randomness;
    other[3] ^= 1;
    let e = decode_err(true, &FilecoinRequest { randomness: other.to_vec(), ..w.request() });
    assert!(e.contains("vanilla proofs"), "{e}");
    // Randomness that is not a field element, or not 32 bytes.
    let e = decode_err(true, &FilecoinRequest { randomness: [0xff; 32].to_vec(), ..w.request() });
    assert!(e.contains("randomness"), "{e}");
    let e = decode_err(true, &FilecoinRequest { randomness: [1; 31].to_vec(), ..w.request() });
    assert!(e.contains("randomness must be 32 bytes"), "{e}");
    // No vanilla proofs; too many for one partition.
    let e = decode_err(true, &FilecoinRequest { vanilla_proofs: Vec::new(), ..w.request() });
    assert!(e.contains("vanilla_proofs has 0"), "{e}");
    let three = vec![w.vanilla_proofs[0].clone(), w.vanilla_proofs[1].clone(), w.vanilla_proofs[1].clone()];
    let e = decode_err(true, &FilecoinRequest { vanilla_proofs: three, ..w.request() });
    assert!(e.contains("vanilla_proofs has 3"), "{e}");
    // A registered proof of the other PoSt kind, or none at all.
    let e = decode_err(true, &FilecoinRequest { registered_proof: 0, ..w.request() });
    assert!(e.contains("WinningPoSt type"), "{e}");
    let e = decode_err(true, &FilecoinRequest { registered_proof: 99, ..w.request() });
    assert!(e.contains("registered_proof 99"), "{e}");
    // A winning proof is not a window proof's payload (66 challenges, not 10).
    let e = decode_err(true, &FilecoinRequest { vanilla_proofs: f.winning.vanilla_proofs.to_vec(), ..w.request() });
    assert!(e.contains("inclusion proofs"), "{e}");
    // Missing parameters are reported with the file's path.
    let job = w.request().decode(InputChecks::Full).unwrap();
    let path = job.circuit().params_path(std::path::Path::new("/nonexistent")).unwrap();
    assert!(path.to_string_lossy().contains("v28-proof-of-spacetime-fallback"));
}

#[test]
fn synthesis_matches_a_fresh_synthesis_of_the_same_circuit() {
    // Two decodes of the same request synthesize to the same witness: nothing in a
    // job depends on hidden state.
    let f = fixtures();
    let a = f.window.request().decode(InputChecks::Full).unwrap();
    let b = f.window.request().decode(InputChecks::Full).unwrap();
    let buffers = || cuzk_groth16::synthesis::EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) };
    let ca = a.synthesize(0, buffers()).unwrap();
    let cb = b.synthesize(0, buffers()).unwrap();
    assert_eq!(ca.input, cb.input);
    assert_eq!(ca.aux, cb.aux);
    assert!(a.synthesize(1, buffers()).is_err(), "partition 1 of a one-partition job");
}
