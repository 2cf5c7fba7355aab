//! Admission: what a request may ask for, and how much unfinished work the engine
//! takes on. A client that could queue without limit, or at any priority, could fill
//! the daemon with a day of work ahead of everyone else's; these caps answer
//! RESOURCE_EXHAUSTED instead, and CRITICAL is kept for the kinds that need it.

use std::collections::HashMap;
use std::sync::Arc;

use cuzk_filecoin::CircuitKind;

use crate::error::EngineError;
use crate::job::Job;
use crate::request::{Priority, ProofKind};

/// The caps and the priority rule (TOML `[admission]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionLimits {
    /// Unfinished jobs (queued or running) at most, all kinds together.
    pub max_queued_jobs: usize,
    /// Unfinished jobs of one kind at most, so one kind cannot take every place.
    pub max_queued_jobs_per_kind: usize,
    /// Partitions of unfinished jobs not yet proved, at most, all kinds together.
    pub max_queued_partitions: usize,
    /// The same, per kind.
    pub max_queued_partitions_per_kind: usize,
    /// Payload bytes of unfinished jobs' requests at most (their decoded form lives
    /// outside the memory budget until the job finishes: memory.safety_margin must
    /// cover it).
    pub max_queued_request_bytes: u64,
    /// The kinds a request may give CRITICAL priority (WinningPoSt must finish within
    /// its epoch; everything else waits behind it).
    pub critical_kinds: Vec<ProofKind>,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        AdmissionLimits {
            max_queued_jobs: 1024,
            max_queued_jobs_per_kind: 512,
            max_queued_partitions: 16384,
            max_queued_partitions_per_kind: 8192,
            // 40 PoRep C1 outputs of 32 GiB sectors (~50 MB each); under the 5 GiB
            // default safety margin.
            max_queued_request_bytes: 2 << 30,
            critical_kinds: vec![ProofKind::Filecoin(CircuitKind::WinningPost)],
        }
    }
}

impl AdmissionLimits {
    /// Whether `kind` may ask for `priority`.
    pub fn check_priority(&self, kind: ProofKind, priority: Priority) -> Result<(), EngineError> {
        if priority == Priority::Critical && !self.critical_kinds.contains(&kind) {
            let allowed: Vec<&str> = self.critical_kinds.iter().map(|k| k.name()).collect();
            return Err(EngineError::PermissionDenied(format!(
                "CRITICAL priority is reserved for {} (admission.critical_kinds); a {kind} job may ask for HIGH at most",
                if allowed.is_empty() { "no kind".to_string() } else { allowed.join(", ") }
            )));
        }
        Ok(())
    }

    /// Whether a new job of `kind` with `partitions` partitions and `request_bytes` of
    /// payload fits beside the unfinished jobs `live`.
    pub(crate) fn check_room(&self, kind: ProofKind, partitions: usize, request_bytes: u64, live: &[Arc<Job>]) -> Result<(), EngineError> {
        let held: u64 = live.iter().filter(|j| !j.is_finished()).map(|j| j.request_bytes).sum();
        if held + request_bytes > self.max_queued_request_bytes {
            return Err(EngineError::ResourceExhausted(format!(
                "unfinished jobs' requests hold {held} bytes and this one has {request_bytes}: the cap is {} (admission.max_queued_request_bytes); retry once some have finished",
                self.max_queued_request_bytes
            )));
        }
        let (mut jobs, mut parts) = (0usize, 0usize);
        let mut per_kind: HashMap<ProofKind, (usize, usize)> = HashMap::new();
        for j in live {
            let remaining = j.remaining_partitions();
            if remaining == 0 {
                continue;
            }
            jobs += 1;
            parts += remaining;
            let k = per_kind.entry(j.kind).or_default();
            k.0 += 1;
            k.1 += remaining;
        }
        let (kind_jobs, kind_parts) = per_kind.get(&kind).copied().unwrap_or_default();
        let full = |what: &str, have: usize, cap: usize, key: &str| {
            EngineError::ResourceExhausted(format!("{what}: {have} queued, the cap is {cap} ({key}); retry once some have finished"))
        };
        if jobs + 1 > self.max_queued_jobs {
            return Err(full("too many unfinished jobs", jobs, self.max_queued_jobs, "admission.max_queued_jobs"));
        }
        if kind_jobs + 1 > self.max_queued_jobs_per_kind {
            return Err(full(
                &format!("too many unfinished {kind} jobs"),
                kind_jobs,
                self.max_queued_jobs_per_kind,
                "admission.max_queued_jobs_per_kind",
            ));
        }
        if parts + partitions > self.max_queued_partitions {
            return Err(full(
                &format!("no room for {partitions} more partitions"),
                parts,
                self.max_queued_partitions,
                "admission.max_queued_partitions",
            ));
        }
        if kind_parts + partitions > self.max_queued_partitions_per_kind {
            return Err(full(
                &format!("no room for {partitions} more {kind} partitions"),
                kind_parts,
                self.max_queued_partitions_per_kind,
                "admission.max_queued_partitions_per_kind",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn critical_is_for_the_listed_kinds_only() {
        let a = AdmissionLimits::default();
        assert!(a.check_priority(ProofKind::Filecoin(CircuitKind::WinningPost), Priority::Critical).is_ok());
        assert!(a.check_priority(ProofKind::Filecoin(CircuitKind::Porep), Priority::High).is_ok());
        let e = a.check_priority(ProofKind::Filecoin(CircuitKind::Porep), Priority::Critical).unwrap_err();
        assert!(matches!(&e, EngineError::PermissionDenied(m) if m.contains("winning_post") && m.contains("admission.critical_kinds")), "{e}");
        let none = AdmissionLimits { critical_kinds: Vec::new(), ..a };
        assert!(none.check_priority(ProofKind::Filecoin(CircuitKind::WinningPost), Priority::Critical).is_err());
    }

    #[test]
    fn an_empty_engine_takes_a_job_up_to_the_partition_caps() {
        let a = AdmissionLimits { max_queued_partitions: 10, max_queued_partitions_per_kind: 8, ..AdmissionLimits::default() };
        assert!(a.check_room(ProofKind::Synthetic, 8, 100, &[]).is_ok());
        assert!(matches!(a.check_room(ProofKind::Synthetic, 9, 100, &[]), Err(EngineError::ResourceExhausted(m)) if m.contains("per_kind")));
        let none = AdmissionLimits { max_queued_jobs: 0, ..AdmissionLimits::default() };
        assert!(
            matches!(none.check_room(ProofKind::Synthetic, 1, 100, &[]), Err(EngineError::ResourceExhausted(m)) if m.contains("max_queued_jobs"))
        );
        let small = AdmissionLimits { max_queued_request_bytes: 99, ..AdmissionLimits::default() };
        assert!(
            matches!(small.check_room(ProofKind::Synthetic, 1, 100, &[]), Err(EngineError::ResourceExhausted(m)) if m.contains("max_queued_request_bytes"))
        );
    }
}
