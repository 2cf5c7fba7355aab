//! A partition's compact witness made from its aux values at prove time: the classes
//! (bitmaps of the zeros and the ones) and the other values. The way before (one pass
//! over the values per class, then every value compared again to keep the others)
//! against the way now (one classifying pass; the others picked by the bitmaps), same
//! values, same process, alternating, results compared.
//!
//! Usage: `cargo bench -p cuzk-groth16 --bench compact_witness -- [AUX] [REPS]`
//! (defaults: 130169893, a 32 GiB PoRep partition's aux count, and 5). The values
//! follow that partition's measured shares (51.36 % zeros, 47.34 % ones, 1.305 %
//! other), placed pseudo-randomly. Reports wall-clock medians and the process's CPU
//! time per run (all of rayon's threads).

use std::time::Instant;

use blstrs::Scalar;
use cuzk_groth16::density::{Density, ScalarClasses};
use cuzk_groth16::CompactWitness;
use ff::Field;
use rand::{RngCore, SeedableRng};
use rayon::prelude::*;

/// The process's user + system CPU time in seconds (/proc/self/stat, clock ticks).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// The way before: a pass per class, then a filter over every value.
fn before(aux: &[Scalar]) -> (ScalarClasses, Vec<Scalar>) {
    let zero = Density::from_fn(aux.len(), |i| aux[i].is_zero_vartime());
    let one = Density::from_fn(aux.len(), |i| aux[i] == Scalar::ONE);
    let others = aux.par_iter().filter(|v| !v.is_zero_vartime() && **v != Scalar::ONE).copied().collect();
    (ScalarClasses { zero, one }, others)
}

fn now(aux: &[Scalar]) -> (ScalarClasses, Vec<Scalar>) {
    let classes = ScalarClasses::classify(aux);
    let c = CompactWitness::from_classified(&[], aux, &classes);
    (classes, c.others)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(130_169_893);
    let reps: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5).max(1);
    let t = Instant::now();
    let aux: Vec<Scalar> = (0..n)
        .into_par_iter()
        .map_init(
            || rand_chacha::ChaCha20Rng::seed_from_u64(rayon::current_thread_index().unwrap_or(0) as u64),
            |rng, _| match rng.next_u32() % 100_000 {
                0..=51_359 => Scalar::ZERO,
                51_360..=98_694 => Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            },
        )
        .collect();
    println!(
        "compact witness of {n} aux values ({:.2} GB), {} threads; values made in {:.1} s; medians of {reps} after a warm-up, alternating",
        n as f64 * 32.0 / 1e9,
        rayon::current_num_threads(),
        t.elapsed().as_secs_f64()
    );
    let run = |f: fn(&[Scalar]) -> (ScalarClasses, Vec<Scalar>)| {
        let (t, c) = (Instant::now(), cpu_seconds());
        let out = f(&aux);
        (t.elapsed().as_secs_f64(), cpu_seconds() - c, out)
    };
    let (_, _, reference) = run(before);
    let _ = run(now);
    let (mut walls, mut cpus) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..reps {
        for (k, f) in [before as fn(&[Scalar]) -> _, now].into_iter().enumerate() {
            let (wall, cpu, (classes, others)) = run(f);
            assert!(classes.zero == reference.0.zero && classes.one == reference.0.one, "the classes differ");
            assert!(others == reference.1, "the other values differ");
            walls[k].push(wall);
            cpus[k].push(cpu);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (zeros, ones, others) = reference.0.counts();
    println!("  classes: {zeros} zeros, {ones} ones, {others} others; both ways equal in every run");
    for (k, name) in ["before (a pass per class, then a filter)", "now (one pass, others by the bitmaps)"].iter().enumerate() {
        println!("  {name:<44} {:8.3} s wall  {:7.2} core-s", median(&mut walls[k]), median(&mut cpus[k]));
    }
}
