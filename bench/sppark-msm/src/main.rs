//! `sppark-msm`: issue 25's reference. cuzk's G1 MSM and sppark's, each with its bases
//! resident on the device, on the same pseudo-random bases and fresh random scalars
//! (pinned host memory, uploaded per call by both); both results checked against blstrs
//! on the CPU. Times are wall clock around one synchronous call (sppark's API returns
//! when the result is on the host), medians after two warm-ups; cuzk's CUDA-event
//! total is printed beside its wall time.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use blst::{blst_fr, blst_p1, blst_p1_affine, blst_p1_affine_serialize, blst_p1_to_affine};
use blstrs::{G1Affine, G1Projective, Scalar};
use clap::Parser;
use cuzk_cuda::{Gpu, GpuMsm, PinnedScalars, G1};
use cuzk_groth16::generator;
use cuzk_groth16::NoProgress;
use ff::Field;
use group::Group;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

extern "C" {
    fn sppark_g1_bases_new(bases: *const blst_p1_affine, n: usize) -> *mut c_void;
    fn sppark_g1_msm(msm: *mut c_void, out: *mut blst_p1, scalars: *const blst_fr, n: usize) -> c_int;
    fn sppark_g1_bases_free(msm: *mut c_void);
}

/// sppark's MSM with `n` bases resident on device 0.
struct SpparkBases {
    msm: NonNull<c_void>,
    n: usize,
}

impl SpparkBases {
    fn upload(bases: &[G1Affine]) -> Result<Self> {
        // SAFETY: G1Affine is repr(transparent) over blst_p1_affine, so the slice is
        // `bases.len()` contiguous blst_p1_affine values, which sppark reads (96 bytes
        // each, checked by a static_assert in the wrapper) and copies to the device
        // before returning.
        let msm = unsafe { sppark_g1_bases_new(bases.as_ptr().cast(), bases.len()) };
        let msm = NonNull::new(msm).context("sppark could not upload the bases (its message is above)")?;
        Ok(SpparkBases { msm, n: bases.len() })
    }

    fn msm(&self, scalars: &[Scalar]) -> Result<G1Projective> {
        ensure!(scalars.len() <= self.n, "{} scalars for {} bases", scalars.len(), self.n);
        let mut out = blst_p1::default();
        // SAFETY: `self.msm` is live (freed only in drop); Scalar is repr(transparent)
        // over blst_fr, so `scalars` is `scalars.len()` blst_fr values, no more than the
        // resident bases; `out` is a blst_p1 the wrapper writes (144 bytes, checked).
        let code = unsafe { sppark_g1_msm(self.msm.as_ptr(), &mut out, scalars.as_ptr().cast(), scalars.len()) };
        if code != 0 {
            bail!("sppark's MSM failed with code {code} (its message is above)");
        }
        // Through blst's uncompressed encoding: blstrs does not expose its coordinates.
        let mut affine = blst_p1_affine::default();
        let mut bytes = [0u8; 96];
        // SAFETY: both write into the locals above, sized as blst requires (a
        // blst_p1_affine and 96 bytes), from `out`, a Jacobian point sppark wrote.
        unsafe {
            blst_p1_to_affine(&mut affine, &out);
            blst_p1_affine_serialize(bytes.as_mut_ptr(), &affine);
        }
        Option::<G1Affine>::from(G1Affine::from_uncompressed(&bytes)).map(G1Projective::from).context("sppark's result is not a point of G1")
    }
}

impl Drop for SpparkBases {
    fn drop(&mut self) {
        // SAFETY: made by sppark_g1_bases_new and freed once, here.
        unsafe { sppark_g1_bases_free(self.msm.as_ptr()) };
    }
}

#[derive(Parser)]
#[command(about = "cuzk's G1 MSM against sppark's on the same resident bases and scalars")]
struct Args {
    /// MSM sizes, as powers of two.
    #[arg(long, value_delimiter = ',', default_values = ["24", "26", "27"])]
    log_sizes: Vec<u32>,
    /// Timed runs per size (after two warm-ups); the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Wall-clock milliseconds of each call, after two warm-ups.
fn timed(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    f()?;
    f()?;
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f()?;
            Ok(t.elapsed().as_secs_f64() * 1e3)
        })
        .collect()
}

/// The CPU's answer: blstrs' multi_exp on one chunk per thread, summed.
fn cpu_msm(points: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
    let chunk = scalars.len().div_ceil(rayon::current_num_threads()).max(1);
    points
        .par_chunks(chunk)
        .zip(scalars.par_chunks(chunk))
        .map(|(p, s)| {
            let proj: Vec<G1Projective> = p.iter().map(G1Projective::from).collect();
            G1Projective::multi_exp(&proj, s)
        })
        .reduce(G1Projective::identity, |a, b| a + b)
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(args.reps > 0, "--reps must be at least 1");
    if let Some(l) = args.log_sizes.iter().find(|&&l| !(10..=28).contains(&l)) {
        bail!("--log-sizes: 2^{l} is outside 2^10..2^28");
    }
    let gpu = Gpu::open(0).context("opening GPU 0")?;
    let (free, total) = gpu.memory()?;
    println!(
        "device {} ({}), {:.1} / {:.1} GiB free, cuzk kernels for {}",
        gpu.ordinal,
        gpu.name,
        free as f64 / (1u64 << 30) as f64,
        total as f64 / (1u64 << 30) as f64,
        cuzk_cuda::built_architectures()
    );
    let ours = GpuMsm::new(gpu.clone());
    println!("G1 MSM, bases resident, scalars from pinned host memory; medians of {} after 2 warm-ups", args.reps);
    println!(
        "{:>9} {:>12} {:>14} {:>12} {:>10} {:>11} {:>8} {:>8}",
        "size", "cuzk (ms)", "cuzk events", "sppark (ms)", "sppark/cuzk", "bases (s)", "CPU (s)", "check"
    );
    for &log in &args.log_sizes {
        let n = 1usize << log;
        let t = Instant::now();
        let points = generator::random_points::<G1Affine>(n, &mut ChaCha20Rng::seed_from_u64(0x5eed ^ log as u64), &NoProgress);
        let bases_s = t.elapsed().as_secs_f64();
        // Fresh scalars every run (seeded from the clock), so nothing can be tuned to them.
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() as u64;
        let mut pinned = PinnedScalars::new(&gpu, n)?;
        pinned.as_scalars_mut()?.par_chunks_mut(1 << 16).enumerate().for_each(|(i, chunk)| {
            let mut rng = ChaCha20Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9));
            chunk.iter_mut().for_each(|s| *s = Scalar::random(&mut rng));
        });
        let scalars = pinned.as_scalars()?;

        let t = Instant::now();
        let want = cpu_msm(&points, scalars);
        let cpu_s = t.elapsed().as_secs_f64();

        let bases = ours.upload_bases::<G1>(&points)?;
        let (cuzk_result, _) = ours.msm(&bases, scalars)?;
        let mut events = Vec::new();
        let cuzk_ms = median(timed(args.reps, || {
            events.push(ours.msm(&bases, scalars)?.1.total_ms as f64);
            Ok(())
        })?);
        let events_ms = median(events);
        drop(bases);

        let reference = SpparkBases::upload(&points)?;
        let sppark_result = reference.msm(scalars)?;
        let sppark_ms = median(timed(args.reps, || reference.msm(scalars).map(drop))?);
        drop(reference);

        let check = match (cuzk_result == want, sppark_result == want) {
            (true, true) => "match",
            (false, _) => "CUZK DIFFERS",
            (_, false) => "SPPARK DIFFERS",
        };
        println!(
            "{:>9} {cuzk_ms:>12.1} {events_ms:>14.1} {sppark_ms:>12.1} {:>10.2}x {bases_s:>11.2} {cpu_s:>8.1} {check:>8}",
            format!("G1 2^{log}"),
            sppark_ms / cuzk_ms
        );
        println!("RESULT log_size={log} cuzk_ms={cuzk_ms:.1} cuzk_events_ms={events_ms:.1} sppark_ms={sppark_ms:.1} check={check}");
        if check != "match" {
            bail!("G1 2^{log}: {check} from blstrs on the CPU");
        }
    }
    Ok(())
}
