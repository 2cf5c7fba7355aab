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

    /// The indices of the values that are neither 0 nor 1, in order, read from the
    /// bitmaps alone.
    pub fn significant_indices(&self) -> impl ParallelIterator<Item = usize> + '_ {
        let len = self.zero.len();
        self.zero.words().par_iter().zip(self.one.words()).enumerate().flat_map_iter(move |(w, (zero, one))| {
            let valid = if (w + 1) * 64 <= len { u64::MAX } else { (1u64 << (len % 64)) - 1 };
            let mut rest = !(zero | one) & valid;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    w * 64 + bit
                })
            })
        })
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
