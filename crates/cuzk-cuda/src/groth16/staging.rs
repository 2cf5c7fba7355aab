//! The device memory of partitions in flight: staging slots, as many as the device plan
//! allows (crate::groth16::plan), each taken by one partition from its preparation to
//! the end of its MSMs.
//!
//! A slot is two allocations made once and reused by every partition (no allocation per
//! partition, so the device pool never fragments):
//! - the **arena**: a, b and c (n scalars each: uploaded, or computed there from the
//!   compiled matrices, [`Staging::products`]); once the H polynomial has left h in a,
//!   the rest of the arena holds the split lists' pieces and the MSM scratch
//!   ([`StagedAbc::msm_memory`]);
//! - the **witness area**: the partition's compact witness (crate::msm::compact).
//!
//! Each slot has a copy stream of its own, so two preparations never queue behind each
//! other's uploads; events order a slot's uploads before the kernels that read them, and
//! cudarc's per-buffer event tracking orders a slot's reuse after its last reader.
//!
//! Urgent callers ([`Urgency::Urgent`]) take the next slot freed before ordinary ones
//! that waited longer, and their slot carries a [`Claim`] on the device's next turn
//! (crate::turn) until they take it.

use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use blstrs::Scalar;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaViewMut};
use cuzk_groth16::Urgency;

use super::row_blocks::ProductSource;
use crate::device::{Gpu, GpuError};
use crate::field::{as_device, DeviceFr};
use crate::msm::compact::{CompactLayout, CompactView};
use crate::turn::Claim;
use crate::turn::DeviceLock;
use cuzk_groth16::sync::{lock, wait};

/// The memory of one partition in flight.
struct Slot {
    arena: CudaSlice<DeviceFr>,
    witness: CudaSlice<u64>,
    /// The slot's uploads and the preparation work that goes with them.
    copy: Arc<CudaStream>,
    /// An urgent partition's claim on the device's next turn, from the slot's taking
    /// to the compute region ([`StagedAbc::take_claim`]); given up with the slot.
    claim: Option<Claim>,
}

impl Slot {
    fn bytes(&self) -> usize {
        self.arena.len() * std::mem::size_of::<DeviceFr>() + self.witness.len() * 8
    }
}

/// How many slots and how large, as the plan says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotSizes {
    pub count: usize,
    pub arena_bytes: usize,
    pub witness_bytes: usize,
}

#[derive(Default)]
struct SlotPool {
    free: Vec<Slot>,
    /// Slots in existence, free or taken.
    total: usize,
    sizes: SlotSizes,
    /// Bytes of the slots in existence.
    held: usize,
    /// Urgent callers waiting for a slot: ordinary ones wait behind them.
    urgent_waiting: usize,
}

/// The staging slots of one GPU.
pub struct StagingSlots {
    gpu: Arc<Gpu>,
    pool: Mutex<SlotPool>,
    freed: Condvar,
    /// The device's turn, which urgent slots claim.
    turn: DeviceLock,
}

impl StagingSlots {
    /// No slots until [`StagingSlots::configure`] sizes them. Urgent slots claim
    /// `turn`'s next turn.
    pub fn new(gpu: Arc<Gpu>, turn: DeviceLock) -> Self {
        StagingSlots { gpu, pool: Mutex::new(SlotPool::default()), freed: Condvar::new(), turn }
    }

    /// From now on at most `sizes.count` slots of the given sizes: free slots of other
    /// sizes go now (in stream order), taken ones when they come back.
    pub fn configure(&self, sizes: SlotSizes) -> Result<(), GpuError> {
        let mut pool = lock(&self.pool);
        if pool.sizes == sizes {
            return Ok(());
        }
        pool.sizes = sizes;
        let stale: Vec<Slot> = std::mem::take(&mut pool.free);
        for slot in stale {
            if Self::fits(&slot, sizes) && pool.free.len() < sizes.count {
                pool.free.push(slot);
            } else {
                pool.total -= 1;
                pool.held -= slot.bytes();
            }
        }
        self.freed.notify_all();
        Ok(())
    }

    fn fits(slot: &Slot, sizes: SlotSizes) -> bool {
        slot.arena.len() * std::mem::size_of::<DeviceFr>() == sizes.arena_bytes && slot.witness.len() * 8 == sizes.witness_bytes
    }

    /// The configured sizes.
    pub fn sizes(&self) -> SlotSizes {
        lock(&self.pool).sizes
    }

    /// A slot for a partition of an n-point domain: a free one, else a new one while
    /// fewer than the configured count exist, else the next one freed (urgent callers
    /// first; an urgent caller's slot claims the device's next turn). Contents are
    /// whatever the last user left: every user writes the part it reads first.
    pub fn take(&self, n: usize, urgency: Urgency) -> Result<Staging<'_>, GpuError> {
        let waited = std::time::Instant::now();
        let mut slot = self.take_slot(urgency)?;
        if urgency == Urgency::Urgent {
            match self.turn.claim() {
                Ok(claim) => slot.claim = Some(claim),
                Err(e) => {
                    self.put(slot);
                    return Err(e);
                }
            }
        }
        if slot.arena.len() < 3 * n {
            let len = slot.arena.len();
            self.put(slot);
            return Err(GpuError::Invalid(format!("a staging slot of {len} scalars for a domain of {n}: the plan was made for another set")));
        }
        tracing::debug!(ms = waited.elapsed().as_secs_f64() * 1e3, ?urgency, "staging slot taken");
        match slot.copy.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)) {
            Ok(upload_start) => Ok(Staging { slots: self, slot: Some(slot), n, upload_start: Some(upload_start) }),
            Err(e) => {
                self.put(slot);
                Err(e.into())
            }
        }
    }

    fn take_slot(&self, urgency: Urgency) -> Result<Slot, GpuError> {
        let pool = lock(&self.pool);
        let urgent = urgency == Urgency::Urgent;
        if !urgent {
            return self.take_slot_in(pool, false);
        }
        let mut pool = pool;
        pool.urgent_waiting += 1;
        // Counted out again however the wait ends.
        struct Waiting<'a>(&'a StagingSlots);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                lock(&self.0.pool).urgent_waiting -= 1;
                self.0.freed.notify_all();
            }
        }
        let _waiting = Waiting(self);
        self.take_slot_in(pool, true)
    }

    /// [`StagingSlots::take_slot`] with the pool locked; an ordinary caller waits while
    /// an urgent one does.
    fn take_slot_in(&self, mut pool: MutexGuard<'_, SlotPool>, urgent: bool) -> Result<Slot, GpuError> {
        loop {
            let sizes = pool.sizes;
            if sizes.count == 0 {
                return Err(GpuError::Invalid("no staging slots: the device plan has not sized them".into()));
            }
            if !urgent && pool.urgent_waiting > 0 {
                pool = wait(&self.freed, pool);
                continue;
            }
            if let Some(slot) = pool.free.pop() {
                return Ok(slot);
            }
            if pool.total < sizes.count {
                pool.total += 1;
                drop(pool);
                return self.made(sizes, self.new_slot(sizes));
            }
            pool = wait(&self.freed, pool);
        }
    }

    /// Makes the configured slots not made yet, kept free, so that a shortage of device
    /// memory shows when a set is placed rather than in its first proof.
    pub fn allocate_all(&self) -> Result<(), GpuError> {
        loop {
            let sizes = {
                let mut pool = lock(&self.pool);
                if pool.total >= pool.sizes.count {
                    return Ok(());
                }
                pool.total += 1;
                pool.sizes
            };
            let slot = self.made(sizes, self.new_slot(sizes))?;
            self.put(slot);
        }
    }

    /// A new slot of `sizes`, allocated on its own copy stream, where its first writes
    /// go: a stream-ordered allocation is valid only once its stream has reached it, and
    /// on the compute stream that would be after kernels still using the pool memory it
    /// reuses (two callers at once got wrong MSM sums and an illegal address on an H100
    /// when slots were allocated there and written from the copy stream at once).
    fn new_slot(&self, sizes: SlotSizes) -> Result<Slot, GpuError> {
        let copy = self.gpu.ctx.new_stream()?;
        // SAFETY: uninitialised device memory is only read after the caller has written
        // it (upload, products, zero padding, list building).
        let arena = unsafe { copy.alloc::<DeviceFr>(sizes.arena_bytes / std::mem::size_of::<DeviceFr>())? };
        // SAFETY: as above (the compact witness is uploaded before it is read).
        let witness = unsafe { copy.alloc::<u64>(sizes.witness_bytes.div_ceil(8).max(1))? };
        Ok(Slot { arena, witness, copy, claim: None })
    }

    /// Counts a slot made for `pool.total`'s increment (its bytes held), or takes the
    /// increment back where it failed.
    fn made(&self, sizes: SlotSizes, r: Result<Slot, GpuError>) -> Result<Slot, GpuError> {
        let mut pool = lock(&self.pool);
        match &r {
            Ok(slot) => {
                pool.held += slot.bytes();
                tracing::info!(
                    gb = format!("{:.2}", slot.bytes() as f64 / 1e9),
                    slots = pool.total,
                    of = sizes.count,
                    "staging slot allocated (a, b, c, list pieces, MSM scratch, witness)"
                );
            }
            Err(_) => {
                pool.total -= 1;
                self.freed.notify_all();
            }
        }
        r
    }

    /// Device bytes the slots hold now.
    pub fn bytes_held(&self) -> usize {
        lock(&self.pool).held
    }

    /// Frees every free slot (the plan goes with the last set); taken ones go when given back.
    pub fn release(&self) {
        let mut pool = lock(&self.pool);
        pool.sizes = SlotSizes::default();
        for slot in std::mem::take(&mut pool.free) {
            pool.total -= 1;
            pool.held -= slot.bytes();
        }
    }

    fn put(&self, mut slot: Slot) {
        // An urgent partition's claim goes with its slot (an error before its turn).
        slot.claim = None;
        {
            let mut pool = lock(&self.pool);
            let sizes = pool.sizes;
            if Self::fits(&slot, sizes) && pool.total <= sizes.count {
                pool.free.push(slot);
            } else {
                // Sized for an earlier plan: freed (in stream order); a new one is made
                // when next needed.
                pool.total -= 1;
                pool.held -= slot.bytes();
            }
        }
        // Every waiter looks: an urgent one goes first, and ordinary ones wait for it.
        self.freed.notify_all();
    }
}

/// A slot taken for one partition, before its a, b, c are there: the compact witness
/// and the partition's other uploads go on [`Staging::copy_stream`] first (a pageable
/// copy waits for the stream's earlier work, so it must come before the long pinned
/// ones). Dropped without [`Staging::upload`] or [`Staging::products`], it waits for
/// that stream and gives the slot back.
pub struct Staging<'s> {
    slots: &'s StagingSlots,
    slot: Option<Slot>,
    n: usize,
    /// On the copy stream, before the partition's first upload (taken by `upload`).
    upload_start: Option<CudaEvent>,
}

impl<'s> Staging<'s> {
    fn slot(&self) -> Result<&Slot, GpuError> {
        self.slot.as_ref().ok_or_else(|| GpuError::Invalid("staging without a slot".into()))
    }

    /// The slot's copy stream.
    pub fn copy_stream(&self) -> Result<&Arc<CudaStream>, GpuError> {
        Ok(&self.slot()?.copy)
    }

    /// The witness area, and the copy stream to fill it on.
    pub fn witness_area(&mut self) -> Result<(&mut CudaSlice<u64>, Arc<CudaStream>), GpuError> {
        let slot = self.slot.as_mut().ok_or_else(|| GpuError::Invalid("staging without a slot".into()))?;
        Ok((&mut slot.witness, slot.copy.clone()))
    }

    /// Bytes of the witness area.
    pub fn witness_bytes(&self) -> Result<usize, GpuError> {
        Ok(self.slot()?.witness.len() * 8)
    }

    fn take(&mut self) -> Result<(Slot, CudaEvent), GpuError> {
        match (self.slot.take(), self.upload_start.take()) {
            (Some(slot), Some(start)) => Ok((slot, start)),
            (slot, _) => {
                if let Some(slot) = slot {
                    self.slots.put(slot);
                }
                Err(GpuError::Invalid("staging without a slot".into()))
            }
        }
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
        let (mut slot, upload_start) = self.take()?;
        let cp = slot.copy.clone();
        let r = (|| -> Result<[CudaEvent; 3], GpuError> {
            let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let mut ev = Vec::with_capacity(3);
            for (i, src) in [a, b, c].into_iter().enumerate() {
                let mut v = slot.arena.slice_mut(i * n..(i + 1) * n);
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

    /// a, b, c as the products of the compiled `matrices` with the compact witness
    /// already in the witness area (laid out by `layout`, other values resident),
    /// computed into the slot on the copy stream (zero-padded to n): from the host,
    /// only streamed matrices' blocks are read. `sent` is what the witness took up the
    /// bus (the blocks are added).
    pub fn products(
        mut self,
        gpu: &Gpu,
        matrices: &ProductSource<'_>,
        layout: &CompactLayout,
        sent: u64,
    ) -> Result<StagedAbc<'s, 'static>, GpuError> {
        let n = self.n;
        let (mut slot, upload_start) = self.take()?;
        let cp = slot.copy.clone();
        let r = (|| -> Result<(CudaEvent, [CudaEvent; 3], u64), GpuError> {
            let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let products_start = cp.record_event(timing)?;
            let z = CompactView::of(&slot.witness, layout)?;
            let (mut a, mut rest) = slot.arena.split_at_mut(n);
            let (mut b, mut rest) = rest.split_at_mut(n);
            let mut c = rest.slice_mut(..n);
            let blocks = matrices.products_into(gpu, &cp, &z, [&mut a, &mut b, &mut c])?;
            // One event for all three: the products run in order on the copy stream.
            let done = || cp.record_event(timing);
            Ok((products_start, [done()?, done()?, done()?], blocks))
        })();
        match r {
            Ok((products_start, uploaded, blocks)) => Ok(StagedAbc {
                slots: self.slots,
                slot: Some(slot),
                n,
                upload_start,
                products_start: Some(products_start),
                uploaded,
                bytes: sent + blocks,
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
    /// Bytes sent to the device for a, b, c (or for the witness they were computed from).
    pub bytes: u64,
    host: PhantomData<&'h [Scalar]>,
}

/// A slot's memory once the H polynomial is done: a (h in its first n − 1 scalars),
/// the rest of the arena (for the list pieces and the MSM scratch) and the compact
/// witness.
pub struct MsmMemory<'a> {
    pub a: CudaViewMut<'a, DeviceFr>,
    pub rest: CudaViewMut<'a, DeviceFr>,
    pub witness: &'a CudaSlice<u64>,
}

impl<'s> StagedAbc<'s, '_> {
    /// An urgent partition's claim on the device's next turn (taken once).
    pub fn take_claim(&mut self) -> Option<Claim> {
        self.slot.as_mut().and_then(|s| s.claim.take())
    }

    fn slot_mut(&mut self) -> Result<&mut Slot, GpuError> {
        self.slot.as_mut().ok_or_else(|| GpuError::Invalid("staged a, b, c without a slot".into()))
    }

    /// The domain size n.
    pub fn domain_size(&self) -> usize {
        self.n
    }

    /// The three device vectors (n elements each) and the events after their uploads.
    pub fn views(&mut self) -> Result<([CudaViewMut<'_, DeviceFr>; 3], [&CudaEvent; 3]), GpuError> {
        let n = self.n;
        let slot = self.slot.as_mut().ok_or_else(|| GpuError::Invalid("staged a, b, c without a slot".into()))?;
        let mut abc = slot.arena.slice_mut(..3 * n).chunks_exact_mut(n);
        let mut next = || abc.next().ok_or_else(|| GpuError::Invalid("a, b, c views".into()));
        let (a, b, c) = (next()?, next()?, next()?);
        let [ea, eb, ec] = &self.uploaded;
        Ok(([a, b, c], [ea, eb, ec]))
    }

    /// The slot's memory for the MSMs: h (the first n − 1 scalars of a, where the H
    /// polynomial left it), then the rest of the arena; b and c are no longer needed.
    pub fn msm_memory(&mut self) -> Result<MsmMemory<'_>, GpuError> {
        let n = self.n;
        let slot = self.slot_mut()?;
        let (a, rest) = slot.arena.split_at_mut(n);
        Ok(MsmMemory { a, rest, witness: &slot.witness })
    }

    /// The witness area.
    pub fn witness(&self) -> Result<&CudaSlice<u64>, GpuError> {
        Ok(&self.slot.as_ref().ok_or_else(|| GpuError::Invalid("staged a, b, c without a slot".into()))?.witness)
    }

    /// Waits for the uploads of a, b and c: the host vectors are then the caller's
    /// again, and the staged values no longer borrow them.
    pub fn detach(mut self) -> Result<StagedAbc<'s, 'static>, GpuError> {
        for e in &self.uploaded {
            e.synchronize()?;
        }
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let copy = self.slot_mut()?.copy.clone();
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
