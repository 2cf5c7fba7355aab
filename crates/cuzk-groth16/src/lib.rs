//! Groth16 over BLS12-381, the way cuzk proves Filecoin circuits.
//!
//! Modules are named after the pieces of the scheme:
//! - [`synthesis`]: running a `bellpepper_core::Circuit` into a [`SynthesizedCircuit`]
//!   (assignments, the a/b/c evaluation vectors, query densities, 0/1/other split);
//! - [`density`]: bitmaps over the variables (query densities, the 0/1/other split);
//! - [`witness`]: witness-only synthesis, the assignments alone (no linear combination
//!   is built);
//! - [`matrices`]: a circuit shape's constraint matrices, compiled once; a, b, c as
//!   their products with a witness;
//! - [`matrix_file`]: the file compiled matrices are kept in, read into a shared copy;
//! - [`domain`]: the radix-2 evaluation domain (NTTs over the scalar field);
//! - [`msm`]: multi-scalar multiplication, including the split 0/1/significant MSM;
//! - [`params`]: parameter sets and verifying keys in memory;
//! - [`format`]: the Filecoin/bellperson `.params` / `.vk` file layout and proof bytes
//!   ([`layout`]: where a file's queries lie);
//! - [`shape`]: a circuit's counts and query sizes, counted without values;
//! - [`generator`]: parameter generation (setup) for any circuit, and timing parameters;
//! - [`backend`]: the proving-backend interface every prover implements;
//! - [`prover`]: the CPU backend;
//! - [`verifier`]: single and batch verification;
//! - [`synthetic`]: C2-shaped synthetic circuits for tests and benchmarks;
//! - [`array`]: number arrays in memory or in a memory-mapped file;
//! - [`progress`]: how long computations report how far they got.

pub mod array;
pub mod backend;
pub mod booleans;
pub mod compact;
pub mod density;
pub mod domain;
pub mod format;
pub mod generator;
pub mod layout;
pub mod matrices;
pub mod matrix_file;
pub mod msm;
pub mod params;
pub mod progress;
pub mod proof;
pub mod prover;
pub mod shape;
pub mod streamed_setup;
pub mod sync;
pub mod synthesis;
pub mod synthetic;
pub mod verifier;
pub mod witness;

pub use backend::{DeviceInfo, DeviceReport, ProofRandomness, ProveError, ProveOutput, ProvingBackend, Stage, StageTimings, Urgency};
pub use compact::CompactWitness;
pub use params::{ParameterSet, ParameterSetId, VerifyingKey};
pub use progress::{NoProgress, Progress};
pub use proof::Proof;
pub use prover::CpuBackend;
pub use synthesis::{synthesize, synthesize_many, Density, ScalarClasses, SynthesizedCircuit};
pub use witness::{synthesize_witness, synthesize_witness_in, AuxBuffer, Witness};

/// Re-exported curve types so downstream crates name one version.
pub use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

/// Bytes of one [`Scalar`] in memory (and of its 32-byte encoding): what a, b, c, a
/// witness or an MSM's scalars take per value. Every size computed from a count of
/// scalars uses this.
pub const SCALAR_BYTES: usize = 32;

const _: () = assert!(std::mem::size_of::<Scalar>() == SCALAR_BYTES);

/// The message of a caught panic (`catch_unwind`'s payload), for the error that
/// replaces it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}
