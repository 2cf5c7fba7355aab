//! The log's rate for lines from libraries (storage-proofs, filecoin-proofs, …): their
//! vanilla verifiers log an ERROR per failed challenge, so 100 requests with one
//! randomness byte changed wrote 6,400 ERROR lines in 1.8 s, past the daemon's own
//! refusal log (10 a second). Lines whose target is not cuzk's are held to
//! [`LIBRARY_LINES_PER_SECOND`] per level (so a flood of INFO lines never hides the
//! ERROR ones); the rest are counted, and the daemon logs the count.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cuzk_groth16::sync::lock;
use tracing::subscriber::Interest;
use tracing::{Event, Metadata};
use tracing_subscriber::layer::{Context, Filter};

/// Library lines of one level written per second at most (the daemon's refusal log's
/// rate).
pub const LIBRARY_LINES_PER_SECOND: u32 = 10;

/// The limit, shared by the log's filter and the daemon's report of what it held back.
pub struct LibraryLogLimit {
    /// Per level (ERROR … TRACE): the window's start and the lines written in it.
    windows: Mutex<[(Instant, u32); 5]>,
    suppressed: AtomicU64,
}

/// The process's one limit.
pub static LIMIT: std::sync::LazyLock<LibraryLogLimit> = std::sync::LazyLock::new(LibraryLogLimit::new);

fn from_a_library(meta: &Metadata<'_>) -> bool {
    !meta.target().starts_with("cuzk")
}

impl LibraryLogLimit {
    fn new() -> Self {
        LibraryLogLimit { windows: Mutex::new([(Instant::now(), 0); 5]), suppressed: AtomicU64::new(0) }
    }

    /// Whether one more library line of `level` may be written now.
    fn admit(&self, level: tracing::Level) -> bool {
        let i = match level {
            tracing::Level::ERROR => 0,
            tracing::Level::WARN => 1,
            tracing::Level::INFO => 2,
            tracing::Level::DEBUG => 3,
            _ => 4,
        };
        let mut windows = lock(&self.windows);
        let w = &mut windows[i];
        let now = Instant::now();
        if now.duration_since(w.0) >= Duration::from_secs(1) {
            *w = (now, 0);
        }
        if w.1 < LIBRARY_LINES_PER_SECOND {
            w.1 += 1;
            true
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// Lines held back since the last call.
    pub fn take_suppressed(&self) -> u64 {
        self.suppressed.swap(0, Ordering::Relaxed)
    }
}

impl<S> Filter<S> for &'static LibraryLogLimit {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        // Library callsites are asked per event (the rate changes); cuzk's never are.
        if from_a_library(meta) {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        !from_a_library(event.metadata()) || self.admit(*event.metadata().level())
    }
}

/// Logs, every `period`, how many library lines were held back (a daemon's task).
pub async fn report_suppressed(period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.tick().await;
    loop {
        tick.tick().await;
        let n = LIMIT.take_suppressed();
        if n > 0 {
            tracing::warn!(
                suppressed = n,
                "{n} log lines of libraries (filecoin-proofs, storage-proofs: e.g. their verifiers on rejected inputs) held back in the last {} s: at most {LIBRARY_LINES_PER_SECOND} a second of each level are written",
                period.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_rate_passes_and_the_rest_is_counted() {
        let limit = LibraryLogLimit::new();
        let passed = (0..100).filter(|_| limit.admit(tracing::Level::INFO)).count();
        assert_eq!(passed, LIBRARY_LINES_PER_SECOND as usize);
        // Another level has its own quota: INFO lines never use up the ERROR ones.
        let errors = (0..100).filter(|_| limit.admit(tracing::Level::ERROR)).count();
        assert_eq!(errors, LIBRARY_LINES_PER_SECOND as usize);
        assert_eq!(limit.take_suppressed(), 2 * (100 - LIBRARY_LINES_PER_SECOND as u64));
        assert_eq!(limit.take_suppressed(), 0);
    }
}
