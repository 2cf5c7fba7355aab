//! The host's part of a proof, with the device free for others: the split plans
//! counted on the host, a staging slot taken, the compact witness sent into its area
//! (its other values too where they fit), the densities and the lists' chunk tables
//! sent, then a, b, c uploaded (or, where synthesis left them pending, computed on the
//! device from the compiled matrices), all on the slot's copy stream; the public-input
//! parts of the A and B queries summed on the host meanwhile. The split lists
//! themselves are built piece by piece in the compute region (crate::groth16::msms),
//! in memory the H polynomial has finished with.

use std::time::Instant;

use blstrs::{G1Projective, G2Projective, Scalar};
use cudarc::driver::CudaSlice;
use cuzk_groth16::backend::ProveError;
use cuzk_groth16::msm::msm as host_msm;
use cuzk_groth16::synthesis::{Density, SynthesizedCircuit};
use cuzk_groth16::{CompactWitness, ParameterSet, Urgency};

use super::row_blocks::ProductSource;
use super::staging::{StagedAbc, StagingSlots};
use crate::device::{backend_error, Gpu, GpuError};
use crate::msm::compact::{CompactLayout, HostCompact};
use crate::msm::split::{split_plan, upload_density, SplitPlan};

/// One query's split lists as the compute region builds them: the plan counted on the
/// host, its chunk table and density on the device.
pub struct QueryLists {
    pub plan: SplitPlan,
    pub chunk_table: CudaSlice<u32>,
    /// None for L (every aux value selected).
    pub density: Option<CudaSlice<u64>>,
}

/// A partition ready for the device: a, b, c staged, its compact witness in the slot's
/// area, the split plans of L, A and B (all on the slot's copy stream), the
/// public-input parts summed.
pub struct Prepared<'s, 'c> {
    pub abc: StagedAbc<'s, 'c>,
    pub witness: CompactLayout,
    /// The witness's other values, kept on the host when the area does not hold them
    /// (each list piece then sends its window).
    pub others_host: Option<Vec<Scalar>>,
    pub lists: [QueryLists; 3],
    /// Bytes of witness, densities and chunk tables sent up.
    pub list_bytes: u64,
    pub a_inputs: G1Projective,
    pub b_inputs_g1: G1Projective,
    pub b_inputs_g2: G2Projective,
}

impl<'s> Prepared<'s, '_> {
    /// Waits for the uploads from the circuit's memory, which is then free.
    pub fn detach(self) -> Result<Prepared<'s, 'static>, GpuError> {
        Ok(Prepared {
            abc: self.abc.detach()?,
            witness: self.witness,
            others_host: self.others_host,
            lists: self.lists,
            list_bytes: self.list_bytes,
            a_inputs: self.a_inputs,
            b_inputs_g1: self.b_inputs_g1,
            b_inputs_g2: self.b_inputs_g2,
        })
    }
}

/// The compact witness of a synthesized circuit (its inputs, then the aux values'
/// bitmaps and other values), built on the host before a slot is taken.
pub fn compact_witness(c: &SynthesizedCircuit) -> CompactWitness {
    CompactWitness::from_classified(&c.input, &c.aux, &c.aux_classes)
}

/// Whether the witness's other values fit a slot's witness area of `area_bytes`.
pub fn others_fit(w: &CompactWitness, area_bytes: usize) -> bool {
    CompactLayout::new(w.input.len(), w.num_aux(), w.others.len(), true).bytes() <= area_bytes
}

/// Prepares circuit `c` (its compact witness `w`) for points whose L, A and B (G1)
/// queries hold `lens` points: per query, where each chunk's lists start (popcounts of
/// the bitmaps); then, on a staging slot's copy stream, the compact witness, the
/// densities and chunk tables go up, and a, b, c follow: computed from `matrices` (the
/// circuit's compiled matrices on this device) where they are pending, else uploaded
/// (pinned: no host wait). The public-input sums on the host meanwhile.
#[allow(clippy::too_many_arguments)]
pub fn prepare<'s, 'c>(
    gpu: &Gpu,
    staging: &'s StagingSlots,
    lens: [usize; 3],
    p: &ParameterSet,
    c: &'c SynthesizedCircuit,
    w: CompactWitness,
    matrices: Option<&ProductSource<'_>>,
    urgency: Urgency,
) -> Result<Prepared<'s, 'c>, ProveError> {
    let num_inputs = c.num_inputs();
    let b_inputs = c.b_input_density.select(&c.input);
    // B_G2's length equals B_G1's: both were checked against the circuit (check_inputs).
    let (a_rows, b_g1_rows, b_g2_rows) = p
        .input_rows(num_inputs, b_inputs.len())
        .ok_or_else(|| ProveError::Backend("the parameter set lacks the public inputs' rows of A or B".into()))?;
    let t0 = Instant::now();
    let n = c.aux.len();
    let plan = |d: Option<&Density>, first: usize| split_plan(n, &c.aux_classes, d, first).map_err(|e| backend_error("planning the split lists", e));
    let (pl, (pa, pb)) =
        rayon::join(|| plan(None, 0), || rayon::join(|| plan(Some(&c.a_aux_density), num_inputs), || plan(Some(&c.b_aux_density), b_inputs.len())));
    let plans = [pl?, pa?, pb?];
    for (plan, (len, q)) in plans.iter().zip(lens.iter().zip(["L", "A", "B"])) {
        if plan.end > *len {
            return Err(ProveError::Backend(format!("the {q} lists reach base {} of the query's {len}", plan.end)));
        }
    }
    let t_plans = t0.elapsed();
    let (staged, (a_inputs, (b_inputs_g1, b_inputs_g2))) = rayon::join(
        || stage(gpu, staging, plans, c, w, matrices, urgency).map_err(|e| backend_error("sending the witness and a, b, c", e)),
        || rayon::join(|| host_msm(a_rows, &c.input), || rayon::join(|| host_msm(b_g1_rows, &b_inputs), || host_msm(b_g2_rows, &b_inputs))),
    );
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    tracing::debug!(plans = ms(t_plans), enqueued = ms(t0.elapsed()), "prepare: host steps (ms from its start)");
    let (abc, witness, others_host, lists, list_bytes) = staged?;
    Ok(Prepared { abc, witness, others_host, lists, list_bytes, a_inputs, b_inputs_g1, b_inputs_g2 })
}

type Staged<'s, 'c> = (StagedAbc<'s, 'c>, CompactLayout, Option<Vec<Scalar>>, [QueryLists; 3], u64);

/// On a staging slot's copy stream: the compact witness, densities and chunk tables,
/// then a, b, c (computed, or uploaded).
fn stage<'s, 'c>(
    gpu: &Gpu,
    staging: &'s StagingSlots,
    plans: [SplitPlan; 3],
    c: &'c SynthesizedCircuit,
    w: CompactWitness,
    matrices: Option<&ProductSource<'_>>,
    urgency: Urgency,
) -> Result<Staged<'s, 'c>, GpuError> {
    let mut slot = staging.take(c.domain_size(), urgency)?;
    let host = HostCompact { lead: &w.input, classes: &w.classes, len: w.num_aux(), others: &w.others };
    let area_bytes = slot.witness_bytes()?;
    let layout = host.layout(area_bytes).ok_or_else(|| {
        GpuError::Invalid(format!("the witness's bitmaps do not fit the slot's {area_bytes}-byte witness area (the plan counted less)"))
    })?;
    let up = Instant::now();
    let (area, s) = slot.witness_area()?;
    let mut sent = host.upload(gpu, &s, area, &layout)?;
    let n = c.aux.len();
    let [pl, pa, pb] = plans;
    let lists = [
        QueryLists { chunk_table: pl.upload_chunks(&s)?, density: None, plan: pl },
        QueryLists { chunk_table: pa.upload_chunks(&s)?, density: Some(upload_density(&s, &c.a_aux_density, n)?), plan: pa },
        QueryLists { chunk_table: pb.upload_chunks(&s)?, density: Some(upload_density(&s, &c.b_aux_density, n)?), plan: pb },
    ];
    sent += lists.iter().map(|q| (q.plan.chunks.len() * 12 + q.density.as_ref().map_or(0, |d| d.len() * 8)) as u64).sum::<u64>();
    tracing::debug!(
        ms = up.elapsed().as_secs_f64() * 1e3,
        gb = sent as f64 / 1e9,
        others_resident = layout.others_resident,
        "prepare: compact witness up (pageable)"
    );
    let resident = layout.others_resident;
    let others_host = if resident { None } else { Some(w.others) };
    let abc = match (c.pending_products(), matrices) {
        (Some(_), Some(m)) if resident => slot.products(gpu, m, &layout, 0)?,
        (Some(_), _) => {
            return Err(GpuError::Invalid(
                "a, b, c are pending but cannot be computed on the device (the caller computes them on the host first)".into(),
            ))
        }
        (None, _) => slot.upload(c.a.as_slice(), c.b.as_slice(), c.c.as_slice())?,
    };
    Ok((abc, layout, others_host, lists, sent))
}
