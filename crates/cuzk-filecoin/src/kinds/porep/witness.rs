//! PoRep's partition witness with its labels hashed natively.
//!
//! Witness-only synthesis of storage-proofs' `StackedCircuit` spends nearly all its time
//! in SHA-256 gadgets building linear combinations nobody reads (a 32 GiB partition:
//! 18 challenges × 11 layers × 20 compressions for the labels, ~10 ms each on one
//! core). [`PorepWitnessCircuit`] allocates the same values in the same order, each
//! SHA-256 (the labels' and comm_d's Merkle path's) through
//! [`cuzk_groth16::witness::sha256`], the column hashes and tree_c's and tree_r_last's
//! paths through [`crate::witness::poseidon`] and [`crate::witness::merkle`] (the
//! Poseidon gadget builds every round's linear combinations even for a witness).
//! It is only for witness generators (the compiled matrices hold the constraints).
//!
//! The circuit's own per-challenge type is private to storage-proofs, so the vanilla
//! proofs are read into [`ChallengeProof`] through their serde form (the same one C1
//! output uses). Invariant, tested at 2 KiB here and at 32 GiB in `cuzk bench`: the
//! witness equals `StackedCircuit`'s value for value.

use bellpepper::gadgets::multipack;
use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::sha256::Sha256Hasher;
use filecoin_hashers::{HashFunction, Hasher, POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2};
use serde::Deserialize;
use storage_proofs_core::gadgets::constraint;
use storage_proofs_core::gadgets::encode::encode;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::merkle::{DiskStore, MerkleProof, MerkleProofTrait, MerkleTreeTrait, MerkleTreeWrapper};
use storage_proofs_core::util::reverse_bit_numbering;

use crate::witness::merkle;
use crate::witness::poseidon::poseidon_hash;
use crate::witness::sha256::{sha256_node, sha256_packed};
use typenum::U2;

type DomainOf<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// What one challenge's sub-circuit reads from its vanilla proof.
#[derive(Deserialize)]
#[serde(bound = "")]
pub(crate) struct ChallengeProof<Tree: MerkleTreeTrait> {
    #[serde(bound(deserialize = "MerkleProof<Sha256Hasher, U2>: Deserialize<'de>"))]
    comm_d_proofs: MerkleProof<Sha256Hasher, U2>,
    #[serde(bound(deserialize = "TreeProof<Tree>: Deserialize<'de>"))]
    comm_r_last_proof: TreeProof<Tree>,
    #[serde(bound(deserialize = "TreeProof<Tree>: Deserialize<'de>"))]
    replica_column_proofs: ReplicaColumns<TreeProof<Tree>>,
    labeling_proofs: Vec<Labeling>,
}

// By hand: a derive would ask `Tree: Clone`.
impl<Tree: MerkleTreeTrait> Clone for ChallengeProof<Tree> {
    fn clone(&self) -> Self {
        ChallengeProof {
            comm_d_proofs: self.comm_d_proofs.clone(),
            comm_r_last_proof: self.comm_r_last_proof.clone(),
            replica_column_proofs: self.replica_column_proofs.clone(),
            labeling_proofs: self.labeling_proofs.clone(),
        }
    }
}

#[derive(Clone, Deserialize)]
struct Labeling {
    node: u64,
}

#[derive(Clone, Deserialize)]
struct ReplicaColumns<P> {
    c_x: ColumnProof<P>,
    drg_parents: Vec<ColumnProof<P>>,
    exp_parents: Vec<ColumnProof<P>>,
}

#[derive(Clone, Deserialize)]
struct ColumnProof<P> {
    column: Column,
    inclusion_proof: P,
}

#[derive(Clone, Deserialize)]
struct Column {
    rows: Vec<filecoin_hashers::poseidon::PoseidonDomain>,
}

/// A partition's circuit for witness generation: `StackedCircuit`'s public values and
/// its challenges' proofs.
pub(crate) struct PorepWitnessCircuit<Tree: MerkleTreeTrait> {
    pub replica_id: Fr,
    pub comm_d: Fr,
    pub comm_r: Fr,
    pub comm_r_last: Fr,
    pub comm_c: Fr,
    pub challenges: Vec<ChallengeProof<Tree>>,
}

/// Reads a partition's vanilla proofs into the parts its circuit uses.
pub(crate) fn challenge_proofs<Tree: MerkleTreeTrait, P: serde::Serialize>(vanilla: &[P]) -> Result<Vec<ChallengeProof<Tree>>, serde_json::Error>
where
    TreeProof<Tree>: for<'de> Deserialize<'de>,
{
    serde_json::from_value(serde_json::to_value(vanilla)?)
}

fn alloc<CS: ConstraintSystem<Fr>>(cs: &mut CS, value: Fr) -> Result<AllocatedNum<Fr>, SynthesisError> {
    AllocatedNum::alloc(cs.namespace(|| "num"), || Ok(value))
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Fr> for PorepWitnessCircuit<Tree>
where
    DomainOf<Tree>: Into<Fr>,
{
    /// `StackedCircuit::synthesize`'s allocations: the public commitments and
    /// `comm_r = H(comm_c, comm_r_last)`, then one namespace `challenge_{i}` per challenge.
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        if !cs.is_witness_generator() {
            return Err(SynthesisError::Unsatisfiable);
        }
        let replica_id = alloc(cs, self.replica_id)?;
        replica_id.inputize(cs.namespace(|| "replica_id_input"))?;
        let replica_id_bits = reverse_bit_numbering(replica_id.to_bits_le(cs.namespace(|| "replica_id_bits"))?);
        let comm_d = alloc(cs, self.comm_d)?;
        comm_d.inputize(cs.namespace(|| "comm_d_input"))?;
        let comm_r = alloc(cs, self.comm_r)?;
        comm_r.inputize(cs.namespace(|| "comm_r_input"))?;
        let comm_r_last = alloc(cs, self.comm_r_last)?;
        let comm_c = alloc(cs, self.comm_c)?;
        let hash = <<Tree::Hasher as Hasher>::Function as HashFunction<DomainOf<Tree>>>::hash2_circuit(
            cs.namespace(|| "H_comm_c_comm_r_last"),
            &comm_c,
            &comm_r_last,
        )?;
        constraint::equal(cs, || "comm_r = H(comm_c || comm_r_last)", &comm_r, &hash);
        for (i, proof) in self.challenges.iter().enumerate() {
            challenge::<Tree, _>(&mut cs.namespace(|| format!("challenge_{i}")), proof, &comm_d, &replica_id_bits)?;
        }
        Ok(())
    }
}

/// One challenge: `storage_proofs_porep`'s per-challenge `Proof::synthesize`, step for
/// step, with `create_label_circuit`'s SHA-256 computed natively.
fn challenge<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    proof: &ChallengeProof<Tree>,
    comm_d: &AllocatedNum<Fr>,
    replica_id: &[Boolean],
) -> Result<(), SynthesisError>
where
    DomainOf<Tree>: Into<Fr>,
{
    let columns = &proof.replica_column_proofs;
    let data_leaf = alloc(cs, proof.comm_d_proofs.leaf().into())?;
    comm_d_inclusion(cs, &proof.comm_d_proofs, comm_d, &data_leaf)?;

    let layers = columns.drg_parents.first().map_or(0, |c| c.column.rows.len());
    let mut parents = Vec::with_capacity(columns.drg_parents.len() + columns.exp_parents.len());
    for parent in columns.drg_parents.iter().chain(&columns.exp_parents) {
        if parent.column.rows.len() != layers {
            return Err(SynthesisError::Unsatisfiable);
        }
        let rows = parent.column.rows.iter().map(|r| alloc(cs, (*r).into())).collect::<Result<Vec<_>, _>>()?;
        let hash = column_hash(cs, &rows)?;
        inclusion::<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity, _>(cs, &parent.inclusion_proof, &hash)?;
        parents.push(rows);
    }
    let (drg, exp) = parents.split_at(columns.drg_parents.len());

    let node = proof.labeling_proofs.first().ok_or(SynthesisError::Unsatisfiable)?.node;
    let node = UInt64::alloc(cs.namespace(|| "challenge"), Some(node))?;
    node.pack_into_input(cs.namespace(|| "challenge input"))?;

    let mut labels = Vec::with_capacity(layers);
    for layer in 1..=layers {
        let mut bits = Vec::with_capacity(drg.len() + exp.len());
        for column in drg {
            bits.push(reverse_bit_numbering(column[layer - 1].to_bits_le(cs.namespace(|| "drg parent bits"))?));
        }
        if layer > 1 {
            for column in exp {
                bits.push(reverse_bit_numbering(column[layer - 2].to_bits_le(cs.namespace(|| "exp parent bits"))?));
            }
        }
        labels.push(label(cs, replica_id, &bits, layer as u32, &node)?);
    }
    let key = labels.last().ok_or(SynthesisError::Unsatisfiable)?;
    let encoded = encode(cs.namespace(|| "encode_node"), key, &data_leaf)?;
    inclusion::<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity, _>(cs, &proof.comm_r_last_proof, &encoded)?;
    let hash = column_hash(cs, &labels)?;
    inclusion::<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity, _>(cs, &columns.c_x.inclusion_proof, &hash)
}

/// The label of `node` in `layer`: SHA-256 of the replica id, the layer and node, and
/// the parents repeated to 37 (each field 32 bytes), packed into a field element.
fn label<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    replica_id: &[Boolean],
    parents: &[Vec<Boolean>],
    layer: u32,
    node: &UInt64,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    const PARENTS: usize = 37;
    if parents.is_empty() {
        return Err(SynthesisError::Unsatisfiable);
    }
    // Layer 1 has the base parents only, later layers base and expander parents; both
    // are repeated in order up to 37.
    let repeated = parents.iter().cycle().take(PARENTS);
    let mut message: Vec<Boolean> = Vec::with_capacity((2 + PARENTS) * 256);
    let pad = |m: &mut Vec<Boolean>, to: usize| m.resize(m.len().next_multiple_of(to), Boolean::constant(false));
    message.extend_from_slice(replica_id);
    pad(&mut message, 256);
    message.extend((0..32).rev().map(|i| Boolean::constant((layer >> i) & 1 == 1)));
    message.extend(node.to_bits_be());
    pad(&mut message, 256);
    for parent in repeated {
        message.extend_from_slice(parent);
        pad(&mut message, 256);
    }
    sha256_packed(cs, &message)
}

/// `enforce_inclusion` for comm_d's binary SHA-256 tree: `PoRCircuit`'s steps (per
/// level an index bit, the sibling, the pair in order, their hash; then the index bits
/// packed into public inputs), each node's SHA-256 computed natively.
fn comm_d_inclusion<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    proof: &MerkleProof<Sha256Hasher, U2>,
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
) -> Result<(), SynthesisError> {
    let mut cur = leaf.clone();
    let mut index_bits = Vec::new();
    for (siblings, index) in proof.as_options() {
        let (&[Some(sibling)], Some(index)) = (&siblings[..], index) else {
            return Err(SynthesisError::AssignmentMissing);
        };
        let bit = Boolean::from(AllocatedBit::alloc(cs.namespace(|| "index bit"), Some(index & 1 == 1))?);
        let sibling = alloc(cs, sibling)?;
        let pair = insert(cs, &cur, std::slice::from_ref(&bit), &[sibling])?;
        cur = sha256_node(cs, &pair[0], &pair[1])?;
        index_bits.push(bit);
    }
    multipack::pack_into_inputs(cs.namespace(|| "path"), &index_bits)?;
    constraint::equal(cs, || "comm_d root", &cur, root);
    Ok(())
}

/// `hash_single_column`: Poseidon over a column of 2 (test sectors) or 11 layers.
fn column_hash<CS: ConstraintSystem<Fr>>(cs: &mut CS, rows: &[AllocatedNum<Fr>]) -> Result<AllocatedNum<Fr>, SynthesisError> {
    match rows.len() {
        2 => poseidon_hash(cs, rows, &*POSEIDON_CONSTANTS_2),
        11 => poseidon_hash(cs, rows, &*POSEIDON_CONSTANTS_11),
        _ => Err(SynthesisError::Unsatisfiable),
    }
}

/// A Merkle inclusion proof of `leaf` (allocated already), as the circuit's
/// `enforce_inclusion` (a private-root `PoRCircuit`). Poseidon trees only (tree_c,
/// tree_r_last).
fn inclusion<H, U, V, W, CS>(cs: &mut CS, proof: &MerkleProof<H, U, V, W>, leaf: &AllocatedNum<Fr>) -> Result<(), SynthesisError>
where
    H: 'static + Hasher,
    U: 'static + filecoin_hashers::PoseidonArity,
    V: 'static + filecoin_hashers::PoseidonArity,
    W: 'static + filecoin_hashers::PoseidonArity,
    CS: ConstraintSystem<Fr>,
{
    if H::name() != PoseidonHasher::name() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let leaf = leaf.get_value().ok_or(SynthesisError::AssignmentMissing)?;
    merkle::inclusion::<MerkleTreeWrapper<H, DiskStore<H::Domain>, U, V, W>, _>(cs, leaf, &proof.as_options(), &mut Vec::with_capacity(8192))
}
