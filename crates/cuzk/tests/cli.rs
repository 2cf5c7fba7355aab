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
}
