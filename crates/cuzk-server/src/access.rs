//! Who may use the daemon. On a unix socket the file's mode and group decide
//! (`daemon.socket_mode`); over TCP anyone who reaches the port could queue work,
//! evict parameter sets and cancel jobs, so a listener that is not on loopback needs
//! a bearer token (`daemon.auth_token_file`) unless the operator says otherwise
//! (`daemon.allow_insecure`). With a token every gRPC call and every status request
//! must carry it (`authorization: Bearer <token>`); job ids, which are what lets a
//! client await or cancel a job, are listed in full only to callers holding it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bytes a token has at least (128 bits written as hex, or more).
pub const MIN_TOKEN_BYTES: usize = 32;

/// The daemon's bearer token.
pub struct AccessToken {
    token: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("daemon.auth_token_file {path}: {why}")]
    TokenFile { path: String, why: String },
    #[error("{what} {addr} is reachable from other machines and the daemon has no access control: set daemon.auth_token_file (a bearer token every client sends) or, for daemon.listen, daemon.tls_client_ca_file (client certificates), listen on loopback or a unix socket, or set daemon.allow_insecure = true to accept that anyone who reaches the port can queue and cancel work")]
    Exposed { what: &'static str, addr: SocketAddr },
    #[error("{key} {path}: {why}")]
    TlsFile { key: &'static str, path: String, why: String },
    #[error("daemon.socket_mode {mode:#o} lets every user of this host write to the socket (queue, evict and cancel work): use 0660 with daemon.socket_group for Curio's user, or set daemon.allow_insecure = true to accept it")]
    WorldWritableSocket { mode: u32 },
}

/// Refuses a unix socket mode that lets every user of the host connect (others may
/// write), unless `allow_insecure`; the warning to log when it is allowed.
pub fn check_socket_mode(mode: u32, allow_insecure: bool) -> Result<Option<String>, AccessError> {
    if mode & 0o002 == 0 {
        return Ok(None);
    }
    if !allow_insecure {
        return Err(AccessError::WorldWritableSocket { mode });
    }
    Ok(Some(format!(
        "INSECURE: daemon.socket_mode {mode:#o} lets every user of this host queue, evict and cancel work (daemon.allow_insecure = true)"
    )))
}

/// TLS for daemon.listen (TOML `daemon.tls_cert_file`, `daemon.tls_key_file`,
/// `daemon.tls_client_ca_file`): the server's certificate chain and key (PEM), and
/// optionally the CA whose certificates clients must present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// tonic's server TLS (rustls) from the files; the handshake bounded by
    /// `handshake_timeout`.
    pub fn server_config(&self, handshake_timeout: Duration) -> Result<tonic::transport::ServerTlsConfig, AccessError> {
        let read = |key: &'static str, path: &Path| {
            std::fs::read(path).map_err(|e| AccessError::TlsFile { key, path: path.display().to_string(), why: e.to_string() })
        };
        let identity = tonic::transport::Identity::from_pem(read("daemon.tls_cert_file", &self.cert)?, read("daemon.tls_key_file", &self.key)?);
        let mut c = tonic::transport::ServerTlsConfig::new().identity(identity).timeout(handshake_timeout);
        if let Some(ca) = &self.client_ca {
            c = c.client_ca_root(tonic::transport::Certificate::from_pem(read("daemon.tls_client_ca_file", ca)?));
        }
        Ok(c)
    }
}

/// Never shows the token itself.
impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AccessToken({} bytes)", self.token.len())
    }
}

impl AccessToken {
    /// The token in `path` (surrounding whitespace ignored): at least
    /// [`MIN_TOKEN_BYTES`] printable ASCII bytes, no spaces.
    pub fn from_file(path: &Path) -> Result<AccessToken, AccessError> {
        let bad = |why: String| AccessError::TokenFile { path: path.display().to_string(), why };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if let Ok(m) = std::fs::metadata(path) {
                if m.permissions().mode() & 0o077 != 0 {
                    tracing::warn!(path = %path.display(), "daemon.auth_token_file can be read by others than its owner; chmod 600 it");
                }
            }
        }
        AccessToken::new(text.trim()).map_err(bad)
    }

    pub fn new(token: &str) -> Result<AccessToken, String> {
        if token.len() < MIN_TOKEN_BYTES {
            return Err(format!("the token has {} bytes; at least {MIN_TOKEN_BYTES} are needed (e.g. `openssl rand -hex 32`)", token.len()));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the token must be printable ASCII without spaces".into());
        }
        Ok(AccessToken { token: token.as_bytes().to_vec() })
    }

    /// Whether an `authorization` header value carries this token. Compared in time
    /// independent of where the first difference is.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(given) = authorization.and_then(|v| v.strip_prefix(b"Bearer ")) else { return false };
        let mut diff = (given.len() != self.token.len()) as u8;
        for (i, t) in self.token.iter().enumerate() {
            diff |= t ^ given.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }
}

/// Refuses TCP listeners reachable from other machines (`listen_tcp`: daemon.listen
/// when it is TCP) when nothing guards them (a token guards both; client
/// certificates, `client_certs`, guard daemon.listen), unless `allow_insecure`;
/// returns the warnings to log (allow_insecure used).
pub fn check_exposure(
    listen_tcp: Option<SocketAddr>,
    status_listen: Option<SocketAddr>,
    has_token: bool,
    client_certs: bool,
    allow_insecure: bool,
) -> Result<Vec<String>, AccessError> {
    let mut exposed = Vec::new();
    if let Some(a) = listen_tcp.filter(|a| !a.ip().is_loopback() && !client_certs) {
        exposed.push(("daemon.listen", a));
    }
    if let Some(a) = status_listen.filter(|a| !a.ip().is_loopback()) {
        exposed.push(("daemon.status_listen", a));
    }
    if has_token {
        return Ok(Vec::new());
    }
    match exposed.first() {
        None => Ok(Vec::new()),
        Some(&(what, addr)) if !allow_insecure => Err(AccessError::Exposed { what, addr }),
        Some(_) => Ok(exposed
            .iter()
            .map(|(what, addr)| {
                format!("INSECURE: {what} {addr} is reachable from other machines without a token (daemon.allow_insecure = true): anyone who reaches it can queue, evict and cancel work")
            })
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_world_writable_socket_needs_consent() {
        assert_eq!(check_socket_mode(0o660, false).unwrap(), None);
        assert_eq!(check_socket_mode(0o664, false).unwrap(), None);
        let e = check_socket_mode(0o777, false).unwrap_err().to_string();
        assert!(e.contains("0o777") && e.contains("every user"), "{e}");
        assert!(check_socket_mode(0o662, false).is_err());
        assert!(check_socket_mode(0o666, true).unwrap().unwrap().contains("INSECURE"));
    }

    #[test]
    fn a_token_admits_only_its_own_bearer_header() {
        let t = AccessToken::new("0123456789abcdef0123456789abcdef").unwrap();
        assert!(t.admits(Some(b"Bearer 0123456789abcdef0123456789abcdef")));
        assert!(!t.admits(Some(b"Bearer 0123456789abcdef0123456789abcde")));
        assert!(!t.admits(Some(b"Bearer 0123456789abcdef0123456789abcdef0")));
        assert!(!t.admits(Some(b"0123456789abcdef0123456789abcdef")));
        assert!(!t.admits(None));
        assert!(AccessToken::new("short").unwrap_err().contains("at least 32"));
        assert!(AccessToken::new(&"a b".repeat(20)).is_err());
    }

    #[test]
    fn only_exposed_listeners_need_a_token() {
        let lo = Some("127.0.0.1:9820".parse().unwrap());
        let any = Some("0.0.0.0:9820".parse().unwrap());
        // A unix socket: no TCP listener.
        let unix = None;
        assert!(check_exposure(lo, Some("127.0.0.1:9821".parse().unwrap()), false, false, false).unwrap().is_empty());
        assert!(check_exposure(unix, None, false, false, false).unwrap().is_empty());
        let e = check_exposure(any, None, false, false, false).unwrap_err().to_string();
        assert!(e.contains("daemon.listen 0.0.0.0:9820") && e.contains("daemon.auth_token_file") && e.contains("allow_insecure"), "{e}");
        let e = check_exposure(unix, Some("[::]:9821".parse().unwrap()), false, false, false).unwrap_err().to_string();
        assert!(e.contains("daemon.status_listen"), "{e}");
        assert!(check_exposure(any, None, true, false, false).unwrap().is_empty());
        // Client certificates guard daemon.listen, not the status endpoint.
        assert!(check_exposure(any, None, false, true, false).unwrap().is_empty());
        assert!(check_exposure(any, Some("0.0.0.0:1".parse().unwrap()), false, true, false).is_err());
        let w = check_exposure(any, Some("0.0.0.0:1".parse().unwrap()), false, false, true).unwrap();
        assert_eq!(w.len(), 2);
        assert!(w[0].starts_with("INSECURE"));
    }
}
