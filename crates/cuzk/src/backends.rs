//! Where the commands prove: the backend a `--backend` choice gives (the GPU, or the
//! CPU and why), the daemon's GPU backends, the setup's fixed-base multiplications, and
//! parameter files read for a backend.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use cuzk_groth16::format::{read_params_placed, PointCheck};
use cuzk_groth16::generator::{CpuFixedBase, FixedBaseMul};
use cuzk_groth16::params::QueryPoints;
use cuzk_groth16::{CpuBackend, ParameterSet, ProvingBackend};

use crate::progress::Bars;

/// Which proving backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// The GPU backend on CUDA device 0 when this build has kernels and the machine a
    /// usable GPU; otherwise the CPU backend (the log says which, and why).
    Auto,
    /// The CPU backend.
    Cpu,
    /// The GPU backend on CUDA device 0 (an error where none is usable).
    Cuda,
}

/// The backend for `kind`.
pub fn backend(kind: BackendKind) -> Result<Box<dyn ProvingBackend>> {
    Ok(backend_on(kind)?.0)
}

/// The GPU that `kind` runs on: device 0 for `cuda` (an error where none is usable),
/// device 0 or none for `auto` (the log says why none), none for `cpu`.
pub fn gpu_for(kind: BackendKind) -> Result<Option<Arc<cuzk_cuda::Gpu>>> {
    Ok(match kind {
        BackendKind::Cpu => None,
        BackendKind::Cuda => Some(cuzk_cuda::Gpu::open(0).context("--backend cuda: no usable GPU")?),
        BackendKind::Auto => match cuzk_cuda::device_count() {
            Ok(_) => Some(cuzk_cuda::Gpu::open(0).context("opening GPU 0 (use --backend cpu to run on the CPU)")?),
            Err(why) => {
                tracing::info!(reason = %why, "no usable GPU: running on the CPU");
                None
            }
        },
    })
}

/// A backend, and its GPU when it runs on one (for pinned buffers).
pub type BackendOn = (Box<dyn ProvingBackend>, Option<Arc<cuzk_cuda::Gpu>>);

/// The backend for `kind`, and its GPU when it runs on one.
pub fn backend_on(kind: BackendKind) -> Result<BackendOn> {
    backend_planned(kind, cuzk_cuda::Overrides::default(), None)
}

/// [`backend_on`], a GPU backend choosing as `overrides` say where its device plan
/// would choose otherwise, within `limit` bytes of device memory.
pub fn backend_planned(kind: BackendKind, overrides: cuzk_cuda::Overrides, limit: Option<usize>) -> Result<BackendOn> {
    let gpu = gpu_for(kind)?;
    let backend: Box<dyn ProvingBackend> = match &gpu {
        Some(g) => Box::new(cuzk_cuda::CudaBackend::new(g.clone()).with_overrides(overrides)?.with_memory_limit(limit)),
        None if overrides != cuzk_cuda::Overrides::default() || limit.is_some() => {
            bail!("streaming the parameters' points or a device memory limit needs a GPU backend")
        }
        None => Box::new(CpuBackend::new()),
    };
    Ok((backend, gpu))
}

/// The fixed-base multiplications of a setup: on `gpu` when there is one.
pub fn fixed_base_on(gpu: Option<&Arc<cuzk_cuda::Gpu>>) -> Result<Box<dyn FixedBaseMul>> {
    let mul: Box<dyn FixedBaseMul> = match gpu {
        Some(g) => Box::new(cuzk_cuda::GpuFixedBase::new(g.clone()).context("uploading the fixed-base tables to the GPU")?),
        None => Box::new(CpuFixedBase::new()),
    };
    tracing::info!(on = %mul.name(), "setup: fixed-base multiplications");
    Ok(mul)
}

/// One GPU backend per device in `devices` (every device when empty), each holding at
/// most its `limits` entry of device memory (gpus.device_memory_limit: none, one for
/// every device, or one per device). None when `devices` is empty and the machine has
/// no usable GPU (the caller falls back to the CPU); an error when a device that was
/// asked for cannot be used.
pub fn cuda_backends(devices: &[u32], limits: &[u64]) -> Result<Option<Vec<Arc<cuzk_cuda::CudaBackend>>>> {
    let count = match cuzk_cuda::device_count() {
        Ok(n) => n,
        Err(why) if devices.is_empty() => {
            tracing::info!(reason = %why, "no usable GPU: proving on the CPU");
            return Ok(None);
        }
        Err(why) => bail!("gpus.devices = {devices:?}, but there is no usable GPU: {why}"),
    };
    let ordinals: Vec<usize> = if devices.is_empty() { (0..count).collect() } else { devices.iter().map(|&d| d as usize).collect() };
    if limits.len() > 1 && limits.len() != ordinals.len() {
        bail!("gpus.device_memory_limit lists {} sizes for {} GPUs: give one size, or one per GPU", limits.len(), ordinals.len());
    }
    // An injected device fault (tests of failure handling only), given to the first
    // GPU's backend; an unreadable one stops the start.
    let fault = cuzk_cuda::Faults::from_env().map_err(anyhow::Error::msg)?;
    let mut fault = Some(fault).filter(cuzk_cuda::Faults::is_armed);
    let mut out = Vec::with_capacity(ordinals.len());
    for (i, o) in ordinals.into_iter().enumerate() {
        let gpu = cuzk_cuda::Gpu::open(o).with_context(|| format!("opening GPU {o} (gpus.devices)"))?;
        let limit = limits.get(i).or(limits.first()).map(|&b| b as usize);
        if let Some(b) = limit {
            tracing::info!(gpu = o, limit_gb = format!("{:.2}", b as f64 / 1e9), "device memory limited (gpus.device_memory_limit)");
        }
        let mut backend = cuzk_cuda::CudaBackend::new(gpu).with_memory_limit(limit);
        if let Some(f) = fault.take() {
            backend = backend.with_faults(f);
        }
        out.push(Arc::new(backend));
    }
    Ok(Some(out))
}

/// Reads a `.params` file for `backend` ([`read_params_placed`]). Points left in the
/// file (a GPU backend decodes them on its device) are loaded onto the backend now.
pub fn read_params_for(backend: &dyn ProvingBackend, path: &Path, check: PointCheck, bars: &Bars) -> Result<ParameterSet> {
    let p = read_params_placed(path, check, backend.reads_params_from_file(), bars).with_context(|| format!("reading {}", path.display()))?;
    if matches!(p.points(), QueryPoints::File(_)) {
        backend.load_params(&p, bars).with_context(|| format!("reading {} onto {}", path.display(), backend.name()))?;
    }
    Ok(p)
}
