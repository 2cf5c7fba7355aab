//! Poseidon Merkle paths' witness values, computed natively: what storage-proofs'
//! `PoRCircuit` (per level: the index bits, the siblings, `insert`, the hash) and
//! `por_no_challenge_input` (per level: `insert` and the hash, over bits and siblings
//! allocated before) allocate, in their order. Trees have a base arity and, where they
//! have them, one sub-tree and one top-tree level (`MerkleTreeTrait`'s three arities).

use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_hashers::PoseidonArity;
use storage_proofs_core::merkle::MerkleTreeTrait;
use typenum::Unsigned;

use crate::witness::poseidon::poseidon_values;

/// One level of a path, as `MerkleProofTrait::as_options` gives it.
pub(crate) type Level = (Vec<Option<Fr>>, Option<usize>);

fn value<T>(v: Option<T>) -> Result<T, SynthesisError> {
    v.ok_or(SynthesisError::AssignmentMissing)
}

/// The arity of each level of `Tree`'s paths of `levels` levels.
fn arities<Tree: MerkleTreeTrait>(levels: usize) -> Result<impl Iterator<Item = usize>, SynthesisError> {
    let (sub, top) = (Tree::SubTreeArity::to_usize(), Tree::TopTreeArity::to_usize());
    let upper: Vec<usize> = [sub, top].into_iter().filter(|&a| a > 0).collect();
    let base = levels.checked_sub(upper.len()).ok_or(SynthesisError::Unsatisfiable)?;
    Ok(std::iter::repeat(Tree::Arity::to_usize()).take(base).chain(upper))
}

/// `PoRCircuit`'s values for a path from `leaf` (allocated by the caller where the
/// circuit allocates it): per level its index bits, its siblings, the insertion and
/// the hash, appended to `out`; the index bits appended to `bits` (the circuit packs
/// them into inputs: [`packed_inputs`]). Returns the root.
fn inclusion_values<Tree: MerkleTreeTrait>(leaf: Fr, path: &[Level], out: &mut Vec<Fr>, bits: &mut Vec<bool>) -> Result<Fr, SynthesisError> {
    let mut cur = leaf;
    for ((siblings, index), arity) in path.iter().zip(arities::<Tree>(path.len())?) {
        let index = value(*index)?;
        if siblings.len() + 1 != arity || index >= arity {
            return Err(SynthesisError::Unsatisfiable);
        }
        let from = bits.len();
        bits.extend((0..arity.trailing_zeros()).map(|i| (index >> i) & 1 == 1));
        out.extend(bits[from..].iter().map(|&b| Fr::from(b as u64)));
        let siblings = siblings.iter().map(|s| value(*s)).collect::<Result<Vec<_>, _>>()?;
        out.extend_from_slice(&siblings);
        cur = level::<Tree>(arity, cur, &siblings, &bits[from..], out)?;
    }
    Ok(cur)
}

/// A private-root `PoRCircuit` after its leaf (allocated by the caller where the circuit
/// allocates it): the path's values into `cs`, its bits packed into inputs; the root's
/// equality is a constraint only.
pub(crate) fn inclusion<Tree: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    leaf: Fr,
    path: &[Level],
    values: &mut Vec<Fr>,
) -> Result<(), SynthesisError> {
    values.clear();
    let mut bits = Vec::with_capacity(64);
    inclusion_values::<Tree>(leaf, path, values, &mut bits)?;
    cs.extend_aux(values);
    for input in packed_inputs(&bits) {
        cs.alloc_input(|| "path", || Ok(input))?;
    }
    Ok(())
}

/// `por_no_challenge_input`'s values: per level the insertion of the current node among
/// `siblings[level]` at the index `bits` give (little-endian, the base levels first),
/// and the hash, appended to `out`. Returns the root.
pub(crate) fn path_values<Tree: MerkleTreeTrait>(leaf: Fr, siblings: &[Vec<Fr>], bits: &[bool], out: &mut Vec<Fr>) -> Result<Fr, SynthesisError> {
    let mut cur = leaf;
    let mut bits = bits;
    for (row, arity) in siblings.iter().zip(arities::<Tree>(siblings.len())?) {
        let n = arity.trailing_zeros() as usize;
        if row.len() + 1 != arity || bits.len() < n {
            return Err(SynthesisError::Unsatisfiable);
        }
        cur = level::<Tree>(arity, cur, row, &bits[..n], out)?;
        bits = &bits[n..];
    }
    Ok(cur)
}

/// `multipack::pack_into_inputs`: the bits, little-endian, in chunks of CAPACITY, one
/// field element each.
fn packed_inputs(bits: &[bool]) -> Vec<Fr> {
    bits.chunks(Fr::CAPACITY as usize).map(|chunk| chunk.iter().rev().fold(Fr::ZERO, |acc, &b| acc.double() + Fr::from(b as u64))).collect()
}

/// One level: the insertion's values, then the Poseidon hash's, with the level's arity
/// (one of the tree's three).
fn level<Tree: MerkleTreeTrait>(arity: usize, cur: Fr, siblings: &[Fr], bits: &[bool], out: &mut Vec<Fr>) -> Result<Fr, SynthesisError> {
    let row = inserted(cur, siblings, bits, out)?;
    Ok(if arity == Tree::Arity::to_usize() {
        hash::<Tree::Arity>(&row, out)
    } else if arity == Tree::SubTreeArity::to_usize() {
        hash::<Tree::SubTreeArity>(&row, out)
    } else {
        hash::<Tree::TopTreeArity>(&row, out)
    })
}

fn hash<A: PoseidonArity>(row: &[Fr], out: &mut Vec<Fr>) -> Fr {
    poseidon_values(row, A::PARAMETERS(), out)
}

/// storage-proofs' `insert` gadget for arities 2, 4 and 8: appends the values it
/// allocates (for 8 first `!b0 & !b1` and `b0 & b1`, then its picks) to `out` and
/// returns the row with `a` at the index the bits give.
fn inserted(a: Fr, s: &[Fr], bits: &[bool], out: &mut Vec<Fr>) -> Result<Vec<Fr>, SynthesisError> {
    if s.len() + 1 != 1 << bits.len() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let (nor, and) = match *bits {
        [b0, b1, _] => (!b0 && !b1, b0 && b1),
        _ => (false, false),
    };
    if bits.len() == 3 {
        out.extend([Fr::from(nor as u64), Fr::from(and as u64)]);
    }
    let mut pick = |c: bool, x: Fr, y: Fr| {
        let v = if c { x } else { y };
        out.push(v);
        v
    };
    Ok(match *bits {
        [b0] => vec![pick(b0, s[0], a), pick(b0, a, s[0])],
        [b0, b1] => {
            let p0x0 = pick(b0, s[0], a);
            let p0 = pick(b1, s[0], p0x0);
            let p1x0 = pick(b0, a, s[0]);
            let p1 = pick(b1, s[1], p1x0);
            let p2x1 = pick(b0, s[2], a);
            let p2 = pick(b1, p2x1, s[1]);
            let p3x1 = pick(b0, a, s[2]);
            let p3 = pick(b1, p3x1, s[2]);
            vec![p0, p1, p2, p3]
        }
        [b0, b1, b2] => {
            let (b, c, d, e, f, g, h) = (s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
            let p0xx0 = pick(nor, a, b);
            let p0 = pick(b2, b, p0xx0);
            let p1x00 = pick(b0, a, b);
            let p1xx0 = pick(b1, c, p1x00);
            let p1 = pick(b2, c, p1xx0);
            let p2x10 = pick(b0, d, a);
            let p2xx0 = pick(b1, p2x10, c);
            let p2 = pick(b2, d, p2xx0);
            let p3xx0 = pick(and, a, d);
            let p3 = pick(b2, e, p3xx0);
            let p4xx1 = pick(nor, a, f);
            let p4 = pick(b2, p4xx1, e);
            let p5x01 = pick(b0, a, f);
            let p5xx1 = pick(b1, g, p5x01);
            let p5 = pick(b2, p5xx1, f);
            let p6x11 = pick(b0, h, a);
            let p6xx1 = pick(b1, p6x11, g);
            let p6 = pick(b2, p6xx1, g);
            let p7xx1 = pick(and, a, h);
            let p7 = pick(b2, p7xx1, h);
            vec![p0, p1, p2, p3, p4, p5, p6, p7]
        }
        _ => return Err(SynthesisError::Unsatisfiable),
    })
}
