//! filecoin-proofs' process-wide settings.
//!
//! storage-proofs reads `FIL_PROOFS_*` environment variables once, at its first use,
//! into a global (`SETTINGS`); its verifiers then read verifying keys from
//! `FIL_PROOFS_PARAMETER_CACHE`. cuzk's parameter directory must be that directory, so
//! it is set here before any other call into filecoin-proofs, and checked after.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::error::{guarded, FilecoinError};
use cuzk_groth16::sync::lock;

static PARAMETER_DIR: OnceLock<PathBuf> = OnceLock::new();
static SETTING: Mutex<()> = Mutex::new(());

/// Makes `dir` filecoin-proofs' parameter directory for this process. Call it once at
/// start-up, before threads that might read the environment and before any other
/// function of this crate; calling it again with the same directory is a no-op, with
/// another an error (storage-proofs cannot change it once read).
pub fn use_parameter_dir(dir: &Path) -> Result<(), FilecoinError> {
    let _one_at_a_time = lock(&SETTING);
    if let Some(set) = PARAMETER_DIR.get() {
        if set == dir {
            return Ok(());
        }
        return Err(FilecoinError::invalid(format!(
            "filecoin-proofs already uses parameter directory {} in this process; it cannot switch to {}",
            set.display(),
            dir.display()
        )));
    }
    if let Some(old) = std::env::var_os("FIL_PROOFS_PARAMETER_CACHE") {
        if Path::new(&old) != dir {
            tracing::warn!(was = ?old, now = %dir.display(), "FIL_PROOFS_PARAMETER_CACHE overridden by cuzk's parameter directory");
        }
    }
    // The environment is read by storage-proofs below, on this thread; the caller
    // guarantees no other thread reads it concurrently (start-up).
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir);
    let seen = guarded("reading filecoin-proofs' settings", || Ok(storage_proofs_core::parameter_cache::parameter_cache_dir()))?;
    if seen != dir {
        return Err(FilecoinError::invalid(format!(
            "filecoin-proofs had already read its settings and uses parameter directory {}, not {}",
            seen.display(),
            dir.display()
        )));
    }
    let _ = PARAMETER_DIR.set(dir.to_owned());
    Ok(())
}

/// The directory set by [`use_parameter_dir`], if any.
pub fn parameter_dir() -> Option<&'static Path> {
    PARAMETER_DIR.get().map(|p| p.as_path())
}
