//! A prover worker: a synthesized partition → its proof on this worker's backend →
//! the proof verified against the partition's public inputs → kept (the job completes
//! when its last one is in and the kind's final check accepts the whole), or proved
//! again once (on another backend where there is one), then the job fails. A backend
//! error is met the same way; a lost device takes its backend out of service and its
//! partition goes to the others (with none left, jobs fail saying so).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::verifier::verify_proof;
use cuzk_groth16::{DeviceReport, Proof, ProofRandomness, ProveError, ProveOutput, Stage, Urgency};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::panic_guard::catch_panic;
use crate::job::{Job, PartitionState, PartitionTicket};
use crate::scheduler::{Lane, PartitionTask, ReadyPartition};
use crate::shared::{BackendSlot, Shared};
use crate::timeline::EventKind;
use cuzk_groth16::sync::lock;

/// Runs until the hand-off queue closes, taking the partitions `takes` takes, highest
/// priority first (an urgent lane's on its own threads). `backend_index` is the slot's
/// place in the engine's backends; `lane` names this worker in the timeline
/// ("prove-b.w", "prove-b.u" for the urgent lane).
pub(crate) fn prover_loop(shared: &Shared, slot: &BackendSlot, backend_index: usize, lane: &str, takes: Lane) {
    let mut rng = ChaCha20Rng::from_entropy();
    // A retry of a proof this backend got wrong (or failed) is left to another backend
    // in service, if any. Out of service, this worker takes partitions only once no
    // backend is left in service, to fail their jobs.
    let mine = |r: &ReadyPartition| {
        let in_service = shared.backends.iter().filter(|b| b.in_service()).count();
        if !slot.in_service() {
            return in_service == 0;
        }
        takes.takes(r.task.job.priority) && (in_service < 2 || r.task.avoid_backend != Some(backend_index))
    };
    while let Some(ready) = shared.ready.pop_where(mine, |r| r.task.rank()) {
        // The ticket counts the partition in flight until it is dropped or handed to
        // its job with the proof: on every way out below.
        let ReadyPartition { task, mut circuit, inputs, params, ticket } = ready;
        let job = task.job.clone();
        if job.is_finished() {
            continue;
        }
        if let Some(why) = shared.no_backend_in_service() {
            drop(ticket);
            shared.fail_job(&job, format!("partition {}: {why}", task.index));
            continue;
        }
        let randomness = ProofRandomness::random(&mut rng);
        *lock(&slot.current) = Some((job.id.clone(), job.kind));
        job.set_part(task.index, PartitionState::Proving);
        // The device serves urgent partitions first, whichever lane took them.
        let urgency = if job.priority.urgent() { Urgency::Urgent } else { Urgency::Ordinary };
        let (result, took) = shared.on_lane_threads(takes, || {
            prove(shared, slot, &job, task.index, lane, || {
                slot.backend.prove_with(urgency, &params.set, std::slice::from_mut(&mut circuit), &[randomness])
            })
        });
        *lock(&slot.current) = None;
        // The witness and a/b/c are no longer needed: their memory goes back before
        // verifying.
        drop(circuit);
        job.add_gpu(took);
        shared.costs.proved(&job.circuit_id, took);
        {
            let mut stats = lock(&shared.stats);
            stats.prove.entry(job.kind).or_default().observe(took);
            if let Ok(ProveOutput { device: Some(d), .. }) = &result {
                *stats.bytes_up.entry(job.kind).or_default() += d.bytes_up;
                *stats.bytes_down.entry(job.kind).or_default() += d.bytes_down;
                *stats.device_partitions.entry(job.kind).or_default() += 1;
            }
        }
        let proof = match result {
            Ok(out) if out.proofs.len() == 1 => out.proofs[0],
            Ok(out) => {
                drop(ticket);
                shared.fail_job(&job, format!("partition {}: the backend returned {} proofs for one circuit", task.index, out.proofs.len()));
                continue;
            }
            Err(Failure::Panicked(e)) => {
                // A bug, not a fault of the device: not tried again.
                drop(ticket);
                shared.fail_job(&job, format!("partition {}: proving failed on {}: {e}", task.index, slot.backend.name()));
                continue;
            }
            Err(Failure::Failed(e)) => {
                let why = format!("proving failed on {}: {e}", slot.backend.name());
                again_or_fail(shared, slot, task, ticket, backend_index, why, lane);
                continue;
            }
            Err(Failure::ShortOfMemory(e)) => {
                // The backend plans the set again at its next use; the set is loaded
                // again for it, so its host memory is charged for the new plan (which
                // may stream what the old one kept on the device). Then proved once more.
                let copy = params.set.id();
                drop(params);
                shared.params.forget(&job.circuit_id, copy);
                let why = format!("proving failed on {}: {e}", slot.backend.name());
                again_or_fail(shared, slot, task, ticket, backend_index, why, lane);
                continue;
            }
            Err(Failure::Lost(e)) => {
                // Not the partition's fault: proved again elsewhere, its attempts
                // unchanged (or its job failed where no backend is left).
                drop(ticket);
                shared.take_out_of_service(slot, &e);
                match shared.no_backend_in_service() {
                    Some(why) => shared.fail_job(&job, format!("partition {}: {why}", task.index)),
                    None => {
                        tracing::warn!(job = %job.id, partition = task.index, backend = slot.backend.name(), "partition goes to another backend: this one's device was lost");
                        job.set_part(task.index, PartitionState::Queued);
                        shared.queue.push(PartitionTask { avoid_backend: Some(backend_index), ..task });
                    }
                }
                continue;
            }
        };
        if job.timing_note.is_some() {
            // The set's lease goes before the job can complete, so whoever sees the job
            // done finds the set unused (EvictSRS refuses a set in use).
            drop(params);
            // Timing only: the proof is not checked, and it is never returned.
            if job.partition_done(ticket, task.index, proof.to_bytes().to_vec(), PartitionState::ProvedForTiming).is_some()
                && job.complete(Vec::new())
            {
                tracing::info!(job = %job.id, kind = %job.kind, "timing-only job completed; no proof is returned");
            }
            continue;
        }
        let verdict = verify_proof(&params.pvk, &proof, &inputs);
        drop(params);
        match verdict {
            Ok(true) => shared.on_lane_threads(takes, || keep(shared, &job, ticket, task.index, &proof, lane)),
            bad => {
                let why = match bad {
                    Err(e) => format!("verification error: {e}"),
                    _ => "the proof does not verify".to_string(),
                };
                reject(shared, slot, task, ticket, backend_index, why, lane);
            }
        }
    }
}

/// How a backend's proof did not come.
enum Failure {
    /// The backend panicked: a bug.
    Panicked(String),
    /// The backend returned an error.
    Failed(String),
    /// Its device is lost ([`ProveError::DeviceLost`]).
    Lost(String),
    /// The set's placement ran short of device memory ([`ProveError::DeviceMemory`]).
    ShortOfMemory(String),
}

/// Runs the backend's proof and records it in the timeline; the result and the
/// device's own time (the call's where the backend reports none).
fn prove(
    shared: &Shared,
    slot: &BackendSlot,
    job: &Job,
    index: usize,
    lane: &str,
    call: impl FnOnce() -> Result<ProveOutput, ProveError>,
) -> (Result<ProveOutput, Failure>, Duration) {
    let t = Instant::now();
    let r = match catch_panic("the backend", || Ok::<_, std::convert::Infallible>(call())) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e @ ProveError::DeviceLost(_))) => Err(Failure::Lost(e.to_string())),
        Ok(Err(e @ ProveError::DeviceMemory(_))) => Err(Failure::ShortOfMemory(e.to_string())),
        Ok(Err(e)) => Err(Failure::Failed(e.to_string())),
        Err(e) => Err(Failure::Panicked(e.to_string())),
    };
    // The prover lane shows the device's compute region where the backend reports it
    // (its preparation overlaps the other worker's kernels).
    let (from, to) = match &r {
        Ok(ProveOutput { device: Some(DeviceReport { held_from: Some(a), held_to: Some(b), .. }), .. }) => (*a, *b),
        _ => (t, Instant::now()),
    };
    if let Ok(out) = &r {
        // The host preparation before the compute region, on the worker's host lane:
        // as the backend reports it, else from the call's start.
        let prepare = match out.device {
            Some(DeviceReport { prepared_from: Some(a), prepared_to: Some(b), .. }) => Some((a, b)),
            _ => Some(out.timings.get(Stage::Prepare)).filter(|d| !d.is_zero()).map(|d| (t, t + d)),
        };
        let host = lane.replacen("prove", "host", 1);
        // a, b, c computed on the host (before the preparation), on the host lane.
        if let Some((a, b)) = out.device.and_then(|d| d.host_products) {
            shared.timeline.record_at(&job.id.0, Some(index), EventKind::ProductsStart, &host, a);
            shared.timeline.record_at(&job.id.0, Some(index), EventKind::ProductsEnd, &host, b);
        }
        if let Some((a, b)) = prepare {
            shared.timeline.record_at(&job.id.0, Some(index), EventKind::PrepareStart, &host, a);
            shared.timeline.record_at(&job.id.0, Some(index), EventKind::PrepareEnd, &host, b);
        }
        // The device's copy stream: uploads, and the products where it computed a, b, c.
        let copy = lane.replacen("prove", "copy", 1);
        let copy_spans = out.device.iter().flat_map(|d| {
            [(d.uploaded, EventKind::UploadStart, EventKind::UploadEnd), (d.products, EventKind::ProductsStart, EventKind::ProductsEnd)]
        });
        for (span, start, end) in copy_spans {
            if let Some((a, b)) = span {
                shared.timeline.record_at(&job.id.0, Some(index), start, &copy, a);
                shared.timeline.record_at(&job.id.0, Some(index), end, &copy, b);
            }
        }
        tracing::debug!(job = %job.id, partition = index, backend = slot.backend.name(), timings = ?out.timings, device = ?out.device, "proved");
    }
    shared.timeline.record_at(&job.id.0, Some(index), EventKind::ProveStart, lane, from);
    shared.timeline.record_at(&job.id.0, Some(index), EventKind::ProveEnd, lane, to);
    // The device's own time where the backend reports it (the call also includes host
    // preparation that overlaps other workers' kernels).
    let took = match &r {
        Ok(out) => out.device.map_or(t.elapsed(), |d| d.held),
        _ => t.elapsed(),
    };
    (r, took)
}

/// A verified partition proof: kept; the last one completes the job once the kind's
/// final check accepts the assembled proof.
fn keep(shared: &Shared, job: &Arc<Job>, ticket: PartitionTicket, index: usize, proof: &Proof, lane: &str) {
    shared.timeline.record(&job.id.0, Some(index), EventKind::Verified, lane);
    let Some(assembled) = job.partition_done(ticket, index, proof.to_bytes().to_vec(), PartitionState::Verified) else { return };
    let t = Instant::now();
    let checked = match job.final_check() {
        None => Ok("every partition proof verified".to_string()),
        Some(check) => check(&assembled),
    };
    let final_check_ms = t.elapsed().as_millis() as u64;
    match checked {
        Ok(how) => {
            if job.complete(assembled) {
                shared.store_completed(job);
                tracing::info!(job = %job.id, kind = %job.kind, checked = how.as_str(), final_check_ms, "job completed");
            }
        }
        Err(why) => {
            lock(&shared.stats).verify_failures += 1;
            shared.fail_job(job, format!("the assembled proof was refused: {why}; no proof is returned"));
        }
    }
}

/// A partition proof that failed verification: [`again_or_fail`].
fn reject(shared: &Shared, slot: &BackendSlot, task: PartitionTask, ticket: PartitionTicket, backend_index: usize, why: String, lane: &str) {
    lock(&shared.stats).verify_failures += 1;
    again_or_fail(shared, slot, task, ticket, backend_index, why, lane);
}

/// A partition whose proof failed (`why`): queued again once, to be proved on another
/// backend in service where there is one; the second failure fails the job.
fn again_or_fail(shared: &Shared, slot: &BackendSlot, task: PartitionTask, ticket: PartitionTicket, backend_index: usize, why: String, lane: &str) {
    let job = task.job;
    shared.timeline.record(&job.id.0, Some(task.index), EventKind::Rejected, lane);
    // Out of flight before its second attempt is queued.
    drop(ticket);
    if task.attempt == 0 {
        tracing::warn!(job = %job.id, partition = task.index, backend = slot.backend.name(), why = why.as_str(), "partition proof rejected; proving it again");
        job.set_part(task.index, PartitionState::Queued);
        shared.queue.push(PartitionTask { job: job.clone(), index: task.index, attempt: 1, avoid_backend: Some(backend_index) });
    } else {
        shared.fail_job(&job, format!("partition {}: {why} (twice); no proof is returned", task.index));
    }
}
