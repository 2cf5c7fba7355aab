//! PoRep C2 at 2 KiB through the library: Curio's envelope around the C1 output of a
//! sector sealed by filecoin-proofs, the partition circuit synthesized and proved by
//! cuzk's CPU backend, the proof accepted by filecoin-proofs' `verify_seal` and
//! rejected for other public values; bad requests give clear errors.

use cuzk_filecoin::fixtures::{fixtures_2k, prove_on_cpu, refusal};
use cuzk_filecoin::{CheckedBy, FilecoinRequest, InputChecks};

#[test]
fn porep_c2_2k_is_accepted_by_verify_seal() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let p = &f.porep;
    let job = p.request().decode(InputChecks::Full).expect("decode");
    assert_eq!(job.circuit().id(), "porep-2k");
    assert_eq!(job.partitions(), 1);
    let proof = prove_on_cpu(job.as_ref(), &f.param_dir, 9).expect("proving");
    let inputs = job.public_inputs(0).unwrap();
    assert_eq!(job.verify(&proof).expect("verify_seal accepts it"), CheckedBy::FilecoinProofs);
    assert!(p.filecoin_proofs_accepts(&proof, p.comm_r, p.seed));
    let mut other = p.seed;
    other[0] ^= 1;
    assert!(!p.filecoin_proofs_accepts(&proof, p.comm_r, other), "another seed");
    let mut comm_r = p.comm_r;
    comm_r[3] ^= 1;
    assert!(!p.filecoin_proofs_accepts(&proof, comm_r, p.seed), "another comm_r");

    // The raw C1 JSON (no envelope) decodes to the same circuit.
    let raw = (FilecoinRequest { vanilla_proof: p.c1.to_vec(), ..p.request() }).decode(InputChecks::Full).expect("raw C1");
    assert_eq!(raw.public_inputs(0).unwrap(), inputs);
}

fn decode_err(req: &FilecoinRequest) -> String {
    refusal(req.decode(InputChecks::Full)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn bad_porep_requests_get_clear_errors() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let p = &f.porep;
    // A C1 with one byte changed, at several places of its JSON (digits inside the
    // vanilla proofs and commitments).
    let digits: Vec<usize> = p.c1.iter().enumerate().filter(|(_, b)| b.is_ascii_digit()).map(|(i, _)| i).collect();
    for k in [1, digits.len() / 3, digits.len() / 2, digits.len() - 10] {
        let mut c1 = p.c1.clone();
        let at = digits[k];
        c1[at] = if c1[at] == b'1' { b'2' } else { b'1' };
        let e = decode_err(&FilecoinRequest { vanilla_proof: c1.to_vec(), ..p.request() });
        assert!(e.contains("C1 output"), "byte {at}: {e}");
    }
    // Not base64, not JSON.
    let e = decode_err(&FilecoinRequest { vanilla_proof: br#"{"SectorNum":1,"Phase1Out":"%%%","SectorSize":2048}"#.to_vec(), ..p.request() });
    assert!(e.contains("Phase1Out is not base64"), "{e}");
    let e = decode_err(&FilecoinRequest { vanilla_proof: b"\x00\x01".to_vec(), ..p.request() });
    assert!(e.contains("not JSON"), "{e}");
    // A C1 cut short, one without its type, one whose type is no string: each says so.
    let e = decode_err(&FilecoinRequest { vanilla_proof: p.c1[..p.c1.len() / 2].to_vec(), ..p.request() });
    assert!(e.contains("is not JSON") && e.contains("EOF") && !e.contains("registered_proof"), "{e}");
    let e = decode_err(&FilecoinRequest { vanilla_proof: br#"{"seed": [1]}"#.to_vec(), ..p.request() });
    assert!(e.contains("C1 output: no registered_proof"), "{e}");
    let e = decode_err(&FilecoinRequest { vanilla_proof: br#"{"registered_proof": 5}"#.to_vec(), ..p.request() });
    assert!(e.contains("C1 output: invalid type") && !e.contains("no registered_proof"), "{e}");
    // A wrong sector size, a wrong registered proof.
    let e = decode_err(&FilecoinRequest { sector_size: 32 << 30, ..p.request() });
    assert!(e.contains("sector_size"), "{e}");
    let e = decode_err(&FilecoinRequest { registered_proof: 8, ..p.request() });
    assert!(e.contains("registered_proof is 8"), "{e}");
    // 0 is StackedDrg2KiBV1, a real seal proof type, never "unset": refused for a V1_1 C1
    // as any other mismatch is.
    let e = decode_err(&FilecoinRequest { registered_proof: 0, ..p.request() });
    assert!(e.contains("registered_proof is 0") && e.contains("StackedDrg2KiBV1_1"), "{e}");
    // Another sector or another miner: the replica id does not match.
    let e = decode_err(&FilecoinRequest { vanilla_proof: p.c1.to_vec(), sector_number: 2, ..p.request() });
    assert!(e.contains("replica_id"), "{e}");
    let e = decode_err(&FilecoinRequest { miner_id: 1001, ..p.request() });
    assert!(e.contains("replica_id"), "{e}");
    let e = decode_err(&FilecoinRequest { sector_number: 2, ..p.request() });
    assert!(e.contains("SectorNum is 1"), "{e}");
}
