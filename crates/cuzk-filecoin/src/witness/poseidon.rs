//! The values neptune's Poseidon gadget (`neptune::circuit::poseidon_hash`, the one
//! filecoin-hashers' tree and commitment hashes use) allocates, computed natively.
//!
//! The gadget keeps the state between S-boxes as linear combinations and builds them
//! even when only the witness is wanted (on a 32 GiB WindowPoSt partition that was half
//! of the witness's time: `Num::add`/`scale` and their index maps). The values it
//! allocates depend only on the preimage, in this order:
//! - first full round: for each element but the constant domain tag, (x + k)², its
//!   square, and x⁴·(x + k) + k' (the tag's S-box is a constant: nothing allocated);
//! - every other full round, for each element, and every partial round, for the first
//!   element: the S-box input x (the state was a linear combination), x², x⁴, x⁵ + k
//!   (the last full round adds no key);
//! - the result, the second element of the final state.
//!
//! Between rounds the state is multiplied by the round's matrix: the MDS matrix, the
//! pre-sparse one before the partial rounds, a sparse one in each partial round (the
//! optimised constants neptune's gadget uses). Field arithmetic is exact, so the values
//! equal the gadget's (tested against it for every arity Filecoin uses).

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::Field;
use neptune::poseidon::PoseidonConstants;
use neptune::Arity;

/// `neptune::circuit::poseidon_hash` for a witness generator: the gadget's values
/// appended to `cs`, the hash (the last of them) returned allocated.
pub(crate) fn poseidon_hash<A: Arity<Fr>, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    preimage: &[AllocatedNum<Fr>],
    c: &PoseidonConstants<Fr, A>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let preimage = preimage.iter().map(|x| x.get_value().ok_or(SynthesisError::AssignmentMissing)).collect::<Result<Vec<_>, _>>()?;
    if preimage.len() + 1 != c.width() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut values = Vec::with_capacity(4 * c.width() * c.full_rounds + 4 * c.partial_rounds);
    let hash = poseidon_values(&preimage, c, &mut values);
    values.pop();
    cs.extend_aux(&values);
    AllocatedNum::alloc(cs.namespace(|| "hash"), || Ok(hash))
}

/// Appends to `out` every value the gadget allocates hashing `preimage`, and returns
/// the hash (the last of them). `preimage` must have the arity's length.
pub(crate) fn poseidon_values<A: Arity<Fr>>(preimage: &[Fr], c: &PoseidonConstants<Fr, A>, out: &mut Vec<Fr>) -> Fr {
    let width = c.width();
    debug_assert_eq!(preimage.len() + 1, width, "a preimage of the arity's length");
    let keys = &c.compressed_round_constants;
    let mut state = Vec::with_capacity(width);
    state.push(c.domain_tag);
    state.extend_from_slice(preimage);
    let mut next = vec![Fr::ZERO; width];
    let mut round = 0;

    // First full round: the key is added before the S-box and after it.
    let (pre, post) = (&keys[..width], &keys[width..2 * width]);
    let mut offset = 2 * width;
    for (i, x) in state.iter_mut().enumerate() {
        let s = *x + pre[i];
        let s2 = s.square();
        let s4 = s2.square();
        *x = s4 * s + post[i];
        if i > 0 {
            out.extend_from_slice(&[s2, s4, *x]);
        }
    }
    mix(c, round, &state, &mut next);
    std::mem::swap(&mut state, &mut next);
    round += 1;

    let rounds = c.full_rounds + c.partial_rounds;
    while round < rounds {
        let partial = round >= c.half_full_rounds && round < c.half_full_rounds + c.partial_rounds;
        let last = round == rounds - 1;
        let sboxed = if partial { 1 } else { width };
        for x in &mut state[..sboxed] {
            let key = if last { Fr::ZERO } else { keys[offset] };
            if !last {
                offset += 1;
            }
            let x2 = x.square();
            let x4 = x2.square();
            let x5 = x4 * *x + key;
            out.extend_from_slice(&[*x, x2, x4, x5]);
            *x = x5;
        }
        mix(c, round, &state, &mut next);
        std::mem::swap(&mut state, &mut next);
        round += 1;
    }
    out.push(state[1]);
    state[1]
}

/// `next` = `state` times round `round`'s matrix (the gadget's `product_mds`).
fn mix<A: Arity<Fr>>(c: &PoseidonConstants<Fr, A>, round: usize, state: &[Fr], next: &mut [Fr]) {
    let sparse_from = c.half_full_rounds - 1;
    if round == sparse_from {
        dense(&c.pre_sparse_matrix, state, next);
    } else if round > sparse_from && round < c.half_full_rounds + c.partial_rounds {
        let m = &c.sparse_matrixes[round - sparse_from - 1];
        next[0] = state.iter().zip(&m.w_hat).map(|(x, w)| *x * w).sum();
        for j in 1..state.len() {
            next[j] = state[j] + state[0] * m.v_rest[j - 1];
        }
    } else {
        dense(&c.mds_matrices.m, state, next);
    }
}

/// next[j] = Σ_i state[i]·m[i][j].
fn dense(m: &[Vec<Fr>], state: &[Fr], next: &mut [Fr]) {
    for (j, out) in next.iter_mut().enumerate() {
        *out = state.iter().zip(m).map(|(x, row)| *x * row[j]).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::num::AllocatedNum;
    use bellpepper_core::ConstraintSystem;
    use cuzk_groth16::witness::WitnessAssembly;
    use filecoin_hashers::PoseidonArity;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use typenum::{U11, U2, U4, U8};

    /// The gadget's allocations after the preimage's, and the native values.
    fn both<A: PoseidonArity>(seed: u64) -> (Vec<Fr>, Vec<Fr>, Fr) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let preimage: Vec<Fr> = (0..A::to_usize()).map(|_| Fr::random(&mut rng)).collect();
        let mut cs = WitnessAssembly::default();
        let nums: Vec<_> =
            preimage.iter().enumerate().map(|(i, v)| AllocatedNum::alloc(cs.namespace(|| format!("x{i}")), || Ok(*v)).unwrap()).collect();
        let hash = neptune::circuit::poseidon_hash(cs.namespace(|| "hash"), nums, A::PARAMETERS()).unwrap();
        let gadget = cs.into_witness().aux[preimage.len()..].to_vec();
        let mut native = Vec::new();
        let h = poseidon_values(&preimage, A::PARAMETERS(), &mut native);
        assert_eq!(Some(h), hash.get_value());
        (gadget, native, h)
    }

    #[test]
    fn native_values_equal_the_gadgets_for_every_filecoin_arity() {
        for seed in 0..3 {
            for (name, (gadget, native, h)) in [("2", both::<U2>(seed)), ("4", both::<U4>(seed)), ("8", both::<U8>(seed)), ("11", both::<U11>(seed))]
            {
                assert_eq!(native.len(), gadget.len(), "arity {name}: count");
                assert!(native == gadget, "arity {name}: values");
                assert_eq!(native.last(), Some(&h));
            }
        }
    }

    #[test]
    fn the_hash_is_neptunes() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let preimage: Vec<Fr> = (0..8).map(|_| Fr::random(&mut rng)).collect();
        let want = neptune::Poseidon::new_with_preimage(&preimage, U8::PARAMETERS()).hash();
        assert_eq!(poseidon_values(&preimage, U8::PARAMETERS(), &mut Vec::new()), want);
    }
}
