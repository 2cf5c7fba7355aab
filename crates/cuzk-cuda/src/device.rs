//! Device discovery and the loaded kernel module.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DriverError};
use cudarc::nvrtc::Ptx;

use crate::kernels::{CurveKernels, CurveTypes, Kernels, G1, G2};

#[cfg(cuzk_kernels)]
static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cuzk.fatbin"));
#[cfg(not(cuzk_kernels))]
static FATBIN: &[u8] = &[];

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("this build has no CUDA kernels (no nvcc was found when it was compiled)")]
    NotBuilt,
    #[error("no CUDA driver (libcuda) found on this machine")]
    NoDriver,
    #[error("no CUDA device found")]
    NoDevice,
    #[error("CUDA device {0} does not exist ({1} found)")]
    NoSuchDevice(usize, usize),
    #[error("CUDA driver error: {0}")]
    Driver(#[from] DriverError),
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// Whether an error leaves the CUDA context unusable until the process ends (the
/// driver's "sticky" errors: every later call fails too), or is the device gone.
pub(crate) fn is_sticky(e: &GpuError) -> bool {
    use cudarc::driver::sys::CUresult::*;
    matches!(
        e,
        GpuError::Driver(cudarc::driver::DriverError(
            CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_LAUNCH_TIMEOUT
                | CUDA_ERROR_CONTEXT_IS_DESTROYED
                | CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUDA_ERROR_INVALID_PC
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_ECC_UNCORRECTABLE
                | CUDA_ERROR_DEVICE_UNAVAILABLE
        ))
    )
}

/// Whether an allocation failed for want of device memory.
pub(crate) fn is_out_of_memory(e: &GpuError) -> bool {
    matches!(e, GpuError::Driver(cudarc::driver::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)))
}

/// A device error as a proving backend reports it, saying what failed: a sticky one
/// as the device lost (the engine then takes the backend out of service), a shortage
/// of memory as such (where it happens placing a set, the set is planned again).
pub(crate) fn backend_error(what: &str, e: GpuError) -> cuzk_groth16::backend::ProveError {
    if is_sticky(&e) {
        return cuzk_groth16::backend::ProveError::DeviceLost(format!("{what}: {e}"));
    }
    if is_out_of_memory(&e) {
        return cuzk_groth16::backend::ProveError::DeviceMemory(format!("{what}: {e}"));
    }
    cuzk_groth16::backend::ProveError::Backend(format!("{what}: {e}"))
}

/// Whether the CUDA kernels were compiled into this build.
pub fn kernels_built() -> bool {
    cfg!(cuzk_kernels)
}

/// The machine-code targets compiled in (e.g. "sm_80,sm_89,sm_90,sm_120").
pub fn built_architectures() -> &'static str {
    option_env!("CUZK_CUDA_ARCHS_BUILT").unwrap_or("none")
}

/// Number of CUDA devices, or why there are none usable.
///
/// Never panics: the driver library is probed before any call into it.
pub fn device_count() -> Result<usize, GpuError> {
    if !kernels_built() {
        return Err(GpuError::NotBuilt);
    }
    // SAFETY: this only tries to open the driver library; it calls nothing in it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(GpuError::NoDriver);
    }
    let n = CudaContext::device_count()? as usize;
    if n == 0 {
        return Err(GpuError::NoDevice);
    }
    Ok(n)
}

/// The GPU a GPU test runs on: device 0. None (said on stderr) only where the machine
/// has no CUDA driver or no device and `CUZK_REQUIRE_GPU` is not `1` (set on GPU
/// machines, so a run there can never pass without proving anything). Any other
/// failure panics: a build without kernels, kernels that do not load, a device that
/// does not open.
pub fn gpu_for_tests() -> Option<Arc<Gpu>> {
    let required = std::env::var("CUZK_REQUIRE_GPU").is_ok_and(|v| v == "1");
    match device_count() {
        Err(e @ (GpuError::NoDriver | GpuError::NoDevice)) if !required => {
            eprintln!("skipping GPU test: {e}");
            return None;
        }
        Err(e) => panic!("GPU test: {e}{}", if required { " (CUZK_REQUIRE_GPU=1)" } else { "" }),
        Ok(_) => {}
    }
    match Gpu::open(0) {
        Ok(g) => Some(g),
        Err(e) => panic!("GPU test: device 0 does not open: {e}"),
    }
}

/// Device buffers are stream-ordered allocations from the device's default memory
/// pool. By default the pool hands freed memory back to the driver at every
/// synchronisation, so each MSM would map its gigabytes of scratch anew; keeping it
/// makes later allocations of the same sizes come from the pool. (Its effect on the
/// measured times has not been isolated: the sort at 2^24, c = 20, took 34 ms with and
/// without it; the tiled scan and per-window scatter are what cut it.)
fn keep_pool_memory(ctx: &CudaContext) -> Result<(), GpuError> {
    use cudarc::driver::sys;
    let Some(pool) = default_pool(ctx)? else {
        return Ok(());
    };
    let mut threshold: u64 = u64::MAX;
    let mut no: i32 = 0;
    // SAFETY: `pool` is the device's default pool; the threshold attribute takes a
    // pointer to a u64, the reuse one to an int, each valid for its call. All results
    // are checked.
    unsafe {
        sys::cuMemPoolSetAttribute(pool, sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, (&mut threshold as *mut u64).cast())
            .result()?;
        // Memory freed on the compute stream must not be handed to the copy stream with
        // a dependency on that free: the next partition's uploads would wait for this
        // partition's kernels. The pool grows instead (once: it keeps what it holds).
        sys::cuMemPoolSetAttribute(pool, sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, (&mut no as *mut i32).cast())
            .result()?;
    }
    Ok(())
}

/// The device's default memory pool, where stream-ordered allocations come from (None
/// where the device has none: allocations then go straight to the driver).
fn default_pool(ctx: &CudaContext) -> Result<Option<cudarc::driver::sys::CUmemoryPool>, GpuError> {
    if !ctx.has_async_alloc() {
        return Ok(None);
    }
    let mut pool: cudarc::driver::sys::CUmemoryPool = std::ptr::null_mut();
    ctx.bind_to_thread()?;
    // SAFETY: `pool` receives the handle; the result is checked.
    unsafe { cudarc::driver::sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()).result()? };
    Ok(Some(pool))
}

/// Asks the driver to reserve the kernels' local memory now (a stack limit of the most
/// any kernel takes per thread), so that free-memory figures read later already leave
/// it out; returns its size and what the driver may still take for it later (none
/// where the limit reserved it: the free memory fell by as much).
fn reserve_local_memory(ctx: &CudaContext, most_local: usize) -> Result<(usize, usize), GpuError> {
    use cudarc::driver::sys::{CUdevice_attribute, CUlimit};
    // Never below the driver's own stack size (1 KiB by default): the kernels' calls
    // (the out-of-line Fp product) live on that stack, which the function attribute
    // does not count; a smaller limit faulted with an illegal address on an H100.
    let stack = ctx.get_limit(CUlimit::CU_LIMIT_STACK_SIZE)?;
    let per_thread = most_local.max(stack).next_multiple_of(16);
    let threads = ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?.max(0) as usize
        * ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(0) as usize;
    let whole = per_thread * threads;
    if per_thread == 0 {
        return Ok((0, 0));
    }
    let (before, _) = ctx.mem_get_info()?;
    if per_thread > stack {
        ctx.set_limit(CUlimit::CU_LIMIT_STACK_SIZE, per_thread)?;
    }
    let (after, _) = ctx.mem_get_info()?;
    let taken = before.saturating_sub(after);
    tracing::debug!(per_thread, whole_mb = whole >> 20, taken_mb = taken >> 20, "kernels' local memory");
    Ok((whole, whole.saturating_sub(taken)))
}

/// Names a kernel image (fatbin or cubin of kernels/cuzk.cu) to load instead of the
/// built-in one: for comparing kernel variants without rebuilding the binary.
pub const KERNEL_IMAGE_ENV: &str = "CUZK_KERNEL_IMAGE";

/// The built-in kernels, or the image named by [`KERNEL_IMAGE_ENV`] (an error if it
/// cannot be read: never a silent fallback).
fn kernel_image() -> Result<Vec<u8>, GpuError> {
    match std::env::var_os(KERNEL_IMAGE_ENV) {
        None => Ok(FATBIN.to_vec()),
        Some(path) => {
            let image =
                std::fs::read(&path).map_err(|e| GpuError::Invalid(format!("{KERNEL_IMAGE_ENV}={}: {e}", std::path::Path::new(&path).display())))?;
            tracing::warn!(path = %std::path::Path::new(&path).display(), "kernels loaded from {KERNEL_IMAGE_ENV}, not the built-in ones");
            Ok(image)
        }
    }
}

/// One GPU with cuzk's kernels loaded, a compute stream and a copy stream.
pub struct Gpu {
    pub ordinal: usize,
    pub name: String,
    pub(crate) ctx: Arc<CudaContext>,
    /// Kernels run here, in order; one host synchronization per job at its end.
    pub(crate) stream: Arc<CudaStream>,
    /// Host↔device transfers, ordered against `stream` with events.
    pub(crate) copy: Arc<CudaStream>,
    /// The fatbin's kernels (crate::kernels): the field, NTT, MSM sorting, list and
    /// product kernels, and each curve group's.
    pub(crate) k: Kernels,
    pub(crate) g1: CurveKernels<G1>,
    pub(crate) g2: CurveKernels<G2>,
    /// The kernels' local memory (register spills, stack: the most any kernel takes
    /// per thread, for every thread the device holds), which the driver reserves outside
    /// every allocation of ours; and of it, what it may still take later (when the
    /// kernel that needs the most first runs), where setting the stack limit at open
    /// did not reserve it at once. Device plans count it.
    pub local_memory: usize,
    pub lazy_reserve: usize,
}

impl Gpu {
    /// Opens device `ordinal` and loads the kernels.
    pub fn open(ordinal: usize) -> Result<Arc<Gpu>, GpuError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(GpuError::NoSuchDevice(ordinal, count));
        }
        let ctx = CudaContext::new(ordinal)?;
        keep_pool_memory(&ctx)?;
        let module = ctx.load_module(Ptx::from_binary(kernel_image()?))?;
        let (k, g1, g2) = (Kernels::load(&module, "")?, CurveKernels::load(&module, G1::SUFFIX)?, CurveKernels::load(&module, G2::SUFFIX)?);
        let mut most_local = 0;
        for f in k.all().into_iter().chain(g1.all()).chain(g2.all()) {
            most_local = most_local.max(f.local_size_bytes()?.max(0) as usize);
        }
        let name = ctx.name()?;
        let stream = ctx.new_stream()?;
        let copy = ctx.new_stream()?;
        let (local_memory, lazy_reserve) = reserve_local_memory(&ctx, most_local)?;
        tracing::info!(ordinal, %name, archs = built_architectures(), local_memory_mb = local_memory >> 20, lazy_mb = lazy_reserve >> 20, "CUDA device opened");
        Ok(Arc::new(Gpu { ordinal, name, ctx, stream, copy, k, g1, g2, local_memory, lazy_reserve }))
    }

    /// (free, total) device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize), GpuError> {
        Ok(self.ctx.mem_get_info()?)
    }

    /// Bytes this process can still allocate: the driver's free memory plus what the
    /// default pool holds unused (kept, not returned: `keep_pool_memory`).
    pub fn available_memory(&self) -> Result<usize, GpuError> {
        let (free, _) = self.ctx.mem_get_info()?;
        let unused = self.pool_figures()?.map_or(0, |p| p.reserved.saturating_sub(p.used));
        Ok(free + unused as usize)
    }

    /// The device's memory for an error message: free, and what the default pool holds
    /// (in use and kept unused), in GB.
    pub fn memory_summary(&self) -> String {
        let gb = |b: u64| format!("{:.2}", b as f64 / 1e9);
        let free = match self.ctx.mem_get_info() {
            Ok((free, total)) => format!("{} of {} GB free", gb(free as u64), gb(total as u64)),
            Err(e) => format!("free memory unknown: {e}"),
        };
        match self.pool_figures() {
            Ok(Some(p)) => format!("device memory: {free}; the pool holds {} GB, {} GB of it in use", gb(p.reserved), gb(p.used)),
            Ok(None) => format!("device memory: {free}"),
            Err(e) => format!("device memory: {free}; pool unknown: {e}"),
        }
    }

    /// The default pool's bytes (held, in use, the most ever in use), None where there
    /// is no pool.
    pub fn pool_figures(&self) -> Result<Option<PoolFigures>, GpuError> {
        let Some(pool) = default_pool(&self.ctx)? else {
            return Ok(None);
        };
        use cudarc::driver::sys;
        use sys::CUmemPool_attribute as A;
        let get = |attribute: A| -> Result<u64, GpuError> {
            let mut v = 0u64;
            // SAFETY: `pool` is the device's default pool; these attributes take a
            // pointer to a u64, valid for the call. The result is checked.
            unsafe { sys::cuMemPoolGetAttribute(pool, attribute, (&mut v as *mut u64).cast()).result()? };
            Ok(v)
        };
        Ok(Some(PoolFigures {
            reserved: get(A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
            used: get(A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            used_high: get(A::CU_MEMPOOL_ATTR_USED_MEM_HIGH)?,
        }))
    }

    /// `len` values of T in page-locked host memory, portable (pinned for every
    /// device's context, so one buffer serves all GPUs); write-combined when asked
    /// (fast to fill and upload, very slow for the CPU to read). An error names the size.
    ///
    /// # Safety
    /// The memory is uninitialised: the caller writes every value before anything
    /// (the host or a copy) reads it.
    pub(crate) unsafe fn alloc_pinned<T: cudarc::driver::DeviceRepr>(
        &self,
        len: usize,
        write_combined: bool,
    ) -> Result<cudarc::driver::PinnedHostSlice<T>, GpuError> {
        use cudarc::driver::sys::{CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_WRITECOMBINED};
        let flags = if write_combined { CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_WRITECOMBINED } else { CU_MEMHOSTALLOC_PORTABLE };
        // SAFETY: forwarded to the caller (see above).
        unsafe { self.ctx.alloc_pinned_with_flags::<T>(len, flags) }
            .map_err(|e| GpuError::Invalid(format!("pinning {:.2} GB of host memory: {e}", (len * std::mem::size_of::<T>()) as f64 / 1e9)))
    }

    /// The compute stream (for callers that time with events).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}

/// A device's default memory pool: bytes it holds from the driver, bytes of it in use
/// by allocations now, and the most ever in use since the process started (its
/// high-water mark: what shows a leak inside the pool, which the driver's view of the
/// process, the pool held whole, cannot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolFigures {
    pub reserved: u64,
    pub used: u64,
    pub used_high: u64,
}

/// What `cuzk info` shows about one device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_memory: usize,
    pub free_memory: usize,
}

/// Lists the usable devices (opening each to load the kernels).
pub fn probe() -> Result<Vec<DeviceInfo>, GpuError> {
    (0..device_count()?)
        .map(|i| {
            let g = Gpu::open(i)?;
            let (free, total) = g.memory()?;
            Ok(DeviceInfo { ordinal: i, name: g.name.clone(), total_memory: total, free_memory: free })
        })
        .collect()
}
