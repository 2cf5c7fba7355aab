//! Circuit synthesis: running a `bellpepper_core::Circuit` into everything a prover needs.
//!
//! The result, a [`SynthesizedCircuit`], holds the input and aux assignments, the
//! evaluation vectors a = A·z, b = B·z, c = C·z (one entry per constraint, followed by
//! one entry per public input for the input constraints `x_i · 0 = 0` that every
//! Groth16 parameter set of the bellperson family includes), the densities of the A and
//! B queries, and the split of aux values into 0, 1 and "significant" scalars.
//!
//! A variable belongs to a query when it appears in that matrix with a non-zero
//! coefficient in at least one constraint; the parameter generator in
//! [`crate::generator`] applies the same rule, so query lengths always agree.

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::matrices::ConstraintMatrices;
use crate::witness::Witness;

pub use crate::density::{Density, ScalarClasses};

/// Memory that one evaluation vector (a, b or c) is written into.
///
/// The engine supplies buffers from its pinned pool so a GPU can upload them directly;
/// by default a `Vec` is used. The whole slice is the capacity; [`EvalVec`] tracks the
/// length.
///
/// Invariant: the memory behind `as_mut_slice` keeps its address and length until
/// `grow` is called or the storage is dropped ([`EvalVec`] writes through a pointer it
/// takes once, not through a call per value: synthesis pushes ~10^8 values per vector).
pub trait EvalStorage: Send + Sync {
    fn as_slice(&self) -> &[Scalar];
    fn as_mut_slice(&mut self) -> &mut [Scalar];
    /// Grows the capacity to at least `min`; storage of fixed size returns `false`.
    fn grow(&mut self, min: usize) -> bool;
}

impl EvalStorage for Vec<Scalar> {
    fn as_slice(&self) -> &[Scalar] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        self
    }
    fn grow(&mut self, min: usize) -> bool {
        let new_len = min.max(self.len() * 2).max(1024);
        self.resize(new_len, Scalar::ZERO);
        true
    }
}

/// An evaluation vector written into an [`EvalStorage`].
pub struct EvalVec {
    storage: Box<dyn EvalStorage>,
    /// `storage.as_mut_slice()`, taken at creation and after every `grow`.
    ptr: *mut Scalar,
    cap: usize,
    len: usize,
    /// Set when fixed-size storage ran out; the synthesis then fails with a clear error.
    overflowed: bool,
}

// SAFETY: `ptr` points into `storage`, which this EvalVec owns exclusively (a Box of
// a Send + Sync storage); every access through it follows EvalVec's own & / &mut
// borrows, as if the slice were a field.
unsafe impl Send for EvalVec {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for EvalVec {}

impl std::fmt::Debug for EvalVec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalVec").field("len", &self.len).finish()
    }
}

impl Default for EvalVec {
    fn default() -> Self {
        Self::new(Box::new(Vec::new()))
    }
}

impl EvalVec {
    pub fn new(mut storage: Box<dyn EvalStorage>) -> Self {
        let s = storage.as_mut_slice();
        let (ptr, cap) = (s.as_mut_ptr(), s.len());
        EvalVec { storage, ptr, cap, len: 0, overflowed: false }
    }

    pub fn with_capacity(n: usize) -> Self {
        Self::new(Box::new(vec![Scalar::ZERO; n]))
    }

    /// Grows the storage to at least `min`, refreshing the cached pointer.
    fn grow(&mut self, min: usize) -> bool {
        if !self.storage.grow(min) {
            return false;
        }
        let s = self.storage.as_mut_slice();
        (self.ptr, self.cap) = (s.as_mut_ptr(), s.len());
        self.cap >= min
    }

    #[inline]
    pub fn push(&mut self, v: Scalar) {
        if self.len == self.cap && !self.overflowed && !self.grow(self.len + 1) {
            self.overflowed = true;
        }
        if !self.overflowed {
            // SAFETY: len < cap (checked or grown above), and ptr/cap describe the
            // storage's current slice (EvalStorage invariant).
            unsafe { self.ptr.add(self.len).write(v) };
        }
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The first `len` values (all of the storage's, if it overflowed).
    pub fn as_slice(&self) -> &[Scalar] {
        // SAFETY: ptr/cap describe the owned storage's slice; min(len, cap) ≤ cap.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len.min(self.cap)) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [Scalar] {
        // SAFETY: as in `as_slice`, with exclusive access through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len.min(self.cap)) }
    }

    /// Zero-pads (or truncates) to `n` elements; fails if fixed storage is too small.
    pub fn resize(&mut self, n: usize) -> Result<(), SynthesisError> {
        if n > self.cap && !self.grow(n) {
            return Err(SynthesisError::Unsatisfiable);
        }
        let old = self.len.min(n);
        self.len = n;
        self.as_mut_slice()[old..].par_iter_mut().for_each(|x| *x = Scalar::ZERO);
        Ok(())
    }

    /// Replaces the contents with `src` (parallel copy, no zero-fill first); fails if
    /// fixed storage is too small.
    pub fn copy_from(&mut self, src: &[Scalar]) -> Result<(), SynthesisError> {
        const CHUNK: usize = 1 << 16;
        if src.len() > self.cap && !self.grow(src.len()) {
            return Err(SynthesisError::Unsatisfiable);
        }
        self.len = src.len();
        self.as_mut_slice().par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| d.copy_from_slice(s));
        Ok(())
    }

    pub fn into_storage(self) -> Box<dyn EvalStorage> {
        self.storage
    }
}

/// Storage for a, b and c, handed to [`synthesize_into`].
pub struct EvalBuffers {
    pub a: Box<dyn EvalStorage>,
    pub b: Box<dyn EvalStorage>,
    pub c: Box<dyn EvalStorage>,
}

/// Everything the prover needs from one circuit instance.
#[derive(Debug, Default)]
pub struct SynthesizedCircuit {
    /// Public inputs; `input[0]` is the constant one.
    pub input: Vec<Scalar>,
    /// Private (aux) assignment.
    pub aux: Vec<Scalar>,
    /// A·z, B·z, C·z per constraint, then one entry per input for the input constraints.
    pub a: EvalVec,
    pub b: EvalVec,
    pub c: EvalVec,
    /// Aux variables in the A query. (Every input is in A, through the input constraints.)
    pub a_aux_density: Density,
    /// Inputs and aux variables in the B query.
    pub b_input_density: Density,
    pub b_aux_density: Density,
    /// The 0 / 1 / significant split of `aux`.
    pub aux_classes: ScalarClasses,
    /// Constraints including the input constraints, fixed at synthesis (a/b/c may be
    /// padded or overwritten later).
    num_constraints: usize,
    /// Set once a backend has used a/b/c as scratch: proving again would be wrong.
    consumed: bool,
    /// Handed the aux vector when the witness is freed; its presence asks a backend to
    /// free the witness as soon as it has read it ([`SynthesizedCircuit::charge_witness`]).
    witness_charge: Option<Box<dyn WitnessCharge>>,
    /// Set when a, b, c were left to the backend ([`SynthesizedCircuit::with_pending_products`]):
    /// the compiled matrices whose products with the witness they are; a, b, c are
    /// then empty.
    products: Option<Arc<ConstraintMatrices>>,
}

/// What an owner ties to a circuit's witness (the engine: its memory-budget charge and
/// its pool of aux vectors): handed the aux vector when the witness is freed, so that
/// its memory can be used again; dropped then.
pub trait WitnessCharge: Send + Sync {
    /// The witness is freed; `aux` is its vector (values and all).
    fn witness_freed(self: Box<Self>, aux: Vec<Scalar>) {
        drop(aux);
    }
}

impl std::fmt::Debug for dyn WitnessCharge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WitnessCharge")
    }
}

impl SynthesizedCircuit {
    /// An instance from its witness, its evaluations `[a, b, c]` (one value per
    /// constraint, input constraints included) and its densities `[A aux, B input,
    /// B aux]`.
    fn from_parts(
        witness: Witness,
        [a, b, c]: [EvalVec; 3],
        [a_aux_density, b_input_density, b_aux_density]: [Density; 3],
        aux_classes: ScalarClasses,
    ) -> Self {
        SynthesizedCircuit {
            num_constraints: a.len(),
            consumed: false,
            witness_charge: None,
            products: None,
            input: witness.input,
            aux: witness.aux,
            a,
            b,
            c,
            a_aux_density,
            b_input_density,
            b_aux_density,
            aux_classes,
        }
    }

    fn densities(m: &ConstraintMatrices) -> [Density; 3] {
        [m.a_aux_density.clone(), m.b_input_density.clone(), m.b_aux_density.clone()]
    }

    /// The instance of `witness` with a = A·z, b = B·z, c = C·z computed on the host
    /// from the compiled matrices `m`, into `buffers`: what [`synthesize_into`] gives for
    /// the same circuit. A witness of another shape is refused.
    pub fn from_matrices(m: &ConstraintMatrices, witness: Witness, buffers: EvalBuffers) -> Result<Self, SynthesisError> {
        if !m.fits(witness.input.len(), witness.aux.len()) {
            return Err(SynthesisError::Unsatisfiable);
        }
        let abc = host_products(m, &witness, buffers)?;
        let aux_classes = ScalarClasses::classify(&witness.aux);
        Ok(Self::from_parts(witness, abc, Self::densities(m), aux_classes))
    }

    /// The instance of `witness` with a, b, c left to the backend, which computes them
    /// from the compiled matrices `m` where it proves (a GPU backend on its device, from
    /// the compact witness; the CPU backend on the host): no host memory for a, b, c.
    /// A witness of another shape is refused.
    pub fn with_pending_products(m: Arc<ConstraintMatrices>, witness: Witness) -> Result<Self, SynthesisError> {
        if !m.fits(witness.input.len(), witness.aux.len()) {
            return Err(SynthesisError::Unsatisfiable);
        }
        let aux_classes = ScalarClasses::classify(&witness.aux);
        let empty = || EvalVec::with_capacity(0);
        let mut c = Self::from_parts(witness, [empty(), empty(), empty()], Self::densities(&m), aux_classes);
        c.num_constraints = m.num_constraints();
        c.products = Some(m);
        Ok(c)
    }

    /// The compiled matrices whose products with the witness a, b, c are, when the
    /// backend is to compute them ([`SynthesizedCircuit::with_pending_products`]).
    pub fn pending_products(&self) -> Option<&Arc<ConstraintMatrices>> {
        self.products.as_ref()
    }

    /// Computes pending products on the host into `buffers` (the CPU backend's way, and
    /// a GPU backend's where the matrices do not fit its device): a, b, c then hold
    /// them as after a synthesis. Nothing to do when none are pending.
    pub fn compute_products(&mut self, buffers: EvalBuffers) -> Result<(), SynthesisError> {
        let Some(m) = self.products.take() else { return Ok(()) };
        let witness = Witness { input: std::mem::take(&mut self.input), aux: std::mem::take(&mut self.aux) };
        let abc = host_products(&m, &witness, buffers);
        (self.input, self.aux) = (witness.input, witness.aux);
        match abc {
            Ok([a, b, c]) => {
                (self.a, self.b, self.c) = (a, b, c);
                Ok(())
            }
            Err(e) => {
                self.products = Some(m);
                Err(e)
            }
        }
    }

    /// Constraints including the input constraints.
    pub fn num_constraints(&self) -> usize {
        self.num_constraints
    }

    /// Whether a backend has already used a/b/c as scratch space.
    pub fn is_consumed(&self) -> bool {
        self.consumed
    }

    /// Records that a/b/c no longer hold the evaluations (backends call this).
    pub fn mark_consumed(&mut self) {
        self.consumed = true;
    }

    /// Frees a, b, c and the aux assignment (their storage goes back to whoever lent
    /// it, e.g. a buffer pool) once a backend has read them; the inputs, densities and
    /// classes stay. The circuit is consumed: it cannot be proven again.
    pub fn release_witness(&mut self) {
        self.consumed = true;
        for v in [&mut self.a, &mut self.b, &mut self.c] {
            *v = EvalVec::with_capacity(0);
        }
        self.free_aux();
    }

    /// Frees the aux vector: to its charge's owner where there is one.
    fn free_aux(&mut self) {
        let aux = std::mem::take(&mut self.aux);
        match self.witness_charge.take() {
            Some(charge) => charge.witness_freed(aux),
            None => drop(aux),
        }
    }

    /// Ties `charge` to the witness: it is handed the aux vector when the witness is
    /// freed (released, or the circuit dropped), and a backend that has its own copy of
    /// a, b, c and the aux values (a GPU backend, once they are on the device) frees the
    /// witness at once instead of after the proof. The engine charges a partition's
    /// host memory this way, so the next partition can be admitted while this one is
    /// still proving, and takes the aux vector back for the next witness.
    pub fn charge_witness(&mut self, charge: impl WitnessCharge + 'static) {
        self.witness_charge = Some(Box::new(charge));
    }

    /// Whether an owner asked for the witness to be freed as soon as it has been read
    /// ([`SynthesizedCircuit::charge_witness`]).
    pub fn frees_witness_early(&self) -> bool {
        self.witness_charge.is_some()
    }

    /// Makes a consumed circuit provable again: for a backend that left a, b, c as
    /// they were (see `SynthesizedCircuit::reuse_evaluations` in crate::backend).
    pub(crate) fn unconsume(&mut self) {
        self.consumed = false;
    }

    /// The same instance with a, b, c copied into `buffers` (each large enough): a
    /// witness proven again without synthesizing it again (engine benchmarks with
    /// pre-made assignments). Copies run in parallel.
    pub fn copy_into(&self, buffers: EvalBuffers) -> Result<SynthesizedCircuit, SynthesisError> {
        if self.consumed {
            // a, b, c no longer hold the evaluations.
            return Err(SynthesisError::AssignmentMissing);
        }
        let copy = |src: &EvalVec, storage: Box<dyn EvalStorage>| -> Result<EvalVec, SynthesisError> {
            let mut v = EvalVec::new(storage);
            v.copy_from(src.as_slice())?;
            Ok(v)
        };
        Ok(SynthesizedCircuit {
            input: self.input.clone(),
            aux: self.aux.par_iter().copied().collect(),
            a: copy(&self.a, buffers.a)?,
            b: copy(&self.b, buffers.b)?,
            c: copy(&self.c, buffers.c)?,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
            aux_classes: self.aux_classes.clone(),
            num_constraints: self.num_constraints,
            consumed: false,
            witness_charge: None,
            products: self.products.clone(),
        })
    }

    pub fn num_inputs(&self) -> usize {
        self.input.len()
    }

    pub fn num_aux(&self) -> usize {
        self.aux.len()
    }

    /// The evaluation domain: the smallest power of two holding every constraint.
    pub fn domain_size(&self) -> usize {
        self.num_constraints().next_power_of_two()
    }
}

impl Drop for SynthesizedCircuit {
    // A charged witness's vector goes back to its owner however the circuit ends.
    fn drop(&mut self) {
        self.free_aux();
    }
}

/// a, b, c of `w` from the compiled matrices `m` into `buffers` (each made large
/// enough); the caller has checked that `w` fits `m`.
fn host_products(m: &ConstraintMatrices, w: &Witness, buffers: EvalBuffers) -> Result<[EvalVec; 3], SynthesisError> {
    let n = m.num_constraints();
    let mut abc = [EvalVec::new(buffers.a), EvalVec::new(buffers.b), EvalVec::new(buffers.c)];
    for v in &mut abc {
        v.resize(n)?;
    }
    let [a, b, c] = &mut abc;
    m.products_into(&w.input, &w.aux, [a.as_mut_slice(), b.as_mut_slice(), c.as_mut_slice()]);
    Ok(abc)
}

/// The constraint system that records assignments and evaluations during synthesis.
struct ProvingAssembly {
    input: Vec<Scalar>,
    aux: Vec<Scalar>,
    a: EvalVec,
    b: EvalVec,
    c: EvalVec,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
}

/// Evaluates `lc` at the assignment and calls `mark` for every variable it uses with a
/// non-zero coefficient.
#[inline]
fn eval_lc(lc: &LinearCombination<Scalar>, input: &[Scalar], aux: &[Scalar], mut mark: impl FnMut(Index)) -> Scalar {
    let mut acc = Scalar::ZERO;
    for (&i, coeff) in lc.iter_inputs() {
        if coeff.is_zero_vartime() {
            continue;
        }
        mark(Index::Input(i));
        acc += term(coeff, &input[i]);
    }
    for (&i, coeff) in lc.iter_aux() {
        if coeff.is_zero_vartime() {
            continue;
        }
        mark(Index::Aux(i));
        acc += term(coeff, &aux[i]);
    }
    acc
}

#[inline]
fn term(coeff: &Scalar, value: &Scalar) -> Scalar {
    if *coeff == Scalar::ONE {
        *value
    } else if value.is_zero_vartime() {
        Scalar::ZERO
    } else {
        *coeff * value
    }
}

impl ConstraintSystem<Scalar> for ProvingAssembly {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.a_aux_density.push(false);
        self.b_aux_density.push(false);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        self.b_input_density.push(false);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        let (input, aux) = (&self.input, &self.aux);

        let a_density = &mut self.a_aux_density;
        let va = eval_lc(&a, input, aux, |i| {
            if let Index::Aux(i) = i {
                a_density.set(i)
            }
        });
        let (b_in, b_aux) = (&mut self.b_input_density, &mut self.b_aux_density);
        let vb = eval_lc(&b, input, aux, |i| match i {
            Index::Input(i) => b_in.set(i),
            Index::Aux(i) => b_aux.set(i),
        });
        let vc = eval_lc(&c, input, aux, |_| {});
        self.a.push(va);
        self.b.push(vb);
        self.c.push(vc);
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

/// Synthesizes `circuit` into freshly allocated vectors.
pub fn synthesize<C: Circuit<Scalar>>(circuit: C) -> Result<SynthesizedCircuit, SynthesisError> {
    synthesize_into(circuit, EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) })
}

/// Synthesizes `circuit`, writing a/b/c into the given storage (e.g. pinned buffers).
///
/// Returns the circuit's own synthesis errors, and `SynthesisError::Unsatisfiable` if
/// fixed-size storage is too small (the log names the size that was needed).
pub fn synthesize_into<C: Circuit<Scalar>>(circuit: C, buffers: EvalBuffers) -> Result<SynthesizedCircuit, SynthesisError> {
    // Aux variables are about as many as constraints: reserving the evaluation
    // buffers' length up front spares the doublings (each a copy of gigabytes at full
    // size, the old and new vectors both resident); with Linux's default overcommit
    // the pages cost nothing until used.
    let aux_hint = buffers.a.as_slice().len();
    let mut cs = ProvingAssembly {
        input: Vec::new(),
        aux: Vec::with_capacity(aux_hint),
        a: EvalVec::new(buffers.a),
        b: EvalVec::new(buffers.b),
        c: EvalVec::new(buffers.c),
        a_aux_density: Density::default(),
        b_input_density: Density::default(),
        b_aux_density: Density::default(),
    };
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    // Input constraints x_i · 0 = 0: they make every input part of the A query, so the
    // IC part of the verifying key is never degenerate.
    for i in 0..cs.input.len() {
        cs.enforce(|| "", |lc| lc + Variable::new_unchecked(Index::Input(i)), |lc| lc, |lc| lc);
    }
    for (name, v) in [("a", &cs.a), ("b", &cs.b), ("c", &cs.c)] {
        if v.overflowed {
            tracing::error!(vector = name, needed = v.len, capacity = v.capacity(), "evaluation buffer too small for this circuit");
            return Err(SynthesisError::Unsatisfiable);
        }
    }
    let aux_classes = ScalarClasses::classify(&cs.aux);
    let num_constraints = cs.a.len();
    Ok(SynthesizedCircuit {
        num_constraints,
        consumed: false,
        witness_charge: None,
        products: None,
        input: cs.input,
        aux: cs.aux,
        a: cs.a,
        b: cs.b,
        c: cs.c,
        a_aux_density: cs.a_aux_density,
        b_input_density: cs.b_input_density,
        b_aux_density: cs.b_aux_density,
        aux_classes,
    })
}

/// Synthesizes many circuits in parallel (one rayon task per circuit).
pub fn synthesize_many<C: Circuit<Scalar> + Send>(circuits: Vec<C>) -> Result<Vec<SynthesizedCircuit>, SynthesisError> {
    circuits.into_par_iter().map(synthesize).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_within_a_query() {
        let values: Vec<Scalar> = (0..100u64).map(|i| Scalar::from(i % 4)).collect();
        let c = ScalarClasses::classify(&values);
        assert_eq!(c.counts(), (25, 25, 50));
        let even = Density::from_fn(100, |i| i % 2 == 0);
        assert_eq!(c.counts_within(&even), (25, 0, 25));
        assert_eq!(c.counts_within(&Density::full(100)), c.counts());
    }

    #[test]
    fn density_push_set_count() {
        let mut d = Density::default();
        for i in 0..130 {
            d.push(i % 3 == 0);
        }
        assert_eq!(d.len(), 130);
        assert_eq!(d.count(), 44);
        d.set(1);
        assert!(d.get(1) && !d.get(2) && !d.get(500));
        assert_eq!(Density::full(130).count(), 130);
        assert_eq!(Density::empty(130).count(), 0);
        assert_eq!(Density::from_fn(130, |i| i % 3 == 0).count(), 44);
    }

    struct Square;
    impl Circuit<Scalar> for Square {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
            let y = cs.alloc_input(|| "y", || Ok(Scalar::from(9u64)))?;
            let zero = cs.alloc(|| "z", || Ok(Scalar::ZERO))?;
            cs.enforce(|| "sq", |lc| lc + x, |lc| lc + x + (Scalar::ZERO, zero), |lc| lc + y);
            Ok(())
        }
    }

    #[test]
    fn release_witness_frees_the_values_and_consumes_the_circuit() {
        let shape = crate::synthetic::SyntheticShape::for_domain(8);
        let mut s = synthesize(shape.circuit(3)).unwrap();
        let (inputs, density) = (s.input.clone(), s.a_aux_density.clone());
        assert!(!s.aux.is_empty() && !s.a.as_slice().is_empty());
        s.release_witness();
        assert!(s.is_consumed());
        assert!(s.aux.is_empty() && s.a.as_slice().is_empty() && s.b.as_slice().is_empty() && s.c.as_slice().is_empty());
        assert_eq!((&s.input, &s.a_aux_density), (&inputs, &density), "inputs and densities stay");
    }

    #[test]
    fn a_witness_charge_gets_the_aux_vector_when_the_witness_is_freed() {
        use std::sync::{Arc, Mutex};
        /// Keeps the length and memory of the aux vector it is handed.
        struct Keeper(Arc<Mutex<Option<(usize, usize)>>>);
        impl WitnessCharge for Keeper {
            fn witness_freed(self: Box<Self>, aux: Vec<Scalar>) {
                *self.0.lock().unwrap() = Some((aux.len(), aux.as_ptr() as usize));
            }
        }
        let shape = crate::synthetic::SyntheticShape::for_domain(8);
        let mut s = synthesize(shape.circuit(3)).unwrap();
        assert!(!s.frees_witness_early());
        let seen = Arc::new(Mutex::new(None));
        s.charge_witness(Keeper(seen.clone()));
        assert!(s.frees_witness_early());
        assert!(seen.lock().unwrap().is_none());
        let aux = (s.aux.len(), s.aux.as_ptr() as usize);
        s.release_witness();
        assert_eq!(*seen.lock().unwrap(), Some(aux), "handed the vector when released");
        assert!(!s.frees_witness_early());
        drop(s);
        let mut t = synthesize(shape.circuit(3)).unwrap();
        let seen = Arc::new(Mutex::new(None));
        t.charge_witness(Keeper(seen.clone()));
        let aux = (t.aux.len(), t.aux.as_ptr() as usize);
        drop(t);
        assert_eq!(*seen.lock().unwrap(), Some(aux), "handed the vector when the circuit goes");
    }

    #[test]
    fn copy_into_gives_the_same_instance_and_refuses_a_consumed_one() {
        let shape = crate::synthetic::SyntheticShape::for_domain(8);
        let mut s = synthesize(shape.circuit(3)).unwrap();
        let buffers = || EvalBuffers { a: Box::new(Vec::<Scalar>::new()), b: Box::new(Vec::<Scalar>::new()), c: Box::new(Vec::<Scalar>::new()) };
        let t = s.copy_into(buffers()).unwrap();
        assert_eq!((t.a.as_slice(), t.b.as_slice(), t.c.as_slice()), (s.a.as_slice(), s.b.as_slice(), s.c.as_slice()));
        assert_eq!((&t.input, &t.aux, t.num_constraints()), (&s.input, &s.aux, s.num_constraints()));
        assert_eq!((&t.a_aux_density, &t.b_input_density, &t.b_aux_density), (&s.a_aux_density, &s.b_input_density, &s.b_aux_density));
        assert_eq!(t.aux_classes.counts(), s.aux_classes.counts());
        s.mark_consumed();
        assert!(s.copy_into(buffers()).is_err());
    }

    #[test]
    fn records_evaluations_densities_and_classes() {
        let s = synthesize(Square).unwrap();
        assert_eq!(s.input, vec![Scalar::ONE, Scalar::from(9u64)]);
        assert_eq!(s.num_constraints(), 1 + 2);
        assert_eq!(s.a.as_slice()[0], Scalar::from(3u64));
        assert_eq!(s.c.as_slice()[0], Scalar::from(9u64));
        // Input constraints: a = x_i, b = c = 0.
        assert_eq!(s.a.as_slice()[2], Scalar::from(9u64));
        assert!(s.b.as_slice()[1].is_zero_vartime());
        assert!(s.a_aux_density.get(0) && !s.a_aux_density.get(1));
        // A zero coefficient does not put a variable into a query.
        assert!(s.b_aux_density.get(0) && !s.b_aux_density.get(1));
        assert_eq!(s.b_input_density.count(), 0);
        assert_eq!(s.aux_classes.counts(), (1, 0, 1));
        assert_eq!(s.domain_size(), 4);
    }

    #[test]
    fn fixed_storage_too_small_is_an_error() {
        struct Fixed(Vec<Scalar>);
        impl EvalStorage for Fixed {
            fn as_slice(&self) -> &[Scalar] {
                &self.0
            }
            fn as_mut_slice(&mut self) -> &mut [Scalar] {
                &mut self.0
            }
            fn grow(&mut self, _: usize) -> bool {
                false
            }
        }
        let small = || Box::new(Fixed(vec![Scalar::ZERO; 2])) as Box<dyn EvalStorage>;
        let r = synthesize_into(Square, EvalBuffers { a: small(), b: small(), c: small() });
        assert!(r.is_err());
        let big = || Box::new(Fixed(vec![Scalar::ZERO; 3])) as Box<dyn EvalStorage>;
        let s = synthesize_into(Square, EvalBuffers { a: big(), b: big(), c: big() }).unwrap();
        assert_eq!(s.a.len(), 3);
    }
}
