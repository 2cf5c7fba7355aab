//! Shutdown's grace period: running jobs may finish in it, but a partition is started
//! only for a job that can. Without that rule a long job that is cancelled at the
//! deadline anyway keeps the workers busy, and short jobs queued behind it, which
//! could have finished, never run.
//!
//! Whether a job can finish comes from what its circuit's partitions took so far in
//! this process (a moving average of synthesis and of proving per circuit id); a
//! circuit never measured is given the benefit of the doubt.

use cuzk_groth16::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Weight of a new measurement in the moving averages.
const WEIGHT: f64 = 0.3;

#[derive(Clone, Copy, Default)]
struct Cost {
    /// Seconds; None until measured.
    synthesis: Option<f64>,
    prove: Option<f64>,
}

fn average(old: Option<f64>, new: Duration) -> Option<f64> {
    let v = new.as_secs_f64();
    Some(old.map_or(v, |o| o + WEIGHT * (v - o)))
}

/// What one partition of each circuit takes here, measured.
#[derive(Default)]
pub(crate) struct PartitionCosts {
    by_circuit: Mutex<HashMap<String, Cost>>,
}

impl PartitionCosts {
    fn update(&self, circuit_id: &str, f: impl FnOnce(&mut Cost)) {
        let mut g = lock(&self.by_circuit);
        match g.get_mut(circuit_id) {
            Some(c) => f(c),
            None => {
                let mut c = Cost::default();
                f(&mut c);
                g.insert(circuit_id.to_string(), c);
            }
        }
    }

    pub fn synthesized(&self, circuit_id: &str, took: Duration) {
        self.update(circuit_id, |c| c.synthesis = average(c.synthesis, took));
    }

    pub fn proved(&self, circuit_id: &str, took: Duration) {
        self.update(circuit_id, |c| c.prove = average(c.prove, took));
    }

    /// How long `unstarted` more partitions of `circuit_id` take to be proved by a
    /// pipeline of `lanes.0` synthesis workers and `lanes.1` prover workers: one
    /// partition through both stages, the others at the pace of the slower stage.
    /// None while the circuit has not been measured.
    pub fn time_to_finish(&self, circuit_id: &str, unstarted: usize, lanes: (usize, usize)) -> Option<Duration> {
        if unstarted == 0 {
            return Some(Duration::ZERO);
        }
        let c = *lock(&self.by_circuit).get(circuit_id)?;
        let (synthesis, prove) = (c.synthesis?, c.prove?);
        let pace = (synthesis / lanes.0.max(1) as f64).max(prove / lanes.1.max(1) as f64);
        Some(Duration::from_secs_f64(synthesis + prove + pace * (unstarted - 1) as f64))
    }
}

/// The grace period's end, once shutdown has begun.
#[derive(Default)]
pub(crate) struct Grace {
    deadline: Mutex<Option<Instant>>,
}

impl Grace {
    /// Begins (or shortens) the grace period: it ends at `deadline` at the latest.
    pub fn end_by(&self, deadline: Instant) {
        let mut g = lock(&self.deadline);
        *g = Some(g.map_or(deadline, |d| d.min(deadline)));
    }

    pub fn deadline(&self) -> Option<Instant> {
        *lock(&self.deadline)
    }

    /// Why a job with `unstarted` partitions of `circuit_id` left should not start
    /// another one now: it cannot finish before the grace period ends (`lanes` as in
    /// [`PartitionCosts::time_to_finish`]). None outside shutdown, or when it can (or
    /// nothing is known of its circuit).
    pub fn refusal(&self, costs: &PartitionCosts, circuit_id: &str, unstarted: usize, lanes: (usize, usize)) -> Option<String> {
        let deadline = self.deadline()?;
        let needs = costs.time_to_finish(circuit_id, unstarted, lanes)?;
        let left = deadline.saturating_duration_since(Instant::now());
        (needs > left).then(|| {
            format!(
                "the daemon is shutting down: this job needs about {:.1} s more ({unstarted} partitions of {circuit_id}), and the grace period ends in {:.1} s",
                needs.as_secs_f64(),
                left.as_secs_f64()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_refused_only_in_the_grace_period_and_only_when_it_cannot_finish() {
        let costs = PartitionCosts::default();
        let grace = Grace::default();
        costs.synthesized("c", Duration::from_secs(2));
        costs.proved("c", Duration::from_secs(1));
        // One partition through both stages (3 s), two more at the synthesis pace
        // (two workers: 1 s each).
        assert_eq!(costs.time_to_finish("c", 3, (2, 2)), Some(Duration::from_secs(5)));
        // Proving is the slower stage with one prover and four synthesis workers.
        assert_eq!(costs.time_to_finish("c", 3, (4, 1)), Some(Duration::from_secs(5)));
        assert_eq!(costs.time_to_finish("c", 0, (1, 1)), Some(Duration::ZERO));
        assert_eq!(costs.time_to_finish("unmeasured", 3, (2, 2)), None);
        assert!(grace.refusal(&costs, "c", 3, (2, 2)).is_none(), "not shutting down");
        grace.end_by(Instant::now() + Duration::from_secs(60));
        assert!(grace.refusal(&costs, "c", 3, (2, 2)).is_none(), "5 s of work in a 60 s grace");
        assert!(grace.refusal(&costs, "unmeasured", 1000, (1, 1)).is_none());
        grace.end_by(Instant::now() + Duration::from_secs(4));
        let why = grace.refusal(&costs, "c", 3, (2, 2)).expect("5 s of work in a 4 s grace");
        assert!(why.contains("shutting down") && why.contains("3 partitions of c"), "{why}");
        // A later, longer deadline does not extend the grace.
        grace.end_by(Instant::now() + Duration::from_secs(600));
        assert!(grace.refusal(&costs, "c", 3, (2, 2)).is_some());
        // The moving average follows new measurements.
        costs.synthesized("c", Duration::from_secs(12));
        assert_eq!(costs.time_to_finish("c", 1, (1, 1)), Some(Duration::from_secs(6)));
    }
}
