//! The timeline: every stage event of every partition, kept in a bounded ring, and
//! its renderings: a Chrome trace (opens in Perfetto), an SVG Gantt chart with one
//! lane per synthesis and prover worker, and the GPU efficiency (merged busy time of
//! the prover lanes over wall time).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Instant;

use cuzk_groth16::sync::lock;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Queued,
    /// A synthesis worker took the partition from the queue; it then waits for the
    /// parameters and for memory (admission) until its synthesis starts.
    Dequeued,
    SynthesisStart,
    SynthesisEnd,
    /// Witness-only synthesis (a kind with compiled matrices), in place of synthesis.
    WitnessStart,
    WitnessEnd,
    /// The kind's public inputs computed from the request's public data, on the
    /// synthesis worker after the synthesis: the inputs the proof is checked against.
    /// Not the prover's wait: a 32 GiB WindowPoSt partition went 2.47 s from its
    /// witness to its preparation on an idle H100 (a98d4e9) with no span to say why.
    InputsStart,
    InputsEnd,
    /// On a GPU's copy stream (lane "copy-…" of the prover worker), during the host
    /// preparation: the partition's uploads, then its a, b, c computed from compiled
    /// matrices where the backend does that.
    UploadStart,
    UploadEnd,
    ProductsStart,
    ProductsEnd,
    /// A prover worker's host preparation of a partition (on the "host-…" lane of its
    /// worker): uploads queued, split lists built; the device is not held.
    PrepareStart,
    PrepareEnd,
    ProveStart,
    ProveEnd,
    Verified,
    Rejected,
    Completed,
    Failed,
    Cancelled,
}

/// One event; `t_us` counts from the engine's start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineEvent {
    pub t_us: u64,
    pub job: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub partition: Option<u32>,
    pub kind: EventKind,
    /// The worker ("synth-0", "prove-0.1"); empty for job-level events.
    #[serde(default)]
    pub lane: String,
}

pub(crate) struct Timeline {
    start: Instant,
    events: Mutex<VecDeque<TimelineEvent>>,
    capacity: usize,
}

impl Timeline {
    pub fn new(capacity: usize) -> Self {
        Timeline { start: Instant::now(), events: Mutex::new(VecDeque::new()), capacity }
    }

    pub fn record(&self, job: &str, partition: Option<usize>, kind: EventKind, lane: &str) {
        self.record_at(job, partition, kind, lane, Instant::now());
    }

    /// Records an event that happened at `at` (not before the timeline began).
    pub fn record_at(&self, job: &str, partition: Option<usize>, kind: EventKind, lane: &str, at: Instant) {
        let e = TimelineEvent {
            t_us: at.saturating_duration_since(self.start).as_micros() as u64,
            job: job.to_string(),
            partition: partition.map(|p| p as u32),
            kind,
            lane: lane.to_string(),
        };
        let mut g = lock(&self.events);
        if g.len() == self.capacity {
            g.pop_front();
        }
        g.push_back(e);
    }

    pub fn events(&self) -> Vec<TimelineEvent> {
        lock(&self.events).iter().cloned().collect()
    }
}

/// A span on one lane: [start, end) in µs.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub lane: String,
    pub name: String,
    pub job: String,
    pub start_us: u64,
    pub end_us: u64,
}

/// The spans an event ends and begins: (stage, begins).
fn stage_edges(kind: EventKind) -> &'static [(&'static str, bool)] {
    match kind {
        EventKind::Dequeued => &[("admission", true)],
        EventKind::SynthesisStart => &[("admission", false), ("synthesis", true)],
        EventKind::SynthesisEnd => &[("synthesis", false)],
        EventKind::WitnessStart => &[("admission", false), ("witness", true)],
        EventKind::WitnessEnd => &[("witness", false)],
        EventKind::InputsStart => &[("inputs", true)],
        EventKind::InputsEnd => &[("inputs", false)],
        EventKind::UploadStart => &[("upload", true)],
        EventKind::UploadEnd => &[("upload", false)],
        EventKind::ProductsStart => &[("products", true)],
        EventKind::ProductsEnd => &[("products", false)],
        EventKind::PrepareStart => &[("prepare", true)],
        EventKind::PrepareEnd => &[("prepare", false)],
        EventKind::ProveStart => &[("prove", true)],
        EventKind::ProveEnd => &[("prove", false)],
        _ => &[],
    }
}

/// Pairs start/end events per (lane, job, partition) into spans: admission (waiting
/// for parameters and memory), synthesis (or witness), inputs, prepare, upload,
/// products, prove.
pub fn spans(events: &[TimelineEvent]) -> Vec<Span> {
    let mut open: BTreeMap<(String, String, Option<u32>, &'static str), u64> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        for &(stage, is_start) in stage_edges(e.kind) {
            let key = (e.lane.clone(), e.job.clone(), e.partition, stage);
            if is_start {
                open.insert(key, e.t_us);
            } else if let Some(start) = open.remove(&key) {
                let name = match e.partition {
                    Some(p) => format!("{stage} {} p{p}", e.job),
                    None => format!("{stage} {}", e.job),
                };
                out.push(Span { lane: e.lane.clone(), name, job: e.job.clone(), start_us: start, end_us: e.t_us.max(start) });
            }
        }
    }
    out.sort_by_key(|s| (s.lane.clone(), s.start_us));
    out
}

/// Where partitions waited, in µs, one entry per partition that reached a prover:
/// in the queue (job queued → a synthesis worker took it; missing where the job's
/// Queued event has left the timeline's ring), for admission (parameters and memory
/// budget → its synthesis started) and for a prover (synthesis, and the public inputs
/// where they were computed, ended → its prover began, preparation included).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartitionWaits {
    pub queue_us: Vec<u64>,
    pub admission_us: Vec<u64>,
    pub prover_us: Vec<u64>,
}

pub fn partition_waits(events: &[TimelineEvent]) -> PartitionWaits {
    let mut queued: BTreeMap<&str, u64> = BTreeMap::new();
    let mut at: BTreeMap<(&str, u32, EventKind), u64> = BTreeMap::new();
    for e in events {
        match e.partition {
            None if e.kind == EventKind::Queued => {
                queued.insert(&e.job, e.t_us);
            }
            // The first of each kind (a retried partition keeps its first attempt).
            Some(p) => {
                at.entry((&e.job, p, e.kind)).or_insert(e.t_us);
            }
            None => {}
        }
    }
    let mut w = PartitionWaits::default();
    for (&(job, p, kind), &t) in &at {
        let started_kind = match kind {
            EventKind::SynthesisEnd => EventKind::SynthesisStart,
            EventKind::WitnessEnd => EventKind::WitnessStart,
            _ => continue,
        };
        let get = |k| at.get(&(job, p, k)).copied();
        // The prover's first step: a, b, c on the host where it computed them there (a
        // products span before the preparation), else the preparation or the proof.
        let prover = [get(EventKind::ProductsStart), get(EventKind::PrepareStart), get(EventKind::ProveStart)].into_iter().flatten().min();
        let (Some(dequeued), Some(started), Some(prover)) = (get(EventKind::Dequeued), get(started_kind), prover) else {
            continue;
        };
        let ready = get(EventKind::InputsEnd).map_or(t, |i| i.max(t));
        if let Some(&q) = queued.get(job) {
            w.queue_us.push(dequeued.saturating_sub(q));
        }
        w.admission_us.push(started.saturating_sub(dequeued));
        w.prover_us.push(prover.saturating_sub(ready));
    }
    w
}

/// Total length of the union of the intervals.
fn merged_length(mut iv: Vec<(u64, u64)>) -> u64 {
    iv.sort();
    let mut busy = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (a, b) in iv {
        cur = match cur {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                busy += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    if let Some((s, e)) = cur {
        busy += e - s;
    }
    busy
}

/// (merged busy µs of the prover lanes, wall µs from the first to the last event).
/// With several GPUs this is the time *any* GPU was busy: see [`device_busy`].
pub fn gpu_busy(events: &[TimelineEvent]) -> (u64, u64) {
    let iv = spans(events).into_iter().filter(|s| s.lane.starts_with("prove")).map(|s| (s.start_us, s.end_us)).collect();
    let busy = merged_length(iv);
    let wall = match (events.iter().map(|e| e.t_us).min(), events.iter().map(|e| e.t_us).max()) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    (busy, wall)
}

/// One device's share of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceBusy {
    /// The backend index of the prover lanes ("prove-<device>.<worker>").
    pub device: String,
    /// Merged busy µs of its workers' prover spans.
    pub busy_us: u64,
    /// µs from its first prover span's start to its last one's end.
    pub window_us: u64,
    pub partitions: usize,
}

/// Per device: busy time, steady-state window and partitions proven, in device order.
pub fn device_busy(events: &[TimelineEvent]) -> Vec<DeviceBusy> {
    let mut by_device: std::collections::BTreeMap<String, Vec<(u64, u64)>> = Default::default();
    for s in spans(events) {
        let Some(rest) = s.lane.strip_prefix("prove-") else {
            continue;
        };
        let device = rest.split('.').next().unwrap_or(rest).to_string();
        by_device.entry(device).or_default().push((s.start_us, s.end_us));
    }
    by_device
        .into_iter()
        .map(|(device, iv)| {
            let window_us = iv.iter().map(|i| i.1).max().unwrap_or(0) - iv.iter().map(|i| i.0).min().unwrap_or(0);
            let partitions = iv.len();
            DeviceBusy { device, busy_us: merged_length(iv), window_us, partitions }
        })
        .collect()
}

/// µs from the first prover span's start to the last one's end: the steady state of a
/// run, without the set-up or the first synthesis before the GPU has any work.
pub fn prover_window(events: &[TimelineEvent]) -> u64 {
    let sp: Vec<Span> = spans(events).into_iter().filter(|s| s.lane.starts_with("prove")).collect();
    match (sp.iter().map(|s| s.start_us).min(), sp.iter().map(|s| s.end_us).max()) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    }
}

/// Chrome trace-event JSON: complete ("X") events per span, instant events for the
/// job-level ones, one thread per lane.
pub fn chrome_trace(events: &[TimelineEvent]) -> serde_json::Value {
    let sp = spans(events);
    let mut lanes: Vec<String> = sp.iter().map(|s| s.lane.clone()).collect();
    lanes.sort();
    lanes.dedup();
    let tid = |lane: &str| lanes.iter().position(|l| l == lane).map(|i| i + 1).unwrap_or(0);
    let mut out: Vec<serde_json::Value> =
        lanes.iter().map(|l| serde_json::json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid(l), "args": {"name": l}})).collect();
    out.extend(sp.iter().map(|s| {
        serde_json::json!({"ph": "X", "name": s.name, "cat": s.name.split(' ').next().unwrap_or(""), "pid": 1,
            "tid": tid(&s.lane), "ts": s.start_us, "dur": s.end_us - s.start_us, "args": {"job": s.job}})
    }));
    out.extend(
        events
            .iter()
            .filter(|e| e.lane.is_empty())
            .map(|e| serde_json::json!({"ph": "i", "s": "g", "name": format!("{:?} {}", e.kind, e.job), "pid": 1, "tid": 0, "ts": e.t_us})),
    );
    serde_json::json!({ "traceEvents": out, "displayTimeUnit": "ms" })
}

/// An SVG Gantt chart: one row per lane, synthesis in blue, proving in orange, host
/// preparation in green, waits for parameters and memory (admission) in grey.
pub fn svg_gantt(events: &[TimelineEvent]) -> String {
    let sp = spans(events);
    let mut lanes: Vec<String> = sp.iter().map(|s| s.lane.clone()).collect();
    lanes.sort();
    lanes.dedup();
    let t0 = events.iter().map(|e| e.t_us).min().unwrap_or(0);
    let t1 = events.iter().map(|e| e.t_us).max().unwrap_or(0).max(t0 + 1);
    let (left, width, row) = (110.0, 1000.0, 22.0);
    let x = |t: u64| left + (t - t0) as f64 / (t1 - t0) as f64 * width;
    let height = row * (lanes.len() as f64 + 2.0);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="monospace" font-size="11">"#,
        left + width + 20.0
    );
    let (busy, wall) = gpu_busy(events);
    let _ = writeln!(
        o,
        r#"<text x="4" y="14">wall {:.3} s, prover busy {:.3} s ({:.1} %)</text>"#,
        wall as f64 / 1e6,
        busy as f64 / 1e6,
        if wall > 0 { 100.0 * busy as f64 / wall as f64 } else { 0.0 }
    );
    for (i, lane) in lanes.iter().enumerate() {
        let y = row * (i as f64 + 1.0);
        let _ = writeln!(o, r#"<text x="4" y="{}">{lane}</text>"#, y + 15.0);
        for s in sp.iter().filter(|s| &s.lane == lane) {
            let color = if s.name.starts_with("prove") {
                "#e8873a"
            } else if s.name.starts_with("prepare") {
                "#4caf50"
            } else if s.name.starts_with("admission") {
                "#c8c8c8"
            } else {
                "#3a7be8"
            };
            let _ = writeln!(
                o,
                r#"<rect x="{:.1}" y="{}" width="{:.1}" height="{}" fill="{color}"><title>{} ({:.1} ms)</title></rect>"#,
                x(s.start_us),
                y + 3.0,
                (x(s.end_us) - x(s.start_us)).max(0.5),
                row - 6.0,
                s.name,
                (s.end_us - s.start_us) as f64 / 1e3
            );
        }
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: u64, kind: EventKind, lane: &str, p: u32) -> TimelineEvent {
        TimelineEvent { t_us: t, job: "j".into(), partition: Some(p), kind, lane: lane.into() }
    }

    #[test]
    fn busy_time_merges_overlapping_prover_spans() {
        let e = vec![
            ev(0, EventKind::SynthesisStart, "synth-0", 0),
            ev(10, EventKind::SynthesisEnd, "synth-0", 0),
            ev(10, EventKind::ProveStart, "prove-0.0", 0),
            ev(30, EventKind::ProveEnd, "prove-0.0", 0),
            ev(20, EventKind::ProveStart, "prove-0.1", 1),
            ev(40, EventKind::ProveEnd, "prove-0.1", 1),
            ev(60, EventKind::ProveStart, "prove-0.0", 2),
            ev(70, EventKind::ProveEnd, "prove-0.0", 2),
            ev(100, EventKind::Completed, "", 0),
        ];
        // [10, 40) and [60, 70) over [0, 100].
        assert_eq!(gpu_busy(&e), (40, 100));
        assert_eq!(prover_window(&e), 60, "first prover start 10 to last end 70");
        let sp = spans(&e);
        assert_eq!(sp.len(), 4);
        let trace = chrome_trace(&e);
        let n = trace["traceEvents"].as_array().unwrap().iter().filter(|x| x["ph"] == "X").count();
        assert_eq!(n, 4);
        let svg = svg_gantt(&e);
        assert!(svg.contains("prove-0.1") && svg.contains("40.0 %"), "{svg}");
    }

    #[test]
    fn device_busy_is_per_device() {
        let e = vec![
            ev(0, EventKind::ProveStart, "prove-0.0", 0),
            ev(10, EventKind::ProveEnd, "prove-0.0", 0),
            ev(5, EventKind::ProveStart, "prove-0.1", 1),
            ev(20, EventKind::ProveEnd, "prove-0.1", 1),
            ev(30, EventKind::PrepareStart, "host-1.0", 2),
            ev(40, EventKind::PrepareEnd, "host-1.0", 2),
            ev(40, EventKind::ProveStart, "prove-1.0", 2),
            ev(50, EventKind::ProveEnd, "prove-1.0", 2),
            ev(70, EventKind::ProveStart, "prove-1.1", 3),
            ev(80, EventKind::ProveEnd, "prove-1.1", 3),
        ];
        let d = device_busy(&e);
        assert_eq!(
            d,
            vec![
                DeviceBusy { device: "0".into(), busy_us: 20, window_us: 20, partitions: 2 },
                DeviceBusy { device: "1".into(), busy_us: 20, window_us: 40, partitions: 2 },
            ]
        );
        // Any device busy: [0, 20), [40, 50), [70, 80).
        assert_eq!(gpu_busy(&e).0, 40);
    }

    #[test]
    fn waits_split_into_queue_admission_and_prover() {
        let job = |t, kind| TimelineEvent { t_us: t, job: "j".into(), partition: None, kind, lane: String::new() };
        let e = vec![
            job(0, EventKind::Queued),
            ev(5, EventKind::Dequeued, "synth-0", 0),
            ev(25, EventKind::SynthesisStart, "synth-0", 0),
            ev(125, EventKind::SynthesisEnd, "synth-0", 0),
            ev(140, EventKind::PrepareStart, "host-0.0", 0),
            ev(150, EventKind::PrepareEnd, "host-0.0", 0),
            ev(150, EventKind::ProveStart, "prove-0.0", 0),
            ev(170, EventKind::ProveEnd, "prove-0.0", 0),
            // Partition 1 never reached a prover: not counted.
            ev(130, EventKind::Dequeued, "synth-0", 1),
        ];
        let w = partition_waits(&e);
        assert_eq!(w, PartitionWaits { queue_us: vec![5], admission_us: vec![20], prover_us: vec![15] });
        let sp = spans(&e);
        assert!(sp.iter().any(|s| s.name == "admission j p0" && (s.start_us, s.end_us) == (5, 25)), "{sp:?}");
        assert!(svg_gantt(&e).contains("#c8c8c8"));
    }

    #[test]
    fn the_public_inputs_are_a_span_of_their_own_and_not_a_wait_for_a_prover() {
        let e = vec![
            ev(0, EventKind::Dequeued, "synth-0", 0),
            ev(0, EventKind::WitnessStart, "synth-0", 0),
            ev(100, EventKind::WitnessEnd, "synth-0", 0),
            ev(100, EventKind::InputsStart, "synth-0", 0),
            ev(350, EventKind::InputsEnd, "synth-0", 0),
            ev(360, EventKind::PrepareStart, "host-0.0", 0),
            ev(400, EventKind::PrepareEnd, "host-0.0", 0),
            ev(400, EventKind::ProveStart, "prove-0.0", 0),
            ev(900, EventKind::ProveEnd, "prove-0.0", 0),
        ];
        assert_eq!(partition_waits(&e).prover_us, vec![10]);
        let sp = spans(&e);
        assert!(sp.iter().any(|s| s.lane == "synth-0" && (s.start_us, s.end_us) == (100, 350) && s.name == "inputs j p0"), "{sp:?}");
    }

    #[test]
    fn a_b_c_on_the_host_are_the_provers_first_step() {
        // A GPU backend that computed a, b, c on the host (10 s of a WindowPoSt
        // partition): the wait for a prover ends where they start, and they show as a
        // span on the host lane.
        let e = vec![
            ev(0, EventKind::Dequeued, "synth-0", 0),
            ev(0, EventKind::WitnessStart, "synth-0", 0),
            ev(100, EventKind::WitnessEnd, "synth-0", 0),
            ev(110, EventKind::ProductsStart, "host-0.0", 0),
            ev(1110, EventKind::ProductsEnd, "host-0.0", 0),
            ev(1110, EventKind::PrepareStart, "host-0.0", 0),
            ev(1200, EventKind::PrepareEnd, "host-0.0", 0),
            ev(1200, EventKind::ProveStart, "prove-0.0", 0),
            ev(2200, EventKind::ProveEnd, "prove-0.0", 0),
        ];
        assert_eq!(partition_waits(&e).prover_us, vec![10]);
        assert!(
            spans(&e).iter().any(|s| s.lane == "host-0.0" && (s.start_us, s.end_us) == (110, 1110) && s.name.starts_with("products")),
            "{:?}",
            spans(&e)
        );
    }
}
