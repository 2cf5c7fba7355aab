//! The `cuzk` binary end to end: setup → prove → verify, and its errors.

use std::path::Path;
use std::process::{Command, Output};

fn cuzk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuzk")).args(args).env("RUST_LOG", "warn").output().expect("run cuzk")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn setup_prove_verify_and_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("c.params");
    let proof = dir.path().join("p.bin");
    let o = cuzk(&["setup", "--log-size", "9", "--seed", "7", "--out", s(&params)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(params.with_extension("vk").exists());

    let o = cuzk(&["prove", "--log-size", "9", "--params", s(&params), "--witness-seed", "3", "--out", s(&proof)]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read(&proof).unwrap().len(), 192);

    let vk = params.with_extension("vk");
    let o = cuzk(&["verify", "--vk", s(&vk), "--proof", s(&proof)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("proof is valid"));

    // A changed public input: rejected.
    let inputs = dir.path().join("p.bin.inputs");
    let mut lines: Vec<String> = std::fs::read_to_string(&inputs).unwrap().lines().map(String::from).collect();
    lines[0] = format!("{}{}", if lines[0].starts_with('0') { "1" } else { "0" }, &lines[0][1..]);
    let wrong = dir.path().join("wrong.inputs");
    std::fs::write(&wrong, lines.join("\n")).unwrap();
    let o = cuzk(&["verify", "--vk", s(&vk), "--proof", s(&proof), "--inputs", s(&wrong)]);
    assert!(!o.status.success());
    assert!(text(&o).contains("NOT valid"), "{}", text(&o));

    // A damaged proof file: a clear decoding error.
    let mut bytes = std::fs::read(&proof).unwrap();
    bytes.truncate(100);
    let bad = dir.path().join("bad.bin");
    std::fs::write(&bad, &bytes).unwrap();
    let o = cuzk(&["verify", "--vk", s(&vk), "--proof", s(&bad), "--inputs", s(&inputs)]);
    assert!(!o.status.success());
    assert!(text(&o).contains("length 100"), "{}", text(&o));

    // Parameters for another circuit size: refused before proving.
    let o = cuzk(&["prove", "--log-size", "10", "--params", s(&params), "--out", s(&dir.path().join("x"))]);
    assert!(!o.status.success());
    assert!(text(&o).contains("does not match the circuit"), "{}", text(&o));

    // A truncated parameter file: the error names the section.
    let all = std::fs::read(&params).unwrap();
    let cut = dir.path().join("cut.params");
    std::fs::write(&cut, &all[..all.len() - 10]).unwrap();
    let o = cuzk(&["prove", "--log-size", "9", "--params", s(&cut), "--out", s(&dir.path().join("y"))]);
    assert!(!o.status.success());
    assert!(text(&o).contains("truncated in section b_g2"), "{}", text(&o));
}

#[test]
fn demo_runs_and_verifies() {
    let o = cuzk(&["demo", "--log-size", "10"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("verified: OK"));
}

#[test]
fn bad_arguments_are_reported() {
    let o = cuzk(&["demo", "--log-size", "30"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("larger than a C2 partition"), "{}", text(&o));
    let o = cuzk(&["bench", "--log-size", "8", "--b-density", "1.5"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--b-density"), "{}", text(&o));
    // An address without its scheme is told the scheme, not that the client is TCP only.
    let o = cuzk(&["submit", "--to", "127.0.0.1:9", "--synthetic", "{}"]);
    assert!(!o.status.success() && text(&o).contains("needs its scheme: --to http://127.0.0.1:9"), "{}", text(&o));
    // --verify checks a request folder's proofs: with a synthetic payload it is refused.
    let o = cuzk(&["submit", "--synthetic", "{}", "--verify"]);
    assert!(!o.status.success() && text(&o).contains("--request"), "{}", text(&o));
}

#[test]
fn daemon_refuses_a_bad_configuration_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cuzk.toml");
    std::fs::write(&cfg, "[memory]\ntotal_budget = \"plenty\"\n").unwrap();
    let o = cuzk(&["daemon", "--config", s(&cfg)]);
    assert!(!o.status.success());
    assert!(text(&o).contains("memory.total_budget"), "{}", text(&o));
    let o = cuzk(&["daemon", "--listen", "not-an-address"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--listen"), "{}", text(&o));
}

#[cfg(unix)]
#[test]
fn daemon_serves_on_a_unix_socket_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("cuzk.sock");
    let cfg = dir.path().join("cuzk.toml");
    std::fs::write(&cfg, format!("[daemon]\nlisten = \"unix://{}\"\n[memory]\ntotal_budget = \"1GiB\"\n[gpu]\nold = 1\n", s(&sock))).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["daemon", "--config", s(&cfg)])
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until the socket is there (3 minutes at most: a loaded 2-core machine).
    for _ in 0..3600 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(sock.exists(), "the daemon did not create its socket");
    let k = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(k.success());
    let o = child.wait_with_output().unwrap();
    let log = text(&o);
    assert!(o.status.success(), "{log}");
    assert!(log.contains("gpu.old: unknown key"), "{log}");
    assert!(log.contains("cuzk daemon stopped"), "{log}");
    assert!(!sock.exists(), "the socket file was left behind");
}

#[test]
fn timeline_renders_a_trace_and_a_gantt_chart() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("run.jsonl");
    let lines = [
        r#"{"t_us":0,"job":"j1","kind":"queued","lane":""}"#,
        r#"{"t_us":0,"job":"j1","partition":0,"kind":"synthesis_start","lane":"synth-0"}"#,
        r#"{"t_us":250000,"job":"j1","partition":0,"kind":"synthesis_end","lane":"synth-0"}"#,
        r#"{"t_us":250000,"job":"j1","partition":0,"kind":"prove_start","lane":"prove-0.0"}"#,
        r#"{"t_us":1000000,"job":"j1","partition":0,"kind":"prove_end","lane":"prove-0.0"}"#,
        r#"{"t_us":1000000,"job":"j1","partition":0,"kind":"verified","lane":"prove-0.0"}"#,
        r#"{"t_us":1000000,"job":"j1","kind":"completed","lane":""}"#,
    ];
    std::fs::write(&events, lines.join("\n")).unwrap();
    let (trace, svg) = (dir.path().join("t.json"), dir.path().join("g.svg"));
    let o = cuzk(&["timeline", s(&events), "--trace", s(&trace), "--svg", s(&svg)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("GPU efficiency 75.0 %"), "{}", text(&o));
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    assert_eq!(t["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").count(), 2);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("prove-0.0"));
    std::fs::write(&events, "{\"nope\": 1}\n").unwrap();
    let o = cuzk(&["timeline", s(&events)]);
    assert!(!o.status.success() && text(&o).contains("line 1: not a timeline event"), "{}", text(&o));
}

#[test]
fn fixture_valid_writes_inputs_that_verify_and_shape_true_ones_that_do_not() {
    use cuzk_filecoin::request_files::RequestFiles;
    use cuzk_filecoin::{InputChecks, SectorSize};
    let dir = tempfile::tempdir().unwrap();
    for kind in ["porep", "snap", "window-post", "winning-post"] {
        let out = dir.path().join(kind);
        let o = cuzk(&["fixture", kind, "--sector-size", "2KiB", "--valid", "--seed", "3", "--out", s(&out)]);
        assert!(o.status.success(), "{kind}: {}", text(&o));
        assert!(text(&o).contains("vanilla proofs verified in"), "{kind}: {}", text(&o));
        let r = RequestFiles::read(&out).unwrap();
        r.decode(InputChecks::Full).unwrap_or_else(|e| panic!("{kind}: the written input does not verify: {e}"));
        assert_eq!(r, r.kind().valid_request(SectorSize::S2KiB, 3).unwrap(), "{kind}: written as made");

        let shaped = dir.path().join(format!("{kind}-shape-true"));
        let o = cuzk(&["fixture", kind, "--sector-size", "2KiB", "--out", s(&shaped)]);
        assert!(o.status.success() && text(&o).contains("do not verify"), "{kind}: {}", text(&o));
        assert!(RequestFiles::read(&shaped).unwrap().decode(InputChecks::Full).is_err(), "{kind}: a shape-true input verified");
    }
}

/// `cuzk selftest` at 2 KiB for every kind with cached parameters of our own (the 2 KiB
/// fixtures'): each sector proved as the daemon would (on the CPU here), its proof
/// accepted by filecoin-proofs' verifier, refused with one public input changed and for
/// another sector. A directory
/// without the files, or with timing parameters, is refused naming what is wrong; one
/// with parameters `cuzk setup --circuit` made passes.
#[test]
fn selftest_proves_every_kind_at_2_kib_and_refuses_unusable_parameters() {
    let f = cuzk_filecoin::fixtures::fixtures_2k().expect("2 KiB fixtures");
    let circuits = ["porep-2k", "snap-2k", "wpost-2k", "winning-2k"];
    // Compiled matrices ("auto" compiles them in the background) kept out of the shared
    // fixture cache, whose manifest would no longer match.
    let matrices = tempfile::tempdir().unwrap();
    let config = matrices.path().join("cuzk.toml");
    std::fs::write(&config, format!("[synthesis]\nmatrices_dir = \"{}\"\n", s(matrices.path()))).unwrap();
    let mut args = vec!["selftest", "--config", s(&config), "--param-dir", s(&f.param_dir)];
    for c in circuits {
        args.extend(["--circuit", c]);
    }
    let o = cuzk(&args);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for c in circuits {
        let line = out.lines().find(|l| l.starts_with(&format!("{c}: PASS"))).unwrap_or_else(|| panic!("{c}: no PASS line in {out}"));
        assert!(
            line.contains("accepted by filecoin-proofs' verifier and refused with") && line.contains("changed, and refused for another sector"),
            "{line}"
        );
    }
    assert!(out.contains("selftest passed: 4 circuit(s)"), "{out}");

    let empty = tempfile::tempdir().unwrap();
    let o = cuzk(&["selftest", "--circuit", "porep-2k", "--param-dir", s(empty.path())]);
    let out = text(&o);
    assert!(!o.status.success() && out.contains("missing") && out.contains(".params") && out.contains(".vk"), "{out}");
    assert!(!out.contains("PASS"), "{out}");

    let timing = tempfile::tempdir().unwrap();
    let o = cuzk(&["setup", "--circuit", "winning-2k", "--timing-params", "--out", s(timing.path())]);
    assert!(o.status.success(), "{}", text(&o));
    let o = cuzk(&["selftest", "--circuit", "winning-2k", "--param-dir", s(timing.path())]);
    let out = text(&o);
    assert!(!o.status.success() && out.contains("timing") && !out.contains("PASS"), "{out}");

    // A real setup of our own (`cuzk setup --circuit`: from the circuit's compiled
    // matrices, written a batch of points at a time), then the selftest with it.
    let own = tempfile::tempdir().unwrap();
    let o = cuzk(&["setup", "--circuit", "winning-2k", "--backend", "cpu", "--seed", "9", "--out", s(own.path())]);
    let out = text(&o);
    assert!(o.status.success() && out.contains("a real setup from them"), "{out}");
    let o = cuzk(&["selftest", "--circuit", "winning-2k", "--param-dir", s(own.path())]);
    let out = text(&o);
    assert!(o.status.success() && out.contains("winning-2k: PASS"), "{out}");
    // Never mistaken for the published files: the check names them as our own.
    let o = cuzk(&["params", "check", "--dir", s(own.path()), "--circuit", "winning-2k"]);
    let out = text(&o);
    assert!(o.status.success() && out.contains("2 our own setup's") && out.contains("never on chain"), "{out}");
}

/// `--check-config` refuses what a start refuses, with the same message: a listener
/// on every interface without a token, a token file that is missing or too short, a
/// world-writable socket, an unusable state directory or socket, settings that refuse
/// every job; and passes what a start accepts (0777 with allow_insecure, with a
/// warning; timing-only, with a warning).
#[test]
fn check_config_refuses_what_a_start_refuses_with_the_same_message() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short-token");
    std::fs::write(&short, "0123456789").unwrap();
    let sock = dir.path().join("run/cuzk.sock");
    let base = format!("[srs]\nparam_cache = \"{}\"\n[daemon]\n", s(dir.path()));
    let cases = [
        ("0.0.0.0 without a token", "listen = \"0.0.0.0:19820\"\n".to_string(), "reachable from other machines"),
        ("a missing token file", format!("listen = \"127.0.0.1:19821\"\nauth_token_file = \"{}/nope\"\n", s(dir.path())), "daemon.auth_token_file"),
        ("a 10-byte token", format!("listen = \"127.0.0.1:19822\"\nauth_token_file = \"{}\"\n", s(&short)), "the token has 10 bytes"),
        ("a world-writable socket", format!("listen = \"unix://{}\"\nsocket_mode = \"0777\"\n", s(&sock)), "daemon.socket_mode 0o777"),
        // What a start failed on while the check said OK (hardening, third pass).
        ("a state_dir that is a file", format!("listen = \"127.0.0.1:19823\"\nstate_dir = \"{}\"\n", s(&short)), "is not a directory"),
        ("a state_dir under /proc", "listen = \"127.0.0.1:19824\"\nstate_dir = \"/proc/cuzk-state\"\n".to_string(), "cannot be made"),
        ("a socket path over 107 bytes", format!("listen = \"unix:///run/{}/cuzk.sock\"\n", "d".repeat(100)), "holds at most 107"),
        ("an unknown socket_group", format!("listen = \"unix://{}\"\nsocket_group = \"no-such-group-cuzk\"\n", s(&sock)), "no such group"),
        ("status_listen on the gRPC port", "listen = \"127.0.0.1:19825\"\nstatus_listen = \"127.0.0.1:19825\"\n".to_string(), "a port of its own"),
        ("100000 workers per GPU", "listen = \"127.0.0.1:19826\"\n[gpus]\ngpu_workers_per_device = 100000\n".to_string(), "within 1..=16"),
        // Settings that would refuse every job, or promise memory the host lacks.
        ("a 1-byte budget", "listen = \"127.0.0.1:19827\"\n[memory]\ntotal_budget = \"1\"\n".to_string(), "no job would ever be admitted"),
        (
            "a budget beyond the host",
            "listen = \"127.0.0.1:19828\"\n[memory]\ntotal_budget = \"100TiB\"\n".to_string(),
            "more than this process may use",
        ),
        ("no queued jobs", "listen = \"127.0.0.1:19829\"\n[admission]\nmax_queued_jobs = 0\n".to_string(), "must be at least 1"),
        (
            "no queued request bytes",
            "listen = \"127.0.0.1:19830\"\n[admission]\nmax_queued_request_bytes = \"0\"\n".to_string(),
            "at least one largest request",
        ),
        ("a log level typo", "listen = \"127.0.0.1:19831\"\n[logging]\nlevel = \"verbose\"\n".to_string(), "is not a log level"),
    ];
    for (what, daemon, needle) in cases {
        let cfg = dir.path().join("cuzk.toml");
        std::fs::write(&cfg, format!("{base}{daemon}")).unwrap();
        let check = cuzk(&["daemon", "--config", s(&cfg), "--check-config"]);
        assert!(!check.status.success() && text(&check).contains(needle), "{what}: --check-config said {}", text(&check));
        assert!(!text(&check).contains("configuration OK"), "{what}");
        let start = cuzk(&["daemon", "--config", s(&cfg)]);
        assert!(!start.status.success() && text(&start).contains(needle), "{what}: the start said {}", text(&start));
        // The same message: the line naming the problem appears in both.
        let line = text(&start).lines().find(|l| l.contains(needle)).unwrap().to_string();
        let message = line.split_once(needle).map(|(_, rest)| format!("{needle}{rest}")).unwrap();
        assert!(text(&check).contains(&message), "{what}: {message} not in {}", text(&check));
    }
    let cfg = dir.path().join("cuzk.toml");
    std::fs::write(&cfg, format!("{base}listen = \"unix://{}\"\nsocket_mode = \"0777\"\nallow_insecure = true\n", s(&sock))).unwrap();
    let check = cuzk(&["daemon", "--config", s(&cfg), "--check-config"]);
    assert!(check.status.success() && text(&check).contains("INSECURE: daemon.socket_mode 0o777"), "{}", text(&check));
    std::fs::write(&cfg, format!("{base}listen = \"127.0.0.1:19832\"\ntiming_only = true\n")).unwrap();
    let check = cuzk(&["daemon", "--config", s(&cfg), "--check-config"]);
    assert!(check.status.success() && text(&check).contains("warning: daemon.timing_only = true"), "{}", text(&check));
}

/// CPU seconds a process has used (utime + stime from /proc, in clock ticks of 1/100 s).
#[cfg(target_os = "linux")]
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    (f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()) as f64 / 100.0
}

/// The status port out of descriptors (the daemon's limit lowered to 48): its accept
/// loop backs off instead of spinning (bounded CPU while 150 idle connections hold
/// every descriptor), says so in the log, and serves again once they go.
#[cfg(target_os = "linux")]
#[test]
fn the_status_port_backs_off_when_out_of_descriptors() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = dir.path().join("cuzk.toml");
    std::fs::write(
        &cfg,
        format!(
            "[srs]\nparam_cache = \"{d}\"\n[daemon]\nlisten = \"unix://{d}/cuzk.sock\"\nstatus_listen = \"127.0.0.1:{port}\"\n",
            d = s(dir.path())
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n 48 && exec {} daemon --config {}", env!("CARGO_BIN_EXE_cuzk"), s(&cfg)))
        .env("RUST_LOG", "warn")
        .stderr(log.try_clone().unwrap())
        .stdout(log)
        .spawn()
        .unwrap();
    let get = || -> Option<String> {
        let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
        c.set_read_timeout(Some(std::time::Duration::from_secs(2))).ok()?;
        c.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
        let mut out = String::new();
        c.read_to_string(&mut out).ok()?;
        out.starts_with("HTTP/1.1 200").then_some(out)
    };
    let started = std::time::Instant::now();
    while get().is_none() {
        assert!(started.elapsed().as_secs() < 180, "the status port never answered");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Idle connections until the daemon has no descriptor left for the next ones.
    let flood: Vec<TcpStream> = (0..150).filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok()).collect();
    assert!(flood.len() > 100, "{} connections", flood.len());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = cpu_seconds(child.id());
    std::thread::sleep(std::time::Duration::from_secs(3));
    let used = cpu_seconds(child.id()) - before;
    assert!(used < 0.5, "{used:.2} s of CPU in 3 s at the descriptor limit: the accept loop spins");
    drop(flood);
    let freed = std::time::Instant::now();
    while get().is_none() {
        assert!(freed.elapsed().as_secs() < 15, "the status port did not serve again");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(log.contains("status endpoint: accepting a connection") && log.contains("backing off"), "{log}");
    eprintln!("{used:.2} s of CPU in 3 s at the descriptor limit; served again {:.2} s after", freed.elapsed().as_secs_f64());
}

/// A parameter directory that is a file, and a damaged record of our own setups, are
/// named as what they are (hardening, third pass).
#[test]
fn parameter_directory_problems_are_named_as_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("params-file");
    std::fs::write(&file, "").unwrap();
    let o = cuzk(&["params", "check", "--dir", s(&file), "--circuit", "winning-2k"]);
    assert!(!o.status.success() && text(&o).contains("is a file, not a directory") && !text(&o).contains("does not exist"), "{}", text(&o));
    let cfg = dir.path().join("cuzk.toml");
    std::fs::write(&cfg, format!("[daemon]\nlisten = \"127.0.0.1:19840\"\n[srs]\nparam_cache = \"{}\"\npreload = [\"winning-2k\"]\n", s(&file)))
        .unwrap();
    let o = cuzk(&["daemon", "--config", s(&cfg), "--check-config"]);
    assert!(!o.status.success() && text(&o).contains("is a file, not a directory"), "{}", text(&o));
    // A garbage record: named once, as the parameter directory's file it is.
    let params = dir.path().join("params");
    std::fs::create_dir(&params).unwrap();
    std::fs::write(params.join("cuzk-own-setups.json"), "garbage").unwrap();
    let o = cuzk(&["params", "check", "--dir", s(&params), "--circuit", "winning-2k"]);
    let t = text(&o);
    assert!(!o.status.success() && t.contains("cuzk-own-setups.json is damaged") && t.contains("restore it or remove it"), "{t}");
    assert!(!t.contains("invalid request"), "a parameter file is no request: {t}");
}
