//! The proving-backend interface: what every prover (CPU, CUDA, …) implements.

use std::time::Duration;

use blstrs::Scalar;
use ff::Field;
use rand_core::RngCore;

use crate::params::{ParameterSet, ParameterSetId, ShapeMismatch};
use crate::proof::Proof;
use crate::synthesis::SynthesizedCircuit;

/// The blinding scalars r, s of one proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProofRandomness {
    pub r: Scalar,
    pub s: Scalar,
}

impl ProofRandomness {
    /// Fresh uniformly random r, s: the zero-knowledge case.
    pub fn random(rng: &mut impl RngCore) -> Self {
        ProofRandomness { r: Scalar::random(&mut *rng), s: Scalar::random(rng) }
    }

    /// r = s = 0: deterministic proofs, for tests that compare backends bit for bit.
    pub fn zero() -> Self {
        ProofRandomness { r: Scalar::ZERO, s: Scalar::ZERO }
    }
}

/// How soon a proof is wanted ([`ProvingBackend::prove_with`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Urgency {
    #[default]
    Ordinary,
    /// A deadline is near (a WinningPoSt, a WindowPoSt partition): served before
    /// ordinary work waiting for the same device.
    Urgent,
}

/// Stages of a proof, for per-stage timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Host-to-device transfer (GPU backends; on a copy stream, overlapping compute).
    Upload,
    /// Host work before the device is taken: index lists, the public-input parts.
    Prepare,
    /// a = A·z, b = B·z, c = C·z from compiled matrices, where synthesis left them to
    /// the backend (on a device: the witness's expansion too).
    Products,
    /// The NTTs and pointwise passes of the H polynomial.
    HPolynomial,
    MsmH,
    MsmL,
    MsmA,
    MsmBG1,
    MsmBG2,
    Assembly,
}

impl Stage {
    pub const ALL: [Stage; 10] = [
        Stage::Upload,
        Stage::Prepare,
        Stage::Products,
        Stage::HPolynomial,
        Stage::MsmH,
        Stage::MsmL,
        Stage::MsmA,
        Stage::MsmBG1,
        Stage::MsmBG2,
        Stage::Assembly,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Upload => "upload",
            Stage::Prepare => "prepare",
            Stage::Products => "products",
            Stage::HPolynomial => "h_poly",
            Stage::MsmH => "msm_h",
            Stage::MsmL => "msm_l",
            Stage::MsmA => "msm_a",
            Stage::MsmBG1 => "msm_b_g1",
            Stage::MsmBG2 => "msm_b_g2",
            Stage::Assembly => "assembly",
        }
    }
}

/// Accumulated time per stage over one `prove` call.
#[derive(Clone, Debug, Default)]
pub struct StageTimings {
    entries: Vec<(Stage, Duration)>,
}

impl StageTimings {
    pub fn add(&mut self, stage: Stage, d: Duration) {
        match self.entries.iter_mut().find(|(s, _)| *s == stage) {
            Some((_, t)) => *t += d,
            None => self.entries.push((stage, d)),
        }
    }

    pub fn get(&self, stage: Stage) -> Duration {
        self.entries.iter().find(|(s, _)| *s == stage).map_or(Duration::ZERO, |(_, d)| *d)
    }

    pub fn total(&self) -> Duration {
        self.entries.iter().map(|(_, d)| *d).sum()
    }

    /// Runs `f`, adding its wall time to `stage`.
    pub fn time<T>(&mut self, stage: Stage, f: impl FnOnce() -> T) -> T {
        let t = std::time::Instant::now();
        let out = f();
        self.add(stage, t.elapsed());
        out
    }
}

/// What a device backend measured of its device over one `prove` call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceReport {
    /// Host time the device was held (the compute regions, summed over the circuits).
    pub held: Duration,
    /// When the first compute region began and the last one ended.
    pub held_from: Option<std::time::Instant>,
    pub held_to: Option<std::time::Instant>,
    /// When the first host preparation (before a compute region) began and the last
    /// one ended, where the backend has one.
    pub prepared_from: Option<std::time::Instant>,
    pub prepared_to: Option<std::time::Instant>,
    /// When the uploads ran on the device's copy stream (first to last), and the
    /// products where the backend computes a, b, c: on the host's clock, from the
    /// device's events.
    pub uploaded: Option<(std::time::Instant, std::time::Instant)>,
    pub products: Option<(std::time::Instant, std::time::Instant)>,
    /// When a, b, c were computed on the host instead (a GPU backend whose device could
    /// not take them for this circuit), before the preparation.
    pub host_products: Option<(std::time::Instant, std::time::Instant)>,
    /// Device time of the kernels inside those regions (CUDA events).
    pub busy: Duration,
    /// Bytes moved host → device and device → host.
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Host waits for the device.
    pub host_syncs: u32,
}

impl DeviceReport {
    /// Time the device sat idle while held (gaps between kernels, waits for uploads,
    /// launch latency, the final download).
    pub fn idle(&self) -> Duration {
        self.held.saturating_sub(self.busy)
    }

    pub fn add(&mut self, o: &DeviceReport) {
        self.held += o.held;
        self.held_from = match (self.held_from, o.held_from) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.held_to = self.held_to.max(o.held_to);
        self.prepared_from = match (self.prepared_from, o.prepared_from) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.prepared_to = self.prepared_to.max(o.prepared_to);
        let span = |a: Option<(std::time::Instant, std::time::Instant)>, b: Option<(std::time::Instant, std::time::Instant)>| match (a, b) {
            (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
            (x, y) => x.or(y),
        };
        self.uploaded = span(self.uploaded, o.uploaded);
        self.products = span(self.products, o.products);
        self.busy += o.busy;
        self.bytes_up += o.bytes_up;
        self.bytes_down += o.bytes_down;
        self.host_syncs += o.host_syncs;
    }
}

/// The device a backend proves on, as status reports show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's number as its driver counts devices (the CUDA ordinal), which is
    /// what an operator's device list (`gpus.devices`) names.
    pub ordinal: usize,
    pub name: String,
    /// The device's memory and how much of it is free now, in bytes, as the driver
    /// reports them when asked; 0 where the driver could not be asked.
    pub total_memory: u64,
    pub free_memory: u64,
    /// Bytes in use inside the device's memory pool now, and the most ever in use (its
    /// high-water mark); 0 where unknown.
    pub pool_used: u64,
    pub pool_used_high: u64,
}

/// What a backend returns: one proof per circuit, in order, and where the time went.
#[derive(Debug)]
pub struct ProveOutput {
    pub proofs: Vec<Proof>,
    pub timings: StageTimings,
    /// Device figures, from backends that run on one.
    pub device: Option<DeviceReport>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    #[error(transparent)]
    Shape(#[from] ShapeMismatch),
    #[error("{circuits} circuits but {randomness} (r, s) pairs")]
    RandomnessCount { circuits: usize, randomness: usize },
    #[error("evaluation buffer too small for the domain: {0}")]
    Buffer(String),
    #[error("circuits of one call must share a shape: circuit {index} differs from circuit 0")]
    MixedShapes { index: usize },
    #[error("circuit {index} was already proven: its a/b/c were used as scratch; synthesize it again")]
    Consumed { index: usize },
    #[error("backend failure: {0}")]
    Backend(String),
    /// The backend's device can prove nothing more (a sticky CUDA error: the context
    /// is unusable until the process ends): the caller takes the backend out of service
    /// and proves the circuits elsewhere.
    #[error("device lost: {0}")]
    DeviceLost(String),
    /// A parameter set's placement on the device ran short of memory (another process
    /// took some after the set was planned): nothing of it stays placed, and the backend
    /// plans it again at its next use within the memory free then. The caller charges
    /// the set's host memory again (a smaller device plan may pin more of it on the
    /// host) and tries once more.
    #[error("the device ran short of memory: {0}")]
    DeviceMemory(String),
}

/// A Groth16 prover for BLS12-381.
///
/// # Contract
/// - `prove(params, circuits, randomness)` returns exactly one proof per circuit, in
///   order, where proof `i` uses `randomness[i]`. All circuits of one call have the
///   same shape (same constraint system, different witnesses) and `params` fits that
///   shape; a mismatch is an error ([`ProveError::Shape`]), never a wrong proof.
/// - `circuits` is borrowed mutably because backends may use the a/b/c vectors as
///   scratch space for the H polynomial: after the call their contents are unspecified.
///   Assignments, densities and classes are left untouched; the backend marks each
///   circuit consumed ([`SynthesizedCircuit::mark_consumed`]) and refuses consumed ones. The caller owns the
///   storage (e.g. pinned buffers from a pool) and gets it back when it drops the
///   circuits. A circuit that carries a witness charge
///   ([`SynthesizedCircuit::charge_witness`]) may have its witness freed (the charge
///   handed the aux vector) by the backend as soon as it has read it, before the proof
///   is done.
/// - A backend may keep per-parameter-set state keyed by [`ParameterSet::id`] (a GPU
///   backend keeps the points resident on the device), so callers should keep one
///   `ParameterSet` alive per circuit kind rather than reloading it.
/// - Proving one circuit at a time is the normal case (the engine overlaps the next
///   partition's synthesis with this one's proof); several circuits per call let a
///   backend share work between them.
/// - Backends do not verify; the caller does (see [`crate::verifier`]).
/// - Implementations are `Send + Sync` and may be called from several threads at once.
///   A backend serializes its own device's compute region and nothing more, so one
///   caller's preparation (uploads, index lists) overlaps another's kernels: callers
///   take no lock around `prove`.
pub trait ProvingBackend: Send + Sync {
    /// A short name for logs and reports ("cpu", "cuda:0", …).
    fn name(&self) -> String;

    /// Proves `circuits`, `urgency` saying how soon the proofs are wanted: a backend
    /// whose callers queue for a device (a GPU's slots and compute regions, the CPU's
    /// cores) serves urgent ones first. A backend wrapping another passes it on.
    fn prove_with(
        &self,
        urgency: Urgency,
        params: &ParameterSet,
        circuits: &mut [SynthesizedCircuit],
        randomness: &[ProofRandomness],
    ) -> Result<ProveOutput, ProveError>;

    /// [`ProvingBackend::prove_with`] for ordinary work.
    fn prove(&self, params: &ParameterSet, circuits: &mut [SynthesizedCircuit], randomness: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        self.prove_with(Urgency::Ordinary, params, circuits, randomness)
    }

    /// Makes the set's points ready for proving now (a GPU backend reads them onto its
    /// device, reporting to `progress`) rather than on the first proof; by default
    /// nothing is done.
    fn load_params(&self, params: &ParameterSet, progress: &dyn crate::progress::Progress) -> Result<(), ProveError> {
        let _ = (params, progress);
        Ok(())
    }

    /// Plans the set on this backend's device before it is accepted, knowing the
    /// circuit's compiled matrices where it has them: a GPU backend decides where every
    /// device allocation of its partitions goes, or refuses a set no configuration of
    /// its device fits (the error says what it needs). By default nothing is planned.
    fn plan_params(&self, params: &ParameterSet, matrices: Option<&crate::matrices::ConstraintMatrices>) -> Result<(), ProveError> {
        let _ = (params, matrices);
        Ok(())
    }

    /// Whether this backend computes a, b, c of the set's partitions itself from the
    /// compiled matrices (a GPU whose plan has them on its device), without host
    /// buffers for them; where it does not, the caller computes them on the host first,
    /// in buffers it counted. Asked after [`ProvingBackend::plan_params`]. By default no.
    fn computes_products(&self, params: &ParameterSet) -> bool {
        let _ = params;
        false
    }

    /// The set `id` will not be proven with again (it was evicted and its last user has
    /// finished): per-set state such as device-resident points can go. A later `prove`
    /// with a set of that id may load it anew. By default nothing is kept, nothing done.
    fn release_params(&self, id: ParameterSetId) {
        let _ = id;
    }

    /// Host memory this backend would keep for the set's points besides the set itself,
    /// for the engine's memory budget: a GPU backend streaming a set too large for its
    /// device keeps them pinned (one copy, shared by every backend of the process that
    /// streams it). This memory is page-locked: the engine reports it as pinned. By
    /// default none.
    fn host_bytes_for(&self, params: &ParameterSet) -> u64 {
        let _ = params;
        0
    }

    /// The device this backend proves on (its driver's ordinal, name and memory, asked
    /// now), for status reports; None for a backend without one (the CPU backend).
    fn device(&self) -> Option<DeviceInfo> {
        None
    }

    /// False once the backend's device is lost ([`ProveError::DeviceLost`]): it is then
    /// asked nothing more (no plan, no load, no proof). By default always in service.
    fn in_service(&self) -> bool {
        true
    }

    /// Whether this backend reads a set's query points from their `.params` file
    /// itself ([`crate::params::QueryPoints::File`]), so the host need not decode them.
    fn reads_params_from_file(&self) -> bool {
        false
    }

    /// Whether `prove` leaves a, b and c as they were (it computes on copies), so a
    /// caller may prove the same synthesized circuit again
    /// ([`SynthesizedCircuit::reuse_evaluations`]): benchmarks with pre-made partitions.
    fn keeps_evaluations(&self) -> bool {
        false
    }
}

impl SynthesizedCircuit {
    /// Makes a circuit proven by `backend` provable again, when that backend leaves
    /// a, b and c as they were ([`ProvingBackend::keeps_evaluations`]); otherwise an
    /// error, and the circuit stays consumed.
    pub fn reuse_evaluations(&mut self, backend: &dyn ProvingBackend) -> Result<(), ProveError> {
        if !backend.keeps_evaluations() {
            return Err(ProveError::Backend(format!("{} uses a, b, c as scratch: synthesize the circuit again", backend.name())));
        }
        self.unconsume();
        Ok(())
    }
}

/// Proves the circuits one by one with `prove_one(circuit, r_s, timings)`, collecting
/// the proofs in order: the loop every backend shares. `checked` says the contract's
/// checks passed for these inputs ([`check_inputs`]: once per call, before anything
/// long).
pub fn prove_each(
    checked: InputsChecked,
    circuits: &mut [SynthesizedCircuit],
    randomness: &[ProofRandomness],
    mut timings: StageTimings,
    mut prove_one: impl FnMut(&mut SynthesizedCircuit, &ProofRandomness, &mut StageTimings) -> Result<Proof, ProveError>,
) -> Result<ProveOutput, ProveError> {
    let InputsChecked(()) = checked;
    // The token says nothing of which inputs were checked: a randomness list of another
    // length would leave circuits unproved without this.
    if circuits.len() != randomness.len() {
        return Err(ProveError::RandomnessCount { circuits: circuits.len(), randomness: randomness.len() });
    }
    let mut proofs = Vec::with_capacity(circuits.len());
    for (c, rs) in circuits.iter_mut().zip(randomness) {
        proofs.push(prove_one(c, rs, &mut timings)?);
    }
    Ok(ProveOutput { proofs, timings, device: None })
}

/// That [`check_inputs`] passed: [`prove_each`] takes it, so a backend runs the checks
/// once per call and cannot prove without them.
#[must_use = "prove_each takes it"]
pub struct InputsChecked(());

/// Checks the parts of the contract every backend must check before proving.
pub fn check_inputs(params: &ParameterSet, circuits: &[SynthesizedCircuit], randomness: &[ProofRandomness]) -> Result<InputsChecked, ProveError> {
    if circuits.len() != randomness.len() {
        return Err(ProveError::RandomnessCount { circuits: circuits.len(), randomness: randomness.len() });
    }
    for (index, c) in circuits.iter().enumerate() {
        if c.is_consumed() {
            return Err(ProveError::Consumed { index });
        }
        params.check_shape(c)?;
        let first = &circuits[0];
        if c.num_constraints() != first.num_constraints()
            || c.a_aux_density != first.a_aux_density
            || c.b_aux_density != first.b_aux_density
            || c.b_input_density != first.b_input_density
        {
            return Err(ProveError::MixedShapes { index });
        }
    }
    Ok(InputsChecked(()))
}
