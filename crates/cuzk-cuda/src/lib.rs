//! The CUDA backend of cuzk.
//!
//! Kernels live in `kernels/` (ff/ field arithmetic, ec/ curve points, msm/, ntt/,
//! groth16/ pointwise passes), are compiled by build.rs into one fatbin embedded
//! here, and are loaded through the CUDA driver API at run time. A binary built with
//! the kernels still starts on a machine without a driver or GPU: [`device_count`]
//! says why no device is usable.
//!
//! The host code mirrors the kernels: [`ntt`] and [`msm`] are the building blocks (the
//! MSM in layers: the groups, the Pippenger launches, split MSMs' lists, streamed
//! bases); [`queries`] and [`params_file`] hold and load a parameter set's points;
//! [`groth16`] is the prover built on them ([`CudaBackend`]); [`fixed_base`] makes a
//! setup's points ([`GpuFixedBase`]).

mod arith;
mod device;
pub mod fault;
pub mod field;
pub mod fixed_base;
pub mod groth16;
mod kernels;
pub mod msm;
pub mod ntt;
pub mod params_file;
mod pinned;
pub mod queries;
mod turn;

pub use device::{built_architectures, device_count, gpu_for_tests, kernels_built, probe, DeviceInfo, Gpu, GpuError, PoolFigures, KERNEL_IMAGE_ENV};
pub use fault::{FaultPoint, Faults, FAULT_ENV};
pub use fixed_base::GpuFixedBase;
pub use groth16::{CudaBackend, DevicePlan, Overrides, Products};
pub use kernels::CurveTypes;
pub use msm::{affine_rounds, DeviceBases, GpuMsm, MsmGroup, MsmTimings, G1, G2, MAX_AFFINE_ROUNDS};
pub use ntt::{GpuNtt, HPolyTimings, NttKind};
pub use pinned::PinnedScalars;
pub use turn::DeviceLock;
