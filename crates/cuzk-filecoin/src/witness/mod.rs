//! What the kinds' native witnesses share: the values of Poseidon and SHA-256 hashes
//! and of Merkle inclusion paths, allocated as the gadgets allocate them. Each kind's
//! own witness is in `kinds/<kind>/witness.rs`.

pub(crate) mod merkle;
pub(crate) mod poseidon;
pub(crate) mod sha256;
