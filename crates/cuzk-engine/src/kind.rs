//! Proof kinds: how a request becomes partitions, and which parameter set they need.
//! A kind's handler plans the body type of its own family ([`KindHandler<B>`]); the
//! engine holds them as [`Handler`]s, one variant per [`RequestBody`] variant, so a
//! request reaches a handler of its own type with no downcast.

use std::collections::HashMap;
use std::sync::Arc;

use cuzk_filecoin::{CircuitKind, FilecoinRequest};

use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::{AuxBuffer, ParameterSet, Scalar, SynthesizedCircuit, Witness};

use crate::error::EngineError;
use crate::request::{ProofKind, RequestBody, SyntheticRequest};

/// One partition's circuit, synthesized on demand (so a queued job holds only its
/// decoded payload, not gigabytes of witness).
pub trait PartitionWork: Send + Sync {
    /// Synthesizes into `buffers` (a, b, c from the engine's pool, each at least
    /// `JobPlan::eval_len` long).
    fn synthesize(&self, buffers: EvalBuffers) -> Result<SynthesizedCircuit, EngineError>;

    /// The partition's assignment only (no constraint is built, no a, b, c): what a
    /// kind whose circuits have compiled matrices ([`ParameterSource::load_matrices`])
    /// proves with, the backend computing a, b, c from them. `aux`: the aux count of
    /// those matrices, and the vector (the engine's, reused) to write the values into.
    fn witness(&self, _aux: AuxBuffer) -> Result<Witness, EngineError> {
        Err(EngineError::Internal("this proof kind has no witness-only synthesis".into()))
    }

    /// The partition's public inputs (without the leading one) as the kind's verifier
    /// computes them from the public data alone; the proof is checked against these.
    /// `None`: the synthesized circuit's own inputs are the reference.
    fn public_inputs(&self) -> Option<Result<Vec<Scalar>, EngineError>> {
        None
    }
}

/// The check of a whole proof (partition proofs concatenated) before it is returned:
/// `Ok` with a note on how it was checked, or `Err` with why it was refused.
pub type FinalCheck = dyn Fn(&[u8]) -> Result<String, String> + Send + Sync;

/// What a kind makes of a request.
pub struct JobPlan {
    /// The parameter set all partitions use ("porep-32g", "synthetic-2^10", …).
    pub circuit_id: String,
    /// In partition order; the proof is their proofs concatenated in this order.
    pub partitions: Vec<Arc<dyn PartitionWork>>,
    /// Length of each of a, b, c (constraints plus inputs, or the domain size).
    pub eval_len: usize,
    /// Host memory one synthesized partition holds besides a, b, c (the witness,
    /// densities), charged to the memory budget from the start of its synthesis until
    /// its proof is done; a, b, c come from the buffer pool, charged separately.
    pub partition_bytes: u64,
    /// Run on the assembled proof once every partition proof has verified; a refusal
    /// fails the job (the proof is not returned).
    pub final_check: Option<Arc<FinalCheck>>,
    /// Set for a timing-only job (its inputs not checked, perhaps timing parameters):
    /// none of its partition proofs is checked, and the job completes with this note
    /// and no proof. It begins with [`TIMING_ONLY_NOTE`].
    pub timing_note: Option<String>,
}

/// How a timing-only job's note begins: the gRPC answer of such a job is FAILED (a
/// client never gets COMPLETED without a proof), and `cuzk submit` knows a timing run's
/// answer by it.
pub const TIMING_ONLY_NOTE: &str = "timing only (daemon.timing_only)";

/// A proof kind's parameter sets: what the parameter cache asks of every kind.
pub trait ParameterSource: Send + Sync {
    fn kind(&self) -> ProofKind;
    /// Whether `circuit_id` names a parameter set of this kind.
    fn owns_circuit(&self, circuit_id: &str) -> bool;
    /// Loads (or makes) the parameter set `circuit_id`. With `points_in_file` every
    /// backend reads the query points from the file itself: a handler that reads a file
    /// may then leave them there ([`cuzk_groth16::format::read_params_placed`]).
    fn load_params(&self, circuit_id: &str, points_in_file: bool) -> Result<ParameterSet, EngineError>;

    /// The host memory `circuit_id`'s set will take once loaded as `load_params` loads
    /// it ([`ParameterSet::size_bytes`]) with its compiled matrices where `load_matrices`
    /// will read a file of them, from the files' headers and lengths alone, where the
    /// kind can tell without loading them: the set is then charged before any of it is
    /// read, and refused at once when it is larger than the whole budget. None: charged
    /// once loaded.
    fn params_host_bytes(&self, circuit_id: &str, points_in_file: bool) -> Result<Option<u64>, EngineError> {
        let _ = (circuit_id, points_in_file);
        Ok(None)
    }

    /// The compiled matrices of `circuit_id` (read, or compiled first) when this kind
    /// proves with them: its partitions are then synthesized witness-only
    /// ([`PartitionWork::witness`]) and a, b, c computed from these (by the backends
    /// where they can, else on the host). None: full synthesis. Loaded with the
    /// parameter set and kept (and charged) with it.
    fn load_matrices(&self, circuit_id: &str) -> Result<Option<ConstraintMatrices>, EngineError> {
        let _ = circuit_id;
        Ok(None)
    }

    /// Whether `circuit_id`'s compiled matrices became usable after its set was loaded
    /// without them (compiled in the background): the parameter cache then loads the
    /// set again, with them, as soon as no partition holds it.
    fn matrices_ready(&self, circuit_id: &str) -> bool {
        let _ = circuit_id;
        false
    }
}

/// A proof kind: its parameter sets, and what it makes of a request of its family's
/// body type `B`.
pub trait KindHandler<B>: ParameterSource {
    /// Decodes and checks a request; errors name what is wrong with it.
    fn plan(&self, body: &B) -> Result<JobPlan, EngineError>;
}

/// A kind an engine serves, typed by the body it plans: one variant per
/// [`RequestBody`] variant.
#[derive(Clone)]
pub enum Handler {
    Filecoin(Arc<dyn KindHandler<FilecoinRequest>>),
    Synthetic(Arc<dyn KindHandler<SyntheticRequest>>),
}

impl Handler {
    pub fn filecoin(h: impl KindHandler<FilecoinRequest> + 'static) -> Handler {
        Handler::Filecoin(Arc::new(h))
    }

    pub fn synthetic(h: impl KindHandler<SyntheticRequest> + 'static) -> Handler {
        Handler::Synthetic(Arc::new(h))
    }

    pub(crate) fn source(&self) -> Arc<dyn ParameterSource> {
        match self {
            Handler::Filecoin(h) => h.clone(),
            Handler::Synthetic(h) => h.clone(),
        }
    }
}

/// The handlers of an engine, keyed by what their bodies name: a request's body finds
/// the handler of its own variant and kind, or none (a kind this daemon does not serve).
pub(crate) struct Handlers {
    filecoin: HashMap<CircuitKind, Arc<dyn KindHandler<FilecoinRequest>>>,
    synthetic: Option<Arc<dyn KindHandler<SyntheticRequest>>>,
}

impl Handlers {
    /// Refuses a handler whose kind is not of its variant's family, and two handlers of
    /// one kind: mistakes of the code that starts the engine, found at its start.
    pub fn new(handlers: &[Handler]) -> Result<Handlers, EngineError> {
        let mut out = Handlers { filecoin: HashMap::new(), synthetic: None };
        for h in handlers {
            let kind = h.source().kind();
            let taken = match (h, kind) {
                (Handler::Filecoin(f), ProofKind::Filecoin(k)) => out.filecoin.insert(k, f.clone()).is_some(),
                (Handler::Synthetic(s), ProofKind::Synthetic) => out.synthetic.replace(s.clone()).is_some(),
                _ => return Err(EngineError::InvalidArgument(format!("a handler of the {kind} kind given as another family's"))),
            };
            if taken {
                return Err(EngineError::InvalidArgument(format!("two handlers of the {kind} kind")));
            }
        }
        Ok(out)
    }

    pub fn serves(&self, kind: ProofKind) -> bool {
        match kind {
            ProofKind::Filecoin(k) => self.filecoin.contains_key(&k),
            ProofKind::Synthetic => self.synthetic.is_some(),
        }
    }

    /// The handler of the body's kind, with the body as its type; None where this
    /// engine has no handler of that kind.
    pub fn planner<'a>(&'a self, body: &'a RequestBody) -> Option<Planner<'a>> {
        match body {
            RequestBody::Filecoin(r) => self.filecoin.get(&r.kind).map(|h| Planner::Filecoin(h.as_ref(), r)),
            RequestBody::Synthetic(r) => self.synthetic.as_deref().map(|h| Planner::Synthetic(h, r)),
        }
    }
}

/// A request's body and the handler of its kind, matched by type.
pub(crate) enum Planner<'a> {
    Filecoin(&'a dyn KindHandler<FilecoinRequest>, &'a FilecoinRequest),
    Synthetic(&'a dyn KindHandler<SyntheticRequest>, &'a SyntheticRequest),
}

impl Planner<'_> {
    pub fn plan(&self) -> Result<JobPlan, EngineError> {
        match self {
            Planner::Filecoin(h, r) => h.plan(r),
            Planner::Synthetic(h, r) => h.plan(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::SyntheticKind;

    /// A Filecoin-family handler that says it is the synthetic kind.
    struct Misfiled(SyntheticKind);

    impl ParameterSource for Misfiled {
        fn kind(&self) -> ProofKind {
            self.0.kind()
        }
        fn owns_circuit(&self, id: &str) -> bool {
            self.0.owns_circuit(id)
        }
        fn load_params(&self, id: &str, points_in_file: bool) -> Result<ParameterSet, EngineError> {
            self.0.load_params(id, points_in_file)
        }
    }

    impl KindHandler<FilecoinRequest> for Misfiled {
        fn plan(&self, _: &FilecoinRequest) -> Result<JobPlan, EngineError> {
            Err(EngineError::Internal("never planned".into()))
        }
    }

    #[test]
    fn a_body_finds_the_handler_of_its_own_type_and_misfiled_or_doubled_handlers_are_refused() {
        let h = Handlers::new(&[Handler::synthetic(SyntheticKind::new(8))]).unwrap();
        assert!(h.serves(ProofKind::Synthetic) && !h.serves(ProofKind::Filecoin(CircuitKind::Porep)));
        assert!(matches!(h.planner(&RequestBody::Synthetic(SyntheticRequest(Vec::new()))), Some(Planner::Synthetic(..))));
        assert!(h.planner(&RequestBody::Filecoin(FilecoinRequest::new(CircuitKind::Porep))).is_none());

        let twice = Handlers::new(&[Handler::synthetic(SyntheticKind::new(8)), Handler::synthetic(SyntheticKind::new(8))]);
        assert!(matches!(&twice, Err(EngineError::InvalidArgument(m)) if m.contains("two handlers of the synthetic kind")), "{:?}", twice.err());
        let misfiled = Handlers::new(&[Handler::filecoin(Misfiled(SyntheticKind::new(8)))]);
        assert!(matches!(&misfiled, Err(EngineError::InvalidArgument(m)) if m.contains("another family")), "{:?}", misfiled.err());
    }
}
