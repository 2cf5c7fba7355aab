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
/// and reuse them. The memory is write-combined (cudarc's default for pinned
/// allocations): fast to fill and to upload, very slow for the CPU to read back, so
/// use it for data on its way to the GPU.
///
/// Every accessor first waits for the transfers cudarc has recorded on the buffer;
/// transfers made from the returned slices are the caller's to finish before the
/// buffer is written or dropped (the `GpuNtt` calls synchronize before returning).
pub struct PinnedScalars {
    buf: PinnedHostSlice<DeviceFr>,
}

impl PinnedScalars {
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self, GpuError> {
        if len == 0 {
            return Err(GpuError::Invalid("a pinned buffer needs at least one element".into()));
        }
        // Portable (a daemon's pool serves all GPUs) and write-combined (only uploaded).
        // SAFETY: the memory is fully zeroed below before any read.
        let mut buf = unsafe { gpu.alloc_pinned::<DeviceFr>(len, true)? };
        buf.as_mut_slice()?.fill(DeviceFr::default());
        Ok(PinnedScalars { buf })
    }

    /// A new buffer as synthesis storage (what the engine's pool and the bench hand out).
    pub fn storage(gpu: &Gpu, len: usize) -> Result<Box<dyn EvalStorage>, GpuError> {
        Ok(Box::new(Self::new(gpu, len)?))
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The scalars, once recorded transfers into or out of the buffer have finished.
    pub fn as_scalars(&self) -> Result<&[Scalar], GpuError> {
        let s = self.buf.as_slice()?;
        // SAFETY: DeviceFr and Scalar have the same size and alignment (field.rs); the
        // elements are canonical scalars: zeroed at creation and otherwise written only
        // as Scalars through `as_scalars_mut` or by kernels that keep values reduced.
        Ok(unsafe { std::slice::from_raw_parts(s.as_ptr() as *const Scalar, s.len()) })
    }

    /// The scalars, mutably, once recorded transfers have finished.
    pub fn as_scalars_mut(&mut self) -> Result<&mut [Scalar], GpuError> {
        let s = self.buf.as_mut_slice()?;
        // SAFETY: as in `as_scalars`, with exclusive access through &mut self.
        Ok(unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut Scalar, s.len()) })
    }
}

impl EvalStorage for PinnedScalars {
    // A failed wait means the device is in error; synthesis then sees an empty buffer
    // and fails with "evaluation buffer too small", after this log line.
    fn as_slice(&self) -> &[Scalar] {
        self.as_scalars().unwrap_or_else(|e| {
            tracing::error!(error = %e, "pinned buffer unusable");
            &[]
        })
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        match self.as_scalars_mut() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "pinned buffer unusable");
                &mut []
            }
        }
    }
    fn grow(&mut self, _: usize) -> bool {
        false
    }
}
