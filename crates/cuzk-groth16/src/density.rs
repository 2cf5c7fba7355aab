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
    /// Classifies `values` in parallel.
    pub fn classify(values: &[Scalar]) -> Self {
        let zero = Density::from_fn(values.len(), |i| values[i].is_zero_vartime());
        let one = Density::from_fn(values.len(), |i| values[i] == Scalar::ONE);
        ScalarClasses { zero, one }
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
