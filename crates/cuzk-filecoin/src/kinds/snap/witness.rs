//! SnapDeals' partition witness over a share of its challenges.
//!
//! `EmptySectorUpdateCircuit` allocates a prelude (the public inputs, `phi`, the roots,
//! the apex leaves and every challenge's bits), then one block per challenge that
//! reads only the prelude and its own proof. [`SnapWitnessCircuit`] allocates the same
//! prelude, and then the blocks of a share of the
//! challenges only (each in a top-level namespace `challenge_{i}`, `i` counted within
//! the share), so that [`cuzk_groth16::witness::synthesize_witness_split`] can spread
//! a partition over every core. With all challenges it is the circuit's witness value
//! for value (tested at 2 KiB in tests/compiled_2k.rs, at 8 MiB and 512 MiB in
//! tests/shape_true.rs, and at 32 GiB there and in `cuzk bench`).
//! It is only for witness generators (the compiled matrices hold the constraints): the
//! update's own gadgets are private to storage-proofs, so their allocations are
//! written out here (values only); tree_d's SHA-256 nodes are hashed natively
//! ([`crate::witness::sha256`]), and so are the Poseidon hashes and tree_r's paths
//! ([`crate::witness::poseidon`], [`crate::witness::merkle`]).

use bellpepper::gadgets::multipack::pack_bits;
use bellpepper_core::boolean::{field_into_allocated_bits_le, AllocatedBit, Boolean};
use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField, PrimeFieldBits};
use filecoin_hashers::{HashFunction, Hasher};
use storage_proofs_core::gadgets::insertion::{insert, select};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::circuit::ChallengeProof;
use storage_proofs_update::constants::{hs, TreeRHasher, POSEIDON_CONSTANTS_GEN_RANDOMNESS};
use storage_proofs_update::EmptySectorUpdateCircuit;

use crate::witness::merkle::path_values;
use crate::witness::poseidon::poseidon_hash;
use crate::witness::sha256::sha256_node;

/// A partition's circuit restricted to the challenges `share` (indices into its
/// challenge proofs, in order; the prelude always covers all of them).
pub(crate) struct SnapWitnessCircuit<'a, Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    pub circuit: &'a EmptySectorUpdateCircuit<Tree>,
    pub share: Vec<usize>,
}

fn alloc_opt<CS: ConstraintSystem<Fr>>(cs: &mut CS, value: Option<Fr>) -> Result<AllocatedNum<Fr>, SynthesisError> {
    AllocatedNum::alloc(cs.namespace(|| "num"), || value.ok_or(SynthesisError::AssignmentMissing))
}

/// A Merkle path's siblings, allocated row by row.
fn siblings<CS: ConstraintSystem<Fr>>(cs: &mut CS, path: &[Vec<Option<Fr>>]) -> Result<Vec<Vec<AllocatedNum<Fr>>>, SynthesisError> {
    path.iter().map(|row| row.iter().map(|s| alloc_opt(cs, *s)).collect()).collect()
}

/// What every challenge's block reads from the prelude.
struct Prelude {
    phi: AllocatedNum<Fr>,
    apex_leafs: Vec<AllocatedNum<Fr>>,
    partition_bits: Vec<AllocatedBit>,
    h_select_bits: Vec<AllocatedBit>,
    generated_bits: Vec<Vec<AllocatedBit>>,
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Circuit<Fr> for SnapWitnessCircuit<'_, Tree> {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        if !cs.is_witness_generator() {
            return Err(SynthesisError::Unsatisfiable);
        }
        let prelude = prelude(cs, self.circuit)?;
        for (i, &c) in self.share.iter().enumerate() {
            challenge(&mut cs.namespace(|| format!("challenge_{i}")), self.circuit, &prelude, c)?;
        }
        Ok(())
    }
}

/// The circuit's allocations before its first challenge, in its order: `k` and
/// `h_select` with their bits, the packed partition index, the three commitments,
/// `phi`, `comm_c` and the roots, the apex leaves and the partition path, the two
/// `comm_r` hashes, the apex tree and every challenge's generated bits.
fn prelude<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    circuit: &EmptySectorUpdateCircuit<Tree>,
) -> Result<Prelude, SynthesisError> {
    let p = &circuit.pub_params;
    let (inputs, private) = (&circuit.pub_inputs, &circuit.priv_inputs);
    let first = private.challenge_proofs.first().ok_or(SynthesisError::Unsatisfiable)?;
    let h_select_bit_len = hs(p.sector_nodes).len();
    let partition_path = first.path_d_new.get(p.challenge_bit_len - p.partition_bit_len..).ok_or(SynthesisError::Unsatisfiable)?;
    // The circuit's own checks on its inputs (it panics where these fail; here they are
    // errors, before any proving time is spent on a witness that cannot satisfy it).
    if private.challenge_proofs.len() != p.challenge_count
        || private.apex_leafs.len() != p.apex_leaf_count
        || partition_path.iter().any(|s| s.len() != 1)
    {
        return Err(SynthesisError::Unsatisfiable);
    }

    let k_and_h_select = alloc_opt(cs, inputs.k_and_h_select)?;
    k_and_h_select.inputize(cs.namespace(|| "input"))?;
    let value = k_and_h_select.get_value().ok_or(SynthesisError::AssignmentMissing)?;
    let bits = value
        .to_le_bits()
        .into_iter()
        .take(p.partition_bit_len + h_select_bit_len)
        .map(|bit| AllocatedBit::alloc(cs.namespace(|| "bit"), Some(bit)))
        .collect::<Result<Vec<_>, _>>()?;
    let (partition_bits, h_select_bits) = bits.split_at(p.partition_bit_len);
    let partition_booleans: Vec<Boolean> = partition_bits.iter().cloned().map(Boolean::from).collect();
    let partition = pack_bits(cs.namespace(|| "partition"), &partition_booleans)?;

    let comm_r_old = alloc_opt(cs, inputs.comm_r_old)?;
    comm_r_old.inputize(cs.namespace(|| "input"))?;
    let comm_d_new = alloc_opt(cs, inputs.comm_d_new)?;
    comm_d_new.inputize(cs.namespace(|| "input"))?;
    let comm_r_new = alloc_opt(cs, inputs.comm_r_new)?;
    comm_r_new.inputize(cs.namespace(|| "input"))?;
    let phi = poseidon_hash(cs, &[comm_d_new, comm_r_old], &POSEIDON_CONSTANTS_GEN_RANDOMNESS)?;

    let comm_c = alloc_opt(cs, private.comm_c)?;
    let root_r_old = alloc_opt(cs, private.root_r_old)?;
    let root_r_new = alloc_opt(cs, private.root_r_new)?;
    let apex_leafs = private.apex_leafs.iter().map(|leaf| alloc_opt(cs, *leaf)).collect::<Result<Vec<_>, _>>()?;
    let partition_path = siblings(cs, partition_path)?;
    // comm_r = H(comm_c || root_r), old and new (the equalities are constraints only).
    for root in [&root_r_old, &root_r_new] {
        <TreeRHasher as Hasher>::Function::hash2_circuit(cs.namespace(|| "comm_r"), &comm_c, root)?;
    }
    apex_tree(cs, &apex_leafs, partition_bits, partition_path)?;
    let generated_bits = challenge_bits(cs, &comm_r_new, &partition, p.challenge_count, p.challenge_bit_len - p.partition_bit_len)?;
    Ok(Prelude { phi, apex_leafs, partition_bits: partition_bits.to_vec(), h_select_bits: h_select_bits.to_vec(), generated_bits })
}

/// Challenge `c`'s block: its `rho`, the new replica leaf, the old and new tree_r
/// paths, the apex leaf it selects and its tree_d path up to that leaf.
fn challenge<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    circuit: &EmptySectorUpdateCircuit<Tree>,
    prelude: &Prelude,
    c: usize,
) -> Result<(), SynthesisError> {
    let p = &circuit.pub_params;
    let proof: &ChallengeProof<Tree> = circuit.priv_inputs.challenge_proofs.get(c).ok_or(SynthesisError::Unsatisfiable)?;
    let generated = prelude.generated_bits.get(c).ok_or(SynthesisError::Unsatisfiable)?;
    let c_bits: Vec<AllocatedBit> = generated.iter().chain(&prelude.partition_bits).cloned().collect();
    let c_high = high_bits(cs, &c_bits, &prelude.h_select_bits, &hs(p.sector_nodes))?;
    let rho = poseidon_hash(cs, &[prelude.phi.clone(), c_high], &POSEIDON_CONSTANTS_GEN_RANDOMNESS)?;
    let leaf_r_old = alloc_opt(cs, proof.leaf_r_old)?;
    let leaf_d_new = alloc_opt(cs, proof.leaf_d_new)?;
    // leaf_r_new = leaf_r_old + leaf_d_new · rho: the product, then the sum.
    let product = leaf_d_new.mul(cs.namespace(|| "leaf_d_new rho"), &rho)?;
    let value = leaf_r_old.get_value().zip(product.get_value()).map(|(old, dr)| old + dr);
    if value.is_none() || value != proof.leaf_r_new {
        return Err(SynthesisError::Unsatisfiable);
    }
    let leaf_r_new = alloc_opt(cs, value)?;

    let bit_values = c_bits.iter().map(|b| b.get_value().ok_or(SynthesisError::AssignmentMissing)).collect::<Result<Vec<_>, _>>()?;
    let mut values = Vec::with_capacity(8192);
    for (leaf, path) in [(&leaf_r_old, &proof.path_r_old), (&leaf_r_new, &proof.path_r_new)] {
        // por_no_challenge_input: the siblings, then per level the insertion and the
        // hash (the root's equality is a constraint only).
        let rows = siblings(cs, path)?;
        let rows = rows
            .iter()
            .map(|row| row.iter().map(|s| s.get_value().ok_or(SynthesisError::AssignmentMissing)).collect())
            .collect::<Result<Vec<Vec<Fr>>, _>>()?;
        let leaf = leaf.get_value().ok_or(SynthesisError::AssignmentMissing)?;
        values.clear();
        path_values::<Tree>(leaf, &rows, &bit_values, &mut values)?;
        cs.extend_aux(&values);
    }

    let to_apex = p.challenge_bit_len - p.partition_bit_len - p.apex_leaf_bit_len;
    let apex_bits: Vec<Boolean> = c_bits[to_apex..to_apex + p.apex_leaf_bit_len].iter().cloned().map(Boolean::from).collect();
    // The leaf's path ends at the apex leaf its bits select (a constraint only).
    select(cs.namespace(|| "apex leaf"), &prelude.apex_leafs, &apex_bits)?;
    let path_d = siblings(cs, proof.path_d_new.get(..to_apex).ok_or(SynthesisError::Unsatisfiable)?)?;
    tree_d_path(cs, &c_bits[..to_apex], leaf_d_new, path_d).map(drop)
}

/// The partition's apex tree: each row the SHA-256 of the pairs below (tree_d's
/// hasher) up to its root, then that root's path along the partition bits (to comm_d:
/// a constraint only).
fn apex_tree<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    leaves: &[AllocatedNum<Fr>],
    partition_bits: &[AllocatedBit],
    partition_path: Vec<Vec<AllocatedNum<Fr>>>,
) -> Result<(), SynthesisError> {
    if !leaves.len().is_power_of_two() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut row = leaves.to_vec();
    while row.len() > 1 {
        row = row.chunks(2).map(|pair| sha256_node(cs, &pair[0], &pair[1])).collect::<Result<_, _>>()?;
    }
    tree_d_path(cs, partition_bits, row.remove(0), partition_path).map(drop)
}

/// `por_no_challenge_input` over tree_d (binary, SHA-256): per level the node and its
/// sibling in the order the challenge's bit gives (`insert`), then their hash; the
/// computed root (returned) equals the expected one by a constraint only.
fn tree_d_path<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    bits: &[AllocatedBit],
    leaf: AllocatedNum<Fr>,
    path: Vec<Vec<AllocatedNum<Fr>>>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    if bits.len() != path.len() || path.iter().any(|row| row.len() != 1) {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut cur = leaf;
    for (bit, sibling) in bits.iter().zip(&path) {
        let pair = insert(cs, &cur, &[Boolean::from(bit.clone())], sibling)?;
        cur = sha256_node(cs, &pair[0], &pair[1])?;
    }
    Ok(cur)
}

/// Every challenge's `bits` random bits: per digest `j` of the partition `k`, the index
/// `k · digests + j`, its Poseidon hash with comm_r_new and that hash's bits
/// (little-endian), cut into challenges (fewer from the last digest).
fn challenge_bits<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    comm_r_new: &AllocatedNum<Fr>,
    partition: &AllocatedNum<Fr>,
    challenges: usize,
    bits: usize,
) -> Result<Vec<Vec<AllocatedBit>>, SynthesisError> {
    let per_digest = Fr::CAPACITY as usize / bits;
    let digests = challenges.div_ceil(per_digest);
    let k = partition.get_value().ok_or(SynthesisError::AssignmentMissing)?;
    let mut out = Vec::with_capacity(challenges);
    for j in 0..digests {
        let index = alloc_opt(cs, Some(k * Fr::from(digests as u64) + Fr::from(j as u64)))?;
        let digest = poseidon_hash(cs, &[comm_r_new.clone(), index], &POSEIDON_CONSTANTS_GEN_RANDOMNESS)?;
        let digest_bits = field_into_allocated_bits_le(cs.namespace(|| "digest bits"), digest.get_value())?;
        let take = per_digest.min(challenges - out.len());
        out.extend(digest_bits.chunks(bits).take(take).map(<[AllocatedBit]>::to_vec));
    }
    Ok(out)
}

/// The challenge's `h` high bits, `h` picked by the one set bit of `h_select`: per
/// candidate `h` the packed high bits and that value or zero, then their sum.
fn high_bits<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    c_bits: &[AllocatedBit],
    h_select: &[AllocatedBit],
    hs: &[usize],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    if h_select.len() != hs.len() || hs.iter().any(|&h| h > c_bits.len()) {
        return Err(SynthesisError::Unsatisfiable);
    }
    let c_bits: Vec<Boolean> = c_bits.iter().cloned().map(Boolean::from).collect();
    let mut sum = Fr::ZERO;
    for (&h, select) in hs.iter().zip(h_select) {
        let high = pack_bits(cs.namespace(|| "high"), &c_bits[c_bits.len() - h..])?;
        let chosen = match select.get_value().ok_or(SynthesisError::AssignmentMissing)? {
            true => high.get_value().ok_or(SynthesisError::AssignmentMissing)?,
            false => Fr::ZERO,
        };
        alloc_opt(cs, Some(chosen))?;
        sum += chosen;
    }
    alloc_opt(cs, Some(sum))
}
