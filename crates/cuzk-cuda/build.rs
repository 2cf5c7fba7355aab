//! Compiles kernels/cuzk.cu into one fatbin embedded in the crate.
//!
//! nvcc is looked for in: $NVCC, $CUDA_PATH/bin, $CUDA_HOME/bin, $PATH, /usr/local/cuda/bin,
//! and the toolchain scripts/install-cuda-toolchain.sh installs ($CUZK_CUDA_TOOLCHAIN or
//! ~/.cache/cuzk/cuda-13.0.88). Without any nvcc the crate builds without kernels (the CPU
//! backend still works) and says so. $CUZK_CUDA_ARCHS (e.g. "90") narrows the machine-code
//! targets for quick development builds; by default every one of sm_80, sm_89, sm_90 and
//! sm_120 that the nvcc supports, plus compute_90 PTX.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const DEFAULT_ARCHS: [&str; 4] = ["80", "89", "90", "120"];

fn find_nvcc() -> Option<PathBuf> {
    let exe = |p: PathBuf| p.is_file().then_some(p);
    if let Some(p) = env::var_os("NVCC") {
        match exe(PathBuf::from(&p)) {
            Some(p) => return Some(p),
            None => println!("cargo::warning=NVCC={} is not a file; looking elsewhere", PathBuf::from(p).display()),
        }
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(p) = env::var_os(var).and_then(|d| exe(Path::new(&d).join("bin/nvcc"))) {
            return Some(p);
        }
    }
    if let Some(path) = env::var_os("PATH") {
        if let Some(p) = env::split_paths(&path).find_map(|d| exe(d.join("nvcc"))) {
            return Some(p);
        }
    }
    if let Some(p) = exe(PathBuf::from("/usr/local/cuda/bin/nvcc")) {
        return Some(p);
    }
    exe(toolchain_nvcc()?)
}

/// Where scripts/install-cuda-toolchain.sh puts nvcc.
fn toolchain_nvcc() -> Option<PathBuf> {
    let toolchain = env::var_os("CUZK_CUDA_TOOLCHAIN").map(PathBuf::from).or_else(|| {
        let cache = env::var_os("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(cache.join("cuzk/cuda-13.0.88"))
    })?;
    Some(toolchain.join("nvidia/cu13/bin/nvcc"))
}

fn supported_archs(nvcc: &Path) -> Vec<String> {
    let out = Command::new(nvcc).arg("--list-gpu-code").output().unwrap_or_else(|e| panic!("running {} --list-gpu-code: {e}", nvcc.display()));
    if !out.status.success() {
        panic!("{} --list-gpu-code failed ({}): {}", nvcc.display(), out.status, String::from_utf8_lossy(&out.stderr));
    }
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    DEFAULT_ARCHS.iter().filter(|a| listed.lines().any(|l| l.trim() == format!("sm_{a}"))).map(|a| a.to_string()).collect()
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cuzk_kernels)");
    println!("cargo::rerun-if-changed=kernels");
    for var in ["NVCC", "CUDA_PATH", "CUDA_HOME", "CUZK_CUDA_ARCHS", "CUZK_CUDA_TOOLCHAIN", "PATH", "HOME", "XDG_CACHE_HOME"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    // Rebuild once the pinned toolchain appears (a build made before
    // scripts/install-cuda-toolchain.sh ran would otherwise stay CPU-only).
    if let Some(t) = toolchain_nvcc() {
        println!("cargo::rerun-if-changed={}", t.display());
    }
    let Some(nvcc) = find_nvcc() else {
        println!(
            "cargo::warning=no nvcc found: cuzk is built without CUDA kernels (CPU backend only); \
             scripts/install-cuda-toolchain.sh installs the pinned compiler"
        );
        return;
    };
    let archs: Vec<String> = match env::var("CUZK_CUDA_ARCHS") {
        Ok(list) if !list.trim().is_empty() => list.split(',').map(|a| a.trim().trim_start_matches("sm_").to_string()).collect(),
        _ => supported_archs(&nvcc),
    };
    if archs.is_empty() {
        panic!("{} supports none of the GPU architectures sm_{}", nvcc.display(), DEFAULT_ARCHS.join(", sm_"));
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("cuzk.fatbin");
    let mut cmd = Command::new(&nvcc);
    cmd.args(["-fatbin", "-O3", "-std=c++17", "-Xptxas", "-warn-spills"]);
    for a in &archs {
        cmd.arg(format!("-gencode=arch=compute_{a},code=sm_{a}"));
    }
    // PTX for newer GPUs, which the driver compiles at load.
    cmd.arg("-gencode=arch=compute_90,code=compute_90");
    cmd.arg("-o").arg(&out).arg("kernels/cuzk.cu");
    let status = cmd.status().unwrap_or_else(|e| panic!("running {}: {e}", nvcc.display()));
    if !status.success() {
        panic!("nvcc failed to compile the CUDA kernels ({status}); command: {cmd:?}");
    }
    println!("cargo::rustc-cfg=cuzk_kernels");
    println!("cargo::rustc-env=CUZK_CUDA_ARCHS_BUILT=sm_{}", archs.join(",sm_"));
}
