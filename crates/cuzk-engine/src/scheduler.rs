//! Where partitions wait: the partition queue (priority order) before synthesis, and
//! the bounded hand-off from synthesis to the prover workers (priority order too).
//!
//! Urgent work (HIGH and CRITICAL: WindowPoSt and WinningPoSt as Curio sends them) has
//! lanes of its own: a synthesis worker and a prover worker per backend that take
//! nothing else ([`Lane::Urgent`]), and a hand-off it enters even when full. So a
//! WinningPoSt submitted while PoRep partitions fill every ordinary lane waits for no
//! PoRep partition's synthesis, and on the device for at most the compute region in
//! progress (the GPU backend gives urgent proofs the next turn).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

use cuzk_groth16::{Scalar, SynthesizedCircuit};

use crate::job::{Job, PartitionTicket};
use crate::params::ParameterLease;
use crate::request::Priority;
use cuzk_groth16::sync::{lock, wait};

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

/// Which partitions a worker takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Any, highest priority first.
    Any,
    /// Urgent ones only ([`Priority::urgent`]).
    Urgent,
}

impl Lane {
    pub fn takes(self, p: Priority) -> bool {
        self == Lane::Any || p.urgent()
    }
}

/// Where a partition stands among others: higher priority, then the older job, then
/// the lower partition (greatest first).
pub(crate) type Rank = (Priority, std::cmp::Reverse<u64>, std::cmp::Reverse<usize>);

impl PartitionTask {
    pub fn rank(&self) -> Rank {
        (self.job.priority, std::cmp::Reverse(self.job.seq), std::cmp::Reverse(self.index))
    }
}

// Greatest first: higher priority, then the older job, then the lower partition.
impl Ord for PartitionTask {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}
impl PartialOrd for PartitionTask {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for PartitionTask {
    fn eq(&self, other: &Self) -> bool {
        self.rank() == other.rank()
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
        lock(&self.heap).0.push(t);
        // Every waiter looks: an urgent lane's worker takes what an ordinary one would.
        self.ready.notify_all();
    }

    /// The next task `lane` takes (the highest ranked, when it takes it); None once
    /// closed.
    pub fn pop(&self, lane: Lane) -> Option<PartitionTask> {
        let mut g = lock(&self.heap);
        loop {
            if g.1 {
                return None;
            }
            if g.0.peek().is_some_and(|t| lane.takes(t.job.priority)) {
                return g.0.pop();
            }
            g = wait(&self.ready, g);
        }
    }

    /// Drops every queued task of a job (cancelled or failed).
    pub fn remove_job(&self, seq: u64) {
        let mut g = lock(&self.heap);
        let kept: Vec<_> = std::mem::take(&mut g.0).into_iter().filter(|t| t.job.seq != seq).collect();
        g.0 = kept.into();
    }

    pub fn len(&self) -> usize {
        lock(&self.heap).0.len()
    }

    pub fn close(&self) {
        lock(&self.heap).1 = true;
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
    /// Counts the partition in flight until it ends.
    pub ticket: PartitionTicket,
}

/// A bounded queue between synthesis and the provers: synthesis blocks when the
/// provers are `capacity` partitions behind, so synthesized partitions never pile up;
/// takers get the highest ranked item they accept. Urgent items enter even when it is
/// full (at most one per urgent synthesis worker is ever there beyond the capacity).
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

    /// Err(item) once closed. `urgent`: without waiting for room.
    pub fn push(&self, item: T, urgent: bool) -> Result<(), T> {
        let mut g = lock(&self.state);
        while !urgent && g.0.len() >= self.capacity && !g.1 {
            g = wait(&self.not_full, g);
        }
        if g.1 {
            return Err(item);
        }
        g.0.push_back(item);
        // Every taker looks: one may not accept this item (`pop_where`).
        self.not_empty.notify_all();
        Ok(())
    }

    /// The item of the greatest `rank` that `accept` takes (the oldest of equals),
    /// waiting for one; None once closed (and no accepted item is left).
    pub fn pop_where<K: Ord>(&self, accept: impl Fn(&T) -> bool, rank: impl Fn(&T) -> K) -> Option<T> {
        let mut g = lock(&self.state);
        loop {
            // max_by_key keeps the last of equals: search from the back for the oldest.
            let best = g.0.iter().enumerate().rev().filter(|(_, t)| accept(t)).max_by_key(|(_, t)| rank(t)).map(|(i, _)| i);
            if let Some(i) = best {
                let t = g.0.remove(i);
                self.not_full.notify_one();
                return t;
            }
            if g.1 {
                return None;
            }
            g = wait(&self.not_empty, g);
        }
    }

    pub fn close(&self) {
        lock(&self.state).1 = true;
        self.not_empty.notify_all();
        self.not_full.notify_all();
    }

    /// Every waiting taker looks again: what it accepts has changed.
    pub fn wake_all(&self) {
        let _g = lock(&self.state);
        self.not_empty.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taker_waits_for_an_item_it_accepts_and_others_take_the_rest() {
        let q = Arc::new(BoundedQueue::new(2));
        q.push(1, false).unwrap();
        // The even-taker waits (no poll) until an even item arrives.
        let q2 = q.clone();
        let even = std::thread::spawn(move || q2.pop_where(|x: &i32| x % 2 == 0, |_| 0));
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert!(!even.is_finished());
        q.push(4, false).unwrap();
        assert_eq!(even.join().unwrap(), Some(4));
        assert_eq!(q.pop_where(|_| true, |_| 0), Some(1));
        q.push(3, false).unwrap();
        q.close();
        assert_eq!(q.pop_where(|x| x % 2 == 0, |_| 0), None, "closed: nothing acceptable is left");
        assert_eq!(q.pop_where(|_| true, |_| 0), Some(3));
        assert!(q.push(5, false).is_err());
    }

    #[test]
    fn takers_get_the_highest_rank_and_the_oldest_of_equals_and_urgent_items_skip_the_wait() {
        let q = Arc::new(BoundedQueue::new(2));
        // (rank, arrival)
        q.push((1, 'a'), false).unwrap();
        q.push((1, 'b'), false).unwrap();
        // Full: an ordinary push waits; an urgent one enters.
        let q2 = q.clone();
        let ordinary = std::thread::spawn(move || q2.push((0, 'c'), false));
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert!(!ordinary.is_finished(), "full: the ordinary push waits for room");
        q.push((3, 'u'), true).unwrap();
        let rank = |x: &(i32, char)| x.0;
        assert_eq!(q.pop_where(|_| true, rank), Some((3, 'u')));
        assert_eq!(q.pop_where(|_| true, rank), Some((1, 'a')), "the oldest of equals");
        ordinary.join().unwrap().unwrap();
        assert_eq!(q.pop_where(|_| true, rank), Some((1, 'b')));
        assert_eq!(q.pop_where(|_| true, rank), Some((0, 'c')));
    }
}
