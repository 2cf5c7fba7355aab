//! Requests: what a client asks for (a priority and a kind's request body) and what
//! it gets back (a job id, then the job's outcome). Plain data, used by every other
//! module; it imports none of them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cuzk_filecoin::{CircuitKind, FilecoinRequest};

/// The kinds a client can ask for: the Filecoin kinds (cuzk-filecoin's one list of
/// them) and cuzk's synthetic test kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProofKind {
    Filecoin(CircuitKind),
    /// C2-shaped synthetic circuits (cuzk's own; for tests, demos and load tests).
    Synthetic,
}

impl ProofKind {
    /// Every kind: the Filecoin ones, then the synthetic one.
    pub fn all() -> impl Iterator<Item = ProofKind> {
        CircuitKind::ALL.into_iter().map(ProofKind::Filecoin).chain([ProofKind::Synthetic])
    }

    /// The name used in status, metrics, configuration and the wire's enum (its value
    /// names, lower-cased).
    pub fn name(self) -> &'static str {
        match self {
            ProofKind::Filecoin(k) => k.proof_kind_name(),
            ProofKind::Synthetic => "synthetic",
        }
    }

    /// The kind of a [`ProofKind::name`].
    pub fn from_name(name: &str) -> Option<ProofKind> {
        ProofKind::all().find(|k| k.name() == name)
    }
}

impl fmt::Display for ProofKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Scheduling priority; higher runs first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    Low = 1,
    Normal = 2,
    High = 3,
    Critical = 4,
}

impl Priority {
    /// Urgent work has lanes of its own (`crate::scheduler`): HIGH and CRITICAL, as
    /// Curio sends WindowPoSt and WinningPoSt, whose deadlines a queue of PoRep
    /// partitions must not delay.
    pub fn urgent(self) -> bool {
        self >= Priority::High
    }

    /// From the wire value; 0 (unspecified) means normal.
    pub fn from_wire(v: i32) -> Option<Priority> {
        match v {
            0 | 2 => Some(Priority::Normal),
            1 => Some(Priority::Low),
            3 => Some(Priority::High),
            4 => Some(Priority::Critical),
            _ => None,
        }
    }
}

/// A job id: 128 random bits as 32 hex digits. Knowing a job's id is what lets a
/// client await or cancel it, so ids are unguessable (no counter, no per-process
/// tag) and listed only to callers holding the daemon's token; elsewhere a job shows
/// as its [`JobId::label`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub String);

/// Hex digits of a job id's label.
pub const JOB_LABEL_DIGITS: usize = 8;

impl JobId {
    /// A new id from the thread's cryptographic generator (ChaCha, seeded by the OS).
    pub fn random() -> JobId {
        JobId(format!("{:032x}", rand::random::<u128>()))
    }

    /// What a job shows as where its id must not appear (the status endpoint and the
    /// timeline without the token): the id's first 8 hex digits. The other 96 bits
    /// stay secret, so a label does not let anyone await or cancel the job.
    pub fn label(&self) -> &str {
        label_of(&self.0)
    }
}

/// The label of a job id given as text (see [`JobId::label`]); ids not made by
/// [`JobId::random`] are cut the same way.
pub fn label_of(id: &str) -> &str {
    match id.char_indices().nth(JOB_LABEL_DIGITS) {
        Some((i, _)) => &id[..i],
        None => id,
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a request asks for: the body of one family of kinds. Closed (the engine
/// serves these families and no other), so each kind's handler receives its own
/// family's type ([`crate::kind::Handler`]) and nothing is downcast.
#[derive(Clone, Debug)]
pub enum RequestBody {
    Filecoin(FilecoinRequest),
    Synthetic(SyntheticRequest),
}

impl RequestBody {
    pub fn kind(&self) -> ProofKind {
        match self {
            RequestBody::Filecoin(r) => ProofKind::Filecoin(r.kind),
            RequestBody::Synthetic(_) => ProofKind::Synthetic,
        }
    }

    /// Feeds every field to `bytes`, each in its own call ([`JobRequest::digest`]).
    pub fn digest_fields(&self, bytes: &mut dyn FnMut(&[u8])) {
        match self {
            RequestBody::Filecoin(r) => r.digest_fields(bytes),
            RequestBody::Synthetic(r) => r.digest_fields(bytes),
        }
    }

    /// Bytes of its variable-length fields: about what the decoded request holds while
    /// its job is unfinished (admission.max_queued_request_bytes).
    pub fn bytes(&self) -> u64 {
        match self {
            RequestBody::Filecoin(r) => r.bytes(),
            RequestBody::Synthetic(r) => r.0.len() as u64,
        }
    }
}

impl From<FilecoinRequest> for RequestBody {
    fn from(r: FilecoinRequest) -> Self {
        RequestBody::Filecoin(r)
    }
}

impl From<SyntheticRequest> for RequestBody {
    fn from(r: SyntheticRequest) -> Self {
        RequestBody::Synthetic(r)
    }
}

/// A synthetic request ([`crate::synthetic`]): its JSON payload (the wire's
/// `vanilla_proof`), e.g. `{"log_size": 10, "partitions": 1, "seed": 0}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntheticRequest(pub Vec<u8>);

impl SyntheticRequest {
    /// As a request of the wire's fields with only `vanilla_proof` set: the digests of
    /// earlier versions.
    fn digest_fields(&self, bytes: &mut dyn FnMut(&[u8])) {
        for _ in 0..5 {
            bytes(&0u64.to_le_bytes());
        }
        bytes(&self.0);
        for _ in 0..4 {
            bytes(&[]);
        }
        bytes(&0u64.to_le_bytes());
    }
}

/// A request to prove.
#[derive(Clone, Debug)]
pub struct JobRequest {
    /// Idempotency key, together with the content ([`JobRequest::digest`]):
    /// resubmitting a request id with the same content returns the same job (unless it
    /// failed or was cancelled); the same id with other content is another job, as
    /// Curio's WindowPoSt partitions of one deadline are. Empty means none.
    pub request_id: String,
    pub priority: Priority,
    pub body: Arc<RequestBody>,
}

impl JobRequest {
    pub fn new(request_id: impl Into<String>, priority: Priority, body: impl Into<RequestBody>) -> JobRequest {
        JobRequest { request_id: request_id.into(), priority, body: Arc::new(body.into()) }
    }

    pub fn kind(&self) -> ProofKind {
        self.body.kind()
    }

    /// SHA-256 of everything but the request id (kind, priority, every field of the
    /// body, each length-prefixed so no two requests encode alike): with the request
    /// id, what names a job. Stored beside completed proofs: the encoding must not
    /// change (a test holds it to digests of earlier versions).
    pub fn digest(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let mut bytes = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        bytes(self.kind().name().as_bytes());
        bytes(&[self.priority as u8]);
        self.body.digest_fields(&mut bytes);
        h.finalize().into()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub fn is_finished(self) -> bool {
        matches!(self, JobStatus::Completed | JobStatus::Failed | JobStatus::Cancelled)
    }
}

/// Where the time of a job went, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTimings {
    /// Submission to the start of the first partition's synthesis.
    pub queue_wait_ms: u64,
    /// Loading its parameter set on this job's behalf (0 when it was already loaded;
    /// the wire's `srs_load_ms`).
    pub parameter_load_ms: u64,
    /// Sum over partitions.
    pub synthesis_ms: u64,
    /// Sum over partitions of the time inside the backend (device lock held).
    pub gpu_compute_ms: u64,
    /// Submission to completion.
    pub total_ms: u64,
}

/// A snapshot of a job: its status and, once completed, the proof bytes (partition
/// proofs concatenated in partition order, each verified).
#[derive(Clone, Debug)]
pub struct JobOutcome {
    pub job_id: JobId,
    pub status: JobStatus,
    pub proof: Vec<u8>,
    pub error: String,
    pub timings: JobTimings,
}

pub(crate) fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::SyntheticRequest;

    fn hex(d: [u8; 32]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The digests of requests as cuzk computed them before the body became opaque
    /// (bf7f4bd): completed proofs stored then are found again by a resubmission.
    #[test]
    fn digests_are_those_stored_by_earlier_versions() {
        let synthetic = JobRequest::new("r", Priority::High, SyntheticRequest(br#"{"log_size": 8}"#.to_vec()));
        assert_eq!(hex(synthetic.digest()), "dd966979efbf7005e32784b402f18ae7ceee9b0722214d9119afd651e2ef9674");
        let window = FilecoinRequest {
            sector_size: 2048,
            registered_proof: 5,
            vanilla_proofs: vec![vec![1, 2, 3], vec![4]],
            miner_id: 1000,
            randomness: vec![9; 32],
            partition_index: 2,
            ..FilecoinRequest::new(CircuitKind::WindowPost)
        };
        assert_eq!(hex(JobRequest::new("", Priority::Normal, window).digest()), "77044398ec5aad0a150d3fc4f2eee593d78e7514257ac6a1ceb7350624b09f04");
        let porep = FilecoinRequest {
            sector_size: 2048,
            registered_proof: 8,
            vanilla_proof: b"{}".to_vec(),
            sector_number: 7,
            miner_id: 1000,
            ..FilecoinRequest::new(CircuitKind::Porep)
        };
        assert_eq!(hex(JobRequest::new("", Priority::Normal, porep).digest()), "c2d2e0f682ee7aa3d492190a622fd4deddd9d3e66ddd1a372ab79af2f45d26a9");
        let snap = FilecoinRequest {
            sector_size: 2048,
            vanilla_proofs: vec![vec![5]],
            comm_r_old: vec![1; 32],
            comm_r_new: vec![2; 32],
            comm_d_new: vec![3; 32],
            ..FilecoinRequest::new(CircuitKind::Snap)
        };
        assert_eq!(hex(JobRequest::new("", Priority::Low, snap).digest()), "9374f82a5ede590da6bae367e86229e2b1a4cf664037e376a46e45c66a2917bc");
    }

    #[test]
    fn the_digest_covers_the_kind_and_priority_but_not_the_request_id() {
        let r = |id: &str, p, kind| JobRequest::new(id, p, FilecoinRequest::new(kind));
        let base = r("a", Priority::Normal, CircuitKind::Porep).digest();
        assert_eq!(r("b", Priority::Normal, CircuitKind::Porep).digest(), base);
        assert_ne!(r("a", Priority::High, CircuitKind::Porep).digest(), base);
        assert_ne!(r("a", Priority::Normal, CircuitKind::WinningPost).digest(), base);
    }

    #[test]
    fn every_kind_has_its_own_name() {
        let names: std::collections::BTreeSet<_> = ProofKind::all().map(ProofKind::name).collect();
        assert_eq!(names.len(), ProofKind::all().count());
        for k in ProofKind::all() {
            assert_eq!(ProofKind::from_name(k.name()), Some(k));
        }
    }
}
