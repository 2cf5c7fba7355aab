//! `cuzk gpu-bench`: NTT and H-polynomial timings on a GPU, against the device's own
//! copy bandwidth measured in the same run, and G1 MSM timings per phase, with
//! correctness checked on fresh random inputs against the CPU.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use blstrs::{G1Projective, G2Projective};
use clap::{Args, ValueEnum};
use cudarc::driver::sys::CUevent_flags;
use cuzk_cuda::field::{as_device, as_device_mut, DeviceFr};
use cuzk_cuda::msm::split::SplitLists;
use cuzk_cuda::{Gpu, GpuMsm, GpuNtt, MsmGroup, MsmTimings, PinnedScalars, G1, G2};
use cuzk_groth16::domain::Domain;
use cuzk_groth16::generator::{self, BatchAffine};
use cuzk_groth16::NoProgress;
use cuzk_groth16::{Scalar, SCALAR_BYTES};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::host::median;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Part {
    /// NTTs and the H polynomial.
    Ntt,
    /// G1 and G2 multi-scalar multiplication.
    Msm,
    /// Split MSMs of a C2 partition's shape (BRIEF §2 witness model): L/A in G1, B in G1
    /// and G2.
    Split,
    /// a, b, c = A·z, B·z, C·z from compiled matrices and a compact witness (a
    /// synthetic circuit of --products-constraints), against the host's products.
    Products,
}

#[derive(Args)]
pub struct GpuBenchArgs {
    /// Which parts to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_values = ["ntt", "msm"])]
    parts: Vec<Part>,
    /// G1 MSM sizes as powers of two, comma-separated (bases resident on the device,
    /// scalars from pinned host memory).
    #[arg(long, value_delimiter = ',', default_values_t = [20u32, 24, 26, 27])]
    msm_log_sizes: Vec<u32>,
    /// G2 MSM sizes as powers of two, comma-separated (empty: none).
    #[arg(long, value_delimiter = ',', default_values_t = [20u32, 24, 25])]
    msm_g2_log_sizes: Vec<u32>,
    /// MSM window widths in bits to compare, comma-separated (empty: the size's default).
    #[arg(long, value_delimiter = ',')]
    msm_window_bits: Vec<u32>,
    /// Batch-affine rounds of the MSM accumulation to compare, comma-separated (empty:
    /// the size's default).
    #[arg(long, value_delimiter = ',')]
    msm_affine_rounds: Vec<u32>,
    /// NTT sizes as powers of two, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [20u32, 24, 26, 27])]
    log_sizes: Vec<u32>,
    /// Timed repetitions per measurement (after 2 warm-ups); medians are reported.
    #[arg(long, default_value_t = 10)]
    reps: usize,
    /// Domain of the end-to-end H-polynomial run (a, b, c of 130,279,197 elements at 27).
    #[arg(long, default_value_t = 27)]
    h_log_size: u32,
    /// Divide the split MSMs' sizes by 2^k (0: a full C2 partition's).
    #[arg(long, default_value_t = 0)]
    split_log_scale: u32,
    /// Constraints of the synthetic circuit (the measured C2 witness model) whose
    /// products are timed (default: a C2 partition's 130,278,869).
    #[arg(long, default_value_t = cuzk_groth16::synthetic::C2_CONSTRAINTS)]
    products_constraints: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn random(n: usize, seed: u64) -> Vec<Scalar> {
    (0..n)
        .into_par_iter()
        .chunks(1 << 16)
        .flat_map_iter(|chunk| {
            let mut r = ChaCha20Rng::seed_from_u64(seed ^ (chunk[0] as u64).wrapping_mul(0x9e37_79b9));
            chunk.into_iter().map(move |_| Scalar::random(&mut r))
        })
        .collect()
}

/// Median milliseconds of `f` on the compute stream, timed with CUDA events.
fn time_ms(gpu: &Gpu, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let s = gpu.stream();
    for _ in 0..2 {
        f()?;
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = s.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        f()?;
        let t1 = s.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        t1.synchronize()?;
        times.push(t0.elapsed_ms(&t1)? as f64);
    }
    Ok(median(times))
}

pub fn run(args: &GpuBenchArgs) -> Result<()> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    if let Some(bad) =
        args.log_sizes.iter().chain([&args.h_log_size]).chain(&args.msm_log_sizes).chain(&args.msm_g2_log_sizes).find(|&&l| !(1..=28).contains(&l))
    {
        bail!("size 2^{bad} is outside what this benchmark runs (2^1..2^28)");
    }
    let gpu = Gpu::open(args.device).context("no usable GPU")?;
    let (free, total) = gpu.memory()?;
    println!(
        "cuzk gpu-bench: device {} ({}), {:.1} / {:.1} GiB free, kernels {}; medians of {} after 2 warm-ups",
        gpu.ordinal,
        gpu.name,
        free as f64 / (1u64 << 30) as f64,
        total as f64 / (1u64 << 30) as f64,
        cuzk_cuda::built_architectures(),
        args.reps
    );
    if let Some(image) = std::env::var_os(cuzk_cuda::KERNEL_IMAGE_ENV) {
        println!("kernels loaded from {} ({})", std::path::Path::new(&image).display(), cuzk_cuda::KERNEL_IMAGE_ENV);
    }
    if args.parts.contains(&Part::Ntt) {
        run_ntt(&gpu, args)?;
    }
    if args.parts.contains(&Part::Msm) {
        run_msm(&gpu, args)?;
    }
    if args.parts.contains(&Part::Split) {
        run_split(&gpu, args)?;
    }
    if args.parts.contains(&Part::Products) {
        run_products(&gpu, args)?;
    }
    Ok(())
}

/// The products of a synthetic circuit: compiled once (timed), one witness (timed),
/// the host's parallel products (the CPU backend's way, timed), then on the device the
/// matrices uploaded once and, per repetition, the compact witness sent and expanded
/// and a, b, c computed (CUDA events, medians); the device's a, b, c checked equal to
/// the host's.
fn run_products(gpu: &Arc<Gpu>, args: &GpuBenchArgs) -> Result<()> {
    use cuzk_cuda::groth16::products::{read_back, DeviceMatrices, DeviceWitness};
    use cuzk_groth16::matrices::compile_matrices;
    use cuzk_groth16::synthesis::EvalBuffers;
    use cuzk_groth16::synthetic::SyntheticShape;
    use cuzk_groth16::{synthesize_witness, CompactWitness};
    let shape = SyntheticShape { constraints: args.products_constraints, ..SyntheticShape::c2() };
    println!(
        "Products of a synthetic circuit of {} constraints (C2 witness model), {} host threads",
        shape.constraints,
        rayon::current_num_threads()
    );
    let t = Instant::now();
    let m = compile_matrices(shape.circuit(0)).context("compiling the matrices")?;
    let compile_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let w = synthesize_witness(shape.circuit(0x77), m.num_aux).context("synthesizing the witness")?;
    let witness_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let compact = CompactWitness::new(&w);
    let compact_s = t.elapsed().as_secs_f64();
    println!(
        "matrices: {} rows, {} non-zeros (A {}, B {}, C {}), {} coefficients, {:.2} GB; compiled in {compile_s:.1} s (one thread); witness {witness_s:.1} s (one thread), compact form {compact_s:.2} s",
        m.num_constraints(),
        m.non_zeros(),
        m.a.non_zeros(),
        m.b.non_zeros(),
        m.c.non_zeros(),
        m.dictionary.len(),
        m.bytes() as f64 / 1e9
    );
    let len = m.num_constraints().next_power_of_two();
    let t = Instant::now();
    let dm = DeviceMatrices::upload(gpu, &m)?;
    gpu.stream().synchronize()?;
    let upload_s = t.elapsed().as_secs_f64();
    let s = gpu.stream();
    let mut out = None;
    let expand_ms = time_ms(gpu, args.reps, || {
        drop(DeviceWitness::upload(gpu, gpu.stream(), &compact)?);
        Ok(())
    })?;
    let dw = DeviceWitness::upload(gpu, gpu.stream(), &compact)?;
    let products_ms = time_ms(gpu, args.reps, || {
        out = Some(dm.products(gpu, &dw, len)?);
        Ok(())
    })?;
    s.synchronize()?;
    // The host's products (the CPU backend's path), timed; then the device's compared.
    let z_host: Vec<Scalar> = w.input.iter().chain(&w.aux).copied().collect();
    let t = Instant::now();
    let host = cuzk_groth16::SynthesizedCircuit::from_matrices(
        &m,
        w,
        EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) },
    )?;
    let host_s = t.elapsed().as_secs_f64();
    let [a, b, c] = out.context("no products")?;
    let z_ok = dw.to_host(gpu)? == z_host;
    drop(z_host);
    let mut ok = z_ok;
    for (dev, cpu) in [(&a, &host.a), (&b, &host.b), (&c, &host.c)] {
        let dev = read_back(dev)?;
        let rows = cpu.as_slice().len();
        ok &= dev[..rows] == *cpu.as_slice() && dev[rows..].iter().all(|x| bool::from(x.is_zero()));
    }
    println!(
        "device: matrices uploaded once in {upload_s:.2} s ({:.2} GB); per partition: witness {:.1} MB sent and expanded {expand_ms:.2} ms, a, b, c {products_ms:.2} ms; host products {host_s:.2} s; {}",
        dm.bytes as f64 / 1e9,
        dw.bytes as f64 / 1e6,
        if ok { "a, b, c and z equal the host's" } else { "MISMATCH" }
    );
    println!(
        "RESULT products constraints={} non_zeros={} witness_bytes={} expand_ms={expand_ms:.2} products_ms={products_ms:.2} host_products_s={host_s:.2} equal={ok}",
        shape.constraints,
        m.non_zeros(),
        dw.bytes
    );
    if !ok {
        bail!("the device's products differ from the host's");
    }
    Ok(())
}

fn run_ntt(gpu: &Arc<Gpu>, args: &GpuBenchArgs) -> Result<()> {
    let gpu = gpu.clone();
    let s = gpu.stream().clone();
    let max_log = args.log_sizes.iter().copied().max().unwrap_or(20);
    let max_n = 1usize << max_log;

    // The ceiling: a device-to-device copy of the largest vector, bytes read + written.
    let copy_bytes = (max_n * SCALAR_BYTES) as f64;
    let src = s.alloc_zeros::<DeviceFr>(max_n)?;
    let mut dst = s.alloc_zeros::<DeviceFr>(max_n)?;
    let copy_ms = time_ms(&gpu, args.reps, || Ok(s.memcpy_dtod(&src, &mut dst)?))?;
    let copy_bw = 2.0 * copy_bytes / (copy_ms / 1e3);
    println!("device copy 2^{max_log} x {SCALAR_BYTES} B: {copy_ms:.3} ms = {:.0} GB/s (read + write)", copy_bw / 1e9);
    drop((src, dst));

    let ntt = GpuNtt::new(gpu.clone());
    let mut buf = s.alloc_zeros::<DeviceFr>(max_n)?;
    println!("{:>6} {:>11} {:>11} {:>12} {:>10} {:>9}", "size", "fwd (ms)", "inv (ms)", "eff. GB/s", "of copy", "vs CPU");
    let mut rows = Vec::new();
    for &log in &args.log_sizes {
        let n = 1usize << log;
        let input = random(n, 0x5eed ^ log as u64);
        // Correctness on this fresh input: forward NTT against the CPU.
        let mut view = buf.slice_mut(..n);
        s.memcpy_htod(as_device(&input), &mut view)?;
        ntt.fft(&mut view)?;
        let mut got = vec![Scalar::from(0xdeadu64); n];
        // SAFETY: the NTT kernels write reduced field elements.
        s.memcpy_dtoh(&view, unsafe { as_device_mut(&mut got) })?;
        s.synchronize()?;
        let mut want = input;
        Domain::new(log)?.fft(&mut want);
        let ok = want == got;
        drop((want, got));
        let fwd = time_ms(&gpu, args.reps, || Ok(ntt.fft(&mut view)?))?;
        let inv = time_ms(&gpu, args.reps, || Ok(ntt.ifft(&mut view)?))?;
        let eff = 2.0 * (n * SCALAR_BYTES) as f64 / (fwd / 1e3);
        println!(
            "{:>6} {fwd:>11.3} {inv:>11.3} {:>12.0} {:>9.1}% {:>9}",
            format!("2^{log}"),
            eff / 1e9,
            100.0 * eff / copy_bw,
            if ok { "match" } else { "MISMATCH" }
        );
        rows.push((log, fwd, inv, ok));
        if !ok {
            bail!("GPU NTT at 2^{log} differs from the CPU");
        }
    }
    drop(buf);

    // The H polynomial end to end: a, b, c of C2 length in pinned memory → h on the host.
    let log = args.h_log_size;
    let n = 1usize << log;
    let len = if log == 27 { cuzk_groth16::synthetic::C2_CONSTRAINTS + cuzk_groth16::synthetic::C2_INPUTS } else { n };
    let mut pinned = Vec::new();
    for i in 0..3u64 {
        let mut p = PinnedScalars::new(&gpu, len)?;
        let v = random(len, 0xabc0 + i);
        p.as_scalars_mut()?.par_chunks_mut(1 << 16).zip(v.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
        pinned.push(p);
    }
    let mut out = PinnedScalars::new(&gpu, n)?;
    let (mut e2e, mut up, mut comp, mut down) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for rep in 0..args.reps.min(5) + 1 {
        let t = Instant::now();
        let tm = ntt.h_polynomial(pinned[0].as_scalars()?, pinned[1].as_scalars()?, pinned[2].as_scalars()?, out.as_scalars_mut()?)?;
        let wall = t.elapsed().as_secs_f64() * 1e3;
        if rep > 0 {
            e2e.push(wall);
            up.push(tm.upload_ms as f64);
            comp.push(tm.compute_ms as f64);
            down.push(tm.download_ms as f64);
        }
    }
    // Correctness of the last result against the CPU.
    let pad = |v: &[Scalar]| {
        let mut p = v.to_vec();
        p.resize(n, Scalar::ZERO);
        p
    };
    let (mut a, mut b, mut c) = (pad(pinned[0].as_scalars()?), pad(pinned[1].as_scalars()?), pad(pinned[2].as_scalars()?));
    let t = Instant::now();
    Domain::new(log)?.h_polynomial(&mut a, &mut b, &mut c);
    let cpu_ms = t.elapsed().as_secs_f64() * 1e3;
    let ok = a == out.as_scalars()?;
    let comp = median(comp);
    println!(
        "H polynomial 2^{log} (a, b, c of {len} from pinned memory): end to end {:.1} ms (upload {:.1}, compute {comp:.1}, download {:.1}; b and c upload during compute); CPU ({} threads) {cpu_ms:.0} ms; {}",
        median(e2e),
        median(up),
        median(down),
        rayon::current_num_threads(),
        if ok { "matches the CPU" } else { "MISMATCH" }
    );
    if !ok {
        bail!("GPU H polynomial differs from the CPU");
    }
    for (log, fwd, inv, _) in rows {
        println!("RESULT ntt log_size={log} forward_ms={fwd:.3} inverse_ms={inv:.3} copy_gbps={:.0}", copy_bw / 1e9);
    }
    println!("RESULT hpoly log_size={log} compute_ms={comp:.2}");
    Ok(())
}

/// A group the benchmark runs the MSM in: its CPU reference.
trait BenchGroup: MsmGroup<Projective = Self::P, Affine: PrimeCurveAffine<Curve = Self::P> + Send + Sync> {
    type P: Curve<AffineRepr = Self::Affine> + BatchAffine + Group<Scalar = Scalar> + From<Self::Affine> + Send + Sync;
    fn multi_exp(points: &[Self::P], scalars: &[Scalar]) -> Self::P;
}

impl BenchGroup for G1 {
    type P = G1Projective;
    fn multi_exp(points: &[G1Projective], scalars: &[Scalar]) -> G1Projective {
        G1Projective::multi_exp(points, scalars)
    }
}

impl BenchGroup for G2 {
    type P = G2Projective;
    fn multi_exp(points: &[G2Projective], scalars: &[Scalar]) -> G2Projective {
        G2Projective::multi_exp(points, scalars)
    }
}

/// n distinct pseudo-random points (the generator's P + i·Q; a scalar multiplication
/// per point would take minutes at 2^27).
fn random_points<G: BenchGroup>(n: usize, seed: u64) -> Vec<G::Affine> {
    generator::random_points::<G::Affine>(n, &mut ChaCha20Rng::seed_from_u64(seed), &NoProgress)
}

/// The CPU's answer: blstrs' multi_exp on one chunk per thread, summed.
fn cpu_msm<G: BenchGroup>(points: &[G::Affine], scalars: &[Scalar]) -> G::P
where
    G::Affine: Send + Sync,
{
    let chunk = scalars.len().div_ceil(rayon::current_num_threads()).max(1);
    points[..scalars.len()]
        .par_chunks(chunk)
        .zip(scalars.par_chunks(chunk))
        .map(|(p, s)| {
            let proj: Vec<G::P> = p.iter().map(|a: &G::Affine| G::P::from(*a)).collect();
            G::multi_exp(&proj, s)
        })
        .reduce(G::P::identity, |a, b| a + b)
}

fn run_msm(gpu: &Arc<Gpu>, args: &GpuBenchArgs) -> Result<()> {
    println!("MSM: bases resident on the device (uploaded once), scalars uploaded from pinned memory per call;");
    println!("medians of {} after 2 warm-ups; device times from CUDA events; (digits) is part of sort, (affine) part of accumulate", args.reps);
    println!(
        "{:>9} {:>4} {:>6} {:>10} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>10} {:>8} {:>9}",
        "size", "c", "rounds", "total(ms)", "upload", "(digits)", "sort", "accumulate", "(affine)", "reduce", "bases (s)", "CPU (s)", "vs CPU"
    );
    let mut results = msm_sizes::<G1>(gpu, args, &args.msm_log_sizes)?;
    results.extend(msm_sizes::<G2>(gpu, args, &args.msm_g2_log_sizes)?);
    for (name, log, total) in results {
        println!("RESULT msm_{name} log_size={log} total_ms={total:.1}");
    }
    Ok(())
}

fn msm_sizes<G: BenchGroup>(gpu: &Arc<Gpu>, args: &GpuBenchArgs, logs: &[u32]) -> Result<Vec<(String, u32, f64)>>
where
    G::Affine: Send + Sync,
{
    let widths: Vec<Option<u32>> = if args.msm_window_bits.is_empty() { vec![None] } else { args.msm_window_bits.iter().map(|&c| Some(c)).collect() };
    let rounds: Vec<Option<u32>> =
        if args.msm_affine_rounds.is_empty() { vec![None] } else { args.msm_affine_rounds.iter().map(|&r| Some(r)).collect() };
    let mut engines = Vec::new();
    for &c in &widths {
        for &r in &rounds {
            let msm = match c {
                Some(c) => GpuMsm::with_window_bits(gpu.clone(), c)?,
                None => GpuMsm::new(gpu.clone()),
            };
            engines.push(match r {
                Some(r) => msm.with_affine_rounds(r)?,
                None => msm,
            });
        }
    }
    let mut results = Vec::new();
    for &log in logs {
        let n = 1usize << log;
        let points = random_points::<G>(n, 0x9e11 ^ log as u64);
        let t = Instant::now();
        let bases = engines[0].upload_bases::<G>(&points)?;
        let bases_s = t.elapsed().as_secs_f64();
        let mut pinned = PinnedScalars::new(gpu, n)?;
        let v = random(n, 0x5ca1 ^ log as u64);
        pinned.as_scalars_mut()?.par_chunks_mut(1 << 16).zip(v.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
        drop(v);
        let scalars = pinned.as_scalars()?;
        let t = Instant::now();
        let want = cpu_msm::<G>(&points, scalars);
        let cpu_s = t.elapsed().as_secs_f64();
        for msm in &engines {
            let (first, _) = msm.msm(&bases, scalars)?;
            msm.msm(&bases, scalars)?;
            let mut runs: Vec<MsmTimings> = Vec::with_capacity(args.reps);
            for _ in 0..args.reps {
                runs.push(msm.msm(&bases, scalars)?.1);
            }
            let med = |f: fn(&MsmTimings) -> f32| median(runs.iter().map(|t| f(t) as f64).collect());
            let ok = first == want;
            let total = med(|t| t.total_ms);
            let c = msm.window_bits_for::<G>(n);
            let r = msm.affine_rounds_for::<G>(n);
            println!(
                "{:>9} {c:>4} {r:>6} {total:>10.1} {:>9.1} {:>9.1} {:>9.1} {:>11.1} {:>9.1} {:>9.1} {bases_s:>10.2} {cpu_s:>8.1} {:>9}",
                format!("{} 2^{log}", G::NAME),
                med(|t| t.upload_ms),
                med(|t| t.digits_ms),
                med(|t| t.sort_ms),
                med(|t| t.accumulate_ms),
                med(|t| t.affine_ms),
                med(|t| t.reduce_ms),
                if ok { "match" } else { "MISMATCH" }
            );
            if !ok {
                bail!("GPU {} MSM at 2^{log} with {c}-bit windows and {r} batch-affine rounds differs from the CPU", G::NAME);
            }
            results.push((format!("{}_c{c}_r{r}", G::NAME.to_lowercase()), log, total));
        }
    }
    Ok(results)
}

/// Bases of the L and A queries in a C2 partition (aux variables) and of the B query.
const C2_AUX: usize = 130_169_893;
const C2_B_DENSITY: usize = 33_112_281;
/// Share of significant scalars (neither 0 nor 1) over all aux values and at B-density
/// positions, as measured on a real 32 GiB PoRep partition; the rest are 0 or 1, about
/// half each.
const SIGNIFICANT_SHARE: f64 = cuzk_groth16::synthetic::C2_SIGNIFICANT;
const SIGNIFICANT_SHARE_B: f64 = cuzk_groth16::synthetic::C2_SIGNIFICANT_IN_B;

/// A split MSM's input with positions drawn from the witness model.
fn split_input(n: usize, significant: f64, seed: u64) -> SplitLists {
    use rand::RngCore;
    let classes: Vec<(u32, u8)> = (0..n as u32)
        .into_par_iter()
        .chunks(1 << 16)
        .flat_map_iter(|chunk| {
            let mut r = ChaCha20Rng::seed_from_u64(seed ^ (chunk[0] as u64).wrapping_mul(0x9e37_79b9));
            chunk.into_iter().map(move |i| {
                let u = r.next_u32() as f64 / 4_294_967_296.0;
                let one_cut = significant + (1.0 - significant) / 2.0;
                (
                    i,
                    if u < significant {
                        2
                    } else if u < one_cut {
                        1
                    } else {
                        0
                    },
                )
            })
        })
        .collect();
    let ones = classes.iter().filter(|c| c.1 == 1).map(|c| c.0).collect();
    let sig_index: Vec<u32> = classes.iter().filter(|c| c.1 == 2).map(|c| c.0).collect();
    let sig_scalars = random(sig_index.len(), seed ^ 0x51);
    SplitLists { ones, sig_index, sig_scalars }
}

fn run_split(gpu: &Arc<Gpu>, args: &GpuBenchArgs) -> Result<()> {
    let k = args.split_log_scale;
    if k > 20 {
        bail!("--split-log-scale {k}: at most 20");
    }
    println!(
        "Split MSM of a C2 partition{} (significant scalars {:.1} % over aux, {:.0} % at B positions; the rest 0 or 1, half each);",
        if k > 0 { format!(" / 2^{k}") } else { String::new() },
        SIGNIFICANT_SHARE * 100.0,
        SIGNIFICANT_SHARE_B * 100.0
    );
    println!("bases resident; ones, indices and scalars uploaded from pageable memory per call; medians of {}", args.reps);
    println!(
        "{:>10} {:>11} {:>10} {:>10} {:>10} {:>8} {:>8} {:>10} {:>8} {:>9} {:>8}",
        "query", "bases", "ones", "signif.", "total(ms)", "upload", "sort", "accumulate", "reduce", "batch-add", "check"
    );
    let results = vec![
        split_one::<G1>(gpu, args, "L/A G1", C2_AUX >> k, SIGNIFICANT_SHARE)?,
        split_one::<G1>(gpu, args, "B G1", C2_B_DENSITY >> k, SIGNIFICANT_SHARE_B)?,
        split_one::<G2>(gpu, args, "B G2", C2_B_DENSITY >> k, SIGNIFICANT_SHARE_B)?,
    ];
    for (name, n, total) in results {
        println!("RESULT split_msm query={name} bases={n} total_ms={total:.1}");
    }
    Ok(())
}

fn split_one<G: BenchGroup>(gpu: &Arc<Gpu>, args: &GpuBenchArgs, name: &str, n: usize, significant: f64) -> Result<(String, usize, f64)>
where
    G::Affine: Send + Sync,
{
    let msm = GpuMsm::new(gpu.clone());
    let points = random_points::<G>(n, 0x5b1 ^ n as u64);
    let bases = msm.upload_bases::<G>(&points)?;
    let input = split_input(n, significant, 0xc2 ^ n as u64);
    let (first, _) = msm.msm_split(&bases, &input.ones, &input.sig_index, &input.sig_scalars)?;
    msm.msm_split(&bases, &input.ones, &input.sig_index, &input.sig_scalars)?;
    let mut runs: Vec<MsmTimings> = Vec::with_capacity(args.reps);
    for _ in 0..args.reps {
        runs.push(msm.msm_split(&bases, &input.ones, &input.sig_index, &input.sig_scalars)?.1);
    }
    let med = |f: fn(&MsmTimings) -> f32| median(runs.iter().map(|t| f(t) as f64).collect());
    // The CPU's answer: the significant part by multi_exp, the ones summed.
    let sig_points: Vec<G::Affine> = input.sig_index.par_iter().map(|&i| points[i as usize]).collect();
    let ones_sum = input
        .ones
        .par_chunks(1 << 16)
        .map(|c| c.iter().fold(G::P::identity(), |acc, &i| acc + G::P::from(points[i as usize])))
        .reduce(G::P::identity, |a, b| a + b);
    let want = cpu_msm::<G>(&sig_points, &input.sig_scalars) + ones_sum;
    let ok = first == want;
    let total = med(|t| t.total_ms);
    println!(
        "{name:>10} {n:>11} {:>10} {:>10} {total:>10.1} {:>8.1} {:>8.1} {:>10.1} {:>8.1} {:>9.1} {:>8}",
        input.ones.len(),
        input.sig_index.len(),
        med(|t| t.upload_ms),
        med(|t| t.sort_ms),
        med(|t| t.accumulate_ms),
        med(|t| t.reduce_ms),
        med(|t| t.batch_add_ms),
        if ok { "match" } else { "MISMATCH" }
    );
    if !ok {
        bail!("GPU split MSM ({name}) differs from the CPU");
    }
    Ok((name.to_string(), n, total))
}
