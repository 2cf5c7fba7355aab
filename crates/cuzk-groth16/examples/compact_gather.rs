//! Times gathering a witness's values that are neither 0 nor 1 (the compact witness's
//! "others") two ways on a WindowPoSt-shaped aux vector (131.5 M values, 96 % of them
//! others): `ScalarClasses::significant_values`, and the reference it replaced, a
//! parallel iterator over the bitmaps' indices collected into a vector. Both results
//! are checked equal on each round's fresh values. Medians of the rounds after one
//! warm-up each.
//!
//! `cargo run --release -p cuzk-groth16 --example compact_gather -- [values] [rounds]`

use std::time::{Duration, Instant};

use blstrs::Scalar;
use cuzk_groth16::density::ScalarClasses;
use ff::Field;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

/// The reference: indices from the bitmaps, collected (rayon appends the pieces).
fn collected(classes: &ScalarClasses, values: &[Scalar]) -> Vec<Scalar> {
    let len = values.len();
    let (zero, one) = (classes.zero.words(), classes.one.words());
    zero.par_iter()
        .zip(one)
        .enumerate()
        .flat_map_iter(move |(w, (z, o))| {
            let valid = if (w + 1) * 64 <= len { u64::MAX } else { (1u64 << (len % 64)) - 1 };
            let mut rest = !(z | o) & valid;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    w * 64 + bit
                })
            })
        })
        .map(|i| values[i])
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(131_500_200);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    println!("{n} values, {rounds} rounds after a warm-up, {} threads", rayon::current_num_threads());
    let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
    let mut values: Vec<Scalar> = vec![Scalar::ZERO; n];
    let (mut new, mut old) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        // Fresh values each round: 2 % zeros, 2 % ones, the rest random.
        let seed: u64 = rng.gen();
        values.par_iter_mut().enumerate().for_each(|(i, v)| {
            let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            *v = match r.gen_range(0..50) {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                _ => Scalar::random(&mut r),
            };
        });
        let classes = ScalarClasses::classify(&values);
        let t = Instant::now();
        let a = classes.significant_values(&values);
        let ta = t.elapsed();
        let t = Instant::now();
        let b = collected(&classes, &values);
        let tb = t.elapsed();
        assert!(a == b, "round {round}: the two gathers differ");
        println!("round {round}: {} others; significant_values {:.3} s, collected {:.3} s, equal", a.len(), ta.as_secs_f64(), tb.as_secs_f64());
        if round > 0 {
            new.push(ta);
            old.push(tb);
        }
    }
    let (a, b) = (median(new), median(old));
    println!("median: significant_values {:.3} s, collected {:.3} s ({:.2}x)", a.as_secs_f64(), b.as_secs_f64(), b.as_secs_f64() / a.as_secs_f64());
}
