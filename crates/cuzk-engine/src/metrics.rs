//! Counters and latency histograms per proof kind, and their Prometheus text. The
//! metric names are a contract (dashboards read them): change none.

use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;

use crate::request::ProofKind;
use crate::status::EngineStatus;

/// Upper bounds (seconds) of the latency histogram buckets: 10 ms to 30 min.
const BUCKETS: [f64; 14] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0];

#[derive(Default, Clone)]
pub(crate) struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn observe(&mut self, d: Duration) {
        let v = d.as_secs_f64();
        for (c, b) in self.counts.iter_mut().zip(BUCKETS) {
            if v <= b {
                *c += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

/// What the engine has done since it started.
#[derive(Default)]
pub(crate) struct Stats {
    pub completed: HashMap<ProofKind, u64>,
    pub failed: HashMap<ProofKind, u64>,
    pub cancelled: HashMap<ProofKind, u64>,
    /// Stage latencies per kind.
    pub synthesis: HashMap<ProofKind, Histogram>,
    pub prove: HashMap<ProofKind, Histogram>,
    pub queue_wait: HashMap<ProofKind, Histogram>,
    pub total: HashMap<ProofKind, Histogram>,
    pub verify_failures: u64,
    /// Bytes a device backend sent up (witness, a, b, c, streamed points, matrices) and
    /// read back, and the partitions it proved, per kind.
    pub bytes_up: HashMap<ProofKind, u64>,
    pub bytes_down: HashMap<ProofKind, u64>,
    pub device_partitions: HashMap<ProofKind, u64>,
}

/// The Prometheus text exposition of `stats` and `st`; `gpu_busy` is the prover
/// lanes' merged busy time and the wall time over the recorded timeline.
pub(crate) fn prometheus_text(st: &EngineStatus, stats: &Stats, gpu_busy: (u64, u64)) -> String {
    let mut o = String::new();
    let kinds: Vec<ProofKind> = st.queues.iter().map(|q| q.kind).collect();
    let counter = |o: &mut String, name: &str, help: &str, map: &HashMap<ProofKind, u64>| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
        for k in &kinds {
            let _ = writeln!(o, "{name}{{kind=\"{k}\"}} {}", map.get(k).copied().unwrap_or(0));
        }
    };
    counter(&mut o, "cuzk_proofs_completed_total", "Jobs completed with a verified proof.", &stats.completed);
    counter(&mut o, "cuzk_proofs_failed_total", "Jobs that failed.", &stats.failed);
    counter(&mut o, "cuzk_proofs_cancelled_total", "Jobs cancelled.", &stats.cancelled);
    counter(&mut o, "cuzk_device_bytes_up_total", "Bytes sent to the GPUs (witness, a, b, c, streamed points).", &stats.bytes_up);
    counter(&mut o, "cuzk_device_bytes_down_total", "Bytes read back from the GPUs.", &stats.bytes_down);
    counter(&mut o, "cuzk_device_partitions_total", "Partitions proved on a GPU.", &stats.device_partitions);
    for (name, help, pick) in [
        ("cuzk_queue_pending_partitions", "Partitions not yet started.", 0),
        ("cuzk_queue_in_progress_partitions", "Partitions being synthesized or proved.", 1),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
        for q in &st.queues {
            let _ = writeln!(o, "{name}{{kind=\"{}\"}} {}", q.kind, if pick == 0 { q.pending } else { q.in_progress });
        }
    }
    for (name, help, map) in [
        ("cuzk_partition_synthesis_seconds", "Synthesis time per partition.", &stats.synthesis),
        ("cuzk_partition_prove_seconds", "Backend time per partition (device lock held).", &stats.prove),
        ("cuzk_job_queue_wait_seconds", "Submission to the first partition's synthesis.", &stats.queue_wait),
        ("cuzk_job_total_seconds", "Submission to completion of jobs that completed.", &stats.total),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} histogram");
        for k in &kinds {
            let h = map.get(k).cloned().unwrap_or_default();
            for (b, c) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(o, "{name}_bucket{{kind=\"{k}\",le=\"{b}\"}} {c}");
            }
            let _ = writeln!(o, "{name}_bucket{{kind=\"{k}\",le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(o, "{name}_sum{{kind=\"{k}\"}} {}\n{name}_count{{kind=\"{k}\"}} {}", h.sum, h.count);
        }
    }
    // Each GPU's memory: the driver's view, and what is in use inside the device's pool
    // (the soak's leak check: the pool is allocated whole before the first proof).
    for (name, help, pick) in [
        ("cuzk_device_memory_free_bytes", "Device memory free, as the driver reports it.", 0),
        ("cuzk_device_memory_total_bytes", "Device memory in all.", 1),
        ("cuzk_device_pool_used_bytes", "Bytes in use inside the device's memory pool now.", 2),
        ("cuzk_device_pool_used_high_bytes", "The most bytes ever in use inside the device's memory pool.", 3),
    ] {
        let devices: Vec<_> = st.backends.iter().filter_map(|b| b.device.as_ref().map(|d| (&b.name, d))).collect();
        if devices.is_empty() {
            break;
        }
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (backend, d) in devices {
            let v = [d.free_memory, d.total_memory, d.pool_used, d.pool_used_high][pick];
            let _ = writeln!(o, "{name}{{backend=\"{backend}\",ordinal=\"{}\"}} {v}", d.ordinal);
        }
    }
    // Per GPU, 0 once its device was lost (the daemon must be restarted to use it
    // again); the CPU backend has no device to lose.
    let gpus: Vec<_> = st.backends.iter().filter(|b| b.device.is_some() || b.out_of_service.is_some()).collect();
    if !gpus.is_empty() {
        let _ = writeln!(o, "# HELP cuzk_backend_in_service Whether the GPU backend proves (0: taken out of service, its device lost).\n# TYPE cuzk_backend_in_service gauge");
    }
    for b in gpus {
        let _ = writeln!(o, "cuzk_backend_in_service{{backend=\"{}\"}} {}", b.name, u8::from(b.out_of_service.is_none()));
    }
    let (busy, wall) = gpu_busy;
    let _ = writeln!(
        o,
        "# HELP cuzk_gpu_busy_ratio Merged prover busy time over wall time, over the recorded timeline.\n# TYPE cuzk_gpu_busy_ratio gauge\ncuzk_gpu_busy_ratio {}",
        if wall > 0 { busy as f64 / wall as f64 } else { 0.0 }
    );
    let _ = writeln!(
        o,
        "# HELP cuzk_verify_failures_total Partition proofs that failed self-verification.\n# TYPE cuzk_verify_failures_total counter\ncuzk_verify_failures_total {}",
        stats.verify_failures
    );
    let _ = writeln!(
        o,
        "# HELP cuzk_memory_budget_bytes Host memory budget.\n# TYPE cuzk_memory_budget_bytes gauge\ncuzk_memory_budget_bytes {}\n# HELP cuzk_memory_used_bytes Host memory charged (partitions and parameters).\n# TYPE cuzk_memory_used_bytes gauge\ncuzk_memory_used_bytes {}",
        st.memory_budget_bytes, st.memory_used_bytes
    );
    let _ = writeln!(
        o,
        "# HELP cuzk_uptime_seconds Seconds since the engine started.\n# TYPE cuzk_uptime_seconds gauge\ncuzk_uptime_seconds {}",
        st.uptime.as_secs()
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::BackendStatus;

    #[test]
    fn each_gpu_reports_its_memory_and_its_pools_use_and_high_water() {
        let device = cuzk_groth16::DeviceInfo {
            ordinal: 1,
            name: "gpu".into(),
            total_memory: 80 << 30,
            free_memory: 2 << 30,
            pool_used: 40 << 30,
            pool_used_high: 70 << 30,
        };
        let mut st = EngineStatus {
            backends: vec![
                BackendStatus { name: "cuda:1".into(), device: Some(device), current_job: None, out_of_service: None },
                BackendStatus { name: "cpu".into(), device: None, current_job: None, out_of_service: None },
            ],
            parameter_sets: Vec::new(),
            queues: Vec::new(),
            completed: 0,
            failed: 0,
            uptime: std::time::Duration::ZERO,
            memory_budget_bytes: 0,
            memory_used_bytes: 0,
            memory_peak_bytes: 0,
            memory_pinned_bytes: 0,
            memory_idle_bytes: 0,
            aux_vectors_reused: 0,
            aux_vectors_fresh: 0,
        };
        let text = prometheus_text(&st, &Stats::default(), (0, 0));
        for line in [
            "cuzk_device_memory_free_bytes{backend=\"cuda:1\",ordinal=\"1\"} 2147483648",
            "cuzk_device_memory_total_bytes{backend=\"cuda:1\",ordinal=\"1\"} 85899345920",
            "cuzk_device_pool_used_bytes{backend=\"cuda:1\",ordinal=\"1\"} 42949672960",
            "cuzk_device_pool_used_high_bytes{backend=\"cuda:1\",ordinal=\"1\"} 75161927680",
            "cuzk_backend_in_service{backend=\"cuda:1\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        assert!(!text.contains("backend=\"cpu\""), "{text}");
        // A CPU-only engine exports none of them.
        st.backends.remove(0);
        assert!(!prometheus_text(&st, &Stats::default(), (0, 0)).contains("cuzk_device_pool"));
        // A lost GPU: out of service, its device no longer asked.
        st.backends
            .insert(0, BackendStatus { name: "cuda:0".into(), device: None, current_job: None, out_of_service: Some("device lost: x".into()) });
        let text = prometheus_text(&st, &Stats::default(), (0, 0));
        assert!(text.lines().any(|l| l == "cuzk_backend_in_service{backend=\"cuda:0\"} 0"), "{text}");
    }
}
