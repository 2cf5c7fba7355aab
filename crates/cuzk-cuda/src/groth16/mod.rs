//! The GPU prover: the H polynomial and every MSM on one GPU, the Groth16 assembly (a
//! few scalar multiplications) on the host.
//!
//! A proof ([`compute`]) has two phases. *Prepare* ([`prepare`]), on the caller's
//! thread with the device free for others: on a staging slot's own copy stream
//! ([`staging`]), the aux values go up and the split MSMs' lists are built from them on
//! the device, then a, b, c follow (at full PCIe speed from pinned memory, no host
//! wait); the public-input parts of the A and B queries (a few hundred points) are
//! summed on the host meanwhile. *Compute*, holding the device: the H polynomial and
//! the five MSMs are enqueued on the compute stream with no wait between them (h stays
//! in its slot for the H MSM), then the host waits once and reads the five points. Two
//! callers at once overlap one's prepare with the other's compute.
//!
//! The parameter set's points are loaded once per [`cuzk_groth16::ParameterSet`]
//! ([`points`]): onto the device, where they stay, when they fit beside a partition's
//! working memory; else into pinned host memory, from which every MSM streams them up
//! in chunks (crate::msm::streamed). [`placement`] decides which; the log says which,
//! and why. [`backend`] holds the sets a backend has loaded.

pub mod backend;
pub mod compute;
pub mod placement;
pub mod points;
pub mod prepare;
pub mod products;
pub mod staging;

pub use backend::{CudaBackend, PointsPlacement};
pub use placement::{streamed_chunk_bytes, working_bytes};
