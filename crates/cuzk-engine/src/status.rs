//! What the engine reports about itself: its backends (and their devices), cached
//! parameter sets, queues and memory.

use std::time::Duration;

use cuzk_groth16::DeviceInfo;

use crate::params::ParameterSetStatus;
use crate::request::{JobId, ProofKind};

#[derive(Clone, Debug)]
pub struct BackendStatus {
    pub name: String,
    /// The device it proves on, asked now (None for the CPU backend).
    pub device: Option<DeviceInfo>,
    /// The job whose partition it is proving now.
    pub current_job: Option<(JobId, ProofKind)>,
    /// Why it was taken out of service (its device was lost); None while in service.
    pub out_of_service: Option<String>,
}

#[derive(Clone, Debug)]
pub struct QueueStatus {
    pub kind: ProofKind,
    pub pending: u32,
    pub in_progress: u32,
}

#[derive(Clone, Debug)]
pub struct EngineStatus {
    pub backends: Vec<BackendStatus>,
    pub parameter_sets: Vec<ParameterSetStatus>,
    pub queues: Vec<QueueStatus>,
    pub completed: u64,
    pub failed: u64,
    pub uptime: Duration,
    pub memory_budget_bytes: u64,
    /// Host memory charged now: witnesses, pooled a/b/c buffers, parameter sets.
    pub memory_used_bytes: u64,
    /// The most host memory ever charged at once.
    pub memory_peak_bytes: u64,
    /// The page-locked part of `memory_used_bytes`: pooled a/b/c buffers where they
    /// are pinned (a GPU daemon's), and the pinned copies of streamed parameter points.
    pub memory_pinned_bytes: u64,
    /// The idle part of `memory_used_bytes`: pooled a/b/c buffers and aux vectors kept
    /// for the next partition, freed whenever memory is wanted for something else. What
    /// is charged beyond the parameter sets and this is held by partitions now.
    pub memory_idle_bytes: u64,
    /// Witness-only syntheses (partitions with compiled matrices) lent an aux vector an
    /// earlier partition left in the pool, and lent a fresh one (whose pages are faulted
    /// in on first touch). Fully synthesized partitions make their own and are not counted.
    pub aux_vectors_reused: u64,
    pub aux_vectors_fresh: u64,
}
