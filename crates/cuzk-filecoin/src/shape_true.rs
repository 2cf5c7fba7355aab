//! Shape-true inputs: requests with exactly the structure filecoin-proofs deserializes
//! and its circuits consume at a sector size (tree depths and arities, challenges per
//! partition, layers, DRG and expander parents, partitions, sectors per WindowPoSt
//! partition), filled with seeded random values, so that real sizes can be timed
//! without sealing a sector.
//!
//! The structure comes from filecoin-proofs' own configs and public parameters, never
//! from constants here. Values are random where a sealed sector would have hashes;
//! what the request's own consistency checks read is made consistent (the replica id
//! from the miner, sector, ticket and comm_d; roots shared within a proof as
//! storage-proofs requires; comm_r from comm_c and the tree R root), and challenged
//! positions are the real challenges of the request's seed. Their vanilla proofs do not
//! verify: a request of such inputs is refused unless its checks are
//! [`InputChecks::TimingOnly`](crate::InputChecks).
//!
//! Here are the helpers every kind's builders share; the builders are in
//! `kinds/<kind>/inputs.rs`.

use filecoin_hashers::{Domain, Hasher};
use rand::RngCore;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};

use crate::error::FilecoinError;

/// The miner every shape-true request is for.
pub const MINER_ID: u64 = 1000;

pub(crate) type DomainOf<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
pub(crate) type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// 32 random bytes that are a canonical field element (the top two bits cleared), as
/// tickets, seeds and randomness are.
pub(crate) fn fr32_bytes(rng: &mut impl RngCore) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b[31] &= 0x3f;
    b
}

pub(crate) fn random_domains<D: Domain>(n: usize, rng: &mut impl RngCore) -> Vec<D> {
    (0..n).map(|_| D::random(rng)).collect()
}

/// An inclusion proof of leaf `index` among `leaves` in a tree of arities (A, B, C),
/// B and C 0 where the tree has no sub or top level, as storage-proofs lays one out:
/// A − 1 siblings per base level (digits of `index` from the lowest), then one sub
/// level with B − 1 and one top level with C − 1; `root` and `leaf` as given, the
/// siblings random except the highest levels', which are `top` (proofs of leaves
/// under one subtree share them).
pub(crate) fn random_inclusion_proof<H: Hasher, A, B, C>(
    leaves: usize,
    index: usize,
    root: H::Domain,
    leaf: H::Domain,
    top: &[Vec<H::Domain>],
    rng: &mut impl RngCore,
) -> Result<MerkleProof<H, A, B, C>, FilecoinError>
where
    A: filecoin_hashers::PoseidonArity,
    B: filecoin_hashers::PoseidonArity,
    C: filecoin_hashers::PoseidonArity,
{
    let (a, b, c) = (A::to_usize(), B::to_usize(), C::to_usize());
    let base_leaves = leaves / b.max(1) / c.max(1);
    let levels = base_leaves.checked_ilog(a).unwrap_or(0) as usize;
    if index >= leaves || a.checked_pow(levels as u32) != Some(base_leaves) || base_leaves * b.max(1) * c.max(1) != leaves {
        return Err(FilecoinError::invalid(format!("no tree of arities ({a}, {b}, {c}) has {leaves} leaves with leaf {index}")));
    }
    let arities: Vec<usize> = std::iter::repeat(a).take(levels).chain([b, c].into_iter().filter(|&n| n > 0)).collect();
    let shared_from = arities.len().checked_sub(top.len()).ok_or_else(|| FilecoinError::invalid("more shared levels than the tree has"))?;
    let mut path = Vec::with_capacity(arities.len());
    let mut rest = index;
    for (level, &arity) in arities.iter().enumerate() {
        let siblings = match level.checked_sub(shared_from) {
            Some(i) if top[i].len() == arity - 1 => top[i].clone(),
            Some(_) => return Err(FilecoinError::invalid(format!("shared siblings at level {level} do not fit arity {arity}"))),
            None => random_domains(arity - 1, rng),
        };
        path.push((siblings, rest % arity));
        rest /= arity;
    }
    Ok(MerkleProof::from_parts(leaf, root, path))
}

/// An inclusion proof in a tree of `Tree`'s shape; a random leaf where `leaf` is None.
pub(crate) fn tree_proof<Tree: MerkleTreeTrait>(
    leaves: usize,
    index: usize,
    root: DomainOf<Tree>,
    leaf: Option<DomainOf<Tree>>,
    rng: &mut impl RngCore,
) -> Result<TreeProof<Tree>, FilecoinError> {
    let leaf = leaf.unwrap_or_else(|| DomainOf::<Tree>::random(rng));
    random_inclusion_proof::<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(leaves, index, root, leaf, &[], rng)
}
