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

/// A job id, unique within the process (a sequence number and a random tag, so ids
/// from before a restart are not mistaken for new jobs).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub String);

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

/// A request to prove.
#[derive(Clone, Debug)]
pub struct JobRequest {
    /// Idempotency key: resubmitting a live request id returns the same job. Empty
    /// means none.
    pub request_id: String,
    pub kind: ProofKind,
    pub priority: Priority,
    pub payload: Payload,
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
