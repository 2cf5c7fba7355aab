//! This process's CPU time and memory, from /proc (Linux), for benchmarks that report
//! core-seconds and peak resident memory per step.

use std::time::Duration;

/// Clock ticks per second of /proc's CPU times (USER_HZ, which is 100 on the x86-64
/// and arm64 Linux ABIs).
const TICKS_PER_SECOND: f64 = 100.0;

/// User + system CPU time of the whole process (all threads) so far; None where /proc
/// is not there.
pub fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces, inside parentheses).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_secs_f64(ticks as f64 / TICKS_PER_SECOND))
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Resident memory now, in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k << 10)
}

/// The most resident memory since the process began or since [`reset_peak_rss`].
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k << 10)
}

/// Starts a new peak: the kernel resets the high-water mark to the current resident
/// memory. Returns false where it cannot (then the peak counts from the start).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Wall time, CPU time and peak memory of one step.
#[derive(Clone, Copy, Debug)]
pub struct StepCost {
    pub wall: Duration,
    pub cpu: Option<Duration>,
    /// Peak resident memory during the step (the whole process's).
    pub peak_rss: Option<u64>,
    /// Resident memory when the step began.
    pub rss_before: Option<u64>,
}

/// The median of `v` (the upper one of an even count); NaN when `v` is empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs `f` and measures it.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, StepCost) {
    let rss_before = rss_bytes();
    let peak_resets = reset_peak_rss();
    let cpu0 = cpu_time();
    let t = std::time::Instant::now();
    let out = f();
    let wall = t.elapsed();
    let cpu = match (cpu0, cpu_time()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let peak_rss = if peak_resets { peak_rss_bytes() } else { None };
    (out, StepCost { wall, cpu, peak_rss, rss_before })
}

impl StepCost {
    /// CPU seconds as a RESULT field's value: "-" where the platform reports none.
    pub fn core_s(&self) -> String {
        self.cpu.map_or("-".into(), |c| format!("{:.2}", c.as_secs_f64()))
    }

    /// "12.3 s wall, 12.1 core-s, peak 17.9 GB (from 0.2 GB)".
    pub fn describe(&self) -> String {
        let gb = |b: u64| b as f64 / 1e9;
        let mut s = format!("{:.2} s wall", self.wall.as_secs_f64());
        if let Some(c) = self.cpu {
            s += &format!(", {:.2} core-s", c.as_secs_f64());
        }
        if let Some(p) = self.peak_rss {
            s += &format!(", peak RSS {:.2} GB", gb(p));
            if let Some(b) = self.rss_before {
                s += &format!(" (from {:.2} GB)", gb(b));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_that_allocates_shows_in_its_peak() {
        if cpu_time().is_none() {
            return; // not Linux
        }
        let (sum, cost) = measure(|| {
            let v = vec![1u8; 256 << 20];
            // Touch every page so it is resident.
            v.iter().step_by(4096).map(|&b| b as u64).sum::<u64>()
        });
        assert_eq!(sum, (256 << 20) / 4096);
        if let (Some(peak), Some(before)) = (cost.peak_rss, cost.rss_before) {
            assert!(peak >= before + (200 << 20), "peak {peak} before {before}");
        }
        assert!(cost.cpu.is_some() && cost.wall > Duration::ZERO);
    }
}
