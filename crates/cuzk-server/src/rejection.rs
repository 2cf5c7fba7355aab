//! What a client is told when its request is refused, and what the log keeps of it.
//! A refusal's message is bounded (a client's input quoted in it could be megabytes,
//! and gRPC C-core clients drop a response whose metadata exceeds 16 KiB), names no
//! server path beyond a file's name, and is logged at info, at most a few times a
//! second so a flood of bad requests cannot flood the log.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use cuzk_groth16::sync::lock;
use tonic::Status;

/// Bytes of a refusal's message at most (the engine already cuts quoted input to a
/// few hundred; this also bounds text from deeper layers: decoders, file checks).
pub const MESSAGE_BYTES: usize = 1024;

/// Refusals logged per second at most; the rest are counted and the count logged.
const LOGGED_PER_SECOND: u32 = 10;

/// `message` cut to [`MESSAGE_BYTES`] (at a character boundary) with its whole length.
pub fn bounded(message: &str) -> String {
    if message.len() <= MESSAGE_BYTES {
        return message.to_string();
    }
    let mut end = MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (message cut, {} bytes)", &message[..end], message.len())
}

/// `message` with every absolute path (a word starting with '/', possibly quoted)
/// shortened to its file name: clients learn which file, not the server's layout.
pub fn without_paths(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find('/') {
        let starts_word = rest[..i].chars().next_back().map_or(true, |c| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | '[' | '=' | ':' | '`'));
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail.find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | ']' | ',' | ';' | '`')).unwrap_or(tail.len());
        let word = &tail[..end];
        // A path has a directory part: "/x" alone (or "//") is left as it is.
        if starts_word && word.len() > 1 && word[1..].contains('/') {
            let name = word.trim_end_matches(['/', '.', ':']).rsplit('/').next().unwrap_or_default();
            let trailing = &word[word.trim_end_matches(['.', ':']).len()..];
            out.push_str(name);
            out.push_str(trailing);
        } else {
            out.push_str(word);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Logs refusals, rate-limited.
pub struct Rejections {
    window: Mutex<Window>,
}

struct Window {
    started: Instant,
    logged: u32,
    suppressed: u64,
}

impl Default for Rejections {
    fn default() -> Self {
        Rejections { window: Mutex::new(Window { started: Instant::now(), logged: 0, suppressed: 0 }) }
    }
}

impl Rejections {
    /// The status a client gets for refusing `method`'s request: its message bounded and
    /// without server paths; logged once at info (rate-limited). Errors of the daemon
    /// itself (INTERNAL) are logged at error, unlimited.
    pub fn refuse(&self, method: &str, status: Status) -> Status {
        let message = bounded(&without_paths(status.message()));
        let code = status.code();
        if code == tonic::Code::Internal {
            tracing::error!(method, code = ?code, "request failed: {message}");
        } else if let Some(suppressed) = self.admit() {
            if suppressed > 0 {
                tracing::info!(suppressed, "rejected requests not logged (more than {LOGGED_PER_SECOND} a second)");
            }
            tracing::info!(method, code = ?code, "request rejected: {message}");
        }
        Status::new(code, message)
    }

    /// Whether to log one more now; with how many were suppressed before it.
    fn admit(&self) -> Option<u64> {
        let mut w = lock(&self.window);
        if w.started.elapsed() >= Duration::from_secs(1) {
            w.started = Instant::now();
            w.logged = 0;
        }
        if w.logged >= LOGGED_PER_SECOND {
            w.suppressed += 1;
            return None;
        }
        w.logged += 1;
        Some(std::mem::take(&mut w.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_with_their_length() {
        assert_eq!(bounded("short"), "short");
        let m = bounded(&"ü".repeat(5000));
        assert!(m.len() <= MESSAGE_BYTES + 40 && m.ends_with("(message cut, 10000 bytes)"), "{m}");
    }

    #[test]
    fn paths_are_shortened_to_file_names() {
        assert_eq!(
            without_paths("missing /data/zk/params/v28-stacked.params (see \"/etc/cuzk/cuzk.toml\"); not /x or a/b"),
            "missing v28-stacked.params (see \"cuzk.toml\"); not /x or a/b"
        );
        assert_eq!(without_paths("reading /var/tmp/p/x.vk: No such file"), "reading x.vk: No such file");
        assert_eq!(without_paths("in /data/zk/params/."), "in params.");
        assert_eq!(without_paths("no slash here"), "no slash here");
    }

    #[test]
    fn the_log_is_rate_limited() {
        let r = Rejections::default();
        let admitted = (0..100).filter(|_| r.admit().is_some()).count();
        assert_eq!(admitted, LOGGED_PER_SECOND as usize);
    }
}
