//! A synthesis worker: the next partition by priority → its parameter set → its
//! memory (admission) → synthesis → its public inputs checked → the hand-off to the
//! provers. Where the set carries compiled matrices, synthesis is witness-only; where
//! every backend computes a, b, c from them (a GPU's plan has them on its device) the
//! partition takes no a, b, c buffers, else they are computed here, into counted ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::{Scalar, SynthesizedCircuit};

use super::panic_guard::catch_panic;
use crate::error::EngineError;
use crate::job::{Job, PartitionState};
use crate::params::ParameterLease;
use crate::pool::WitnessLoan;
use crate::scheduler::{Lane, ReadyPartition};
use crate::shared::Shared;
use crate::timeline::EventKind;
use cuzk_groth16::sync::lock;

/// What a partition needs before its synthesis starts.
struct Admitted {
    params: ParameterLease,
    /// Load time spent on this partition's behalf.
    load: Duration,
    /// The partition's own memory (its witness: the charge and an aux vector), besides
    /// a, b, c.
    witness: WitnessLoan,
    /// None where a, b, c are left to the backend (compiled matrices it computes them from).
    abc: Option<EvalBuffers>,
}

/// Runs until the partition queue closes, taking the partitions `takes` takes (an
/// urgent lane's on its own threads). `lane` names this worker in the timeline.
pub(crate) fn synthesis_loop(shared: &Shared, lane: &str, takes: Lane) {
    while let Some(task) = shared.queue.pop(takes) {
        let job = task.job.clone();
        if job.is_finished() || shared.cancel_if_it_cannot_finish(&job) {
            continue;
        }
        shared.timeline.record(&job.id.0, Some(task.index), EventKind::Dequeued, lane);
        let Some(Admitted { params, load, mut witness, abc }) = admit(shared, &job) else { continue };
        // Counts the partition in flight until it is dropped: on every way out below.
        let Some(ticket) = job.begin_partition(task.index, load) else { continue };
        let matrices = params.matrices.clone();
        let synthesized = shared.on_lane_threads(takes, || synthesize(shared, &job, task.index, abc, &mut witness, matrices, lane));
        let Some((mut circuit, inputs)) = synthesized else { continue };
        // The witness's memory goes back (its aux vector to the pool) as soon as the
        // backend has read it (a GPU backend, once it is on the device), so the next
        // partition's synthesis can start during this proof.
        circuit.charge_witness(witness);
        job.set_part(task.index, PartitionState::WaitingForProver);
        // Urgent partitions never wait for room behind ordinary ones.
        let urgent = job.priority.urgent();
        if shared.ready.push(ReadyPartition { task, circuit, inputs, params, ticket }, urgent).is_err() {
            // Closed: the engine is shutting down (the partition's ticket went with it).
            return;
        }
    }
}

/// The partition's parameter set, then its memory: None when the job finished while
/// it waited (or failed: then it is failed here).
fn admit(shared: &Shared, job: &Arc<Job>) -> Option<Admitted> {
    let give_up = || job.is_finished();
    let fail = |error: String| {
        shared.fail_job(job, error);
        None
    };
    // Parameters first: loading them may wait for memory, which partitions holding
    // memory while waiting for parameters would never free.
    let (params, load) = match shared.parameters(&job.circuit_id, &give_up) {
        Ok(p) => p?,
        Err(e) => return fail(format!("loading parameters {}: {e}", job.circuit_id)),
    };
    // The set stays charged while its partition is in flight: both must fit the budget
    // together, or the partition would wait for memory forever.
    let abc_on_host = !params.products_by_backends;
    let need = params.size_bytes + crate::memory::partition_need(job.partition_bytes, job.eval_len, abc_on_host);
    if need > shared.budget.total() {
        return fail(format!(
            "parameter set {} ({} bytes) and one partition's memory need {need} bytes together, more than the memory budget ({} bytes, memory.total_budget)",
            job.circuit_id,
            params.size_bytes,
            shared.budget.total()
        ));
    }
    // One synthesis worker at a time gathers a partition's memory in parts (its
    // charge, then three buffers): two gathering at once could each hold part of what
    // the budget has room for and wait for the rest forever. A partition whose a, b, c
    // the backend computes takes one charge, holds nothing while it waits, and need
    // not queue here behind one that waits for memory (an urgent lane would).
    let _admit = abc_on_host.then(|| lock(&shared.admit));
    let witness = match shared.take_witness(job.partition_bytes, &give_up) {
        Ok(w) => w?,
        Err(e) => return fail(e.to_string()),
    };
    let abc = if !abc_on_host {
        None
    } else {
        match shared.take_abc(job.eval_len, &give_up) {
            Ok(b) => Some(b?),
            Err(e) => return fail(e.to_string()),
        }
    };
    Some(Admitted { params, load, witness, abc })
}

/// Synthesizes partition `index` into `abc`, or its witness only (into `witness`'s
/// aux vector) where a, b, c are left to the backend (`matrices`), and checks its
/// public inputs against those the kind computes; the circuit and the inputs to verify
/// its proof against, or None (the job failed).
fn synthesize(
    shared: &Shared,
    job: &Arc<Job>,
    index: usize,
    abc: Option<EvalBuffers>,
    witness: &mut WitnessLoan,
    matrices: Option<Arc<ConstraintMatrices>>,
    lane: &str,
) -> Option<(SynthesizedCircuit, Vec<Scalar>)> {
    let (start, end) = match matrices {
        Some(_) => (EventKind::WitnessStart, EventKind::WitnessEnd),
        None => (EventKind::SynthesisStart, EventKind::SynthesisEnd),
    };
    let Some(work) = job.work(index) else {
        // Finished (cancelled, failed) since it was admitted.
        return None;
    };
    shared.timeline.record(&job.id.0, Some(index), start, lane);
    let t = Instant::now();
    let other_shape = |_| EngineError::Internal("the witness does not fit the circuit's compiled matrices (another circuit shape)".into());
    let result = match (matrices, abc) {
        (Some(m), None) => catch_panic("witness synthesis", move || {
            let w = work.witness(witness.aux_buffer(Some(m.num_aux)))?;
            SynthesizedCircuit::with_pending_products(m, w).map_err(other_shape)
        }),
        // A backend that does not compute them (the CPU, a GPU whose plan has no room
        // for them): a, b, c from the matrices here, into the counted buffers.
        (Some(m), Some(abc)) => catch_panic("witness synthesis and products", move || {
            let w = work.witness(witness.aux_buffer(Some(m.num_aux)))?;
            SynthesizedCircuit::from_matrices(&m, w, abc).map_err(other_shape)
        }),
        (None, Some(abc)) => {
            // Full synthesis makes its own aux vector (kept by the loan afterwards): a
            // lent one would be a second vector under the one charge.
            witness.free_vector();
            catch_panic("synthesis", move || work.synthesize(abc))
        }
        (None, None) => Err(EngineError::Internal("a partition without a, b, c buffers or compiled matrices".into())),
    };
    let took = t.elapsed();
    shared.timeline.record(&job.id.0, Some(index), end, lane);
    job.add_synthesis(took);
    shared.costs.synthesized(&job.circuit_id, took);
    lock(&shared.stats).synthesis.entry(job.kind).or_default().observe(took);
    // The inputs to check the proof against, here rather than in the prover loop
    // (which feeds the device): the kind's own where it computes them.
    let result = result.and_then(|circuit| {
        let own = circuit.input.get(1..).unwrap_or_default();
        let work = job.work(index).ok_or_else(|| EngineError::Internal("the job finished during synthesis".into()))?;
        let inputs_start = Instant::now();
        let inputs = catch_panic("computing public inputs", move || work.public_inputs().transpose());
        // A span only where the kind computes them (not the synthetic kind).
        if !matches!(inputs, Ok(None)) {
            shared.timeline.record_at(&job.id.0, Some(index), EventKind::InputsStart, lane, inputs_start);
            shared.timeline.record(&job.id.0, Some(index), EventKind::InputsEnd, lane);
        }
        match inputs? {
            None => Ok((own.to_vec(), circuit)),
            Some(expected) if expected == own => Ok((expected, circuit)),
            Some(_) => Err(EngineError::Internal(
                "the circuit's public inputs differ from those its verifier computes from the request; the vanilla proofs do not belong to these public values".into(),
            )),
        }
    });
    match result {
        Ok((inputs, circuit)) => {
            tracing::debug!(job = %job.id, partition = index, ms = took.as_millis() as u64, "synthesized");
            Some((circuit, inputs))
        }
        Err(e) => {
            shared.fail_job(job, format!("partition {index}: synthesis failed: {e}"));
            None
        }
    }
}
