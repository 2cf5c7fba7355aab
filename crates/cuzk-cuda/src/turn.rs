//! Whose turn it is on a GPU: one compute region at a time (a proof's kernels, or a
//! setup's chunk), urgent work first.
//!
//! A caller with urgent work (a WinningPoSt, a WindowPoSt partition) that holds a
//! staging slot has a [`Claim`]: while any claim is out, no ordinary caller takes the
//! device, so the urgent proof runs as soon as the compute region in progress ends,
//! not after every partition that was waiting before it. A claim is only made by a
//! caller that can take the device as soon as it is free (its slot is taken and its
//! preparation under way), so ordinary callers never wait on one that cannot progress.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use cuzk_groth16::sync::{lock, wait};

use crate::device::GpuError;

/// Held around a GPU's compute regions: by the proving backend for a proof's (one
/// proof's kernels at a time, urgent ones first) and by the setup's fixed-base
/// multiplication around each of its chunks, when both share the device.
pub type DeviceLock = Arc<DeviceTurn>;

#[derive(Debug, Default)]
struct State {
    held: bool,
    /// Claims out: urgent callers that will take the device next.
    claims: usize,
}

/// The turn of one GPU's compute regions.
#[derive(Debug, Default)]
pub struct DeviceTurn {
    state: Mutex<State>,
    changed: Condvar,
}

/// The device, held until dropped.
#[must_use = "the device is held until this is dropped"]
pub struct Turn<'a> {
    turn: &'a DeviceTurn,
}

/// An urgent caller's place at the head of the queue, from its staging slot to its
/// compute region; given up when dropped.
#[derive(Debug)]
pub struct Claim {
    turn: Arc<DeviceTurn>,
    /// Consumed by [`DeviceTurn::take`]: the drop then has nothing to give back.
    live: bool,
}

impl DeviceTurn {
    fn state(&self) -> Result<MutexGuard<'_, State>, GpuError> {
        Ok(lock(&self.state))
    }

    /// The device for an ordinary caller: once it is free and no urgent caller has a
    /// claim.
    pub fn lock(&self) -> Result<Turn<'_>, GpuError> {
        self.take(None)
    }

    /// A claim: ordinary callers wait until it is used or dropped.
    pub fn claim(self: &Arc<Self>) -> Result<Claim, GpuError> {
        self.state()?.claims += 1;
        Ok(Claim { turn: self.clone(), live: true })
    }

    /// The device as soon as it is free: for the holder of `claim` (of this turn)
    /// before every ordinary caller, else once no claim is out either.
    pub fn take(&self, claim: Option<Claim>) -> Result<Turn<'_>, GpuError> {
        let mut claim = self.check(claim)?;
        let mut s = self.state()?;
        while s.held || (claim.is_none() && s.claims > 0) {
            s = wait(&self.changed, s);
        }
        Ok(self.hold(&mut s, claim.as_mut()))
    }

    /// [`DeviceTurn::take`] if the device can be had now; else the claim back.
    pub fn try_take(&self, claim: Option<Claim>) -> Result<Result<Turn<'_>, Option<Claim>>, GpuError> {
        let mut claim = self.check(claim)?;
        let mut s = self.state()?;
        if s.held || (claim.is_none() && s.claims > 0) {
            drop(s);
            return Ok(Err(claim));
        }
        Ok(Ok(self.hold(&mut s, claim.as_mut())))
    }

    /// A claim of this turn (one of another is given up, and refused).
    fn check(&self, claim: Option<Claim>) -> Result<Option<Claim>, GpuError> {
        match claim {
            Some(c) if !std::ptr::eq(Arc::as_ptr(&c.turn), self) => Err(GpuError::Invalid("a claim on another device's turn".into())),
            c => Ok(c),
        }
    }

    fn hold(&self, s: &mut State, claim: Option<&mut Claim>) -> Turn<'_> {
        s.held = true;
        if let Some(c) = claim {
            s.claims -= 1;
            c.live = false;
        }
        Turn { turn: self }
    }

    /// Claims out now (status, tests).
    pub fn claims(&self) -> usize {
        self.state().map(|s| s.claims).unwrap_or(0)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        lock(&self.turn.state).held = false;
        self.turn.changed.notify_all();
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.live {
            return;
        }
        lock(&self.turn.state).claims -= 1;
        self.turn.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_claim_goes_before_ordinary_callers_that_waited_longer() {
        let turn = Arc::new(DeviceTurn::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = turn.lock().unwrap();
        // An ordinary caller waits for the device first.
        let ordinary = {
            let (turn, order) = (turn.clone(), order.clone());
            std::thread::spawn(move || {
                let _h = turn.lock().unwrap();
                order.lock().unwrap().push("ordinary");
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        // Then an urgent one claims it.
        let claim = turn.claim().unwrap();
        assert!(turn.try_take(None).unwrap().is_err(), "claimed: no ordinary caller takes it");
        let urgent = {
            let (turn, order) = (turn.clone(), order.clone());
            std::thread::spawn(move || {
                let _h = turn.take(Some(claim)).unwrap();
                order.lock().unwrap().push("urgent");
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        urgent.join().unwrap();
        ordinary.join().unwrap();
        assert_eq!(*order.lock().unwrap(), ["urgent", "ordinary"]);
        assert_eq!(turn.claims(), 0);
    }

    #[test]
    fn a_dropped_claim_lets_ordinary_callers_go() {
        let turn = Arc::new(DeviceTurn::default());
        let claim = turn.claim().unwrap();
        assert!(matches!(turn.try_take(None).unwrap(), Err(None)), "claimed: no ordinary turn now");
        drop(claim);
        assert_eq!(turn.claims(), 0);
        let Ok(held) = turn.try_take(None).unwrap() else { panic!("no claim out: the device is free") };
        assert!(turn.try_take(None).unwrap().is_err(), "held");
        // A claim made while the device is held comes back from try_take, still live.
        let claim = turn.claim().unwrap();
        let claim = turn.try_take(Some(claim)).unwrap().err().flatten().expect("the claim back");
        assert_eq!(turn.claims(), 1);
        drop(held);
        let Ok(urgent) = turn.try_take(Some(claim)).unwrap() else { panic!("free: the claim's turn") };
        assert_eq!(turn.claims(), 0, "used");
        drop(urgent);
        assert!(turn.try_take(None).unwrap().is_ok());
    }

    #[test]
    fn a_claim_of_another_turn_is_refused() {
        let (a, b) = (Arc::new(DeviceTurn::default()), Arc::new(DeviceTurn::default()));
        let claim = a.claim().unwrap();
        assert!(b.take(Some(claim)).is_err());
        assert_eq!(a.claims(), 0, "the refused claim was given back");
    }
}
