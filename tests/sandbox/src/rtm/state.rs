//! The server's shared state: channels with their history, live connections with their
//! subscriptions, records for tests, and the fault switches. One mutex guards it all;
//! nothing blocks while holding it (frames only go into outboxes).
//!
//! A connection's reader takes the lock once per batch of requests, not once per
//! request (see [`Batch`]): a pipelining client sends hundreds of publishes per read,
//! and handling them all under one lock also lets every outbox they touch be woken once
//! (see [`Locked`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{Shutdown, TcpStream};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::cbor::{self, Encoding};
use super::config::{Op, Permissions, RtmServerConfig, STORED_MESSAGE_OVERHEAD};
use super::faults::FaultState;
use super::message::Message;
use super::outbox::{append_frame, hold_kicks, release_kicks, Outbox, Pushed};
use super::pdu::{envelope, object, push_position, push_quoted, quote, Positions};
use super::records::{Attempt, AttemptOutcome, ConnectionInfo};
use super::view::{clock, ActiveView, Message as ViewMessage, Row};

/// Messages per `rtm/subscription/data` PDU when replaying history.
const REPLAY_BATCH: usize = 100;
/// Bytes of messages per replayed data PDU (a single larger message still goes alone).
const REPLAY_BYTES: usize = 64 * 1024;

/// Everything the threads share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: RtmServerConfig,
    pub positions: Positions,
    /// What the stored messages of every channel take together.
    pub history: Arc<HistoryTotals>,
    state: Mutex<State>,
    /// Fault: pongs are not sent (read without the state lock by the reader threads).
    pub mute_pongs: AtomicBool,
    /// Wakes the thread that closes the windows of aggregated views.
    pub view_clock: clock::Wake,
    shutdown: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    pub(crate) fn new(config: RtmServerConfig) -> Shared {
        let epoch = config.generation.unwrap_or_else(next_generation);
        let history = Arc::new(HistoryTotals::default());
        Shared {
            config,
            positions: Positions { epoch },
            state: Mutex::new(State {
                history: Arc::clone(&history),
                ..State::default()
            }),
            history,
            mute_pongs: AtomicBool::new(false),
            view_clock: clock::Wake::default(),
            shutdown: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Locks the state. Writer wake-ups caused while it is held are sent when it is
    /// released (see [`Locked`]).
    pub(crate) fn lock(&self) -> Locked<'_> {
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        hold_kicks();
        Locked { guard }
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }

    /// Keeps a thread's handle for the final join (and forgets finished ones, so a
    /// long-lived server does not accumulate them).
    pub(crate) fn track(&self, handle: JoinHandle<()>) {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        threads.retain(|h| !h.is_finished());
        threads.push(handle);
    }

    pub(crate) fn take_threads(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A generation for a new run (see
/// [`RtmServerConfig::generation`](super::RtmServerConfig::generation)): the time in unix
/// milliseconds, or one more than the last generation of this process if that is not
/// smaller, so that servers started in the same millisecond differ too.
fn next_generation() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let next = |last: u64| now.max(last.saturating_add(1));
    match LAST.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| Some(next(last))) {
        Ok(last) | Err(last) => next(last),
    }
}

/// What the stored messages of all channels take together. Every stored message holds a
/// [`Charge`] on it, so the totals stay right however a message goes (the per-channel
/// limits, age, the total budget, fault injection) without each of those knowing.
#[derive(Debug, Default)]
pub(crate) struct HistoryTotals {
    /// Bytes: message texts plus [`STORED_MESSAGE_OVERHEAD`] each.
    bytes: AtomicUsize,
    /// Messages.
    messages: AtomicUsize,
}

impl HistoryTotals {
    /// Bytes the stored messages take (as counted against
    /// [`RtmServerConfig::history_total_bytes`]).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn messages(&self) -> usize {
        self.messages.load(Ordering::Relaxed)
    }
}

/// One stored message's share of the [`HistoryTotals`], given back when it is dropped.
#[derive(Debug)]
pub(crate) struct Charge {
    totals: Arc<HistoryTotals>,
    bytes: usize,
}

impl Charge {
    fn new(totals: &Arc<HistoryTotals>, text_len: usize) -> Charge {
        let bytes = text_len.saturating_add(STORED_MESSAGE_OVERHEAD);
        totals.bytes.fetch_add(bytes, Ordering::Relaxed);
        totals.messages.fetch_add(1, Ordering::Relaxed);
        Charge {
            totals: Arc::clone(totals),
            bytes,
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.totals.bytes.fetch_sub(self.bytes, Ordering::Relaxed);
        self.totals.messages.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The locked state. While it is held, pushes to outboxes do not wake their writer
/// threads one by one; dropping it wakes each writer that got frames once, so that a
/// writer finds everything a batch produced and writes it with one syscall.
pub(crate) struct Locked<'a> {
    guard: MutexGuard<'a, State>,
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Still under the lock: a woken writer only needs its outbox's own lock.
        release_kicks();
    }
}

/// The state lock as a connection's reader holds it across a batch of requests: taken
/// by the first request that needs it and kept until [`end`](Batch::end) (the reader
/// ends a batch before it would block reading the socket, and every so many requests so
/// that other threads get their turn).
pub(crate) struct Batch<'a> {
    pub shared: &'a Shared,
    guard: Option<Locked<'a>>,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(shared: &'a Shared) -> Batch<'a> {
        Batch {
            shared,
            guard: None,
        }
    }

    /// The state, locked if it was not yet.
    pub(crate) fn state(&mut self) -> &mut State {
        let shared = self.shared;
        self.guard.get_or_insert_with(|| shared.lock())
    }

    /// Releases the lock (if held), waking the writers that got frames.
    pub(crate) fn end(&mut self) {
        self.guard = None;
    }
}

/// One stored message.
#[derive(Debug)]
pub(crate) struct Stored {
    pub seq: u64,
    pub at: Instant,
    /// As published.
    pub message: Arc<Message>,
    /// Its share of the history's totals, given back when it goes (held, never read).
    pub _charge: Charge,
}

/// A channel: its sequence numbers, history and key-value value.
#[derive(Debug, Default)]
pub(crate) struct Channel {
    /// The sequence number the next message gets.
    pub next: u64,
    /// Every message with a smaller sequence number is gone (expired or discarded).
    pub expired_before: u64,
    pub history: VecDeque<Stored>,
    /// Total length of the messages in `history`.
    pub history_bytes: usize,
    /// The latest published or written message and its sequence number; `None` after a
    /// delete. Kept even when the history expires (key-value semantics).
    pub value: Option<(u64, Arc<Message>)>,
}

impl Channel {
    /// Drops the messages older than `ttl`.
    pub(crate) fn expire(&mut self, now: Instant, ttl: Option<Duration>) {
        let Some(ttl) = ttl else { return };
        while let Some(front) = self.history.front() {
            if now.saturating_duration_since(front.at) <= ttl {
                break;
            }
            self.pop_oldest();
        }
    }

    /// Drops the oldest stored message.
    fn pop_oldest(&mut self) {
        if let Some(old) = self.history.pop_front() {
            self.expired_before = old.seq + 1;
            self.history_bytes = self.history_bytes.saturating_sub(old.message.len());
        }
    }

    /// Discards the whole history (fault injection).
    pub(crate) fn expire_all(&mut self) {
        self.history.clear();
        self.history_bytes = 0;
        self.expired_before = self.next;
    }

    /// The oldest sequence number still available.
    pub(crate) fn first_available(&self) -> u64 {
        self.history.front().map_or(self.next, |s| s.seq)
    }

    /// Stored messages with sequence number ≥ `from`.
    pub(crate) fn since(&self, from: u64) -> Vec<&Stored> {
        self.history.iter().filter(|s| s.seq >= from).collect()
    }
}

/// A subscription of one connection.
#[derive(Debug)]
pub(crate) struct Sub {
    pub channel: String,
    /// The view (`filter`) of a view subscription.
    pub view: Option<ActiveView>,
    pub value_changes: bool,
    /// The last delivered message (after projection), for `only: value_changes`.
    pub last: Option<Value>,
    /// The resume position: one past the last message delivered or skipped.
    pub next: u64,
    pub fast_forward: bool,
    /// Data was dropped for a slow client; a `fast_forward` info goes before the next.
    pub skipped: bool,
}

/// A connection that completed the upgrade.
#[derive(Debug)]
pub(crate) struct Conn {
    pub outbox: Arc<Outbox>,
    pub socket: TcpStream,
    /// The authenticated role, if any.
    pub role: Option<String>,
    /// `(role, nonce)` of the handshake awaiting `auth/authenticate`.
    pub pending_auth: Option<(String, String)>,
    /// Failed `auth/authenticate` requests so far (see
    /// [`RtmServerConfig::max_auth_failures`]).
    pub auth_failures: u32,
    pub subs: BTreeMap<String, Sub>,
}

impl Conn {
    /// Queues `text` as a reply; a client that lets replies pile up is dropped.
    pub(crate) fn send(&self, text: &str) {
        self.send_with(|out| out.extend_from_slice(text.as_bytes()));
    }

    /// Queues a reply whose JSON text `write` appends (see [`send`](Self::send)); it
    /// goes in the connection's encoding.
    pub(crate) fn send_with(&self, write: impl FnOnce(&mut Vec<u8>)) {
        self.push(|outbox| outbox.push_pdu_with(write));
    }

    /// Queues a reply that `write` appends in CBOR, for a CBOR connection (see
    /// [`send`](Self::send)).
    pub(crate) fn send_cbor_with(&self, write: impl FnOnce(&mut Vec<u8>)) {
        self.push(|outbox| outbox.push_binary_with(write));
    }

    fn push(&self, push: impl FnOnce(&Arc<Outbox>) -> Pushed) {
        if push(&self.outbox) == Pushed::Full {
            log::warn!("rtm server: a client does not read its replies; dropping it");
            self.outbox.abandon();
            let _ = self.socket.shutdown(Shutdown::Both);
        }
    }
}

/// What tests can see of a connection after the fact.
#[derive(Debug, Default)]
pub(crate) struct Record {
    pub appkey: String,
    pub path: String,
    pub open: bool,
    pub role: Option<String>,
    pub received: Vec<String>,
    pub received_bytes: usize,
    pub received_count: usize,
    pub pings: usize,
    pub write_stalls: usize,
    pub held: usize,
}

/// The state behind [`Shared::lock`].
#[derive(Debug, Default)]
pub(crate) struct State {
    pub channels: BTreeMap<String, Channel>,
    /// `(channel, sequence number)` of the stored messages, oldest first across
    /// channels: the eviction order of [`RtmServerConfig::history_total_bytes`]. Entries
    /// of messages already gone (age, per-channel limits) are skipped when met, and
    /// swept out when they outnumber the stored messages.
    pub history_order: VecDeque<(Arc<str>, u64)>,
    /// The same totals as [`Shared::history`].
    pub history: Arc<HistoryTotals>,
    /// Upgraded connections.
    pub conns: BTreeMap<u64, Conn>,
    /// Every open TCP connection, upgraded or not, so that shutdown can close them.
    pub sockets: BTreeMap<u64, TcpStream>,
    /// The connections in `sockets` whose upgrade is not yet decided (no outcome yet),
    /// oldest first: the ones to close when a new connection needs room.
    pub pending: BTreeSet<u64>,
    pub records: BTreeMap<u64, Record>,
    pub attempts: VecDeque<Attempt>,
    pub faults: FaultState,
    pub next_id: u64,
    /// When the windows of aggregated views close.
    pub views: clock::Schedule,
    /// When the server-wide allowance of failed authentications is next free (see
    /// [`State::auth_failure_turn`]).
    pub auth_free_at: Option<Instant>,
}

impl State {
    /// The permissions of connection `id`.
    pub(crate) fn allows(&self, config: &RtmServerConfig, id: u64, op: Op, channel: &str) -> bool {
        let role = self.conns.get(&id).and_then(|c| c.role.as_deref());
        let perms: &Permissions = role
            .and_then(|r| config.roles.iter().find(|x| x.name == r))
            .map_or(&config.default_permissions, |r| &r.permissions);
        perms.allows(op, channel)
    }

    /// Records a new TCP connection and returns its id.
    pub(crate) fn new_attempt(&mut self, max: usize, at: Instant) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.attempts.push_back(Attempt {
            id,
            at,
            outcome: AttemptOutcome::Pending,
        });
        while self.attempts.len() > max.max(1) {
            self.attempts.pop_front();
        }
        id
    }

    pub(crate) fn set_outcome(&mut self, id: u64, outcome: AttemptOutcome) {
        self.pending.remove(&id);
        if let Some(a) = self.attempts.iter_mut().rev().find(|a| a.id == id) {
            a.outcome = outcome;
        }
    }

    pub(crate) fn add_record(&mut self, max: usize, id: u64, record: Record) {
        self.records.insert(id, record);
        while self.records.len() > max.max(1) {
            self.records.pop_first();
        }
    }

    /// Notes a PDU received on connection `id` (kept up to `limit` bytes).
    pub(crate) fn record_received(&mut self, id: u64, limit: usize, text: &str) {
        if let Some(r) = self.records.get_mut(&id) {
            r.received_count += 1;
            if r.received_bytes.saturating_add(text.len()) <= limit {
                r.received_bytes += text.len();
                r.received.push(text.to_owned());
            }
        }
    }

    /// Notes a WebSocket ping received on connection `id`.
    pub(crate) fn record_ping(&mut self, id: u64) {
        if let Some(r) = self.records.get_mut(&id) {
            r.pings += 1;
        }
    }

    /// Notes a write on connection `id` that waited a whole [`WRITE_STALL`] for room.
    ///
    /// [`WRITE_STALL`]: super::WRITE_STALL
    pub(crate) fn record_write_stall(&mut self, id: u64) {
        if let Some(r) = self.records.get_mut(&id) {
            r.write_stalls += 1;
        }
    }

    /// Notes a message read on connection `id` and held unhandled while it is silenced.
    pub(crate) fn record_held(&mut self, id: u64) {
        if let Some(r) = self.records.get_mut(&id) {
            r.held += 1;
        }
    }

    pub(crate) fn connection_info(&self) -> Vec<ConnectionInfo> {
        self.records
            .iter()
            .map(|(id, r)| ConnectionInfo {
                id: *id,
                appkey: r.appkey.clone(),
                path: r.path.clone(),
                open: r.open,
                role: r.role.clone(),
                subscriptions: self
                    .conns
                    .get(id)
                    .map(|c| c.subs.keys().cloned().collect())
                    .unwrap_or_default(),
                received: r.received.clone(),
                received_count: r.received_count,
                pings: r.pings,
                write_stalls: r.write_stalls,
                held: r.held,
            })
            .collect()
    }

    /// Stores a message and delivers it to every subscription of its channel. `None`
    /// when the channel does not exist and the channel limit is reached.
    pub(crate) fn publish(
        &mut self,
        config: &RtmServerConfig,
        positions: Positions,
        channel: &str,
        message: Arc<Message>,
    ) -> Option<u64> {
        if !self.channels.contains_key(channel) {
            if self.channels.len() >= config.max_channels {
                return None;
            }
            self.channels.insert(channel.to_owned(), Channel::default());
        }
        let now = Instant::now();
        let ch = self.channels.get_mut(channel)?;
        ch.expire(now, config.message_ttl);
        let seq = ch.next;
        ch.next += 1;
        ch.history_bytes += message.len();
        ch.history.push_back(Stored {
            seq,
            at: now,
            // The channel's name is counted too: its entry in `history_order` has a copy.
            _charge: Charge::new(&self.history, message.len() + channel.len()),
            message: Arc::clone(&message),
        });
        while ch.history.len() > 1
            && (ch.history.len() > config.history_len || ch.history_bytes > config.history_bytes)
        {
            ch.pop_oldest();
        }
        ch.value = Some((seq, message));
        self.history_order.push_back((Arc::from(channel), seq));
        self.keep_history_budget(config.history_total_bytes);
        let Some(stored) = self.channels.get(channel).and_then(|ch| ch.history.back()) else {
            return Some(seq);
        };
        let batch = [stored];
        for conn in self.conns.values_mut() {
            let outbox = &conn.outbox;
            conn.subs.retain(|sid, sub| {
                sub.channel != channel || deliver(outbox, positions, sid, sub, &batch)
            });
        }
        Some(seq)
    }
}

impl State {
    /// Drops the oldest stored messages, whatever their channel, until the history
    /// takes at most `budget` bytes; the message published last always stays. A
    /// channel that loses its last message this way loses its `rtm/read` value with it
    /// (the value is that message: it would keep its memory otherwise).
    fn keep_history_budget(&mut self, budget: usize) {
        while self.history.bytes() > budget && self.history_order.len() > 1 {
            let Some((name, seq)) = self.history_order.pop_front() else {
                break;
            };
            let Some(ch) = self.channels.get_mut(&*name) else {
                continue;
            };
            if ch.history.front().is_some_and(|s| s.seq == seq) {
                ch.pop_oldest();
                if ch.history.is_empty() && ch.value.as_ref().is_some_and(|(v, _)| *v == seq) {
                    ch.value = None;
                }
            }
        }
        // Entries of messages that went another way pile up while the budget is not
        // reached: sweep them out once they outnumber the stored messages.
        if self.history_order.len() > 2 * self.history.messages() + 1024 {
            let channels = &self.channels;
            self.history_order.retain(|(name, seq)| {
                channels
                    .get(&**name)
                    .is_some_and(|ch| *seq >= ch.first_available())
            });
        }
    }

    /// How long a failed authentication at `now` waits for its turn under
    /// [`RtmServerConfig::auth_failures_per_second`]: each failure takes one slot of
    /// `1/rate` s; a second's worth of slots may be taken ahead (a burst), later ones
    /// wait. Many connections guessing together are then no faster than one rate.
    pub(crate) fn auth_failure_turn(&mut self, config: &RtmServerConfig, now: Instant) -> Duration {
        let rate = config.auth_failures_per_second.max(1);
        let slot = Duration::from_secs(1) / rate;
        let free_at = self.auth_free_at.map_or(now, |t| t.max(now)) + slot;
        self.auth_free_at = Some(free_at);
        free_at
            .saturating_duration_since(now)
            .saturating_sub(Duration::from_secs(1))
    }

    /// Makes room for one more TCP connection under
    /// [`RtmServerConfig::max_connections`] and
    /// [`RtmServerConfig::max_pending_upgrades`]: at either cap, the oldest connection
    /// still in its upgrade is closed (its thread then ends). False when there is no
    /// room: every connection is upgraded.
    pub(crate) fn make_room(&mut self, config: &RtmServerConfig) -> bool {
        let full = self.sockets.len() >= config.max_connections.max(1)
            || self.pending.len() >= config.max_pending_upgrades.max(1);
        if !full {
            return true;
        }
        let Some(oldest) = self.pending.pop_first() else {
            return false;
        };
        if let Some(socket) = self.sockets.remove(&oldest) {
            let _ = socket.shutdown(Shutdown::Both);
        }
        true
    }
}

/// Sends consecutive stored messages to one subscription, in data PDUs of at most
/// [`REPLAY_BATCH`] messages. Returns false when the subscription has ended (the client
/// was too slow and the subscription has no `fast_forward`).
pub(crate) fn deliver(
    outbox: &Arc<Outbox>,
    positions: Positions,
    sid: &str,
    sub: &mut Sub,
    batch: &[&Stored],
) -> bool {
    if sub.view.is_none() && !sub.value_changes {
        // Messages go out as published: no copy before they reach the outbox.
        let mut rest = batch;
        while !rest.is_empty() {
            let mut n = 0;
            let mut bytes = 0;
            while let Some(stored) = rest.get(n) {
                if n > 0 && (n >= REPLAY_BATCH || bytes + stored.message.len() > REPLAY_BYTES) {
                    break;
                }
                bytes += stored.message.len();
                n += 1;
            }
            let (run, later) = rest.split_at(n);
            let seqs = (run[0].seq, run[n - 1].seq);
            if !send_data(
                outbox,
                positions,
                sid,
                sub,
                seqs,
                run.iter().map(|s| &*s.message),
            ) {
                return false;
            }
            rest = later;
        }
        return true;
    }
    let mut rows = Vec::new();
    for stored in batch {
        let message = ViewMessage::parse(&stored.message);
        match &mut sub.view {
            None => rows.push((stored.seq, Row::Message(message))),
            Some(view) => {
                if let Some((seq, out)) = view.consume(stored.seq, message) {
                    rows.extend(out.into_iter().map(|row| (seq, row)));
                }
            }
        }
    }
    send_rows(outbox, positions, sid, sub, rows)
}

/// Sends computed results (of a view, or of `only: value_changes`), each with the
/// sequence number of the last channel message it accounts for, in data PDUs of at
/// most [`REPLAY_BATCH`] messages. Returns false when the subscription has ended (see
/// [`deliver`]).
pub(crate) fn send_rows(
    outbox: &Arc<Outbox>,
    positions: Positions,
    sid: &str,
    sub: &mut Sub,
    rows: Vec<(u64, Row)>,
) -> bool {
    let mut texts: Vec<(u64, Arc<Message>)> = Vec::new();
    let mut bytes = 0usize;
    for (seq, row) in rows {
        if sub.value_changes {
            let value = row.value();
            if sub.last.as_ref() == Some(&value) {
                sub.next = seq + 1;
                continue;
            }
            sub.last = Some(value);
        }
        let message = row.into_message();
        if !texts.is_empty()
            && (texts.len() >= REPLAY_BATCH || bytes + message.len() > REPLAY_BYTES)
        {
            if !send_texts(outbox, positions, sid, sub, &texts) {
                return false;
            }
            texts.clear();
            bytes = 0;
        }
        bytes += message.len();
        texts.push((seq, message));
    }
    send_texts(outbox, positions, sid, sub, &texts)
}

/// [`send_data`] for computed messages (views, `value_changes`).
fn send_texts(
    outbox: &Arc<Outbox>,
    positions: Positions,
    sid: &str,
    sub: &mut Sub,
    texts: &[(u64, Arc<Message>)],
) -> bool {
    let (Some(first), Some(last)) = (texts.first(), texts.last()) else {
        return true;
    };
    let messages = texts.iter().map(|(_, t)| &**t);
    send_data(outbox, positions, sid, sub, (first.0, last.0), messages)
}

/// Appends the payload of an `rtm/subscription/data` PDU for subscription `sid` whose
/// last message has sequence number `last`.
pub(crate) fn data_pdu<'m>(
    out: &mut Vec<u8>,
    positions: Positions,
    sid: &str,
    last: u64,
    messages: impl Iterator<Item = &'m str>,
) {
    out.extend_from_slice(br#"{"action":"rtm/subscription/data","body":{"subscription_id":"#);
    push_quoted(out, sid);
    out.extend_from_slice(br#","position":"#);
    push_position(out, positions, last + 1);
    out.extend_from_slice(br#","messages":["#);
    for (i, m) in messages.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(m.as_bytes());
    }
    out.extend_from_slice(b"]}}");
}

/// One data PDU with the messages of sequence numbers `seqs` (first, last), preceded by
/// a `fast_forward` info if data was skipped before; built in place in the outbox.
fn send_data<'m>(
    outbox: &Arc<Outbox>,
    positions: Positions,
    sid: &str,
    sub: &mut Sub,
    (first, last): (u64, u64),
    messages: impl ExactSizeIterator<Item = &'m Message>,
) -> bool {
    let info = sub.skipped.then(|| {
        fast_forward_info(
            positions,
            sid,
            first,
            "Fast-forwarded: the client did not keep up",
        )
    });
    let encoding = outbox.encoding();
    let pushed = outbox.push_data_with(|out| {
        if let Some(info) = &info {
            encoding.append_pdu(out, |o| o.extend_from_slice(info.as_bytes()));
        }
        match encoding {
            Encoding::Json => append_frame(out, 0x1, true, |o| {
                data_pdu(o, positions, sid, last, messages.map(Message::json));
            }),
            Encoding::Cbor => append_frame(out, 0x2, true, |o| {
                cbor::data_pdu(o, positions, sid, last, messages.map(Message::cbor));
            }),
        }
    });
    match pushed {
        Pushed::Ok => {
            sub.skipped = false;
            sub.next = last + 1;
            true
        }
        Pushed::Full if sub.fast_forward => {
            sub.skipped = true;
            sub.next = last + 1;
            true
        }
        Pushed::Full => {
            let err = subscription_error(
                positions,
                sid,
                "out_of_sync",
                "The client did not keep up with the channel",
                sub.next,
            );
            let _ = outbox.push_pdu_with(|o| o.extend_from_slice(err.as_bytes()));
            false
        }
    }
}

/// `rtm/subscription/info` `fast_forward`.
pub(crate) fn fast_forward_info(positions: Positions, sid: &str, at: u64, reason: &str) -> String {
    let body = object(&[
        ("subscription_id", &quote(sid)),
        ("info", "\"fast_forward\""),
        ("reason", &quote(reason)),
        ("position", &positions.json(at)),
    ]);
    envelope("rtm/subscription/info", None, &body)
}

/// `rtm/subscription/error` (the subscription is over once this is sent).
pub(crate) fn subscription_error(
    positions: Positions,
    sid: &str,
    error: &str,
    reason: &str,
    at: u64,
) -> String {
    let body = object(&[
        ("subscription_id", &quote(sid)),
        ("error", &quote(error)),
        ("reason", &quote(reason)),
        ("position", &positions.json(at)),
    ]);
    envelope("rtm/subscription/error", None, &body)
}
