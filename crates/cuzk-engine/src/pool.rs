//! Reusable evaluation buffers: a, b and c of a partition are synthesized into buffers
//! taken from this pool and returned to it when the partition is done, so large
//! vectors (4 GiB each for a C2 partition) are allocated once, not per partition.
//! A GPU build supplies page-locked buffers here; the CPU build, plain vectors. Every
//! buffer is charged to the memory budget for as long as it exists, in use or idle.

use std::sync::{Arc, Mutex, Weak};

use cuzk_groth16::synthesis::{EvalBuffers, EvalStorage};
use cuzk_groth16::Scalar;

use crate::budget::{BudgetGuard, MemoryBudget};
use crate::error::EngineError;

/// Makes a new buffer of `len` scalars (e.g. pinned host memory).
pub type BufferMaker = dyn Fn(usize) -> Result<Box<dyn EvalStorage>, EngineError> + Send + Sync;

struct Idle {
    storage: Box<dyn EvalStorage>,
    _charge: BudgetGuard,
}

pub struct BufferPool {
    make: Box<BufferMaker>,
    budget: Arc<MemoryBudget>,
    idle: Mutex<Vec<Idle>>,
    max_idle: usize,
    me: Weak<BufferPool>,
}

/// A buffer on loan from the pool; returns itself when dropped.
struct Pooled {
    storage: Option<Box<dyn EvalStorage>>,
    charge: Option<BudgetGuard>,
    pool: Weak<BufferPool>,
}

impl EvalStorage for Pooled {
    fn as_slice(&self) -> &[Scalar] {
        self.storage.as_ref().map(|s| s.as_slice()).unwrap_or(&[])
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        match self.storage.as_mut() {
            Some(s) => s.as_mut_slice(),
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
        if let (Some(storage), Some(charge), Some(pool)) = (self.storage.take(), self.charge.take(), self.pool.upgrade()) {
            let mut idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < pool.max_idle {
                idle.push(Idle { storage, _charge: charge });
            }
        }
    }
}

/// Plain vectors.
pub fn vec_buffers() -> Box<BufferMaker> {
    Box::new(|len| Ok(Box::new(vec![Scalar::from(0u64); len]) as Box<dyn EvalStorage>))
}

impl BufferPool {
    /// Keeps at most `max_idle` idle buffers.
    pub fn new(make: Box<BufferMaker>, budget: Arc<MemoryBudget>, max_idle: usize) -> Arc<BufferPool> {
        Arc::new_cyclic(|me| BufferPool { make, budget, idle: Mutex::new(Vec::new()), max_idle, me: me.clone() })
    }

    /// A buffer of at least `len` scalars: an idle one if one fits (the smallest such),
    /// else a new one once the budget has room (idle buffers that do not fit are freed
    /// first). `give_up` as in [`MemoryBudget::acquire`].
    fn take(&self, len: usize, give_up: &dyn Fn() -> bool) -> Result<Option<Pooled>, EngineError> {
        loop {
            {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                let best = idle
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.storage.as_slice().len() >= len)
                    .min_by_key(|(_, b)| b.storage.as_slice().len())
                    .map(|(i, _)| i);
                if let Some(i) = best {
                    // A reused buffer still holds the previous partition's values;
                    // synthesis overwrites what it uses and EvalVec::resize zero-pads
                    // the rest.
                    let b = idle.swap_remove(i);
                    return Ok(Some(Pooled { storage: Some(b.storage), charge: Some(b._charge), pool: self.me.clone() }));
                }
                // None fits: free the idle ones, which would only hold budget.
                idle.clear();
            }
            // Look at the idle list again now and then: a buffer returned meanwhile
            // holds the budget this wait is for.
            let retry_at = std::time::Instant::now() + std::time::Duration::from_millis(50);
            if let Some(charge) = self.budget.acquire(len as u64 * 32, || give_up() || std::time::Instant::now() >= retry_at)? {
                let storage = (self.make)(len)?;
                return Ok(Some(Pooled { storage: Some(storage), charge: Some(charge), pool: self.me.clone() }));
            }
            if give_up() {
                return Ok(None);
            }
        }
    }

    /// a, b and c of `len` scalars each; None if `give_up` said so while waiting.
    pub fn take_abc(&self, len: usize, give_up: &dyn Fn() -> bool) -> Result<Option<EvalBuffers>, EngineError> {
        let Some(a) = self.take(len, give_up)? else { return Ok(None) };
        let Some(b) = self.take(len, give_up)? else { return Ok(None) };
        let Some(c) = self.take(len, give_up)? else { return Ok(None) };
        Ok(Some(EvalBuffers { a: Box::new(a), b: Box::new(b), c: Box::new(c) }))
    }

    /// Frees every idle buffer (when memory is needed for something else).
    pub fn release_idle(&self) {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn buffers_are_reused_cleared_and_charged() {
        let budget = MemoryBudget::new(1 << 20);
        let made = Arc::new(AtomicUsize::new(0));
        let m = made.clone();
        let pool = BufferPool::new(
            Box::new(move |len| {
                m.fetch_add(1, Ordering::SeqCst);
                Ok(Box::new(vec![Scalar::from(0u64); len]) as Box<dyn EvalStorage>)
            }),
            budget.clone(),
            6,
        );
        let mut abc = pool.take_abc(1000, &|| false).unwrap().unwrap();
        abc.a.as_mut_slice()[5] = Scalar::from(9u64);
        assert_eq!(budget.used(), 3 * 1000 * 32);
        drop(abc);
        assert_eq!(pool.idle_count(), 3);
        assert_eq!(budget.used(), 3 * 1000 * 32, "idle buffers stay charged");
        let abc = pool.take_abc(800, &|| false).unwrap().unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 3, "reused, not made again");
        assert_eq!(abc.a.as_slice().len(), 1000);
        drop(abc);
        // Larger than every idle buffer: the idle ones are freed, new ones made.
        let abc = pool.take_abc(2000, &|| false).unwrap().unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 6);
        assert_eq!(budget.used(), 3 * 2000 * 32);
        drop(abc);
        assert_eq!(budget.used(), 3 * 2000 * 32);
        pool.release_idle();
        assert_eq!(budget.used(), 0);
        assert_eq!(pool.idle_count(), 0);
    }
}
