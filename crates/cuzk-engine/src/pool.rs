//! Reusable host memory. a, b and c of a partition are synthesized into buffers taken
//! from a [`BufferPool`] and returned to it when the partition is done, so large
//! vectors (4 GiB each for a C2 partition) are allocated once, not per partition. A
//! GPU daemon supplies page-locked buffers here ([`Buffers::pinned`]); the CPU one,
//! plain vectors. A partition's witness is synthesized into an aux vector lent by the
//! [`WitnessPool`] and handed back when the witness is freed: a fresh 4.2 GB vector
//! (a 32 GiB PoRep partition's) costs seconds of page faults on its first touch and an
//! unmap when freed (bench/micro/page_touch.c), a reused one neither. Every buffer is
//! charged to the memory budget for as long as it exists, in use or idle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use cuzk_groth16::synthesis::{EvalBuffers, EvalStorage, WitnessCharge};
use cuzk_groth16::{AuxBuffer, Scalar, SCALAR_BYTES};

use crate::error::EngineError;
use crate::memory::{BudgetGuard, MemoryBudget};
use cuzk_groth16::sync::lock;

/// Makes a new buffer of `len` scalars (e.g. pinned host memory).
pub type BufferMaker = dyn Fn(usize) -> Result<Box<dyn EvalStorage>, EngineError> + Send + Sync;

/// Where the engine's a/b/c buffers come from.
pub struct Buffers {
    make: Box<BufferMaker>,
    /// Whether `make` returns page-locked memory (reported as pinned).
    pinned: bool,
}

impl Buffers {
    /// Plain vectors.
    pub fn plain() -> Self {
        Buffers { make: Box::new(|len| Ok(Box::new(vec![Scalar::from(0u64); len]) as Box<dyn EvalStorage>)), pinned: false }
    }

    /// Page-locked buffers made by `make` (a GPU's), so uploads run at full speed.
    pub fn pinned(make: Box<BufferMaker>) -> Self {
        Buffers { make, pinned: true }
    }
}

/// Memory a pool made, with its charge: both go when it is freed.
struct Held<T> {
    storage: T,
    charge: BudgetGuard,
}

/// A pool's idle memory, each piece still charged.
struct Idle<T> {
    held: Mutex<Vec<Held<T>>>,
    max: usize,
    budget: Arc<MemoryBudget>,
}

impl<T> Idle<T> {
    fn new(budget: Arc<MemoryBudget>, max: usize) -> Self {
        Idle { held: Mutex::new(Vec::new()), max, budget }
    }

    /// The idle piece with the smallest charge of at least `bytes`; where none has one,
    /// the idle pieces are freed (they would only hold budget) and None returned.
    fn take(&self, bytes: u64) -> Option<Held<T>> {
        let freed = {
            let mut held = lock(&self.held);
            let best = held.iter().enumerate().filter(|(_, h)| h.charge.bytes() >= bytes).min_by_key(|(_, h)| h.charge.bytes()).map(|(i, _)| i);
            if let Some(i) = best {
                return Some(held.swap_remove(i));
            }
            std::mem::take(&mut *held)
        };
        // Dropped outside the lock: each drop returns its charge.
        drop(freed);
        None
    }

    /// [`Idle::take`], else a new piece (`make`) under a new charge of `bytes` (`pinned`
    /// of them page-locked) if the budget has room now; None if it has not.
    fn take_or_make(&self, bytes: u64, pinned: bool, make: impl FnOnce() -> Result<T, EngineError>) -> Result<Option<Held<T>>, EngineError> {
        if let Some(idle) = self.take(bytes) {
            return Ok(Some(idle));
        }
        let Some(charge) = self.budget.try_charge(bytes, if pinned { bytes } else { 0 })? else { return Ok(None) };
        Ok(Some(Held { storage: make()?, charge }))
    }

    /// Keeps `h` idle where there is room (waiters for memory are told: they may take
    /// it), else frees it (its charge's return tells them).
    fn put_back(&self, h: Held<T>) {
        let surplus = {
            let mut held = lock(&self.held);
            if held.len() < self.max {
                held.push(h);
                None
            } else {
                Some(h)
            }
        };
        match surplus {
            None => self.budget.notify(),
            Some(h) => drop(h),
        }
    }

    /// Frees every idle piece.
    fn release(&self) {
        let freed = std::mem::take(&mut *lock(&self.held));
        drop(freed);
    }

    /// Bytes charged for the idle pieces.
    fn bytes(&self) -> u64 {
        lock(&self.held).iter().map(|h| h.charge.bytes()).sum()
    }

    #[cfg(test)]
    fn count(&self) -> usize {
        lock(&self.held).len()
    }
}

pub(crate) struct BufferPool {
    source: Buffers,
    idle: Idle<Box<dyn EvalStorage>>,
    me: Weak<BufferPool>,
}

/// A buffer on loan from the pool; returns itself when dropped.
struct Pooled {
    buffer: Option<Held<Box<dyn EvalStorage>>>,
    pool: Weak<BufferPool>,
}

impl EvalStorage for Pooled {
    fn as_slice(&self) -> &[Scalar] {
        self.buffer.as_ref().map(|b| b.storage.as_slice()).unwrap_or(&[])
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        match self.buffer.as_mut() {
            Some(b) => b.storage.as_mut_slice(),
            None => &mut [],
        }
    }
    // Pooled buffers are sized up front (and charged for that size).
    fn grow(&mut self, _min: usize) -> bool {
        false
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let (Some(buffer), Some(pool)) = (self.buffer.take(), self.pool.upgrade()) {
            pool.idle.put_back(buffer);
        }
    }
}

impl BufferPool {
    /// Keeps at most `max_idle` idle buffers.
    pub fn new(source: Buffers, budget: Arc<MemoryBudget>, max_idle: usize) -> Arc<BufferPool> {
        Arc::new_cyclic(|me| BufferPool { source, idle: Idle::new(budget, max_idle), me: me.clone() })
    }

    /// A buffer of at least `len` scalars if one can be had now: an idle one if one
    /// fits (the smallest such), else a new one if the budget has room (idle buffers
    /// that do not fit are freed first).
    fn try_take(&self, len: usize) -> Result<Option<Pooled>, EngineError> {
        let bytes = (len * SCALAR_BYTES) as u64;
        // A reused buffer still holds the previous partition's values; synthesis
        // overwrites what it uses and EvalVec::resize zero-pads the rest.
        let buffer = self.idle.take_or_make(bytes, self.source.pinned, || (self.source.make)(len))?;
        Ok(buffer.map(|b| Pooled { buffer: Some(b), pool: self.me.clone() }))
    }

    /// a, b and c of `len` scalars each, waiting for memory as
    /// [`MemoryBudget::wait_for`] does (`make_room` frees other idle memory); None if
    /// `give_up` said so meanwhile.
    pub fn take_abc(
        &self,
        len: usize,
        give_up: &dyn Fn() -> bool,
        make_room: &dyn Fn() -> Option<Instant>,
    ) -> Result<Option<EvalBuffers>, EngineError> {
        let take = || self.idle.budget.wait_for(give_up, make_room, || self.try_take(len));
        let Some(a) = take()? else { return Ok(None) };
        let Some(b) = take()? else { return Ok(None) };
        let Some(c) = take()? else { return Ok(None) };
        Ok(Some(EvalBuffers { a: Box::new(a), b: Box::new(b), c: Box::new(c) }))
    }

    /// Frees every idle buffer (when memory is needed for something else).
    pub fn release_idle(&self) {
        self.idle.release();
    }

    /// Bytes charged for idle buffers (kept for the next partition).
    pub fn idle_bytes(&self) -> u64 {
        self.idle.bytes()
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.count()
    }
}

/// Aux vectors for partitions' witnesses, kept between partitions.
pub(crate) struct WitnessPool {
    idle: Idle<Vec<Scalar>>,
    /// Witnesses written into a reused vector, and into a fresh one (status).
    reused: AtomicU64,
    fresh: AtomicU64,
    me: Weak<WitnessPool>,
}

/// A partition's witness memory: its charge, and the aux vector to synthesize into
/// ([`WitnessLoan::aux_buffer`]); tied to the synthesized circuit
/// ([`cuzk_groth16::SynthesizedCircuit::charge_witness`]), it takes the vector back
/// into the pool when the witness is freed.
pub(crate) struct WitnessLoan {
    held: Held<Vec<Scalar>>,
    pool: Weak<WitnessPool>,
}

impl WitnessLoan {
    /// The lent vector, for `count` aux values where known; the loan keeps the charge.
    pub fn aux_buffer(&mut self, count: Option<usize>) -> AuxBuffer {
        let storage = std::mem::take(&mut self.held.storage);
        if let Some(pool) = self.pool.upgrade() {
            let count = if storage.capacity() > 0 { &pool.reused } else { &pool.fresh };
            count.fetch_add(1, Ordering::Relaxed);
        }
        AuxBuffer::reusing(storage, count)
    }

    /// Frees the lent vector now (the loan keeps the charge): for a witness that
    /// makes its own.
    pub fn free_vector(&mut self) {
        self.held.storage = Vec::new();
    }
}

impl WitnessCharge for WitnessLoan {
    fn witness_freed(self: Box<Self>, aux: Vec<Scalar>) {
        let WitnessLoan { mut held, pool } = *self;
        // Kept only while the charge covers it (a witness larger than its partition's
        // charge is freed): idle memory is never under-charged.
        if (aux.capacity() * SCALAR_BYTES) as u64 > held.charge.bytes() {
            return;
        }
        if let Some(pool) = pool.upgrade() {
            held.storage = aux;
            pool.idle.put_back(held);
        }
    }
}

impl WitnessPool {
    /// Keeps at most `max_idle` idle vectors.
    pub fn new(budget: Arc<MemoryBudget>, max_idle: usize) -> Arc<WitnessPool> {
        Arc::new_cyclic(|me| WitnessPool { idle: Idle::new(budget, max_idle), reused: AtomicU64::new(0), fresh: AtomicU64::new(0), me: me.clone() })
    }

    /// `bytes` of witness memory: an idle vector charged for at least that much (the
    /// smallest such), else a charge for a fresh one, waiting for memory as
    /// [`MemoryBudget::wait_for`] does; None if `give_up` said so meanwhile.
    pub fn take(&self, bytes: u64, give_up: &dyn Fn() -> bool, make_room: &dyn Fn() -> Option<Instant>) -> Result<Option<WitnessLoan>, EngineError> {
        // A fresh vector is allocated by the synthesis that fills it (its pages touched
        // by every thread).
        let held = self.idle.budget.wait_for(give_up, make_room, || self.idle.take_or_make(bytes, false, || Ok(Vec::new())))?;
        Ok(held.map(|held| WitnessLoan { held, pool: self.me.clone() }))
    }

    /// Aux vectors lent to witness synthesis so far: (reused, fresh).
    pub fn loans(&self) -> (u64, u64) {
        (self.reused.load(Ordering::Relaxed), self.fresh.load(Ordering::Relaxed))
    }

    /// Frees every idle vector (when memory is needed for something else).
    pub fn release_idle(&self) {
        self.idle.release();
    }

    /// Bytes charged for idle aux vectors (kept for the next witness).
    pub fn idle_bytes(&self) -> u64 {
        self.idle.bytes()
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const S: u64 = SCALAR_BYTES as u64;

    #[test]
    fn buffers_are_reused_cleared_and_charged() {
        let budget = MemoryBudget::new(1 << 20);
        let made = Arc::new(AtomicUsize::new(0));
        let m = made.clone();
        let pool = BufferPool::new(
            Buffers::pinned(Box::new(move |len| {
                m.fetch_add(1, Ordering::SeqCst);
                Ok(Box::new(vec![Scalar::from(0u64); len]) as Box<dyn EvalStorage>)
            })),
            budget.clone(),
            6,
        );
        let no_room = || None;
        let mut abc = pool.take_abc(1000, &|| false, &no_room).unwrap().unwrap();
        abc.a.as_mut_slice()[5] = Scalar::from(9u64);
        assert_eq!(budget.used(), 3 * 1000 * S);
        assert_eq!(budget.pinned(), 3 * 1000 * S, "made by a pinned source: counted as pinned");
        drop(abc);
        assert_eq!(pool.idle_count(), 3);
        assert_eq!(budget.used(), 3 * 1000 * S, "idle buffers stay charged");
        let abc = pool.take_abc(800, &|| false, &no_room).unwrap().unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 3, "reused, not made again");
        assert_eq!(abc.a.as_slice().len(), 1000);
        drop(abc);
        // Larger than every idle buffer: the idle ones are freed, new ones made.
        let abc = pool.take_abc(2000, &|| false, &no_room).unwrap().unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 6);
        assert_eq!(budget.used(), 3 * 2000 * S);
        drop(abc);
        assert_eq!(budget.used(), 3 * 2000 * S);
        pool.release_idle();
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.pinned(), 0);
        assert_eq!(pool.idle_count(), 0);
    }

    #[test]
    fn a_waiter_takes_a_buffer_returned_to_the_pool() {
        // Room for three buffers only: the fourth waits until one comes back idle.
        let budget = MemoryBudget::new(3 * 100 * S);
        let pool = BufferPool::new(Buffers::plain(), budget.clone(), 6);
        let abc = pool.take_abc(100, &|| false, &|| None).unwrap().unwrap();
        let p2 = pool.clone();
        let t = std::thread::spawn(move || p2.take_abc(100, &|| false, &|| None).unwrap().is_some());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!t.is_finished());
        drop(abc);
        assert!(t.join().unwrap());
        assert_eq!(budget.pinned(), 0, "plain vectors are not pinned");
    }

    /// A witness's aux vector as the circuit hands it back: filled with values.
    fn freed(mut loan: WitnessLoan, values: usize) -> *const Scalar {
        let mut aux = loan.aux_buffer(Some(values)).into_vec();
        aux.resize(values, Scalar::from(3u64));
        let memory = aux.as_ptr();
        Box::new(loan).witness_freed(aux);
        memory
    }

    #[test]
    fn aux_vectors_are_lent_again_with_their_charge() {
        let budget = MemoryBudget::new(1 << 20);
        let pool = WitnessPool::new(budget.clone(), 2);
        let take = |bytes| pool.take(bytes, &|| false, &|| None).unwrap().unwrap();
        let memory = freed(take(1000 * S), 1000);
        assert_eq!((pool.idle_count(), budget.used()), (1, 1000 * S), "kept idle, still charged");
        assert_eq!(pool.idle_bytes(), 1000 * S);
        assert_eq!(pool.loans(), (0, 1));
        // A smaller witness takes it: the same memory, cleared, with no new charge.
        let mut loan = take(600 * S);
        let aux = loan.aux_buffer(Some(600)).into_vec();
        assert_eq!((pool.loans(), budget.used(), pool.idle_bytes()), ((1, 1), 1000 * S, 0), "lent, no longer idle");
        assert_eq!((aux.as_ptr(), aux.len()), (memory, 0));
        // A loan dropped without its vector coming back (a failed synthesis) returns its charge.
        drop((aux, loan));
        assert_eq!((pool.idle_count(), budget.used()), (0, 0));
        // A loan whose lent vector was freed (full synthesis makes its own) keeps its
        // charge, and takes back the vector its witness made.
        freed(take(700 * S), 700);
        let mut loan = take(700 * S);
        loan.free_vector();
        assert_eq!((pool.idle_count(), budget.used()), (0, 700 * S), "the lent vector freed, its charge kept");
        let made = vec![Scalar::from(1u64); 700];
        let memory = made.as_ptr();
        Box::new(loan).witness_freed(made);
        let mut loan = take(700 * S);
        let again = loan.aux_buffer(None).into_vec();
        assert_eq!(again.as_ptr(), memory);
        drop((again, loan));
        let reused_so_far = pool.loans();
        // Larger than the idle one: that one is freed, a fresh charge made.
        freed(take(1000 * S), 1000);
        let loan = take(2000 * S);
        assert_eq!((pool.idle_count(), budget.used()), (0, 2000 * S));
        assert_eq!(pool.loans(), (reused_so_far.0, reused_so_far.1 + 1));
        // A vector larger than its charge is not kept: idle memory is never under-charged.
        freed(loan, 3000);
        assert_eq!((pool.idle_count(), budget.used()), (0, 0));
        // At most two kept.
        let loans: Vec<_> = (0..3).map(|_| take(10 * S)).collect();
        for loan in loans {
            freed(loan, 10);
        }
        assert_eq!((pool.idle_count(), budget.used()), (2, 20 * S));
        pool.release_idle();
        assert_eq!((pool.idle_count(), budget.used()), (0, 0));
    }

    #[test]
    fn a_waiter_for_witness_memory_takes_a_vector_handed_back() {
        let budget = MemoryBudget::new(100 * S);
        let pool = WitnessPool::new(budget.clone(), 2);
        let loan = pool.take(100 * S, &|| false, &|| None).unwrap().unwrap();
        let p2 = pool.clone();
        let t = std::thread::spawn(move || p2.take(100 * S, &|| false, &|| None).unwrap().map(|mut l| l.aux_buffer(None).into_vec()));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!t.is_finished());
        let memory = freed(loan, 100);
        assert_eq!(t.join().unwrap().map(|v| v.as_ptr()), Some(memory), "the waiter got the vector handed back");
        assert_eq!(pool.loans(), (1, 1));
    }
}
