//! What can go wrong with a Filecoin proof request.

use std::path::PathBuf;

/// Errors name the request field or file that is wrong, so a client or an operator
/// can act on them without reading logs.
#[derive(Debug, thiserror::Error)]
pub enum FilecoinError {
    /// The request itself is malformed or inconsistent (the client's mistake).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A request for something this build does not prove.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A file of the parameter directory (not a request) is damaged or unusable.
    #[error("{0}")]
    Parameters(String),
    /// The parameter directory lacks a file this proof needs.
    #[error("missing parameters: {path} does not exist (expected in the parameter directory; the file is named by its circuit's cache id)")]
    MissingParameters { path: PathBuf },
    /// filecoin-proofs or storage-proofs refused the vanilla proofs or the public data.
    #[error("{context}: {source:#}")]
    Rejected {
        context: String,
        #[source]
        source: anyhow::Error,
    },
    /// The circuit could not be synthesized (for valid vanilla proofs this is a bug).
    #[error("synthesis of partition {partition} failed: {message}")]
    Synthesis { partition: usize, message: String },
    /// filecoin-proofs' verifier did not accept the assembled proof.
    #[error("filecoin-proofs' verifier rejected the proof: {0}")]
    NotVerified(String),
    /// A timing-only job (vanilla proofs not checked) was asked for a real proof's
    /// check: there is none to make.
    #[error("timing only: {0}")]
    TimingOnly(String),
    /// Reading or writing a request folder or a file of it failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// filecoin-proofs or storage-proofs panicked on this input (caught; the input is
    /// almost certainly malformed in a way their checks do not cover).
    #[error("{context} panicked: {message}")]
    Panicked { context: String, message: String },
}

impl FilecoinError {
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        FilecoinError::InvalidRequest(msg.into())
    }

    pub(crate) fn rejected(context: impl Into<String>) -> impl FnOnce(anyhow::Error) -> Self {
        let context = context.into();
        move |source| FilecoinError::Rejected { context, source }
    }

    /// Whether the client sent something wrong (as opposed to a server-side problem).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            FilecoinError::InvalidRequest(_) | FilecoinError::Unsupported(_) | FilecoinError::Rejected { .. } | FilecoinError::Panicked { .. }
        )
    }
}

/// Runs `f`, turning a panic inside filecoin-proofs or storage-proofs into an error:
/// their code asserts and indexes on shapes a malformed request can break, and the
/// daemon must answer such a request with an error rather than lose a thread.
pub(crate) fn guarded<T>(context: &str, f: impl FnOnce() -> Result<T, FilecoinError>) -> Result<T, FilecoinError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(FilecoinError::Panicked { context: context.to_string(), message: cuzk_groth16::panic_message(payload.as_ref()) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_naming_the_step() {
        let e = guarded::<()>("checking a thing", || panic!("index out of bounds")).unwrap_err();
        assert!(matches!(&e, FilecoinError::Panicked { .. }));
        assert_eq!(e.to_string(), "checking a thing panicked: index out of bounds");
        assert!(e.is_client_error());
        assert_eq!(guarded("fine", || Ok(3)).unwrap(), 3);
    }
}
