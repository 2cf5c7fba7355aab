//! Elementwise Fr and Fp operations run on the device, for testing the kernels'
//! arithmetic against blst (`crate::field` re-exports them).

use blstrs::Scalar;
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, DriverError, LaunchConfig, ValidAsZeroBits};
use ff::Field;

use crate::field::{as_device, as_device_mut, DeviceFp};

/// Elementwise field operations, run on the device (for testing the arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrOp {
    Add = 0,
    Sub = 1,
    /// The product this architecture uses (`fr::mul`).
    Mul = 2,
    /// The 32-bit integer product (`fr::mul_int`), whichever `Mul` is.
    MulInt = 3,
    /// The FP64 product (`fr::mul_fp64`), whichever `Mul` is.
    MulFp64 = 4,
}

/// Elementwise Fp operations on the device (for testing the arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FpOp {
    Add = 0,
    Sub = 1,
    /// The Montgomery product (a·b·2^-384).
    Mul = 2,
}

/// Runs one elementwise kernel on equal-length operands, `launch(stream, grid, out, x,
/// y, n)`; returns out.
fn elementwise<T: DeviceRepr + ValidAsZeroBits + Default + Clone>(
    gpu: &crate::Gpu,
    x: &[T],
    y: &[T],
    launch: impl FnOnce(&CudaStream, LaunchConfig, &mut CudaSlice<T>, &CudaSlice<T>, &CudaSlice<T>, u64) -> Result<(), DriverError>,
) -> Result<Vec<T>, crate::GpuError> {
    if x.len() != y.len() {
        return Err(crate::GpuError::Invalid("operands differ in length".into()));
    }
    let s = gpu.stream();
    let n = x.len() as u64;
    let dx = s.clone_htod(x)?;
    let dy = s.clone_htod(y)?;
    let mut out = s.alloc_zeros::<T>(x.len())?;
    // 256 threads a block: the Fp kernel's 72 registers do not fit 1024 threads.
    let cfg = LaunchConfig { grid_dim: ((x.len().max(1) as u32).div_ceil(256), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    launch(s, cfg, &mut out, &dx, &dy, n)?;
    let result = s.clone_dtoh(&out)?;
    s.synchronize()?;
    Ok(result)
}

/// out[i] = x[i] op y[i] on the GPU.
pub fn binary_op(gpu: &crate::Gpu, op: FrOp, x: &[Scalar], y: &[Scalar]) -> Result<Vec<Scalar>, crate::GpuError> {
    let out = elementwise(
        gpu,
        as_device(x),
        as_device(y),
        // SAFETY: all three buffers are n long and the grid-stride loop stays below n.
        |s, cfg, out, x, y, n| unsafe { gpu.k.fr_binary_op(s, cfg, out, x, y, op as u32, n) },
    )?;
    let mut result = vec![Scalar::ZERO; out.len()];
    // SAFETY: fr_binary_op writes reduced field elements, so the copied values are
    // canonical scalars.
    unsafe { as_device_mut(&mut result) }.copy_from_slice(&out);
    Ok(result)
}

/// out[i] = x[i] op y[i] in Fp on the GPU; inputs must be fully reduced.
pub fn fp_binary_op(gpu: &crate::Gpu, op: FpOp, x: &[DeviceFp], y: &[DeviceFp]) -> Result<Vec<DeviceFp>, crate::GpuError> {
    // SAFETY: all three buffers are n long and the grid-stride loop stays below n.
    elementwise(gpu, x, y, |s, cfg, out, x, y, n| unsafe { gpu.k.fp_binary_op(s, cfg, out, x, y, op as u32, n) })
}
