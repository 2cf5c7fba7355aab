//! Parameter sets (the proving key) and verifying keys, in memory.

use std::sync::atomic::{AtomicU64, Ordering};

use blstrs::{G1Affine, G2Affine};

use crate::synthesis::SynthesizedCircuit;

/// The verifying key: the parts of the parameter set a verifier needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyingKey {
    pub alpha_g1: G1Affine,
    pub beta_g1: G1Affine,
    pub beta_g2: G2Affine,
    pub gamma_g2: G2Affine,
    pub delta_g1: G1Affine,
    pub delta_g2: G2Affine,
    /// (β·uᵢ(τ) + α·vᵢ(τ) + wᵢ(τ)) / γ · G1 for each public input, the constant one first.
    pub ic: Vec<G1Affine>,
}

/// Identity of a parameter set within this process, so a backend can cache per-set
/// state (a GPU backend keeps the points resident on the device).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParameterSetId(pub u64);

impl ParameterSetId {
    fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ParameterSetId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A Groth16 parameter set (proving key) in the bellperson/Filecoin layout.
#[derive(Debug)]
pub struct ParameterSet {
    id: ParameterSetId,
    pub vk: VerifyingKey,
    /// τⁱ·Z(τ)/δ · G1 for i < n − 1, n the domain size.
    pub h: Vec<G1Affine>,
    /// (β·uᵢ + α·vᵢ + wᵢ)/δ · G1 for every aux variable.
    pub l: Vec<G1Affine>,
    /// uᵢ(τ)·G1 for every input, then for the aux variables in the A query.
    pub a: Vec<G1Affine>,
    /// vᵢ(τ)·G1 for the inputs, then the aux variables, in the B query.
    pub b_g1: Vec<G1Affine>,
    /// vᵢ(τ)·G2, same selection as `b_g1`.
    pub b_g2: Vec<G2Affine>,
}

impl PartialEq for ParameterSet {
    /// Equal contents (the process-local id is ignored).
    fn eq(&self, o: &Self) -> bool {
        self.vk == o.vk && self.h == o.h && self.l == o.l && self.a == o.a && self.b_g1 == o.b_g1 && self.b_g2 == o.b_g2
    }
}

/// A parameter set does not fit a circuit.
#[derive(Debug, thiserror::Error)]
#[error("parameter set does not match the circuit: {query} has {params} points, the circuit needs {circuit}")]
pub struct ShapeMismatch {
    pub query: &'static str,
    pub params: usize,
    pub circuit: usize,
}

impl ParameterSet {
    pub fn new(
        vk: VerifyingKey,
        h: Vec<G1Affine>,
        l: Vec<G1Affine>,
        a: Vec<G1Affine>,
        b_g1: Vec<G1Affine>,
        b_g2: Vec<G2Affine>,
    ) -> Self {
        ParameterSet { id: ParameterSetId::fresh(), vk, h, l, a, b_g1, b_g2 }
    }

    pub fn id(&self) -> ParameterSetId {
        self.id
    }

    /// The evaluation domain size these parameters were made for.
    pub fn domain_size(&self) -> usize {
        self.h.len() + 1
    }

    /// Total bytes of points held (for memory accounting).
    pub fn size_bytes(&self) -> usize {
        let g1 = std::mem::size_of::<G1Affine>();
        (self.vk.ic.len() + self.h.len() + self.l.len() + self.a.len() + self.b_g1.len()) * g1
            + self.b_g2.len() * std::mem::size_of::<G2Affine>()
    }

    /// Checks every query length against what `c` needs.
    pub fn check_shape(&self, c: &SynthesizedCircuit) -> Result<(), ShapeMismatch> {
        let b_count = c.b_input_density.count() + c.b_aux_density.count();
        let checks = [
            ("IC", self.vk.ic.len(), c.num_inputs()),
            ("H", self.h.len(), c.domain_size() - 1),
            ("L", self.l.len(), c.num_aux()),
            ("A", self.a.len(), c.num_inputs() + c.a_aux_density.count()),
            ("B_G1", self.b_g1.len(), b_count),
            ("B_G2", self.b_g2.len(), b_count),
        ];
        for (query, params, circuit) in checks {
            if params != circuit {
                return Err(ShapeMismatch { query, params, circuit });
            }
        }
        Ok(())
    }
}
