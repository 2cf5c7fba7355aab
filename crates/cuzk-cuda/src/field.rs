//! The scalar field as the kernels see it (and Fp, for tests of its arithmetic).

pub use crate::arith::{binary_op, fp_binary_op, FpOp, FrOp};

use blstrs::Scalar;
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

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
