//! The engine's settings. The daemon's TOML names them differently (the reference
//! daemon's keys); cuzk-server's `config` module maps those keys onto these names, in
//! that one place.

use std::path::PathBuf;
use std::time::Duration;

use crate::admission::AdmissionLimits;
use crate::memory::MemoryBudget;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Synthesis workers: partitions synthesized at once (each synthesis is itself
    /// multi-threaded). TOML: `pipeline.synthesis_concurrency`.
    pub synthesis_workers: usize,
    /// Synthesized partitions allowed to wait for a prover.
    pub synthesis_lookahead: usize,
    /// Prover workers per backend (one backend per GPU): one prepares while another
    /// holds the device. TOML: `gpus.gpu_workers_per_device`.
    pub workers_per_backend: usize,
    /// Host memory the engine may charge, in bytes. TOML: `memory.total_budget`.
    pub memory_budget_bytes: u64,
    /// Idle parameter sets are evicted after this long when memory is short.
    pub eviction_min_idle: Duration,
    /// How long a finished job stays answerable (AwaitProof, idempotent resubmits).
    pub job_retention: Duration,
    /// Where completed proofs are kept across restarts (for `job_retention`); None =
    /// in memory only. TOML: `daemon.state_dir`.
    pub state_dir: Option<PathBuf>,
    /// Caps on unfinished work and who may use CRITICAL. TOML: `[admission]`.
    pub admission: AdmissionLimits,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            synthesis_workers: 1,
            synthesis_lookahead: 1,
            workers_per_backend: 2,
            memory_budget_bytes: MemoryBudget::auto_total(5 << 30).unwrap_or(16 << 30),
            eviction_min_idle: Duration::from_secs(300),
            job_retention: Duration::from_secs(3600),
            state_dir: None,
            admission: AdmissionLimits::default(),
        }
    }
}
