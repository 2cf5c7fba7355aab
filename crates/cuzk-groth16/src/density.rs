//! Bitmaps over a circuit's variables: query densities ([`Density`]) and the 0 / 1 /
//! significant split of aux values ([`ScalarClasses`]).

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

/// A bitmap over the variables of one kind (inputs or aux), saying which belong to a query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
}

impl Density {
    /// `len` variables, none in the query.
    pub fn empty(len: usize) -> Self {
        Density { words: vec![0; len.div_ceil(64)], len }
    }

    /// A density from its words (64 variables each, least significant bit first); bits
    /// past `len` are cleared. `words` must hold `len.div_ceil(64)` words.
    pub fn from_words(words: Vec<u64>, len: usize) -> Self {
        debug_assert_eq!(words.len(), len.div_ceil(64));
        let mut d = Density { words, len };
        d.clear_tail();
        d
    }

    /// `len` variables, all in the query.
    pub fn full(len: usize) -> Self {
        let mut d = Density { words: vec![u64::MAX; len.div_ceil(64)], len };
        d.clear_tail();
        d
    }

    fn clear_tail(&mut self) {
        if self.len % 64 != 0 {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << (self.len % 64)) - 1;
            }
        }
    }

    /// Appends one variable.
    pub fn push(&mut self, set: bool) {
        if self.len % 64 == 0 {
            self.words.push(0);
        }
        if set {
            self.words[self.len / 64] |= 1 << (self.len % 64);
        }
        self.len += 1;
    }

    /// Marks variable `i` (which must exist) as part of the query.
    #[inline]
    pub fn set(&mut self, i: usize) {
        debug_assert!(i < self.len);
        self.words[i / 64] |= 1 << (i % 64);
    }

    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < self.len && (self.words[i / 64] >> (i % 64)) & 1 == 1
    }

    /// Number of variables covered (members or not).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of variables in the query.
    pub fn count(&self) -> usize {
        self.words.par_iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The values at the positions in the set, in order.
    pub fn select<T: Copy>(&self, values: &[T]) -> Vec<T> {
        values.iter().enumerate().filter(|(i, _)| self.get(*i)).map(|(_, v)| *v).collect()
    }

    /// The backing words, 64 variables each, least significant bit first.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Builds a density from a predicate over `len` variables, in parallel.
    pub fn from_fn(len: usize, f: impl Fn(usize) -> bool + Sync) -> Self {
        let words = (0..len.div_ceil(64))
            .into_par_iter()
            .map(|w| {
                let mut word = 0u64;
                for bit in 0..64 {
                    let i = w * 64 + bit;
                    if i < len && f(i) {
                        word |= 1 << bit;
                    }
                }
                word
            })
            .collect();
        Density { words, len }
    }
}

/// Which aux values are 0, which are 1; all others are "significant".
///
/// Filecoin circuits are mostly bits, so an MSM skips the zeros, sums the bases of the
/// ones, and runs Pippenger only over the significant rest.
#[derive(Clone, Debug, Default)]
pub struct ScalarClasses {
    pub zero: Density,
    pub one: Density,
}

impl ScalarClasses {
    /// Classifies `values` in parallel, reading each value once (a 32 GiB partition's
    /// aux vector is 4.2 GB: one pass over memory, not one per class).
    pub fn classify(values: &[Scalar]) -> Self {
        let (zero, one): (Vec<u64>, Vec<u64>) = values
            .par_chunks(64)
            .map(|chunk| {
                let (mut zero, mut one) = (0u64, 0u64);
                for (bit, v) in chunk.iter().enumerate() {
                    if v.is_zero_vartime() {
                        zero |= 1 << bit;
                    } else if *v == Scalar::ONE {
                        one |= 1 << bit;
                    }
                }
                (zero, one)
            })
            .unzip();
        ScalarClasses { zero: Density::from_words(zero, values.len()), one: Density::from_words(one, values.len()) }
    }

    /// The values of `values` (the vector these classes are of) that are neither 0 nor
    /// 1, in order, gathered in parallel straight into the result: blocks of words are
    /// counted first, so each thread writes its own stretch (and faults in its pages)
    /// with no second copy. For a WindowPoSt-shaped 126 M of 131.5 M values: 2.77 s
    /// against 10.33 s through a collected parallel iterator (its pieces appended by one
    /// thread), medians on 2 cores (examples/compact_gather.rs,
    /// bench/results/2026-12-07-compact-gather-cpu2.txt).
    pub fn significant_values(&self, values: &[Scalar]) -> Vec<Scalar> {
        /// Words per block: 65,536 values.
        const WORDS: usize = 1024;
        let len = self.zero.len().min(values.len());
        let (zero, one) = (self.zero.words(), self.one.words());
        let words = len.div_ceil(64);
        let word = |w: usize| {
            let valid = if (w + 1) * 64 <= len { u64::MAX } else { (1u64 << (len % 64)) - 1 };
            !(zero[w] | one[w]) & valid
        };
        let block = |b: usize| b * WORDS..((b + 1) * WORDS).min(words);
        let counts: Vec<usize> = (0..words.div_ceil(WORDS)).into_par_iter().map(|b| block(b).map(|w| word(w).count_ones() as usize).sum()).collect();
        let total = counts.iter().sum();
        let mut out: Vec<Scalar> = Vec::with_capacity(total);
        let mut rest = &mut out.spare_capacity_mut()[..total];
        let mut parts = Vec::with_capacity(counts.len());
        for &c in &counts {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(c);
            parts.push(part);
            rest = tail;
        }
        parts.into_par_iter().enumerate().for_each(|(b, part)| {
            let mut next = part.iter_mut();
            for w in block(b) {
                let mut bits = word(w);
                while bits != 0 {
                    let i = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if let Some(slot) = next.next() {
                        slot.write(values[i]);
                    }
                }
            }
        });
        // SAFETY: block b's part holds counts[b] elements, the set bits of the very words
        // its loop visits (the same `word`), so each of the first `total` elements was
        // written exactly once above.
        unsafe { out.set_len(total) };
        out
    }

    /// (zeros, ones, significant) counts.
    pub fn counts(&self) -> (usize, usize, usize) {
        let z = self.zero.count();
        let o = self.one.count();
        (z, o, self.zero.len() - z - o)
    }

    /// (zeros, ones, significant) counts among the variables in `query` (a density
    /// over the same aux variables): the scalars that query's MSM sees.
    pub fn counts_within(&self, query: &Density) -> (usize, usize, usize) {
        let within = |d: &Density| d.words().par_iter().zip(query.words()).map(|(a, b)| (a & b).count_ones() as usize).sum::<usize>();
        let (z, o) = (within(&self.zero), within(&self.one));
        (z, o, query.count() - z - o)
    }
}
