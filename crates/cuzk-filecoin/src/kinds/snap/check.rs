//! SnapDeals' vanilla proof checks (see `crate::vanilla_check` for what every kind's
//! must be): counts the partition's, and, with the full checks, the apex leaves those
//! the data paths pass through.

use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::PartitionProof;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_update::constants::{TreeDHasher, TreeRHasher};
use storage_proofs_update::PublicParams as UpdatePublicParams;

use crate::error::FilecoinError;
use crate::sparse_tree::{arities, arities_of};
use crate::vanilla_check::{merkle_proof, values};

/// A SnapDeals partition proof's comm_c, apex leaves and inclusion proofs, as many of
/// each as the circuit takes.
pub(crate) fn snap_partition<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    p: &PartitionProof<Tree>,
    pp: &UpdatePublicParams,
    i: usize,
) -> Result<(), FilecoinError> {
    let leaves = pp.sector_nodes;
    let (tree, tree_d) = (arities_of::<Tree>(leaves)?, arities(leaves, 2, 0, 0)?);
    let at = |part: &str| format!("vanilla_proofs[{i}]: {part}");
    if p.apex_leafs.len() != pp.apex_leaf_count || p.challenge_proofs.len() != pp.challenge_count {
        return Err(FilecoinError::invalid(format!(
            "vanilla_proofs[{i}] has {} apex leaves and {} challenge proofs; a partition of this size has {} and {}",
            p.apex_leafs.len(),
            p.challenge_proofs.len(),
            pp.apex_leaf_count,
            pp.challenge_count
        )));
    }
    values([&p.comm_c], || at("comm_c"))?;
    values(&p.apex_leafs, || at("apex leaves"))?;
    for (j, c) in p.challenge_proofs.iter().enumerate() {
        merkle_proof(&c.proof_r_old, &tree, || at(&format!("challenge {j}, old replica proof")))?;
        merkle_proof(&c.proof_d_new, &tree_d, || at(&format!("challenge {j}, new data proof")))?;
        merkle_proof(&c.proof_r_new, &tree, || at(&format!("challenge {j}, new replica proof")))?;
    }
    Ok(())
}

/// What storage-proofs' update verification checks loosely and its circuit exactly: each
/// challenge's data path passes through the apex leaf its index selects, and the
/// partition's apex leaves hash to the node the path carries above them (the verifier
/// only asks that each path sibling be somewhere in the apex tree, so a changed apex
/// leaf could pass it and fail the proof). Run with the full checks only (shape-true
/// inputs have random apex leaves), after storage-proofs' verification.
pub(crate) fn snap_apex<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    p: &PartitionProof<Tree>,
    pp: &UpdatePublicParams,
    k: usize,
) -> Result<(), FilecoinError> {
    let hash2 = <TreeDHasher as Hasher>::Function::hash2;
    let mut row = p.apex_leafs.clone();
    while row.len() > 1 {
        row = row.chunks(2).map(|s| hash2(&s[0], &s[1])).collect();
    }
    let apex_root = row.first().copied().unwrap_or_default();
    let apex_height = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
    for (j, c) in p.challenge_proofs.iter().enumerate() {
        let proof = &c.proof_d_new;
        let mut node = proof.leaf();
        let mut index = proof.path_index();
        for (height, (siblings, _)) in proof.path().iter().enumerate().take(apex_height + pp.apex_leaf_bit_len) {
            if height == apex_height && p.apex_leafs.get(index % pp.apex_leaf_count) != Some(&node) {
                return Err(FilecoinError::invalid(format!(
                    "vanilla_proofs[{k}]: challenge {j}'s data path does not pass through the apex leaf it selects"
                )));
            }
            let sibling = siblings.first().copied().unwrap_or_default();
            node = if index % 2 == 0 { hash2(&node, &sibling) } else { hash2(&sibling, &node) };
            index /= 2;
        }
        if node != apex_root {
            return Err(FilecoinError::invalid(format!("vanilla_proofs[{k}]: the apex leaves do not hash to challenge {j}'s data path")));
        }
    }
    Ok(())
}
