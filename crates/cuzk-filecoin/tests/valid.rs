//! Valid synthetic inputs (`cuzk fixture --valid`): filecoin-proofs' vanilla-proof
//! verification accepts them (2 KiB and 8 MiB here, 32 and 64 GiB ignored), a changed
//! byte of a payload is refused, and at 2 KiB their proofs, made on the CPU with the
//! fixtures' parameters, are accepted by filecoin-proofs' verifiers and refused with a
//! public input changed.

use cuzk_filecoin::fixtures::{fixtures_2k, prove_on_cpu, refusal, PorepFixture, PostFixture, SnapFixture};
use cuzk_filecoin::request_files::RequestFiles;
use cuzk_filecoin::{CircuitKind, InputChecks, SectorSize};
use filecoin_proofs::{FallbackPoStSectorProof, SectorShapeBase};
use rand::{Rng, SeedableRng};

const KINDS: [CircuitKind; 4] = [CircuitKind::Porep, CircuitKind::Snap, CircuitKind::WindowPost, CircuitKind::WinningPost];

fn made(kind: CircuitKind, size: SectorSize, seed: u64) -> RequestFiles {
    let t = std::time::Instant::now();
    let r = kind.valid_request(size, seed).unwrap_or_else(|e| panic!("{kind:?} at {size}: {e}"));
    eprintln!("valid {kind:?} at {size}: made in {:.2} s", t.elapsed().as_secs_f64());
    r
}

/// Decodes with every check on: filecoin-proofs' vanilla verification must accept it.
fn accepted(r: &RequestFiles) {
    let t = std::time::Instant::now();
    let job = r.decode(InputChecks::Full).unwrap_or_else(|e| panic!("{:?}: {e}", r.request.kind));
    assert!(!job.timing_only());
    eprintln!("{}: vanilla proofs verified in {:.2} s", job.describe(), t.elapsed().as_secs_f64());
}

#[test]
fn valid_inputs_pass_filecoin_proofs_vanilla_verification_at_2_kib_and_8_mib() {
    for size in [SectorSize::S2KiB, SectorSize::S8MiB] {
        for kind in KINDS {
            let r = made(kind, size, 1);
            assert_eq!(r.kind(), kind);
            assert_eq!(r.shape_true_seed, None, "a valid input is not a timing-only one");
            accepted(&r);
            assert_eq!(r, made(kind, size, 1), "{kind:?} at {size}: the same seed makes the same input");
            assert_ne!(r, made(kind, size, 2), "{kind:?} at {size}: another seed makes another input");
        }
    }
}

/// `r` with byte `at` of its payload changed (`xor`, non-zero): the C1 JSON for a PoRep
/// (then put in its envelope again), else the vanilla proofs end to end.
fn changed(r: &RequestFiles, at: usize, xor: u8) -> RequestFiles {
    let mut r = r.clone();
    if !r.c1.is_empty() {
        r.c1[at] ^= xor;
        let proof = cuzk_filecoin::SealProof::from_registered(r.request.registered_proof).unwrap();
        let c1 = std::mem::take(&mut r.c1);
        return RequestFiles::porep(proof, r.request.sector_number, r.request.miner_id, c1).unwrap();
    }
    let mut at = at;
    for v in &mut r.request.vanilla_proofs {
        if at < v.len() {
            v[at] ^= xor;
            break;
        }
        at -= v.len();
    }
    r
}

fn payload_len(r: &RequestFiles) -> usize {
    if r.c1.is_empty() {
        r.request.vanilla_proofs.iter().map(Vec::len).sum()
    } else {
        r.c1.len()
    }
}

/// Every number in `v` with its path, array positions kept.
fn numbers(v: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        serde_json::Value::Number(_) => out.push(path.clone()),
        serde_json::Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
            path.push(i.to_string());
            numbers(x, path, out);
            path.pop();
        }),
        serde_json::Value::Object(o) => o.iter().for_each(|(k, x)| {
            path.push(k.clone());
            numbers(x, path, out);
            path.pop();
        }),
        _ => {}
    }
}

/// The C1 JSON of `r` with one number changed at each kind of place (the path with
/// array positions left out): three places of each kind, drawn from `rng`.
fn changed_c1_numbers(r: &RequestFiles, rng: &mut impl Rng) -> Vec<(String, RequestFiles)> {
    let c1: serde_json::Value = serde_json::from_slice(&r.c1).unwrap();
    let mut all = Vec::new();
    numbers(&c1, &mut Vec::new(), &mut all);
    let mut kinds: std::collections::BTreeMap<String, Vec<Vec<String>>> = Default::default();
    for p in all {
        let kind: Vec<&str> = p.iter().filter(|k| k.parse::<usize>().is_err()).map(String::as_str).collect();
        kinds.entry(kind.join(".")).or_default().push(p);
    }
    let proof = cuzk_filecoin::SealProof::from_registered(r.request.registered_proof).unwrap();
    let mut out = Vec::new();
    for (kind, places) in kinds {
        for _ in 0..3 {
            let path = &places[rng.gen_range(0..places.len())];
            let mut v = c1.clone();
            let n = path.iter().fold(&mut v, |v, k| match v {
                serde_json::Value::Array(a) => &mut a[k.parse::<usize>().unwrap()],
                other => &mut other[k.as_str()],
            });
            let old = n.as_u64().unwrap();
            // Bytes stay bytes; other numbers change by one.
            let new = if old < 256 { (old + rng.gen_range(1..256)) % 256 } else { old + 1 };
            *n = serde_json::Value::from(new);
            let c1 = serde_json::to_vec(&v).unwrap();
            let request = RequestFiles::porep(proof, r.request.sector_number, r.request.miner_id, c1).unwrap();
            out.push((format!("{kind}: {} = {old} → {new}", path.join(".")), request));
        }
    }
    out
}

#[test]
fn a_changed_payload_byte_is_refused() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
    let f = fixtures_2k().expect("2 KiB fixtures");
    let sealed_snap = RequestFiles::snap(
        cuzk_filecoin::UpdateProof::from_registered(f.snap.registered_proof).unwrap(),
        f.snap.vanilla_proofs.clone(),
        [f.snap.comm_r_old, f.snap.comm_r_new, f.snap.comm_d_new],
    );
    let inputs: Vec<(String, RequestFiles)> = KINDS
        .iter()
        .map(|&k| (format!("{k:?}"), made(k, SectorSize::S2KiB, 3)))
        .chain([("the sealed 2 KiB SnapDeals".to_string(), sealed_snap)])
        .collect();
    for (what, r) in &inputs {
        r.decode(InputChecks::Full).unwrap_or_else(|e| panic!("{what}: unchanged: {e}"));
        let len = payload_len(r);
        // The bincode payloads: every byte up to 4000, past that one random byte in each
        // window of len/4000 (WinningPoSt's 36 KB are 66 alike inclusion proofs); 300
        // random bytes of the PoRep C1 JSON, and a number of each kind of place in it.
        let positions: Vec<usize> = if !r.c1.is_empty() {
            (0..300).map(|_| rng.gen_range(0..len)).collect()
        } else if len <= 4000 {
            (0..len).collect()
        } else {
            let window = len.div_ceil(4000);
            (0..len).step_by(window).map(|w| rng.gen_range(w..(w + window).min(len))).collect()
        };
        for at in positions {
            let xor = rng.gen_range(1..=255u8);
            if let Err(e) = refusal(changed(r, at, xor).decode(InputChecks::Full)) {
                panic!("{what}: byte {at} of {len} changed (xor {xor:#04x}): {e}");
            }
        }
        if !r.c1.is_empty() {
            let changes = changed_c1_numbers(r, &mut rng);
            assert!(changes.len() > 20, "{} kinds of places", changes.len() / 3);
            for (change, r) in changes {
                if let Err(e) = refusal(r.decode(InputChecks::Full)) {
                    panic!("{what}: {change}: {e}");
                }
            }
        }
    }
}

/// The PoRep input's public values, as filecoin-proofs' `verify_seal` takes them.
fn porep_values(r: &RequestFiles) -> PorepFixture {
    let c1: serde_json::Value = serde_json::from_slice(&r.c1).unwrap();
    let bytes = |k: &str| -> [u8; 32] { serde_json::from_value(c1[k].clone()).unwrap() };
    PorepFixture {
        sector_size: r.request.sector_size,
        registered_proof: r.request.registered_proof,
        miner_id: r.request.miner_id,
        sector_number: r.request.sector_number,
        envelope: r.request.vanilla_proof.clone(),
        c1: r.c1.clone(),
        comm_r: bytes("comm_r"),
        comm_d: bytes("comm_d"),
        ticket: bytes("ticket"),
        seed: bytes("seed"),
    }
}

/// The PoSt input's sectors and their comm_r, as filecoin-proofs' verifiers take them.
fn post_values(r: &RequestFiles) -> PostFixture {
    let sectors: Vec<FallbackPoStSectorProof<SectorShapeBase>> = r.request.vanilla_proofs.iter().map(|v| bincode::deserialize(v).unwrap()).collect();
    PostFixture {
        sector_size: r.request.sector_size,
        registered_proof: r.request.registered_proof,
        miner_id: r.request.miner_id,
        randomness: r.request.randomness.clone().try_into().unwrap(),
        sector_ids: sectors.iter().map(|s| u64::from(s.sector_id)).collect(),
        comm_rs: sectors.iter().map(|s| s.comm_r.into()).collect(),
        vanilla_proofs: r.request.vanilla_proofs.clone(),
    }
}

/// The SnapDeals input's commitments, as filecoin-proofs' verifier takes them.
fn snap_values(r: &RequestFiles) -> SnapFixture {
    SnapFixture {
        sector_size: r.request.sector_size,
        registered_proof: r.request.registered_proof,
        vanilla_proofs: r.request.vanilla_proofs.clone(),
        comm_r_old: r.request.comm_r_old.clone().try_into().unwrap(),
        comm_r_new: r.request.comm_r_new.clone().try_into().unwrap(),
        comm_d_new: r.request.comm_d_new.clone().try_into().unwrap(),
    }
}

fn flipped(mut b: [u8; 32]) -> [u8; 32] {
    b[0] ^= 1;
    b
}

#[test]
fn valid_2_kib_inputs_give_proofs_filecoin_proofs_accepts() {
    let f = fixtures_2k().expect("2 KiB fixtures");
    for kind in KINDS {
        let r = made(kind, SectorSize::S2KiB, 4);
        let job = r.decode(InputChecks::Full).unwrap();
        let proof = prove_on_cpu(job.as_ref(), &f.param_dir, 5).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        job.verify(&proof).unwrap_or_else(|e| panic!("{kind:?}: the job's own check: {e}"));
        if kind == CircuitKind::Porep {
            let v = porep_values(&r);
            assert!(v.filecoin_proofs_accepts(&proof, v.comm_r, v.seed), "verify_seal refused the proof");
            assert!(!v.filecoin_proofs_accepts(&proof, flipped(v.comm_r), v.seed), "verify_seal accepted another comm_r");
            assert!(!v.filecoin_proofs_accepts(&proof, v.comm_r, flipped(v.seed)), "verify_seal accepted another seed");
        } else if kind == CircuitKind::Snap {
            let v = snap_values(&r);
            assert!(v.filecoin_proofs_accepts(&proof, v.comm_r_new, v.comm_d_new), "verify_empty_sector_update_proof refused the proof");
            assert!(!v.filecoin_proofs_accepts(&proof, flipped(v.comm_r_new), v.comm_d_new), "accepted another comm_r_new");
            assert!(!v.filecoin_proofs_accepts(&proof, v.comm_r_new, flipped(v.comm_d_new)), "accepted another comm_d_new");
        } else {
            let v = post_values(&r);
            assert!(v.filecoin_proofs_accepts(&proof, &v.randomness, &v.comm_rs), "{kind:?}: refused");
            assert!(!v.filecoin_proofs_accepts(&proof, &flipped(v.randomness), &v.comm_rs), "{kind:?}: accepted other randomness");
            let mut other = v.comm_rs.clone();
            other[0] = flipped(other[0]);
            assert!(!v.filecoin_proofs_accepts(&proof, &v.randomness, &other), "{kind:?}: accepted another comm_r");
        }
    }
}

/// At 32 and 64 GiB: made in seconds, in bounded memory, and accepted by filecoin-proofs'
/// vanilla verification.
#[test]
#[ignore = "a minute or more: valid 32 and 64 GiB inputs (cargo test -p cuzk-filecoin --release --test valid -- --ignored)"]
fn valid_inputs_pass_filecoin_proofs_vanilla_verification_at_32_and_64_gib() {
    for size in [SectorSize::S32GiB, SectorSize::S64GiB] {
        for kind in KINDS {
            accepted(&made(kind, size, 1));
        }
    }
}

/// A repeated key anywhere in the PoRep envelope or its C1 output is refused, naming
/// it, though the input is otherwise valid (serde_json would keep the last silently).
#[test]
fn repeated_json_keys_in_a_porep_input_are_refused() {
    let r = made(CircuitKind::Porep, SectorSize::S2KiB, 6);
    accepted(&r);
    // The envelope: its SectorNum twice (the same value: still two readings of one key).
    let mut env = r.clone();
    let text = String::from_utf8(env.request.vanilla_proof.clone()).unwrap();
    let n = r.request.sector_number;
    env.request.vanilla_proof = format!("{},\"SectorNum\":{n}}}", text.trim_end().strip_suffix('}').unwrap()).into_bytes();
    let e = refusal(env.decode(InputChecks::Full)).unwrap();
    assert!(e.contains("\"SectorNum\" appears twice"), "{e}");
    // The C1 output: its seed twice, then put in its envelope again.
    let c1 = String::from_utf8(r.c1.clone()).unwrap();
    let seed = &c1[c1.find("\"seed\"").unwrap()..];
    let seed = &seed[..seed.find(']').unwrap() + 1];
    let doubled = format!("{},{seed}}}", c1.trim_end().strip_suffix('}').unwrap());
    let proof = cuzk_filecoin::SealProof::from_registered(r.request.registered_proof).unwrap();
    let twice = RequestFiles::porep(proof, r.request.sector_number, r.request.miner_id, doubled.into_bytes()).unwrap();
    let e = refusal(twice.decode(InputChecks::Full)).unwrap();
    assert!(e.contains("\"seed\" appears twice"), "{e}");
}
