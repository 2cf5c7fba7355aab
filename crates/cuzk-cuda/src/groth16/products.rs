//! a, b, c computed on the device (kernels/groth16/products.cuh): a circuit shape's
//! compiled matrices uploaded once ([`DeviceMatrices`]), a partition's witness sent in
//! compact form and expanded there ([`DeviceWitness`]), then a = A·z, b = B·z,
//! c = C·z by one thread per row ([`DeviceMatrices::products`]).
//!
//! What crosses the bus per partition is the compact witness only: for a 32 GiB PoRep
//! partition ~0.1 GB (two bitmaps of 16 MB and 1.3 % of 130 M aux values) instead of
//! 4.2 GB of aux values and 12.9 GB of a, b, c.
//!
//! Invariant: the products equal [`ConstraintMatrices::synthesize`]'s bit for bit
//! (every device value is kept fully reduced, so the order of additions is free).

use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut, PushKernelArg};
use cuzk_groth16::matrices::{ConstraintMatrices, SparseMatrix};
use cuzk_groth16::CompactWitness;
use ff::Field;

use crate::device::{Gpu, GpuError};
use crate::field::{as_device, to_device, DeviceFr};
use crate::msm::blocks;
use crate::msm::split::DeviceAux;

/// Words of the bitmaps per block of `witness_word_offsets` (WITNESS_OFFSET_THREADS).
const OFFSET_WORDS: usize = 256;
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
        self.products_into(gpu, stream, z, [&mut a.slice_mut(..), &mut b.slice_mut(..), &mut c.slice_mut(..)])?;
        Ok(out)
    }

    /// a, b, c of the witness `z` into `out` (three vectors of equal length ≥ rows; the
    /// rows past the constraints zeroed, as the NTT domain wants them), enqueued on
    /// `stream` (a staging slot's copy stream: no host wait).
    pub fn products_into(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        z: &DeviceWitness,
        out: [&mut CudaViewMut<'_, DeviceFr>; 3],
    ) -> Result<(), GpuError> {
        if z.num_inputs != self.num_inputs || z.num_aux() != self.num_aux {
            return Err(GpuError::Invalid(format!(
                "a witness of {} inputs and {} aux values for matrices of {} and {} (another circuit shape)",
                z.num_inputs,
                z.num_aux(),
                self.num_inputs,
                self.num_aux
            )));
        }
        let len = out[0].len();
        if out.iter().any(|v| v.len() != len) || len < self.rows {
            return Err(GpuError::Invalid(format!(
                "vectors of {}, {} and {} values for {} rows",
                out[0].len(),
                out[1].len(),
                out[2].len(),
                self.rows
            )));
        }
        let rows = self.rows as u64;
        let values = z.aux.values();
        for (m, v) in self.matrices.iter().zip(out) {
            if len > self.rows {
                stream.memset_zeros(&mut v.slice_mut(self.rows..))?;
            }
            let mut b = stream.launch_builder(&gpu.k.csr_products);
            b.arg(&m.row_starts).arg(&m.columns).arg(&m.coefficients).arg(&self.dictionary).arg(values).arg(&rows).arg(&mut *v);
            // SAFETY: matches `csr_products(const u64*, const u32*, const u16*, const fr*,
            // const fr*, u64, fr*)`. row_starts holds rows + 1 ascending offsets into
            // columns and coefficients (a SparseMatrix's invariant, checked when its file
            // was read); every column is below num_inputs + num_aux, z's length (checked
            // above: the same shape); every coefficient index is below the dictionary's
            // length (compile's invariant); `v` holds len ≥ rows values.
            unsafe { b.launch(blocks(rows, THREADS))? };
        }
        Ok(())
    }
}

/// A partition's assignment z = (inputs, aux) on the device, expanded there from its
/// compact form.
pub struct DeviceWitness {
    /// z whole (the inputs, then the aux values) and the aux values' classes: what the
    /// split lists are built from.
    pub aux: DeviceAux,
    num_inputs: usize,
    /// Bytes sent to the device.
    pub bytes: u64,
}

impl DeviceWitness {
    /// Sends `w` on `stream` and expands it there (no host wait; from pageable memory
    /// the driver copies before returning).
    pub fn upload(gpu: &Gpu, stream: &Arc<CudaStream>, w: &CompactWitness) -> Result<Self, GpuError> {
        let n = w.num_aux();
        let words = n.div_ceil(64);
        let (one, zero) = (&w.classes.one, &w.classes.zero);
        if one.len() != n || one.words().len() < words || zero.words().len() < words || w.input.is_empty() {
            return Err(GpuError::Invalid(format!(
                "a compact witness of {n} aux values with class bitmaps of {} and {} values",
                one.len(),
                zero.len()
            )));
        }
        // Each offset block's first other value: popcounts of the host's bitmaps.
        let mut block_first = Vec::with_capacity(words.div_ceil(OFFSET_WORDS));
        let mut seen = 0usize;
        for (w_i, (o, z)) in one.words()[..words].iter().zip(&zero.words()[..words]).enumerate() {
            if w_i % OFFSET_WORDS == 0 {
                block_first.push(seen as u32);
            }
            let valid = if (w_i + 1) * 64 <= n { u64::MAX } else { (1u64 << (n % 64)) - 1 };
            seen += (!o & !z & valid).count_ones() as usize;
        }
        if seen != w.others.len() {
            return Err(GpuError::Invalid(format!("the bitmaps mark {seen} other values, the witness has {}", w.others.len())));
        }
        if seen >= 1 << 32 {
            return Err(GpuError::Invalid(format!("{seen} other values: more than 32-bit offsets hold")));
        }
        let d_one = stream.clone_htod(&one.words()[..words])?;
        let d_zero = stream.clone_htod(&zero.words()[..words])?;
        let d_first = stream.clone_htod(&block_first)?;
        let d_others = stream.clone_htod(as_device(if w.others.is_empty() { &[Scalar::ZERO] } else { &w.others }))?;
        let n_in = w.input.len();
        let mut z = stream.alloc_zeros::<DeviceFr>(n_in + n)?;
        stream.memcpy_htod(as_device(&w.input), &mut z.slice_mut(..n_in))?;
        if n > 0 {
            // SAFETY: every entry is written by witness_word_offsets before
            // witness_expand (the next launch on the same stream) reads it.
            let mut offsets = unsafe { stream.alloc::<u32>(words)? };
            let n64 = n as u64;
            let mut b = stream.launch_builder(&gpu.k.witness_word_offsets);
            b.arg(&d_one).arg(&d_zero).arg(&n64).arg(&d_first).arg(&mut offsets);
            // SAFETY: matches `witness_word_offsets(const u64*, const u64*, u64, const
            // u32*, u32*)`; the bitmaps hold ⌈n/64⌉ words, block_first one entry per
            // block of 256 words, offsets ⌈n/64⌉ entries.
            unsafe { b.launch(blocks(words as u64, OFFSET_WORDS as u32))? };
            let one_mont = to_device(&Scalar::ONE);
            let mut aux = z.slice_mut(n_in..);
            let mut b = stream.launch_builder(&gpu.k.witness_expand);
            b.arg(&d_one).arg(&d_zero).arg(&offsets).arg(&d_others).arg(&n64).arg(&one_mont).arg(&mut aux);
            // SAFETY: matches `witness_expand(const u64*, const u64*, const u32*, const
            // fr*, u64, fr (by value), fr*)`; `aux` holds n values; every offset plus a
            // word's rank is below the count of other values, `others`' length (checked
            // above against the bitmaps).
            unsafe { b.launch(blocks(n64, THREADS))? };
        }
        let bytes = (2 * words * 8 + block_first.len() * 4 + (w.others.len() + n_in) * 32) as u64;
        // The offsets are freed in stream order, after the kernel that reads them.
        Ok(DeviceWitness { aux: DeviceAux::on_device(z, n_in, d_one, d_zero)?, num_inputs: n_in, bytes })
    }

    pub fn num_aux(&self) -> usize {
        self.aux.len()
    }

    /// z read back (waits for the stream): for tests.
    pub fn to_host(&self) -> Result<Vec<Scalar>, GpuError> {
        read_back(self.aux.values())
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
