//! WindowPoSt's and WinningPoSt's witness, values only, Poseidon hashed natively.
//!
//! `FallbackPoStCircuit` allocates, per sector: `comm_r_last`, `comm_c`, `comm_r` (and
//! `comm_r` as an input), H(comm_c, comm_r_last), then per challenge a Merkle inclusion
//! proof (storage-proofs' `PoRCircuit`, private root): the leaf, and per tree level its
//! index bits, its siblings, the insertion of the current node among them and the
//! level's Poseidon hash; the path's bits packed into inputs. [`PostWitnessCircuit`]
//! allocates the same values in the same order, the Poseidon hashes through
//! [`poseidon_values`] instead of the gadget (which builds every round's linear
//! combinations even for a witness). Sectors are independent and all the same size:
//! shares of them are synthesized on every core, each straight into its range of the
//! witness. Equal to the circuit's own witness at 2 KiB (tests/compiled_2k.rs),
//! 8 MiB and 32 GiB (tests/shape_true.rs).

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_hashers::PoseidonArity;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_post::fallback::{Sector, SectorProof};

use crate::witness::merkle::inclusion;
use crate::witness::poseidon::poseidon_values;

/// A share of a partition's sectors: the circuit's (for the commitments and leaves)
/// beside their vanilla proofs (for the paths, which the circuit keeps private). Each
/// in a top-level namespace `sector_{i}`, `i` counted within the share, so that
/// [`cuzk_groth16::witness::synthesize_witness_split`] spreads them over every core,
/// written in place; nothing comes before the first.
pub(crate) struct PostWitnessCircuit<'a, Tree: MerkleTreeTrait> {
    pub sectors: Vec<(&'a Sector<Tree>, &'a SectorProof<Tree::Proof>)>,
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Fr> for PostWitnessCircuit<'_, Tree> {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        if !cs.is_witness_generator() {
            return Err(SynthesisError::Unsatisfiable);
        }
        for (i, (s, p)) in self.sectors.iter().enumerate() {
            sector::<Tree, _>(&mut cs.namespace(|| format!("sector_{i}")), s, p)?;
        }
        Ok(())
    }
}

fn value(v: Option<Fr>) -> Result<Fr, SynthesisError> {
    v.ok_or(SynthesisError::AssignmentMissing)
}

fn alloc<CS: ConstraintSystem<Fr>>(cs: &mut CS, v: Fr) -> Result<(), SynthesisError> {
    cs.alloc(|| "", || Ok(v)).map(drop)
}

/// One sector: its commitments, their hash, and each challenge's inclusion proof.
fn sector<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    s: &Sector<Tree>,
    proof: &SectorProof<Tree::Proof>,
) -> Result<(), SynthesisError> {
    let (comm_r_last, comm_c, comm_r) = (value(s.comm_r_last)?, value(s.comm_c)?, value(s.comm_r)?);
    alloc(cs, comm_r_last)?;
    alloc(cs, comm_c)?;
    alloc(cs, comm_r)?;
    cs.alloc_input(|| "comm_r", || Ok(comm_r))?;
    let mut values = Vec::with_capacity(8192);
    poseidon_values(&[comm_c, comm_r_last], <typenum::U2 as PoseidonArity>::PARAMETERS(), &mut values);
    cs.extend_aux(&values);
    if s.leafs.len() != proof.inclusion_proofs.len() {
        return Err(SynthesisError::Unsatisfiable);
    }
    for (leaf, path) in s.leafs.iter().zip(&proof.inclusion_proofs) {
        // PoRCircuit with a private root: the leaf, then its path.
        let leaf = value(*leaf)?;
        alloc(cs, leaf)?;
        inclusion::<Tree, CS>(cs, leaf, &path.as_options(), &mut values)?;
    }
    Ok(())
}
