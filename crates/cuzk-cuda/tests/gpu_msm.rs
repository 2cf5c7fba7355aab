//! GPU tests of the G1 and G2 multi-scalar multiplications against blstrs. They need a CUDA
//! device: marked ignored, run with `--include-ignored` on a GPU machine, and they
//! print why and return where no device is usable.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_cuda::{DeviceBases, GpuMsm, MsmGroup, G1, G2};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

mod common;

/// n distinct pseudo-random points of G1 or G2: per chunk a random start, then repeated
/// additions of a random step (much faster than a scalar multiplication per point).
fn random_points_of<P>(n: usize, seed: u64) -> Vec<P::AffineRepr>
where
    P: Curve + Group<Scalar = Scalar> + Send,
    P::AffineRepr: Copy + Send + Sync,
{
    let mut out = vec![P::identity().to_affine(); n];
    let chunk = n.div_ceil(16).max(1);
    std::thread::scope(|s| {
        for (i, c) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut r = ChaCha20Rng::seed_from_u64(seed ^ (i as u64) << 32);
                let mut p = P::generator() * Scalar::random(&mut r);
                let step = P::generator() * Scalar::random(&mut r);
                let proj: Vec<P> = (0..c.len())
                    .map(|_| {
                        p += step;
                        p
                    })
                    .collect();
                P::batch_normalize(&proj, c);
            });
        }
    });
    out
}

fn random_points(n: usize, seed: u64) -> Vec<G1Affine> {
    random_points_of::<G1Projective>(n, seed)
}

fn random_points_g2(n: usize, seed: u64) -> Vec<G2Affine> {
    random_points_of::<G2Projective>(n, seed)
}

/// blstrs' answer for the first scalars.len() points.
trait Reference: MsmGroup {
    fn multi_exp(points: &[Self::Affine], scalars: &[Scalar]) -> Self::Projective;
}

impl Reference for G1 {
    fn multi_exp(points: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        let proj: Vec<G1Projective> = points[..scalars.len()].iter().map(G1Projective::from).collect();
        G1Projective::multi_exp(&proj, scalars)
    }
}

impl Reference for G2 {
    fn multi_exp(points: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
        let proj: Vec<G2Projective> = points[..scalars.len()].iter().map(G2Projective::from).collect();
        G2Projective::multi_exp(&proj, scalars)
    }
}

fn check<G: Reference>(msm: &GpuMsm, bases: &DeviceBases<G>, points: &[G::Affine], scalars: &[Scalar], what: &str)
where
    G::Projective: PartialEq,
{
    let (got, t) = msm.msm(bases, scalars).unwrap();
    assert!(got == G::multi_exp(points, scalars), "{} MSM {what} differs from blstrs", G::NAME);
    eprintln!("{} MSM {what}: matches blstrs; {t:?}", G::NAME);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_msm_g1_matches_blstrs() {
    let Some(g) = common::gpu() else { return };
    let msm = GpuMsm::new(g);
    let max = 1 << 20;
    let mut points = random_points(max, 1);
    // One base is the point at infinity.
    points[7] = G1Affine::identity();
    let bases = msm.upload_bases::<G1>(&points).unwrap();
    for n in [1usize, 2, 3, 100, 1 << 10, 1 << 16, 1 << 20] {
        check(&msm, &bases, &points, &common::random_scalars(n, n as u64), &format!("n = {n}, random"));
    }

    let n = 5000;
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    check(&msm, &bases, &points, &vec![Scalar::ZERO; n], "all scalars zero");
    check(&msm, &bases, &points, &vec![-Scalar::ONE; n], "all scalars r − 1");
    let zero_one: Vec<Scalar> = (0..n).map(|_| if rng.next_u32() & 1 == 1 { Scalar::ONE } else { Scalar::ZERO }).collect();
    check(&msm, &bases, &points, &zero_one, "scalars 0 or 1");
    // Every scalar 1: a single bucket holds every point (the heavy-bucket path).
    let big = 1 << 16;
    check(&msm, &bases, &points, &vec![Scalar::ONE; big], "n = 2^16, every scalar 1");
    // Repeated points: P + P inside a bucket must double, P + (−P) must cancel.
    let same = vec![points[3]; n];
    let same_bases = msm.upload_bases::<G1>(&same).unwrap();
    check(&msm, &same_bases, &same, &common::random_scalars(n, 5), "one point repeated, random scalars");
    check(&msm, &same_bases, &same, &vec![Scalar::from(3u64); n], "one point repeated, scalar 3");
    let mut cancel = vec![Scalar::from(5u64); n];
    cancel.iter_mut().skip(1).step_by(2).for_each(|s| *s = -Scalar::from(5u64));
    check(&msm, &same_bases, &same, &cancel, "one point repeated, scalars ±5 (cancelling)");
    let infinities = vec![G1Affine::identity(); 100];
    let inf_bases = msm.upload_bases::<G1>(&infinities).unwrap();
    check(&msm, &inf_bases, &infinities, &common::random_scalars(100, 6), "all points at infinity");
    // Mixed: small scalars with many digits zero.
    let small: Vec<Scalar> = (0..n).map(|_| Scalar::from(rng.next_u64() & 0xffff)).collect();
    check(&msm, &bases, &points, &small, "16-bit scalars");

    // More scalars than bases is an error, not a crash.
    assert!(msm.msm(&inf_bases, &common::random_scalars(101, 7)).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU and ~10 GB of host memory"]
fn gpu_msm_g1_2_24() {
    let Some(g) = common::gpu() else { return };
    let msm = GpuMsm::new(g);
    let n = 1 << 24;
    let points = random_points(n, 24);
    let bases = msm.upload_bases::<G1>(&points).unwrap();
    check(&msm, &bases, &points, &common::random_scalars(n, 24), "n = 2^24, random");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_msm_g2_matches_blstrs() {
    let Some(g) = common::gpu() else { return };
    let msm = GpuMsm::new(g);
    let max = 1 << 20;
    let mut points = random_points_g2(max, 2);
    points[5] = G2Affine::identity();
    let bases = msm.upload_bases::<G2>(&points).unwrap();
    for n in [1usize, 2, 3, 100, 1 << 10, 1 << 16, 1 << 20] {
        check(&msm, &bases, &points, &common::random_scalars(n, 100 + n as u64), &format!("n = {n}, random"));
    }
    let n = 3000;
    let mut rng = ChaCha20Rng::seed_from_u64(98);
    check(&msm, &bases, &points, &vec![Scalar::ZERO; n], "all scalars zero");
    check(&msm, &bases, &points, &vec![-Scalar::ONE; n], "all scalars r − 1");
    let zero_one: Vec<Scalar> = (0..n).map(|_| if rng.next_u32() & 1 == 1 { Scalar::ONE } else { Scalar::ZERO }).collect();
    check(&msm, &bases, &points, &zero_one, "scalars 0 or 1");
    check(&msm, &bases, &points, &vec![Scalar::ONE; 1 << 16], "n = 2^16, every scalar 1");
    let same = vec![points[3]; n];
    let same_bases = msm.upload_bases::<G2>(&same).unwrap();
    check(&msm, &same_bases, &same, &common::random_scalars(n, 8), "one point repeated, random scalars");
    let mut cancel = vec![Scalar::from(5u64); n];
    cancel.iter_mut().skip(1).step_by(2).for_each(|s| *s = -Scalar::from(5u64));
    check(&msm, &same_bases, &same, &cancel, "one point repeated, scalars ±5 (cancelling)");
}

/// Bases and scalars that send every special pair kind of the batch-affine rounds
/// through one bucket per window: in each run of 64, P, −P, the point at infinity and P
/// again, all with the same scalar, the rest random. The order within a bucket follows
/// the scatter's atomics, so which pairs meet in which round is not fixed; over 1,024
/// such entries per bucket and up to five rounds, P + P, P + (−P), P + ∞ and ∞ + ∞ all
/// occur (with lanes in order, P + P first meets in round 3: hence 3 and 5 rounds).
fn special_pairs<P>(points: &[P::AffineRepr], seed: u64) -> (Vec<P::AffineRepr>, Vec<Scalar>)
where
    P: Curve + Group<Scalar = Scalar>,
    P::AffineRepr: Copy + Into<P>,
{
    let p: P = points[0].into();
    let (minus, inf) = ((-p).to_affine(), P::identity().to_affine());
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let same = Scalar::random(&mut rng);
    let mut bases = points.to_vec();
    let mut scalars = common::random_scalars(points.len(), seed);
    for (i, (b, s)) in bases.iter_mut().zip(scalars.iter_mut()).enumerate() {
        match i % 64 {
            0 | 3 => *b = points[0],
            1 => *b = minus,
            2 => *b = inf,
            _ => continue,
        }
        *s = same;
    }
    (bases, scalars)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_msm_affine_rounds_match_blstrs() {
    let Some(g) = common::gpu() else { return };
    let n = 1 << 14;
    let (g1_points, g1_scalars) = special_pairs::<G1Projective>(&random_points(n, 11), 12);
    let (g2_points, g2_scalars) = special_pairs::<G2Projective>(&random_points_g2(n, 13), 14);
    let plain = GpuMsm::new(g.clone());
    let g1_bases = plain.upload_bases::<G1>(&g1_points).unwrap();
    let g2_bases = plain.upload_bases::<G2>(&g2_points).unwrap();
    let random = common::random_scalars(n, 15);
    for rounds in [0, 1, 2, 3, 5] {
        // 8-bit windows: 128 buckets per window, 128 entries each on average; 12-bit
        // ones: 8. Groups of every window at once (the default at this size), of one
        // window, and of three (32 windows: a last group of two).
        for (c, group) in [(8, None), (12, None), (8, Some(1)), (8, Some(3))] {
            let mut msm = GpuMsm::with_window_bits(g.clone(), c).unwrap().with_affine_rounds(rounds).unwrap();
            if let Some(w) = group {
                msm = msm.with_affine_group_windows(w);
            }
            let what = format!("{rounds} batch-affine rounds, {c}-bit windows, groups of {group:?} windows");
            check(&msm, &g1_bases, &g1_points, &g1_scalars, &format!("{what}, special pairs"));
            check(&msm, &g1_bases, &g1_points, &random, &format!("{what}, random"));
            check(&msm, &g1_bases, &g1_points, &random[..1000], &format!("{what}, n = 1000"));
            check(&msm, &g2_bases, &g2_points, &g2_scalars, &format!("{what}, special pairs"));
        }
    }
    assert!(GpuMsm::new(g).with_affine_rounds(cuzk_cuda::MAX_AFFINE_ROUNDS + 1).is_err());
}

/// Scalars with the split MSM's classes mixed (zeros, ones, significant), and the split
/// lists the prover would hand over: base indices of the ones, and the significant
/// scalars with their base indices.
fn split_input(n: usize, seed: u64) -> (Vec<Scalar>, Vec<u32>, Vec<u32>, Vec<Scalar>) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (mut full, mut ones, mut sig_index, mut sig) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let s = match rng.next_u32() % 10 {
            0..=3 => Scalar::ZERO,
            4..=7 => Scalar::ONE,
            _ => Scalar::random(&mut rng),
        };
        if s == Scalar::ONE {
            ones.push(i as u32);
        } else if s != Scalar::ZERO {
            sig_index.push(i as u32);
            sig.push(s);
        }
        full.push(s);
    }
    (full, ones, sig_index, sig)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_split_msm_matches_blstrs() {
    let Some(g) = common::gpu() else { return };
    let msm = GpuMsm::new(g);
    let max = 1 << 18;
    let points = random_points(max, 11);
    let bases = msm.upload_bases::<G1>(&points).unwrap();
    let points2 = random_points_g2(1 << 14, 12);
    let bases2 = msm.upload_bases::<G2>(&points2).unwrap();
    for n in [1usize, 7, 1000, 1 << 14, 1 << 18] {
        let (full, ones, sig_index, sig) = split_input(n, n as u64);
        let (got, t) = msm.msm_split(&bases, &ones, &sig_index, &sig).unwrap();
        assert_eq!(got.to_affine(), G1::multi_exp(&points, &full).to_affine(), "G1 split MSM n = {n}");
        eprintln!("G1 split MSM n = {n} ({} ones, {} significant): matches blstrs; {t:?}", ones.len(), sig.len());
        if n <= 1 << 14 {
            let (got, t) = msm.msm_split(&bases2, &ones, &sig_index, &sig).unwrap();
            assert_eq!(got.to_affine(), G2::multi_exp(&points2, &full).to_affine(), "G2 split MSM n = {n}");
            eprintln!("G2 split MSM n = {n}: matches blstrs; {t:?}");
        }
    }
    // Ones only, significant only, nothing at all.
    let all: Vec<u32> = (0..5000).collect();
    let (got, _) = msm.msm_split(&bases, &all, &[], &[]).unwrap();
    assert_eq!(got.to_affine(), G1::multi_exp(&points, &vec![Scalar::ONE; 5000]).to_affine(), "ones only");
    let sig = common::random_scalars(5000, 13);
    let (got, _) = msm.msm_split(&bases, &[], &all, &sig).unwrap();
    assert_eq!(got.to_affine(), G1::multi_exp(&points, &sig).to_affine(), "significant only");
    assert!(bool::from(msm.msm_split(&bases, &[], &[], &[]).unwrap().0.is_identity()));
    // Bad input is an error, not a crash.
    assert!(msm.msm_split(&bases, &[max as u32], &[], &[]).is_err(), "a one's base index out of range");
    assert!(msm.msm_split(&bases, &[], &[0, 1], &sig[..1]).is_err(), "index and scalar counts differ");
}

/// The split lists built on the device from the compact aux vector equal the host's,
/// for L (every aux value) and a query with a density, over several chunks and a ragged
/// last word: aux values mixing zeros, ones and random scalars, in runs so that chunks
/// differ. Built whole and in pieces of a chunk or two, with the other values resident
/// and sent a window per piece.
#[test]
#[ignore = "needs a CUDA GPU"]
fn split_lists_built_on_the_device_equal_the_hosts() {
    use cuzk_cuda::msm::compact::{CompactView, HostCompact};
    use cuzk_cuda::msm::split::{build_piece, split_lists, split_plan, upload_density, ListSource, PieceLimits, SplitLists, LIST_CHUNK};
    use cuzk_groth16::synthesis::{Density, ScalarClasses};
    let Some(g) = common::gpu() else { return };
    let n = 3 * LIST_CHUNK + 12_345;
    let random = common::random_scalars(n, 0x5911);
    let aux: Vec<Scalar> = (0..n)
        .map(|i| match (i / 1000 + i % 7) % 5 {
            0 | 1 => Scalar::ZERO,
            2 => Scalar::ONE,
            _ => random[i],
        })
        .collect();
    let classes = ScalarClasses::classify(&aux);
    let others: Vec<Scalar> = aux.iter().copied().filter(|v| !bool::from(v.is_zero()) && *v != Scalar::ONE).collect();
    let density = Density::from_fn(n, |i| (i % 3 != 0) || (LIST_CHUNK..2 * LIST_CHUNK).contains(&i));
    let s = g.stream().clone();
    let host = HostCompact { lead: &[], classes: &classes, len: n, others: &others };
    let d_density = upload_density(&s, &density, n).unwrap();
    for resident in [true, false] {
        let layout = host.layout(if resident { usize::MAX } else { 0 }.max(cuzk_cuda::msm::compact::CompactLayout::least_bytes(0, n))).unwrap();
        assert_eq!(layout.others_resident, resident);
        let mut area = s.alloc_zeros::<u64>(layout.words()).unwrap();
        host.upload(&g, &s, &mut area, &layout).unwrap();
        let compact = CompactView::of(&area, &layout).unwrap();
        for (what, dens, first) in [("L", None, 0usize), ("A", Some(&density), 7)] {
            let want = split_lists(&aux, &classes, dens, first).unwrap();
            let plan = split_plan(n, &classes, dens, first).unwrap();
            let table = plan.upload_chunks(&s).unwrap();
            let src = ListSource {
                compact: &compact,
                density: dens.map(|_| &d_density),
                chunk_table: &table,
                others_host: (!resident).then_some(&others[..]),
            };
            for chunks_per_piece in [usize::MAX, 1, 2] {
                let limits =
                    PieceLimits { bytes: usize::MAX, significant: usize::MAX, bases: chunks_per_piece.saturating_mul(LIST_CHUNK), window: !resident };
                let pieces = plan.pieces(limits).unwrap();
                let mut region = s.alloc_zeros::<u32>(plan.whole().bytes(!resident) / 4 + 64).unwrap();
                let mut got = SplitLists::default();
                for p in &pieces {
                    let mut view = region.slice_mut(..);
                    let lists = build_piece(&g, &s, &src, &plan, p, &mut view).unwrap().to_host().unwrap();
                    got.ones.extend(lists.ones);
                    got.sig_index.extend(lists.sig_index);
                    got.sig_scalars.extend(lists.sig_scalars);
                }
                assert_eq!(got.ones, want.ones, "{what}, {chunks_per_piece} chunks a piece, resident {resident}: ones differ");
                assert_eq!(got.sig_index, want.sig_index, "{what}, {chunks_per_piece}, {resident}: significant indices differ");
                assert!(got.sig_scalars == want.sig_scalars, "{what}, {chunks_per_piece}, {resident}: significant scalars differ");
                eprintln!(
                    "{what}: {} ones, {} significant values in {} pieces, equal to the host's",
                    want.ones.len(),
                    want.sig_index.len(),
                    pieces.len()
                );
            }
        }
    }
}
