//! `cuzk timeline`: a daemon run's stage events (GET /timeline on the status
//! endpoint, JSON lines) → a Chrome trace, an SVG Gantt chart and the GPU efficiency.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use cuzk_engine::timeline::{chrome_trace, device_busy, gpu_busy, partition_waits, prover_window, svg_gantt};
use cuzk_engine::TimelineEvent;

#[derive(Args, Debug)]
pub struct TimelineArgs {
    /// Events as JSON lines (e.g. `curl http://<status_listen>/timeline > run.jsonl`).
    pub events: PathBuf,
    /// Write a Chrome trace-event JSON here (opens in Perfetto or chrome://tracing).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write an SVG Gantt chart here (one lane per synthesis and prover worker).
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

pub fn run(args: &TimelineArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.events).with_context(|| format!("reading {}", args.events.display()))?;
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let e: TimelineEvent =
            serde_json::from_str(line).with_context(|| format!("{} line {}: not a timeline event", args.events.display(), i + 1))?;
        events.push(e);
    }
    if events.is_empty() {
        bail!("{} holds no events", args.events.display());
    }
    if let Some(p) = &args.trace {
        std::fs::write(p, serde_json::to_vec(&chrome_trace(&events))?).with_context(|| format!("writing {}", p.display()))?;
        println!("Chrome trace: {}", p.display());
    }
    if let Some(p) = &args.svg {
        std::fs::write(p, svg_gantt(&events)).with_context(|| format!("writing {}", p.display()))?;
        println!("SVG Gantt chart: {}", p.display());
    }
    let (busy, wall) = gpu_busy(&events);
    let jobs = events.iter().filter(|e| e.kind == cuzk_engine::EventKind::Completed).count();
    println!(
        "{} events, {jobs} jobs completed; wall {:.3} s, prover busy (merged) {:.3} s: GPU efficiency {:.1} %",
        events.len(),
        wall as f64 / 1e6,
        busy as f64 / 1e6,
        if wall > 0 { 100.0 * busy as f64 / wall as f64 } else { 0.0 }
    );
    let window = prover_window(&events);
    println!(
        "steady state (first prover start to last prover end): {:.3} s, GPU efficiency {:.1} %",
        window as f64 / 1e6,
        if window > 0 { 100.0 * busy as f64 / window as f64 } else { 0.0 }
    );
    let waits = partition_waits(&events);
    if !waits.prover_us.is_empty() {
        let show = |name: &str, mut v: Vec<u64>| {
            v.sort_unstable();
            match (v.get(v.len() / 2), v.last()) {
                (Some(&med), Some(&max)) => {
                    println!("  waited {name:<34} median {:>9.3} s, max {:>9.3} s", med as f64 / 1e6, max as f64 / 1e6)
                }
                _ => println!("  waited {name:<34} (no events: the timeline's first events are gone)"),
            }
        };
        println!("{} partitions reached a prover; where they waited:", waits.prover_us.len());
        show("in the queue (for a synthesis worker)", waits.queue_us);
        show("for parameters and memory", waits.admission_us);
        show("for a prover (synthesized)", waits.prover_us);
    }
    let devices = device_busy(&events);
    if devices.len() > 1 {
        for d in &devices {
            println!(
                "device {}: {} partitions, busy {:.3} s over its steady state of {:.3} s: GPU efficiency {:.1} %",
                d.device,
                d.partitions,
                d.busy_us as f64 / 1e6,
                d.window_us as f64 / 1e6,
                if d.window_us > 0 { 100.0 * d.busy_us as f64 / d.window_us as f64 } else { 0.0 }
            );
        }
    }
    Ok(())
}
