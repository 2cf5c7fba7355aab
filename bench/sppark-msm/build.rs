//! Compiles the sppark wrapper (cuda/sppark_g1.cu) with the nvcc the kernels use: $NVCC
//! (cc's own lookup), else `nvcc` on PATH; build.sh sets it to the pinned one.
//! Targets: CUZK_CUDA_ARCHS (e.g. "90"), default 90 (the H200).

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=cuda/sppark_g1.cu");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=CUZK_CUDA_ARCHS");
    println!("cargo:rerun-if-env-changed=CUZK_CCCL_INCLUDE");
    let sppark = env::var("DEP_SPPARK_ROOT").expect("the sppark crate names its headers (DEP_SPPARK_ROOT)");
    let blst = env::var("DEP_BLST_C_SRC").expect("the blst crate names its sources (DEP_BLST_C_SRC)");
    let archs = env::var("CUZK_CUDA_ARCHS").unwrap_or_else(|_| "90".into());
    let mut nvcc = cc::Build::new();
    // No debug info: with it cc passes -G, device code without optimisation.
    nvcc.cuda(true).cudart("static").debug(false).include(sppark).include(blst).flag("-Xcompiler").flag("-Wno-unused-function");
    // CUDA's C++ core library (cooperative groups include it): build.sh installs it.
    if let Ok(cccl) = env::var("CUZK_CCCL_INCLUDE") {
        nvcc.flag("-isystem").flag(format!("{cccl}/cccl")).include(cccl);
    }
    // The pinned toolchain keeps cudart_static under lib/, where nvcc's profile does not look.
    if let Some(lib) = env::var_os("NVCC").map(std::path::PathBuf::from).and_then(|n| Some(n.parent()?.parent()?.join("lib"))) {
        println!("cargo:rustc-link-search=native={}", lib.display());
    }
    for arch in archs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        nvcc.flag(format!("-gencode=arch=compute_{arch},code=sm_{arch}"));
    }
    // sppark's host-side field type calls blst's Montgomery products; blst's library
    // exports only their ADX (mulx) versions, which __ADX__ names.
    nvcc.define("__ADX__", None);
    nvcc.file("cuda/sppark_g1.cu").compile("sppark_g1");
    // After the wrapper, which needs it: sppark's GPU selection (its build made the
    // library; nothing of sppark's Rust side is used, so rustc would not link it).
    println!("cargo:rustc-link-lib=static=sppark_cuda");
}
