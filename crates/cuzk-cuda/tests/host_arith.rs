//! The kernels' field and curve arithmetic compiled for the host (tests/host/cuda_shim.h stands in
//! for the CUDA intrinsics, exactly) and checked against blst, so every CI run checks
//! it without a GPU. Needs a C++ compiler (`$CXX`, else `c++`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use blst::blst_fp;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

mod common;

fn compile(source: &str, dir: &Path) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let exe = dir.join("host_test");
    let out = Command::new(&cxx)
        .args(["-O2", "-std=c++17", "-frounding-math", "-Wno-unknown-pragmas"])
        .arg("-I")
        .arg(root.join("kernels/ff"))
        .arg("-I")
        .arg(root.join("kernels"))
        .arg("-I")
        .arg(root.join("tests/host"))
        .arg(root.join("tests/host").join(source))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("running the C++ compiler {cxx:?} (set CXX to choose another): {e}"));
    assert!(out.status.success(), "compiling {source}:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

fn hex(x: &blst_fp) -> String {
    x.l.iter().rev().map(|w| format!("{w:016x}")).collect()
}

fn parse(s: &str) -> blst_fp {
    let mut l = [0u64; 6];
    for (i, limb) in l.iter_mut().rev().enumerate() {
        *limb = u64::from_str_radix(&s[16 * i..16 * i + 16], 16).unwrap();
    }
    blst_fp { l }
}

#[test]
fn fp_add_sub_and_both_montgomery_products_match_blst() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("fp_ops.cpp", dir.path());
    let mut rng = ChaCha20Rng::seed_from_u64(381);
    let edges = common::edge_fp_limbs().map(|l| blst_fp { l });
    let mut pairs: Vec<(blst_fp, blst_fp)> = Vec::new();
    for a in &edges {
        for b in &edges {
            pairs.push((*a, *b));
        }
    }
    for _ in 0..20_000 {
        pairs.push((blst_fp { l: common::random_fp_limbs(&mut rng) }, blst_fp { l: common::random_fp_limbs(&mut rng) }));
    }
    let input: String = pairs.iter().map(|(a, b)| format!("{} {}\n", hex(a), hex(b))).collect();
    let text = run(&exe, input);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), pairs.len());
    let mut bad = 0;
    for ((a, b), line) in pairs.iter().zip(&lines) {
        let got: Vec<blst_fp> = line.split(' ').map(parse).collect();
        let (mut m, mut s, mut d) = (blst_fp::default(), blst_fp::default(), blst_fp::default());
        // SAFETY: blst's field operations on valid, fully reduced elements.
        unsafe {
            blst::blst_fp_mul(&mut m, a, b);
            blst::blst_fp_add(&mut s, a, b);
            blst::blst_fp_sub(&mut d, a, b);
        }
        if got[0] != m || got[1] != s || got[2] != d || got[3] != m {
            bad += 1;
            if bad < 4 {
                eprintln!("a = {}\nb = {}\n got {line}\nwant {} {} {}", hex(a), hex(b), hex(&m), hex(&s), hex(&d));
            }
        }
    }
    assert_eq!(bad, 0, "{bad} of {} wrong", pairs.len());
}

fn run(exe: &Path, input: String) -> String {
    let mut child = Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

mod g1 {
    use blst::*;

    pub fn mul_gen(k: u64) -> blst_p1 {
        let mut out = blst_p1::default();
        let bytes = k.to_le_bytes();
        // SAFETY: blst point arithmetic on valid points; the scalar is 64 bits long.
        unsafe { blst_p1_mult(&mut out, blst_p1_generator(), bytes.as_ptr(), 64) };
        out
    }

    pub fn affine(p: &blst_p1) -> blst_p1_affine {
        let mut a = blst_p1_affine::default();
        // SAFETY: as above.
        unsafe { blst_p1_to_affine(&mut a, p) };
        a
    }

    pub fn add(p: &blst_p1, q: &blst_p1) -> blst_p1 {
        let mut out = blst_p1::default();
        // SAFETY: as above; add_or_double handles equal points and infinity.
        unsafe { blst_p1_add_or_double(&mut out, p, q) };
        out
    }

    pub fn from_affine(a: &blst_p1_affine) -> blst_p1 {
        let mut p = blst_p1::default();
        // SAFETY: as above.
        unsafe { blst_p1_from_affine(&mut p, a) };
        p
    }

    /// (X/ZZ, Y/ZZZ), or (0, 0) for ZZ = 0.
    pub fn xyzz_to_affine(x: &blst_fp, y: &blst_fp, zz: &blst_fp, zzz: &blst_fp) -> blst_p1_affine {
        if zz.l == [0; 6] {
            return blst_p1_affine::default();
        }
        let (mut izz, mut izzz, mut ax, mut ay) = (blst_fp::default(), blst_fp::default(), blst_fp::default(), blst_fp::default());
        // SAFETY: field operations on reduced elements; zz and zzz are non-zero.
        unsafe {
            blst_fp_inverse(&mut izz, zz);
            blst_fp_inverse(&mut izzz, zzz);
            blst_fp_mul(&mut ax, x, &izz);
            blst_fp_mul(&mut ay, y, &izzz);
        }
        blst_p1_affine { x: ax, y: ay }
    }
}

#[test]
fn g1_xyzz_formulas_match_blst_including_doubling_inverse_and_infinity() {
    use blst::{blst_p1, blst_p1_affine};
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("g1_ops.cpp", dir.path());
    let mut rng = ChaCha20Rng::seed_from_u64(1381);
    let mut pairs: Vec<(blst_p1_affine, blst_p1_affine)> = Vec::new();
    for i in 0..300 {
        let a = g1::affine(&g1::mul_gen(rng.next_u64() | 1));
        let b = match i % 4 {
            0 => a, // B = A
            1 => {
                // B = −A
                let mut neg = g1::from_affine(&a);
                // SAFETY: negation of a valid point.
                unsafe { blst::blst_p1_cneg(&mut neg, true) };
                g1::affine(&neg)
            }
            2 => blst_p1_affine::default(), // infinity
            _ => g1::affine(&g1::mul_gen(rng.next_u64() | 1)),
        };
        pairs.push((a, b));
    }
    // A = infinity too.
    pairs.push((blst_p1_affine::default(), g1::affine(&g1::mul_gen(5))));
    let fp_hex = |x: &blst::blst_fp| hex(x);
    let input: String = pairs.iter().map(|(a, b)| format!("{} {} {} {}\n", fp_hex(&a.x), fp_hex(&a.y), fp_hex(&b.x), fp_hex(&b.y))).collect();
    let text = run(&exe, input);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), pairs.len());
    let mut bad = 0;
    for ((a, b), line) in pairs.iter().zip(&lines) {
        let f: Vec<blst::blst_fp> = line.split_whitespace().map(parse).collect();
        assert_eq!(f.len(), 28);
        let got: Vec<blst_p1_affine> = f.chunks(4).map(|c| g1::xyzz_to_affine(&c[0], &c[1], &c[2], &c[3])).collect();
        let (pa, pb) = (g1::from_affine(a), g1::from_affine(b));
        let sum = g1::add(&pa, &pb);
        let two = g1::add(&pa, &pa);
        let three_plus = g1::add(&sum, &two);
        let want: [blst_p1; 7] = [sum, two, three_plus, two, g1::add(&two, &two), blst_p1::default(), three_plus];
        for (k, (g, w)) in got.iter().zip(want.iter()).enumerate() {
            if *g != g1::affine(w) {
                bad += 1;
                if bad < 4 {
                    eprintln!("case {k}: A = {} {}, B = {} {}", hex(&a.x), hex(&a.y), hex(&b.x), hex(&b.y));
                }
            }
        }
    }
    assert_eq!(bad, 0, "{bad} wrong results");
}

/// r, the scalar-field modulus, as four little-endian 64-bit limbs.
const FR_MODULUS: [u64; 4] = [0xffff_ffff_0000_0001, 0x53bd_a402_fffe_5bfe, 0x3339_d808_09a1_d805, 0x73ed_a753_299d_7d48];

#[test]
fn msm_signed_digits_reconstruct_the_scalar() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("msm_digits.cpp", dir.path());
    let mut rng = ChaCha20Rng::seed_from_u64(255);
    let mut r_minus_1 = FR_MODULUS;
    r_minus_1[0] -= 1;
    let mut scalars: Vec<[u64; 4]> = vec![[0; 4], [1, 0, 0, 0], r_minus_1, [u64::MAX, u64::MAX, 0, 0]];
    for _ in 0..200 {
        let mut s = [0u64; 4];
        s.iter_mut().for_each(|x| *x = rng.next_u64());
        s[3] %= FR_MODULUS[3]; // below r
        scalars.push(s);
    }
    let mut input = String::new();
    let mut cases = Vec::new();
    for c in 4..=16u32 {
        for s in &scalars {
            let words: String = s.iter().rev().map(|l| format!("{:08x}{:08x}", l >> 32, l & 0xffff_ffff)).collect();
            input.push_str(&format!("{c} {words}\n"));
            cases.push((c, *s));
        }
    }
    let mut child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    // Feed the input from another thread: both pipes exceed their buffers.
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), cases.len());
    for ((c, s), line) in cases.iter().zip(lines) {
        let digits: Vec<i64> = line.split_whitespace().map(|d| d.parse().unwrap()).collect();
        assert_eq!(digits.len() as u32, 255 / c + 1);
        // Every digit fits a bucket: |d| ≤ 2^(c−1).
        assert!(digits.iter().all(|d| d.unsigned_abs() <= 1 << (c - 1)), "c = {c}: digit out of range");
        // Σ d_w·2^(c·w) by Horner in 320-bit two's complement (exact: |Σ| < 2^320).
        let mut acc = [0u64; 5];
        for &d in digits.iter().rev() {
            let mut shifted = [0u64; 5];
            for i in 0..5 {
                shifted[i] = acc[i] << c | if i > 0 { acc[i - 1] >> (64 - c) } else { 0 };
            }
            let ext = if d < 0 { u64::MAX } else { 0 };
            let add = [d as u64, ext, ext, ext, ext];
            let mut carry = 0u64;
            for i in 0..5 {
                let (t, o1) = shifted[i].overflowing_add(add[i]);
                let (t, o2) = t.overflowing_add(carry);
                acc[i] = t;
                carry = (o1 || o2) as u64;
            }
        }
        assert_eq!(acc, [s[0], s[1], s[2], s[3], 0], "c = {c}: digits of {s:x?} do not sum to it");
    }
}
