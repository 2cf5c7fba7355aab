//! Aux variables a circuit's constraints hold to 0 or 1, read from its compiled
//! matrices: in any satisfying witness they are bits, so at most the others can be
//! "significant" (neither 0 nor 1: `density::ScalarClasses`). A device plan sizes its
//! witness area from that bound before any partition is synthesized (a 32 GiB
//! WindowPoSt partition's witness is 99 % significant values, a PoRep one's 1.3 %).
//!
//! Two forms of booleanity are recognized, the ones bellpepper's gadgets write:
//! - `(1 − x) · x = 0` (or `(x − 1) · x = 0`, the factors in either order), C empty;
//! - `x · x = x`.
//!
//! A bit the circuit constrains another way is counted as possibly significant: the
//! bound errs on the side of more room.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::matrices::{ConstraintMatrices, SparseMatrix};

/// Dictionary indices of one and minus one (`ConstraintMatrices::dictionary`).
const ONE: u16 = 0;
const MINUS_ONE: u16 = 1;

/// A row's terms: (column, coefficient index).
fn row(m: &SparseMatrix, r: usize) -> impl ExactSizeIterator<Item = (u32, u16)> + '_ {
    let (from, to) = (m.row_starts[r] as usize, m.row_starts[r + 1] as usize);
    m.columns[from..to].iter().copied().zip(m.coefficients[from..to].iter().copied())
}

fn row_len(m: &SparseMatrix, r: usize) -> usize {
    (m.row_starts[r + 1] - m.row_starts[r]) as usize
}

/// The column of `x` where the row is exactly `1·x`.
fn single(m: &SparseMatrix, r: usize) -> Option<u32> {
    let mut t = row(m, r);
    match (t.next(), t.next()) {
        (Some((x, ONE)), None) => Some(x),
        _ => None,
    }
}

/// Whether the row is `1 − x` or `x − 1` (column 0 is the constant one).
fn one_minus(m: &SparseMatrix, r: usize, x: u32) -> bool {
    let mut t = row(m, r);
    let (Some(p), Some(q), None) = (t.next(), t.next(), t.next()) else {
        return false;
    };
    let (one, var) = if p.0 == 0 { (p, q) } else { (q, p) };
    one.0 == 0 && var.0 == x && matches!((one.1, var.1), (ONE, MINUS_ONE) | (MINUS_ONE, ONE))
}

/// The aux column (from the inputs' count on) that row `r` holds to 0 or 1, if any.
fn boolean_column(m: &ConstraintMatrices, r: usize) -> Option<u32> {
    let (a, b, c) = (&m.a, &m.b, &m.c);
    let x = match (row_len(a, r), row_len(b, r), row_len(c, r)) {
        (1, 1, 1) => single(a, r).filter(|&x| single(b, r) == Some(x) && single(c, r) == Some(x))?,
        (1, 2, 0) => single(a, r).filter(|&x| one_minus(b, r, x))?,
        (2, 1, 0) => single(b, r).filter(|&x| one_minus(a, r, x))?,
        _ => return None,
    };
    (x as usize >= m.num_inputs).then_some(x)
}

/// Rows checked per parallel task.
const ROWS_PER_TASK: usize = 1 << 16;

impl ConstraintMatrices {
    /// How many aux variables some constraint holds to 0 or 1 (each counted once).
    pub fn boolean_aux(&self) -> usize {
        let words: Vec<AtomicU64> = (0..self.num_aux.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        let rows = self.num_constraints();
        (0..rows.div_ceil(ROWS_PER_TASK)).into_par_iter().for_each(|task| {
            for r in task * ROWS_PER_TASK..((task + 1) * ROWS_PER_TASK).min(rows) {
                if let Some(x) = boolean_column(self, r) {
                    let j = x as usize - self.num_inputs;
                    words[j / 64].fetch_or(1 << (j % 64), Ordering::Relaxed);
                }
            }
        });
        words.iter().map(|w| w.load(Ordering::Relaxed).count_ones() as usize).sum()
    }

    /// At most this many aux values of any satisfying witness are neither 0 nor 1.
    pub fn significant_aux_bound(&self) -> usize {
        self.num_aux - self.boolean_aux()
    }
}

#[cfg(test)]
mod tests {
    use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
    use blstrs::Scalar;
    use ff::Field;

    use crate::density::ScalarClasses;
    use crate::matrices::compile_matrices;
    use crate::witness::synthesize_witness;

    /// Bits constrained each way bellpepper writes, a bit constrained twice, an
    /// unconstrained 0/1 value, look-alikes that constrain nothing to a bit, and a
    /// field element.
    struct Bits;
    impl Circuit<Scalar> for Bits {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let one = CS::one();
            let alloc = |cs: &mut CS, v: u64| cs.alloc(|| "v", || Ok(Scalar::from(v)));
            let b1 = alloc(cs, 1)?;
            cs.enforce(|| "(1 - b1) b1 = 0", |lc| lc + one - b1, |lc| lc + b1, |lc| lc);
            let b2 = alloc(cs, 0)?;
            cs.enforce(|| "b2 (b2 - 1) = 0", |lc| lc + b2, |lc| lc + b2 - one, |lc| lc);
            cs.enforce(|| "again", |lc| lc + b2, |lc| lc + b2 - one, |lc| lc);
            let b3 = alloc(cs, 1)?;
            cs.enforce(|| "b3 b3 = b3", |lc| lc + b3, |lc| lc + b3, |lc| lc + b3);
            // Zero, but held to nothing that makes it a bit.
            let z = alloc(cs, 0)?;
            cs.enforce(|| "(2 - z) z = 0: z is 0 or 2", |lc| lc + (Scalar::from(2u64), one) - z, |lc| lc + z, |lc| lc);
            let f = alloc(cs, 7)?;
            cs.enforce(|| "(1 - b1) f = 0: not f's booleanity", |lc| lc + one - b1, |lc| lc + f, |lc| lc);
            cs.enforce(|| "f f = 49", |lc| lc + f, |lc| lc + f, |lc| lc + (Scalar::from(49u64), one));
            let x = cs.alloc_input(|| "x", || Ok(Scalar::ONE))?;
            cs.enforce(|| "an input's booleanity: not an aux", |lc| lc + one - x, |lc| lc + x, |lc| lc);
            Ok(())
        }
    }

    #[test]
    fn booleanity_constraints_are_counted_once_and_nothing_else() {
        let m = compile_matrices(Bits).unwrap();
        assert_eq!(m.num_aux, 5);
        assert_eq!(m.boolean_aux(), 3);
        assert_eq!(m.significant_aux_bound(), 2);
        // The bound holds for the witness: its significant values are f's alone.
        let w = synthesize_witness(Bits, 0).unwrap();
        let classes = ScalarClasses::classify(&w.aux);
        assert!(classes.counts().2 <= m.significant_aux_bound());
    }
}
