//! Synthetic circuits shaped like a Filecoin PoRep C2 partition, at any size.
//!
//! Every constraint allocates one aux variable, so aux ≈ constraints as in the real
//! circuit. Four constraint kinds build the densities and the value mix:
//! - *linear*  `x · 1 = x`: x is in A (and C), not in B; any value;
//! - *boolean* `x · (1 − x) = 0`: x ∈ {0, 1}, in A and B;
//! - *square chain* `x0 · x0 = x1`, `x1 · x1 = x2`, `x2 · x2 = x3`: x0, x1, x2 are
//!   significant and in A and B, x3 is significant and in C only;
//! - *copy*    `p · 1 = x` with p the previous variable: x equals p and is in C only,
//!   not in A.
//!
//! Which kind sits at each position, and so which positions are significant, is fixed
//! by the *structure seed* and is the same for every witness, as in the real circuit;
//! the witness seed picks the 0/1 values and the significant scalars. The defaults are
//! a real 32 GiB PoRep partition's, measured (`cuzk bench --input` on a shape-true
//! input, bench/README.md): 99.7 % of aux in A, 25.4 % in B; 1.305 % of aux
//! significant, 0.993 % of the A query's and 3.712 % of the B query's. (BRIEF §2's
//! estimate, 9.7 % and 19 %, was some seven times too many.)

use bellpepper_core::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The shape of a synthetic circuit: sizes, densities and value mix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticShape {
    /// Constraints of the circuit proper (the prover adds one per input on top).
    pub constraints: usize,
    /// Public inputs, the constant one included.
    pub inputs: usize,
    /// Share of aux variables in the A query.
    pub a_density: f64,
    /// Share of aux variables in the B query.
    pub b_density: f64,
    /// Share of aux values that are neither 0 nor 1.
    pub significant: f64,
    /// Share of the B-query aux values that are neither 0 nor 1.
    pub significant_in_b: f64,
    pub structure_seed: u64,
}

/// A PoRep C2 partition: 130,278,869 constraints and 328 inputs (domain 2^27).
pub const C2_CONSTRAINTS: usize = 130_278_869;
pub const C2_INPUTS: usize = 328;

/// Shares of significant aux values (neither 0 nor 1) in a real 32 GiB PoRep
/// partition, all aux and those in the B query: partition 0 of a shape-true input
/// (seed 1), synthesized by cuzk and checked equal to bellperson's witness
/// (bench/results/2026-12-02-real-sizes-cpu-*.txt). The A query's share follows
/// (0.993 % measured, 0.994 % in the model).
pub const C2_SIGNIFICANT: f64 = 0.01305;
pub const C2_SIGNIFICANT_IN_B: f64 = 0.03712;

impl Default for SyntheticShape {
    fn default() -> Self {
        SyntheticShape {
            constraints: C2_CONSTRAINTS,
            inputs: C2_INPUTS,
            a_density: 0.997,
            b_density: 0.254,
            significant: C2_SIGNIFICANT,
            significant_in_b: C2_SIGNIFICANT_IN_B,
            structure_seed: 0x00c2_5eed,
        }
    }
}

impl SyntheticShape {
    /// The C2 partition shape.
    pub fn c2() -> Self {
        Self::default()
    }

    /// The C2 mix filling a domain of exactly 2^log_n: constraints + inputs = 2^log_n
    /// (inputs shrink for tiny domains so at least half the domain is constraints).
    pub fn for_domain(log_n: u32) -> Self {
        let n = 1usize << log_n;
        let inputs = C2_INPUTS.min(n / 2).max(1);
        SyntheticShape { constraints: n - inputs, inputs, ..Self::default() }
    }

    /// Domain size of the prover for this shape.
    pub fn domain_size(&self) -> usize {
        (self.constraints + self.inputs).next_power_of_two()
    }

    /// Per-step probabilities of (square chain, boolean, copy, linear-significant), so
    /// that the per-variable shares come out as asked. A chain is three constraints
    /// and four variables (three in A and B, the last in C only), every other step one
    /// of each; per step, q chains give 1 + 3q variables, 3q + b of them in B (3q
    /// significant), 4q + s significant, q + c not in A.
    fn step_probabilities(&self) -> [f64; 4] {
        let pb = self.b_density.clamp(0.0, 0.95);
        let sb = self.significant_in_b.clamp(0.0, 1.0);
        let chain = sb * pb / (3.0 * (1.0 - sb * pb));
        let vars_per_step = 1.0 + 3.0 * chain;
        let boolean = pb * vars_per_step * (1.0 - sb);
        let copy = ((1.0 - self.a_density).max(0.0) * vars_per_step - chain).clamp(0.0, (1.0 - chain - boolean).max(0.0));
        let lin_sig = (self.significant * vars_per_step - 4.0 * chain).clamp(0.0, (1.0 - chain - boolean - copy).max(0.0));
        [chain, boolean, copy, lin_sig]
    }

    pub fn circuit(&self, witness_seed: u64) -> SyntheticCircuit {
        SyntheticCircuit { shape: *self, witness_seed }
    }
}

/// One instance of a synthetic circuit: a shape and a witness.
#[derive(Clone, Copy, Debug)]
pub struct SyntheticCircuit {
    pub shape: SyntheticShape,
    pub witness_seed: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    SquareChain,
    Boolean,
    Copy,
    LinearSignificant,
    LinearBit,
}

/// Uniform in [0, 1) from (seed, position), stateless so structure never depends on
/// the witness.
fn unit(seed: u64, j: u64) -> f64 {
    let mut z = seed ^ j.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl Circuit<Scalar> for SyntheticCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let shape = self.shape;
        let mut rng = ChaCha8Rng::seed_from_u64(self.witness_seed);
        for i in 1..shape.inputs {
            let v = Scalar::random(&mut rng);
            cs.alloc_input(|| format!("input {i}"), || Ok(v))?;
        }
        let [p_chain, p_bool, p_copy, p_sig] = shape.step_probabilities();
        let one = CS::one();
        let bit = |rng: &mut ChaCha8Rng| {
            if rng.gen::<bool>() {
                Scalar::ONE
            } else {
                Scalar::ZERO
            }
        };
        let mut prev: Option<(Variable, Scalar)> = None;
        let mut made = 0usize;
        let mut step = 0u64;
        while made < shape.constraints {
            let u = unit(shape.structure_seed, step);
            step += 1;
            let room_for_chain = made + CHAIN <= shape.constraints;
            let mut kind = if u < p_chain {
                Kind::SquareChain
            } else if u < p_chain + p_bool {
                Kind::Boolean
            } else if u < p_chain + p_bool + p_copy {
                Kind::Copy
            } else if u < p_chain + p_bool + p_copy + p_sig {
                Kind::LinearSignificant
            } else {
                Kind::LinearBit
            };
            if kind == Kind::SquareChain && !room_for_chain {
                kind = Kind::LinearSignificant;
            }
            if kind == Kind::Copy && prev.is_none() {
                kind = Kind::LinearBit;
            }
            match kind {
                Kind::SquareChain => {
                    let mut xv = Scalar::random(&mut rng);
                    let mut x = cs.alloc(|| "x", || Ok(xv))?;
                    for _ in 0..CHAIN {
                        let yv = xv.square();
                        let y = cs.alloc(|| "x²", || Ok(yv))?;
                        cs.enforce(|| "square", |lc| lc + x, |lc| lc + x, |lc| lc + y);
                        (x, xv) = (y, yv);
                    }
                    prev = Some((x, xv));
                    made += CHAIN;
                }
                Kind::Boolean => {
                    let xv = bit(&mut rng);
                    let x = cs.alloc(|| "bit", || Ok(xv))?;
                    cs.enforce(|| "boolean", |lc| lc + x, |lc| lc + one - x, |lc| lc);
                    prev = Some((x, xv));
                    made += 1;
                }
                Kind::Copy => {
                    let (p, pv) = prev.ok_or(SynthesisError::AssignmentMissing)?;
                    let x = cs.alloc(|| "copy", || Ok(pv))?;
                    cs.enforce(|| "copy", |lc| lc + p, |lc| lc + one, |lc| lc + x);
                    prev = Some((x, pv));
                    made += 1;
                }
                Kind::LinearSignificant | Kind::LinearBit => {
                    let xv = if kind == Kind::LinearBit { bit(&mut rng) } else { Scalar::random(&mut rng) };
                    let x = cs.alloc(|| "x", || Ok(xv))?;
                    linear(cs, x, one);
                    prev = Some((x, xv));
                    made += 1;
                }
            }
        }
        Ok(())
    }
}

/// Squares per chain.
const CHAIN: usize = 3;

fn linear<CS: ConstraintSystem<Scalar>>(cs: &mut CS, x: Variable, one: Variable) {
    cs.enforce(|| "linear", |lc| lc + x, |lc| lc + one, |lc: LinearCombination<Scalar>| lc + x);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthesis::synthesize;

    #[test]
    fn shape_follows_the_model() {
        let shape = SyntheticShape::for_domain(16);
        assert_eq!(shape.domain_size(), 1 << 16);
        let s = synthesize(shape.circuit(1)).unwrap();
        assert_eq!(s.num_constraints(), 1 << 16);
        assert_eq!(s.num_inputs(), 328);
        let n = s.num_aux() as f64;
        let a = s.a_aux_density.count() as f64 / n;
        let b = s.b_aux_density.count() as f64 / n;
        let (z, o, sig) = s.aux_classes.counts();
        let sig_share = sig as f64 / n;
        assert!((a - 0.997).abs() < 0.002, "A density {a}");
        assert!((b - 0.254).abs() < 0.01, "B density {b}");
        assert!((sig_share - C2_SIGNIFICANT).abs() < 0.002, "significant {sig_share}");
        assert!((z as f64 / o as f64 - 1.0).abs() < 0.1, "zeros {z} ones {o}");
        let share_in = |d: &crate::Density| {
            let (_, _, sig) = s.aux_classes.counts_within(d);
            sig as f64 / d.count() as f64
        };
        let (sig_in_a, sig_in_b) = (share_in(&s.a_aux_density), share_in(&s.b_aux_density));
        assert!((sig_in_b - C2_SIGNIFICANT_IN_B).abs() < 0.004, "significant in B {sig_in_b}");
        // The real partition's A share, 0.993 %, follows from the others.
        assert!((sig_in_a - 0.00993).abs() < 0.002, "significant in A {sig_in_a}");
        assert_eq!(s.b_input_density.count(), 1, "only the constant one is in B");
    }

    #[test]
    fn structure_is_witness_independent() {
        let shape = SyntheticShape::for_domain(12);
        let s1 = synthesize(shape.circuit(1)).unwrap();
        let s2 = synthesize(shape.circuit(2)).unwrap();
        assert_eq!(s1.a_aux_density, s2.a_aux_density);
        assert_eq!(s1.b_aux_density, s2.b_aux_density);
        let sig = |s: &crate::SynthesizedCircuit| crate::Density::from_fn(s.num_aux(), |i| !s.aux_classes.zero.get(i) && !s.aux_classes.one.get(i));
        assert_eq!(sig(&s1), sig(&s2));
        assert_ne!(s1.aux, s2.aux);
    }
}
