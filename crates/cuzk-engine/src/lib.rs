//! cuzk's proving engine.
//!
//! A job (one client request) is split into partitions by its proof kind. Partitions
//! wait in a priority queue (CRITICAL > HIGH > NORMAL > LOW, FIFO by job within a
//! priority, lowest partition first); a synthesis pool takes them when the memory
//! budget has room, and hands synthesized partitions through a bounded queue to the
//! prover workers (N per backend, sharing a lock held only around the backend's
//! `prove`). Every partition proof is verified before it is kept; a rejected one is
//! proved again once and then fails its job. A job's proof is its partition proofs
//! concatenated in partition order, checked as a whole by the kind (for Filecoin
//! kinds, by filecoin-proofs' verifier) before it is returned. The engine is plain threads; the gRPC server
//! (cuzk-server) is a thin layer over it.

mod budget;
mod engine;
mod error;
pub mod filecoin;
mod job;
mod kind;
mod params;
mod pool;
mod scheduler;
pub mod synthetic;
pub mod timeline;

pub use budget::MemoryBudget;
pub use engine::{BackendStatus, Engine, EngineConfig, EngineStatus, JobSummary, PartitionState, QueueStatus, Submitted};
pub use error::EngineError;
pub use job::{JobId, JobOutcome, JobRequest, JobStatus, JobTimings, Payload, Priority};
pub use kind::{FinalCheck, JobPlan, KindHandler, PartitionWork, ProofKind};
pub use params::ParamStatus;
pub use pool::{vec_buffers, BufferMaker};
pub use timeline::{EventKind, TimelineEvent};
