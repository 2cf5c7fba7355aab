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
//! leave to the circuits ([`porep_paths`], [`snap_apex`]): a proof made from inputs
//! that fail them would fail only after proving.

use std::marker::PhantomData;

use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{FallbackPoStSectorProof, PartitionProof, VanillaSealProof};
use serde::{Deserialize, Serialize};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked::{self, ColumnProof};
use storage_proofs_update::constants::{TreeDHasher, TreeRHasher};
use storage_proofs_update::PublicParams as UpdatePublicParams;

use crate::error::FilecoinError;
use crate::payload::domain_bytes;
use crate::sparse_tree::{arities, arities_of};

fn canonical<D: Domain>(d: &D) -> bool {
    bool::from(blstrs::Scalar::from_bytes_le(&domain_bytes(d)).is_some())
}

fn values<'a, D: Domain + 'a>(vs: impl IntoIterator<Item = &'a D>, what: impl Fn() -> String) -> Result<(), FilecoinError> {
    match vs.into_iter().position(|d| !canonical(d)) {
        None => Ok(()),
        Some(i) => Err(FilecoinError::invalid(format!("{}: value {i} is not a canonical field element (not below the modulus)", what()))),
    }
}

/// An inclusion proof of a tree of `arities` (from the leaves up): a level per arity,
/// each with its arity less one siblings and a position among them; every value
/// canonical. (storage-proofs indexes the siblings by the position unchecked.)
fn merkle_proof<P: MerkleProofTrait>(p: &P, arities: &[usize], what: impl Fn() -> String) -> Result<(), FilecoinError> {
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

/// A column proof's parts as storage-proofs serializes them (its fields are private):
/// the column (index, rows) and the inclusion proof.
#[derive(Deserialize)]
#[serde(bound = "")]
struct ColumnParts<P: MerkleProofTrait> {
    column: ColumnFields<<P::Hasher as Hasher>::Domain>,
    #[serde(bound(deserialize = "P: serde::de::DeserializeOwned"))]
    inclusion_proof: P,
}

#[derive(Deserialize)]
struct ColumnFields<D> {
    index: u32,
    rows: Vec<D>,
    // storage-proofs' Column carries a marker of its hasher: read, so that the layout is
    // its serialized one, and never used.
    #[allow(dead_code)]
    _h: PhantomData<()>,
}

fn column<P: MerkleProofTrait + Serialize>(
    c: &ColumnProof<P>,
    node: u32,
    (arities, layers): (&[usize], usize),
    what: impl Fn() -> String,
) -> Result<(), FilecoinError> {
    let parts: ColumnParts<P> = bincode::serialize(c)
        .and_then(|b| bincode::deserialize(&b))
        .map_err(|e| FilecoinError::invalid(format!("{}: the column proof does not re-encode: {e}", what())))?;
    if parts.column.index != node {
        return Err(FilecoinError::invalid(format!("{}: its column is of node {}, opened at node {node}", what(), parts.column.index)));
    }
    if parts.column.rows.len() != layers {
        return Err(FilecoinError::invalid(format!("{}: its column has {} rows; the sector has {layers} layers", what(), parts.column.rows.len())));
    }
    values(&parts.column.rows, || format!("{}: column rows", what()))?;
    merkle_proof(&parts.inclusion_proof, arities, || format!("{}: column inclusion proof", what()))
}

type Inputs<Tree> =
    stacked::PublicInputs<<<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain, <filecoin_hashers::sha256::Sha256Hasher as Hasher>::Domain>;

/// A PoRep C1 output's vanilla proofs, partition by partition: one proof per challenge
/// of the partition, each column opened at its challenge or parent, every value canonical.
pub(crate) fn porep<Tree: 'static + MerkleTreeTrait>(
    params: &stacked::PublicParams<Tree>,
    inputs: &Inputs<Tree>,
    vanilla: &[Vec<VanillaSealProof<Tree>>],
) -> Result<(), FilecoinError> {
    let (graph, layers) = (&params.graph, params.num_layers);
    let base_degree = graph.base_graph().degree();
    let mut parents = vec![0u32; graph.degree()];
    let (tree, tree_d) = (arities_of::<Tree>(graph.size())?, arities(graph.size(), 2, 0, 0)?);
    for (k, partition) in vanilla.iter().enumerate() {
        let challenges = inputs.challenges(&params.challenges, graph.size(), Some(k));
        if partition.len() != challenges.len() {
            return Err(FilecoinError::invalid(format!(
                "C1 output: partition {k} has {} vanilla proofs; it has {} challenges",
                partition.len(),
                challenges.len()
            )));
        }
        for (j, (p, &c)) in partition.iter().zip(&challenges).enumerate() {
            let at = |part: &str| format!("C1 output: partition {k}, challenge {j} (node {c}), {part}");
            graph.parents(c, &mut parents).map_err(FilecoinError::rejected("the graph's parents"))?;
            let cols = &p.replica_column_proofs;
            if cols.drg_parents.len() != base_degree || cols.exp_parents.len() != parents.len() - base_degree {
                return Err(FilecoinError::invalid(format!(
                    "{}: {} DRG and {} expander parent columns; the graph has {base_degree} and {}",
                    at("parents"),
                    cols.drg_parents.len(),
                    cols.exp_parents.len(),
                    parents.len() - base_degree
                )));
            }
            if p.labeling_proofs.len() != layers {
                return Err(FilecoinError::invalid(format!(
                    "{}: {} labeling proofs; the sector has {layers} layers",
                    at("labels"),
                    p.labeling_proofs.len()
                )));
            }
            column(&cols.c_x, c as u32, (&tree, layers), || at("its column"))?;
            for (i, (col, &node)) in cols.drg_parents.iter().chain(&cols.exp_parents).zip(&parents).enumerate() {
                column(col, node, (&tree, layers), || at(&format!("parent {i}")))?;
            }
            merkle_proof(&p.comm_d_proofs, &tree_d, || at("the data inclusion proof"))?;
            merkle_proof(&p.comm_r_last_proof, &tree, || at("the replica inclusion proof"))?;
        }
    }
    Ok(())
}

/// What storage-proofs' PoRep verification leaves out and its circuit checks: that the
/// data and replica inclusion proofs lead to the roots they carry (it compares those
/// roots with comm_d and comm_r but never hashes the paths). Run with the full checks
/// only (shape-true inputs have random paths), after [`porep`] and storage-proofs' verification.
pub(crate) fn porep_paths<Tree: 'static + MerkleTreeTrait>(vanilla: &[Vec<VanillaSealProof<Tree>>]) -> Result<(), FilecoinError> {
    for (k, partition) in vanilla.iter().enumerate() {
        for (j, p) in partition.iter().enumerate() {
            for (ok, what) in [(p.comm_d_proofs.verify(), "data (comm_d)"), (p.comm_r_last_proof.verify(), "replica (comm_r_last)")] {
                if !ok {
                    return Err(FilecoinError::invalid(format!(
                        "C1 output: partition {k}, challenge {j}: the {what} inclusion proof does not lead to its root"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// A PoSt sector proof's commitments and inclusion proofs.
pub(crate) fn post_sector<Tree: MerkleTreeTrait>(p: &FallbackPoStSectorProof<Tree>, leaves: usize, i: usize) -> Result<(), FilecoinError> {
    let tree = arities_of::<Tree>(leaves)?;
    let at = |part: &str| format!("vanilla_proofs[{i}] (sector {}): {part}", u64::from(p.sector_id));
    values([&p.comm_r], || at("comm_r"))?;
    for s in &p.vanilla_proof.sectors {
        values([&s.comm_c, &s.comm_r_last], || at("comm_c or comm_r_last"))?;
        for (j, ip) in s.inclusion_proofs.iter().enumerate() {
            merkle_proof(ip, &tree, || at(&format!("inclusion proof {j}")))?;
        }
    }
    Ok(())
}

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
