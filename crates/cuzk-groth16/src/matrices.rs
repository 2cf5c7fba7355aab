//! A circuit's constraint matrices A, B, C, compiled once per circuit shape.
//!
//! Every instance of a circuit shape (every partition of every 32 GiB PoRep, say) has
//! the same matrices; only the assignment z = (input, aux) changes. So the matrices are
//! recorded once, from one synthesis that computes no value, and a proof needs only
//! witness-only synthesis ([`crate::witness`]) and the products a = A·z, b = B·z,
//! c = C·z ([`ConstraintMatrices::products_into`], or a device's kernels).
//!
//! Layout: compressed sparse rows over the unified variable index (inputs first, then
//! aux: column `i` is input `i`, column `num_inputs + j` is aux `j`), with each
//! coefficient stored as an index into a dictionary of the circuit's distinct
//! coefficients (Filecoin circuits use a few hundred: ±1, powers of two and Poseidon's
//! constants), so a non-zero costs a 4-byte column and a 2-byte coefficient index.
//! Rows follow the prover's order: the circuit's constraints, then one input
//! constraint `x_i · 0 = 0` per public input.
//!
//! Invariant: for any instance, `SynthesizedCircuit::from_matrices` gives exactly what
//! `synthesis::synthesize` gives (assignments, a, b, c, densities, classes).

use std::collections::HashMap;

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::array::Array;
use crate::density::Density;
use crate::progress::{NoProgress, Progress};

/// Distinct coefficients a compiled circuit may have: indices are 16 bits.
pub const MAX_COEFFICIENTS: usize = 1 << 16;

/// Rows evaluated per parallel task: large enough that a task's bookkeeping is noise,
/// small enough that 2 cores and 16 stay balanced (a 32 GiB PoRep matrix has ~1.3·10^8
/// rows).
const ROWS_PER_TASK: usize = 1 << 14;

/// One matrix in compressed sparse rows: row `r`'s non-zeros are
/// `columns[row_starts[r]..row_starts[r + 1]]`, with coefficients
/// `dictionary[coefficients[k]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparseMatrix {
    pub row_starts: Array<u64>,
    pub columns: Array<u32>,
    pub coefficients: Array<u16>,
}

impl SparseMatrix {
    fn new() -> Self {
        SparseMatrix { row_starts: Array::Owned(vec![0]), columns: Array::Owned(Vec::new()), coefficients: Array::Owned(Vec::new()) }
    }

    pub fn rows(&self) -> usize {
        self.row_starts.len() - 1
    }

    pub fn non_zeros(&self) -> usize {
        self.columns.len()
    }

    /// Bytes its three arrays take.
    pub fn bytes(&self) -> usize {
        self.row_starts.len() * 8 + self.columns.len() * 4 + self.coefficients.len() * 2
    }

    /// `self · z` into `out` (one value per row), in parallel.
    fn multiply(&self, dictionary: &[Scalar], input: &[Scalar], aux: &[Scalar], out: &mut [Scalar]) {
        let n_in = input.len();
        out.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(task, chunk)| {
            let first = task * ROWS_PER_TASK;
            for (r, value) in chunk.iter_mut().enumerate() {
                let (from, to) = (self.row_starts[first + r] as usize, self.row_starts[first + r + 1] as usize);
                let mut acc = Scalar::ZERO;
                for (&col, &coeff) in self.columns[from..to].iter().zip(&self.coefficients[from..to]) {
                    let col = col as usize;
                    let z = if col < n_in { &input[col] } else { &aux[col - n_in] };
                    acc += term(coeff, &dictionary[coeff as usize], z);
                }
                *value = acc;
            }
        });
    }
}

/// `coefficient · value`, skipping the multiplication where it is not needed (Filecoin
/// witnesses are ~98 % zeros and ones, and most coefficients are one).
#[inline]
fn term(id: u16, coefficient: &Scalar, value: &Scalar) -> Scalar {
    if id == ONE_ID {
        *value
    } else if value.is_zero_vartime() {
        Scalar::ZERO
    } else {
        *coefficient * value
    }
}

/// Dictionary indices fixed for the commonest coefficients.
const ONE_ID: u16 = 0;
const MINUS_ONE_ID: u16 = 1;

/// A circuit shape's matrices, with the densities and counts they fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintMatrices {
    /// Public inputs, the constant one included.
    pub num_inputs: usize,
    pub num_aux: usize,
    pub a: SparseMatrix,
    pub b: SparseMatrix,
    pub c: SparseMatrix,
    /// The distinct non-zero coefficients; `dictionary[0]` is one, `dictionary[1]` minus one.
    pub dictionary: Vec<Scalar>,
    /// Aux variables in the A query (every input is in A, through the input constraints).
    pub a_aux_density: Density,
    /// Inputs and aux variables in the B query.
    pub b_input_density: Density,
    pub b_aux_density: Density,
    /// The most aux values of a partition's witness expected to be significant (neither
    /// 0 nor 1), where the circuit's kind knows (`crate::booleans` bounds it from the
    /// matrices): a device plan sizes its witness area from it. Not in the matrices
    /// file; None until the kind sets it.
    pub significant_aux: Option<usize>,
}

/// Compiling failed: the circuit's own error, or more distinct coefficients than
/// 16-bit indices can name, or more variables than 32-bit columns can.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("synthesis: {0}")]
    Synthesis(#[from] SynthesisError),
    #[error("the circuit has more than {MAX_COEFFICIENTS} distinct coefficients")]
    TooManyCoefficients,
    #[error("the circuit has {0} variables; compiled matrices index at most 2^32")]
    TooManyVariables(usize),
}

impl ConstraintMatrices {
    /// Constraints including the input constraints (rows of each matrix).
    pub fn num_constraints(&self) -> usize {
        self.a.rows()
    }

    /// Non-zeros of A, B and C together.
    pub fn non_zeros(&self) -> usize {
        self.a.non_zeros() + self.b.non_zeros() + self.c.non_zeros()
    }

    /// Bytes of the matrices, the dictionary and the densities in memory.
    pub fn bytes(&self) -> usize {
        let densities = [&self.a_aux_density, &self.b_input_density, &self.b_aux_density].iter().map(|d| d.words().len() * 8).sum::<usize>();
        self.a.bytes() + self.b.bytes() + self.c.bytes() + self.dictionary.len() * 32 + densities
    }

    /// Whether an assignment of `inputs` inputs and `aux` aux values is an instance of
    /// this shape (else it is another circuit's, logged).
    pub fn fits(&self, inputs: usize, aux: usize) -> bool {
        let fits = inputs == self.num_inputs && aux == self.num_aux;
        if !fits {
            tracing::error!(
                inputs,
                aux,
                expected_inputs = self.num_inputs,
                expected_aux = self.num_aux,
                "the witness does not fit the compiled matrices (another circuit shape)"
            );
        }
        fits
    }

    /// a = A·z, b = B·z, c = C·z of z = (`input`, `aux`) on the host, in parallel, into
    /// the first `num_constraints` values of each output (callers check [`Self::fits`]
    /// and the outputs' lengths).
    pub fn products_into(&self, input: &[Scalar], aux: &[Scalar], [a, b, c]: [&mut [Scalar]; 3]) {
        let n = self.num_constraints();
        self.a.multiply(&self.dictionary, input, aux, &mut a[..n]);
        self.b.multiply(&self.dictionary, input, aux, &mut b[..n]);
        self.c.multiply(&self.dictionary, input, aux, &mut c[..n]);
    }
}

/// Records `circuit`'s matrices from one synthesis that computes no value.
pub fn compile_matrices<C: Circuit<Scalar>>(circuit: C) -> Result<ConstraintMatrices, CompileError> {
    compile_matrices_with(circuit, 0, &NoProgress)
}

/// Constraints recorded between two progress reports.
const PROGRESS_EVERY: usize = 1 << 20;

/// [`compile_matrices`], reporting the constraints recorded to `progress` (a stage of
/// `expected` constraints, 0 when unknown).
pub fn compile_matrices_with<C: Circuit<Scalar>>(circuit: C, expected: usize, progress: &dyn Progress) -> Result<ConstraintMatrices, CompileError> {
    progress.stage("recording constraints", expected as u64);
    let mut cs = MatrixAssembly::new(progress);
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.num_inputs {
        cs.enforce(|| "", |lc| lc + Variable::new_unchecked(Index::Input(i)), |lc| lc, |lc| lc);
    }
    if cs.too_many_coefficients {
        return Err(CompileError::TooManyCoefficients);
    }
    let variables = cs.num_inputs + cs.num_aux;
    if u32::try_from(variables).is_err() {
        return Err(CompileError::TooManyVariables(variables));
    }
    // Columns were recorded with aux tagged; now that the input count is final, place
    // the aux after the inputs.
    let n_in = cs.num_inputs as u32;
    for m in [&mut cs.a, &mut cs.b, &mut cs.c] {
        m.columns.owned_mut().par_iter_mut().for_each(|col| *col = untag(*col, n_in));
    }
    let (n_in, n_aux) = (cs.num_inputs, cs.num_aux);
    let density = |m: &SparseMatrix, from: usize, len: usize| {
        let mut d = Density::empty(len);
        for &col in m.columns.iter() {
            let col = col as usize;
            if (from..from + len).contains(&col) {
                d.set(col - from);
            }
        }
        d
    };
    Ok(ConstraintMatrices {
        a_aux_density: density(&cs.a, n_in, n_aux),
        b_input_density: density(&cs.b, 0, n_in),
        b_aux_density: density(&cs.b, n_in, n_aux),
        num_inputs: n_in,
        num_aux: n_aux,
        a: cs.a,
        b: cs.b,
        c: cs.c,
        dictionary: cs.dictionary,
        significant_aux: None,
    })
}

/// While recording, aux `j` is column `AUX_TAG | j` (the input count is not final
/// until the circuit ends); [`untag`] moves it to `num_inputs + j`.
const AUX_TAG: u32 = 1 << 31;

fn untag(col: u32, num_inputs: u32) -> u32 {
    if col & AUX_TAG != 0 {
        (col & !AUX_TAG) + num_inputs
    } else {
        col
    }
}

/// The constraint system that records the matrices.
struct MatrixAssembly<'a> {
    progress: &'a dyn Progress,
    num_inputs: usize,
    num_aux: usize,
    a: SparseMatrix,
    b: SparseMatrix,
    c: SparseMatrix,
    dictionary: Vec<Scalar>,
    index: HashMap<[u8; 32], u16>,
    too_many_coefficients: bool,
}

impl<'a> MatrixAssembly<'a> {
    fn new(progress: &'a dyn Progress) -> Self {
        MatrixAssembly {
            progress,
            num_inputs: 0,
            num_aux: 0,
            a: SparseMatrix::new(),
            b: SparseMatrix::new(),
            c: SparseMatrix::new(),
            // Fixed ids for the commonest coefficients (ONE_ID, MINUS_ONE_ID).
            dictionary: vec![Scalar::ONE, -Scalar::ONE],
            index: HashMap::new(),
            too_many_coefficients: false,
        }
    }

    fn coefficient_id(&mut self, coefficient: &Scalar) -> u16 {
        if *coefficient == Scalar::ONE {
            return ONE_ID;
        }
        if *coefficient == -Scalar::ONE {
            return MINUS_ONE_ID;
        }
        let key = coefficient.to_repr();
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let Ok(id) = u16::try_from(self.dictionary.len()) else {
            self.too_many_coefficients = true;
            return ONE_ID;
        };
        self.dictionary.push(*coefficient);
        self.index.insert(key, id);
        id
    }

    /// Appends `lc` as the next row of matrix `which` (0: A, 1: B, 2: C); terms with a
    /// zero coefficient are left out, as full synthesis leaves them out of the queries.
    fn push_row(&mut self, which: usize, lc: &LinearCombination<Scalar>) {
        let mut row: Vec<(u32, u16)> = Vec::new();
        for (&i, coeff) in lc.iter_inputs() {
            if !coeff.is_zero_vartime() {
                row.push((i as u32, self.coefficient_id(coeff)));
            }
        }
        for (&j, coeff) in lc.iter_aux() {
            if !coeff.is_zero_vartime() {
                // j < 2^31: the variable count is checked against u32 at the end, and
                // a circuit that large would have exhausted memory here long before.
                row.push((AUX_TAG | j as u32, self.coefficient_id(coeff)));
            }
        }
        let m = match which {
            0 => &mut self.a,
            1 => &mut self.b,
            _ => &mut self.c,
        };
        let (columns, coefficients, row_starts) = (m.columns.owned_mut(), m.coefficients.owned_mut(), m.row_starts.owned_mut());
        for (col, coeff) in row {
            columns.push(col);
            coefficients.push(coeff);
        }
        row_starts.push(columns.len() as u64);
    }
}

impl Default for SparseMatrix {
    fn default() -> Self {
        Self::new()
    }
}

impl ConstraintSystem<Scalar> for MatrixAssembly<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.num_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.num_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.num_inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.num_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.push_row(0, &a(LinearCombination::zero()));
        self.push_row(1, &b(LinearCombination::zero()));
        self.push_row(2, &c(LinearCombination::zero()));
        if self.c.rows() % PROGRESS_EVERY == 0 {
            self.progress.advance(PROGRESS_EVERY as u64);
        }
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

    /// A sub-system for a part of the circuit, recorded on another thread (WindowPoSt
    /// synthesizes its sectors so): no progress of its own, [`Self::extend`] reports it.
    fn new() -> Self {
        static QUIET: NoProgress = NoProgress;
        MatrixAssembly::new(&QUIET)
    }

    fn is_extensible() -> bool {
        true
    }

    /// Appends a sub-system's rows after this one's, as if recorded here in order: its
    /// input 0 (the one it allocated for itself) is this one's, its other inputs and
    /// its aux follow this one's, its coefficients go into this dictionary. A sequential
    /// recording numbers variables and rows the same way, so the matrices do not
    /// depend on how the circuit was split.
    fn extend(&mut self, other: &Self) {
        let (inputs, aux) = (self.num_inputs as u32, self.num_aux as u32);
        let ids: Vec<u16> = other.dictionary.iter().map(|c| self.coefficient_id(c)).collect();
        let column = |col: u32| match col {
            0 => 0,
            col if col & AUX_TAG != 0 => AUX_TAG | ((col & !AUX_TAG) + aux),
            col => col - 1 + inputs,
        };
        for (mine, theirs) in [(&mut self.a, &other.a), (&mut self.b, &other.b), (&mut self.c, &other.c)] {
            let base = mine.columns.len() as u64;
            mine.columns.owned_mut().extend(theirs.columns.iter().map(|&c| column(c)));
            // An id past the dictionary cannot occur: the sub-system gave out only its own.
            mine.coefficients.owned_mut().extend(theirs.coefficients.iter().map(|&id| ids.get(id as usize).copied().unwrap_or(ONE_ID)));
            mine.row_starts.owned_mut().extend(theirs.row_starts.iter().skip(1).map(|&r| base + r));
        }
        self.num_inputs += other.num_inputs.saturating_sub(1);
        self.num_aux += other.num_aux;
        self.too_many_coefficients |= other.too_many_coefficients;
        self.progress.advance(other.c.rows() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthesis::{synthesize, EvalBuffers, SynthesizedCircuit};
    use crate::synthetic::SyntheticShape;
    use crate::witness::synthesize_witness;

    fn buffers() -> EvalBuffers {
        EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) }
    }

    fn assert_same(compiled: &SynthesizedCircuit, full: &SynthesizedCircuit, what: &str) {
        assert_eq!(compiled.num_constraints(), full.num_constraints(), "{what}: constraints");
        assert_eq!((&compiled.input, &compiled.aux), (&full.input, &full.aux), "{what}: assignment");
        assert!(compiled.a.as_slice() == full.a.as_slice(), "{what}: a");
        assert!(compiled.b.as_slice() == full.b.as_slice(), "{what}: b");
        assert!(compiled.c.as_slice() == full.c.as_slice(), "{what}: c");
        assert_eq!(compiled.a_aux_density, full.a_aux_density, "{what}: A density");
        assert_eq!((&compiled.b_input_density, &compiled.b_aux_density), (&full.b_input_density, &full.b_aux_density), "{what}: B density");
        assert_eq!(compiled.aux_classes.counts(), full.aux_classes.counts(), "{what}: classes");
    }

    /// The circuit's compiled matrices, after checking that they give full synthesis's
    /// a, b, c from its witness-only assignment.
    fn compiled_as_full<C: Circuit<Scalar>>(circuit: impl Fn() -> C, what: &str) -> ConstraintMatrices {
        let matrices = compile_matrices(circuit()).unwrap();
        let full = synthesize(circuit()).unwrap();
        assert_same(&SynthesizedCircuit::from_matrices(&matrices, synthesize_witness(circuit(), 0).unwrap(), buffers()).unwrap(), &full, what);
        matrices
    }

    #[test]
    fn compiled_products_equal_full_synthesis_on_synthetic_circuits() {
        for log_n in [6, 10, 13] {
            let shape = SyntheticShape::for_domain(log_n);
            let matrices = compile_matrices(shape.circuit(0)).unwrap();
            // One compilation serves every instance of the shape.
            for seed in [1, 2] {
                let full = synthesize(shape.circuit(seed)).unwrap();
                let compiled = SynthesizedCircuit::from_matrices(&matrices, synthesize_witness(shape.circuit(seed), 0).unwrap(), buffers()).unwrap();
                assert_same(&compiled, &full, &format!("2^{log_n} seed {seed}"));
            }
            assert!(matrices.dictionary.len() >= 2 && matrices.non_zeros() >= matrices.num_constraints());
        }
    }

    /// Coefficients of every kind: zero (left out), duplicates merged by the linear
    /// combination, inputs in B, and more distinct values than the fixed ±1.
    struct Mixed;
    impl Circuit<Scalar> for Mixed {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
            let y = cs.alloc_input(|| "y", || Ok(Scalar::from(9u64)))?;
            let z = cs.alloc(|| "z", || Ok(Scalar::ZERO))?;
            let w = cs.alloc(|| "w", || Ok(Scalar::from(7u64)))?;
            cs.enforce(|| "sq", |lc| lc + x, |lc| lc + x + (Scalar::ZERO, z), |lc| lc + y);
            let two = Scalar::from(2u64);
            cs.enforce(
                || "lin",
                |lc| lc + (two, x) + (two, x) - w,
                |lc| lc + CS::one() + y,
                |lc| lc + (Scalar::from(50u64), CS::one()) + (-two, w) + (two, w),
            );
            cs.enforce(|| "zero", |lc| lc + z, |lc| lc + (-Scalar::ONE, w), |lc| lc);
            Ok(())
        }
    }

    #[test]
    fn compiled_products_equal_full_synthesis_on_mixed_coefficients() {
        let matrices = compiled_as_full(|| Mixed, "mixed");
        assert_eq!(matrices.num_constraints(), 3 + 2);
        // ±1 fixed, then 2 and 50 (4 = 2 + 2 merged into one term; -2 + 2 cancels).
        assert_eq!(&matrices.dictionary[..2], &[Scalar::ONE, -Scalar::ONE]);
        assert!(matrices.dictionary.contains(&Scalar::from(4u64)) && matrices.dictionary.contains(&Scalar::from(50u64)));
        assert!(!matrices.dictionary.contains(&-Scalar::from(2u64)), "a cancelled term leaves no coefficient");
    }

    /// A prelude, then parts made of [`Mixed`] and a coefficient of their own; an
    /// extensible system gets each part recorded on a sub-system and appended, as
    /// WindowPoSt does with its sectors.
    struct Parts;
    impl Parts {
        fn part<CS: ConstraintSystem<Scalar>>(cs: &mut CS, k: u64) -> Result<(), SynthesisError> {
            Mixed.synthesize(cs)?;
            let v = cs.alloc(|| "v", || Ok(Scalar::from(k)))?;
            let i = cs.alloc_input(|| "i", || Ok(Scalar::from(k * k)))?;
            cs.enforce(
                || "own",
                |lc| lc + (Scalar::from(100 + k), v),
                |lc| lc + v + CS::one(),
                |lc| lc + (Scalar::from(100 + k), i) + (Scalar::from((100 + k) * k), CS::one()),
            );
            Ok(())
        }
    }
    impl Circuit<Scalar> for Parts {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            Self::part(cs, 1)?;
            if !CS::is_extensible() {
                return (2..5).try_for_each(|k| Self::part(cs, k));
            }
            for k in 2..5 {
                let mut sub = CS::new();
                sub.alloc_input(|| "sub one", || Ok(Scalar::ONE))?;
                Self::part(&mut sub, k)?;
                cs.extend(&sub);
            }
            Ok(())
        }
    }

    #[test]
    fn matrices_recorded_in_parts_equal_the_sequential_ones() {
        let matrices = compiled_as_full(|| Parts, "parts");
        assert_eq!((matrices.num_inputs, matrices.num_aux, matrices.num_constraints()), (1 + 4 * 2, 4 * 4, 4 * 4 + 9));
        for k in 1..5 {
            assert!(matrices.dictionary.contains(&Scalar::from(100 + k)), "part {k}'s coefficient");
        }
    }

    #[test]
    fn a_witness_of_another_shape_is_refused() {
        let matrices = compile_matrices(SyntheticShape::for_domain(6).circuit(0)).unwrap();
        let other = synthesize_witness(SyntheticShape::for_domain(7).circuit(0), 0).unwrap();
        assert!(SynthesizedCircuit::from_matrices(&matrices, other, buffers()).is_err());
    }
}
