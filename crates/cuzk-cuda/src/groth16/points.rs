//! A parameter set's points where the backend keeps them, and their loading: onto the
//! device (uploaded from host memory, or read from the `.params` file and decoded
//! there), or into pinned host memory shared by every GPU of the process.

use std::sync::Arc;

use cuzk_groth16::backend::ProveError;
use cuzk_groth16::params::QueryPoints;
use cuzk_groth16::{ParameterSet, Progress};

use super::plan::Placement;
use crate::device::{backend_error, Gpu, GpuError};
use crate::msm::{DeviceBases, GpuMsm, G1};
use crate::params_file::{load_queries, load_queries_to_host, LoadError, STAGING_BYTES};
use crate::queries::{shared, DeviceQueries, StreamedQueries};

/// A parameter set's points where the backend keeps them.
pub enum LoadedPoints {
    /// On the device.
    Resident(Box<DeviceQueries>),
    /// In pinned host memory (shared with other GPUs' backends), streamed up by every
    /// MSM through the chunk buffers the set's plan sizes; H's also on the device where
    /// the plan keeps them there (`h`, what the H MSM reads).
    Streamed { points: Arc<StreamedQueries>, h: Option<DeviceBases<G1>> },
}

impl LoadedPoints {
    /// The point counts of L, A and B (G1) that the split lists index.
    pub fn lens(&self) -> [usize; 3] {
        match self {
            LoadedPoints::Resident(q) => [q.l.len(), q.a.len(), q.b_g1.len()],
            LoadedPoints::Streamed { points: q, .. } => [q.l.len(), q.a.len(), q.b_g1.len()],
        }
    }
}

/// Loads the set's points as `placement` says; with where they came from, for the log.
pub fn load(
    gpu: &Gpu,
    msm: &GpuMsm,
    p: &ParameterSet,
    placement: Placement,
    progress: &dyn Progress,
) -> Result<(LoadedPoints, &'static str), ProveError> {
    let file_error = |e| match e {
        LoadError::Gpu(e) => backend_error("reading the parameters for the GPU", e),
        e => ProveError::Backend(format!("reading the parameters for the GPU: {e}")),
    };
    // Pinned host memory short is no shortage of the device's: planning the device
    // again would not help.
    let pinning = |e: ProveError| match e {
        ProveError::DeviceMemory(why) => ProveError::Backend(format!("pinned host memory: {why}")),
        e => e,
    };
    Ok(match (p.points(), placement) {
        (QueryPoints::Host(q), Placement::Resident) => {
            let points = DeviceQueries {
                h: msm.upload_bases(&q.h).map_err(|e| backend_error("uploading H", e))?,
                l: msm.upload_bases(&q.l).map_err(|e| backend_error("uploading L", e))?,
                a: msm.upload_bases(&q.a).map_err(|e| backend_error("uploading A", e))?,
                b_g1: msm.upload_bases(&q.b_g1).map_err(|e| backend_error("uploading B (G1)", e))?,
                b_g2: msm.upload_bases(&q.b_g2).map_err(|e| backend_error("uploading B (G2)", e))?,
            };
            (LoadedPoints::Resident(Box::new(points)), "host memory")
        }
        (QueryPoints::File(f), Placement::Resident) => {
            (LoadedPoints::Resident(Box::new(load_queries(gpu, f, progress).map_err(file_error)?)), "file, decoded on the GPU")
        }
        (points, Placement::Streamed { h_resident, .. }) => {
            let (q, was_shared) = shared(p.id(), || match points {
                QueryPoints::Host(q) => {
                    StreamedQueries::from_host(gpu, q).map_err(|e: GpuError| pinning(backend_error("copying the points into pinned memory", e)))
                }
                QueryPoints::File(f) => load_queries_to_host(gpu, f, STAGING_BYTES, progress).map_err(|e| pinning(file_error(e))),
            })?;
            let from = match (was_shared, points) {
                (true, _) => "pinned host memory another GPU's backend loaded",
                (false, QueryPoints::File(_)) => "file, decoded on the GPU",
                (false, QueryPoints::Host(_)) => "host memory",
            };
            let h = if h_resident {
                Some(msm.upload_host_bases(&q.h).map_err(|e| backend_error("uploading H beside the streamed points", e))?)
            } else {
                None
            };
            (LoadedPoints::Streamed { points: q, h }, from)
        }
    })
}
