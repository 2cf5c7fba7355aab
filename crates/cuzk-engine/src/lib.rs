//! cuzk's proving engine.
//!
//! A job (one client request) is split into partitions by its proof kind. Partitions
//! wait in a priority queue (CRITICAL > HIGH > NORMAL > LOW, FIFO by job within a
//! priority, lowest partition first); synthesis workers take them when the memory
//! budget has room, and hand synthesized partitions through a bounded queue to the
//! prover workers (N per backend; a backend holds its device only for a proof's
//! compute region, so no lock is taken around `prove`). Every partition proof is
//! verified before it is kept; a rejected one is proved again once and then fails its
//! job. A job's proof is its partition proofs concatenated in partition order, checked
//! as a whole by the kind (for Filecoin kinds, by filecoin-proofs' verifier) before it
//! is returned. The engine is plain threads; the gRPC server (cuzk-server) is a thin
//! layer over it.
//!
//! Modules, in the order a request meets them: `engine` (the API), `request`,
//! `kind`, `job`, `scheduler`, `workers` (synthesis, then prover), `params`, `memory`,
//! `pool`, `store` (completed proofs across restarts); then `status`, `metrics` and [`timeline`] report on it all.
//!
//! Names: a *parameter set* (cuzk-groth16's `ParameterSet`) is named by its *circuit
//! id* ("porep-32g", "synthetic-2^10"); the wire calls it an SRS (PreloadSRS,
//! `loaded_srs`, `srs_load_ms`) and the daemon's TOML names the directory of the
//! Filecoin ones `srs.param_cache`. A *backend* proves on one device (a GPU) or on
//! the CPU; it has `workers_per_backend` prover workers (TOML
//! `gpus.gpu_workers_per_device`). The wire and TOML names are mapped onto these in
//! cuzk-server, each in one place (`lib.rs` for the wire, `config.rs` for the TOML).

mod admission;
mod config;
mod engine;
mod error;
pub mod filecoin;
mod grace;
mod job;
mod kind;
mod memory;
mod metrics;
mod params;
mod pool;
mod request;
mod scheduler;
mod shared;
mod status;
mod store;
pub mod synthetic;
pub mod timeline;
mod workers;

pub use admission::AdmissionLimits;
pub use config::EngineConfig;
pub use engine::{Engine, Submitted};
pub use error::{shown, EngineError, SHOWN_BYTES};
pub use job::{JobCompletion, JobSummary, PartitionState};
pub use kind::{FinalCheck, Handler, JobPlan, KindHandler, ParameterSource, PartitionWork, TIMING_ONLY_NOTE};
pub use memory::MemoryBudget;
pub use params::ParameterSetStatus;
pub use pool::{BufferMaker, Buffers};
pub use request::{
    label_of, JobId, JobOutcome, JobRequest, JobStatus, JobTimings, Priority, ProofKind, RequestBody, SyntheticRequest, JOB_LABEL_DIGITS,
};
pub use status::{BackendStatus, EngineStatus, QueueStatus};
pub use store::{ProofStore, StoreError, StoredProof};
pub use timeline::{EventKind, TimelineEvent};
