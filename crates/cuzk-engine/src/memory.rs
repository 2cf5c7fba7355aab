//! The host-memory budget, and the one way the engine waits for memory.
//!
//! Everything the engine holds in host memory is charged here while it exists: each
//! partition's witness, the pooled a/b/c buffers, the cached parameter sets (with the
//! pinned copies of streamed points). A charge that does not fit waits in
//! [`MemoryBudget::wait_for`], the single wait of the engine's memory: the waiter
//! sleeps until something it may be waiting for happens ([`MemoryBudget::notify`]:
//! memory released, a pooled buffer or a parameter set comes free, a job finishes,
//! the engine shuts down), never polls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crate::error::EngineError;
use cuzk_groth16::sync::{lock, wait};

/// Host memory one partition holds from its synthesis to its proof: its witness and
/// densities (`partition_bytes`), and three a, b, c buffers of `eval_len` scalars where
/// they are made on the host (`abc_on_host`: by synthesis, or from the compiled
/// matrices where the backends do not compute them). The one formula for submission
/// (which does not know yet where the set's a, b, c are made: the worst case) and for
/// admission.
pub(crate) fn partition_need(partition_bytes: u64, eval_len: usize, abc_on_host: bool) -> u64 {
    let abc = if abc_on_host { 3 * (cuzk_groth16::SCALAR_BYTES * eval_len) as u64 } else { 0 };
    partition_bytes + abc
}

#[derive(Debug)]
pub struct MemoryBudget {
    total: u64,
    used: Mutex<u64>,
    /// The most ever charged at once (status, tests).
    peak: AtomicU64,
    /// The part of `used` that is page-locked (pinned) host memory.
    pinned: AtomicU64,
    /// Moves on every event a waiter for memory may be waiting for; waiters sleep on
    /// `changed` until it moves (or the budget closes).
    events: Mutex<Events>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Events {
    count: u64,
    /// Set at shutdown: every waiter gives up, now and later.
    closed: bool,
}

/// Bytes held against the budget; returned when dropped.
#[derive(Debug)]
pub struct BudgetGuard {
    budget: Arc<MemoryBudget>,
    bytes: u64,
    pinned: u64,
}

impl MemoryBudget {
    pub fn new(total: u64) -> Arc<Self> {
        Arc::new(MemoryBudget {
            total,
            used: Mutex::new(0),
            peak: AtomicU64::new(0),
            pinned: AtomicU64::new(0),
            events: Mutex::new(Events::default()),
            changed: Condvar::new(),
        })
    }

    /// MemTotal from /proc/meminfo minus `margin` (None where /proc/meminfo is absent).
    pub fn auto_total(margin: u64) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some((kib * 1024).saturating_sub(margin))
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn used(&self) -> u64 {
        *lock(&self.used)
    }

    /// The most ever charged at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// The page-locked part of what is charged now.
    pub fn pinned(&self) -> u64 {
        self.pinned.load(Ordering::Relaxed)
    }

    /// Charges `bytes` (of which `pinned` are page-locked) if they fit now; an error
    /// if they could never fit.
    pub(crate) fn try_charge(self: &Arc<Self>, bytes: u64, pinned: u64) -> Result<Option<BudgetGuard>, EngineError> {
        if bytes > self.total {
            return Err(EngineError::ResourceExhausted(format!(
                "{bytes} bytes of host memory are needed at once, more than the whole budget of {} bytes",
                self.total
            )));
        }
        let mut used = lock(&self.used);
        if *used + bytes > self.total {
            return Ok(None);
        }
        *used += bytes;
        self.peak.fetch_max(*used, Ordering::Relaxed);
        self.pinned.fetch_add(pinned.min(bytes), Ordering::Relaxed);
        Ok(Some(BudgetGuard { budget: self.clone(), bytes, pinned: pinned.min(bytes) }))
    }

    /// The one wait for memory. `take` tries to get what the caller needs without
    /// waiting (Ok(None): not now). When it cannot, `make_room` frees what only holds
    /// memory (idle buffers, idle parameter sets) and `take` is tried once more; then
    /// the caller sleeps until [`MemoryBudget::notify`] or until the instant
    /// `make_room` returned (when an idle parameter set becomes old enough to evict),
    /// and all over again. Returns None when `give_up` says the caller no longer wants
    /// it (checked after every failed try) or once the budget is closed (shutdown).
    pub(crate) fn wait_for<T>(
        &self,
        give_up: &dyn Fn() -> bool,
        make_room: &dyn Fn() -> Option<Instant>,
        mut take: impl FnMut() -> Result<Option<T>, EngineError>,
    ) -> Result<Option<T>, EngineError> {
        loop {
            // Read before trying, so that an event after the try is not missed.
            let seen = lock(&self.events).count;
            if let Some(t) = take()? {
                return Ok(Some(t));
            }
            let retry_at = make_room();
            if let Some(t) = take()? {
                return Ok(Some(t));
            }
            if give_up() {
                return Ok(None);
            }
            let mut ev = lock(&self.events);
            while ev.count == seen && !ev.closed {
                match retry_at {
                    None => ev = wait(&self.changed, ev),
                    Some(at) => {
                        let now = Instant::now();
                        if now >= at {
                            break;
                        }
                        ev = cuzk_groth16::sync::wait_timeout(&self.changed, ev, at - now);
                    }
                }
            }
            if ev.closed {
                return Ok(None);
            }
        }
    }

    /// Waits until `bytes` fit (nothing is freed to make room), or until `give_up()`
    /// says the caller no longer wants them (checked whenever memory is freed).
    pub fn acquire(self: &Arc<Self>, bytes: u64, give_up: impl Fn() -> bool) -> Result<Option<BudgetGuard>, EngineError> {
        self.wait_for(&give_up, &|| None, || self.try_charge(bytes, 0))
    }

    /// Wakes every waiter to try again: memory may have come free (released, a buffer
    /// returned to the pool, a parameter set's last user done) or a waiter may have to
    /// give up (its job finished).
    pub(crate) fn notify(&self) {
        lock(&self.events).count += 1;
        self.changed.notify_all();
    }

    /// Shutdown: every waiter gives up, now and later.
    pub(crate) fn close(&self) {
        lock(&self.events).closed = true;
        self.changed.notify_all();
    }
}

impl BudgetGuard {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for BudgetGuard {
    fn drop(&mut self) {
        *lock(&self.budget.used) -= self.bytes;
        self.budget.pinned.fetch_sub(self.pinned, Ordering::Relaxed);
        self.budget.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_partitions_need_counts_a_b_c_only_where_the_host_makes_them() {
        let scalars = 3 * cuzk_groth16::SCALAR_BYTES as u64 * 1024;
        assert_eq!(partition_need(100, 1024, true), 100 + scalars);
        assert_eq!(partition_need(100, 1024, false), 100);
    }

    #[test]
    fn waits_for_room_and_refuses_the_impossible() {
        let b = MemoryBudget::new(100);
        let g1 = b.acquire(60, || false).unwrap().unwrap();
        assert_eq!(b.used(), 60);
        assert!(matches!(b.acquire(101, || false), Err(EngineError::ResourceExhausted(_))));
        // Does not fit now: gives up when asked to.
        assert!(b.acquire(50, || true).unwrap().is_none());
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire(50, || false).unwrap().unwrap().bytes);
        std::thread::sleep(Duration::from_millis(50));
        drop(g1);
        assert_eq!(t.join().unwrap(), 50);
        assert_eq!(b.used(), 0);
        assert_eq!(b.peak(), 60);
    }

    #[test]
    fn a_waiter_gives_up_when_notified_or_closed_and_retries_at_the_time_make_room_names() {
        let b = MemoryBudget::new(100);
        let _full = b.try_charge(100, 40).unwrap().unwrap();
        assert_eq!(b.pinned(), 40);
        // Given up on notify (a job finished), without any memory freed.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (b2, s2) = (b.clone(), stop.clone());
        let t = std::thread::spawn(move || b2.acquire(10, move || s2.load(Ordering::SeqCst)).unwrap().is_none());
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::SeqCst);
        b.notify();
        assert!(t.join().unwrap());
        // Closed: every waiter returns None.
        let b3 = b.clone();
        let t = std::thread::spawn(move || b3.acquire(10, || false).unwrap().is_none());
        std::thread::sleep(Duration::from_millis(50));
        b.close();
        assert!(t.join().unwrap());
        // make_room's instant: tried again then without any event.
        let b = MemoryBudget::new(100);
        let start = Instant::now();
        let tries = std::cell::Cell::new(0);
        let got = b.wait_for(&|| false, &|| Some(start + Duration::from_millis(30)), || {
            tries.set(tries.get() + 1);
            Ok((start.elapsed() >= Duration::from_millis(30)).then_some(7))
        });
        assert_eq!(got.unwrap(), Some(7));
        assert!(tries.get() <= 4, "polled: {} tries", tries.get());
    }
}
