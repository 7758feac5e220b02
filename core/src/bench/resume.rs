//! Resuming a stream after a cut, exactly: no line lost, none repeated.
//!
//! The benchmark server answers every `/data`, `/log` and `/userlog` request from the
//! first line of the benchmark's files, whatever was read before: `/log` and `/userlog`
//! restream one file, `/data` one file per metric, the metrics interleaved in any order
//! but each metric's lines in file order. So where a client was is, per metric (per log),
//! how many lines it has taken: a new request skips that many lines of each and takes the
//! rest. That holds whatever the interleaving and whatever broke the first request (a
//! cut, a truncated chunked or zlib body, a reset, a silent server, the caller breaking
//! off on purpose).
//!
//! A count alone would hide a file that changed under it (the benchmark restarted, a
//! different server behind the same address): so each sequence also keeps a fingerprint
//! of the last line it took, and the line at that position in a new request must match
//! it. Every case a count cannot settle is reported as [`Line::Unresumable`] or, at the
//! end of a request, as a [`Shortfall`], never guessed:
//!
//! - a metric the caller's table has no room for, or whose name is longer than the
//!   table's names, met again after a cut ([`Unresumable::Untracked`]; on the first
//!   request nothing is skipped, so such a line is simply new);
//! - a line at the last taken position that is not the line taken
//!   ([`Unresumable::Diverged`]); every later line of that sequence in the same request
//!   is reported the same way;
//! - a request that ended with fewer lines of a sequence than were taken
//!   ([`Shortfall`]).
//!
//! `/server_logs` is different: a live tail of the server's own log from the moment of
//! the request, never restreamed. [`TailCursor`] skips nothing and reports each gap: the
//! lines logged between the cut and the new request are missing, and how many the server
//! does not say.
//!
//! [`Retry`] is the policy of the clients around these cursors (when to try again after
//! a cut, and when to give up): the messaging client's reconnect backoff, one mechanism
//! for both protocols.
//!
//! ```
//! use benchlink_core::bench::resume::{DataCursor, Line, Metrics};
//! use benchlink_core::bench::Sample;
//!
//! let mut cursor = DataCursor::new(Metrics::<8, 32>::new());
//! let file = [b"1\ta\t1".as_slice(), b"1\tb\t5", b"2\ta\t2"];
//! // The first request: two lines, then the connection is cut.
//! for line in &file[..2] {
//!     let s = Sample::parse(line).unwrap();
//!     assert_eq!(cursor.classify(&s), Line::New);
//!     cursor.take(&s);
//! }
//! // The second request restreams every metric from its first line.
//! cursor.restart();
//! let mut new = Vec::new();
//! for line in &file {
//!     let s = Sample::parse(line).unwrap();
//!     match cursor.classify(&s) {
//!         Line::Seen => {}
//!         Line::New => { cursor.take(&s); new.push(s.value.as_str().to_owned()); }
//!         Line::Unresumable(why) => panic!("{why}"),
//!     }
//! }
//! assert_eq!(new, ["2"]);
//! assert_eq!(cursor.finish(), Ok(()));
//! assert_eq!((cursor.taken(), cursor.resumptions()), (3, 1));
//! ```

use core::fmt;
use core::ops::ControlFlow;
use core::time::Duration;

use heapless::{String, Vec};

use super::exchange::{ClientError, Waiting};
use super::{LineFormat, LogLine, LogLineError, MetricLine, Sample, SampleError};
use crate::rtm::backoff::Backoff;
use crate::time::Instant;

/// What to do with one line of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Line {
    /// Taken from an earlier request: skip it.
    Seen,
    /// New: hand it out, then tell the cursor it was taken (`take`). A line classified
    /// `New` and not taken must end the request (the caller breaks off the stream): the
    /// next request meets it again.
    New,
    /// Cannot be resumed exactly: report it (it is neither skipped nor handed out as
    /// new by guessing).
    Unresumable(Unresumable),
}

/// Why a line cannot be resumed exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Unresumable {
    /// A metric the table did not keep (no room, or a name longer than its names), met
    /// again after a cut: how many of its lines were taken before is unknown.
    Untracked(Untracked),
    /// The line at the position of the last line taken is another line: the file is
    /// not the one read before (the benchmark was restarted, or another server answers).
    Diverged,
}

/// Why a metric is not kept by a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Untracked {
    /// The table is full.
    TableFull {
        /// How many metrics it holds.
        capacity: usize,
    },
    /// The name is longer than the table's names.
    NameTooLong {
        /// The longest name it holds, in bytes.
        max: usize,
    },
}

impl fmt::Display for Unresumable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unresumable::Untracked(Untracked::TableFull { capacity }) => write!(
                f,
                "cannot resume exactly: a metric beyond the {capacity} the cursor keeps"
            ),
            Unresumable::Untracked(Untracked::NameTooLong { max }) => write!(
                f,
                "cannot resume exactly: a metric name longer than the {max} bytes the cursor keeps"
            ),
            Unresumable::Diverged => f.write_str(
                "cannot resume exactly: the stream differs from what was read before \
                 (the benchmark was restarted, or another server answered)",
            ),
        }
    }
}

impl core::error::Error for Unresumable {}

/// A request that ended normally with fewer lines than were taken before: the file is
/// shorter than what was read (the benchmark was restarted, or another server answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Shortfall {
    /// Sequences (metrics, or the log) that came up short.
    pub sequences: usize,
    /// Lines taken before that the request did not have, over all of them.
    pub lines: u64,
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot resume exactly: the stream ended {} line(s) short of what was read before, \
             in {} sequence(s) (the benchmark was restarted, or another server answered)",
            self.lines, self.sequences
        )
    }
}

impl core::error::Error for Shortfall {}

/// What a resumed stream reports instead of guessing: a line that cannot be resumed, a
/// request that came up short, a gap in a live tail. A stream's line decoder hands it
/// out as a line error ([`SampleError::Resume`], [`LogLineError::Resume`]), so a
/// caller that reports bad lines reports these too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Report {
    /// See [`Unresumable`].
    Unresumable(Unresumable),
    /// See [`Shortfall`].
    Shortfall(Shortfall),
    /// See [`Gap`].
    Gap(Gap),
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Report::Unresumable(u) => u.fmt(f),
            Report::Shortfall(s) => s.fmt(f),
            Report::Gap(g) => g.fmt(f),
        }
    }
}

impl core::error::Error for Report {}

/// Where one sequence of lines (a log, one metric's file) stands: lines taken over all
/// requests, lines met in the current one, and the last taken line's fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    // 32 bits: four billion lines of one metric is beyond any benchmark, and a device
    // keeps one of these per metric (u64 arithmetic costs a Cortex-M code too).
    taken: u32,
    met: u32,
    last: u32,
    diverged: bool,
}

impl Progress {
    /// Nothing taken.
    pub const NEW: Progress = Progress {
        taken: 0,
        met: 0,
        last: 0,
        diverged: false,
    };

    fn restart(&mut self) {
        self.met = 0;
        self.diverged = false;
    }

    fn classify(&mut self, fingerprint: u32) -> Line {
        self.met = self.met.saturating_add(1);
        if self.diverged {
            return Line::Unresumable(Unresumable::Diverged);
        }
        match self.met.cmp(&self.taken) {
            core::cmp::Ordering::Less => Line::Seen,
            core::cmp::Ordering::Equal if fingerprint == self.last => Line::Seen,
            core::cmp::Ordering::Equal => {
                self.diverged = true;
                Line::Unresumable(Unresumable::Diverged)
            }
            core::cmp::Ordering::Greater => Line::New,
        }
    }

    fn take(&mut self, fingerprint: u32) {
        if self.met > self.taken && !self.diverged {
            self.taken = self.met;
            self.last = fingerprint;
        }
    }

    fn missing(&self) -> u64 {
        u64::from(self.taken.saturating_sub(self.met))
    }
}

/// The per-metric progress of a [`DataCursor`]: a fixed table on a device
/// ([`Metrics`]), any number of metrics on std (a map behind this trait).
pub trait MetricTable {
    /// The progress of `name`, added when it is new; why not when the table cannot keep
    /// it.
    fn progress(&mut self, name: &str) -> Result<&mut Progress, Untracked>;
    /// Calls `each` with every metric's progress.
    fn for_each(&mut self, each: &mut dyn FnMut(&mut Progress));
}

impl<T: MetricTable + ?Sized> MetricTable for &mut T {
    fn progress(&mut self, name: &str) -> Result<&mut Progress, Untracked> {
        (**self).progress(name)
    }

    fn for_each(&mut self, each: &mut dyn FnMut(&mut Progress)) {
        (**self).for_each(each);
    }
}

/// Up to `N` metrics with names of up to `NAME` bytes, found by a linear search (a
/// benchmark has tens of metrics; `hello.bdl` about 30). `NAME` + 20 bytes a metric on a 32-bit target.
///
/// ```
/// use benchlink_core::bench::resume::{MetricTable, Metrics, Untracked};
/// let mut table = Metrics::<1, 4>::new();
/// assert!(table.progress("rps").is_ok());
/// assert_eq!(table.progress("other").err(), Some(Untracked::NameTooLong { max: 4 }));
/// assert_eq!(table.progress("lat").err(), Some(Untracked::TableFull { capacity: 1 }));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Metrics<const N: usize, const NAME: usize> {
    metrics: Vec<(String<NAME>, Progress), N>,
}

impl<const N: usize, const NAME: usize> Metrics<N, NAME> {
    /// An empty table (usable in a `static`).
    pub const fn new() -> Self {
        Metrics {
            metrics: Vec::new(),
        }
    }
}

impl<const N: usize, const NAME: usize> MetricTable for Metrics<N, NAME> {
    fn progress(&mut self, name: &str) -> Result<&mut Progress, Untracked> {
        let at = match self.metrics.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                let name =
                    String::try_from(name).map_err(|()| Untracked::NameTooLong { max: NAME })?;
                self.metrics
                    .push((name, Progress::NEW))
                    .map_err(|_| Untracked::TableFull { capacity: N })?;
                self.metrics.len() - 1
            }
        };
        self.metrics
            .get_mut(at)
            .map(|(_, p)| p)
            .ok_or(Untracked::TableFull { capacity: N })
    }

    fn for_each(&mut self, each: &mut dyn FnMut(&mut Progress)) {
        for (_, p) in &mut self.metrics {
            each(p);
        }
    }
}

/// The cursor of `/data`: per metric, what was taken (see the [module docs](self)).
/// Lines that are not samples (bad lines, too long ones) are one more sequence, counted
/// so that a resumed request reports only those it had not reported.
#[derive(Debug, Clone)]
pub struct DataCursor<T> {
    table: T,
    /// The lines that are not samples, as one sequence.
    bad: Progress,
    /// Requests made; more than one means resumed.
    requests: u32,
    /// Lines of untracked metrics taken on the first request.
    untracked: u64,
}

impl<T: MetricTable> DataCursor<T> {
    /// A cursor before the first request.
    pub const fn new(table: T) -> Self {
        DataCursor {
            table,
            bad: Progress::NEW,
            requests: 1,
            untracked: 0,
        }
    }

    /// A new request begins (after a cut): every metric is met again from its first
    /// line.
    pub fn restart(&mut self) {
        self.requests = self.requests.saturating_add(1);
        self.bad.restart();
        self.table.for_each(&mut Progress::restart);
    }

    /// The next sample of the current request.
    pub fn classify(&mut self, sample: &Sample<'_>) -> Line {
        let first = self.requests == 1;
        match self.table.progress(sample.name) {
            Ok(p) => p.classify(fingerprint_sample(sample)),
            Err(_) if first => Line::New,
            Err(why) => Line::Unresumable(Unresumable::Untracked(why)),
        }
    }

    /// The sample just classified [`Line::New`] was taken.
    pub fn take(&mut self, sample: &Sample<'_>) {
        match self.table.progress(sample.name) {
            Ok(p) => p.take(fingerprint_sample(sample)),
            Err(_) => self.untracked = self.untracked.saturating_add(1),
        }
    }

    /// The request ended normally: whether it had every line taken before.
    pub fn finish(&mut self) -> Result<(), Shortfall> {
        let mut short = Shortfall {
            sequences: 0,
            lines: 0,
        };
        let mut count = |p: &mut Progress| {
            let missing = p.missing();
            if missing > 0 {
                short.sequences += 1;
                short.lines = short.lines.saturating_add(missing);
            }
        };
        self.table.for_each(&mut count);
        count(&mut self.bad);
        if short.sequences == 0 {
            Ok(())
        } else {
            Err(short)
        }
    }

    /// Samples taken over every request (not counting lines that are not samples).
    pub fn taken(&mut self) -> u64 {
        let mut taken = self.untracked;
        self.table
            .for_each(&mut |p| taken = taken.saturating_add(u64::from(p.taken)));
        taken
    }

    /// Requests made after the first (each a resumption).
    pub fn resumptions(&self) -> u32 {
        self.requests - 1
    }
}

/// The cursor of `/log` and `/userlog`: lines taken (see the [module docs](self)).
///
/// ```
/// use benchlink_core::bench::resume::{Line, LogCursor, Shortfall};
/// let mut log = LogCursor::new();
/// assert_eq!(log.classify(b"12:00 started"), Line::New);
/// log.take(b"12:00 started");
/// log.restart(); // cut, asked again: the log is shorter than before
/// assert_eq!(log.finish(), Err(Shortfall { sequences: 1, lines: 1 }));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCursor {
    lines: Progress,
    requests: u32,
}

impl LogCursor {
    /// A cursor before the first request.
    pub const fn new() -> Self {
        LogCursor {
            lines: Progress::NEW,
            requests: 1,
        }
    }

    /// A new request begins (after a cut).
    pub fn restart(&mut self) {
        self.requests = self.requests.saturating_add(1);
        self.lines.restart();
    }

    /// The next line (its bytes, without the line end) of the current request.
    pub fn classify(&mut self, line: &[u8]) -> Line {
        self.lines.classify(fingerprint(FNV_OFFSET, line))
    }

    /// The line just classified [`Line::New`] was taken.
    pub fn take(&mut self, line: &[u8]) {
        self.lines.take(fingerprint(FNV_OFFSET, line));
    }

    /// The request ended normally: whether it had every line taken before.
    pub fn finish(&self) -> Result<(), Shortfall> {
        match self.lines.missing() {
            0 => Ok(()),
            lines => Err(Shortfall {
                sequences: 1,
                lines,
            }),
        }
    }

    /// Lines taken over every request.
    pub fn taken(&self) -> u64 {
        u64::from(self.lines.taken)
    }

    /// Requests made after the first.
    pub fn resumptions(&self) -> u32 {
        self.requests - 1
    }
}

/// A gap in a live tail: the lines the server logged between the cut and the new
/// request are missing, and the server does not say how many (it tails from the moment
/// of each request and keeps no position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Gap {
    /// Lines taken before the gap, over every request.
    pub after_line: u64,
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the live tail resumed after line {}: lines logged while it was cut are missing \
             (how many, the server does not say)",
            self.after_line
        )
    }
}

impl core::error::Error for Gap {}

/// The cursor of `/server_logs`, a live tail: nothing to skip, each resumption a [`Gap`].
///
/// ```
/// use benchlink_core::bench::resume::{Gap, TailCursor};
/// let mut tail = TailCursor::new();
/// tail.take();
/// assert_eq!(tail.restart(), Gap { after_line: 1 });
/// assert_eq!(tail.resumptions(), 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TailCursor {
    taken: u64,
    requests: u32,
}

impl TailCursor {
    /// A cursor before the first request.
    pub const fn new() -> Self {
        TailCursor {
            taken: 0,
            requests: 1,
        }
    }

    /// A new request begins (after a cut): the gap it leaves.
    pub fn restart(&mut self) -> Gap {
        self.requests = self.requests.saturating_add(1);
        Gap {
            after_line: self.taken,
        }
    }

    /// A line was taken.
    pub fn take(&mut self) {
        self.taken = self.taken.saturating_add(1);
    }

    /// Requests made after the first.
    pub fn resumptions(&self) -> u32 {
        self.requests - 1
    }
}

/// A cursor for the lines of format `F`, as a client that resumes any stream drives it:
/// one classification of a decoded line (or its error), whatever the stream.
pub trait StreamCursor<F: LineFormat> {
    /// A new request begins; a live tail says what it could not resume.
    fn restart(&mut self) -> Option<Gap>;
    /// The next line (or the error decoding it) of the current request.
    fn classify(&mut self, line: &Result<F::Item<'_>, F::Error<'_>>) -> Line;
    /// The line just classified [`Line::New`] was taken.
    fn take(&mut self, line: &Result<F::Item<'_>, F::Error<'_>>);
    /// The request ended normally: whether it had every line taken before.
    fn finish(&mut self) -> Result<(), Shortfall>;
    /// Requests made after the first.
    fn resumptions(&self) -> u32;
    /// Lines taken over every request (a new request after any must
    /// [`restart`](Self::restart) the cursor first).
    fn taken(&mut self) -> u64;
}

impl<T: MetricTable> StreamCursor<MetricLine> for DataCursor<T> {
    fn restart(&mut self) -> Option<Gap> {
        DataCursor::restart(self);
        None
    }

    fn classify(&mut self, line: &Result<Sample<'_>, SampleError>) -> Line {
        match line {
            Ok(sample) => DataCursor::classify(self, sample),
            Err(_) => self.bad.classify(0),
        }
    }

    fn take(&mut self, line: &Result<Sample<'_>, SampleError>) {
        match line {
            Ok(sample) => DataCursor::take(self, sample),
            Err(_) => self.bad.take(0),
        }
    }

    fn finish(&mut self) -> Result<(), Shortfall> {
        DataCursor::finish(self)
    }

    fn resumptions(&self) -> u32 {
        DataCursor::resumptions(self)
    }

    fn taken(&mut self) -> u64 {
        DataCursor::taken(self).saturating_add(u64::from(self.bad.taken))
    }
}

/// The bytes a log line is told apart by (a line too long to keep has none).
fn log_bytes<'l>(line: &Result<&'l str, LogLineError<'l>>) -> &'l [u8] {
    match line {
        Ok(text) => text.as_bytes(),
        Err(LogLineError::NotUtf8 { line }) => line,
        Err(_) => b"",
    }
}

impl StreamCursor<LogLine> for LogCursor {
    fn restart(&mut self) -> Option<Gap> {
        LogCursor::restart(self);
        None
    }

    fn classify(&mut self, line: &Result<&str, LogLineError<'_>>) -> Line {
        LogCursor::classify(self, log_bytes(line))
    }

    fn take(&mut self, line: &Result<&str, LogLineError<'_>>) {
        LogCursor::take(self, log_bytes(line));
    }

    fn finish(&mut self) -> Result<(), Shortfall> {
        LogCursor::finish(self)
    }

    fn resumptions(&self) -> u32 {
        LogCursor::resumptions(self)
    }

    fn taken(&mut self) -> u64 {
        LogCursor::taken(self)
    }
}

impl StreamCursor<LogLine> for TailCursor {
    fn restart(&mut self) -> Option<Gap> {
        Some(TailCursor::restart(self))
    }

    fn classify(&mut self, _line: &Result<&str, LogLineError<'_>>) -> Line {
        Line::New
    }

    fn take(&mut self, _line: &Result<&str, LogLineError<'_>>) {
        TailCursor::take(self);
    }

    fn finish(&mut self) -> Result<(), Shortfall> {
        Ok(())
    }

    fn resumptions(&self) -> u32 {
        TailCursor::resumptions(self)
    }

    fn taken(&mut self) -> u64 {
        self.taken
    }
}

/// One line of a request, as every resuming client hands it out: skipped when taken
/// before; handed to `on_line` and then taken, unless `on_line` stops there (a line it
/// stops at is met again by the next request); or what keeps it from being resumed,
/// reported to `on_line` as an `Err` item.
///
/// ```
/// use benchlink_core::bench::resume::{hand_out, LogCursor};
/// use benchlink_core::bench::{LogLine, LogLineError};
/// use core::ops::ControlFlow;
/// let mut cursor = LogCursor::new();
/// let mut seen = Vec::new();
/// let mut on_line = |l: Result<&str, LogLineError<'_>>| { seen.push(l.unwrap().to_owned()); ControlFlow::Continue(()) };
/// let _ = hand_out::<LogLine, _, _>(&mut cursor, Ok("one"), &mut on_line);
/// cursor.restart(); // a new request: "one" again, then "two"
/// let _ = hand_out::<LogLine, _, _>(&mut cursor, Ok("one"), &mut on_line);
/// let _ = hand_out::<LogLine, _, _>(&mut cursor, Ok("two"), &mut on_line);
/// assert_eq!(seen, ["one", "two"]);
/// ```
pub fn hand_out<'i, 'e, F, C, E>(
    cursor: &mut C,
    line: Result<F::Item<'i>, F::Error<'e>>,
    on_line: &mut E,
) -> ControlFlow<()>
where
    F: LineFormat,
    C: StreamCursor<F> + ?Sized,
    E: FnMut(Result<F::Item<'i>, F::Error<'e>>) -> ControlFlow<()>,
{
    match cursor.classify(&line) {
        Line::Seen => ControlFlow::Continue(()),
        Line::New => {
            let flow = on_line(line);
            if flow.is_continue() {
                cursor.take(&line);
            }
            flow
        }
        Line::Unresumable(why) => on_line(Err(Report::Unresumable(why).into())),
    }
}

/// The tries of one JSON call, as every client drives them: a request that changes
/// nothing ([`Request::IDEMPOTENT`](super::Request::IDEMPOTENT)) is tried again as the
/// policy says after a failure worth it, one that changes state never. Not generic, so
/// that the loop of each request type around it stays small (flash on a device).
///
/// ```
/// use benchlink_core::bench::resume::{CallRetry, Fault, Retry};
/// use benchlink_core::time::Instant;
/// let policy = Some(Retry { jitter_seed: 0, ..Retry::DEFAULT });
/// let t = Instant::from_secs(1);
/// let mut status = CallRetry::new(policy, true);
/// assert_eq!(status.after(t, Err(Fault::Transient)), Some(t + Retry::DEFAULT.interval));
/// assert_eq!(status.after(t, Ok(503)), Some(t + 2 * Retry::DEFAULT.interval));
/// assert_eq!(status.after(t, Ok(200)), None); // the reply is the outcome
/// let mut stop = CallRetry::new(policy, false);
/// assert_eq!(stop.after(t, Err(Fault::Transient)), None); // sent once
/// ```
#[derive(Debug, Clone)]
pub struct CallRetry {
    retrying: Option<Retrying>,
    reached: bool,
}

impl CallRetry {
    /// The tries of a call of a request that is (or is not) `idempotent`, under
    /// `policy` (`None`: one try).
    pub fn new(policy: Option<Retry>, idempotent: bool) -> Self {
        CallRetry {
            retrying: policy.filter(|_| idempotent).map(Retrying::new),
            reached: false,
        }
    }

    /// A try ended at `now` with a response of HTTP status `Ok(status)`, or failed with
    /// `Err(fault)`: when to try again, or `None` when this is the outcome.
    pub fn after(&mut self, now: Instant, outcome: Result<u16, Fault>) -> Option<Instant> {
        let fault = match outcome {
            Ok(status) => Fault::of_status(status),
            Err(fault) => fault,
        };
        let at = match outcome {
            Ok(status) if status < 500 => None,
            _ => self
                .retrying
                .as_mut()
                .and_then(|r| r.may_try_again(now, fault, self.reached)),
        };
        self.reached |= fault != Fault::Connect;
        at
    }
}

/// One stream resumed over as many requests as it takes, as every client drives it:
/// the client sends the requests and moves the bytes; this decides what happens around
/// them. Before each request, [`begin`](Self::begin) (the cursor restarts once lines
/// were taken, and a live tail's gap is reported); each line through [`hand_out`];
/// at a normal end, [`end`](Self::end) (a shortfall is reported); after a failed try,
/// [`failed`](Self::failed) (when to try again, the attempts counting from zero again
/// after a try that took lines).
///
/// ```
/// use benchlink_core::bench::resume::{Fault, LogCursor, Resumption, Retry};
/// use benchlink_core::bench::{LogLine, LogLineError};
/// use benchlink_core::time::Instant;
/// use core::ops::ControlFlow;
/// let mut cursor = LogCursor::new();
/// let mut r = Resumption::new(Some(Retry { jitter_seed: 0, ..Retry::DEFAULT }));
/// let mut on_line = |_: Result<&str, LogLineError<'_>>| ControlFlow::Continue(());
/// let _ = r.begin::<LogLine, _, _>(&mut cursor, &mut on_line);
/// // The first request is cut: try again 200 ms later.
/// let t = Instant::from_secs(1);
/// assert_eq!(r.failed::<LogLine, _>(&mut cursor, t, Fault::Transient), Some(t + Retry::DEFAULT.interval));
/// ```
#[derive(Debug, Clone)]
pub struct Resumption {
    retrying: Option<Retrying>,
    /// The server answered once: a refused connection is an outage, not a wrong address.
    reached: bool,
    /// Lines taken when the current try began.
    mark: u64,
}

impl Resumption {
    /// A stream not requested yet, tried again as `policy` says (`None`: never).
    pub fn new(policy: Option<Retry>) -> Self {
        Resumption {
            retrying: policy.map(Retrying::new),
            reached: false,
            mark: 0,
        }
    }

    /// The client knows it reached the server before (an earlier request on the same
    /// client): a refused connection is then an outage.
    pub fn reached(&mut self) {
        self.reached = true;
    }

    /// A request is about to be sent: after lines were taken the cursor restarts (the
    /// server restreams from the first line) and a live tail's [`Gap`] goes to
    /// `on_line`; `Break` when `on_line` stopped there.
    pub fn begin<'i, 'e, F, C, E>(&mut self, cursor: &mut C, on_line: &mut E) -> ControlFlow<()>
    where
        F: LineFormat,
        C: StreamCursor<F> + ?Sized,
        E: FnMut(Result<F::Item<'i>, F::Error<'e>>) -> ControlFlow<()>,
    {
        self.mark = cursor.taken();
        if self.mark == 0 {
            return ControlFlow::Continue(());
        }
        match cursor.restart() {
            Some(gap) => on_line(Err(Report::Gap(gap).into())),
            None => ControlFlow::Continue(()),
        }
    }

    /// The response ended normally: a [`Shortfall`] goes to `on_line`.
    pub fn end<'i, 'e, F, C, E>(&mut self, cursor: &mut C, on_line: &mut E)
    where
        F: LineFormat,
        C: StreamCursor<F> + ?Sized,
        E: FnMut(Result<F::Item<'i>, F::Error<'e>>) -> ControlFlow<()>,
    {
        if let Err(short) = cursor.finish() {
            let _ = on_line(Err(Report::Shortfall(short).into()));
        }
    }

    /// The try failed at `now` with `fault`: when to try again, or `None` when the
    /// failure is the outcome (see [`Retrying::may_try_again`]).
    pub fn failed<F, C>(&mut self, cursor: &mut C, now: Instant, fault: Fault) -> Option<Instant>
    where
        F: LineFormat,
        C: StreamCursor<F> + ?Sized,
    {
        let retrying = self.retrying.as_mut()?;
        if cursor.taken() > self.mark {
            retrying.progressed();
        }
        let at = retrying.may_try_again(now, fault, self.reached);
        self.reached |= fault != Fault::Connect;
        at
    }
}

const FNV_OFFSET: u32 = 0x811C_9DC5;

/// FNV-1a over `bytes`, from `hash`: a fingerprint, not a defence (a server could make
/// two lines collide; a collision only hides a divergence that the count alone would
/// have hidden too).
fn fingerprint(mut hash: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    hash
}

fn fingerprint_sample(s: &Sample<'_>) -> u32 {
    let hash = fingerprint(FNV_OFFSET, &s.timestamp.to_le_bytes());
    let hash = fingerprint(hash, s.name.as_bytes());
    fingerprint(fingerprint(hash, b"\t"), s.value.as_str().as_bytes())
}

/// When a client tries again after a failure it may recover from (see
/// [`ClientError::is_transient`](super::exchange::ClientError::is_transient)): a stream
/// cut, a reset, a refused connection, a 5xx, a silent server. The same shape as the
/// messaging client's reconnect options, and the same backoff:
///
/// ```text
/// wait = min(interval · 2^failures, max_interval) − uniform[0, that / 4]
/// ```
///
/// `attempts` counts consecutive failed tries; a try that makes progress (a stream that
/// delivered a line, a call that was answered) starts the count again.
///
/// ```
/// use benchlink_core::bench::resume::{Retry, Retrying};
/// use benchlink_core::time::Instant;
/// use core::time::Duration;
/// let policy = Retry { attempts: Some(2), jitter_seed: 0, ..Retry::DEFAULT };
/// let mut retrying = Retrying::new(policy);
/// let t = Instant::from_secs(10);
/// assert_eq!(retrying.failed(t), Some(t + policy.interval));
/// assert_eq!(retrying.failed(t), Some(t + 2 * policy.interval));
/// assert_eq!(retrying.failed(t), None); // two tries again, both failed: give up
/// retrying.progressed();
/// assert!(retrying.failed(t).is_some());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Retry {
    /// The first wait (default 200 ms).
    pub interval: Duration,
    /// The longest wait (default 5 s).
    pub max_interval: Duration,
    /// Consecutive failed tries after which the failure is the outcome (default 20:
    /// about 80 s of a server that does not answer; `None`: never give up).
    pub attempts: Option<u32>,
    /// Whether a client that never reached the server tries again when it cannot
    /// connect (default false, as the messaging client's `retry_first_connect`: a wrong
    /// address fails at once; once the server answered, a refused connection is an
    /// outage and is tried again).
    pub retry_first_connect: bool,
    /// Seed of the jitter; `0` disables it (for tests). Give every client its own.
    pub jitter_seed: u64,
}

impl Retry {
    /// The defaults.
    ///
    /// ```
    /// use benchlink_core::bench::resume::Retry;
    /// assert_eq!(Retry::DEFAULT, Retry::default());
    /// ```
    pub const DEFAULT: Retry = Retry {
        interval: Duration::from_millis(200),
        max_interval: Duration::from_secs(5),
        attempts: Some(20),
        retry_first_connect: false,
        jitter_seed: 0x5EED_F00D_B0C0_FF5E,
    };
}

impl Default for Retry {
    fn default() -> Self {
        Retry::DEFAULT
    }
}

/// How a retry policy sees a failed try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Fault {
    /// The connection could not be opened: an outage, or a wrong address.
    Connect,
    /// Another failure worth trying again (see
    /// [`ClientError::is_transient`](super::exchange::ClientError::is_transient)).
    Transient,
    /// Trying again would fail the same way.
    Final,
}

impl Fault {
    /// How a server's error reply with HTTP `status` is seen: a 5xx may pass.
    ///
    /// ```
    /// use benchlink_core::bench::resume::Fault;
    /// assert_eq!((Fault::of_status(503), Fault::of_status(404)), (Fault::Transient, Fault::Final));
    /// ```
    pub fn of_status(status: u16) -> Fault {
        if status >= 500 {
            Fault::Transient
        } else {
            Fault::Final
        }
    }

    /// How `e` is seen.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::ClientError;
    /// use benchlink_core::bench::resume::Fault;
    /// assert_eq!(Fault::of(&ClientError::<'_, (), &str>::Io("reset")), Fault::Transient);
    /// let too_large: ClientError<'_, (), ()> = ClientError::BodyTooLarge { max: 1 };
    /// assert_eq!(Fault::of(&too_large), Fault::Final);
    /// ```
    pub fn of<C, I>(e: &ClientError<'_, C, I>) -> Fault {
        match e {
            ClientError::Connect(_)
            | ClientError::Timeout {
                waiting: Waiting::Connect,
                ..
            } => Fault::Connect,
            e if e.is_transient() => Fault::Transient,
            _ => Fault::Final,
        }
    }
}

/// The state of [`Retry`] over one stream or call.
#[derive(Debug, Clone)]
pub struct Retrying {
    policy: Retry,
    backoff: Backoff,
}

impl Retrying {
    /// Nothing failed yet.
    pub fn new(policy: Retry) -> Self {
        let mut backoff = Backoff::new(policy.jitter_seed);
        backoff.reset(policy.attempts);
        Retrying { policy, backoff }
    }

    /// A try failed at `now` with a failure worth trying again: when to try, or `None`
    /// when the attempts are used up (the failure is the outcome).
    pub fn failed(&mut self, now: Instant) -> Option<Instant> {
        if !self.backoff.may_retry() {
            return None;
        }
        self.backoff.attempt_started(now, true);
        let at = self
            .backoff
            .next_attempt_at(now, self.policy.interval, self.policy.max_interval);
        self.backoff.record_failure();
        Some(at)
    }

    /// A try failed at `now` with `fault`, in a client that has (`reached`) or has not
    /// yet had a response from the server: when to try again, or `None` when the
    /// failure is the outcome (a [`Fault::Final`], a first connect that failed without
    /// [`Retry::retry_first_connect`], or the attempts used up).
    ///
    /// ```
    /// use benchlink_core::bench::exchange::ClientError;
    /// use benchlink_core::bench::resume::{Fault, Retry, Retrying};
    /// use benchlink_core::time::Instant;
    /// let mut r = Retrying::new(Retry { jitter_seed: 0, ..Retry::DEFAULT });
    /// let refused = Fault::of(&ClientError::<'_, &str, &str>::Connect("refused"));
    /// assert_eq!(r.may_try_again(Instant::ZERO, refused, false), None); // a wrong address
    /// assert!(r.may_try_again(Instant::ZERO, refused, true).is_some()); // an outage
    /// ```
    pub fn may_try_again(&mut self, now: Instant, fault: Fault, reached: bool) -> Option<Instant> {
        match fault {
            Fault::Final => None,
            Fault::Connect if !reached && !self.policy.retry_first_connect => None,
            Fault::Connect | Fault::Transient => self.failed(now),
        }
    }

    /// A try made progress: the attempts count from zero again.
    pub fn progressed(&mut self) {
        self.backoff.reset(self.policy.attempts);
    }
}

#[cfg(test)]
mod tests;
