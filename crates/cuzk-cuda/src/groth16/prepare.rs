//! The host's part of a proof, with the device free for others: a staging slot taken,
//! the split MSMs' lists built on the device from the aux values, a, b, c uploaded (or,
//! where synthesis left them pending, the compact witness sent and a, b, c computed
//! there from the compiled matrices), and the public-input parts of the A and B
//! queries summed on the host meanwhile.

use std::sync::Arc;
use std::time::Instant;

use blstrs::{G1Projective, G2Projective};
use cudarc::driver::CudaStream;
use cuzk_groth16::backend::ProveError;
use cuzk_groth16::msm::msm as host_msm;
use cuzk_groth16::synthesis::{Density, SynthesizedCircuit};
use cuzk_groth16::{CompactWitness, ParameterSet};

use super::products::{DeviceMatrices, DeviceWitness};
use super::staging::{StagedAbc, StagingSlots};
use crate::device::{backend_error, Gpu, GpuError};
use crate::msm::split::{build_on_device, split_plan, upload_density, DeviceAux, SplitPlan};
use crate::msm::DeviceSplit;

/// A partition ready for the device: a, b, c staged and the split lists built from
/// the aux values (all on the slot's copy stream), the public-input parts summed.
pub struct Prepared<'s, 'c> {
    pub abc: StagedAbc<'s, 'c>,
    pub l: DeviceSplit,
    pub a: DeviceSplit,
    /// The B query's lists, shared by its G1 and G2 MSMs.
    pub b: DeviceSplit,
    /// Bytes of aux values, bitmaps and list offsets sent up.
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
            l: self.l,
            a: self.a,
            b: self.b,
            list_bytes: self.list_bytes,
            a_inputs: self.a_inputs,
            b_inputs_g1: self.b_inputs_g1,
            b_inputs_g2: self.b_inputs_g2,
        })
    }
}

/// The split lists of L, A and B and the bytes their building sent up.
struct Lists {
    l: DeviceSplit,
    a: DeviceSplit,
    b: DeviceSplit,
    bytes: u64,
}

/// Prepares circuit `c` for points whose L, A and B (G1) queries hold `lens` points:
/// per query, where each chunk's lists start (popcounts of the bitmaps); then, on a
/// staging slot's copy stream, the pageable aux values and bitmaps go up and the lists
/// are built from them, and a, b, c follow (pinned: no host wait); the public-input
/// sums on the host meanwhile. A circuit whose products are pending sends its compact
/// witness instead and gets a, b, c from `matrices` (its compiled matrices on this
/// device, which the caller has).
pub fn prepare<'s, 'c>(
    gpu: &Gpu,
    staging: &'s StagingSlots,
    lens: [usize; 3],
    p: &ParameterSet,
    c: &'c SynthesizedCircuit,
    matrices: Option<&DeviceMatrices>,
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
    let t_plans = t0.elapsed();
    let (staged, (a_inputs, (b_inputs_g1, b_inputs_g2))) = rayon::join(
        || match (c.pending_products(), matrices) {
            (None, _) => stage(gpu, staging, lens, &plans, c).map_err(|e| backend_error("uploading a, b, c and building the split lists", e)),
            (Some(_), Some(m)) => stage_products(gpu, staging, lens, &plans, c, m)
                .map_err(|e| backend_error("computing a, b, c on the device and building the split lists", e)),
            (Some(_), None) => Err(ProveError::Backend("a, b, c are pending but the compiled matrices are not on the device".into())),
        },
        || rayon::join(|| host_msm(a_rows, &c.input), || rayon::join(|| host_msm(b_g1_rows, &b_inputs), || host_msm(b_g2_rows, &b_inputs))),
    );
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    tracing::debug!(plans = ms(t_plans), enqueued = ms(t0.elapsed()), "prepare: host steps (ms from its start)");
    let (abc, lists) = staged?;
    Ok(Prepared { abc, l: lists.l, a: lists.a, b: lists.b, list_bytes: lists.bytes, a_inputs, b_inputs_g1, b_inputs_g2 })
}

/// On a staging slot's copy stream: the lists, then a, b, c.
fn stage<'s, 'c>(
    gpu: &Gpu,
    staging: &'s StagingSlots,
    lens: [usize; 3],
    plans: &[SplitPlan; 3],
    c: &'c SynthesizedCircuit,
) -> Result<(StagedAbc<'s, 'c>, Lists), GpuError> {
    let domain = c.a.as_slice().len().max(c.b.as_slice().len()).max(c.c.as_slice().len()).max(1).next_power_of_two();
    let slot = staging.take(domain)?;
    if c.aux.is_empty() {
        let none = || DeviceSplit::new(None, None, None, 0);
        return Ok((slot.upload(c.a.as_slice(), c.b.as_slice(), c.c.as_slice())?, Lists { l: none(), a: none(), b: none(), bytes: 0 }));
    }
    let s = slot.copy_stream()?;
    let up = Instant::now();
    let aux = DeviceAux::upload(s, &c.aux, &c.aux_classes)?;
    tracing::debug!(ms = up.elapsed().as_secs_f64() * 1e3, gb = aux.bytes as f64 / 1e9, "prepare: aux values up (pageable)");
    let lists = build_lists(gpu, s, lens, plans, c, &aux)?;
    let abc = slot.upload(c.a.as_slice(), c.b.as_slice(), c.c.as_slice())?;
    Ok((abc, lists))
}

/// On a staging slot's copy stream: the compact witness up and expanded, the lists
/// built from it, a, b, c computed from the compiled matrices.
fn stage_products<'s>(
    gpu: &Gpu,
    staging: &'s StagingSlots,
    lens: [usize; 3],
    plans: &[SplitPlan; 3],
    c: &SynthesizedCircuit,
    matrices: &DeviceMatrices,
) -> Result<(StagedAbc<'s, 'static>, Lists), GpuError> {
    if c.aux.is_empty() {
        return Err(GpuError::Invalid("a circuit without aux values: nothing for compiled matrices to multiply".into()));
    }
    let slot = staging.take(c.domain_size())?;
    let s = slot.copy_stream()?;
    let up = Instant::now();
    let compact = CompactWitness::from_classified(&c.input, &c.aux, &c.aux_classes);
    let z = DeviceWitness::upload(gpu, s, &compact)?;
    tracing::debug!(ms = up.elapsed().as_secs_f64() * 1e3, gb = z.bytes as f64 / 1e9, "prepare: compact witness up (pageable)");
    let lists = build_lists(gpu, s, lens, plans, c, &z.aux)?;
    let abc = slot.products(gpu, matrices, &z)?;
    // z is freed in stream order, after the kernels that read it.
    Ok((abc, lists))
}

/// The split lists of L, A and B built on stream `s` from the aux values (pageable
/// uploads first: each waits for the stream's earlier work).
fn build_lists(
    gpu: &Gpu,
    s: &Arc<CudaStream>,
    lens: [usize; 3],
    plans: &[SplitPlan; 3],
    c: &SynthesizedCircuit,
    aux: &DeviceAux,
) -> Result<Lists, GpuError> {
    let [l_len, a_len, b_len] = lens;
    let [pl, pa, pb] = plans;
    let n = c.aux.len();
    let (da, db) = (upload_density(s, &c.a_aux_density, n)?, upload_density(s, &c.b_aux_density, n)?);
    let l = build_on_device(gpu, s, l_len, aux, None, pl)?;
    let a = build_on_device(gpu, s, a_len, aux, Some(&da), pa)?;
    let b = build_on_device(gpu, s, b_len, aux, Some(&db), pb)?;
    // The aux values and classes, the A and B densities, the lists' offsets.
    let bytes = aux.bytes + 2 * n.div_ceil(64) as u64 * 8 + l.bytes + a.bytes + b.bytes;
    Ok(Lists { l, a, b, bytes })
}
