//! SHA-256's witness computed natively: the aux values that bellpepper's SHA-256 gadget
//! (`bellpepper::gadgets::sha256::sha256`) allocates, in its order, with none of its
//! linear combinations. In witness-only synthesis the gadget spends ~10 ms per
//! compression building linear combinations nobody reads (profile of a 1,248-byte
//! message: most of the time in `LinearCombination` inserts, copies and coefficient
//! products); the values themselves are bit operations.
//!
//! The gadget allocates a variable only where an operand is not a constant, and
//! reads negated variables without allocating, so the model keeps each bit's kind:
//! a constant, or a variable read directly or through a negation. Every rule below
//! (which operand cases allocate, in which order, how many result bits a sum takes)
//! follows the gadget's; `tests` check the aux values and the digest against the gadget
//! for messages of every length class and every kind of input bit.

use bellpepper_core::boolean::Boolean;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

/// SHA-256 round constants (FIPS 180-4, §4.2.2).
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256 initial hash value (FIPS 180-4, §5.3.3).
const IV: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// One bit as the gadget sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bit {
    Constant(bool),
    /// An allocated variable holding `raw`, read through a negation when `negated`.
    Variable {
        raw: bool,
        negated: bool,
    },
}

use Bit::{Constant, Variable};

impl Bit {
    fn value(self) -> bool {
        match self {
            Constant(b) => b,
            Variable { raw, negated } => raw ^ negated,
        }
    }

    fn not(self) -> Bit {
        match self {
            Constant(b) => Constant(!b),
            Variable { raw, negated } => Variable { raw, negated: !negated },
        }
    }

    fn from_boolean(b: &Boolean) -> Result<Bit, SynthesisError> {
        let raw = |v: Option<bool>| v.ok_or(SynthesisError::AssignmentMissing);
        Ok(match b {
            Boolean::Constant(c) => Constant(*c),
            Boolean::Is(a) => Variable { raw: raw(a.get_value())?, negated: false },
            Boolean::Not(a) => Variable { raw: raw(a.get_value())?, negated: true },
        })
    }
}

/// A 32-bit word, least significant bit first (the gadget's order).
type Word = [Bit; 32];

fn constant_word(v: u32) -> Word {
    std::array::from_fn(|i| Constant((v >> i) & 1 == 1))
}

fn word_value(w: &Word) -> u32 {
    w.iter().enumerate().fold(0, |acc, (i, b)| acc | (u32::from(b.value()) << i))
}

fn rotr(w: &Word, by: usize) -> Word {
    std::array::from_fn(|i| w[(i + by) % 32])
}

fn shr(w: &Word, by: usize) -> Word {
    std::array::from_fn(|i| if i + by < 32 { w[i + by] } else { Constant(false) })
}

/// The values allocated so far, in allocation order.
struct Trace {
    aux: Vec<bool>,
}

impl Trace {
    fn alloc(&mut self, v: bool) -> Bit {
        self.aux.push(v);
        Variable { raw: v, negated: false }
    }

    /// XOR: free with a constant; two variables give a new one holding the XOR of
    /// the variables themselves, read negated when exactly one operand was.
    fn xor(&mut self, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Constant(false), x) | (x, Constant(false)) => x,
            (Constant(true), x) | (x, Constant(true)) => x.not(),
            (Variable { raw: ra, negated: na }, Variable { raw: rb, negated: nb }) => {
                self.aux.push(ra ^ rb);
                Variable { raw: ra ^ rb, negated: na ^ nb }
            }
        }
    }

    /// AND: free with a constant, else a new variable holding the AND of the values.
    fn and(&mut self, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Constant(false), _) | (_, Constant(false)) => Constant(false),
            (Constant(true), x) | (x, Constant(true)) => x,
            _ => self.alloc(a.value() & b.value()),
        }
    }

    /// Choose: `a ? b : c`.
    fn ch(&mut self, a: Bit, b: Bit, c: Bit) -> Bit {
        let v = (a.value() & b.value()) ^ (!a.value() & c.value());
        match (a, b, c) {
            (Constant(_), Constant(_), Constant(_)) => Constant(v),
            (Constant(false), _, c) => c,
            (a, Constant(false), c) => self.and(a.not(), c),
            (a, b, Constant(false)) => self.and(a, b),
            (a, b, Constant(true)) => self.and(a, b.not()).not(),
            (a, Constant(true), c) => self.and(a.not(), c.not()).not(),
            _ => self.alloc(v),
        }
    }

    /// Majority; with three variables the result is allocated, then `b AND c`.
    fn maj(&mut self, a: Bit, b: Bit, c: Bit) -> Bit {
        let v = (a.value() & b.value()) ^ (a.value() & c.value()) ^ (b.value() & c.value());
        match (a, b, c) {
            (Constant(_), Constant(_), Constant(_)) => Constant(v),
            (Constant(false), b, c) => self.and(b, c),
            (a, Constant(false), c) => self.and(a, c),
            (a, b, Constant(false)) => self.and(a, b),
            (a, b, Constant(true)) => self.and(a.not(), b.not()).not(),
            (a, Constant(true), c) => self.and(a.not(), c.not()).not(),
            (Constant(true), b, c) => self.and(b.not(), c.not()).not(),
            _ => {
                let m = self.alloc(v);
                self.and(b, c);
                m
            }
        }
    }

    fn xor_word(&mut self, a: &Word, b: &Word) -> Word {
        std::array::from_fn(|i| self.xor(a[i], b[i]))
    }

    /// Sum modulo 2^32. Unless every operand bit is a constant, every bit of the full
    /// sum is allocated (as many as `operands × (2^32 − 1)` needs), the carries too.
    fn add(&mut self, operands: &[Word]) -> Word {
        let sum: u64 = operands.iter().map(|w| u64::from(word_value(w))).sum();
        if operands.iter().all(|w| w.iter().all(|b| matches!(b, Constant(_)))) {
            return constant_word(sum as u32);
        }
        let bits = 64 - (operands.len() as u64 * u64::from(u32::MAX)).leading_zeros() as usize;
        let all: Vec<Bit> = (0..bits).map(|i| self.alloc((sum >> i) & 1 == 1)).collect();
        std::array::from_fn(|i| all[i])
    }

    /// Σ0 / Σ1 / σ0 / σ1 as two XORs of rotations (or a shift), left to right.
    fn sigma(&mut self, w: &Word, first: usize, second: usize, third: Third) -> Word {
        let x = self.xor_word(&rotr(w, first), &rotr(w, second));
        let y = match third {
            Third::Rotate(by) => rotr(w, by),
            Third::Shift(by) => shr(w, by),
        };
        self.xor_word(&x, &y)
    }

    fn compress(&mut self, block: &[Bit], current: &[Word; 8]) -> [Word; 8] {
        let mut w: Vec<Word> = block.chunks(32).map(|be| std::array::from_fn(|i| be[31 - i])).collect();
        for i in 16..64 {
            let s0 = self.sigma(&w[i - 15], 7, 18, Third::Shift(3));
            let s1 = self.sigma(&w[i - 2], 17, 19, Third::Shift(10));
            let next = self.add(&[w[i - 16], s0, w[i - 7], s1]);
            w.push(next);
        }
        // `a` and `e` stay unsummed until read, so each round's sums are one addition.
        let (mut a, mut b, mut c, mut d) = (Pending::Ready(current[0]), current[1], current[2], current[3]);
        let (mut e, mut f, mut g, mut h) = (Pending::Ready(current[4]), current[5], current[6], current[7]);
        for (i, wi) in w.iter().enumerate() {
            let new_e = e.resolve(self, &[]);
            let s1 = self.sigma(&new_e, 6, 11, Third::Rotate(25));
            let ch: Word = std::array::from_fn(|j| self.ch(new_e[j], f[j], g[j]));
            let temp1 = [h, s1, ch, constant_word(K[i]), *wi];
            let new_a = a.resolve(self, &[]);
            let s0 = self.sigma(&new_a, 2, 13, Third::Rotate(22));
            let maj: Word = std::array::from_fn(|j| self.maj(new_a[j], b[j], c[j]));
            h = g;
            g = f;
            f = new_e;
            e = Pending::Sum(temp1.iter().copied().chain([d]).collect());
            d = c;
            c = b;
            b = new_a;
            a = Pending::Sum(temp1.iter().copied().chain([s0, maj]).collect());
        }
        [
            a.resolve(self, &[current[0]]),
            self.add(&[current[1], b]),
            self.add(&[current[2], c]),
            self.add(&[current[3], d]),
            e.resolve(self, &[current[4]]),
            self.add(&[current[5], f]),
            self.add(&[current[6], g]),
            self.add(&[current[7], h]),
        ]
    }
}

#[derive(Clone, Copy)]
enum Third {
    Rotate(usize),
    Shift(usize),
}

enum Pending {
    Ready(Word),
    /// Operands not yet added.
    Sum(Vec<Word>),
}

impl Pending {
    /// A ready word is returned as it is (`extra` is not added: the gadget's rule, and
    /// only reachable before the first round).
    fn resolve(self, trace: &mut Trace, extra: &[Word]) -> Word {
        match self {
            Pending::Ready(w) => w,
            Pending::Sum(mut operands) => {
                operands.extend_from_slice(extra);
                trace.add(&operands)
            }
        }
    }
}

/// SHA-256 of `input` (bits, most significant first, a whole number of bytes), as
/// bellpepper's gadget computes it: appends the aux values the gadget allocates to
/// `cs` (a witness generator) and returns the digest's 256 bits, most significant
/// first, the gadget's output order.
pub fn sha256<CS: ConstraintSystem<Scalar>>(cs: &mut CS, input: &[Boolean]) -> Result<Vec<bool>, SynthesisError> {
    if !cs.is_witness_generator() || input.len() % 8 != 0 {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut padded = input.iter().map(Bit::from_boolean).collect::<Result<Vec<_>, _>>()?;
    let length = input.len() as u64;
    padded.push(Constant(true));
    while (padded.len() + 64) % 512 != 0 {
        padded.push(Constant(false));
    }
    padded.extend((0..64).rev().map(|i| Constant((length >> i) & 1 == 1)));
    // ~26,600 values per compression.
    let mut trace = Trace { aux: Vec::with_capacity(padded.len() / 512 * 27_000) };
    let mut state = IV.map(constant_word);
    for block in padded.chunks(512) {
        state = trace.compress(block, &state);
    }
    // `allocate_empty`, not `allocate_empty_aux`: bellpepper's namespaces forward only
    // the former to the root.
    let (aux, _) = cs.allocate_empty(trace.aux.len(), 0);
    for (slot, v) in aux.iter_mut().zip(&trace.aux) {
        *slot = if *v { Scalar::ONE } else { Scalar::ZERO };
    }
    Ok(state.iter().flat_map(|w| w.iter().rev().map(|b| b.value())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::WitnessAssembly;
    use bellpepper::gadgets::boolean::AllocatedBit;
    use rand::{Rng, SeedableRng};

    /// Input bits of `bytes` bytes: allocated, constant or negated allocated ones, as
    /// `kinds` picks per bit.
    fn message(cs: &mut WitnessAssembly, bytes: usize, seed: u64, kinds: impl Fn(usize, &mut rand_chacha::ChaCha8Rng) -> u8) -> Vec<Boolean> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..bytes * 8)
            .map(|i| {
                let v: bool = rng.gen();
                match kinds(i, &mut rng) {
                    0 => Boolean::from(AllocatedBit::alloc(cs.namespace(|| "bit"), Some(v)).unwrap()),
                    1 => Boolean::constant(v),
                    _ => Boolean::from(AllocatedBit::alloc(cs.namespace(|| "bit"), Some(v)).unwrap()).not(),
                }
            })
            .collect()
    }

    #[test]
    fn native_sha256_allocates_what_the_gadget_allocates() {
        type Kinds = fn(usize, &mut rand_chacha::ChaCha8Rng) -> u8;
        let patterns: [(&str, Kinds); 4] = [
            ("allocated", |_, _| 0),
            ("mixed", |_, rng| rng.gen_range(0..3)),
            // PoRep's labels: 32-byte fields, every other one constant.
            ("halves", |i, _| ((i / 256) % 2) as u8),
            ("constant", |_, _| 1),
        ];
        for bytes in [0, 1, 3, 55, 56, 63, 64, 65, 119, 200, 1248] {
            for (name, kinds) in patterns {
                let seed = bytes as u64 * 7 + name.len() as u64;
                let mut gadget = WitnessAssembly::default();
                let input = message(&mut gadget, bytes, seed, kinds);
                let digest = bellpepper::gadgets::sha256::sha256(gadget.namespace(|| "sha256"), &input).unwrap();
                let mut native = WitnessAssembly::default();
                let input = message(&mut native, bytes, seed, kinds);
                // Through a namespace, as circuits call it.
                let native_digest = sha256(&mut native.namespace(|| "sha256"), &input).unwrap();
                let digest: Vec<bool> = digest.iter().map(|b| b.get_value().unwrap()).collect();
                assert_eq!(native_digest, digest, "{bytes} bytes, {name}: digest");
                let (gadget, native) = (gadget.into_witness(), native.into_witness());
                assert_eq!(native.aux.len(), gadget.aux.len(), "{bytes} bytes, {name}: aux count");
                assert!(native.aux == gadget.aux, "{bytes} bytes, {name}: aux values");
                assert_eq!(native.input, gadget.input);
            }
        }
    }

    #[test]
    fn the_digest_is_sha256() {
        use sha2::Digest;
        let bytes: Vec<u8> = (0..100u8).collect();
        let bits: Vec<Boolean> = bytes.iter().flat_map(|b| (0..8).rev().map(move |i| Boolean::constant((b >> i) & 1 == 1))).collect();
        let mut cs = WitnessAssembly::default();
        let digest = sha256(&mut cs, &bits).unwrap();
        let expected: Vec<bool> = sha2::Sha256::digest(&bytes).iter().flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1 == 1)).collect();
        assert_eq!(digest, expected);
        // All constant: nothing allocated, as in the gadget.
        assert!(cs.into_witness().aux.is_empty());
    }

    #[test]
    fn only_witness_generators_and_whole_bytes() {
        let mut cs = bellpepper_core::test_cs::TestConstraintSystem::<Scalar>::new();
        assert!(sha256(&mut cs, &[]).is_err());
        let mut cs = WitnessAssembly::default();
        assert!(sha256(&mut cs, &[Boolean::constant(true)]).is_err());
    }
}
