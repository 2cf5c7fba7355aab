//! The kernels' field arithmetic compiled for the host (tests/host/cuda_shim.h stands in
//! for the CUDA intrinsics, exactly) and checked against blst, so every CI run checks
//! it without a GPU. Needs a C++ compiler (`$CXX`, else `c++`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use blst::blst_fp;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// p's most significant 64-bit limb.
const P_TOP: u64 = 0x1a01_11ea_397f_e69a;
const P: [u64; 6] = [
    0xb9fe_ffff_ffff_aaab,
    0x1eab_fffe_b153_ffff,
    0x6730_d2a0_f6b0_f624,
    0x6477_4b84_f385_12bf,
    0x4b1b_a7b6_434b_acd7,
    P_TOP,
];

fn compile(source: &str, dir: &Path) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let exe = dir.join("host_test");
    let out = Command::new(&cxx)
        .args(["-O2", "-std=c++17", "-frounding-math", "-Wno-unknown-pragmas"])
        .arg("-I")
        .arg(root.join("kernels/ff"))
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
fn fp_add_sub_and_montgomery_product_match_blst() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("fp_ops.cpp", dir.path());
    let mut rng = ChaCha20Rng::seed_from_u64(381);
    let mut random = || {
        let mut l = [0u64; 6];
        l.iter_mut().for_each(|x| *x = rng.next_u64());
        l[5] %= P_TOP; // below p
        blst_fp { l }
    };
    let mut p_minus_1 = P;
    p_minus_1[0] -= 1;
    let edges = [blst_fp { l: [0; 6] }, blst_fp { l: [1, 0, 0, 0, 0, 0] }, blst_fp { l: p_minus_1 }];
    let mut pairs: Vec<(blst_fp, blst_fp)> = Vec::new();
    for a in &edges {
        for b in &edges {
            pairs.push((*a, *b));
        }
    }
    for _ in 0..20_000 {
        pairs.push((random(), random()));
    }
    let input: String = pairs.iter().map(|(a, b)| format!("{} {}\n", hex(a), hex(b))).collect();
    let mut child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
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
        if got[0] != m || got[1] != s || got[2] != d {
            bad += 1;
            if bad < 4 {
                eprintln!("a = {}\nb = {}\n got {line}\nwant {} {} {}", hex(a), hex(b), hex(&m), hex(&s), hex(&d));
            }
        }
    }
    assert_eq!(bad, 0, "{bad} of {} wrong", pairs.len());
}
