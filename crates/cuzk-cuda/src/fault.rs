//! Device faults injected on purpose ([`Faults`]), so the GPU tests can show how a
//! failed copy or launch, a lost device and a failed allocation are met. Injection is
//! off unless a backend is given a fault ([`crate::CudaBackend::with_faults`]; the
//! daemon reads `CUZK_GPU_FAULT`, [`FAULT_ENV`]), and each fault fires once.

use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::sys::CUresult;
use cudarc::driver::DriverError;

use crate::device::GpuError;

/// The variable the daemon reads a fault from: `<point>[@<n>]`, the point one of
/// `copy`, `launch`, `lost`, `alloc`, fired the `n`-th time it is reached (1 if not
/// given). For tests of failure handling only; never set in production.
pub const FAULT_ENV: &str = "CUZK_GPU_FAULT";

/// Where a fault is injected, and the driver error it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// The compute region's first step, waiting for the staged a, b, c to arrive: a
    /// copy that failed (an invalid-value error, not sticky).
    Copy,
    /// Just before the partition's MSMs are launched, the H polynomial's kernels in
    /// flight: a launch that failed for want of resources (not sticky).
    Launch,
    /// At the same place, an illegal address: sticky, the device lost.
    Lost,
    /// Before a parameter set's points are placed on the device: out of memory (as
    /// when another process took memory after the plan was made).
    Alloc,
}

impl FaultPoint {
    fn name(self) -> &'static str {
        match self {
            FaultPoint::Copy => "copy",
            FaultPoint::Launch => "launch",
            FaultPoint::Lost => "lost",
            FaultPoint::Alloc => "alloc",
        }
    }

    fn error(self) -> CUresult {
        match self {
            FaultPoint::Copy => CUresult::CUDA_ERROR_INVALID_VALUE,
            FaultPoint::Launch => CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            FaultPoint::Lost => CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
            FaultPoint::Alloc => CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        }
    }
}

/// A backend's injected fault, if any: by default none.
#[derive(Debug, Default)]
pub struct Faults(Option<Armed>);

#[derive(Debug)]
struct Armed {
    point: FaultPoint,
    nth: usize,
    reached: AtomicUsize,
}

impl Faults {
    /// A fault at `point`, fired the `nth` time it is reached (from 1).
    pub fn at(point: FaultPoint, nth: usize) -> Faults {
        Faults(Some(Armed { point, nth: nth.max(1), reached: AtomicUsize::new(0) }))
    }

    /// `<point>[@<n>]` ([`FAULT_ENV`]); an error names what is wrong.
    pub fn parse(spec: &str) -> Result<Faults, String> {
        let (name, nth) = match spec.split_once('@') {
            Some((name, n)) => {
                (name, n.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| format!("{FAULT_ENV}={spec:?}: {n:?} is not a count from 1"))?)
            }
            None => (spec, 1),
        };
        let point = [FaultPoint::Copy, FaultPoint::Launch, FaultPoint::Lost, FaultPoint::Alloc]
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| format!("{FAULT_ENV}={spec:?}: the point is one of copy, launch, lost, alloc"))?;
        Ok(Faults::at(point, nth))
    }

    /// The fault [`FAULT_ENV`] names; none where it is unset or empty.
    pub fn from_env() -> Result<Faults, String> {
        match std::env::var(FAULT_ENV) {
            Ok(v) if !v.is_empty() => Faults::parse(&v),
            _ => Ok(Faults::default()),
        }
    }

    pub fn is_armed(&self) -> bool {
        self.0.is_some()
    }

    /// The injected error where `point` is reached for the fault's `nth` time.
    pub(crate) fn reach(&self, point: FaultPoint) -> Result<(), GpuError> {
        let Some(a) = self.0.as_ref().filter(|a| a.point == point) else { return Ok(()) };
        if a.reached.fetch_add(1, Ordering::SeqCst) + 1 != a.nth {
            return Ok(());
        }
        tracing::warn!(point = point.name(), nth = a.nth, "injecting a device fault ({FAULT_ENV})");
        Err(GpuError::Driver(DriverError(point.error())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::is_sticky;

    #[test]
    fn a_fault_fires_once_at_its_point_and_count() {
        let f = Faults::parse("launch@2").unwrap();
        assert!(f.reach(FaultPoint::Copy).is_ok());
        assert!(f.reach(FaultPoint::Launch).is_ok());
        let e = f.reach(FaultPoint::Launch).unwrap_err();
        assert!(!is_sticky(&e), "{e}");
        assert!(f.reach(FaultPoint::Launch).is_ok());
        let lost = Faults::parse("lost").unwrap().reach(FaultPoint::Lost).unwrap_err();
        assert!(is_sticky(&lost), "{lost}");
        assert!(!Faults::default().is_armed() && Faults::default().reach(FaultPoint::Alloc).is_ok());
        for bad in ["", "launch@0", "launch@x", "explode"] {
            let e = Faults::parse(bad).unwrap_err();
            assert!(e.contains(FAULT_ENV), "{e}");
        }
    }
}
