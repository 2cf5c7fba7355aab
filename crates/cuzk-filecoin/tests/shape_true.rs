//! Shape-true inputs (`cuzk fixture`): the real structure at a sector size, random
//! values. At 2 KiB they are checked against sectors sealed by filecoin-proofs: the
//! same payload structure, the same circuit shape in every partition, refused by
//! default, proved only when checks are off for timing. At 32 and 64 GiB (ignored:
//! minutes) their circuits are counted against the published constraint counts, and
//! PoRep's native witness is checked against the circuit's gadgets.

use cuzk_filecoin::fixtures::{fixtures_2k, refusal, Fixtures};
use cuzk_filecoin::request_files::RequestFiles;
use cuzk_filecoin::{setup, Circuit, CircuitKind, FilecoinJob, InputChecks, SectorSize};
use cuzk_groth16::synthesis::EvalBuffers;

/// A JSON value with every number and string blanked: what is left is the structure
/// (keys, array lengths, nesting).
fn structure(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Number(_) => Value::from(0),
        Value::String(_) => Value::from(""),
        Value::Array(a) => Value::Array(a.iter().map(structure).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), structure(v))).collect()),
        other => other.clone(),
    }
}

/// The 2 KiB fixture of `kind` as a request, decoded with the full checks.
fn real_2k(f: &Fixtures, kind: CircuitKind) -> (Box<dyn FilecoinJob>, Vec<usize>, Option<serde_json::Value>) {
    let (job, lens, c1) = match kind {
        CircuitKind::Porep => {
            let c1: serde_json::Value = serde_json::from_slice(&f.porep.c1).unwrap();
            (f.porep.request().decode(InputChecks::Full), Vec::new(), Some(c1))
        }
        CircuitKind::Snap => (f.snap.request().decode(InputChecks::Full), f.snap.vanilla_proofs.iter().map(Vec::len).collect(), None),
        CircuitKind::WindowPost => (f.window.request().decode(InputChecks::Full), f.window.vanilla_proofs.iter().map(Vec::len).collect(), None),
        CircuitKind::WinningPost => (f.winning.request().decode(InputChecks::Full), f.winning.vanilla_proofs.iter().map(Vec::len).collect(), None),
    };
    (job.unwrap_or_else(|e| panic!("the real 2 KiB {kind:?} request: {e}")), lens, c1)
}

#[test]
fn shape_true_2k_inputs_have_the_structure_and_shape_of_sealed_ones() {
    let f = fixtures_2k().expect("2 KiB fixtures");
    let dir = tempfile::tempdir().unwrap();
    for kind in CircuitKind::ALL {
        let circuit = Circuit { kind, size: SectorSize::S2KiB };
        let made = kind.shape_true_request(SectorSize::S2KiB, 1).unwrap();
        assert_eq!(made.circuit().unwrap(), circuit);
        // Through a folder, as `cuzk fixture` writes it.
        let sub = dir.path().join(circuit.id());
        made.write(&sub).unwrap();
        let made = RequestFiles::read(&sub).unwrap();
        assert_eq!(made.shape_true_seed, Some(1));
        assert_eq!(made, kind.shape_true_request(SectorSize::S2KiB, 1).unwrap(), "{circuit}: the same seed makes the same input");

        let (real, real_lens, real_c1) = real_2k(f, kind);
        match real_c1 {
            Some(c1) => {
                let ours: serde_json::Value = serde_json::from_slice(&made.c1).unwrap();
                assert_eq!(structure(&ours), structure(&c1), "{circuit}: C1 structure");
                let envelope: serde_json::Value = serde_json::from_slice(&made.request.vanilla_proof).unwrap();
                assert_eq!(envelope["SectorSize"], 2048);
            }
            // bincode with fixed-width integers: equal structure, equal length.
            None => assert_eq!(made.request.vanilla_proofs.iter().map(Vec::len).collect::<Vec<_>>(), real_lens, "{circuit}: vanilla proof sizes"),
        }

        let why = refusal(made.decode(InputChecks::Full)).unwrap_or_else(|e| panic!("{circuit}: shape-true input with full checks: {e}"));
        assert!(why.contains("do not verify"), "{circuit}: {why}");
        let job = made.decode(InputChecks::TimingOnly).unwrap_or_else(|e| panic!("{circuit}: {e}"));
        assert!(job.timing_only() && !real.timing_only());
        assert_eq!(job.partitions(), real.partitions(), "{circuit}");
        let blank = setup::blank_shape(circuit).unwrap();
        for k in 0..job.partitions() {
            let shape = job.shape(k).unwrap();
            assert_eq!(shape, real.shape(k).unwrap(), "{circuit} partition {k}: shape-true and sealed circuits differ");
            assert_eq!(shape, blank, "{circuit} partition {k}: the blank circuit (the parameter file) differs");
        }
        // The challenged positions are the real ones: the circuit's inputs are what the
        // verifier computes from the request.
        let buffers = EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) };
        let synthesized = job.synthesize(0, buffers).unwrap();
        assert_eq!(synthesized.input[1..], job.public_inputs(0).unwrap()[..], "{circuit}: public inputs");
        let e = job.verify(&[0u8; 192]).unwrap_err().to_string();
        assert!(e.contains("timing-only"), "{circuit}: {e}");
    }
}

/// The circuits with a published constraint count (`Circuit::published_constraints`:
/// the PoRep figures count the prover's input constraints, the SnapDeals and WindowPoSt
/// ones are the circuit's own), and their partitions per proof.
const PUBLISHED: [(CircuitKind, SectorSize, usize); 5] = [
    (CircuitKind::Porep, SectorSize::S32GiB, 10),
    (CircuitKind::Porep, SectorSize::S64GiB, 10),
    (CircuitKind::Snap, SectorSize::S32GiB, 16),
    (CircuitKind::WindowPost, SectorSize::S32GiB, 1),
    (CircuitKind::WindowPost, SectorSize::S64GiB, 1),
];

/// Counts every circuit above from a shape-true input (its first partition) and from
/// the blank circuit; both must equal the published count: ten counts of 81–131 M
/// constraints, one thread per circuit.
#[test]
#[ignore = "minutes: counts 32 and 64 GiB circuits (cargo test -p cuzk-filecoin --release --test shape_true -- --ignored)"]
fn real_size_circuits_have_the_published_constraint_counts() {
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = PUBLISHED
            .iter()
            .map(|&(kind, size, partitions)| {
                s.spawn(move || {
                    let circuit = Circuit { kind, size };
                    let published = circuit.published_constraints().unwrap();
                    let (constraints, with_inputs) = (published.constraints, published.with_input_constraints);
                    let t = std::time::Instant::now();
                    let job = kind.shape_true_request(size, 1).unwrap().decode(InputChecks::TimingOnly).unwrap();
                    let made = t.elapsed();
                    let shape = job.shape(0).unwrap();
                    let counted = t.elapsed() - made;
                    let blank = setup::blank_shape(circuit).unwrap();
                    eprintln!(
                        "{circuit}: input made and decoded in {:.1} s, partition 0 counted in {:.1} s: {} constraints ({} inputs, {} aux); published {constraints}",
                        made.as_secs_f64(),
                        counted.as_secs_f64(),
                        shape.constraints,
                        shape.inputs,
                        shape.aux
                    );
                    (circuit, job.partitions(), partitions, shape, blank, constraints, with_inputs)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (circuit, got_partitions, partitions, shape, blank, constraints, with_inputs) in results {
        assert_eq!(got_partitions, partitions, "{circuit}: partitions");
        let counted = if with_inputs { shape.constraints } else { shape.constraints - shape.inputs };
        assert_eq!(counted, constraints, "{circuit}: constraints of partition 0 ({} inputs)", shape.inputs);
        assert_eq!(blank, shape, "{circuit}: the blank circuit (the parameter file) differs");
    }
}

/// A shape-true partition's native witness (PoRep: labels and comm_d path hashed
/// natively; SnapDeals: tree_d paths hashed natively, challenges split over threads;
/// PoSt: Poseidon hashed natively) equals storage-proofs' circuit synthesized
/// witness-only through its own gadgets, value for value (~4 GB each at 32 GiB; run
/// alone on a small host). PoRep and SnapDeals at partition 1, PoSt at its only one.
fn native_witness_equals_the_gadgets(kind: CircuitKind, size: SectorSize) {
    let job = kind.shape_true_request(size, 3).unwrap().decode(InputChecks::TimingOnly).unwrap();
    let k = job.partitions().min(2) - 1;
    let t = std::time::Instant::now();
    let gadget = job.gadget_witness(k).expect("a native witness").unwrap();
    let gadget_s = t.elapsed().as_secs_f64();
    // Laid out ahead, as the engine does with the compiled matrices' aux count.
    let native = job.witness(k, cuzk_groth16::AuxBuffer::new(Some(gadget.aux.len()))).unwrap();
    let native_s = t.elapsed().as_secs_f64() - gadget_s;
    eprintln!(
        "{kind:?} {size:?} partition {k}: {} inputs, {} aux; native {native_s:.2} s, gadgets {gadget_s:.2} s ({} threads)",
        native.input.len(),
        native.aux.len(),
        rayon::current_num_threads()
    );
    assert_eq!(native.input, gadget.input, "inputs");
    assert!(native.aux == gadget.aux, "aux values");
}

#[test]
#[ignore = "a minute or more: a 32 GiB PoRep partition twice (cargo test -p cuzk-filecoin --release --test shape_true -- --ignored native)"]
fn native_porep_witness_equals_the_gadgets_at_32_gib() {
    native_witness_equals_the_gadgets(CircuitKind::Porep, SectorSize::S32GiB);
}

#[test]
#[ignore = "a minute or more: a 32 GiB SnapDeals partition twice (cargo test -p cuzk-filecoin --release --test shape_true -- --ignored native)"]
fn native_snap_witness_equals_the_gadgets_at_32_gib() {
    native_witness_equals_the_gadgets(CircuitKind::Snap, SectorSize::S32GiB);
}

/// SnapDeals where 2 KiB does not reach: a partition path to comm_d and h above 1
/// (8 MiB: 4 partitions), a last digest that gives fewer challenges (512 MiB: 86
/// challenges from 8 digests).
#[test]
fn native_snap_witness_equals_the_gadgets_at_8_mib_and_512_mib() {
    native_witness_equals_the_gadgets(CircuitKind::Snap, SectorSize::S8MiB);
    native_witness_equals_the_gadgets(CircuitKind::Snap, SectorSize::S512MiB);
}

#[test]
#[ignore = "minutes: a 32 GiB WindowPoSt partition twice (cargo test -p cuzk-filecoin --release --test shape_true -- --ignored native)"]
fn native_window_post_witness_equals_the_gadgets_at_32_gib() {
    native_witness_equals_the_gadgets(CircuitKind::WindowPost, SectorSize::S32GiB);
}

/// PoSt past 2 KiB: WindowPoSt's several sectors per partition and WinningPoSt's 66
/// challenges of one sector, at 8 MiB.
#[test]
fn native_post_witness_equals_the_gadgets_at_8_mib() {
    // PoSt reads filecoin-proofs' settings, which fix the parameter directory for the
    // process: the 2 KiB fixtures' must be the one set, whichever test runs first.
    cuzk_filecoin::fixtures::fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    native_witness_equals_the_gadgets(CircuitKind::WindowPost, SectorSize::S8MiB);
    native_witness_equals_the_gadgets(CircuitKind::WinningPost, SectorSize::S8MiB);
}

/// WinningPoSt at 32 GiB: its 66 challenges of one sector through 8-8-0 trees (only
/// base-only trees had been checked).
#[test]
#[ignore = "a minute: a 32 GiB WinningPoSt partition twice (cargo test -p cuzk-filecoin --release --test shape_true -- --ignored native)"]
fn native_winning_post_witness_equals_the_gadgets_at_32_gib() {
    native_witness_equals_the_gadgets(CircuitKind::WinningPost, SectorSize::S32GiB);
}

/// Every kind at 64 GiB: 8-8-2 trees, whose top-tree arity no other test reaches.
#[test]
#[ignore = "minutes: a 64 GiB partition of every kind twice (cargo test -p cuzk-filecoin --release --test shape_true -- --ignored native)"]
fn native_witness_equals_the_gadgets_at_64_gib() {
    for kind in [CircuitKind::Porep, CircuitKind::Snap, CircuitKind::WindowPost, CircuitKind::WinningPost] {
        native_witness_equals_the_gadgets(kind, SectorSize::S64GiB);
    }
}
