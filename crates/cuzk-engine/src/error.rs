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
    /// The request cannot fit (e.g. a partition larger than the whole memory budget).
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    /// The daemon is not set up for the request (e.g. timing parameters where real
    /// ones are needed).
    #[error("failed precondition: {0}")]
    FailedPrecondition(String),
    /// The engine is shutting down and takes no new work.
    #[error("the engine is shutting down")]
    ShuttingDown,
    /// Anything else: loading parameters, synthesis or proving failed.
    #[error("{0}")]
    Internal(String),
}
