//! Witness-only synthesis and compiled constraint matrices for every Filecoin kind at
//! 2 KiB: the witness equals full synthesis's, value for value, and the compiled
//! matrices' products with it equal full synthesis's a, b, c and densities. WindowPoSt
//! takes the extensible path (its sectors synthesized on several threads and appended);
//! the native witnesses (PoRep's labels, SnapDeals' tree_d paths, PoSt's Poseidon
//! hashes) equal the circuit's own gadgets' witness too.

use cuzk_filecoin::fixtures::fixtures_2k;
use cuzk_filecoin::{decode_porep, decode_snap, decode_window_post, decode_winning_post, FilecoinJob};
use cuzk_groth16::synthesis::{EvalBuffers, SynthesizedCircuit};

fn buffers() -> EvalBuffers {
    EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) }
}

fn assert_compiled_path_equals_full_synthesis(job: &dyn FilecoinJob) {
    let what = job.describe();
    let matrices = job.compile(0).unwrap_or_else(|e| panic!("{what}: {e}"));
    for k in 0..job.partitions() {
        let full = job.synthesize(k, buffers()).unwrap_or_else(|e| panic!("{what}: {e}"));
        // Laid out ahead from the matrices' aux count (in place: never joined after all),
        // and without it.
        let joined = cuzk_groth16::witness::joined_anyway();
        let witness = job.witness(k, Some(matrices.num_aux)).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(cuzk_groth16::witness::joined_anyway(), joined, "{what} partition {k}: the layout from the aux count did not hold");
        assert!(job.witness(k, None).unwrap_or_else(|e| panic!("{what}: {e}")) == witness, "{what} partition {k}: without the aux count");
        assert!(full.aux.len() > 1000, "{what}: a real circuit");
        assert_eq!(witness.input, full.input, "{what} partition {k}: inputs");
        assert!(witness.aux == full.aux, "{what} partition {k}: aux ({} vs {} values)", witness.aux.len(), full.aux.len());
        if let Some(gadget) = job.gadget_witness(k) {
            assert!(gadget.unwrap_or_else(|e| panic!("{what}: {e}")) == witness, "{what} partition {k}: the circuit's gadgets' witness");
        }
        // Partition 0's matrices serve every partition of the shape.
        let compiled = SynthesizedCircuit::from_matrices(&matrices, witness, buffers()).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(compiled.num_constraints(), full.num_constraints(), "{what} partition {k}: constraints");
        assert!(compiled.a.as_slice() == full.a.as_slice(), "{what} partition {k}: a");
        assert!(compiled.b.as_slice() == full.b.as_slice(), "{what} partition {k}: b");
        assert!(compiled.c.as_slice() == full.c.as_slice(), "{what} partition {k}: c");
        assert_eq!(compiled.a_aux_density, full.a_aux_density, "{what} partition {k}: A density");
        assert_eq!(compiled.b_input_density, full.b_input_density, "{what} partition {k}: B input density");
        assert_eq!(compiled.b_aux_density, full.b_aux_density, "{what} partition {k}: B aux density");
    }
    assert!(job.witness(job.partitions(), None).is_err(), "{what}: a partition past the last");
    eprintln!(
        "{what}: {} constraints, {} non-zeros, {} distinct coefficients, {:.2} bytes per non-zero",
        matrices.num_constraints(),
        matrices.non_zeros(),
        matrices.dictionary.len(),
        matrices.bytes() as f64 / matrices.non_zeros() as f64
    );
}

#[test]
fn every_kind_compiles_to_the_products_of_full_synthesis() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    assert_compiled_path_equals_full_synthesis(decode_porep(&f.porep.request()).unwrap().as_ref());
    assert_compiled_path_equals_full_synthesis(decode_snap(&f.snap.request()).unwrap().as_ref());
    assert_compiled_path_equals_full_synthesis(decode_winning_post(&f.winning.request()).unwrap().as_ref());
    assert_compiled_path_equals_full_synthesis(decode_window_post(&f.window.request()).unwrap().as_ref());
}

#[test]
fn matrices_file_is_compiled_once_mapped_after_and_rebuilt_when_damaged() {
    use cuzk_filecoin::matrices::{load_if_present, load_or_compile, matrices_path, Provenance};
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let job = decode_porep(&f.porep.request()).unwrap();
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
    assert_eq!(how, Provenance::Mapped);
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
