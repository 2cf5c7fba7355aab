//! The daemon's unix socket, bound without harming anything at its path: a live
//! daemon's socket (refused, so a second `cuzk daemon` started by mistake cannot
//! take over), a regular file (never removed), or a newer daemon's socket at exit (a
//! rolling restart: the old daemon removes the path only while it is still its own
//! socket, same device and inode).

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How the socket file is made (TOML `daemon.socket_mode`, `daemon.socket_group`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketSettings {
    /// Permission bits of the socket file (the default 0660: its owner and group).
    pub mode: u32,
    /// Group the socket file is given (a name from /etc/group or a number); None
    /// keeps the daemon's own group.
    pub group: Option<String>,
}

impl Default for SocketSettings {
    fn default() -> Self {
        SocketSettings { mode: 0o660, group: None }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{path}: a daemon is already listening on this socket; stop it first or choose another daemon.listen")]
    InUse { path: PathBuf },
    #[error("{path} exists and is not a socket ({what}); not removed: choose another daemon.listen or move the file away")]
    NotASocket { path: PathBuf, what: &'static str },
    #[error("{path}: {doing}: {source}")]
    Io { path: PathBuf, doing: &'static str, source: std::io::Error },
    #[error("daemon.socket_group {group:?}: {why}")]
    Group { group: String, why: String },
}

fn io<'a>(path: &'a Path, doing: &'static str) -> impl FnOnce(std::io::Error) -> SocketError + 'a {
    move |source| SocketError::Io { path: path.to_path_buf(), doing, source }
}

/// The socket file a daemon bound: removed on drop only while the path still names it.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// (device, inode) of the socket right after bind.
    identity: (u64, u64),
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `path` still names the socket this daemon bound.
    pub fn still_ours(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.file_type().is_socket() && (m.dev(), m.ino()) == self.identity)
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if self.still_ours() {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), "removing the socket: {e}");
            }
        } else {
            tracing::info!(path = %self.path.display(), "the socket path names another file now (a newer daemon's socket?); left in place");
        }
    }
}

/// What a kind of file is called in an error.
fn file_kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Makes way for a socket at `path`: creates its parent directory, refuses a path
/// where a daemon answers or that is not a socket, and removes a stale socket (one
/// nobody listens on: connecting is refused).
async fn clear_path(path: &Path) -> Result<(), SocketError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.exists() {
            // Traversable by the group the socket is for; the socket's own mode decides who connects.
            std::fs::DirBuilder::new().recursive(true).mode(0o755).create(parent).map_err(io(parent, "creating the socket's directory"))?;
            tracing::info!(dir = %parent.display(), "created the socket's directory");
        }
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(path, "inspecting the socket path")(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket { path: path.to_path_buf(), what: file_kind(meta.file_type()) });
    }
    // Connect first: only a socket nobody answers on is stale. A listener whose backlog
    // is full does not answer at once either: counted as alive.
    match tokio::time::timeout(Duration::from_secs(2), tokio::net::UnixStream::connect(path)).await {
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            std::fs::remove_file(path).map_err(io(path, "removing the stale socket"))?;
            tracing::info!(path = %path.display(), "removed a stale socket (nobody listening)");
            Ok(())
        }
        Ok(Err(e)) => Err(io(path, "connecting to the existing socket to see whether a daemon listens")(e)),
        Ok(Ok(_)) | Err(_) => Err(SocketError::InUse { path: path.to_path_buf() }),
    }
}

/// The group id of `group` (the start and `--check-config` both ask): a number, or a name looked up in /etc/group (groups from
/// a directory service need their number).
pub fn group_id(group: &str) -> Result<u32, SocketError> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    let bad = |why: String| SocketError::Group { group: group.to_string(), why };
    let text = std::fs::read_to_string("/etc/group").map_err(|e| bad(format!("reading /etc/group: {e}")))?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let (name, _, gid) = (f.next()?, f.next()?, f.next()?);
            (name == group).then(|| gid.parse::<u32>().ok())?
        })
        .next()
        .ok_or_else(|| bad("no such group in /etc/group (give its number instead)".into()))
}

/// Binds the daemon's socket at `path` with `settings`' mode and group.
pub async fn bind(path: &Path, settings: &SocketSettings) -> Result<(tokio::net::UnixListener, SocketFile), SocketError> {
    clear_path(path).await?;
    let listener = tokio::net::UnixListener::bind(path).map_err(|e| match e.kind() {
        // Another daemon bound it between our check and our bind.
        std::io::ErrorKind::AddrInUse => SocketError::InUse { path: path.to_path_buf() },
        _ => io(path, "binding the socket")(e),
    })?;
    let meta = std::fs::symlink_metadata(path).map_err(io(path, "inspecting the new socket"))?;
    let file = SocketFile { path: path.to_path_buf(), identity: (meta.dev(), meta.ino()) };
    // The file is created with the umask's mode; narrowed (or widened) at once, before
    // the listener is served.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(settings.mode)).map_err(io(path, "setting daemon.socket_mode"))?;
    if let Some(group) = &settings.group {
        let gid = group_id(group)?;
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(io(path, "setting daemon.socket_group"))?;
    }
    Ok((listener, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ids_by_number_and_by_name() {
        assert_eq!(group_id("1234").unwrap(), 1234);
        assert_eq!(group_id("root").unwrap(), 0);
        let e = group_id("no-such-group-cuzk").unwrap_err().to_string();
        assert!(e.contains("no-such-group-cuzk") && e.contains("no such group"), "{e}");
    }
}
