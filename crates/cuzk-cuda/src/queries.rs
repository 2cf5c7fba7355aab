//! A parameter set's five query point lists (H, L, A, B in G1, B in G2) as one
//! placement holds them: on the device ([`DeviceQueries`]) or in pinned host memory
//! for streaming ([`StreamedQueries`], one copy per process shared by every GPU).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use cuzk_groth16::params::{HostQueries, ParameterSetId};

use crate::device::{Gpu, GpuError};
use crate::msm::streamed::HostBases;
use crate::msm::{DeviceBases, G1, G2};
use cuzk_groth16::sync::lock;

/// A parameter set's five queries as one placement holds them: the G1 queries as `B1`,
/// B_G2 as `B2`.
pub struct Queries<B1, B2> {
    pub h: B1,
    pub l: B1,
    pub a: B1,
    pub b_g1: B1,
    pub b_g2: B2,
}

/// The five queries of a parameter set on the device.
pub type DeviceQueries = Queries<DeviceBases<G1>, DeviceBases<G2>>;

impl DeviceQueries {
    /// Device bytes of the points.
    pub fn bytes(&self) -> usize {
        let (g1, g2) =
            (std::mem::size_of::<<G1 as crate::CurveTypes>::DeviceAffine>(), std::mem::size_of::<<G2 as crate::CurveTypes>::DeviceAffine>());
        (self.h.len() + self.l.len() + self.a.len() + self.b_g1.len()) * g1 + self.b_g2.len() * g2
    }
}

/// The five queries of a parameter set in pinned host memory (portable: one copy
/// serves every device, see [`shared`]).
///
/// Whoever streams from them synchronizes the streams that copy from them before it
/// lets go of its reference (CudaBackend does, on success and on error), so the
/// memory is never freed under a copy.
pub type StreamedQueries = Queries<HostBases<G1>, HostBases<G2>>;

/// Every streamed set of this process, by id: the backends of several GPUs share one
/// pinned copy instead of pinning one each. A slot per set, so that loads of different
/// sets run at once while two loads of the same set do not.
type Slot = Arc<Mutex<Weak<StreamedQueries>>>;
static SHARED: Mutex<Option<HashMap<ParameterSetId, Slot>>> = Mutex::new(None);

/// The set's streamed points: those another backend already holds, or `load()`ed now
/// (under the set's slot lock, so two backends do not both load it). The flag says
/// whether they were shared.
pub fn shared<E>(id: ParameterSetId, load: impl FnOnce() -> Result<StreamedQueries, E>) -> Result<(Arc<StreamedQueries>, bool), E> {
    let slot = {
        // A poisoned map only lost a weak reference or two: go on with what it holds.
        let mut map = lock(&SHARED);
        let map = map.get_or_insert_with(HashMap::new);
        // Drop the slots of sets gone from every backend; a slot someone holds (a load
        // under way: its lock is taken) stays.
        map.retain(|_, s| Arc::strong_count(s) > 1 || s.try_lock().map_or(true, |w| w.strong_count() > 0));
        map.entry(id).or_default().clone()
    };
    let mut held = lock(&slot);
    if let Some(q) = held.upgrade() {
        return Ok((q, true));
    }
    let q = Arc::new(load()?);
    *held = Arc::downgrade(&q);
    Ok((q, false))
}

impl StreamedQueries {
    /// Copies of a set's points in host memory.
    pub fn from_host(gpu: &Gpu, q: &HostQueries) -> Result<Self, GpuError> {
        Ok(StreamedQueries {
            h: HostBases::from_points(gpu, &q.h)?,
            l: HostBases::from_points(gpu, &q.l)?,
            a: HostBases::from_points(gpu, &q.a)?,
            b_g1: HostBases::from_points(gpu, &q.b_g1)?,
            b_g2: HostBases::from_points(gpu, &q.b_g2)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    #[test]
    fn loads_of_different_sets_do_not_wait_for_each_other() {
        // A load of one set that stays inside its closure until told...
        let (entered_tx, entered) = channel();
        let (go, go_rx) = channel::<()>();
        let slow = std::thread::spawn(move || {
            shared(ParameterSetId(u64::MAX), || {
                entered_tx.send(()).unwrap();
                go_rx.recv().ok();
                Err::<StreamedQueries, _>("slow")
            })
            .err()
        });
        entered.recv_timeout(Duration::from_secs(10)).expect("the slow load started");
        // ...does not hold up another set's load (its error comes back at once).
        let (done_tx, done) = channel();
        std::thread::spawn(move || done_tx.send(shared(ParameterSetId(u64::MAX - 1), || Err::<StreamedQueries, _>("fast")).err()));
        let fast = done.recv_timeout(Duration::from_secs(10));
        go.send(()).unwrap();
        assert_eq!(fast.expect("a load of another set waited for the slow one"), Some("fast"));
        assert_eq!(slow.join().unwrap(), Some("slow"));
        // A failed load leaves nothing to share: the next one loads again.
        assert_eq!(shared(ParameterSetId(u64::MAX), || Err::<StreamedQueries, _>("again")).err(), Some("again"));
    }
}
