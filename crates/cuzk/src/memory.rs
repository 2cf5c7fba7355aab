//! The daemon's host-memory budget. memory.total_budget = "auto" is the memory this
//! process may really use minus memory.safety_margin: MemTotal, or the limit of its
//! control group when lower (systemd's MemoryMax=, a container's limit). Without the
//! latter a service under MemoryMax would budget the whole machine and be killed by the
//! kernel for using what it was promised.

use anyhow::{bail, Result};
use cuzk_server::config::DaemonConfig;

/// The budget in bytes for `config`. A size above what this process may use is
/// refused: the budget promises the kernel never kills the daemon for memory.
pub fn budget_bytes(config: &DaemonConfig) -> Result<u64> {
    if let Some(b) = config.memory_budget {
        if let Some(limit) = usable_memory().filter(|l| b > l.bytes) {
            bail!(
                "memory.total_budget ({b} bytes, {:.1} GiB) is more than this process may use ({} bytes, {}): the daemon would be killed for memory before the budget stopped it; set at most that, less what else runs here, or \"auto\"",
                b as f64 / (1u64 << 30) as f64,
                limit.bytes,
                limit.source
            );
        }
        return Ok(b);
    }
    let Some(limit) = usable_memory() else {
        bail!("memory.total_budget = \"auto\" needs /proc/meminfo; set a size instead");
    };
    if limit.bytes <= config.safety_margin {
        bail!(
            "memory.total_budget = \"auto\": {} of {} leaves nothing after memory.safety_margin ({} bytes); lower the margin or set a size",
            limit.bytes,
            limit.source,
            config.safety_margin
        );
    }
    Ok(limit.bytes - config.safety_margin)
}

/// Memory this process may use, and what limits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    /// "MemTotal" or "cgroup <path> memory.max".
    pub source: String,
}

/// MemTotal, or the control group's limit when lower; None without /proc/meminfo.
pub fn usable_memory() -> Option<MemoryLimit> {
    let total = mem_total(&std::fs::read_to_string("/proc/meminfo").ok()?)?;
    let mut best = MemoryLimit { bytes: total, source: "MemTotal".into() };
    if let Some(cg) = cgroup_limit() {
        if cg.bytes < best.bytes {
            best = cg;
        }
    }
    Some(best)
}

/// MemTotal of a /proc/meminfo text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The lowest memory limit on this process's control group and its ancestors (cgroup
/// v2: memory.max; v1: memory.limit_in_bytes), None when there is none.
fn cgroup_limit() -> Option<MemoryLimit> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let (version, path) = cgroup_path(&own)?;
    let (root, file) = match version {
        2 => ("/sys/fs/cgroup", "memory.max"),
        _ => ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
    };
    let mut lowest: Option<MemoryLimit> = None;
    let mut dir = std::path::PathBuf::from(root).join(path.trim_start_matches('/'));
    loop {
        let f = dir.join(file);
        if let Some(bytes) = std::fs::read_to_string(&f).ok().and_then(|t| limit_value(&t)) {
            if lowest.as_ref().map_or(true, |l| bytes < l.bytes) {
                lowest = Some(MemoryLimit { bytes, source: format!("cgroup {}", f.display()) });
            }
        }
        if dir == std::path::Path::new(root) || !dir.pop() {
            break;
        }
    }
    lowest
}

/// The memory controller's cgroup version and path from a /proc/self/cgroup text:
/// v2's single "0::/path" line, or v1's line listing "memory".
fn cgroup_path(text: &str) -> Option<(u32, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            return Some((1, path.to_string()));
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some((2, path.to_string()));
        }
    }
    v2
}

/// A limit file's value: bytes, or None for no limit ("max", or v1's huge number).
fn limit_value(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    let v: u64 = t.parse().ok()?;
    // cgroup v1 writes "no limit" as the largest page-aligned signed 64-bit value.
    (v < 1 << 60).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_cgroup_texts() {
        assert_eq!(mem_total("MemTotal:       24576000 kB\nMemFree: 1 kB\n"), Some(24_576_000 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(cgroup_path("0::/system.slice/cuzk.service\n"), Some((2, "/system.slice/cuzk.service".into())));
        assert_eq!(cgroup_path("12:cpu,cpuacct:/a\n4:memory:/system.slice/cuzk.service\n0::/x\n"), Some((1, "/system.slice/cuzk.service".into())));
        assert_eq!(cgroup_path("garbage"), None);
        assert_eq!(limit_value("max\n"), None);
        assert_eq!(limit_value("137438953472\n"), Some(128 << 30));
        assert_eq!(limit_value("9223372036854771712\n"), None);
        assert_eq!(limit_value("lots"), None);
    }

    #[test]
    fn a_size_is_taken_as_it_is_and_auto_leaves_the_margin() {
        let sized = DaemonConfig { memory_budget: Some(123), ..DaemonConfig::default() };
        assert_eq!(budget_bytes(&sized).unwrap(), 123);
        if let Some(limit) = usable_memory() {
            let auto = DaemonConfig { safety_margin: 1 << 20, ..DaemonConfig::default() };
            assert_eq!(budget_bytes(&auto).unwrap(), limit.bytes - (1 << 20));
            let greedy = DaemonConfig { safety_margin: limit.bytes, ..DaemonConfig::default() };
            assert!(budget_bytes(&greedy).unwrap_err().to_string().contains("safety_margin"));
        }
    }
}
