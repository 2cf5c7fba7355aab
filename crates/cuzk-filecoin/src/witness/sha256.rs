//! SHA-256 as the Filecoin circuits use it, for witness generators: the digest's
//! allocations made by [`cuzk_groth16::witness::sha256`] (natively, in the gadget's
//! order) and packed into a field element as `filecoin_hashers`' SHA-256 hasher packs
//! it. PoRep's labels and comm_d path and SnapDeals' tree_d paths are made of these.

use bellpepper_core::boolean::Boolean;
use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::PrimeField;
use storage_proofs_core::util::reverse_bit_numbering;

/// SHA-256 of `message` packed into a field element as storage-proofs packs a digest:
/// bits numbered from each byte's low end, the first 254 as a little-endian number
/// (`multipack::pack_bits`: one value allocated).
pub(crate) fn sha256_packed<CS: ConstraintSystem<Fr>>(cs: &mut CS, message: &[Boolean]) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let digest = cuzk_groth16::witness::sha256::sha256(cs, message)?;
    let mut limbs = [0u64; 4];
    for (i, byte) in digest.chunks(8).enumerate() {
        for (j, bit) in byte.iter().rev().enumerate() {
            let k = i * 8 + j;
            if *bit && k < Fr::CAPACITY as usize {
                limbs[k / 64] |= 1 << (k % 64);
            }
        }
    }
    let packed = Option::<Fr>::from(Fr::from_u64s_le(&limbs)).ok_or(SynthesisError::Unsatisfiable)?;
    AllocatedNum::alloc(cs.namespace(|| "digest"), || Ok(packed))
}

/// A binary SHA-256 tree's node from its children, as the hasher's `hash2_circuit`
/// and `hash_multi_leaf_circuit` make it: each child's 255 bits allocated (every byte's
/// bits reversed, the last byte padded), the 512-bit message hashed and packed.
pub(crate) fn sha256_node<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    left: &AllocatedNum<Fr>,
    right: &AllocatedNum<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut message = Vec::with_capacity(512);
    for node in [left, right] {
        message.extend(reverse_bit_numbering(node.to_bits_le(cs.namespace(|| "node bits"))?));
    }
    sha256_packed(cs, &message)
}
