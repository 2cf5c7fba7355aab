//! The scalar field as the kernels see it.

use blstrs::Scalar;
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use ff::Field;

/// An Fr element in device memory: eight 32-bit limbs, Montgomery form, exactly the
/// bytes of a blstrs `Scalar` (which wraps blst's four 64-bit limbs) on a
/// little-endian host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct DeviceFr(pub [u32; 8]);

// SAFETY: plain old data of 32 bytes; the kernels' `fr::elem` has the same layout.
unsafe impl DeviceRepr for DeviceFr {}
// SAFETY: all-zero bits are the element 0.
unsafe impl ValidAsZeroBits for DeviceFr {}

const _: () = assert!(std::mem::size_of::<Scalar>() == 32 && std::mem::size_of::<DeviceFr>() == 32);
const _: () = assert!(std::mem::align_of::<Scalar>() == 8 && std::mem::align_of::<DeviceFr>() == 8);
#[cfg(target_endian = "big")]
compile_error!("the device layout of Fr assumes a little-endian host");

/// Views scalars as device elements (no copy).
pub fn as_device(s: &[Scalar]) -> &[DeviceFr] {
    // SAFETY: same size and alignment (checked above); Scalar is #[repr(transparent)]
    // over blst_fr, a #[repr(C)] [u64; 4], whose bytes on a little-endian host are
    // the eight u32 limbs in order.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const DeviceFr, s.len()) }
}

/// Views scalars as device elements, mutably, to receive results.
///
/// # Safety
/// Only canonical values (Montgomery form, < r) may be written through the view:
/// blst and everything built on `Scalar` assume it. Every kernel of this crate keeps
/// its outputs reduced; do not write arbitrary `DeviceFr` bits through it.
pub unsafe fn as_device_mut(s: &mut [Scalar]) -> &mut [DeviceFr] {
    // SAFETY: same size and alignment as checked above; the caller upholds the
    // canonical-value precondition.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut DeviceFr, s.len()) }
}

pub fn to_device(s: &Scalar) -> DeviceFr {
    as_device(std::slice::from_ref(s))[0]
}

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

/// Runs one of the elementwise test kernels, `kernel(out*, const x*, const y*, u32 op,
/// u64 n)`, on equal-length operands; returns out.
fn elementwise<T: DeviceRepr + ValidAsZeroBits + Default + Clone>(
    gpu: &crate::Gpu,
    kernel: &cudarc::driver::CudaFunction,
    op: u32,
    x: &[T],
    y: &[T],
) -> Result<Vec<T>, crate::GpuError> {
    use cudarc::driver::PushKernelArg;
    if x.len() != y.len() {
        return Err(crate::GpuError::Invalid("operands differ in length".into()));
    }
    let s = gpu.stream();
    let n = x.len() as u64;
    let dx = s.clone_htod(x)?;
    let dy = s.clone_htod(y)?;
    let mut out = s.alloc_zeros::<T>(x.len())?;
    let mut b = s.launch_builder(kernel);
    b.arg(&mut out).arg(&dx).arg(&dy).arg(&op).arg(&n);
    // 256 threads a block: the Fp kernel's 72 registers do not fit 1024 threads.
    let cfg = cudarc::driver::LaunchConfig { grid_dim: ((x.len().max(1) as u32).div_ceil(256), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: every caller passes a kernel of the signature above over elements of
    // type T; all three buffers are n long and the grid-stride loop stays below n.
    unsafe { b.launch(cfg)? };
    let result = s.clone_dtoh(&out)?;
    s.synchronize()?;
    Ok(result)
}

/// out[i] = x[i] op y[i] on the GPU.
pub fn binary_op(gpu: &crate::Gpu, op: FrOp, x: &[Scalar], y: &[Scalar]) -> Result<Vec<Scalar>, crate::GpuError> {
    let out = elementwise(gpu, &gpu.k.fr_binary_op, op as u32, as_device(x), as_device(y))?;
    let mut result = vec![Scalar::ZERO; out.len()];
    // SAFETY: fr_binary_op writes reduced field elements, so the copied values are
    // canonical scalars.
    unsafe { as_device_mut(&mut result) }.copy_from_slice(&out);
    Ok(result)
}

/// An Fp element in device memory: twelve 32-bit limbs, Montgomery form (R = 2^384),
/// exactly the bytes of blst's `blst_fp` (six 64-bit limbs) on a little-endian host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct DeviceFp(pub [u32; 12]);

// SAFETY: plain old data of 48 bytes; the kernels' `fp::elem` has the same layout.
unsafe impl DeviceRepr for DeviceFp {}
// SAFETY: all-zero bits are the element 0.
unsafe impl ValidAsZeroBits for DeviceFp {}

impl DeviceFp {
    /// From six little-endian 64-bit limbs (blst_fp's `l`).
    pub fn from_u64_limbs(l: &[u64; 6]) -> Self {
        let mut w = [0u32; 12];
        for (i, x) in l.iter().enumerate() {
            w[2 * i] = *x as u32;
            w[2 * i + 1] = (*x >> 32) as u32;
        }
        DeviceFp(w)
    }

    pub fn to_u64_limbs(&self) -> [u64; 6] {
        std::array::from_fn(|i| self.0[2 * i] as u64 | (self.0[2 * i + 1] as u64) << 32)
    }
}

/// Elementwise Fp operations on the device (for testing the arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FpOp {
    Add = 0,
    Sub = 1,
    /// The Montgomery product (a·b·2^-384).
    Mul = 2,
}

/// out[i] = x[i] op y[i] in Fp on the GPU; inputs must be fully reduced.
pub fn fp_binary_op(gpu: &crate::Gpu, op: FpOp, x: &[DeviceFp], y: &[DeviceFp]) -> Result<Vec<DeviceFp>, crate::GpuError> {
    elementwise(gpu, &gpu.k.fp_binary_op, op as u32, x, y)
}
