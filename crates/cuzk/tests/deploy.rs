//! What a storage provider deploys, checked against the real binary: the Grafana
//! dashboard's and the alert rules' metric names against a running daemon's /metrics,
//! the systemd unit with `systemd-analyze verify`, the example configuration through
//! `cuzk daemon --check-config`, and `cuzk params check`'s verdicts on a directory of
//! good, cut, damaged and timing files.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use cuzk_filecoin::Circuit;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cuzk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuzk")).args(args).env("RUST_LOG", "warn").env_remove("FIL_PROOFS_PARAMETER_CACHE").output().expect("run cuzk")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every `cuzk_…` metric name a text mentions.
fn names_in(text: &str) -> BTreeSet<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("cuzk_") {
        let before_ok = rest[..i].chars().next_back().map_or(true, |c| !is_ident(c));
        let tail = &rest[i..];
        let end = tail.find(|c: char| !is_ident(c)).unwrap_or(tail.len());
        if before_ok {
            out.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    out
}

/// The names a Prometheus text exposition exports: every sample's, and every family's
/// from its TYPE line (a histogram `x` has samples `x_bucket`, `x_sum`, `x_count`).
fn exported(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for l in metrics.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            names.extend(t.split_whitespace().next().map(String::from));
        } else if !l.starts_with('#') {
            names.insert(l[..l.find(['{', ' ']).unwrap_or(l.len())].to_string());
        }
    }
    names
}

/// A `cuzk daemon` process, killed when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cuzk daemon --config <config>` and returns it with the status endpoint's
/// address, read from its log.
fn start_daemon(config: &Path) -> (Daemon, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["daemon", "--config", s(config)])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start cuzk daemon");
    let stderr = child.stderr.take().unwrap();
    let daemon = Daemon(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    loop {
        let line = rx.recv_timeout(Duration::from_secs(120)).unwrap_or_else(|e| panic!("no status endpoint in the daemon's log ({e}):\n{seen}"));
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("HTTP status endpoint listening") {
            let addr = line.split("address=").nth(1).and_then(|a| a.split_whitespace().next()).expect("address in the log line");
            return (daemon, addr.to_string());
        }
    }
}

fn http_get(addr: &str, path: &str) -> String {
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(sock, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut reply = String::new();
    sock.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

#[test]
fn the_dashboard_and_the_alerts_name_only_metrics_the_daemon_exports() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("params")).unwrap();
    let config = dir.path().join("cuzk.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nlisten = \"unix://{}\"\nstatus_listen = \"127.0.0.1:0\"\n[srs]\nparam_cache = \"{}\"\n[memory]\ntotal_budget = \"2GiB\"\n[gpus]\ngpu_threads = 2\n",
            s(&dir.path().join("cuzk.sock")),
            s(&dir.path().join("params"))
        ),
    )
    .unwrap();
    let (_daemon, addr) = start_daemon(&config);
    let metrics = http_get(&addr, "/metrics");
    let have = exported(&metrics);
    assert!(have.contains("cuzk_uptime_seconds"), "{metrics}");

    let dashboard_text = std::fs::read_to_string(repo().join("deploy/grafana/cuzk-dashboard.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard_text).expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut exprs = Vec::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().expect("panel id")), "duplicate panel id {}", p["id"]);
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "panel {}", p["title"]);
        let targets = p["targets"].as_array().unwrap_or_else(|| panic!("panel {} has no targets", p["title"]));
        assert!(!targets.is_empty(), "panel {}", p["title"]);
        for t in targets {
            let e = t["expr"].as_str().unwrap_or_else(|| panic!("panel {}: a target without expr", p["title"]));
            assert!(!names_in(e).is_empty(), "panel {}: {e} names no cuzk metric", p["title"]);
            exprs.push(e.to_string());
        }
    }
    assert!(exprs.len() >= 15, "{} queries", exprs.len());
    let in_dashboard = names_in(&dashboard_text);
    // What the issue asks the dashboard to show.
    for wanted in [
        "cuzk_queue_pending_partitions",
        "cuzk_proofs_completed_total",
        "cuzk_proofs_failed_total",
        "cuzk_partition_synthesis_seconds_bucket",
        "cuzk_partition_prove_seconds_bucket",
        "cuzk_gpu_busy_ratio",
        "cuzk_memory_used_bytes",
        "cuzk_memory_budget_bytes",
    ] {
        assert!(in_dashboard.contains(wanted), "the dashboard does not show {wanted}");
    }
    let missing: Vec<&String> = in_dashboard.difference(&have).collect();
    assert!(missing.is_empty(), "the dashboard names metrics the daemon does not export: {missing:?}\n{metrics}");

    let alerts_path = repo().join("deploy/prometheus/cuzk-alerts.yml");
    let alerts = std::fs::read_to_string(&alerts_path).unwrap();
    let in_alerts = names_in(&alerts);
    assert!(in_alerts.len() >= 6, "{in_alerts:?}");
    let missing: Vec<&String> = in_alerts.difference(&have).collect();
    assert!(missing.is_empty(), "the alert rules name metrics the daemon does not export: {missing:?}");
    let rules = alerts.matches("- alert: ").count();
    assert!(rules >= 5, "{rules} alert rules");
    assert_eq!(alerts.matches("\n        expr: ").count(), rules, "every rule has an expr");
    assert_eq!(alerts.matches("\n          severity: ").count(), rules, "every rule has a severity");
    assert_eq!(alerts.matches("\n          summary: ").count(), rules, "every rule has a summary");
    match Command::new("promtool").arg("--version").output() {
        Ok(_) => {
            let o = Command::new("promtool").arg("check").arg("rules").arg(&alerts_path).output().unwrap();
            assert!(o.status.success(), "promtool check rules: {}", text(&o));
            // The dashboard's queries as recording rules, Grafana's variables replaced:
            // promtool parses each one.
            let rules: String = exprs
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let e = e.replace("$__rate_interval", "5m").replace("$instance", ".*");
                    format!("      - record: cuzk_dashboard_query_{i}\n        expr: {}\n", serde_json::to_string(&e).unwrap())
                })
                .collect();
            let file = dir.path().join("dashboard-queries.yml");
            std::fs::write(&file, format!("groups:\n  - name: dashboard\n    rules:\n{rules}")).unwrap();
            let o = Command::new("promtool").arg("check").arg("rules").arg(&file).output().unwrap();
            assert!(o.status.success(), "the dashboard's queries: {}", text(&o));
        }
        Err(e) => eprintln!(
            "skipped: promtool check rules ({e}; the prometheus package provides it); the rules' structure and every metric name were checked"
        ),
    }
}

#[test]
fn the_systemd_unit_verifies() {
    let unit = std::fs::read_to_string(repo().join("deploy/systemd/cuzk.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/cuzk daemon --config /etc/cuzk/cuzk.toml"), "the path scripts/install.sh substitutes");
    let Ok(version) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("skipped: systemd-analyze is not installed (apt-get install systemd provides it)");
        return;
    };
    assert!(version.status.success());
    // verify checks that ExecStart's program exists: the binary under test stands in.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cuzk.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/cuzk", env!("CARGO_BIN_EXE_cuzk"))).unwrap();
    let o = Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap();
    // Unknown keys and invalid values are warnings on stderr with a zero exit status.
    let ours: Vec<&str> = std::str::from_utf8(&o.stderr).unwrap().lines().filter(|l| l.contains("cuzk.service")).collect();
    assert!(o.status.success() && ours.is_empty(), "systemd-analyze verify: {}", text(&o));
}

#[test]
fn check_config_passes_the_example_and_prints_the_effective_settings() {
    let example = repo().join("cuzk.example.toml");
    let o = cuzk(&["daemon", "--config", s(&example), "--check-config"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "[daemon]",
        "listen = \"unix:///run/curio/cuzk.sock\"",
        "param_cache = \"/data/zk/params\"  # the default",
        "total_budget = \"auto\"",
        "configuration OK",
    ] {
        assert!(out.contains(needle), "{needle:?} not in:\n{out}");
    }
    // srs.param_cache defaults to FIL_PROOFS_PARAMETER_CACHE when the file names none.
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["daemon", "--config", s(&example), "--check-config"])
        .env("FIL_PROOFS_PARAMETER_CACHE", dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(&format!("param_cache = \"{}\"  # from FIL_PROOFS_PARAMETER_CACHE", s(dir.path()))), "{}", text(&o));

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[memory]\ntotal_budget = \"lots\"\n").unwrap();
    let o = cuzk(&["daemon", "--config", s(&bad), "--check-config"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("memory.total_budget"), "{}", text(&o));

    // A circuit to preload whose files are not there: the start would not load it.
    let preload = dir.path().join("preload.toml");
    std::fs::write(&preload, format!("[srs]\nparam_cache = \"{}\"\npreload = [\"wpost-2k\"]\n", s(dir.path()))).unwrap();
    let o = cuzk(&["daemon", "--config", s(&preload), "--check-config"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("srs.preload: parameter files of wpost-2k are not usable") && text(&o).contains(": missing"), "{}", text(&o));
}

/// One line of `cuzk params check`: (verdict, circuit id, file name).
fn verdicts(out: &str) -> BTreeSet<(String, String, String)> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (v, c, n) = (f.next()?, f.next()?, f.next()?);
            Circuit::from_id(c).map(|_| (v.to_string(), c.to_string(), n.trim_end_matches(':').to_string()))
        })
        .collect()
}

#[test]
fn params_check_tells_good_cut_damaged_timing_and_missing_files_apart() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    std::fs::create_dir(&made).unwrap();
    let (good, timing) = (made.join("good.params"), made.join("timing.params"));
    for (out, timing_flag) in [(&good, false), (&timing, true)] {
        let mut args = vec!["setup", "--log-size", "7", "--seed", "3", "--backend", "cpu", "--out", s(out)];
        if timing_flag {
            args.push("--timing-params");
        }
        let o = cuzk(&args);
        assert!(o.status.success(), "{}", text(&o));
    }
    let params = dir.path().join("params");
    std::fs::create_dir(&params).unwrap();
    let id = |id: &str| Circuit::from_id(id).unwrap();
    let name = |p: PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    let bytes = std::fs::read(&good).unwrap();
    let place = |c: &str, params_bytes: &[u8], vk: &Path| {
        std::fs::write(id(c).params_path(&params).unwrap(), params_bytes).unwrap();
        std::fs::copy(vk, id(c).vk_path(&params).unwrap()).unwrap();
    };
    place("winning-2k", &bytes, &good.with_extension("vk"));
    place("wpost-2k", &bytes[..bytes.len() - 10], &good.with_extension("vk"));
    let mut damaged = bytes.clone();
    let at = damaged.len() - 500;
    damaged[at] ^= 0x04;
    place("snap-2k", &damaged, &good.with_extension("vk"));
    place("porep-2k", &std::fs::read(&timing).unwrap(), &timing.with_extension("vk"));

    // Digest entries for the files of our own setup, as parameters.json lists them.
    let o = cuzk(&["params", "digest", s(&good), s(&good.with_extension("vk"))]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let digests: Vec<&str> = out.lines().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(digests.len(), 2);
    assert!(digests.iter().all(|d| d.len() == 32 && d.bytes().all(|b| b.is_ascii_hexdigit())), "{out}");
    let mut entries = Vec::new();
    for c in ["winning-2k", "wpost-2k", "snap-2k", "porep-2k"] {
        entries.push(format!(r#""{}": {{"cid": "", "digest": "{}", "sector_size": 2048}}"#, name(id(c).params_path(&params).unwrap()), digests[0]));
        entries.push(format!(r#""{}": {{"cid": "", "digest": "{}", "sector_size": 2048}}"#, name(id(c).vk_path(&params).unwrap()), digests[1]));
    }
    let table = dir.path().join("digests.json");
    std::fs::write(&table, format!("{{{}}}", entries.join(", "))).unwrap();

    let v = |word: &str, c: &str, vk: bool| {
        let p = if vk { id(c).vk_path(&params).unwrap() } else { id(c).params_path(&params).unwrap() };
        (word.to_string(), c.to_string(), name(p))
    };
    // Without --circuit: the circuits with files in the directory.
    let o = cuzk(&["params", "check", "--dir", s(&params), "--digests", s(&table)]);
    assert!(!o.status.success(), "bad files must fail the check: {}", text(&o));
    let found = verdicts(&String::from_utf8_lossy(&o.stdout));
    let expected: BTreeSet<_> = [
        v("ok", "winning-2k", false),
        v("ok", "winning-2k", true),
        v("truncated", "wpost-2k", false),
        v("ok", "wpost-2k", true),
        v("corrupt", "snap-2k", false),
        v("ok", "snap-2k", true),
        v("timing", "porep-2k", false),
        v("timing", "porep-2k", true),
    ]
    .into_iter()
    .collect();
    assert_eq!(found, expected, "{}", text(&o));
    let all = text(&o);
    assert!(all.contains("timing parameters (random points"), "{all}");
    assert!(all.contains("content digest") && all.contains(&format!("published {}", digests[0])), "{all}");
    assert!(all.contains(&format!("at least {} in all", bytes.len())), "{all}");

    // The header check alone cannot see the changed byte; a missing circuit is named.
    let o = cuzk(&["params", "check", "--dir", s(&params), "--quick", "--circuit", "snap-2k,winning-8m"]);
    assert!(!o.status.success());
    let found = verdicts(&String::from_utf8_lossy(&o.stdout));
    let expected: BTreeSet<_> =
        [v("complete", "snap-2k", false), v("complete", "snap-2k", true), v("missing", "winning-8m", false), v("missing", "winning-8m", true)]
            .into_iter()
            .collect();
    assert_eq!(found, expected, "{}", text(&o));

    // Only good files: success. Without our digest entries the same files are checked
    // against the published ones, whose names they carry: corrupt.
    let o = cuzk(&["params", "check", "--dir", s(&params), "--digests", s(&table), "--circuit", "winning-2k"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = cuzk(&["params", "check", "--dir", s(&params), "--circuit", "winning-2k"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(
        verdicts(&String::from_utf8_lossy(&o.stdout)),
        [v("corrupt", "winning-2k", false), v("corrupt", "winning-2k", true)].into_iter().collect()
    );
}
