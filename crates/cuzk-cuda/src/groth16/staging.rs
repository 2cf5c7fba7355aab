//! a, b and c of partitions on their way to the device: uploaded, or computed there
//! from compiled matrices ([`Staging::products`]).
//!
//! They live in one of [`STAGING_SLOTS`] device slots of three vectors each, allocated
//! once and reused by every partition of that size or smaller: with two, the next
//! partition's a, b, c upload while this one's are still in use on the compute stream.
//! Each slot has a copy stream of its own, so two preparations never queue behind each
//! other's uploads; events order a slot's uploads before the kernels that read them,
//! and cudarc's per-buffer event tracking orders a slot's reuse after its last reader.

use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex};

use blstrs::Scalar;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaViewMut};

use super::products::{DeviceMatrices, DeviceWitness};
use crate::device::{Gpu, GpuError};
use crate::field::{as_device, DeviceFr};

/// Device slots for a, b and c: one in use by the compute stream while the next
/// partition uploads into the other.
pub const STAGING_SLOTS: usize = 2;

/// a, b and c of one partition on the device (three vectors of equal length).
struct Slot {
    v: [CudaSlice<DeviceFr>; 3],
    /// The slot's uploads and the preparation work that goes with them.
    copy: Arc<CudaStream>,
}

#[derive(Default)]
struct SlotPool {
    free: Vec<Slot>,
    /// Slots in existence, free or taken.
    total: usize,
    /// Elements per vector of each slot in existence.
    lens: Vec<usize>,
}

/// The staging slots of one GPU.
pub struct StagingSlots {
    gpu: Arc<Gpu>,
    pool: Mutex<SlotPool>,
    freed: Condvar,
}

impl StagingSlots {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        StagingSlots { gpu, pool: Mutex::new(SlotPool::default()), freed: Condvar::new() }
    }

    /// A slot for a partition of an n-point domain: a free one, else a new one while
    /// fewer than [`STAGING_SLOTS`] exist, else the next one freed. A slot too small is
    /// freed and allocated again at the larger size. Contents are whatever the last
    /// user left: every user writes the part it reads first.
    pub fn take(&self, n: usize) -> Result<Staging<'_>, GpuError> {
        let waited = std::time::Instant::now();
        let slot = self.take_slot(n)?;
        tracing::debug!(ms = waited.elapsed().as_secs_f64() * 1e3, "staging slot taken");
        match slot.copy.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)) {
            Ok(upload_start) => Ok(Staging { slots: self, slot: Some(slot), n, upload_start: Some(upload_start) }),
            Err(e) => {
                self.put(slot);
                Err(e.into())
            }
        }
    }

    fn take_slot(&self, n: usize) -> Result<Slot, GpuError> {
        let poisoned = || GpuError::Invalid("staging slots poisoned".into());
        let mut pool = self.pool.lock().map_err(|_| poisoned())?;
        loop {
            if let Some(slot) = pool.free.pop() {
                if slot.v[0].len() >= n {
                    return Ok(slot);
                }
                pool.total -= 1; // too small: dropped (stream-ordered free), replaced below
                if let Some(i) = pool.lens.iter().position(|&l| l == slot.v[0].len()) {
                    pool.lens.swap_remove(i);
                }
            }
            if pool.total < STAGING_SLOTS {
                pool.total += 1;
                drop(pool);
                let alloc = || -> Result<Slot, GpuError> {
                    // SAFETY: uninitialised device memory is only read after the caller
                    // has written it (upload or zero padding).
                    let one = || unsafe { self.gpu.stream.alloc::<DeviceFr>(n.max(1)) };
                    Ok(Slot { v: [one()?, one()?, one()?], copy: self.gpu.ctx.new_stream()? })
                };
                let r = alloc();
                let mut pool = self.pool.lock().map_err(|_| poisoned())?;
                if r.is_err() {
                    pool.total -= 1;
                    self.freed.notify_one();
                } else {
                    pool.lens.push(n.max(1));
                    tracing::debug!(n, "staging slot allocated");
                }
                return r;
            }
            pool = self.freed.wait(pool).map_err(|_| poisoned())?;
        }
    }

    /// Device bytes the slots already hold that a partition of an n-point domain
    /// would reuse (slots of at least n elements, n of them per vector): memory the
    /// free figure no longer shows but a partition's working memory needs no more.
    pub fn bytes_held(&self, n: usize) -> usize {
        let slots = self.pool.lock().map(|p| p.lens.iter().filter(|&&l| l >= n).count()).unwrap_or(0);
        slots.min(STAGING_SLOTS) * 3 * std::mem::size_of::<DeviceFr>() * n
    }

    fn put(&self, slot: Slot) {
        match self.pool.lock() {
            Ok(mut pool) => pool.free.push(slot),
            Err(_) => tracing::error!("staging slots poisoned; a slot is dropped"),
        }
        self.freed.notify_one();
    }
}

/// A slot taken for one partition, before its a, b, c go up: the partition's other
/// uploads go on [`Staging::copy_stream`] first (a pageable copy waits for the stream's
/// earlier work, so it must come before the long pinned ones). Dropped without
/// [`Staging::upload`], it waits for that stream and gives the slot back.
pub struct Staging<'s> {
    slots: &'s StagingSlots,
    slot: Option<Slot>,
    n: usize,
    /// On the copy stream, before the partition's first upload (taken by `upload`).
    upload_start: Option<CudaEvent>,
}

impl<'s> Staging<'s> {
    /// The slot's copy stream.
    pub fn copy_stream(&self) -> Result<&Arc<CudaStream>, GpuError> {
        self.slot.as_ref().map(|s| &s.copy).ok_or_else(|| GpuError::Invalid("staging without a slot".into()))
    }

    /// Uploads a, b, c (each at most n long, zero-padded to n) on the copy stream and
    /// returns at once for pinned host memory (pageable memory is copied through the
    /// driver before the call returns). The slot is written only after the compute
    /// stream's last use of it.
    pub fn upload<'h>(mut self, a: &'h [Scalar], b: &'h [Scalar], c: &'h [Scalar]) -> Result<StagedAbc<'s, 'h>, GpuError> {
        let n = self.n;
        if [a, b, c].iter().any(|v| v.len() > n) {
            return Err(GpuError::Invalid(format!("a, b, c of {}, {} and {} values for a slot of {n}", a.len(), b.len(), c.len())));
        }
        let (Some(mut slot), Some(upload_start)) = (self.slot.take(), self.upload_start.take()) else {
            return Err(GpuError::Invalid("staging without a slot".into()));
        };
        let cp = slot.copy.clone();
        let r = (|| -> Result<[CudaEvent; 3], GpuError> {
            let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let mut ev = Vec::with_capacity(3);
            for (v, src) in slot.v.iter_mut().zip([a, b, c]) {
                cp.memcpy_htod(as_device(src), &mut v.slice_mut(..src.len()))?;
                if src.len() < n {
                    cp.memset_zeros(&mut v.slice_mut(src.len()..n))?;
                }
                ev.push(cp.record_event(timing)?);
            }
            ev.try_into().map_err(|_| GpuError::Invalid("upload events".into()))
        })();
        match r {
            Ok(uploaded) => {
                let bytes = (a.len() + b.len() + c.len()) as u64 * std::mem::size_of::<Scalar>() as u64;
                Ok(StagedAbc { slots: self.slots, slot: Some(slot), n, upload_start, products_start: None, uploaded, bytes, host: PhantomData })
            }
            Err(e) => {
                // Nothing may still read the caller's memory; the slot goes back.
                if let Err(e) = cp.synchronize() {
                    tracing::error!(error = %e, "synchronizing after a failed upload");
                }
                self.slots.put(slot);
                Err(e)
            }
        }
    }
}

impl<'s> Staging<'s> {
    /// a, b, c as the products of the compiled `matrices` with the device witness `z`
    /// (sent and expanded on [`Staging::copy_stream`] before), computed into the slot on
    /// the copy stream (zero-padded to n): nothing is read from the host.
    pub fn products(mut self, gpu: &Gpu, matrices: &DeviceMatrices, z: &DeviceWitness) -> Result<StagedAbc<'s, 'static>, GpuError> {
        let n = self.n;
        let (Some(mut slot), Some(upload_start)) = (self.slot.take(), self.upload_start.take()) else {
            return Err(GpuError::Invalid("staging without a slot".into()));
        };
        let cp = slot.copy.clone();
        let r = (|| -> Result<(CudaEvent, [CudaEvent; 3]), GpuError> {
            let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let products_start = cp.record_event(timing)?;
            let [a, b, c] = &mut slot.v;
            matrices.products_into(gpu, &cp, z, [&mut a.slice_mut(..n), &mut b.slice_mut(..n), &mut c.slice_mut(..n)])?;
            // One event for all three: the products run in order on the copy stream.
            let done = || cp.record_event(timing);
            Ok((products_start, [done()?, done()?, done()?]))
        })();
        match r {
            Ok((products_start, uploaded)) => Ok(StagedAbc {
                slots: self.slots,
                slot: Some(slot),
                n,
                upload_start,
                products_start: Some(products_start),
                uploaded,
                bytes: z.bytes,
                host: PhantomData,
            }),
            Err(e) => {
                if let Err(e) = cp.synchronize() {
                    tracing::error!(error = %e, "synchronizing after failed products");
                }
                self.slots.put(slot);
                Err(e)
            }
        }
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            // Not uploaded (an error before): whatever went on the copy stream may read
            // the caller's memory.
            if let Err(e) = slot.copy.synchronize() {
                tracing::error!(error = %e, "synchronizing a staging slot given back");
            }
            self.slots.put(slot);
        }
    }
}

/// a, b and c of one partition uploaded (or uploading, on the slot's copy stream)
/// into a staging slot, zero-padded to the domain. Holds the slot until dropped; the
/// drop waits for the uploads, so the host vectors borrowed for `'h` are free again
/// ([`StagedAbc::detach`] frees them earlier).
pub struct StagedAbc<'s, 'h> {
    slots: &'s StagingSlots,
    slot: Option<Slot>,
    n: usize,
    /// On the copy stream: before the partition's first upload (the staging's), before
    /// the products where the device computes a, b, c ([`Staging::products`]), after
    /// each of a, b, c.
    pub upload_start: CudaEvent,
    pub products_start: Option<CudaEvent>,
    pub uploaded: [CudaEvent; 3],
    /// Bytes sent to the device.
    pub bytes: u64,
    host: PhantomData<&'h [Scalar]>,
}

impl<'s> StagedAbc<'s, '_> {
    /// The domain size n.
    pub fn domain_size(&self) -> usize {
        self.n
    }

    /// The three device vectors (n elements each) and the events after their uploads.
    pub fn views(&mut self) -> Result<([CudaViewMut<'_, DeviceFr>; 3], [&CudaEvent; 3]), GpuError> {
        let n = self.n;
        let slot = self.slot.as_mut().ok_or_else(|| GpuError::Invalid("staged a, b, c without a slot".into()))?;
        let [a, b, c] = &mut slot.v;
        let [ea, eb, ec] = &self.uploaded;
        Ok(([a.slice_mut(..n), b.slice_mut(..n), c.slice_mut(..n)], [ea, eb, ec]))
    }

    /// Waits for the uploads of a, b and c: the host vectors are then the caller's
    /// again, and the staged values no longer borrow them.
    pub fn detach(mut self) -> Result<StagedAbc<'s, 'static>, GpuError> {
        for e in &self.uploaded {
            e.synchronize()?;
        }
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let copy = self.slot.as_ref().ok_or_else(|| GpuError::Invalid("staged a, b, c without a slot".into()))?.copy.clone();
        // Placeholders for the events moved out (the drop below waits on them: done).
        let swap = || copy.record_event(timing);
        let upload_start = std::mem::replace(&mut self.upload_start, swap()?);
        let uploaded = [
            std::mem::replace(&mut self.uploaded[0], swap()?),
            std::mem::replace(&mut self.uploaded[1], swap()?),
            std::mem::replace(&mut self.uploaded[2], swap()?),
        ];
        let products_start = match &mut self.products_start {
            Some(e) => Some(std::mem::replace(e, swap()?)),
            None => None,
        };
        Ok(StagedAbc {
            slots: self.slots,
            slot: self.slot.take(),
            n: self.n,
            upload_start,
            products_start,
            uploaded,
            bytes: self.bytes,
            host: PhantomData,
        })
    }
}

impl Drop for StagedAbc<'_, '_> {
    fn drop(&mut self) {
        for e in &self.uploaded {
            if let Err(e) = e.synchronize() {
                tracing::error!(error = %e, "waiting for an upload of a, b, c");
            }
        }
        if let Some(slot) = self.slot.take() {
            self.slots.put(slot);
        }
    }
}
