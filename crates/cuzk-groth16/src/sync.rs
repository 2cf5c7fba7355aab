//! One rule for a poisoned lock, in every crate: it is taken as it is.
//!
//! A lock is poisoned when a thread panicked while holding it. Every critical section
//! in cuzk updates its state in steps that each leave it whole (an entry inserted or
//! removed, a counter moved, a cache slot replaced), so what a panic leaves behind is
//! still consistent; the panic itself is reported where it is caught (the engine's
//! panic guards fail that partition's job and log it). Failing every later call on the
//! lock instead would take a GPU, or the daemon, out of service for one bug.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// `m`'s guard, poisoned or not.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `cv` with `g`'s lock released meanwhile ([`Condvar::wait`]); the guard
/// back, poisoned or not.
pub fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(g).unwrap_or_else(PoisonError::into_inner)
}

/// [`wait`] for at most `d` ([`Condvar::wait_timeout`]); the guard back, poisoned or
/// not (whether it timed out is for the caller to read from the state it guards).
pub fn wait_timeout<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>, d: std::time::Duration) -> MutexGuard<'a, T> {
    cv.wait_timeout(g, d).unwrap_or_else(PoisonError::into_inner).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_with_what_the_panic_left() {
        let m = std::sync::Arc::new(Mutex::new(vec![1]));
        let held = m.clone();
        let r = std::thread::spawn(move || {
            let mut g = held.lock().unwrap();
            g.push(2);
            panic!("a bug while holding it");
        })
        .join();
        assert!(r.is_err() && m.is_poisoned());
        assert_eq!(*lock(&m), [1, 2]);
    }
}
