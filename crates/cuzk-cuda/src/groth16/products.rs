//! a, b, c computed on the device (kernels/groth16/products.cuh): a circuit shape's
//! compiled matrices uploaded once ([`DeviceMatrices`]), a partition's witness sent in
//! compact form and read in place (crate::msm::compact; [`DeviceWitness`] for a
//! witness of its own), then a = A·z, b = B·z, c = C·z by one thread per row
//! ([`DeviceMatrices::products_into`]).
//!
//! What crosses the bus per partition is the compact witness only: for a 32 GiB PoRep
//! partition ~0.1 GB (two bitmaps of 16 MB and 1.3 % of 130 M aux values) instead of
//! 4.2 GB of aux values and 12.9 GB of a, b, c.
//!
//! Invariant: the products equal [`ConstraintMatrices::synthesize`]'s bit for bit
//! (every device value is kept fully reduced, so the order of additions is free).

use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut};
use cuzk_groth16::matrices::{ConstraintMatrices, SparseMatrix};
use cuzk_groth16::CompactWitness;
use ff::Field;

use crate::device::{Gpu, GpuError};
use crate::field::{as_device, to_device, DeviceFr};
use crate::msm::blocks;
use crate::msm::compact::{CompactLayout, CompactView, HostCompact};

/// Threads per block of the expansion and the products.
const THREADS: u32 = 256;

/// One matrix on the device, in the layout of [`SparseMatrix`].
struct DeviceCsr {
    row_starts: CudaSlice<u64>,
    columns: CudaSlice<u32>,
    coefficients: CudaSlice<u16>,
}

impl DeviceCsr {
    fn upload(stream: &Arc<CudaStream>, m: &SparseMatrix) -> Result<Self, GpuError> {
        // A matrix with no non-zero still needs buffers to pass; one zero each.
        let or_one = |n: usize| n.max(1);
        let mut columns = stream.alloc_zeros::<u32>(or_one(m.columns.len()))?;
        let mut coefficients = stream.alloc_zeros::<u16>(or_one(m.coefficients.len()))?;
        if !m.columns.is_empty() {
            stream.memcpy_htod(&m.columns[..], &mut columns)?;
            stream.memcpy_htod(&m.coefficients[..], &mut coefficients)?;
        }
        Ok(DeviceCsr { row_starts: stream.clone_htod(&m.row_starts[..])?, columns, coefficients })
    }
}

/// A circuit shape's A, B, C and coefficient dictionary on one device.
pub struct DeviceMatrices {
    matrices: [DeviceCsr; 3],
    dictionary: CudaSlice<DeviceFr>,
    num_inputs: usize,
    num_aux: usize,
    rows: usize,
    /// Bytes held on the device (and sent there once).
    pub bytes: u64,
}

/// Device bytes [`DeviceMatrices::upload`] takes for `m`: what placement sets beside
/// the parameter points.
pub fn matrices_bytes(m: &ConstraintMatrices) -> u64 {
    let one = |s: &SparseMatrix| (s.row_starts.len() * 8 + s.columns.len().max(1) * 4 + s.coefficients.len().max(1) * 2) as u64;
    one(&m.a) + one(&m.b) + one(&m.c) + (m.dictionary.len() * 32) as u64
}

impl DeviceMatrices {
    /// Uploads `m` on the GPU's compute stream (from pageable memory: the call returns
    /// once the driver has the bytes).
    pub fn upload(gpu: &Gpu, m: &ConstraintMatrices) -> Result<Self, GpuError> {
        let rows = m.num_constraints();
        if [&m.b, &m.c].iter().any(|x| x.rows() != rows) || m.dictionary.is_empty() {
            return Err(GpuError::Invalid("matrices of unequal row counts or without a dictionary".into()));
        }
        let stream = gpu.stream();
        let matrices = [DeviceCsr::upload(stream, &m.a)?, DeviceCsr::upload(stream, &m.b)?, DeviceCsr::upload(stream, &m.c)?];
        let dictionary = stream.clone_htod(as_device(&m.dictionary))?;
        Ok(DeviceMatrices { matrices, dictionary, num_inputs: m.num_inputs, num_aux: m.num_aux, rows, bytes: matrices_bytes(m) })
    }

    /// Rows of each matrix (constraints, the input constraints included).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// a, b, c of the witness `z` into three new device vectors of `len` ≥ rows values
    /// (the rows past the constraints zero, as the NTT domain wants them), enqueued on
    /// the GPU's compute stream.
    pub fn products(&self, gpu: &Gpu, z: &DeviceWitness, len: usize) -> Result<[CudaSlice<DeviceFr>; 3], GpuError> {
        let stream = gpu.stream();
        let mut out = [stream.alloc_zeros::<DeviceFr>(len)?, stream.alloc_zeros::<DeviceFr>(len)?, stream.alloc_zeros::<DeviceFr>(len)?];
        let [a, b, c] = &mut out;
        self.products_into(gpu, stream, &z.view()?, [&mut a.slice_mut(..), &mut b.slice_mut(..), &mut c.slice_mut(..)])?;
        Ok(out)
    }

    /// a, b, c of the witness `z` into `out` (three vectors of equal length ≥ rows; the
    /// rows past the constraints zeroed, as the NTT domain wants them), enqueued on
    /// `stream` (a staging slot's copy stream: no host wait).
    pub fn products_into(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        z: &CompactView<'_>,
        out: [&mut CudaViewMut<'_, DeviceFr>; 3],
    ) -> Result<(), GpuError> {
        check_products(self.num_inputs, self.num_aux, self.rows, z, &out)?;
        for (m, v) in self.matrices.iter().zip(out) {
            if v.len() > self.rows {
                stream.memset_zeros(&mut v.slice_mut(self.rows..))?;
            }
            let rows = RowBlock { row_starts: m.row_starts.slice(..), base: 0, columns: m.columns.slice(..), coefficients: m.coefficients.slice(..) };
            // SAFETY: the whole matrix (a SparseMatrix's invariants, checked when its
            // file was read, and compile's: every coefficient index is in the
            // dictionary); `z` is of its shape (checked above) and `v` holds ≥ rows values.
            unsafe { launch_rows(gpu, stream, &rows, &self.dictionary, z, &mut v.slice_mut(..self.rows))? };
        }
        Ok(())
    }
}

/// Refuses a witness of another shape, or vectors too short for `rows`.
pub(crate) fn check_products(
    num_inputs: usize,
    num_aux: usize,
    rows: usize,
    z: &CompactView<'_>,
    out: &[&mut CudaViewMut<'_, DeviceFr>; 3],
) -> Result<(), GpuError> {
    if z.lead.len() != num_inputs || z.layout.len != num_aux {
        return Err(GpuError::Invalid(format!(
            "a witness of {} inputs and {} aux values for matrices of {num_inputs} and {num_aux} (another circuit shape)",
            z.lead.len(),
            z.layout.len
        )));
    }
    if z.others.is_none() {
        return Err(GpuError::Invalid("a, b, c on the device need the witness's other values there".into()));
    }
    let len = out[0].len();
    if out.iter().any(|v| v.len() != len) || len < rows {
        return Err(GpuError::Invalid(format!("vectors of {}, {} and {} values for {rows} rows", out[0].len(), out[1].len(), out[2].len())));
    }
    Ok(())
}

/// Rows of one matrix on the device: the whole matrix (base 0), or a block of its rows
/// sent on its own, whose row starts keep the whole matrix's offsets and whose columns
/// and coefficients begin at offset `base`.
pub(crate) struct RowBlock<'a> {
    pub row_starts: CudaView<'a, u64>,
    pub base: u64,
    pub columns: CudaView<'a, u32>,
    pub coefficients: CudaView<'a, u16>,
}

/// `out[r]` = row r of `rows` times z, for every r < out.len(), enqueued on `stream`.
///
/// # Safety
/// `rows.row_starts` holds out.len() + 1 ascending offsets, each minus `base` within
/// the columns and coefficients given; every column is below z's inputs + aux values
/// and every coefficient index below the dictionary's length.
pub(crate) unsafe fn launch_rows(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    rows: &RowBlock<'_>,
    dictionary: &CudaSlice<DeviceFr>,
    z: &CompactView<'_>,
    out: &mut CudaViewMut<'_, DeviceFr>,
) -> Result<(), GpuError> {
    let n = out.len() as u64;
    if n == 0 {
        return Ok(());
    }
    if rows.row_starts.len() as u64 != n + 1 {
        return Err(GpuError::Invalid(format!("{} row starts for {n} rows", rows.row_starts.len())));
    }
    let others = z.others.as_ref().ok_or_else(|| GpuError::Invalid("a, b, c on the device need the witness's other values there".into()))?;
    let (n_in, n_aux, one_mont) = (z.lead.len() as u64, z.layout.len as u64, to_device(&Scalar::ONE));
    // SAFETY: the rows' offsets, columns and coefficients are valid (the caller's
    // contract); the inputs hold num_inputs values, the bitmaps and offsets ⌈num_aux / 64⌉
    // words and the other values every one they mark (CompactView); `out` holds n values.
    unsafe {
        gpu.k.csr_products(
            stream,
            blocks(n, THREADS),
            &rows.row_starts,
            rows.base,
            &rows.columns,
            &rows.coefficients,
            dictionary,
            &z.lead,
            n_in,
            &z.one,
            &z.zero,
            &z.offsets,
            others,
            n_aux,
            one_mont,
            n,
            &mut *out,
        )?
    };
    Ok(())
}

/// A partition's assignment z = (inputs, aux) on the device in compact form, in an
/// area of its own (the prover keeps its witnesses in its staging slots' areas).
pub struct DeviceWitness {
    area: CudaSlice<u64>,
    layout: CompactLayout,
    /// Bytes sent to the device.
    pub bytes: u64,
}

impl DeviceWitness {
    /// Sends `w` on `stream` (no host wait; from pageable memory the driver copies
    /// before returning).
    pub fn upload(gpu: &Gpu, stream: &Arc<CudaStream>, w: &CompactWitness) -> Result<Self, GpuError> {
        let host = HostCompact { lead: &w.input, classes: &w.classes, len: w.num_aux(), others: &w.others };
        let layout = CompactLayout::new(w.input.len(), w.num_aux(), w.others.len(), true);
        let mut area = stream.alloc_zeros::<u64>(layout.words().max(1))?;
        let bytes = host.upload(gpu, stream, &mut area, &layout)?;
        Ok(DeviceWitness { area, layout, bytes })
    }

    pub fn view(&self) -> Result<CompactView<'_>, GpuError> {
        CompactView::of(&self.area, &self.layout)
    }

    pub fn num_aux(&self) -> usize {
        self.layout.len
    }

    /// z read back whole (expanded on the device; waits for its stream): for tests.
    pub fn to_host(&self, gpu: &Gpu) -> Result<Vec<Scalar>, GpuError> {
        let v = self.view()?;
        let stream = self.area.stream();
        let n = self.layout.len;
        let mut out = stream.alloc_zeros::<DeviceFr>(v.lead.len() + n)?;
        stream.memcpy_dtod(&v.lead, &mut out.slice_mut(..v.lead.len()))?;
        if n > 0 {
            let others = v.others.as_ref().ok_or_else(|| GpuError::Invalid("a device witness without its other values".into()))?;
            let (n64, one_mont) = (n as u64, to_device(&Scalar::ONE));
            let mut aux = out.slice_mut(v.lead.len()..);
            // SAFETY: `aux` holds n values; the bitmaps, offsets and other values are the
            // layout's (CompactView).
            unsafe { gpu.k.compact_expand(stream, blocks(n64, THREADS), &v.one, &v.zero, &v.offsets, others, n64, one_mont, &mut aux)? };
        }
        read_back(&out)
    }
}

/// A device vector of scalars read back (waits for its stream).
pub fn read_back(v: &CudaSlice<DeviceFr>) -> Result<Vec<Scalar>, GpuError> {
    let mut out = vec![Scalar::ZERO; v.len()];
    // SAFETY: the kernels of this module write fully reduced values only.
    v.stream().memcpy_dtoh(v, unsafe { crate::field::as_device_mut(&mut out) })?;
    v.stream().synchronize()?;
    Ok(out)
}
