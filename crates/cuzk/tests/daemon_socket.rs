//! `cuzk daemon` on a unix socket, as a careless operator meets it (issue 26): a second
//! daemon started by mistake, a path that names a regular file, a rolling restart, a
//! missing directory, the socket's mode.
#![cfg(unix)]

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A `cuzk daemon` process, killed when dropped.
struct Daemon(Option<Child>);

impl Daemon {
    fn start(config: &Path) -> Daemon {
        let child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["daemon", "--config", config.to_str().unwrap()])
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start cuzk daemon");
        Daemon(Some(child))
    }

    /// SIGTERM, then its output once it has exited.
    fn stop(mut self) -> Output {
        let child = self.0.take().unwrap();
        assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
        child.wait_with_output().unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn config(dir: &Path, sock: &Path, extra: &str) -> std::path::PathBuf {
    let cfg = dir.join(format!("cuzk-{}.toml", rand_suffix()));
    std::fs::write(&cfg, format!("[daemon]\nlisten = \"unix://{}\"\n{extra}\n[memory]\ntotal_budget = \"1GiB\"\n", sock.display())).unwrap();
    cfg
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// Waits until a daemon answers on `sock`.
fn wait_listening(sock: &Path) {
    let until = Instant::now() + Duration::from_secs(180);
    while UnixStream::connect(sock).is_err() {
        assert!(Instant::now() < until, "no daemon answers on {}", sock.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a daemon that is expected to refuse to start; its output.
fn refused(config: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_cuzk")).args(["daemon", "--config", config.to_str().unwrap()]).env("RUST_LOG", "info").output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "the daemon started: {text}");
    text
}

fn inode(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).unwrap().ino()
}

#[test]
fn a_second_daemon_on_a_live_socket_is_refused_and_the_first_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("cuzk.sock");
    let first = Daemon::start(&config(dir.path(), &sock, ""));
    wait_listening(&sock);
    let before = inode(&sock);
    let out = refused(&config(dir.path(), &sock, ""));
    assert!(out.contains("already listening"), "{out}");
    assert_eq!(inode(&sock), before, "the live daemon's socket was replaced");
    assert!(UnixStream::connect(&sock).is_ok(), "the first daemon is unreachable");
    let o = first.stop();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!sock.exists(), "the first daemon left its socket behind");
}

#[test]
fn a_path_that_is_not_a_socket_is_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("precious.txt");
    std::fs::write(&file, "keep me").unwrap();
    let out = refused(&config(dir.path(), &file, ""));
    assert!(out.contains("is not a socket") && out.contains("regular file"), "{out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    let sub = dir.path().join("a-directory");
    std::fs::create_dir(&sub).unwrap();
    let out = refused(&config(dir.path(), &sub, ""));
    assert!(out.contains("is not a socket") && out.contains("directory"), "{out}");
    assert!(sub.is_dir());
}

#[test]
fn a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("cuzk.sock");
    // Bound and closed: the file stays, nobody listens.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists() && UnixStream::connect(&sock).is_err());
    let d = Daemon::start(&config(dir.path(), &sock, ""));
    wait_listening(&sock);
    let o = d.stop();
    assert!(String::from_utf8_lossy(&o.stderr).contains("stale socket"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn in_a_rolling_restart_the_old_daemon_leaves_the_new_ones_socket() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("cuzk.sock");
    let old = Daemon::start(&config(dir.path(), &sock, ""));
    wait_listening(&sock);
    // The new daemon takes over the path (the old socket moved out of its way).
    std::fs::rename(&sock, dir.path().join("old.sock")).unwrap();
    let new = Daemon::start(&config(dir.path(), &sock, ""));
    wait_listening(&sock);
    let new_inode = inode(&sock);
    let o = old.stop();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("left in place"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(inode(&sock), new_inode, "the old daemon removed the new one's socket");
    assert!(UnixStream::connect(&sock).is_ok(), "the new daemon is unreachable");
    let o = new.stop();
    assert!(o.status.success());
    assert!(!sock.exists());
}

#[test]
fn the_directory_is_created_and_the_mode_and_group_are_set() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("run/curio/cuzk.sock");
    let d = Daemon::start(&config(dir.path(), &sock, ""));
    wait_listening(&sock);
    let m = std::fs::symlink_metadata(&sock).unwrap();
    assert!(m.file_type().is_socket());
    assert_eq!(m.permissions().mode() & 0o7777, 0o660, "the default daemon.socket_mode");
    drop(d);

    let sock = dir.path().join("other/cuzk.sock");
    let gid = std::fs::metadata(dir.path()).unwrap().gid();
    let d = Daemon::start(&config(dir.path(), &sock, &format!("socket_mode = \"0600\"\nsocket_group = \"{gid}\"")));
    wait_listening(&sock);
    let m = std::fs::symlink_metadata(&sock).unwrap();
    assert_eq!((m.permissions().mode() & 0o7777, m.gid()), (0o600, gid));
    drop(d);

    let out = refused(&config(dir.path(), &dir.path().join("third.sock"), "socket_group = \"no-such-group-cuzk\""));
    assert!(out.contains("daemon.socket_group") && out.contains("no-such-group-cuzk"), "{out}");
}

/// The independent Python client (grpcio, stubs generated from the .proto, no
/// `grpc.default_authority` override) over the unix socket, where C-core sends the
/// socket's path as :authority, and over TCP: every check of scripts/python-client
/// passes both times. Needs python3 with venv; its packages are installed once into the
/// user's cache directory (keyed by requirements.txt).
#[test]
fn the_python_grpcio_client_works_over_the_unix_socket_and_tcp() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o =
        Command::new("bash").arg(root.join("scripts/python-client/run.sh")).arg(env!("CARGO_BIN_EXE_cuzk")).output().expect("run the Python client");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{text}");
    assert_eq!(text.matches("all checks passed").count(), 2, "{text}");
    assert!(text.contains("== unix://") && text.contains("== 127.0.0.1:"), "{text}");
}
