//! SnapDeals at 2 KiB through the library: the vanilla proofs filecoin-proofs made
//! for an update of a sealed sector, the partition circuit synthesized and proved by
//! cuzk's CPU backend, the proof accepted by filecoin-proofs'
//! `verify_empty_sector_update_proof` and rejected for other commitments; bad requests
//! give clear errors.

use cuzk_filecoin::fixtures::{fixtures_2k, prove_on_cpu, refusal};
use cuzk_filecoin::{CheckedBy, FilecoinRequest, InputChecks};

#[test]
fn snap_2k_is_accepted_by_filecoin_proofs() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let s = &f.snap;
    let job = s.request().decode(InputChecks::Full).expect("decode");
    assert_eq!(job.circuit().id(), "snap-2k");
    let proof = prove_on_cpu(job.as_ref(), &f.param_dir, 5).expect("proving");
    assert_eq!(job.verify(&proof).expect("filecoin-proofs accepts it"), CheckedBy::FilecoinProofs);
    assert!(s.filecoin_proofs_accepts(&proof, s.comm_r_new, s.comm_d_new));
    let mut other = s.comm_r_new;
    other[4] ^= 1;
    assert!(!s.filecoin_proofs_accepts(&proof, other, s.comm_d_new), "another comm_r_new");
    let mut other = s.comm_d_new;
    other[4] ^= 1;
    assert!(!s.filecoin_proofs_accepts(&proof, s.comm_r_new, other), "another comm_d_new");
}

fn decode_err(req: &FilecoinRequest) -> String {
    refusal(req.decode(InputChecks::Full)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn bad_snap_requests_get_clear_errors() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let s = &f.snap;
    let len = s.vanilla_proofs[0].len();
    for at in [20, len / 3, len / 2, len - 40] {
        let mut proofs = s.vanilla_proofs.clone();
        proofs[0][at] ^= 0x21;
        let e = decode_err(&FilecoinRequest { vanilla_proofs: proofs.to_vec(), ..s.request() });
        assert!(e.contains("vanilla proof"), "byte {at}: {e}");
    }
    let mut comm = s.comm_r_old;
    comm[0] ^= 1;
    let e = decode_err(&FilecoinRequest { comm_r_old: comm.to_vec(), ..s.request() });
    assert!(e.contains("vanilla proofs do not verify"), "{e}");
    let e = decode_err(&FilecoinRequest { comm_d_new: [0xff; 32].to_vec(), ..s.request() });
    assert!(e.contains("comm_d_new"), "{e}");
    let e = decode_err(&FilecoinRequest { comm_r_new: [1; 31].to_vec(), ..s.request() });
    assert!(e.contains("comm_r_new must be 32 bytes"), "{e}");
    let e = decode_err(&FilecoinRequest { sector_size: 64 << 30, ..s.request() });
    assert!(e.contains("sector_size"), "{e}");
    let e = decode_err(&FilecoinRequest { registered_proof: 7, ..s.request() });
    assert!(e.contains("registered_proof 7"), "{e}");
    let e = decode_err(&FilecoinRequest { vanilla_proofs: Vec::new(), ..s.request() });
    assert!(e.contains("vanilla_proofs has 0"), "{e}");
}
