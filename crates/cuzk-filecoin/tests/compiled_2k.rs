//! Witness-only synthesis and compiled constraint matrices for every Filecoin kind at
//! 2 KiB: the witness equals full synthesis's, value for value, and the compiled
//! matrices' products with it equal full synthesis's a, b, c and densities. WindowPoSt
//! takes the extensible path (its sectors synthesized on several threads and appended);
//! the native witnesses (PoRep's labels, SnapDeals' tree_d paths, PoSt's Poseidon
//! hashes) equal the circuit's own gadgets' witness too; partition 0's proof from each
//! path is the same, byte for byte with r = s = 0.

mod common;

use cuzk_filecoin::fixtures::fixtures_2k;
use cuzk_filecoin::InputChecks;

#[test]
fn every_kind_compiles_to_the_products_of_full_synthesis() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    common::every_kind_compiles_to_the_products_of_full_synthesis(f);
}

#[test]
fn matrices_file_is_compiled_once_mapped_after_and_rebuilt_when_damaged() {
    use cuzk_filecoin::matrices::{load_if_present, load_or_compile, matrices_path, Provenance};
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let job = f.porep.request().decode(InputChecks::Full).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Only when present: nothing yet, and nothing is compiled.
    assert!(load_if_present(job.circuit(), dir.path()).unwrap().is_none());
    assert!(!matrices_path(job.circuit(), dir.path()).unwrap().exists());
    let (compiled, how) = load_or_compile(job.circuit(), dir.path(), &cuzk_groth16::NoProgress).unwrap();
    assert_eq!(how, Provenance::Compiled("missing".into()));
    // The blank circuit's matrices are the real instance's: structure does not depend
    // on values.
    assert!(compiled == job.compile(0).unwrap(), "blank and instance matrices differ");
    let (mapped, how) = load_or_compile(job.circuit(), dir.path(), &cuzk_groth16::NoProgress).unwrap();
    assert_eq!(how, Provenance::Read);
    assert!(mapped == compiled);
    assert!(load_if_present(job.circuit(), dir.path()).unwrap().is_some_and(|m| m == compiled));

    let path = matrices_path(job.circuit(), dir.path()).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    // A new file renamed over the old one (writing in place would change the pages
    // `compiled` and `mapped` still map).
    let damaged = dir.path().join("damaged");
    std::fs::write(&damaged, &bytes).unwrap();
    std::fs::rename(&damaged, &path).unwrap();
    // Only when present: a damaged file is not used, and not rebuilt.
    assert!(load_if_present(job.circuit(), dir.path()).unwrap().is_none());
    let (again, how) = load_or_compile(job.circuit(), dir.path(), &cuzk_groth16::NoProgress).unwrap();
    assert!(matches!(&how, Provenance::Compiled(reason) if reason.contains("corrupt")), "{how:?}");
    assert!(again == compiled);
}
