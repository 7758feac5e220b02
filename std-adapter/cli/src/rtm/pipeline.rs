//! The acknowledged publish pipeline of `publish` and `replay`: a producer thread reads
//! the input and publishes while up to a window of publishes wait for their
//! acknowledgement; the acknowledgements are settled, in publication order, by the
//! client's callbacks on its I/O thread, which print them (`publish --jsonl`) as they
//! settle. The main thread only keeps time: it sleeps until the oldest publish's reply
//! is due, and is woken once, at the end.
//!
//! Why this shape: at hundreds of thousands of publishes a second, a hand-off per
//! message costs more than the publish itself. Here an acknowledgement costs one lock of
//! the [`Ledger`] and, in order (the usual case on one connection), no allocation: its
//! position is written straight from the reply. The producer publishes the lines already
//! read in one [`Client::batch`]: one lock of the client and one wake-up of its I/O
//! thread per burst of input, not per line (per line, the producer and the I/O thread
//! took turns on the client's lock, a context switch every dozen messages).

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use benchlink_core::json;
use benchlink_core::rtm::RequestError;
use benchlink_std::rtm::{Batch, Callback, Client, Error, Response};

use super::message_json;
use crate::fail::{Fail, EXIT_INVALID};

/// Longest input line (a message for publish, a record for replay) held in memory.
pub(super) const MAX_LINE: usize = 16 << 20;

/// The lines of an input (numbered from 1, without their line ending), each at most
/// [`MAX_LINE`] bytes, read into one reused buffer: input without newlines cannot
/// exhaust memory, and a line costs no allocation. A longer line, or one that is not
/// UTF-8, is an invalid value; `name` says where in messages.
pub(super) struct Lines<R> {
    input: BufReader<R>,
    /// Where the lines come from, for messages.
    pub(super) name: String,
    /// The last line read.
    line: String,
    n: usize,
}

impl<R: Read> Lines<R> {
    pub(super) fn new(input: R, name: impl Into<String>) -> Self {
        Lines {
            input: BufReader::with_capacity(64 << 10, input),
            name: name.into(),
            line: String::new(),
            n: 0,
        }
    }

    /// Whether the next line is already read (the next call does not wait for input).
    pub(super) fn buffered(&self) -> bool {
        !self.input.buffer().is_empty()
    }

    /// Whether a whole line is already read (taking it reads nothing more).
    pub(super) fn has_line(&self) -> bool {
        // Up to the first newline only: the next line's length.
        self.input.buffer().contains(&b'\n')
    }

    /// The next line and its number; `None` at the end.
    pub(super) fn next_line(&mut self) -> Option<Result<(usize, &str), Fail>> {
        Some(self.advance()?.map(|()| (self.n, self.line.as_str())))
    }

    /// Reads the next line into [`line`](Self::line); `None` at the end.
    fn advance(&mut self) -> Option<Result<(), Fail>> {
        // The buffer is handed back and forth between the `String` and its bytes: no
        // allocation per line, and one UTF-8 check.
        let mut buf = std::mem::take(&mut self.line).into_bytes();
        buf.clear();
        self.n += 1;
        let (n, name) = (self.n, &self.name);
        let read = (&mut self.input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf);
        match read {
            Ok(0) => None,
            Err(e) => Some(Err(Fail(1, format!("{name}: {e}")))),
            Ok(_) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                    if buf.last() == Some(&b'\r') {
                        buf.pop();
                    }
                } else if buf.len() > MAX_LINE {
                    return Some(Err(Fail(
                        EXIT_INVALID,
                        format!("{name}:{n}: a line longer than {MAX_LINE} bytes"),
                    )));
                }
                match String::from_utf8(buf) {
                    Ok(line) => {
                        self.line = line;
                        Some(Ok(()))
                    }
                    Err(_) => Some(Err(Fail(EXIT_INVALID, format!("{name}:{n}: not UTF-8")))),
                }
            }
        }
    }
}

/// What [`run`] did.
pub(super) struct Published {
    /// Messages sent.
    pub(super) sent: u64,
    /// Messages refused or not acknowledged.
    pub(super) failed: u64,
}

/// Runs `produce` on its own thread with a [`Publisher`] until it returns and every
/// publish it made with `acks` is settled. With `print_acks`, each acknowledged message's
/// `{"channel":…,"position":…}` line goes to stdout, in publication order; refusals are
/// said on stderr (`Publish failed: …`), after which the producer is asked to stop. A
/// publish whose reply has not come `timeout` after it was sent ends the run with an
/// error.
pub(super) fn run(
    client: &Client,
    window: usize,
    timeout: Duration,
    acks: bool,
    print_acks: bool,
    produce: impl FnOnce(&mut Publisher) -> Result<(), Fail> + Send + 'static,
) -> Result<Published, Fail> {
    let ledger = Arc::new(Ledger {
        book: Mutex::new(Book {
            first: 0,
            entries: VecDeque::new(),
            failed: 0,
            out: print_acks.then(|| BufWriter::with_capacity(64 << 10, io::stdout())),
            producer_waits: false,
            keeper_waits: false,
            done: None,
        }),
        changed: Condvar::new(),
        refused: AtomicBool::new(false),
        window: window.max(1),
        timeout,
    });
    let mut publisher = Publisher {
        client: client.clone(),
        slots: Slots {
            ledger: Arc::clone(&ledger),
            acks,
            channel: None,
        },
        sent: 0,
    };
    std::thread::Builder::new()
        .name("benchlink-publish".into())
        .spawn(move || {
            // Said even if `produce` panics: the main thread would otherwise wait for it.
            let mut end = Ended {
                ledger: Arc::clone(&publisher.slots.ledger),
                sent: 0,
                result: Err(Fail(1, "the publisher ended unexpectedly".into())),
            };
            end.result = produce(&mut publisher);
            end.sent = publisher.sent;
        })
        .map_err(|e| Fail(1, format!("cannot spawn a thread: {e}")))?;
    ledger.keep_time()
}

/// Tells the [`Ledger`] the producer is done, with its count and result, when dropped.
struct Ended {
    ledger: Arc<Ledger>,
    sent: u64,
    result: Result<(), Fail>,
}

impl Drop for Ended {
    fn drop(&mut self) {
        let result = std::mem::replace(&mut self.result, Ok(()));
        let mut book = self.ledger.book();
        book.done = Some((self.sent, result));
        self.ledger.wake_keeper(&mut book);
    }
}

/// Acknowledged publishes in flight, in publication order, shared by the producer
/// (which adds one per publish), the client's callbacks (which settle them) and the
/// main thread (which keeps their deadlines).
struct Ledger {
    book: Mutex<Book>,
    changed: Condvar,
    /// A publish was refused or went unacknowledged: the producer should stop.
    refused: AtomicBool,
    /// Most publishes in flight at once.
    window: usize,
    /// How long after its publish a reply is due.
    timeout: Duration,
}

struct Book {
    /// Sequence number of `entries[0]`.
    first: u64,
    /// Publishes not yet reported, oldest first; the oldest is never settled (a settled
    /// publish at the front is reported and removed at once).
    entries: VecDeque<Entry>,
    /// Publishes refused or not acknowledged.
    failed: u64,
    /// Where acknowledgements are printed, if they are.
    out: Option<BufWriter<Stdout>>,
    /// The producer waits for room in the window.
    producer_waits: bool,
    /// The main thread waits for the end (or the oldest deadline).
    keeper_waits: bool,
    /// The producer finished: publishes it sent in all, and how it ended.
    done: Option<(u64, Result<(), Fail>)>,
}

struct Entry {
    sent_at: Instant,
    channel: Arc<str>,
    /// The reply of a publish settled behind an older one still waiting: its position,
    /// or why there is none.
    outcome: Option<Result<String, String>>,
}

/// How a publish's reply reads: the position (as the reply has it, a JSON string's
/// escaped contents, borrowed from the reply), or why there is none.
type Outcome<'r> = Result<&'r str, String>;

fn outcome<'r>(response: &'r Response<'_>) -> Outcome<'r> {
    match response {
        Response::Reply(r) if r.is_ok() => Ok(position(&r.body).unwrap_or_default()),
        Response::Reply(r) => Err(format!("{}: {}", r.action, r.body)),
        Response::Timeout => Err("no reply in time".to_owned()),
        Response::Disconnected => Err("connection lost before the acknowledgement".to_owned()),
    }
}

/// The `position` member of a publish's reply body, without copying it out.
fn position(body: &str) -> Option<&str> {
    let member = json::parse(body, json::DEFAULT_MAX_DEPTH)
        .ok()?
        .get("position")?;
    Some(member.as_str()?.as_raw())
}

impl Ledger {
    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits while the window is full; `false` when it stayed full for `timeout`.
    fn wait_room(&self) -> bool {
        let mut book = self.book();
        // The clock is read for the wait only when there is one.
        let mut start = None;
        while book.entries.len() >= self.window {
            let start = *start.get_or_insert_with(Instant::now);
            let Some(left) = self.timeout.checked_sub(start.elapsed()) else {
                return false;
            };
            book.producer_waits = true;
            book = self
                .changed
                .wait_timeout(book, left)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
            book.producer_waits = false;
        }
        true
    }

    /// Whether the window has room for one more publish.
    fn has_room(&self) -> bool {
        self.book().entries.len() < self.window
    }

    /// Takes a place for the next publish (after [`wait_room`](Self::wait_room) or
    /// [`has_room`](Self::has_room) said there is one: only the producer takes places);
    /// its sequence number.
    fn open(&self, channel: &Arc<str>) -> u64 {
        let mut book = self.book();
        if book.entries.is_empty() && book.keeper_waits {
            // The main thread waits with no deadline while nothing is in flight: this
            // publish gives it one.
            self.changed.notify_all();
        }
        book.entries.push_back(Entry {
            sent_at: Instant::now(),
            channel: Arc::clone(channel),
            outcome: None,
        });
        book.first + u64::try_from(book.entries.len()).unwrap_or(u64::MAX) - 1
    }

    /// Gives back the place of the newest publish: the client refused it at the call
    /// (its callback was dropped uncalled).
    fn cancel_last(&self) {
        self.book().entries.pop_back();
    }

    /// The reply to publish `seq`: reported now if it is the oldest (with every settled
    /// one behind it), else kept until the older ones are.
    fn settle(&self, seq: u64, response: &Response<'_>) {
        let mut book = self.book();
        let Some(at) = seq
            .checked_sub(book.first)
            .and_then(|at| usize::try_from(at).ok())
            .filter(|&at| at < book.entries.len())
        else {
            return;
        };
        if at > 0 {
            let owned = outcome(response).map(str::to_owned);
            if let Some(entry) = book.entries.get_mut(at) {
                entry.outcome = Some(owned);
            }
            return;
        }
        let Some(oldest) = book.entries.pop_front() else {
            return;
        };
        book.first += 1;
        self.report(&mut book, &oldest.channel, outcome(response));
        while let Some(outcome) = book.entries.front_mut().and_then(|e| e.outcome.take()) {
            let Some(entry) = book.entries.pop_front() else {
                break;
            };
            book.first += 1;
            self.report(
                &mut book,
                &entry.channel,
                outcome.as_deref().map_err(Clone::clone),
            );
        }
        // A producer waiting for room is woken once a sixteenth of the window is free,
        // not at every slot: it then publishes a batch per wake-up instead of one
        // message, and the window stays at least 15/16 full across a slow link.
        let low = self.window - (self.window / 16).max(1);
        if book.producer_waits && book.entries.len() <= low {
            self.changed.notify_all();
        }
        if book.entries.is_empty() {
            // Nothing more is on its way: what was printed goes out now (one write for
            // a burst of acknowledgements, and at once for a single one).
            if let Some(out) = book.out.as_mut() {
                let _ = out.flush();
            }
            self.wake_keeper(&mut book);
        }
    }

    fn report(&self, book: &mut Book, channel: &str, outcome: Outcome<'_>) {
        match outcome {
            Ok(position) => {
                if let Some(out) = book.out.as_mut() {
                    let _ = write_ack(out, channel, position);
                }
            }
            Err(why) => {
                eprintln!("Publish failed: {channel}: {why}");
                book.failed += 1;
                self.refused.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Wakes the main thread if it waits and the run may be over.
    fn wake_keeper(&self, book: &mut Book) {
        if book.keeper_waits && book.done.is_some() && book.entries.is_empty() {
            self.changed.notify_all();
        }
    }

    /// Prints what is settled so far: the producer is about to wait for input.
    fn flush(&self) {
        if let Some(out) = self.book().out.as_mut() {
            let _ = out.flush();
        }
    }

    /// The main thread's part: waits until the producer is done and every publish is
    /// settled, failing when the oldest one's reply is overdue.
    fn keep_time(&self) -> Result<Published, Fail> {
        let mut book = self.book();
        loop {
            if book.done.is_some() && book.entries.is_empty() {
                break;
            }
            let due = book.entries.front().map(|e| e.sent_at + self.timeout);
            let left = due.map(|due| due.saturating_duration_since(Instant::now()));
            if left.is_some_and(|left| left.is_zero()) {
                let waiting = book.entries.iter().filter(|e| e.outcome.is_none()).count();
                let timeout = self.timeout;
                return Err(Fail(
                    1,
                    format!("{waiting} publishes remain unacked after {timeout:?}"),
                ));
            }
            book.keeper_waits = true;
            book = match left {
                Some(left) => self
                    .changed
                    .wait_timeout(book, left)
                    .map_or_else(|e| e.into_inner().0, |(g, _)| g),
                None => self
                    .changed
                    .wait(book)
                    .unwrap_or_else(PoisonError::into_inner),
            };
            book.keeper_waits = false;
        }
        if let Some(out) = book.out.as_mut() {
            let _ = out.flush();
        }
        match book.done.take() {
            Some((_, Err(e))) => Err(e),
            Some((sent, Ok(()))) => Ok(Published {
                sent,
                failed: book.failed,
            }),
            None => Ok(Published {
                sent: 0,
                failed: book.failed,
            }),
        }
    }
}

/// `{"channel":…,"position":…}` and a newline: one acknowledgement of `publish --jsonl`,
/// written straight out (no JSON value built per line). `position` is a JSON string's
/// contents, escaped, as the reply had it.
fn write_ack(out: &mut impl Write, channel: &str, position: &str) -> io::Result<()> {
    out.write_all(b"{\"channel\":")?;
    serde_json::to_writer(&mut *out, channel)?;
    out.write_all(b",\"position\":\"")?;
    out.write_all(position.as_bytes())?;
    out.write_all(b"\"}\n")
}

/// Most messages published in one batch of the client (one lock, one wake-up of its I/O
/// thread): enough to spread those costs thin, short enough that the I/O thread, which
/// waits while a batch runs, is not held for long (about a hundred microseconds).
const MAX_BATCH: usize = 512;

/// The producer's side of [`run`].
pub(super) struct Publisher {
    client: Client,
    slots: Slots,
    /// Messages sent.
    pub(super) sent: u64,
}

/// What one message needs to go out: its place in the window and its callback.
struct Slots {
    ledger: Arc<Ledger>,
    acks: bool,
    /// The channel of the last acknowledged publish: one shared name for a run of
    /// publishes to the same channel (the usual case), not a copy per message.
    channel: Option<Arc<str>>,
}

/// How the client took one message.
enum Offer {
    Sent,
    /// Its queue is full: wait for room, then offer the message again.
    Full,
    /// Not JSON: nothing was sent.
    Invalid,
}

impl Slots {
    /// Publishes `json` in `batch`, with a place in the window (there must be room: see
    /// [`Ledger::wait_room`]) and a callback that settles it.
    fn offer(&mut self, batch: &mut Batch<'_>, channel: &str, json: &str) -> Result<Offer, Error> {
        let callback = if self.acks {
            let name = match &self.channel {
                Some(name) if **name == *channel => name,
                _ => self.channel.insert(Arc::from(channel)),
            };
            let seq = self.ledger.open(name);
            // Only the ledger and the number: settling needs nothing else.
            let ledger = Arc::clone(&self.ledger);
            Some(Box::new(move |response: Response<'_>| ledger.settle(seq, &response)) as Callback)
        } else {
            None
        };
        let result = batch.publish_json(channel, json, callback);
        if result.is_err() && self.acks {
            // Refused at the call: its callback was dropped uncalled.
            self.ledger.cancel_last();
        }
        match result {
            Ok(()) => Ok(Offer::Sent),
            Err(Error::Request(RequestError::Full)) => Ok(Offer::Full),
            Err(Error::Request(RequestError::InvalidJson)) => Ok(Offer::Invalid),
            Err(e) => Err(e),
        }
    }

    /// Whether the window has room for one more.
    fn has_room(&self) -> bool {
        !self.acks || self.ledger.has_room()
    }
}

impl Publisher {
    /// Publishes one message, waiting for room while the client's queue is full (its
    /// `max_queue_size` requests waiting, or its buffers): the input is read only as fast
    /// as the link drains, and every line is sent.
    pub(super) fn publish(&mut self, channel: &str, json: &str) -> Result<(), Fail> {
        if self.send(channel, json)? {
            Ok(())
        } else {
            let why = RequestError::InvalidJson.to_string();
            Err(Fail(1, format!("publishing to {channel}: {why}")))
        }
    }

    /// [`publish`](Self::publish), except that text the client refuses as not JSON is
    /// `Ok(false)`, nothing sent, for the caller to publish otherwise.
    fn send(&mut self, channel: &str, json: &str) -> Result<bool, Fail> {
        loop {
            self.wait_room()?;
            let slots = &mut self.slots;
            let offer = self.client.batch(|batch| slots.offer(batch, channel, json));
            match offer.map_err(|e| self.refused_at_call(channel, e.to_string()))? {
                Offer::Sent => {
                    self.sent += 1;
                    return Ok(true);
                }
                Offer::Invalid => return Ok(false),
                Offer::Full => match self.client.wait_for_room(self.slots.ledger.timeout) {
                    Ok(true) => {}
                    Ok(false) => {
                        let why = format!(
                            "no room in the client's queue for {:?}",
                            self.slots.ledger.timeout
                        );
                        return Err(self.refused_at_call(channel, why));
                    }
                    Err(e) => return Err(self.refused_at_call(channel, e.to_string())),
                },
            }
        }
    }

    /// Publishes the next line of `input` to `channel` (waiting for it), then, in the
    /// same batch of the client, the lines after it that are already read, while the
    /// window has room: one lock of the client and one wake-up per burst of input. A
    /// line is published as it is when it is JSON, else as a string (always, with
    /// `as_string`). How many lines were published; `None` at the end of the input.
    pub(super) fn publish_lines<R: Read>(
        &mut self,
        input: &mut Lines<R>,
        channel: &str,
        as_string: bool,
    ) -> Result<Option<u64>, Fail> {
        self.wait_room()?;
        if !input.buffered() {
            // What settled so far is printed before the wait for input.
            self.slots.ledger.flush();
        }
        match input.advance() {
            None => return Ok(None),
            Some(read) => read?,
        }
        let (mut count, mut stalled) = (0u64, None);
        let slots = &mut self.slots;
        self.client.batch(|batch| -> Result<(), Fail> {
            loop {
                let (n, text) = (input.n, input.line.as_str());
                let text = if as_string { text } else { text.trim_end() };
                let fail = |e: Error| Fail(1, format!("publishing to {channel}: {e}"));
                // Read as JSON once, by the client as it encodes the message; only text
                // it refuses is looked at again, as `message_json` reads it.
                let mut offer = Offer::Invalid;
                if !as_string {
                    offer = slots.offer(batch, channel, text.trim()).map_err(fail)?;
                }
                if let Offer::Invalid = offer {
                    let json = message_json(text, as_string)
                        .map_err(|e| Fail(EXIT_INVALID, format!("{}:{n}: {e}", input.name)))?;
                    offer = slots.offer(batch, channel, &json).map_err(fail)?;
                    if let Offer::Full = offer {
                        stalled = Some(json.into_owned());
                        return Ok(());
                    }
                }
                match offer {
                    Offer::Sent => count += 1,
                    // Rare (the client's buffers are full): the line is kept while the
                    // batch ends and the producer waits for room.
                    Offer::Full => {
                        stalled = Some(text.trim().to_owned());
                        return Ok(());
                    }
                    Offer::Invalid => {
                        let why = RequestError::InvalidJson.to_string();
                        return Err(Fail(1, format!("publishing to {channel}: {why}")));
                    }
                }
                let more = count < MAX_BATCH as u64
                    && slots.has_room()
                    && input.has_line()
                    && !slots.ledger.refused.load(Ordering::Relaxed);
                if !more {
                    return Ok(());
                }
                match input.advance() {
                    Some(read) => read?,
                    None => return Ok(()),
                }
            }
        })?;
        self.sent += count;
        if let Some(json) = stalled {
            self.publish(channel, &json)?;
            count += 1;
        }
        Ok(Some(count))
    }

    /// Waits while the window is full (acknowledged publishes only).
    fn wait_room(&self) -> Result<(), Fail> {
        let ledger = &self.slots.ledger;
        if self.slots.acks && !ledger.wait_room() {
            return Err(Fail(
                1,
                format!(
                    "{} messages unacknowledged for {:?}",
                    ledger.window, ledger.timeout
                ),
            ));
        }
        Ok(())
    }

    /// A publish the client refused at the call.
    fn refused_at_call(&self, channel: &str, why: String) -> Fail {
        Fail(1, format!("publishing to {channel}: {why}"))
    }

    /// Whether the server refused a message: the producer should stop.
    pub(super) fn refused(&self) -> bool {
        self.slots.ledger.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8]) -> Vec<Result<(usize, String), Fail>> {
        let mut lines = Lines::new(text, "t");
        std::iter::from_fn(|| lines.next_line().map(|l| l.map(|(n, s)| (n, s.to_owned()))))
            .collect()
    }

    #[test]
    fn lines_are_bounded() {
        let got: Vec<_> = all(b"a\r\nb\n\nlast")
            .into_iter()
            .map(|l| l.ok().unwrap())
            .collect();
        assert_eq!(
            got,
            [
                (1, "a".into()),
                (2, "b".into()),
                (3, String::new()),
                (4, "last".into())
            ]
        );
        let long = vec![b'x'; MAX_LINE + 1];
        assert!(
            matches!(all(&long).first(), Some(Err(Fail(EXIT_INVALID, m))) if m.contains("t:1: a line longer"))
        );
        let mut exact = vec![b'x'; MAX_LINE];
        exact.push(b'\n');
        assert!(matches!(all(&exact).first(), Some(Ok((1, l))) if l.len() == MAX_LINE));
        assert!(matches!(
            all(b"\xff\n").first(),
            Some(Err(Fail(EXIT_INVALID, _)))
        ));
    }

    #[test]
    fn acknowledgement_lines_keep_the_position_as_the_reply_wrote_it() {
        let body = r#"{"position":"17:3\/x","next":"a"}"#;
        let mut out = Vec::new();
        write_ack(&mut out, "c\"h", position(body).unwrap()).unwrap();
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            line,
            serde_json::json!({"channel": "c\"h", "position": "17:3/x"})
        );
        assert!(out.ends_with(b"}\n"));
    }
}
