//! A circuit's shape: its inputs, aux variables and constraints, and which variables its
//! A and B queries hold — everything a parameter set must fit — counted without
//! computing a single value.
//!
//! The count runs the circuit into a constraint system that never calls a value
//! closure and keeps no linear combination: memory is two bits per variable, so a
//! 130 M-constraint Filecoin partition is counted in tens of megabytes. The rules are
//! the prover's and the generator's (a variable is in a query when some constraint
//! gives it a non-zero coefficient there; one input constraint per public input), so a
//! count of a blank circuit is the shape of its parameter file.

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::params::QueryLens;
use crate::synthesis::{Density, SynthesizedCircuit};

/// Bytes of one uncompressed point in a `.params` file.
const G1_FILE_BYTES: u64 = 96;
const G2_FILE_BYTES: u64 = 192;

/// The counts that fix a circuit's parameter set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CircuitShape {
    /// Public inputs, the constant one included.
    pub inputs: usize,
    pub aux: usize,
    /// The circuit's constraints plus one input constraint per public input (the
    /// count the prover's evaluation vectors have, and the published figures use).
    pub constraints: usize,
    /// Aux variables in the A query (every input is in A).
    pub a_aux: usize,
    /// Inputs and aux variables in the B query.
    pub b_inputs: usize,
    pub b_aux: usize,
}

impl CircuitShape {
    /// The shape of a synthesized circuit.
    pub fn of(c: &SynthesizedCircuit) -> Self {
        CircuitShape {
            inputs: c.num_inputs(),
            aux: c.num_aux(),
            constraints: c.num_constraints(),
            a_aux: c.a_aux_density.count(),
            b_inputs: c.b_input_density.count(),
            b_aux: c.b_aux_density.count(),
        }
    }

    /// The evaluation domain: the smallest power of two holding every constraint.
    pub fn domain_size(&self) -> usize {
        self.constraints.next_power_of_two()
    }

    /// The query lengths of its parameter set.
    pub fn query_lens(&self) -> QueryLens {
        let b = self.b_inputs + self.b_aux;
        QueryLens { h: self.domain_size() - 1, l: self.aux, a: self.inputs + self.a_aux, b_g1: b, b_g2: b }
    }

    /// The size of its `.params` file: the verifying key (three G1 and three G2 points,
    /// the IC count and one IC point per input), then five counted sections.
    pub fn params_file_bytes(&self) -> u64 {
        let q = self.query_lens();
        let vk = 3 * G1_FILE_BYTES + 3 * G2_FILE_BYTES + 4 + self.inputs as u64 * G1_FILE_BYTES;
        let g1 = (q.h + q.l + q.a + q.b_g1) as u64 * G1_FILE_BYTES;
        vk + 5 * 4 + g1 + q.b_g2 as u64 * G2_FILE_BYTES
    }
}

/// Counts `circuit`'s shape. Value closures are never called, so a blank circuit (no
/// witness) counts as well as a real one.
pub fn count_shape<C: Circuit<Scalar>>(circuit: C) -> Result<CircuitShape, SynthesisError> {
    let mut cs = ShapeCounter::default();
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    Ok(CircuitShape {
        inputs: cs.inputs,
        aux: cs.a_aux.len(),
        constraints: cs.constraints + cs.inputs,
        a_aux: cs.a_aux.count(),
        // The input constraints x_i · 0 = 0 add nothing to B.
        b_inputs: cs.b_inputs.count(),
        b_aux: cs.b_aux.count(),
    })
}

/// The constraint system behind [`count_shape`].
#[derive(Default)]
struct ShapeCounter {
    inputs: usize,
    constraints: usize,
    a_aux: Density,
    b_inputs: Density,
    b_aux: Density,
}

/// Calls `mark` for every variable `lc` gives a non-zero coefficient.
fn mark_terms(lc: &LinearCombination<Scalar>, mut mark: impl FnMut(Index)) {
    for (&i, coeff) in lc.iter_inputs() {
        if !coeff.is_zero_vartime() {
            mark(Index::Input(i));
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if !coeff.is_zero_vartime() {
            mark(Index::Aux(i));
        }
    }
}

impl ConstraintSystem<Scalar> for ShapeCounter {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.a_aux.push(false);
        self.b_aux.push(false);
        Ok(Variable::new_unchecked(Index::Aux(self.a_aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        self.b_inputs.push(false);
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a_aux = &mut self.a_aux;
        mark_terms(&a(LinearCombination::zero()), |i| {
            if let Index::Aux(i) = i {
                a_aux.set(i)
            }
        });
        let (b_in, b_aux) = (&mut self.b_inputs, &mut self.b_aux);
        mark_terms(&b(LinearCombination::zero()), |i| match i {
            Index::Input(i) => b_in.set(i),
            Index::Aux(i) => b_aux.set(i),
        });
        // C's terms put no variable in a query; its closure runs all the same.
        drop(c(LinearCombination::zero()));
        self.constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::SyntheticShape;

    #[test]
    fn a_count_is_the_shape_of_the_synthesized_circuit() {
        for log in [4, 9] {
            let shape = SyntheticShape::for_domain(log);
            let counted = count_shape(shape.circuit(7)).unwrap();
            let full = crate::synthesize(shape.circuit(7)).unwrap();
            assert_eq!(counted, CircuitShape::of(&full), "2^{log}");
            assert_eq!(counted.domain_size(), full.domain_size());
        }
    }

    #[test]
    fn a_count_matches_the_parameter_file() {
        let shape = SyntheticShape::for_domain(6);
        let full = crate::synthesize(shape.circuit(1)).unwrap();
        let params = crate::generator::timing_parameters(&full, &mut rand::rngs::OsRng, &crate::progress::NoProgress);
        let counted = count_shape(shape.circuit(1)).unwrap();
        assert_eq!(counted.query_lens(), params.lens());
        let mut bytes = Vec::new();
        crate::format::write_params(&mut bytes, &params).unwrap();
        assert_eq!(counted.params_file_bytes(), bytes.len() as u64);
    }

    /// Value closures are never called: a circuit whose values are all missing (a
    /// blank circuit) counts the same.
    #[test]
    fn blank_circuits_count() {
        struct Blank;
        impl Circuit<Scalar> for Blank {
            fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
                let x = cs.alloc(|| "x", || Err(SynthesisError::AssignmentMissing))?;
                let y = cs.alloc_input(|| "y", || Err(SynthesisError::AssignmentMissing))?;
                let z = cs.alloc(|| "z", || Err(SynthesisError::AssignmentMissing))?;
                cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x + (Scalar::ZERO, z), |lc| lc + y);
                cs.enforce(|| "y*1=z", |lc| lc + y, |lc| lc + CS::one(), |lc| lc + z);
                Ok(())
            }
        }
        let s = count_shape(Blank).unwrap();
        assert_eq!(s, CircuitShape { inputs: 2, aux: 2, constraints: 4, a_aux: 1, b_inputs: 1, b_aux: 1 });
        assert_eq!(s.query_lens(), QueryLens { h: 3, l: 2, a: 3, b_g1: 2, b_g2: 2 });
    }
}
