//! GPU tests of the field arithmetic, the NTTs and the H polynomial against the CPU.
//! They need a CUDA device: marked ignored, run with `--include-ignored` on a GPU
//! machine, and they print why and return where no device is usable.

use blstrs::Scalar;
use cuzk_cuda::field::{binary_op, FrOp};
use cuzk_cuda::{GpuNtt, NttKind};
use cuzk_groth16::domain::Domain;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

mod common;

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_field_arithmetic_matches_cpu() {
    let Some(g) = common::gpu() else { return };
    let mut x = common::random_scalars(1 << 20, 1);
    let mut y = common::random_scalars(1 << 20, 2);
    let edge = [Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(2u64), -Scalar::from(2u64)];
    for (i, a) in edge.iter().enumerate() {
        for (j, b) in edge.iter().enumerate() {
            x[i * edge.len() + j] = *a;
            y[i * edge.len() + j] = *b;
        }
    }
    for (op, f) in [
        (FrOp::Add, (|a: &Scalar, b: &Scalar| a + b) as fn(&Scalar, &Scalar) -> Scalar),
        (FrOp::Sub, |a, b| a - b),
        (FrOp::Mul, |a, b| a * b),
        (FrOp::MulInt, |a, b| a * b),
        (FrOp::MulFp64, |a, b| a * b),
    ] {
        let got = binary_op(&g, op, &x, &y).unwrap();
        let bad = x.iter().zip(&y).zip(&got).filter(|((a, b), r)| f(a, b) != **r).count();
        assert_eq!(bad, 0, "{op:?}: {bad} wrong results");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_fp_arithmetic_matches_blst() {
    use cuzk_cuda::field::{fp_binary_op, DeviceFp, FpOp};
    let Some(g) = common::gpu() else { return };
    let mut rng = ChaCha20Rng::seed_from_u64(3810);
    let edges = common::edge_fp_limbs();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for a in &edges {
        for b in &edges {
            x.push(*a);
            y.push(*b);
        }
    }
    for _ in 0..(1 << 20) {
        x.push(common::random_fp_limbs(&mut rng));
        y.push(common::random_fp_limbs(&mut rng));
    }
    let dx: Vec<DeviceFp> = x.iter().map(DeviceFp::from_u64_limbs).collect();
    let dy: Vec<DeviceFp> = y.iter().map(DeviceFp::from_u64_limbs).collect();
    type BlstOp = unsafe extern "C" fn(*mut blst::blst_fp, *const blst::blst_fp, *const blst::blst_fp);
    for (op, f) in [(FpOp::Add, blst::blst_fp_add as BlstOp), (FpOp::Sub, blst::blst_fp_sub), (FpOp::Mul, blst::blst_fp_mul)] {
        let got = fp_binary_op(&g, op, &dx, &dy).unwrap();
        let mut bad = 0;
        for ((a, b), r) in x.iter().zip(&y).zip(&got) {
            let mut want = blst::blst_fp::default();
            // SAFETY: blst's field operation on fully reduced elements.
            unsafe { f(&mut want, &blst::blst_fp { l: *a }, &blst::blst_fp { l: *b }) };
            bad += (want.l != r.to_u64_limbs()) as usize;
        }
        assert_eq!(bad, 0, "{op:?}: {bad} of {} wrong", x.len());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_ntt_matches_cpu_for_every_size_to_2_24() {
    let Some(g) = common::gpu() else { return };
    let ntt = GpuNtt::new(g);
    for log_n in 1..=24u32 {
        let d = Domain::new(log_n).unwrap();
        let input = common::random_scalars(1 << log_n, 100 + log_n as u64);
        for kind in [NttKind::Forward, NttKind::Inverse, NttKind::CosetForward, NttKind::CosetInverse] {
            let mut cpu = input.clone();
            match kind {
                NttKind::Forward => d.fft(&mut cpu),
                NttKind::Inverse => d.ifft(&mut cpu),
                NttKind::CosetForward => d.coset_fft(&mut cpu),
                NttKind::CosetInverse => d.icoset_fft(&mut cpu),
            }
            ntt.poison_workspace(1 << log_n).unwrap();
            let mut gpu = input.clone();
            ntt.transform_host(kind, &mut gpu).unwrap();
            let bad = cpu.iter().zip(&gpu).filter(|(a, b)| a != b).count();
            assert_eq!(bad, 0, "2^{log_n} {kind:?}: {bad} of {} elements differ", 1 << log_n);
        }
        // inverse ∘ forward = identity, on the GPU alone.
        let mut v = input.clone();
        ntt.transform_host(NttKind::Forward, &mut v).unwrap();
        ntt.transform_host(NttKind::Inverse, &mut v).unwrap();
        assert!(v == input, "2^{log_n}: ifft(fft(x)) != x");
        eprintln!("2^{log_n}: forward, inverse, coset forward, coset inverse match the CPU");
    }
}

fn check_h_polynomial(ntt: &GpuNtt, log_n: u32, len: usize) {
    let n = 1usize << log_n;
    let (a, b, c) = (
        common::random_scalars(len, 1000 + log_n as u64),
        common::random_scalars(len, 2000 + log_n as u64),
        common::random_scalars(len, 3000 + log_n as u64),
    );
    let d = Domain::new(log_n).unwrap();
    let pad = |v: &[Scalar]| {
        let mut p = v.to_vec();
        p.resize(n, Scalar::ZERO);
        p
    };
    let (mut ca, mut cb, mut cc) = (pad(&a), pad(&b), pad(&c));
    d.h_polynomial(&mut ca, &mut cb, &mut cc);
    ntt.poison_workspace(n).unwrap();
    let mut out = vec![Scalar::from(0xdead_beefu64); n];
    let t = ntt.h_polynomial(&a, &b, &c, &mut out).unwrap();
    let bad = ca.iter().zip(&out).filter(|(x, y)| x != y).count();
    assert_eq!(bad, 0, "H polynomial 2^{log_n}: {bad} of {n} coefficients differ");
    eprintln!("H polynomial 2^{log_n} (input {len}) matches the CPU: {t:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_h_polynomial_matches_cpu() {
    let Some(g) = common::gpu() else { return };
    let ntt = GpuNtt::new(g);
    for (log_n, len) in [(0u32, 1usize), (1, 2), (5, 20), (10, 1000), (11, 2000), (13, 8000), (16, 65536), (20, (1 << 20) - 328)] {
        check_h_polynomial(&ntt, log_n, len);
    }
}

#[test]
#[ignore = "needs a CUDA GPU and ~60 GB of host memory"]
fn gpu_h_polynomial_and_ntt_at_2_27() {
    let Some(g) = common::gpu() else { return };
    let ntt = GpuNtt::new(g);
    let log_n = 27;
    let d = Domain::new(log_n).unwrap();
    let input = common::random_scalars(1 << log_n, 27);
    let mut cpu = input.clone();
    d.fft(&mut cpu);
    let mut gpu = input;
    ntt.transform_host(NttKind::Forward, &mut gpu).unwrap();
    assert!(cpu == gpu, "forward NTT 2^27 differs from the CPU");
    drop((cpu, gpu));
    check_h_polynomial(&ntt, 27, 130_279_197);
}

/// Twiddle tables cut short (the stages past them compute their twiddles, as on a card
/// with little memory) give the same transforms and H polynomial, from the least table
/// (the blocked stages only) to all but the last stage.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_ntt_with_short_twiddle_tables_matches_cpu() {
    use cuzk_cuda::ntt::{domain_bytes, twiddle_table_bytes};
    let Some(g) = common::gpu() else { return };
    for log_n in [12u32, 19, 22] {
        for table_log in [10u32, log_n - 2, log_n - 1] {
            let ntt = GpuNtt::new(g.clone());
            ntt.set_table_bytes(twiddle_table_bytes(table_log)).unwrap();
            assert_eq!(ntt.table_log(log_n), table_log);
            let d = Domain::new(log_n).unwrap();
            let input = common::random_scalars(1 << log_n, 700 + log_n as u64);
            for kind in [NttKind::Forward, NttKind::Inverse, NttKind::CosetForward, NttKind::CosetInverse] {
                let mut cpu = input.clone();
                match kind {
                    NttKind::Forward => d.fft(&mut cpu),
                    NttKind::Inverse => d.ifft(&mut cpu),
                    NttKind::CosetForward => d.coset_fft(&mut cpu),
                    NttKind::CosetInverse => d.icoset_fft(&mut cpu),
                }
                let mut gpu = input.clone();
                ntt.transform_host(kind, &mut gpu).unwrap();
                assert!(cpu == gpu, "2^{log_n} {kind:?} with tables to stage {table_log}: differs from the CPU");
            }
            check_h_polynomial(&ntt, log_n, (1 << log_n) - 5);
            assert_eq!(ntt.bytes_held(), domain_bytes(log_n, table_log), "2^{log_n}: other tables than the budget allows were kept");
            eprintln!("2^{log_n}, tables to stage {table_log}: transforms and H polynomial match the CPU");
        }
    }
}
