//! Parameter sets (the proving key) and verifying keys, in memory.

use std::sync::atomic::{AtomicU64, Ordering};

use std::path::PathBuf;

use blstrs::{G1Affine, G1Projective, G2Affine};
use group::Curve;

use crate::layout::ParamsLayout;

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

impl VerifyingKey {
    /// Whether this is the key of a timing parameter set (random points, marked by
    /// their α): proofs made with such a set never verify.
    pub fn is_timing_only(&self) -> bool {
        self.alpha_g1 == timing_marker()
    }
}

/// The α of every timing parameter set: a point hashed from a fixed message, which no
/// setup's α can be (its discrete logarithm is unknown, and a setup picks α at random).
/// It marks a file of random points wherever the file goes, and the file stays one
/// that other provers read.
pub fn timing_marker() -> G1Affine {
    static MARKER: std::sync::OnceLock<G1Affine> = std::sync::OnceLock::new();
    *MARKER.get_or_init(|| {
        G1Projective::hash_to_curve(b"cuzk timing parameters: random points; proofs made with them never verify", b"CUZK-TIMING-V1", &[]).to_affine()
    })
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

/// The five queries' points, decoded in host memory.
#[derive(Debug, PartialEq)]
pub struct HostQueries {
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

/// The queries left in their `.params` file for a device backend to read straight onto
/// its device; the host holds the layout and the public inputs' rows of A and B (which
/// it sums itself).
#[derive(Clone, Debug, PartialEq)]
pub struct FileQueries {
    pub path: PathBuf,
    pub layout: ParamsLayout,
    /// A's first points, one per public input (IC).
    pub a_inputs: Vec<G1Affine>,
    /// B's first points, as many as the inputs or B's length if smaller.
    pub b_g1_inputs: Vec<G1Affine>,
    pub b_g2_inputs: Vec<G2Affine>,
}

/// Where a parameter set's query points are.
#[derive(Debug, PartialEq)]
pub enum QueryPoints {
    Host(HostQueries),
    File(FileQueries),
}

/// Query lengths: what a circuit's shape is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryLens {
    pub h: usize,
    pub l: usize,
    pub a: usize,
    pub b_g1: usize,
    pub b_g2: usize,
}

/// A backend that computes on the host was given a parameter set whose points are
/// still in their file.
#[derive(Debug, thiserror::Error)]
#[error("the parameter set's points were left in {path} for a GPU to read; this backend needs them decoded in host memory")]
pub struct NotOnHost {
    pub path: PathBuf,
}

/// A Groth16 parameter set (proving key) in the bellperson/Filecoin layout.
#[derive(Debug)]
pub struct ParameterSet {
    id: ParameterSetId,
    pub vk: VerifyingKey,
    points: QueryPoints,
}

impl PartialEq for ParameterSet {
    /// Equal contents (the process-local id is ignored).
    fn eq(&self, o: &Self) -> bool {
        self.vk == o.vk && self.points == o.points
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
    /// A set with its points in host memory.
    pub fn new(vk: VerifyingKey, h: Vec<G1Affine>, l: Vec<G1Affine>, a: Vec<G1Affine>, b_g1: Vec<G1Affine>, b_g2: Vec<G2Affine>) -> Self {
        ParameterSet { id: ParameterSetId::fresh(), vk, points: QueryPoints::Host(HostQueries { h, l, a, b_g1, b_g2 }) }
    }

    /// Takes the set apart (tests that edit a query).
    pub fn into_parts(self) -> (VerifyingKey, QueryPoints) {
        (self.vk, self.points)
    }

    /// A set whose points stay in their file (see [`crate::format::read_params_layout`]).
    pub fn in_file(vk: VerifyingKey, file: FileQueries) -> Self {
        ParameterSet { id: ParameterSetId::fresh(), vk, points: QueryPoints::File(file) }
    }

    pub fn id(&self) -> ParameterSetId {
        self.id
    }

    pub fn points(&self) -> &QueryPoints {
        &self.points
    }

    /// The points in host memory, for backends that compute on the host.
    pub fn host(&self) -> Result<&HostQueries, NotOnHost> {
        match &self.points {
            QueryPoints::Host(q) => Ok(q),
            QueryPoints::File(f) => Err(NotOnHost { path: f.path.clone() }),
        }
    }

    pub fn lens(&self) -> QueryLens {
        match &self.points {
            QueryPoints::Host(q) => QueryLens { h: q.h.len(), l: q.l.len(), a: q.a.len(), b_g1: q.b_g1.len(), b_g2: q.b_g2.len() },
            QueryPoints::File(f) => {
                let s = &f.layout;
                QueryLens { h: s.h.count, l: s.l.count, a: s.a.count, b_g1: s.b_g1.count, b_g2: s.b_g2.count }
            }
        }
    }

    /// The first `a` points of A and `b` of B (G1 and G2): the public inputs' rows,
    /// which device backends sum on the host. None if the set holds fewer.
    pub fn input_rows(&self, a: usize, b: usize) -> Option<(&[G1Affine], &[G1Affine], &[G2Affine])> {
        match &self.points {
            QueryPoints::Host(q) => Some((q.a.get(..a)?, q.b_g1.get(..b)?, q.b_g2.get(..b)?)),
            QueryPoints::File(f) => Some((f.a_inputs.get(..a)?, f.b_g1_inputs.get(..b)?, f.b_g2_inputs.get(..b)?)),
        }
    }

    /// The evaluation domain size these parameters were made for.
    pub fn domain_size(&self) -> usize {
        self.lens().h + 1
    }

    /// Bytes of points held in host memory (for memory accounting).
    pub fn size_bytes(&self) -> usize {
        let (g1_points, g2_points) = match &self.points {
            QueryPoints::Host(q) => (q.h.len() + q.l.len() + q.a.len() + q.b_g1.len(), q.b_g2.len()),
            QueryPoints::File(f) => (f.a_inputs.len() + f.b_g1_inputs.len(), f.b_g2_inputs.len()),
        };
        crate::layout::host_bytes(self.vk.ic.len(), g1_points, g2_points)
    }

    /// Bytes of the query points wherever they are (what a device holds of them).
    pub fn points_bytes(&self) -> usize {
        let n = self.lens();
        (n.h + n.l + n.a + n.b_g1) * std::mem::size_of::<G1Affine>() + n.b_g2 * std::mem::size_of::<G2Affine>()
    }

    /// Checks every query length against what `c` needs.
    pub fn check_shape(&self, c: &SynthesizedCircuit) -> Result<(), ShapeMismatch> {
        let b_count = c.b_input_density.count() + c.b_aux_density.count();
        let n = self.lens();
        let checks = [
            ("IC", self.vk.ic.len(), c.num_inputs()),
            ("H", n.h, c.domain_size() - 1),
            ("L", n.l, c.num_aux()),
            ("A", n.a, c.num_inputs() + c.a_aux_density.count()),
            ("B_G1", n.b_g1, b_count),
            ("B_G2", n.b_g2, b_count),
        ];
        for (query, params, circuit) in checks {
            if params != circuit {
                return Err(ShapeMismatch { query, params, circuit });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::generator::timing_parameters;
    use crate::progress::NoProgress;
    use rand::SeedableRng;

    #[test]
    fn a_b_g2_query_shorter_than_b_g1_is_a_shape_mismatch() {
        let shape = crate::synthetic::SyntheticShape::for_domain(8);
        let c = crate::synthesize(shape.circuit(1)).unwrap();
        let p = timing_parameters(&c, &mut rand_chacha::ChaCha20Rng::seed_from_u64(5), &NoProgress);
        p.check_shape(&c).unwrap();
        let (vk, points) = p.into_parts();
        let super::QueryPoints::Host(mut q) = points else { panic!("timing parameters are in host memory") };
        q.b_g2.pop();
        let short = super::ParameterSet::new(vk, q.h, q.l, q.a, q.b_g1, q.b_g2);
        let e = short.check_shape(&c).unwrap_err();
        assert_eq!(e.query, "B_G2", "{e}");
    }
}
