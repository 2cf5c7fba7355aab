//! A worker's guard against panics in the code it calls (circuits, backends): in a
//! module of its own, which both loops use, so the workers module does not depend on
//! its children both ways.

use crate::error::EngineError;

/// Runs `f`, turning a panic into an error, so a bug in a circuit or a backend fails
/// that job instead of killing a worker thread (and leaving the daemon without it).
pub(super) fn catch_panic<T, E: std::fmt::Display>(what: &str, f: impl FnOnce() -> Result<T, E>) -> Result<T, EngineError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(|e| EngineError::Internal(e.to_string())),
        Err(p) => {
            let msg = cuzk_groth16::panic_message(p.as_ref());
            tracing::error!(what, panic = msg.as_str(), "panic caught");
            Err(EngineError::Internal(format!("internal error: {what} panicked: {msg}")))
        }
    }
}
