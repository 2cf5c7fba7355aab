//! The partition queue (priority order) and the bounded hand-off to the provers.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

use crate::engine::Job;
use crate::job::Priority;

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
        self.not_empty.notify_one();
        Ok(())
    }

    /// None once closed and drained.
    pub fn pop(&self) -> Option<T> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(t) = g.0.pop_front() {
                self.not_full.notify_one();
                return Some(t);
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
