//! What a vanilla proof must be before filecoin-proofs reads it, beyond what its own
//! verification checks. On every request, timing-only ones too, before anything else
//! reads the proofs:
//!
//! - every field value canonical (below the scalar field's modulus): storage-proofs
//!   converts them to field elements with `expect`, so a value above the modulus would
//!   panic inside its verifier or circuit instead of being refused;
//! - every Merkle path the tree's shape (levels, siblings, position), every count the
//!   circuit's (a PoRep column's rows and labeling proofs per layer; a SnapDeals
//!   partition's apex leaves and challenge proofs): storage-proofs indexes by them
//!   unchecked;
//! - each PoRep column's index the node it is opened at (the challenge, or its parents
//!   in graph order): storage-proofs' verifier and circuit take the positions from the
//!   challenges and never read the index, so a wrong one would be carried silently.
//!
//! With the full checks only, after storage-proofs' verification, what its verifiers
//! leave to the circuits (PoRep's paths, SnapDeals' apex): a proof made from inputs
//! that fail them would fail only after proving.
//!
//! Here are the checks every kind shares (values canonical, a Merkle path of a tree's
//! shape); each kind's own are in `kinds/<kind>/check.rs`.

use filecoin_hashers::Domain;
use storage_proofs_core::merkle::MerkleProofTrait;

use crate::error::FilecoinError;
use crate::payload::domain_bytes;

pub(crate) fn canonical<D: Domain>(d: &D) -> bool {
    bool::from(blstrs::Scalar::from_bytes_le(&domain_bytes(d)).is_some())
}

pub(crate) fn values<'a, D: Domain + 'a>(vs: impl IntoIterator<Item = &'a D>, what: impl Fn() -> String) -> Result<(), FilecoinError> {
    match vs.into_iter().position(|d| !canonical(d)) {
        None => Ok(()),
        Some(i) => Err(FilecoinError::invalid(format!("{}: value {i} is not a canonical field element (not below the modulus)", what()))),
    }
}

/// An inclusion proof of a tree of `arities` (from the leaves up): a level per arity,
/// each with its arity less one siblings and a position among them; every value
/// canonical. (storage-proofs indexes the siblings by the position unchecked.)
pub(crate) fn merkle_proof<P: MerkleProofTrait>(p: &P, arities: &[usize], what: impl Fn() -> String) -> Result<(), FilecoinError> {
    let path = p.path();
    if path.len() != arities.len() {
        return Err(FilecoinError::invalid(format!("{}: {} levels; the tree has {}", what(), path.len(), arities.len())));
    }
    values([p.leaf(), p.root()].iter(), || format!("{}: leaf or root", what()))?;
    for (level, ((siblings, index), &arity)) in path.iter().zip(arities).enumerate() {
        if siblings.len() + 1 != arity || *index >= arity {
            return Err(FilecoinError::invalid(format!(
                "{}: level {level} has {} siblings and position {index}; the tree's arity there is {arity}",
                what(),
                siblings.len()
            )));
        }
        values(siblings, || format!("{}: level {level}", what()))?;
    }
    Ok(())
}
