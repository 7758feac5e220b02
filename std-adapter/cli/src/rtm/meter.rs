//! Counts and rates of a long-running `rtm` command (`publish` from stdin, `record`) on
//! stderr: on a terminal one line redrawn in place (`published 12,345 messages
//! (8,210/s)`), left on screen as the summary when the command ends; otherwise nothing
//! while it runs and the summary as one plain line at `-v 2`, so that scripts and logs
//! get no redraw sequences and satori-rtm-cli's default output stays as it is.

use std::fmt;
use std::io::{self, IsTerminal};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

use super::Log;

/// A running count of messages (see the module).
pub(super) struct Meter {
    live: Option<ProgressBar>,
    /// The verb of the summary (`published`, `recorded`).
    what: &'static str,
    count: u64,
    started: Instant,
}

impl Meter {
    /// Starts counting; live only when stderr is a terminal.
    pub(super) fn start(what: &'static str) -> Meter {
        let live = io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            let template = format!("{{spinner}} {what} {{human_pos}} messages ({{rate}})");
            let style = ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .with_key("rate", |state: &ProgressState, w: &mut dyn fmt::Write| {
                    let _ = write!(w, "{:.0}/s", state.per_sec());
                });
            bar.set_style(style);
            bar
        });
        Meter {
            live,
            what,
            count: 0,
            started: Instant::now(),
        }
    }

    /// Counts `n` more messages (cheap: the terminal is redrawn at most a few times a
    /// second, by indicatif).
    pub(super) fn add(&mut self, n: usize) {
        let n = n as u64;
        self.count += n;
        if let Some(bar) = &self.live {
            bar.inc(n);
        }
    }

    /// The summary line, `published 3 messages in 0.02 s (150/s)`.
    pub(super) fn summary(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            self.count as f64 / secs
        } else {
            0.0
        };
        format!(
            "{} {} messages in {secs:.2} s ({rate:.0}/s)",
            self.what, self.count
        )
    }

    /// Ends the count: the live line becomes the summary; off a terminal the summary is
    /// logged at info level.
    pub(super) fn finish(self, log: Log) {
        let summary = self.summary();
        match &self.live {
            Some(bar) => {
                if let Ok(style) = ProgressStyle::with_template("{msg}") {
                    bar.set_style(style);
                }
                bar.finish_with_message(summary);
            }
            None => log.info(summary),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_every_message() {
        let mut m = Meter::start("published");
        m.add(2);
        m.add(1);
        let s = m.summary();
        assert!(s.starts_with("published 3 messages in "), "{s}");
        assert!(s.ends_with("/s)"), "{s}");
    }
}
