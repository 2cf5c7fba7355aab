//! PoRep's vanilla proof checks (see `crate::vanilla_check` for what every kind's
//! must be): each challenge's columns opened at the challenge and its parents, counts
//! the graph's, and, with the full checks, the paths leading to their roots.

use std::marker::PhantomData;

use filecoin_hashers::Hasher;
use filecoin_proofs::VanillaSealProof;
use serde::{Deserialize, Serialize};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked::{self, ColumnProof};

use crate::error::FilecoinError;
use crate::sparse_tree::{arities, arities_of};
use crate::vanilla_check::{merkle_proof, values};

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
