//! Waiting for a benchmark to end (`bench run`, `status --wait`, `results --wait`): the
//! stage and elapsed time shown as it goes, and Ctrl-C handled the way the official CLI
//! does — the benchmark is not silently orphaned.
//!
//! Polling starts fast (100 ms, doubling) so that a short benchmark is reported as soon
//! as it ends, and backs off to the official CLI's 3 s for long ones. On a terminal the
//! stage and a live clock are one line redrawn in place; otherwise one plain line per
//! stage change, which logs and CI read well.

use std::io::{self, BufRead, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::fail::{Fail, EXIT_INTERRUPTED};
use benchlink_std::bench::{BenchClient, Escaped, StatusInfo};

/// First poll interval.
const FIRST_POLL: Duration = Duration::from_millis(100);
/// Longest poll interval (the official CLI's fixed one).
const MAX_POLL: Duration = Duration::from_secs(3);

/// What the wait loop hears besides its own clock.
enum Event {
    /// Ctrl-C.
    Interrupt,
    /// A line typed in answer to the question (`None`: stdin closed).
    Answer(Option<String>),
}

/// Ctrl-C, caught from the moment this exists so that an interrupt during `/start` is
/// not lost either: the benchmark it created is then stopped or kept as asked. Once the
/// benchmark ended ([`Interrupts::release`]), Ctrl-C ends the command at once again
/// (during `run --plot`, say).
pub(super) struct Interrupts {
    events: Receiver<Event>,
    answers: Sender<Event>,
    /// True while a benchmark is watched; false: Ctrl-C exits.
    watching: Arc<AtomicBool>,
    /// Stop without asking (`--stop-on-interrupt`, or no terminal to ask on).
    stop_without_asking: bool,
}

impl Interrupts {
    /// Installs the process's Ctrl-C handler.
    pub(super) fn catch(stop_on_interrupt: bool) -> Result<Interrupts, Fail> {
        let (tx, events) = mpsc::channel();
        let answers = tx.clone();
        let watching = Arc::new(AtomicBool::new(true));
        let watched = Arc::clone(&watching);
        ctrlc::set_handler(move || {
            if watched.load(Ordering::SeqCst) {
                let _ = tx.send(Event::Interrupt);
            } else {
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        })
        .map_err(|e| Fail(1, format!("cannot catch Ctrl-C: {e}")))?;
        let terminal = io::stdin().is_terminal() && io::stderr().is_terminal();
        Ok(Interrupts {
            events,
            answers,
            watching,
            stop_without_asking: stop_on_interrupt || !terminal,
        })
    }

    /// Ctrl-C was pressed: asks (or not) whether to stop benchmark `id`, does it, and
    /// ends the command with [`EXIT_INTERRUPTED`].
    fn interrupted(&self, client: &mut BenchClient, id: u64) -> Fail {
        let stop = if self.stop_without_asking {
            eprintln!("interrupted: stopping benchmark {id}");
            true
        } else {
            eprint!("\nStop the bench before quitting? [y/N] ");
            let answers = self.answers.clone();
            std::thread::spawn(move || {
                let mut line = String::new();
                let read = io::stdin().lock().read_line(&mut line);
                let _ = answers.send(Event::Answer(read.ok().filter(|n| *n > 0).map(|_| line)));
            });
            // A second Ctrl-C is "no, just quit".
            match self.events.recv() {
                Ok(Event::Answer(Some(line))) => {
                    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
                }
                _ => false,
            }
        };
        // From here, another Ctrl-C ends the command at once (a stop that hangs, say).
        self.release();
        if !stop {
            eprintln!("benchmark {id} goes on (`benchlink bench stop {id}` stops it)");
            return Fail(EXIT_INTERRUPTED, String::new());
        }
        match client.stop(id) {
            Ok(()) => {
                eprintln!("stopped benchmark {id}");
                Fail(EXIT_INTERRUPTED, String::new())
            }
            Err(e) => Fail(
                EXIT_INTERRUPTED,
                format!("could not stop benchmark {id}: {e}"),
            ),
        }
    }

    /// Sleeps `poll` unless Ctrl-C comes first.
    fn sleep(&self, poll: Duration) -> bool {
        loop {
            match self.events.recv_timeout(poll) {
                Ok(Event::Interrupt) => return true,
                // A late answer to an earlier question: nothing to do.
                Ok(Event::Answer(_)) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// The benchmark ended: Ctrl-C now just ends the command.
    fn release(&self) {
        self.watching.store(false, Ordering::SeqCst);
    }

    /// True when Ctrl-C is pending.
    fn pending(&self) -> bool {
        matches!(self.events.try_recv(), Ok(Event::Interrupt))
    }
}

/// The stage shown while waiting: redrawn in place on a terminal, a line per change
/// otherwise.
enum Display {
    Live(ProgressBar),
    Lines { last: String },
}

impl Display {
    fn new() -> Display {
        if !io::stderr().is_terminal() {
            return Display::Lines {
                last: String::new(),
            };
        }
        let bar = ProgressBar::new_spinner();
        let style = ProgressStyle::with_template("{spinner} status: {msg:<22} {elapsed_precise}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(100));
        Display::Live(bar)
    }

    fn show(&mut self, status: &StatusInfo, started: Instant) {
        let stage = Escaped::cut(status.status().as_str(), 64).to_string();
        match self {
            Display::Live(bar) => bar.set_message(stage),
            Display::Lines { last } if *last != stage => {
                let elapsed = started.elapsed().as_secs();
                eprintln!("status: {stage:<22}{:02}:{:02}", elapsed / 60, elapsed % 60);
                *last = stage;
            }
            Display::Lines { .. } => {}
        }
    }

    fn finish(&self) {
        if let Display::Live(bar) = self {
            bar.finish();
        }
    }
}

/// Polls benchmark `id` until its status is final, showing the stage on stderr; Ctrl-C
/// ends the wait through [`Interrupts`].
pub(super) fn wait(
    client: &mut BenchClient,
    id: u64,
    interrupts: &Interrupts,
) -> Result<StatusInfo, Fail> {
    let started = Instant::now();
    let mut display = Display::new();
    let mut poll = FIRST_POLL;
    if interrupts.pending() {
        display.finish();
        return Err(interrupts.interrupted(client, id));
    }
    loop {
        let status = client.status(id)?;
        display.show(&status, started);
        if status.status().is_final() {
            display.finish();
            interrupts.release();
            return Ok(status);
        }
        if interrupts.sleep(poll) {
            display.finish();
            return Err(interrupts.interrupted(client, id));
        }
        poll = (poll * 2).min(MAX_POLL);
    }
}
