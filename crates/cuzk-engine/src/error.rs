use thiserror::Error;

/// What went wrong with a request; the server maps each variant to a gRPC status.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// The request itself is wrong (unknown kind, malformed payload, bad sizes).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// No job or parameter set of that name.
    #[error("not found: {0}")]
    NotFound(String),
    /// The request cannot fit (e.g. a partition larger than the whole memory budget,
    /// or the queue caps reached).
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    /// The daemon is not set up for the request (e.g. timing parameters where real
    /// ones are needed), or its object is busy (a parameter set in use).
    #[error("failed precondition: {0}")]
    FailedPrecondition(String),
    /// The request asks for what its client may not use (a priority reserved for
    /// other kinds).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The engine is shutting down and takes no new work.
    #[error("the engine is shutting down")]
    ShuttingDown,
    /// Anything else: loading parameters, synthesis or proving failed.
    #[error("{0}")]
    Internal(String),
}

/// Bytes of a client's input an error message quotes at most.
pub const SHOWN_BYTES: usize = 160;

/// A client's input as an error message quotes it: debug-quoted, cut after
/// [`SHOWN_BYTES`] with its whole length, so an error never grows with its input.
pub fn shown(s: &str) -> String {
    if s.len() <= SHOWN_BYTES {
        return format!("{s:?}");
    }
    let mut end = SHOWN_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &s[..end], s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_input_is_bounded_and_says_its_length() {
        assert_eq!(shown("abc"), "\"abc\"");
        let long = "é".repeat(10_000);
        let s = shown(&long);
        assert!(s.len() < 2 * SHOWN_BYTES && s.ends_with("… (20000 bytes)"), "{s}");
    }
}
