//! Requests: what a client asks for (a proof kind, a priority, the payload) and what
//! it gets back (a job id, then the job's outcome). Plain data, used by every other
//! module; it imports none of them.

use std::fmt;
use std::time::Duration;

/// The kinds a client can ask for (the wire enum, plus cuzk's synthetic test kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProofKind {
    PorepSealCommit,
    SnapDealsUpdate,
    WindowPostPartition,
    WinningPost,
    /// C2-shaped synthetic circuits (cuzk's own; for tests, demos and load tests).
    Synthetic,
}

impl ProofKind {
    pub const ALL: [ProofKind; 5] =
        [ProofKind::PorepSealCommit, ProofKind::SnapDealsUpdate, ProofKind::WindowPostPartition, ProofKind::WinningPost, ProofKind::Synthetic];

    /// The name used in status and metrics.
    pub fn name(self) -> &'static str {
        match self {
            ProofKind::PorepSealCommit => "porep_seal_commit",
            ProofKind::SnapDealsUpdate => "snap_deals_update",
            ProofKind::WindowPostPartition => "window_post_partition",
            ProofKind::WinningPost => "winning_post",
            ProofKind::Synthetic => "synthetic",
        }
    }

    /// The kind of a [`ProofKind::name`].
    pub fn from_name(name: &str) -> Option<ProofKind> {
        ProofKind::ALL.into_iter().find(|k| k.name() == name)
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

/// The payload fields of a request, as the client sent them; each proof kind reads
/// the ones it needs.
#[derive(Clone, Debug, Default)]
pub struct Payload {
    pub sector_size: u64,
    pub registered_proof: u64,
    pub vanilla_proof: Vec<u8>,
    pub vanilla_proofs: Vec<Vec<u8>>,
    pub sector_number: u64,
    pub miner_id: u64,
    pub randomness: Vec<u8>,
    pub partition_index: u32,
    pub comm_r_old: Vec<u8>,
    pub comm_r_new: Vec<u8>,
    pub comm_d_new: Vec<u8>,
}

impl Payload {
    /// Bytes of its variable-length fields: about what the decoded request holds while
    /// its job is unfinished (admission.max_queued_request_bytes).
    pub fn bytes(&self) -> u64 {
        let lists = self.vanilla_proofs.iter().map(Vec::len).sum::<usize>();
        (self.vanilla_proof.len() + lists + self.randomness.len() + self.comm_r_old.len() + self.comm_r_new.len() + self.comm_d_new.len()) as u64
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
    pub kind: ProofKind,
    pub priority: Priority,
    pub payload: Payload,
}

impl JobRequest {
    /// SHA-256 of everything but the request id (kind, priority, every payload field,
    /// each length-prefixed so no two requests encode alike): with the request id, what
    /// names a job.
    pub fn digest(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let mut bytes = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        let p = &self.payload;
        bytes(self.kind.name().as_bytes());
        bytes(&[self.priority as u8]);
        for n in [p.sector_size, p.registered_proof, p.sector_number, p.miner_id, p.partition_index as u64] {
            bytes(&n.to_le_bytes());
        }
        for b in [&p.vanilla_proof, &p.randomness, &p.comm_r_old, &p.comm_r_new, &p.comm_d_new] {
            bytes(b);
        }
        bytes(&(p.vanilla_proofs.len() as u64).to_le_bytes());
        for b in &p.vanilla_proofs {
            bytes(b);
        }
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

    fn request() -> JobRequest {
        JobRequest { request_id: "r".into(), kind: ProofKind::Synthetic, priority: Priority::Normal, payload: Payload::default() }
    }

    #[test]
    fn the_digest_covers_everything_but_the_request_id() {
        let base = request().digest();
        assert_eq!(JobRequest { request_id: "other".into(), ..request() }.digest(), base);
        let changed: Vec<fn(&mut JobRequest)> = vec![
            |r| r.kind = ProofKind::WinningPost,
            |r| r.priority = Priority::High,
            |r| r.payload.sector_size = 1,
            |r| r.payload.registered_proof = 1,
            |r| r.payload.vanilla_proof = vec![0],
            |r| r.payload.vanilla_proofs = vec![vec![]],
            |r| r.payload.sector_number = 1,
            |r| r.payload.miner_id = 1,
            |r| r.payload.randomness = vec![0],
            |r| r.payload.partition_index = 1,
            |r| r.payload.comm_r_old = vec![0],
            |r| r.payload.comm_r_new = vec![0],
            |r| r.payload.comm_d_new = vec![0],
            // Bytes moved from one field to the next: the length prefixes tell them apart.
            |r| r.payload.vanilla_proofs = vec![vec![1, 2], vec![3]],
        ];
        let mut seen = vec![base];
        for change in &changed {
            let mut r = request();
            change(&mut r);
            let d = r.digest();
            assert!(!seen.contains(&d), "{r:?} has a digest seen before");
            seen.push(d);
        }
        let mut split = request();
        split.payload.vanilla_proofs = vec![vec![1], vec![2, 3]];
        assert!(!seen.contains(&split.digest()));
    }
}
