//! Compiles kernels/cuzk.cu into one fatbin embedded in the crate.
//!
//! nvcc is looked for in: $NVCC, $CUDA_PATH/bin, $CUDA_HOME/bin, $PATH, /usr/local/cuda/bin,
//! and the toolchain scripts/install-cuda-toolchain.sh installs ($CUZK_CUDA_TOOLCHAIN or
//! ~/.cache/cuzk/cuda-13.0.88). Without any nvcc the crate builds without kernels (the CPU
//! backend still works) and says so. $CUZK_CUDA_ARCHS (e.g. "90") narrows the machine-code
//! targets for quick development builds; by default every one of sm_80, sm_89, sm_90 and
//! sm_120 that the nvcc supports, plus compute_90 PTX.
//!
//! When this script runs again: when the kernels change, when a variable that names the
//! compiler or the targets changes, when the nvcc found is replaced (an upgrade in place),
//! and when a directory searched before it changes (an nvcc may have appeared there). Not
//! when PATH or HOME alone change: activating a virtual environment must not cost a kernel
//! build (minutes). A new compiler that appears only through a changed PATH is therefore not
//! noticed; set NVCC, or `cargo clean -p cuzk-cuda`. And when it runs, the fatbin is
//! compiled only if the compiler (path and `nvcc --version`), the targets or the kernel
//! sources differ from the last build's (a stamp beside the fatbin in OUT_DIR).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const DEFAULT_ARCHS: [&str; 4] = ["80", "89", "90", "120"];

/// One place nvcc may be, in search order, and the directory to watch while it is not
/// there (an nvcc created in it would take precedence over one found later).
struct Candidate {
    nvcc: PathBuf,
    watch: Option<PathBuf>,
}

/// Its own directory, when that exists. Never a path that does not exist (cargo would run
/// this script on every build), never a parent beyond it (cargo scans a watched directory
/// recursively).
fn own_dir(nvcc: PathBuf) -> Candidate {
    let watch = nvcc.parent().filter(|d| d.is_dir()).map(Path::to_owned);
    Candidate { nvcc, watch }
}

fn candidates() -> Vec<Candidate> {
    let mut c = Vec::new();
    if let Some(p) = env::var_os("NVCC") {
        c.push(own_dir(PathBuf::from(p)));
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(d) = env::var_os(var) {
            c.push(own_dir(Path::new(&d).join("bin/nvcc")));
        }
    }
    if let Some(path) = env::var_os("PATH") {
        // Relative entries are skipped: what they name depends on the directory cargo
        // runs this script in.
        c.extend(env::split_paths(&path).filter(|d| d.is_absolute()).map(|d| own_dir(d.join("nvcc"))));
    }
    c.push(own_dir(PathBuf::from("/usr/local/cuda/bin/nvcc")));
    if let Some((cache, nvcc)) = toolchain_nvcc() {
        // scripts/install-cuda-toolchain.sh creates the toolchain's folder whole: watch
        // its nearest existing ancestor, up to the cache folder.
        let watch = nvcc.ancestors().skip(1).take_while(|d| d.starts_with(&cache)).find(|d| d.is_dir()).map(Path::to_owned);
        c.push(Candidate { nvcc, watch });
    }
    c
}

/// Where scripts/install-cuda-toolchain.sh puts nvcc, and the cache folder it is under.
fn toolchain_nvcc() -> Option<(PathBuf, PathBuf)> {
    let toolchain = match env::var_os("CUZK_CUDA_TOOLCHAIN") {
        Some(t) => PathBuf::from(t),
        None => {
            let cache = env::var_os("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            cache.join("cuzk/cuda-13.0.88")
        }
    };
    let nvcc = toolchain.join("nvidia/cu13/bin/nvcc");
    // With CUZK_CUDA_TOOLCHAIN the folder is the operator's: only it is watched.
    let root = if env::var_os("CUZK_CUDA_TOOLCHAIN").is_some() { toolchain } else { toolchain.parent()?.parent()?.to_owned() };
    Some((root, nvcc))
}

/// The first candidate that is a file, and the directories of those before it.
fn find_nvcc() -> (Option<PathBuf>, Vec<PathBuf>) {
    let mut watched = Vec::new();
    for c in candidates() {
        if c.nvcc.is_file() {
            return (Some(c.nvcc), watched);
        }
        if c.nvcc.as_os_str() == env::var_os("NVCC").unwrap_or_default() {
            println!("cargo::warning=NVCC={} is not a file; looking elsewhere", c.nvcc.display());
        }
        watched.extend(c.watch);
    }
    (None, watched)
}

fn supported_archs(nvcc: &Path) -> Vec<String> {
    let out = Command::new(nvcc).arg("--list-gpu-code").output().unwrap_or_else(|e| panic!("running {} --list-gpu-code: {e}", nvcc.display()));
    if !out.status.success() {
        panic!("{} --list-gpu-code failed ({}): {}", nvcc.display(), out.status, String::from_utf8_lossy(&out.stderr));
    }
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    DEFAULT_ARCHS.iter().filter(|a| listed.lines().any(|l| l.trim() == format!("sm_{a}"))).map(|a| a.to_string()).collect()
}

fn nvcc_version(nvcc: &Path) -> String {
    let out = Command::new(nvcc).arg("--version").output().unwrap_or_else(|e| panic!("running {} --version: {e}", nvcc.display()));
    if !out.status.success() {
        panic!("{} --version failed ({}): {}", nvcc.display(), out.status, String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// FNV-1a over every file under `dir` (paths and contents, in sorted order): the kernel
/// sources' part of the stamp. Stable across Rust releases, unlike `DefaultHasher`.
fn sources_digest(dir: &Path) -> u64 {
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())).filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                files(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    files(dir, &mut all);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for p in all {
        eat(p.to_string_lossy().as_bytes());
        eat(&std::fs::read(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display())));
    }
    h
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cuzk_kernels)");
    println!("cargo::rerun-if-changed=kernels");
    // The variables that name the compiler or the targets; PATH and HOME are not among
    // them (see the top of this file).
    for var in ["NVCC", "CUDA_PATH", "CUDA_HOME", "CUZK_CUDA_ARCHS", "CUZK_CUDA_TOOLCHAIN", "XDG_CACHE_HOME"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let (nvcc, mut watched) = find_nvcc();
    watched.sort();
    watched.dedup();
    for d in &watched {
        println!("cargo::rerun-if-changed={}", d.display());
    }
    let Some(nvcc) = nvcc else {
        println!(
            "cargo::warning=no nvcc found: cuzk is built without CUDA kernels (CPU backend only); \
             scripts/install-cuda-toolchain.sh installs the pinned compiler"
        );
        return;
    };
    // Replaced in place (an upgrade): its modification time changes.
    println!("cargo::rerun-if-changed={}", nvcc.display());
    let archs: Vec<String> = match env::var("CUZK_CUDA_ARCHS") {
        Ok(list) if !list.trim().is_empty() => list.split(',').map(|a| a.trim().trim_start_matches("sm_").to_string()).collect(),
        _ => supported_archs(&nvcc),
    };
    if archs.is_empty() {
        panic!("{} supports none of the GPU architectures sm_{}", nvcc.display(), DEFAULT_ARCHS.join(", sm_"));
    }
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let out = out_dir.join("cuzk.fatbin");
    let stamp_path = out_dir.join("cuzk.fatbin.stamp");
    let mut cmd = Command::new(&nvcc);
    cmd.args(["-fatbin", "-O3", "-std=c++17", "-Xptxas", "-warn-spills"]);
    for a in &archs {
        cmd.arg(format!("-gencode=arch=compute_{a},code=sm_{a}"));
    }
    // PTX for newer GPUs, which the driver compiles at load.
    cmd.arg("-gencode=arch=compute_90,code=compute_90");
    cmd.arg("-o").arg(&out).arg("kernels/cuzk.cu");
    let stamp = format!("{cmd:?}\n{}\nsources {:016x}\n", nvcc_version(&nvcc), sources_digest(Path::new("kernels")));
    let unchanged = out.is_file() && std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp);
    if !unchanged {
        // The old stamp goes first, so an interrupted compile leaves no stamp beside a
        // partial fatbin.
        let _ = std::fs::remove_file(&stamp_path);
        let status = cmd.status().unwrap_or_else(|e| panic!("running {}: {e}", nvcc.display()));
        if !status.success() {
            panic!("nvcc failed to compile the CUDA kernels ({status}); command: {cmd:?}");
        }
        std::fs::write(&stamp_path, &stamp).unwrap_or_else(|e| panic!("writing {}: {e}", stamp_path.display()));
    }
    println!("cargo::rustc-cfg=cuzk_kernels");
    println!("cargo::rustc-env=CUZK_CUDA_ARCHS_BUILT=sm_{}", archs.join(",sm_"));
}
