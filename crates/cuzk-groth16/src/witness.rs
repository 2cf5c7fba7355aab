//! Witness-only synthesis: a circuit's input and aux assignments and nothing else.
//!
//! The constraint matrices of a circuit shape never change between proofs, so once
//! they are known (compiled once), a proof needs only the assignment z = (input, aux):
//! a, b, c are then sparse products of the matrices with z. [`WitnessAssembly`] runs a
//! circuit's synthesis without building a single linear combination: `enforce` does
//! not call its closures. It is a witness generator in bellpepper's sense (gadgets such
//! as Poseidon's compute their values natively and append them in bulk) and extensible
//! (circuits made of independent sub-circuits, e.g. WindowPoSt's sectors, synthesize
//! them on several threads and append them in order).
//!
//! Invariant: the assignments are identical, value for value and in the same order,
//! to those [`crate::synthesis::synthesize`] records for the same circuit.

pub mod sha256;
mod split;

pub use split::{joined_anyway, synthesize_witness_split};

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

/// A circuit instance's assignment: what a proof needs beside the compiled matrices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Witness {
    /// Public inputs; `input[0]` is the constant one.
    pub input: Vec<Scalar>,
    /// Private (aux) assignment.
    pub aux: Vec<Scalar>,
}

/// Where a witness's aux values go: a vector whose memory is used again (its values
/// are cleared first) and how many values there will be, where known (a circuit's
/// compiled matrices give the count). A 32 GiB PoRep partition's aux vector is 4.2 GB:
/// a fresh one's first touch took 2.4–11.5 core-s on the 2-core VM, zeroing the same
/// pages again 0.10–0.27 (bench/micro/page_touch.c), so an engine keeps and reuses them.
#[derive(Default)]
pub struct AuxBuffer {
    storage: Vec<Scalar>,
    count: Option<usize>,
}

impl AuxBuffer {
    /// A fresh vector (allocated when synthesis starts) for `count` values, where known.
    pub fn new(count: Option<usize>) -> Self {
        AuxBuffer { storage: Vec::new(), count }
    }

    /// `storage`'s memory for the values (whatever it holds now is cleared).
    pub fn reusing(storage: Vec<Scalar>, count: Option<usize>) -> Self {
        AuxBuffer { storage, count }
    }

    /// How many aux values the circuit has, where known.
    pub fn count(&self) -> Option<usize> {
        self.count
    }

    /// The vector, emptied, with room for the count where known.
    pub fn into_vec(self) -> Vec<Scalar> {
        let mut v = self.storage;
        v.clear();
        // Exact: a vector grown past its owner's charge would not be kept for reuse.
        v.reserve_exact(self.count.unwrap_or(0));
        v
    }
}

/// The constraint system of witness-only synthesis.
#[derive(Default)]
pub struct WitnessAssembly<'w> {
    input: Vec<Scalar>,
    aux: Aux<'w>,
    /// Namespaces open right now (0: at the circuit's top level).
    depth: usize,
    /// A top-level namespace name to watch for, and the (inputs, aux) counts when it
    /// first opened: where a circuit's shared prelude ends and its repeated parts
    /// begin (see [`synthesize_witness_split`]).
    marker: Option<(String, Option<(usize, usize)>)>,
}

/// Where the aux values go.
enum Aux<'w> {
    /// A vector of their own.
    Owned(Vec<Scalar>),
    /// A share of a split synthesis: the values before the marker into `prelude`
    /// (compared with the other shares'), those after it straight into `window`, the
    /// share's range of the whole circuit's aux vector. Values past the window's end
    /// go to `spill`: the parts were not the size the layout assumed (an error, found
    /// when the share ends).
    Window { prelude: Vec<Scalar>, window: &'w mut [Scalar], open: bool, written: usize, spill: Vec<Scalar> },
}

impl Default for Aux<'_> {
    fn default() -> Self {
        Aux::Owned(Vec::new())
    }
}

impl Aux<'_> {
    fn len(&self) -> usize {
        match self {
            Aux::Owned(v) => v.len(),
            Aux::Window { prelude, open: false, .. } => prelude.len(),
            Aux::Window { prelude, written, spill, .. } => prelude.len() + written + spill.len(),
        }
    }

    /// Room for `n` more values, zeroed, in order.
    fn allocate(&mut self, n: usize) -> &mut [Scalar] {
        match self {
            Aux::Owned(v) | Aux::Window { prelude: v, open: false, .. } => {
                let from = v.len();
                v.resize(from + n, Scalar::ZERO);
                &mut v[from..]
            }
            Aux::Window { window, written, spill, .. } => {
                if spill.is_empty() && *written + n <= window.len() {
                    // Zero already: the window was zeroed when laid out, and each of its
                    // values is handed out once.
                    let from = *written;
                    *written += n;
                    &mut window[from..from + n]
                } else {
                    let from = spill.len();
                    spill.resize(from + n, Scalar::ZERO);
                    &mut spill[from..]
                }
            }
        }
    }

    fn extend(&mut self, values: &[Scalar]) {
        match self {
            Aux::Owned(v) | Aux::Window { prelude: v, open: false, .. } => v.extend_from_slice(values),
            _ => self.allocate(values.len()).copy_from_slice(values),
        }
    }

    fn push(&mut self, value: Scalar) {
        match self {
            Aux::Owned(v) | Aux::Window { prelude: v, open: false, .. } => v.push(value),
            _ => self.allocate(1)[0] = value,
        }
    }

    /// The values kept here: all of them, or a window's prelude and what it holds.
    fn values(&self) -> &[Scalar] {
        match self {
            Aux::Owned(v) | Aux::Window { prelude: v, open: false, .. } => v,
            Aux::Window { window, written, .. } => &window[..*written],
        }
    }
}

impl<'w> WitnessAssembly<'w> {
    /// The aux values written into `buffer`'s vector, with room for its count up front:
    /// a 32 GiB PoRep partition has ~1.3·10^8, and every doubling of the vector copies
    /// gigabytes.
    pub fn in_buffer(buffer: AuxBuffer) -> Self {
        WitnessAssembly { aux: Aux::Owned(buffer.into_vec()), ..Self::default() }
    }

    /// A share of a split synthesis (see [`Aux::Window`]): the circuit's values up to
    /// the top-level namespace `marker` kept here, the rest written into `window`.
    fn window(marker: &str, window: &'w mut [Scalar]) -> Self {
        WitnessAssembly {
            aux: Aux::Window { prelude: Vec::new(), window, open: false, written: 0, spill: Vec::new() },
            marker: Some((marker.to_string(), None)),
            ..Self::default()
        }
    }

    pub fn into_witness(self) -> Witness {
        let aux = match self.aux {
            Aux::Owned(v) => v,
            Aux::Window { prelude, .. } => prelude,
        };
        Witness { input: self.input, aux }
    }
}

impl<'w> ConstraintSystem<Scalar> for WitnessAssembly<'w> {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        // The matrices are compiled once per circuit shape; nothing to record here.
    }

    fn push_namespace<NR, N>(&mut self, name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        // Names are built only at the top level, and only while a marker is unseen:
        // deeper namespaces (millions in a SHA-256 circuit) cost nothing.
        if self.depth == 0 {
            if let Some((marker, seen @ None)) = &mut self.marker {
                if name().into() == *marker {
                    *seen = Some((self.input.len(), self.aux.len()));
                    if let Aux::Window { open, .. } = &mut self.aux {
                        *open = true;
                    }
                }
            }
        }
        self.depth += 1;
    }

    fn pop_namespace(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    fn is_extensible() -> bool {
        true
    }

    /// Appends a sub-circuit's assignment. Its first input is the one it allocated for
    /// itself (a sub-system starts like a circuit: input 0 is the constant one), so it
    /// is skipped; inputs and aux values keep their order, so the result equals a
    /// sequential synthesis.
    fn extend(&mut self, other: &Self) {
        self.input.extend_from_slice(other.input.get(1..).unwrap_or_default());
        self.aux.extend(other.aux.values());
    }

    fn is_witness_generator(&self) -> bool {
        true
    }

    fn extend_inputs(&mut self, new_inputs: &[Scalar]) {
        self.input.extend_from_slice(new_inputs);
    }

    fn extend_aux(&mut self, new_aux: &[Scalar]) {
        self.aux.extend(new_aux);
    }

    fn allocate_empty(&mut self, aux_n: usize, inputs_n: usize) -> (&mut [Scalar], &mut [Scalar]) {
        let input_from = self.input.len();
        self.input.resize(input_from + inputs_n, Scalar::ZERO);
        (self.aux.allocate(aux_n), &mut self.input[input_from..])
    }

    fn allocate_empty_inputs(&mut self, n: usize) -> &mut [Scalar] {
        let from = self.input.len();
        self.input.resize(from + n, Scalar::ZERO);
        &mut self.input[from..]
    }

    fn allocate_empty_aux(&mut self, n: usize) -> &mut [Scalar] {
        self.aux.allocate(n)
    }

    fn inputs_slice(&self) -> &[Scalar] {
        &self.input
    }

    /// All aux values; in a share of a split synthesis, those since the marker.
    fn aux_slice(&self) -> &[Scalar] {
        self.aux.values()
    }
}

/// Synthesizes `circuit`'s assignment only; `aux_hint` reserves room for that many aux
/// values (0 when unknown).
pub fn synthesize_witness<C: Circuit<Scalar>>(circuit: C, aux_hint: usize) -> Result<Witness, SynthesisError> {
    synthesize_witness_in(circuit, AuxBuffer::new(Some(aux_hint)))
}

/// [`synthesize_witness`] with the aux values written into `aux`'s vector.
pub fn synthesize_witness_in<C: Circuit<Scalar>>(circuit: C, aux: AuxBuffer) -> Result<Witness, SynthesisError> {
    let mut cs = WitnessAssembly::in_buffer(aux);
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    Ok(cs.into_witness())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthesis::synthesize;
    use crate::synthetic::SyntheticShape;
    use bellpepper::gadgets::boolean::{AllocatedBit, Boolean};
    use bellpepper::gadgets::sha256::sha256;
    use rand::{RngCore, SeedableRng};

    /// SHA-256 of a random message: the gadget most of a Filecoin circuit is made of.
    struct Sha256Circuit {
        message: Vec<bool>,
    }

    impl Circuit<Scalar> for Sha256Circuit {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let bits = self
                .message
                .iter()
                .enumerate()
                .map(|(i, b)| AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(*b)).map(Boolean::from))
                .collect::<Result<Vec<_>, _>>()?;
            let digest = sha256(cs.namespace(|| "sha256"), &bits)?;
            // The first digest bit as a public input, as circuits expose their hashes.
            let first = cs.alloc_input(|| "digest bit", || Ok(if digest[0].get_value() == Some(true) { Scalar::ONE } else { Scalar::ZERO }))?;
            cs.enforce(|| "digest bit is public", |lc| lc + first, |lc| lc + CS::one(), |lc| lc + &digest[0].lc(CS::one(), Scalar::ONE));
            Ok(())
        }
    }

    fn random_message(seed: u64, bytes: usize) -> Vec<bool> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut buf = vec![0u8; bytes];
        rng.fill_bytes(&mut buf);
        buf.iter().flat_map(|byte| (0..8).map(move |i| (byte >> (7 - i)) & 1 == 1)).collect()
    }

    #[test]
    fn sha256_witness_equals_full_synthesis() {
        for (seed, bytes) in [(1, 1), (2, 55), (3, 64), (4, 200)] {
            let full = synthesize(Sha256Circuit { message: random_message(seed, bytes) }).unwrap();
            let witness = synthesize_witness(Sha256Circuit { message: random_message(seed, bytes) }, 0).unwrap();
            assert!(full.aux.len() > 20_000, "{bytes} bytes: a real SHA-256 circuit");
            assert_eq!(witness.input, full.input, "{bytes} bytes: inputs");
            assert_eq!(witness.aux, full.aux, "{bytes} bytes: aux");
        }
    }

    #[test]
    fn synthetic_witness_equals_full_synthesis() {
        for (log_n, seed) in [(8, 1), (10, 2), (12, 3)] {
            let shape = SyntheticShape::for_domain(log_n);
            let full = synthesize(shape.circuit(seed)).unwrap();
            let witness = synthesize_witness(shape.circuit(seed), full.aux.len()).unwrap();
            assert_eq!((&witness.input, &witness.aux), (&full.input, &full.aux), "domain 2^{log_n}");
        }
    }

    /// Uses every witness-generator method and, when the system is extensible,
    /// synthesizes two halves on their own systems and appends them.
    struct Bulk {
        values: Vec<u64>,
    }

    impl Bulk {
        fn half<CS: ConstraintSystem<Scalar>>(cs: &mut CS, values: &[u64]) -> Result<(), SynthesisError> {
            for (i, v) in values.iter().enumerate() {
                let x = cs.alloc(|| format!("x{i}"), || Ok(Scalar::from(*v)))?;
                let y = cs.alloc_input(|| format!("y{i}"), || Ok(Scalar::from(*v * *v)))?;
                cs.enforce(|| format!("sq{i}"), |lc| lc + x, |lc| lc + x, |lc| lc + y);
                if cs.is_witness_generator() {
                    // What a native gadget does: reserve, fill, then append more.
                    let (aux, input) = cs.allocate_empty(2, 1);
                    aux.copy_from_slice(&[Scalar::from(*v + 1), Scalar::from(*v + 2)]);
                    input[0] = Scalar::from(*v + 3);
                    cs.allocate_empty_aux(1)[0] = Scalar::from(*v + 4);
                    cs.allocate_empty_inputs(1)[0] = Scalar::from(*v + 5);
                    cs.extend_aux(&[Scalar::from(*v + 6)]);
                    cs.extend_inputs(&[Scalar::from(*v + 7)]);
                } else {
                    for d in [1, 2] {
                        cs.alloc(|| "a", || Ok(Scalar::from(*v + d)))?;
                    }
                    cs.alloc_input(|| "i", || Ok(Scalar::from(*v + 3)))?;
                    cs.alloc(|| "a", || Ok(Scalar::from(*v + 4)))?;
                    cs.alloc_input(|| "i", || Ok(Scalar::from(*v + 5)))?;
                    cs.alloc(|| "a", || Ok(Scalar::from(*v + 6)))?;
                    cs.alloc_input(|| "i", || Ok(Scalar::from(*v + 7)))?;
                }
            }
            Ok(())
        }
    }

    impl Circuit<Scalar> for Bulk {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let (first, second) = self.values.split_at(self.values.len() / 2);
            if !CS::is_extensible() {
                Self::half(cs, first)?;
                return Self::half(cs, second);
            }
            let parts = [first, second]
                .iter()
                .map(|values| {
                    let mut sub = CS::new();
                    sub.alloc_input(|| "sub one", || Ok(Scalar::ONE))?;
                    Self::half(&mut sub, values)?;
                    Ok(sub)
                })
                .collect::<Result<Vec<_>, SynthesisError>>()?;
            for part in &parts {
                cs.extend(part);
            }
            Ok(())
        }
    }

    #[test]
    fn bulk_appends_and_extension_keep_the_sequential_order() {
        let values: Vec<u64> = (10..30).collect();
        let full = synthesize(Bulk { values: values.clone() }).unwrap();
        let witness = synthesize_witness(Bulk { values }, 0).unwrap();
        assert_eq!(full.input.len(), 1 + 20 * 4);
        assert_eq!(witness.input, full.input);
        assert_eq!(witness.aux, full.aux);
    }

    #[test]
    fn a_failing_assignment_is_the_circuit_error() {
        struct Fails;
        impl Circuit<Scalar> for Fails {
            fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
                cs.alloc(|| "x", || Err(SynthesisError::AssignmentMissing))?;
                Ok(())
            }
        }
        assert!(matches!(synthesize_witness(Fails, 0), Err(SynthesisError::AssignmentMissing)));
    }
}
