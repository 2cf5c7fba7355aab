//! Page-locked host memory for scalars: what the GPU uploads from at full PCIe speed.

use blstrs::Scalar;
use cudarc::driver::PinnedHostSlice;
use cuzk_groth16::synthesis::EvalStorage;

use crate::device::{Gpu, GpuError};
use crate::field::DeviceFr;

/// A fixed-size buffer of scalars in pinned host memory, zero-initialised.
///
/// It is an [`EvalStorage`], so synthesis can write a/b/c straight into it. Allocating
/// pinned memory is slow and serialised in the driver: allocate these once (a pool)
/// and reuse them.
pub struct PinnedScalars {
    buf: PinnedHostSlice<DeviceFr>,
    ptr: *mut Scalar,
    len: usize,
}

// SAFETY: the buffer is plain host memory owned by this value; access goes through
// &self / &mut self, so Rust's aliasing rules hold across threads.
unsafe impl Send for PinnedScalars {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for PinnedScalars {}

impl PinnedScalars {
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self, GpuError> {
        // SAFETY: the memory is fully zeroed below before any read.
        let mut buf = unsafe { gpu.context().alloc_pinned::<DeviceFr>(len.max(1))? };
        let slice = buf.as_mut_slice()?;
        slice.fill(DeviceFr::default());
        let ptr = slice.as_mut_ptr() as *mut Scalar;
        Ok(PinnedScalars { buf, ptr, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_scalars(&self) -> &[Scalar] {
        // SAFETY: ptr points to `len` initialised 32-byte, 8-aligned elements owned by
        // `buf`; they hold canonical scalars (zeroed at creation, then only written as
        // Scalars through `as_scalars_mut`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_scalars_mut(&mut self) -> &mut [Scalar] {
        // SAFETY: as in `as_scalars`, with exclusive access through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The underlying pinned allocation (for transfers).
    pub fn pinned(&self) -> &PinnedHostSlice<DeviceFr> {
        &self.buf
    }
}

impl EvalStorage for PinnedScalars {
    fn as_slice(&self) -> &[Scalar] {
        self.as_scalars()
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        self.as_scalars_mut()
    }
    fn grow(&mut self, _: usize) -> bool {
        false
    }
}
