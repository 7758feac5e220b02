//! What the dashboard knows: every benchmark it shows, with its status, its metric
//! series, the tail of its log, its results and what was said about it (name, tags,
//! environment). Feeders (the benchmark server's followers, or a program that runs the
//! benchmark itself) write here; pages read here. Every part is bounded, because all of
//! it comes from servers and other users: a flood of metrics, series or log lines costs
//! a fixed amount of memory, and what was cut is counted and said on the page.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use benchlink_std::bench::{Results, StatusInfo};

use super::super::charts::{decimate, Points};

/// Benchmarks kept; past it the oldest (lowest id) nobody follows is forgotten.
pub(crate) const MAX_BENCHMARKS: usize = 500;
/// Series kept per benchmark; samples of further series are counted, not kept.
pub(crate) const MAX_SERIES: usize = 2_000;
/// Points kept per series before it is thinned to half (its outline kept, spikes
/// included): a series sampled every second for ten hours stays within this.
pub(crate) const MAX_POINTS: usize = 20_000;
/// Log lines kept: the tail.
pub(crate) const LOG_LINES: usize = 300;
/// Characters kept of one log line, tag, name or environment value.
pub(crate) const TEXT_CHARS: usize = 2_000;
/// Tags and environment variables kept per benchmark.
pub(crate) const MAX_LABELS: usize = 100;

/// What a feeder says about a benchmark besides what its server reports: the benchmark
/// server's HTTP API gives no name, tags or environment, so only a program that started
/// the benchmark (`bench run --dashboard`, the agent) knows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// The benchmark's name.
    pub name: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its scenario environment.
    pub env: Vec<(String, String)>,
}

/// One benchmark as the dashboard shows it.
#[derive(Debug, Default)]
pub(crate) struct Bench {
    pub(crate) meta: Meta,
    pub(crate) status: Option<StatusInfo>,
    pub(crate) series: BTreeMap<String, Points>,
    pub(crate) log: VecDeque<String>,
    pub(crate) results: Option<Results>,
    /// Samples of series past [`MAX_SERIES`], not kept.
    pub(crate) samples_dropped: u64,
    /// Log lines that scrolled out of the tail.
    pub(crate) log_scrolled: u64,
    /// A feeder's last trouble with this benchmark (a stream that could not resume).
    pub(crate) trouble: Option<String>,
    /// Changes so far: what a page saw is a version.
    pub(crate) version: u64,
    /// Someone follows its `/data` and log (a page asked for it, or a feeder pushes).
    pub(crate) followed: bool,
}

impl Bench {
    /// The benchmark has ended and nothing more will change.
    pub(crate) fn is_final(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.status().is_final())
    }

    fn push_sample(&mut self, name: &str, timestamp: u64, value: f64) {
        if !value.is_finite() {
            return;
        }
        if let Some(points) = self.series.get_mut(name) {
            points.push((timestamp, value));
            if points.len() > MAX_POINTS {
                *points = decimate(points, MAX_POINTS / 4);
            }
        } else if self.series.len() < MAX_SERIES {
            self.series
                .insert(bounded(name).into_owned(), vec![(timestamp, value)]);
        } else {
            self.samples_dropped += 1;
        }
    }

    fn push_log(&mut self, line: &str) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
            self.log_scrolled += 1;
        }
        self.log.push_back(bounded(line).into_owned());
    }
}

/// `text` cut to [`TEXT_CHARS`] characters, with an ellipsis when cut.
pub(crate) fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(TEXT_CHARS) {
        None => text.into(),
        Some((at, _)) => format!("{}…", &text[..at]).into(),
    }
}

fn bounded_meta(meta: Meta) -> Meta {
    Meta {
        name: meta.name.map(|n| bounded(&n).into_owned()),
        tags: meta
            .tags
            .iter()
            .take(MAX_LABELS)
            .map(|t| bounded(t).into_owned())
            .collect(),
        env: meta
            .env
            .iter()
            .take(MAX_LABELS)
            .map(|(k, v)| (bounded(k).into_owned(), bounded(v).into_owned()))
            .collect(),
    }
}

/// The benchmarks, behind one lock, with a condition variable that wakes the pages'
/// long polls when anything changes.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) benches: BTreeMap<u64, Bench>,
    /// Changes to any benchmark: the list page's version.
    pub(crate) version: u64,
}

/// Called with a benchmark's id when a page asks for it and nobody follows it yet.
type Follow = Box<dyn Fn(u64) + Send + Sync>;

/// The dashboard's memory, shared by its feeders and its pages.
///
/// Feeders write: [`add`](Board::add), [`set_status`](Board::set_status),
/// [`push_samples`](Board::push_samples), [`push_log`](Board::push_log),
/// [`set_results`](Board::set_results). Each write wakes the pages waiting for news.
pub struct Board {
    state: Mutex<State>,
    changed: Condvar,
    follow: Mutex<Option<Follow>>,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Board").finish_non_exhaustive()
    }
}

impl Board {
    pub(crate) fn new() -> Arc<Board> {
        Arc::new(Board {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            follow: Mutex::new(None),
        })
    }

    /// The state, for reading. A feeder that panicked while holding the lock left the
    /// state as consistent as between any two writes, so the poison is ignored.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Installs what to do when a page asks for a benchmark nobody follows.
    pub(crate) fn on_follow(&self, follow: Follow) {
        *self.follow.lock().unwrap_or_else(|p| p.into_inner()) = Some(follow);
    }

    /// A page shows benchmark `id`: start following it if nobody does yet.
    pub(crate) fn want(&self, id: u64) {
        let start = {
            let mut state = self.lock();
            if !state.benches.contains_key(&id) && state.benches.len() >= MAX_BENCHMARKS {
                return;
            }
            let b = state.benches.entry(id).or_default();
            !std::mem::replace(&mut b.followed, true)
        };
        if start {
            if let Some(follow) = &*self.follow.lock().unwrap_or_else(|p| p.into_inner()) {
                follow(id);
            }
        }
    }

    /// Changes benchmark `id` (created if new) and wakes the waiting pages.
    pub(crate) fn change<R>(&self, id: u64, f: impl FnOnce(&mut Bench) -> R) -> R {
        let mut state = self.lock();
        if !state.benches.contains_key(&id) && state.benches.len() >= MAX_BENCHMARKS {
            let oldest = state
                .benches
                .iter()
                .find(|(_, b)| !b.followed)
                .map(|(id, _)| *id);
            if let Some(oldest) = oldest {
                state.benches.remove(&oldest);
            }
        }
        let bench = state.benches.entry(id).or_default();
        let r = f(bench);
        bench.version += 1;
        state.version += 1;
        drop(state);
        self.changed.notify_all();
        r
    }

    /// Shows benchmark `id`, with what is known about it beside its server's reports.
    /// A feeder that pushes the benchmark's samples itself calls this first: the
    /// dashboard then never asks a server for that benchmark's `/data`.
    pub fn add(&self, id: u64, meta: Meta) {
        self.change(id, |b| b.meta = bounded_meta(meta));
    }

    /// Shows a feeder's own benchmark: [`add`](Board::add), marked as followed.
    pub fn add_fed(&self, id: u64, meta: Meta) {
        self.change(id, |b| {
            b.meta = bounded_meta(meta);
            b.followed = true;
        });
    }

    /// Benchmark `id`'s status as its server last reported it.
    pub fn set_status(&self, id: u64, status: StatusInfo) {
        self.change(id, |b| b.status = Some(status));
    }

    /// Samples of benchmark `id`: (series name, unix seconds, value). Values that are
    /// not finite are skipped.
    pub fn push_samples<'a>(
        &self,
        id: u64,
        samples: impl IntoIterator<Item = (&'a str, u64, f64)>,
    ) {
        self.change(id, |b| {
            for (name, t, v) in samples {
                b.push_sample(name, t, v);
            }
        });
    }

    /// Log lines of benchmark `id`, oldest first.
    pub fn push_log<'a>(&self, id: u64, lines: impl IntoIterator<Item = &'a str>) {
        self.change(id, |b| {
            for line in lines {
                b.push_log(line);
            }
        });
    }

    /// Benchmark `id`'s results.
    pub fn set_results(&self, id: u64, results: Results) {
        self.change(id, |b| b.results = Some(results));
    }

    /// Says what went wrong while following benchmark `id` (shown on its page).
    pub(crate) fn set_trouble(&self, id: u64, trouble: String) {
        self.change(id, |b| b.trouble = Some(bounded(&trouble).into_owned()));
    }

    /// Waits until `version(state)` differs from `seen`, or until `guard` has passed;
    /// returns the state either way.
    pub(crate) fn wait_past(
        &self,
        seen: u64,
        guard: Duration,
        version: impl Fn(&State) -> u64,
    ) -> MutexGuard<'_, State> {
        let until = Instant::now() + guard;
        let mut state = self.lock();
        while version(&state) == seen {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_is_bounded() {
        let board = Board::new();
        board.add(1, Meta::default());
        let names: Vec<String> = (0..MAX_SERIES + 10).map(|i| format!("m{i}")).collect();
        board.push_samples(1, names.iter().map(|n| (n.as_str(), 1, 1.0)));
        board.push_samples(1, (0..MAX_POINTS as u64 + 1).map(|t| ("m0", t, t as f64)));
        board.push_log(1, (0..LOG_LINES + 5).map(|_| "line"));
        let long = "x".repeat(TEXT_CHARS * 3);
        board.push_log(1, [long.as_str()]);
        let state = board.lock();
        let b = &state.benches[&1];
        assert_eq!(b.series.len(), MAX_SERIES);
        assert_eq!(b.samples_dropped, 10);
        assert!(
            b.series["m0"].len() <= MAX_POINTS / 2,
            "{}",
            b.series["m0"].len()
        );
        assert_eq!(
            b.series["m0"].last(),
            Some(&(MAX_POINTS as u64, MAX_POINTS as f64))
        );
        assert_eq!(b.log.len(), LOG_LINES);
        assert_eq!(b.log_scrolled, 6);
        assert_eq!(
            b.log.back().map(|l| l.chars().count()),
            Some(TEXT_CHARS + 1)
        );
    }

    #[test]
    fn a_change_wakes_a_waiting_page() {
        let board = Board::new();
        let seen = board.lock().version;
        let writer = {
            let board = Arc::clone(&board);
            std::thread::spawn(move || {
                board.set_status(
                    4,
                    StatusInfo {
                        status_text: "running".into(),
                        create_time: None,
                        start_time: None,
                        finish_time: None,
                        reason: None,
                    },
                )
            })
        };
        let state = board.wait_past(seen, Duration::from_secs(60), |s| s.version);
        assert!(state.version > seen);
        drop(state);
        writer.join().expect("the writer");
    }
}
