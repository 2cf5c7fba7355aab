//! A witness in the form it crosses to a device: the aux values' classes and the
//! values that are neither 0 nor 1 (see [`CompactWitness`]).

use blstrs::Scalar;
use ff::Field;

use crate::density::ScalarClasses;
use crate::witness::Witness;

/// A witness as it crosses to a device: the inputs, the aux values' classes (bitmaps
/// of the zeros and the ones, which the split MSMs need anyway) and the other aux
/// values in order. A Filecoin witness is ~98 % zeros and ones, so this is ~3 % of the
/// full aux vector (a 32 GiB PoRep partition: ~0.1 GB instead of 4.2 GB).
#[derive(Clone, Debug)]
pub struct CompactWitness {
    pub input: Vec<Scalar>,
    pub classes: ScalarClasses,
    /// The aux values that are neither 0 nor 1, in aux order.
    pub others: Vec<Scalar>,
}

impl CompactWitness {
    /// Classifies `w`'s aux values (in parallel) and keeps the others.
    pub fn new(w: &Witness) -> Self {
        Self::from_classified(&w.input, &w.aux, &ScalarClasses::classify(&w.aux))
    }

    /// The compact form of the inputs `input` and the aux values `aux` already
    /// classified as `classes` (a synthesized circuit's): the others are picked by the
    /// bitmaps, so only they are read (~1 % of a PoRep witness, 96 % of a WindowPoSt
    /// one), in parallel.
    pub fn from_classified(input: &[Scalar], aux: &[Scalar], classes: &ScalarClasses) -> Self {
        // Classes of another vector would pick the wrong values: classify again then
        // (never the case for a synthesized circuit, whose classes are its aux's).
        let fresh;
        let classes = if classes.zero.len() == aux.len() && classes.one.len() == aux.len() {
            classes
        } else {
            debug_assert!(false, "classes of {} values for {} aux values", classes.zero.len(), aux.len());
            fresh = ScalarClasses::classify(aux);
            &fresh
        };
        let others = classes.significant_values(aux);
        CompactWitness { input: input.to_vec(), classes: classes.clone(), others }
    }

    pub fn num_aux(&self) -> usize {
        self.classes.zero.len()
    }

    /// Bytes it takes to send: the inputs, two bitmaps and the other values.
    pub fn bytes(&self) -> usize {
        (self.input.len() + self.others.len()) * 32 + (self.classes.zero.words().len() + self.classes.one.words().len()) * 8
    }

    /// The full aux vector again (the reference for a device's expansion).
    pub fn aux(&self) -> Vec<Scalar> {
        let mut others = self.others.iter();
        (0..self.num_aux())
            .map(|i| match (self.classes.zero.get(i), self.classes.one.get(i)) {
                (true, _) => Scalar::ZERO,
                (_, true) => Scalar::ONE,
                _ => others.next().copied().unwrap_or(Scalar::ZERO),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compact_form_gives_the_aux_values_back() {
        let aux: Vec<Scalar> = (0..1000u64).map(|i| Scalar::from([0, 1, 1, 0, 7 + i][(i % 5) as usize] * (i % 3))).collect();
        let w = Witness { input: vec![Scalar::ONE, Scalar::from(9u64)], aux };
        let c = CompactWitness::new(&w);
        assert_eq!(c.aux(), w.aux);
        assert_eq!(c.num_aux(), 1000);
        let others = w.aux.iter().filter(|v| !v.is_zero_vartime() && **v != Scalar::ONE).count();
        assert_eq!(c.others.len(), others);
        assert_eq!(c.bytes(), (2 + others) * 32 + 2 * 16 * 8);
    }

    /// The classes and the others read from the bitmaps equal a value-by-value filter,
    /// for lengths on and off a word's edge and a gathering block's (65,536 values), and
    /// runs of each class.
    #[test]
    fn the_bitmaps_pick_exactly_the_values_that_are_neither_0_nor_1() {
        for len in [0usize, 1, 63, 64, 65, 127, 128, 1000, 4099, 65_535, 65_536, 65_537, 2 * 65_536 + 77] {
            let aux: Vec<Scalar> = (0..len as u64)
                .map(|i| match (i * 7919 + i / 97) % 11 {
                    0..=4 => Scalar::ZERO,
                    5..=8 => Scalar::ONE,
                    k => Scalar::from(k + i),
                })
                .collect();
            let classes = ScalarClasses::classify(&aux);
            for (i, v) in aux.iter().enumerate() {
                assert_eq!(classes.zero.get(i), v.is_zero_vartime(), "len {len}, value {i}: zero");
                assert_eq!(classes.one.get(i), *v == Scalar::ONE, "len {len}, value {i}: one");
            }
            let others: Vec<Scalar> = aux.iter().filter(|v| !v.is_zero_vartime() && **v != Scalar::ONE).copied().collect();
            let c = CompactWitness::from_classified(&[Scalar::ONE], &aux, &classes);
            assert_eq!(c.others, others, "len {len}");
            assert_eq!(c.aux(), aux, "len {len}");
        }
    }
}
