//! Reusable evaluation buffers: a, b and c of a partition are synthesized into buffers
//! taken from this pool and returned to it when the partition is done, so large
//! vectors (4 GiB each for a C2 partition) are allocated once, not per partition.
//! A GPU daemon supplies page-locked buffers here ([`Buffers::pinned`]); the CPU one,
//! plain vectors. Every buffer is charged to the memory budget for as long as it
//! exists, in use or idle.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use cuzk_groth16::synthesis::{EvalBuffers, EvalStorage};
use cuzk_groth16::{Scalar, SCALAR_BYTES};

use crate::error::EngineError;
use crate::memory::{BudgetGuard, MemoryBudget};

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

/// A buffer the pool made, with its charge: both go when it is freed.
struct Buffer {
    storage: Box<dyn EvalStorage>,
    _charge: BudgetGuard,
}

pub(crate) struct BufferPool {
    source: Buffers,
    budget: Arc<MemoryBudget>,
    idle: Mutex<Vec<Buffer>>,
    max_idle: usize,
    me: Weak<BufferPool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A buffer on loan from the pool; returns itself when dropped.
struct Pooled {
    buffer: Option<Buffer>,
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
        let (Some(buffer), Some(pool)) = (self.buffer.take(), self.pool.upgrade()) else { return };
        let surplus = {
            let mut idle = lock(&pool.idle);
            if idle.len() < pool.max_idle {
                idle.push(buffer);
                None
            } else {
                Some(buffer)
            }
        };
        match surplus {
            // Someone waiting for memory may take this buffer (or free it).
            None => pool.budget.notify(),
            // Freed: its charge's return wakes the waiters.
            Some(buffer) => drop(buffer),
        }
    }
}

impl BufferPool {
    /// Keeps at most `max_idle` idle buffers.
    pub fn new(source: Buffers, budget: Arc<MemoryBudget>, max_idle: usize) -> Arc<BufferPool> {
        Arc::new_cyclic(|me| BufferPool { source, budget, idle: Mutex::new(Vec::new()), max_idle, me: me.clone() })
    }

    /// A buffer of at least `len` scalars if one can be had now: an idle one if one
    /// fits (the smallest such), else a new one if the budget has room (idle buffers
    /// that do not fit are freed first).
    fn try_take(&self, len: usize) -> Result<Option<Pooled>, EngineError> {
        {
            let mut idle = lock(&self.idle);
            let best = idle
                .iter()
                .enumerate()
                .filter(|(_, b)| b.storage.as_slice().len() >= len)
                .min_by_key(|(_, b)| b.storage.as_slice().len())
                .map(|(i, _)| i);
            if let Some(i) = best {
                // A reused buffer still holds the previous partition's values;
                // synthesis overwrites what it uses and EvalVec::resize zero-pads the rest.
                return Ok(Some(Pooled { buffer: Some(idle.swap_remove(i)), pool: self.me.clone() }));
            }
            // None fits: free the idle ones, which would only hold budget.
            idle.clear();
        }
        let bytes = (len * SCALAR_BYTES) as u64;
        let Some(charge) = self.budget.try_charge(bytes, if self.source.pinned { bytes } else { 0 })? else { return Ok(None) };
        let storage = (self.source.make)(len)?;
        Ok(Some(Pooled { buffer: Some(Buffer { storage, _charge: charge }), pool: self.me.clone() }))
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
        let take = || self.budget.wait_for(give_up, make_room, || self.try_take(len));
        let Some(a) = take()? else { return Ok(None) };
        let Some(b) = take()? else { return Ok(None) };
        let Some(c) = take()? else { return Ok(None) };
        Ok(Some(EvalBuffers { a: Box::new(a), b: Box::new(b), c: Box::new(c) }))
    }

    /// Frees every idle buffer (when memory is needed for something else).
    pub fn release_idle(&self) {
        // Dropped outside the lock: each drop returns its charge.
        let freed = std::mem::take(&mut *lock(&self.idle));
        drop(freed);
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        lock(&self.idle).len()
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
}
