//! Where partitions wait: the partition queue (priority order) before synthesis, and
//! the bounded hand-off from synthesis to the prover workers.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

use cuzk_groth16::{Scalar, SynthesizedCircuit};

use crate::job::Job;
use crate::params::ParameterLease;
use crate::request::Priority;

/// One partition of one job, waiting for synthesis.
pub(crate) struct PartitionTask {
    pub job: Arc<Job>,
    pub index: usize,
    /// 0 the first time; 1 when re-run after a proof failed verification.
    pub attempt: u8,
    /// The backend whose proof of this partition was rejected: the retry goes to
    /// another one when there is another.
    pub avoid_backend: Option<usize>,
}

impl PartitionTask {
    fn key(&self) -> (Priority, std::cmp::Reverse<u64>, std::cmp::Reverse<usize>) {
        (self.job.priority, std::cmp::Reverse(self.job.seq), std::cmp::Reverse(self.index))
    }
}

// Greatest first: higher priority, then the older job, then the lower partition.
impl Ord for PartitionTask {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}
impl PartialOrd for PartitionTask {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for PartitionTask {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for PartitionTask {}

/// Partitions waiting for synthesis, CRITICAL > HIGH > NORMAL > LOW, FIFO by job within
/// a priority, lowest partition first within a job.
pub(crate) struct PartitionQueue {
    heap: Mutex<(BinaryHeap<PartitionTask>, bool)>,
    ready: Condvar,
}

impl PartitionQueue {
    pub fn new() -> Self {
        PartitionQueue { heap: Mutex::new((BinaryHeap::new(), false)), ready: Condvar::new() }
    }

    pub fn push(&self, t: PartitionTask) {
        self.heap.lock().unwrap_or_else(|e| e.into_inner()).0.push(t);
        self.ready.notify_one();
    }

    /// The next task; None once closed.
    pub fn pop(&self) -> Option<PartitionTask> {
        let mut g = self.heap.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if g.1 {
                return None;
            }
            if let Some(t) = g.0.pop() {
                return Some(t);
            }
            g = self.ready.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Drops every queued task of a job (cancelled or failed).
    pub fn remove_job(&self, seq: u64) {
        let mut g = self.heap.lock().unwrap_or_else(|e| e.into_inner());
        let kept: Vec<_> = std::mem::take(&mut g.0).into_iter().filter(|t| t.job.seq != seq).collect();
        g.0 = kept.into();
    }

    pub fn len(&self) -> usize {
        self.heap.lock().unwrap_or_else(|e| e.into_inner()).0.len()
    }

    pub fn close(&self) {
        self.heap.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.ready.notify_all();
    }
}

/// A synthesized partition on its way to a prover. Its witness carries the
/// partition's witness loan ([`SynthesizedCircuit::charge_witness`]: the memory charge,
/// and the aux vector's way back to the pool); its a, b, c are pooled buffers, returned
/// when the circuit is dropped.
pub(crate) struct ReadyPartition {
    pub task: PartitionTask,
    pub circuit: SynthesizedCircuit,
    /// The public inputs the proof is checked against (without the leading one).
    pub inputs: Vec<Scalar>,
    pub params: ParameterLease,
}

/// A bounded FIFO between synthesis and the provers: synthesis blocks when the
/// provers are `capacity` partitions behind, so synthesized partitions never pile up.
pub(crate) struct BoundedQueue<T> {
    state: Mutex<(VecDeque<T>, bool)>,
    capacity: usize,
    not_empty: Condvar,
    not_full: Condvar,
}

impl<T> BoundedQueue<T> {
    pub fn new(capacity: usize) -> Self {
        BoundedQueue { state: Mutex::new((VecDeque::new(), false)), capacity: capacity.max(1), not_empty: Condvar::new(), not_full: Condvar::new() }
    }

    /// Err(item) once closed.
    pub fn push(&self, item: T) -> Result<(), T> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while g.0.len() >= self.capacity && !g.1 {
            g = self.not_full.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        if g.1 {
            return Err(item);
        }
        g.0.push_back(item);
        // Every taker looks: one may not accept this item (`pop_where`).
        self.not_empty.notify_all();
        Ok(())
    }

    /// The oldest item `accept` takes, waiting for one; None once closed (and no
    /// accepted item is left).
    pub fn pop_where(&self, accept: impl Fn(&T) -> bool) -> Option<T> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(i) = g.0.iter().position(&accept) {
                let t = g.0.remove(i);
                self.not_full.notify_one();
                return t;
            }
            if g.1 {
                return None;
            }
            g = self.not_empty.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.not_empty.notify_all();
        self.not_full.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taker_waits_for_an_item_it_accepts_and_others_take_the_rest() {
        let q = Arc::new(BoundedQueue::new(2));
        q.push(1).unwrap();
        // The even-taker waits (no poll) until an even item arrives.
        let q2 = q.clone();
        let even = std::thread::spawn(move || q2.pop_where(|x: &i32| x % 2 == 0));
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert!(!even.is_finished());
        q.push(4).unwrap();
        assert_eq!(even.join().unwrap(), Some(4));
        assert_eq!(q.pop_where(|_| true), Some(1));
        q.push(3).unwrap();
        q.close();
        assert_eq!(q.pop_where(|x| x % 2 == 0), None, "closed: nothing acceptable is left");
        assert_eq!(q.pop_where(|_| true), Some(3));
        assert!(q.push(5).is_err());
    }
}
