//! Filecoin proof kinds for cuzk: PoRep C2, SnapDeals, WindowPoSt and WinningPoSt.
//!
//! A request (the payload fields Curio sends) is decoded into a [`FilecoinJob`]: its
//! partition circuits are filecoin-proofs' own (storage-proofs' compound circuits built
//! from the vanilla proofs), synthesized by cuzk-groth16 into the engine's buffers and
//! proved by cuzk's backends; filecoin-proofs' proving path is never used. Public
//! inputs and the final check come from filecoin-proofs as well, so a proof cuzk
//! returns is one filecoin-proofs accepts.
//!
//! filecoin-proofs reads its settings (the parameter directory among them) from
//! `FIL_PROOFS_*` environment variables once per process: [`env::use_parameter_dir`]
//! must run before anything else here.

mod compound;
pub mod env;
mod error;
mod family;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod ids;
mod job;
mod kinds;
pub mod matrices;
pub mod param_check;
mod payload;
pub mod reference;
pub mod registered;
mod request;
pub mod request_files;
pub mod setup;
pub mod shape_true;
mod sparse_tree;
pub mod strict_json;
pub mod valid;
mod vanilla_check;
mod witness;

pub use error::FilecoinError;
pub use family::PublishedCount;
pub use job::{verify_partitions, CheckedBy, FilecoinJob, InputChecks, PartitionsChecked};
pub use registered::{Circuit, CircuitKind, PostProof, SealProof, SectorSize, UpdateProof};
pub use request::FilecoinRequest;
