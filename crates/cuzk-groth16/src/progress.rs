//! How long computations (setup, file loading) report how far they got.

/// Something that wants to hear how far a long computation got.
///
/// Library code reports progress through this; the CLI draws bars with it.
pub trait Progress: Sync {
    /// A new stage starts with `total` units of work.
    fn stage(&self, name: &str, total: u64);
    /// `n` more units of the current stage are done.
    fn advance(&self, n: u64);
}

/// A [`Progress`] that reports nowhere.
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
}
