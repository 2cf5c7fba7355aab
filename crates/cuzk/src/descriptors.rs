//! The daemon's descriptor limit against `daemon.max_connections`. Each connection holds
//! a descriptor; at the limit `accept` fails (EMFILE) and silent connections past their
//! handshake lock out gRPC and the status port alike (115 of them under `ulimit -n
//! 128` did until the 10-minute idle timeout). So at start the soft limit is raised
//! toward the hard one, and where it stays below the connections plus a reserve, the
//! connection cap is lowered to fit: the table then fills first and a new connection
//! takes an old one's place, which EMFILE never allows.

use anyhow::Result;
use cuzk_server::config::DaemonConfig;

/// Descriptors kept for everything but connections: listeners, the status port's
/// connections, parameter and matrices files, the runtime's and the GPU driver's own
/// (half the limit where it is lower than twice this).
pub const RESERVED: u64 = 64;

/// The process's descriptor limit: (soft, hard).
fn limits() -> Option<(u64, u64)> {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit through a valid pointer to a local.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) };
    // rlim_t is u64 on Linux (the only target this daemon runs on).
    (r == 0).then_some((l.rlim_cur, l.rlim_max))
}

/// Sets the soft limit to `soft`; whether it took.
fn raise_soft(soft: u64, hard: u64) -> bool {
    let l = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: setrlimit reads one rlimit through a valid pointer to a local.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) == 0 }
}

/// What the limit allows for `config.connections.max_connections`: the connections to
/// serve and, when that is fewer than configured, the warning to log. `raise`: raise the
/// soft limit toward the hard one first (the start; `--check-config` only works out
/// what the start would do).
pub fn connections_allowed(config: &DaemonConfig, raise: bool) -> Result<(usize, Option<String>)> {
    let wanted = config.connections.max_connections as u64;
    let Some((mut soft, hard)) = limits() else { return Ok((wanted as usize, None)) };
    let need = wanted + RESERVED;
    if soft < need {
        let target = need.min(hard);
        if !raise || raise_soft(target, hard) {
            soft = soft.max(target);
        }
    }
    if soft >= need {
        return Ok((wanted as usize, None));
    }
    let kept = RESERVED.min(soft / 2);
    let fit = (soft - kept).max(1);
    Ok((
        fit as usize,
        Some(format!(
            "daemon.max_connections = {wanted} lowered to {fit}: the descriptor limit is {soft} (hard {hard}; ulimit -n, or LimitNOFILE= in the systemd unit) and {kept} are kept for files and the status port; raise the limit to at least {need} for {wanted}"
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_fits_the_limit_or_says_why() {
        let (soft, _) = limits().unwrap();
        let mut c = DaemonConfig::default();
        // Far more than any limit: lowered to what fits, or refused where nothing does.
        c.connections.max_connections = (soft as usize).saturating_mul(4).max(1 << 20);
        let hard = limits().unwrap().1;
        match connections_allowed(&c, false).unwrap() {
            (n, Some(w)) => assert!((n as u64) < hard && w.contains("lowered to") && w.contains("raise the limit"), "{n} {w}"),
            (n, None) => panic!("{n} connections allowed without a word"),
        }
        // A few always fit an ordinary limit.
        c.connections.max_connections = 8;
        if soft >= 8 + RESERVED {
            assert_eq!(connections_allowed(&c, false).unwrap(), (8, None));
        }
    }
}
