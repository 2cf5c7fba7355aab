//! Witness-only synthesis of a circuit made of a shared prelude and repeated parts
//! (PoRep: the public commitments, then one sub-circuit per challenge) on several
//! threads.
//!
//! Where the circuit's aux count is known (its compiled matrices give it) and its parts
//! are all the same size, every thread writes its share of the parts straight into its
//! range of the one aux vector: no share is copied, and the vector's pages are first
//! touched (zeroed) by all threads at once rather than by one. A 32 GiB PoRep partition's 4.2 GB witness joined
//! from per-thread vectors took longer than synthesizing them on two cores here (6.0 s
//! against 3.6 s); in place there is nothing to join. Otherwise the shares are
//! synthesized into vectors of their own and joined in order.

use std::sync::atomic::{AtomicU64, Ordering};

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::{synthesize_witness, synthesize_witness_in, Aux, AuxBuffer, Witness, WitnessAssembly};

/// Split syntheses given an aux count whose layout did not hold, so that their shares
/// were joined (each also logged): for tests and benchmarks to tell the paths apart.
static JOINED_ANYWAY: AtomicU64 = AtomicU64::new(0);

/// How many split syntheses in this process were given the aux count and still joined.
pub fn joined_anyway() -> u64 {
    JOINED_ANYWAY.load(Ordering::Relaxed)
}

/// The witness of a circuit made of a shared prelude and repeated parts, synthesized
/// on `threads` threads. `build(parts)` must give the circuit over those parts; the
/// top-level namespace `first_part` must open where the first of them begins.
/// `aux`: the circuit's aux count over all of `parts`, where known, and the vector to
/// write the values into where they are written in place.
///
/// Each thread synthesizes the prelude and its share of the parts; the shares after
/// the first drop their copy of the prelude. The result equals the sequential
/// synthesis when the prelude does not depend on which parts follow (it allocates
/// before the first part opens), which callers check in their tests.
pub fn synthesize_witness_split<T, C, E>(
    parts: &[T],
    threads: usize,
    first_part: &str,
    aux: AuxBuffer,
    build: impl Fn(&[T]) -> Result<C, E> + Sync,
) -> Result<Witness, E>
where
    T: Sync,
    C: Circuit<Scalar>,
    E: From<SynthesisError> + Send,
{
    if parts.is_empty() {
        return synthesize_witness_in(build(parts)?, aux).map_err(E::from);
    }
    let chunk = parts.len().div_ceil(threads.max(1)).max(1);
    if let Some(aux_len) = aux.count() {
        match in_place(parts, chunk, first_part, aux, &build)? {
            Ok(witness) => return Ok(witness),
            // Correct either way; only slower, so said where it happens.
            Err(why) => {
                JOINED_ANYWAY.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(first_part, aux_len, why, "the witness's parts are synthesized apart and joined");
            }
        }
    }
    joined(parts, chunk, first_part, &build)
}

/// The in-place synthesis into `aux`'s vector, for as many values as `aux` says:
/// `Ok(Err(why))` where the circuit is not laid out as assumed (the parts are not all
/// the same size, or the prelude is not what the circuit without parts allocates).
fn in_place<T, C, E>(
    parts: &[T],
    chunk: usize,
    first_part: &str,
    aux: AuxBuffer,
    build: &(impl Fn(&[T]) -> Result<C, E> + Sync),
) -> Result<Result<Witness, &'static str>, E>
where
    T: Sync,
    C: Circuit<Scalar>,
    E: From<SynthesisError> + Send,
{
    // The prelude alone: the circuit without parts (PoRep: microseconds).
    let prelude = synthesize_witness(build(&[])?, 0)?;
    let (inputs_before, aux_before) = (prelude.input.len(), prelude.aux.len());
    let aux_len = aux.count().unwrap_or(0);
    let Some(per_part) = aux_len.checked_sub(aux_before).filter(|rest| rest % parts.len() == 0).map(|rest| rest / parts.len()) else {
        return Ok(Err("the aux count is not the prelude's plus equal parts"));
    };
    // Zeroed in parallel: a fresh vector's pages are touched by every thread, not by
    // one (a reused one's were touched before).
    let mut aux = aux.into_vec();
    aux.par_extend(rayon::iter::repeat_n(Scalar::ZERO, aux_len));
    let (head, mut rest) = aux.split_at_mut(aux_before);
    head.copy_from_slice(&prelude.aux);
    let mut windows = Vec::with_capacity(parts.len().div_ceil(chunk));
    for share in parts.chunks(chunk) {
        let (window, after) = rest.split_at_mut(share.len() * per_part);
        windows.push(window);
        rest = after;
    }
    let shares = parts
        .par_chunks(chunk)
        .zip(windows)
        .map(|(share, window)| {
            let mut cs = WitnessAssembly::window(first_part, window);
            cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
            build(share)?.synthesize(&mut cs)?;
            let seen = cs.marker.take().and_then(|(_, seen)| seen);
            let Aux::Window { prelude: own, window, written, spill, .. } = &cs.aux else {
                return Err(SynthesisError::Unsatisfiable.into());
            };
            if seen != Some((inputs_before, aux_before)) || *own != prelude.aux || cs.input[..inputs_before] != prelude.input {
                return Ok(Err("a share's prelude is not the circuit's without parts"));
            }
            if *written != window.len() || !spill.is_empty() {
                return Ok(Err("the parts are not all the same size"));
            }
            Ok(Ok(cs.input.split_off(inputs_before)))
        })
        .collect::<Result<Vec<_>, E>>()?;
    let mut input = prelude.input;
    for share in shares {
        match share {
            Ok(share) => input.extend(share),
            Err(why) => return Ok(Err(why)),
        }
    }
    Ok(Ok(Witness { input, aux }))
}

/// The shares synthesized into vectors of their own, then joined in order.
fn joined<T, C, E>(parts: &[T], chunk: usize, first_part: &str, build: &(impl Fn(&[T]) -> Result<C, E> + Sync)) -> Result<Witness, E>
where
    T: Sync,
    C: Circuit<Scalar>,
    E: From<SynthesisError> + Send,
{
    let shares = parts
        .par_chunks(chunk)
        .map(|share| {
            let mut cs = WitnessAssembly { marker: Some((first_part.to_string(), None)), ..WitnessAssembly::default() };
            cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
            build(share)?.synthesize(&mut cs)?;
            let prelude = cs.marker.take().and_then(|(_, seen)| seen).ok_or(SynthesisError::Unsatisfiable)?;
            Ok((cs.into_witness(), prelude))
        })
        .collect::<Result<Vec<_>, E>>()?;
    let mut shares = shares.into_iter();
    let Some((mut witness, prelude)) = shares.next() else {
        return Ok(Witness { input: vec![Scalar::ONE], aux: Vec::new() });
    };
    for (share, share_prelude) in shares {
        if share_prelude != prelude || share.input[..prelude.0] != witness.input[..prelude.0] || share.aux[..prelude.1] != witness.aux[..prelude.1] {
            // Another prelude: the parts are not independent; joining would be wrong.
            tracing::error!(?prelude, ?share_prelude, first_part, "the circuit's prelude differs between shares");
            return Err(SynthesisError::Unsatisfiable.into());
        }
        witness.input.extend_from_slice(&share.input[prelude.0..]);
        witness.aux.extend_from_slice(&share.aux[prelude.1..]);
    }
    Ok(witness)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::synthesize_witness;

    /// A prelude (an input and aux values), then parts in top-level namespaces
    /// `part_0`, `part_1`, … that each allocate inputs and aux values: `wide` parts
    /// allocate one more aux value.
    struct Parts {
        prelude: u64,
        parts: Vec<u64>,
        wide: fn(u64) -> bool,
    }

    impl Parts {
        fn new(prelude: u64, parts: &[u64]) -> Self {
            Parts { prelude, parts: parts.to_vec(), wide: |_| false }
        }
    }

    impl Circuit<Scalar> for Parts {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            {
                let mut cs = cs.namespace(|| "prelude");
                cs.alloc_input(|| "p", || Ok(Scalar::from(self.prelude)))?;
                for k in 0..3 {
                    let mut inner = cs.namespace(|| format!("nested {k}"));
                    inner.alloc(|| "q", || Ok(Scalar::from(self.prelude + k)))?;
                }
            }
            for (i, v) in self.parts.iter().enumerate() {
                let mut cs = cs.namespace(|| format!("part_{i}"));
                cs.alloc(|| "a", || Ok(Scalar::from(*v)))?;
                cs.alloc_input(|| "b", || Ok(Scalar::from(*v * 3)))?;
                cs.namespace(|| "part_0").alloc(|| "c", || Ok(Scalar::from(*v * 5)))?;
                if cs.is_witness_generator() {
                    // A native gadget's bulk writes land in the window too.
                    cs.allocate_empty(2, 0).0.copy_from_slice(&[Scalar::from(*v + 1), Scalar::from(*v + 2)]);
                    cs.extend_aux(&[Scalar::from(*v + 3)]);
                }
                if (self.wide)(*v) {
                    cs.alloc(|| "d", || Ok(Scalar::from(*v * 7)))?;
                }
            }
            Ok(())
        }
    }

    fn sequential(prelude: u64, parts: &[u64], wide: fn(u64) -> bool) -> Witness {
        synthesize_witness(Parts { prelude, parts: parts.to_vec(), wide }, 0).unwrap()
    }

    #[test]
    fn a_split_witness_equals_the_sequential_one_in_place_or_joined() {
        let parts: Vec<u64> = (1..=11).collect();
        let expected = sequential(7, &parts, |_| false);
        for aux_len in [None, Some(expected.aux.len())] {
            for threads in [1, 2, 3, 4, 11, 40] {
                let split = synthesize_witness_split(&parts, threads, "part_0", AuxBuffer::new(aux_len), |share| {
                    Ok::<_, SynthesisError>(Parts::new(7, share))
                })
                .unwrap();
                assert_eq!(split, expected, "{threads} threads, aux count {aux_len:?}");
            }
        }
        // With the count, the shares were written in place, not joined.
        for chunk in [1, 3, 11] {
            let build = |share: &[u64]| Ok::<_, SynthesisError>(Parts::new(7, share));
            let w = in_place(&parts, chunk, "part_0", AuxBuffer::new(Some(expected.aux.len())), &build).unwrap();
            assert_eq!(w, Ok(expected.clone()), "{chunk} parts per share");
        }
    }

    #[test]
    fn a_reused_vector_gets_the_same_witness_in_its_own_memory() {
        let parts: Vec<u64> = (1..=11).collect();
        let expected = sequential(7, &parts, |_| false);
        let n = expected.aux.len();
        let build = |share: &[u64]| Ok::<_, SynthesisError>(Parts::new(7, share));
        // Another witness's values, and more of them than this one has.
        let old: Vec<Scalar> = (0..2 * n as u64).map(|i| Scalar::from(i + 100)).collect();
        let memory = old.as_ptr();
        let w = synthesize_witness_split(&parts, 3, "part_0", AuxBuffer::reusing(old, Some(n)), build).unwrap();
        assert_eq!(w, expected);
        assert_eq!(w.aux.as_ptr(), memory, "written in place into the reused vector");
        // Unsplit synthesis reuses it too.
        let memory = w.aux.as_ptr();
        let again = synthesize_witness_in(Parts::new(7, &parts), AuxBuffer::reusing(w.aux, None)).unwrap();
        assert_eq!(again, expected);
        assert_eq!(again.aux.as_ptr(), memory);
    }

    #[test]
    fn parts_of_other_sizes_or_a_wrong_count_still_give_the_sequential_witness() {
        let parts: Vec<u64> = (1..=12).collect();
        // Parts 3 and 9 allocate one value more (3 + 12 × 5 + 2 = 65 values): counts
        // of 63 and 75 divide evenly over the parts, yet some windows are too short
        // or too long; 65 and 0 do not divide.
        let wide = |v: u64| v == 3 || v == 9;
        let expected = sequential(7, &parts, wide);
        assert_eq!(expected.aux.len(), 65);
        let joined = joined_anyway();
        for aux_len in [63, 75, 65, 0] {
            let split = synthesize_witness_split(&parts, 4, "part_0", AuxBuffer::new(Some(aux_len)), |share| {
                Ok::<_, SynthesisError>(Parts { prelude: 7, parts: share.to_vec(), wide })
            })
            .unwrap();
            assert_eq!(split, expected, "aux count {aux_len}");
            let build = |share: &[u64]| Ok::<_, SynthesisError>(Parts { prelude: 7, parts: share.to_vec(), wide });
            assert!(in_place(&parts, 3, "part_0", AuxBuffer::new(Some(aux_len)), &build).unwrap().is_err(), "aux count {aux_len}: not in place");
        }
        // Counted (other tests may add theirs meanwhile).
        assert!(joined_anyway() >= joined + 4);
    }

    #[test]
    fn a_prelude_that_depends_on_the_share_or_a_missing_marker_is_refused() {
        let parts: Vec<u64> = (1..=11).collect();
        let aux_len = sequential(7, &parts, |_| false).aux.len();
        for aux_len in [None, Some(aux_len)] {
            let r = synthesize_witness_split(&parts, 3, "part_0", AuxBuffer::new(aux_len), |share| {
                Ok::<_, SynthesisError>(Parts::new(share.first().copied().unwrap_or(7), share))
            });
            assert!(r.is_err(), "aux count {aux_len:?}");
            let r = synthesize_witness_split(&parts, 2, "part_x", AuxBuffer::new(aux_len), |share| Ok::<_, SynthesisError>(Parts::new(7, share)));
            assert!(r.is_err(), "aux count {aux_len:?}");
        }
    }
}
