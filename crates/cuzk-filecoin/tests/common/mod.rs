//! The check shared by the compiled-path tests at 2 KiB and at 8 MiB (each size in a
//! process of its own: filecoin-proofs' parameter directory is set once per process).

use std::path::Path;
use std::sync::Arc;

use cuzk_filecoin::fixtures::Fixtures;
use cuzk_filecoin::{FilecoinJob, InputChecks};
use cuzk_groth16::format::{read_params, PointCheck};
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::synthesis::{EvalBuffers, SynthesizedCircuit};
use cuzk_groth16::{AuxBuffer, Scalar, Witness};
use cuzk_groth16::{CpuBackend, ProofRandomness, ProvingBackend};

/// Every kind's compiled path against full synthesis, every partition of each; and
/// partition 0's proof from each path, byte for byte with r = s = 0.
pub fn every_kind_compiles_to_the_products_of_full_synthesis(f: &Fixtures) {
    let jobs = [
        f.porep.request().decode(InputChecks::Full).unwrap(),
        f.snap.request().decode(InputChecks::Full).unwrap(),
        f.winning.request().decode(InputChecks::Full).unwrap(),
        f.window.request().decode(InputChecks::Full).unwrap(),
    ];
    for job in &jobs {
        assert_compiled_path_equals_full_synthesis(job.as_ref(), &f.param_dir);
    }
}

/// Partition 0 proven on the CPU from full synthesis (`full`) and from its witness with
/// a, b, c left to the backend (the compiled matrices' products): the same proof bytes
/// for the same r, s.
fn assert_compiled_proof_equals_full_synthesis(
    job: &dyn FilecoinJob,
    param_dir: &Path,
    matrices: Arc<ConstraintMatrices>,
    full: SynthesizedCircuit,
    witness: Witness,
) {
    let what = job.describe();
    let path = job.circuit().params_path(param_dir).unwrap_or_else(|e| panic!("{what}: {e}"));
    let params = read_params(&path, PointCheck::OnCurve).unwrap_or_else(|e| panic!("{what}: {e}"));
    let zero = [ProofRandomness::zero()];
    let full = CpuBackend::new().prove(&params, &mut [full], &zero).unwrap_or_else(|e| panic!("{what}: {e}"));
    let pending = SynthesizedCircuit::with_pending_products(matrices, witness).unwrap_or_else(|e| panic!("{what}: {e}"));
    let compiled = CpuBackend::new().prove(&params, &mut [pending], &zero).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(compiled.proofs[0].to_bytes(), full.proofs[0].to_bytes(), "{what}: the compiled path's proof differs from full synthesis's");
    eprintln!("{what}: partition 0's proof from the compiled path equals full synthesis's, byte for byte (r = s = 0)");
}

fn buffers() -> EvalBuffers {
    EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) }
}

/// Every partition of `job`: witness and a, b, c from the compiled path against full
/// synthesis; then partition 0's proofs ([`assert_compiled_proof_equals_full_synthesis`]).
fn assert_compiled_path_equals_full_synthesis(job: &dyn FilecoinJob, param_dir: &Path) {
    let what = job.describe();
    let matrices = Arc::new(job.compile(0).unwrap_or_else(|e| panic!("{what}: {e}")));
    let mut first = None;
    let bound = matrices.significant_aux_bound();
    for k in 0..job.partitions() {
        let full = job.synthesize(k, buffers()).unwrap_or_else(|e| panic!("{what}: {e}"));
        // Laid out ahead from the matrices' aux count (in place: never joined after all),
        // and without it.
        let joined = cuzk_groth16::witness::joined_anyway();
        let witness = job.witness(k, AuxBuffer::new(Some(matrices.num_aux))).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(cuzk_groth16::witness::joined_anyway(), joined, "{what} partition {k}: the layout from the aux count did not hold");
        assert!(
            job.witness(k, AuxBuffer::new(None)).unwrap_or_else(|e| panic!("{what}: {e}")) == witness,
            "{what} partition {k}: without the aux count"
        );
        // Into a reused vector that holds other values (an engine's pooled one).
        let reused = AuxBuffer::reusing(vec![Scalar::from(5u64); matrices.num_aux + 3], Some(matrices.num_aux));
        assert!(job.witness(k, reused).unwrap_or_else(|e| panic!("{what}: {e}")) == witness, "{what} partition {k}: into a reused vector");
        assert!(full.aux.len() > 1000, "{what}: a real circuit");
        assert_eq!(witness.input, full.input, "{what} partition {k}: inputs");
        assert!(witness.aux == full.aux, "{what} partition {k}: aux ({} vs {} values)", witness.aux.len(), full.aux.len());
        if let Some(gadget) = job.gadget_witness(k) {
            assert!(gadget.unwrap_or_else(|e| panic!("{what}: {e}")) == witness, "{what} partition {k}: the circuit's gadgets' witness");
        }
        let witness0 = (k == 0).then(|| witness.clone());
        // Partition 0's matrices serve every partition of the shape.
        let compiled = SynthesizedCircuit::from_matrices(&matrices, witness, buffers()).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(compiled.num_constraints(), full.num_constraints(), "{what} partition {k}: constraints");
        assert!(compiled.a.as_slice() == full.a.as_slice(), "{what} partition {k}: a");
        assert!(compiled.b.as_slice() == full.b.as_slice(), "{what} partition {k}: b");
        assert!(compiled.c.as_slice() == full.c.as_slice(), "{what} partition {k}: c");
        assert_eq!(compiled.a_aux_density, full.a_aux_density, "{what} partition {k}: A density");
        assert_eq!(compiled.b_input_density, full.b_input_density, "{what} partition {k}: B input density");
        assert_eq!(compiled.b_aux_density, full.b_aux_density, "{what} partition {k}: B aux density");
        // The matrices' bound on significant values (what a device plan sizes the
        // witness area from) holds for the real witness.
        let significant = full.aux_classes.counts().2;
        assert!(significant <= bound, "{what} partition {k}: {significant} significant values, bound {bound}");
        eprintln!("{what} partition {k}: {significant} significant aux values of {}, bound {bound}", full.aux.len());
        if let Some(w) = witness0 {
            first = Some((full, w));
        }
    }
    assert!(job.witness(job.partitions(), AuxBuffer::new(None)).is_err(), "{what}: a partition past the last");
    eprintln!(
        "{what}: {} constraints, {} non-zeros, {} distinct coefficients, {:.2} bytes per non-zero",
        matrices.num_constraints(),
        matrices.non_zeros(),
        matrices.dictionary.len(),
        matrices.bytes() as f64 / matrices.non_zeros() as f64
    );
    let (full, witness) = first.unwrap_or_else(|| panic!("{what}: no partition"));
    assert_compiled_proof_equals_full_synthesis(job, param_dir, matrices, full, witness);
}
