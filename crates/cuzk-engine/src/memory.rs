//! The host-memory budget: synthesis waits for room instead of exhausting memory.

use std::sync::{Arc, Condvar, Mutex};

use crate::error::EngineError;

#[derive(Debug)]
pub struct MemoryBudget {
    total: u64,
    used: Mutex<u64>,
    /// The most ever charged at once (status, tests).
    peak: std::sync::atomic::AtomicU64,
    freed: Condvar,
}

/// Bytes held against the budget; returned when dropped.
#[derive(Debug)]
pub struct BudgetGuard {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl MemoryBudget {
    pub fn new(total: u64) -> Arc<Self> {
        Arc::new(MemoryBudget { total, used: Mutex::new(0), peak: Default::default(), freed: Condvar::new() })
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
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most ever charged at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until `bytes` fit, or until `give_up()` says the caller no longer wants
    /// them (checked whenever memory is freed, and at least every 100 ms).
    pub fn acquire(self: &Arc<Self>, bytes: u64, give_up: impl Fn() -> bool) -> Result<Option<BudgetGuard>, EngineError> {
        if bytes > self.total {
            return Err(EngineError::ResourceExhausted(format!(
                "a partition needs {bytes} bytes of host memory, more than the whole budget of {} bytes",
                self.total
            )));
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used + bytes > self.total {
            if give_up() {
                return Ok(None);
            }
            used = self.freed.wait_timeout(used, std::time::Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
        }
        *used += bytes;
        self.peak.fetch_max(*used, std::sync::atomic::Ordering::Relaxed);
        Ok(Some(BudgetGuard { budget: self.clone(), bytes }))
    }
}

impl Drop for BudgetGuard {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        *used -= self.bytes;
        self.budget.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(g1);
        assert_eq!(t.join().unwrap(), 50);
        assert_eq!(b.used(), 0);
        assert_eq!(b.peak(), 60);
    }
}
