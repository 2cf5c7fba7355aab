//! The GPU prover: the H polynomial and every MSM on one GPU, the Groth16 assembly (a
//! few scalar multiplications) on the host.
//!
//! Every device allocation is planned before a set is accepted ([`plan`]: one plan per
//! set and GPU, from the memory the backend may use; logged with each part's bytes).
//!
//! A proof ([`compute`]) has two phases. *Prepare* ([`prepare`]), on the caller's
//! thread with the device free for others: on a staging slot's own copy stream
//! ([`staging`]), the compact witness goes up, then a, b, c are computed there from the
//! compiled matrices (or uploaded from pinned memory, no host wait); the public-input
//! parts of the A and B queries (a few hundred points) are summed on the host
//! meanwhile. *Compute*, holding the device: the H polynomial and the five MSMs
//! ([`msms`]: the split lists built a piece at a time in the memory b and c leave) are
//! enqueued on the compute stream with no wait between them, then the host waits once
//! and reads the five points. With two slots, one partition's prepare overlaps the
//! other's compute.
//!
//! The parameter set's points are loaded once per [`cuzk_groth16::ParameterSet`]
//! ([`points`]): onto the device, where they stay, or into pinned host memory, from
//! which every MSM streams them up in chunks (crate::msm::streamed), as the plan says.
//! [`backend`] holds the sets a backend has loaded.

pub mod backend;
pub mod compute;
pub mod held;
pub mod msms;
pub mod plan;
pub mod points;
pub mod prepare;
pub mod products;
pub mod row_blocks;
pub mod staging;

pub use backend::CudaBackend;
pub use plan::{DevicePlan, Overrides, Placement, Products};
