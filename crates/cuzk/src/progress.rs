//! Progress bars for long CLI work, fed by the library's `Progress` reports.

use std::sync::Mutex;

use cuzk_groth16::sync::lock;
use cuzk_groth16::Progress;
use indicatif::{ProgressBar, ProgressStyle};

/// Draws one bar per stage on stderr (hidden when stderr is not a terminal).
pub struct Bars {
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    pub fn new() -> Self {
        Bars { bar: Mutex::new(None) }
    }

    pub fn finish(&self) {
        if let Some(b) = lock(&self.bar).take() {
            b.finish_and_clear();
        }
    }
}

impl Progress for Bars {
    fn stage(&self, name: &str, total: u64) {
        let style = ProgressStyle::with_template("{msg:24} [{bar:40}] {pos}/{len} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = ProgressBar::new(total).with_style(style).with_message(name.to_string());
        if let Some(old) = lock(&self.bar).replace(bar) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, n: u64) {
        if let Some(b) = lock(&self.bar).as_ref() {
            b.inc(n);
        }
    }
}

/// A spinner with a message, for steps without a known size.
pub fn spinner(msg: &str) -> ProgressBar {
    let s = ProgressBar::new_spinner().with_message(msg.to_string());
    s.enable_steady_tick(std::time::Duration::from_millis(120));
    s
}
