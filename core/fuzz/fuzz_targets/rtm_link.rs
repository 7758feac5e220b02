//! The whole messaging link (`rtm::Link`) driven on its real byte path: an interpreter
//! over the fuzz input runs user calls, adapter events, server bytes and clock steps,
//! while a model server reads every byte the link writes.
//!
//! Input: `[options][operations…]`
//! - byte 0 bits 0-1: capacities (subscriptions, in flight, queue and outbox bytes)
//!   `4, 8, 2048, 1024` / `1, 2, 256, 256` / `4, 32, 8192, 2048` / the first again; bit 2: `restore_auth_on_reconnect`;
//!   bit 3: `retry_first_connect`; bit 4: end with `stop` + close + timeouts before
//!   `dispose`; bit 5: `wss://` endpoint with a path; bit 6: replies kept by ticket
//!   (`Events::replies_by_ticket`), taken out of turn; bit 7: events keeping a copy of
//!   each message (`Events::keeping_messages`), read without the link (`poll_kept`).
//! - then (via `arbitrary::Unstructured`) the buffer sizes (rx, tx ≥ outbox + 1024), the
//!   client's config (intervals, attempt budget, `max_queue_size`, jitter seed, auth and
//!   connect timeouts), the link's config (ping interval, dead-peer and close timeouts,
//!   seed, user agent) and up to 16 operations (`max_ops`, to keep an execution cheap; the
//!   smallest capacities reach the limits in a few operations):
//!   - time: advance by small or large steps (the adapter may be late), `handle_timeout`
//!     at `now`, at `poll_timeout()` or after it;
//!   - user calls: start, stop, dispose (rarely), publish / write / delete with or without
//!     ack and deadlines in the past / now / future, read, search, authenticate,
//!     subscribe, unsubscribe;
//!   - adapter events: `handle_connected`, `handle_connect_failed`, `handle_closed` (EOF
//!     at any time, or after the link asked for the close), `handle_input_held` (input
//!     left in the socket for backpressure);
//!   - server bytes, each batch split at arbitrary points into several `handle_input`
//!     calls: a VALID `101` (its `Sec-WebSocket-Accept` computed by tungstenite from the
//!     key in the request the link wrote), alone or followed by frames; a wrong `101` or
//!     another status; frames around PDU texts (replies built from the PDUs the link
//!     actually sent: ok / error / data, subscription data, arbitrary text), whole or
//!     fragmented with pings in between; pings, pongs, close frames with codes and
//!     reasons; binary frames; arbitrary bytes.
//!
//! After every operation the model adapter drains `poll_output`: `Connect` opens a
//! transport, `Transmit` is written in full, in part (fuzz-chosen), along with the rest
//! of `unsent()` as one vectored write cut anywhere, or not at all (would
//! block), `Close` closes the transport (reported now or later).
//!
//! Events are pulled: every call's handler is an `Events` journal, drained after each
//! call (`poll_event`) into the checking handler below; with replies kept by ticket, the
//! other events first, then the replies (`take_reply`), newest ticket first. `handle_input` takes what it can
//! while no event waits, and the model adapter offers the rest again once they are taken.
//!
//! The link's five buffers and the events' buffer are slices of one per-thread arena,
//! zeroed before each input (fresh allocations cost page faults under ASAN's quarantine).
//!
//! Invariants: no panic (overflow checks are on); no event lost or unreadable (the
//! events' buffer is `Events::capacity_for` the link's tables); `handle_input` takes at
//! least one byte whenever no event waits; `client_state(leave, enter)` chains
//! and matches `state()`; tickets count up from 0 (at most one per operation); every
//! acked request's ticket is issued once and gets exactly
//! one final outcome (`Ok`/`Error` answering its request, `Timeout`, `Disconnected`),
//! nothing after it, and after `dispose` none is outstanding; after `handle_timeout(now)`
//! (and the drain) `poll_timeout()` is later than `now` and every ticket whose deadline
//! is ≤ `now` is final (one more `handle_timeout` is allowed when the drain's `Close`
//! found no transport: the client hears of it at that call); `queued ≤ max_queue_size`, in flight ≤ the in-flight table + 1
//! (an authenticate), and they bound the open tickets; a `Transmit` is never empty nor
//! larger than the tx buffer, only goes to an open transport, and `Connect` only comes
//! with no transport; `link_closed` comes at most once per opened connection, only for
//! one that opened, and once it did by the time the transport is reported closed.
//! The model server checks the bytes on each connection: an upgrade request
//! (`GET`, `Upgrade: websocket`, a 16-byte key), nothing more before the server's `101`,
//! then only whole client frames — masked, FIN, no reserved bits, minimal lengths, text
//! (valid JSON objects with a string `action` and increasing ids), ping, pong (echoing a
//! ping the server sent) or close (a sendable code) — and nothing after the close frame.
#![no_main]

use std::time::Duration;

use benchlink_core::rtm::pdu::History;
use benchlink_core::rtm::{
    Ack, AuthResult, Buffers, ClientState, Config, ConnectError, Disconnect, Events, Handler, Link,
    LinkConfig, Mode, Outcome, Output, Pending, RequestError, SubscribeArgs, SubscriptionSlot,
    Ticket,
};
use benchlink_core::time::Instant;
use benchlink_core_fuzz::tickets::{Kind, Tickets};
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use serde_json::Value as Json;

/// `RTM_LINK_TRACE=1` prints every operation and output (to replay a crash).
fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RTM_LINK_TRACE").is_some())
}

macro_rules! trace {
    ($($arg:tt)*) => {
        if tracing() {
            eprintln!($($arg)*);
        }
    };
}

fuzz_target!(|input: &[u8]| {
    let [opts, rest @ ..] = input else {
        return;
    };
    let mut u = Unstructured::new(rest);
    let rx = u.int_in_range(0..=255u8).unwrap_or(0) as usize;
    let tx_extra = u.int_in_range(0..=255u8).unwrap_or(0) as usize;
    let ms = |u: &mut Unstructured<'_>, max: u64| {
        Duration::from_millis(u.int_in_range(0..=max).unwrap_or(0))
    };
    let client = Config {
        reconnect_interval: ms(&mut u, 3000),
        max_reconnect_interval: ms(&mut u, 20_000),
        fail_count_threshold: match u.int_in_range(0..=4u32).unwrap_or(0) {
            0 => None,
            n => Some(n - 1),
        },
        restore_auth_on_reconnect: opts & 4 != 0,
        max_queue_size: u.int_in_range(1..=40usize).unwrap_or(8),
        retry_first_connect: opts & 8 != 0,
        jitter_seed: u.arbitrary().unwrap_or(0),
        auth_timeout: ms(&mut u, 20_000).max(Duration::from_millis(1)),
        connect_timeout: ms(&mut u, 40_000).max(Duration::from_millis(1)),
        // JSON: the model server reads JSON.
        ..Config::DEFAULT
    };
    let link = LinkConfig {
        ping_interval: ms(&mut u, 8000),
        dead_peer_timeout: ms(&mut u, 30_000),
        close_timeout: ms(&mut u, 3000),
        user_agent: if u.ratio(1, 3).unwrap_or(false) {
            None
        } else {
            Some("fuzz/1")
        },
        seed: u.arbitrary().unwrap_or(1),
    };
    let setup = Setup {
        client,
        link,
        stop_first: opts & 16 != 0,
        by_ticket: opts & 64 != 0,
        keeping: opts & 128 != 0,
        endpoint: if opts & 32 != 0 {
            "wss://rtm.example.test/some/path"
        } else {
            "ws://127.0.0.1:8080"
        },
    };
    match opts & 3 {
        1 => Fuzz::<1, 2, 256, 256>::run(setup, 16 + rx * 2, tx_extra, &mut u),
        2 => Fuzz::<4, 32, 8192, 2048>::run(setup, 1024 + rx * 64, tx_extra * 64, &mut u),
        _ => Fuzz::<4, 8, 2048, 1024>::run(setup, 64 + rx * 16, tx_extra * 12, &mut u),
    }
});

#[derive(Clone, Copy)]
struct Setup {
    client: Config,
    link: LinkConfig,
    stop_first: bool,
    endpoint: &'static str,
    by_ticket: bool,
    keeping: bool,
}

// ------------------------------------------------------------------------------------
// The recording handler
// ------------------------------------------------------------------------------------

struct Rec {
    state: ClientState,
    sealed: bool,
    tickets: Tickets,
    /// `link_closed` calls during the current call into the link.
    closed_in_call: u32,
}

impl Rec {}

impl Handler for Rec {
    fn client_state(&mut self, leave: ClientState, enter: ClientState) {
        trace!("    client {leave:?} -> {enter:?}");
        assert!(!self.sealed, "client_state after dispose");
        assert_eq!(leave, self.state, "client_state leave != previous enter");
        assert_ne!(leave, ClientState::Disposed, "left Disposed");
        self.state = enter;
    }

    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        assert!(!self.sealed, "reply after dispose");
        self.tickets.reply(ticket, &outcome);
    }

    fn auth(&mut self, ticket: Ticket, result: AuthResult<'_>) {
        assert!(!self.sealed, "auth after dispose");
        self.tickets.auth(ticket, &result);
        let _ = result.to_string();
    }

    fn link_closed(&mut self, why: Disconnect<'_>) {
        self.closed_in_call += 1;
        let text = why.to_string();
        trace!("    link_closed: {text}");
        assert!(!text.is_empty());
        if let Disconnect::PeerClosed { reason, .. } = why {
            assert!(reason.len() <= 123);
        }
    }
}

// ------------------------------------------------------------------------------------
// The model transport and server
// ------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sock {
    /// No transport.
    None,
    /// `Connect` taken, no result reported yet.
    Opening,
    /// `handle_connected` reported.
    Open,
    /// The link asked for `Close`; `handle_closed` not reported yet.
    Closing,
}

/// A PDU the link sent on the current connection.
#[derive(Debug, Clone)]
struct Sent {
    id: Option<u64>,
    action: String,
    key: Option<String>,
}

/// What the server sees of one connection: every byte the link wrote.
#[derive(Default)]
struct Conn {
    wire: Vec<u8>,
    /// Parsed up to here.
    pos: usize,
    /// The upgrade request is `wire[..request_end]`; its key.
    request_end: Option<usize>,
    key: Option<String>,
    /// The server sent a valid `101` (and the link was waiting for it).
    answered: bool,
    /// The link's close frame was seen: nothing may follow.
    close_seen: bool,
    /// Payloads of the pings the server sent.
    pings: Vec<Vec<u8>>,
    /// The server sent arbitrary bytes: they may hold pings the model does not know.
    raw: bool,
    sent: Vec<Sent>,
    last_id: Option<u64>,
    /// The link opened this connection (the 101 was taken).
    opened: bool,
    /// `link_closed` reports for it.
    closed_reports: u32,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    /// Checks the bytes written so far.
    fn parse(&mut self) {
        if self.request_end.is_none() {
            let Some(end) = find(&self.wire, b"\r\n\r\n") else {
                assert!(self.wire.len() < 4096, "upgrade request without an end");
                return;
            };
            let head = std::str::from_utf8(&self.wire[..end]).expect("request head is UTF-8");
            assert!(
                head.starts_with("GET /"),
                "not an upgrade request: {head:?}"
            );
            assert!(head.contains("\r\nUpgrade: websocket"), "{head:?}");
            assert!(head.contains("\r\nSec-WebSocket-Version: 13"), "{head:?}");
            let key = head
                .split("\r\n")
                .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                .expect("request without a key");
            assert_eq!(key.len(), 24, "key {key:?} is not 16 bytes in base64");
            self.key = Some(key.to_owned());
            self.request_end = Some(end + 4);
            self.pos = end + 4;
        }
        if !self.answered {
            assert_eq!(
                self.pos,
                self.wire.len(),
                "bytes after the request before the 101"
            );
            return;
        }
        while self.pos < self.wire.len() {
            assert!(!self.close_seen, "bytes after the close frame");
            let Some((opcode, payload, len)) = client_frame(&self.wire[self.pos..]) else {
                return;
            };
            self.pos += len;
            match opcode {
                0x1 => self.text(&payload),
                0x8 => {
                    self.close_seen = true;
                    match payload.as_slice() {
                        [] => {}
                        [hi, lo, reason @ ..] => {
                            let code = u16::from_be_bytes([*hi, *lo]);
                            assert!(
                                matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999),
                                "close code {code}"
                            );
                            std::str::from_utf8(reason).expect("close reason is UTF-8");
                        }
                        _ => panic!("close body of 1 byte"),
                    }
                }
                0x9 => {}
                0xA => assert!(
                    self.raw || self.pings.contains(&payload),
                    "pong {payload:?} for no ping the server sent"
                ),
                _ => panic!("client frame with opcode {opcode:#x}"),
            }
        }
    }

    fn text(&mut self, payload: &[u8]) {
        let text = std::str::from_utf8(payload).expect("text frame is UTF-8");
        let v: Json =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("PDU {text:?} is not JSON: {e}"));
        let Some(Json::String(action)) = v.get("action") else {
            panic!("PDU without a string action: {text}");
        };
        let id = v.get("id").map(|id| {
            id.as_u64()
                .unwrap_or_else(|| panic!("id not a u64 in {text}"))
        });
        if let Some(id) = id {
            assert!(
                self.last_id.is_none_or(|last| id > last),
                "id {id} after {:?} on one connection",
                self.last_id
            );
            self.last_id = Some(id);
        }
        let body = v.get("body");
        let key = ["subscription_id", "channel"]
            .iter()
            .find_map(|k| body.and_then(|b| b.get(*k)).and_then(Json::as_str))
            .map(str::to_owned);
        self.sent.push(Sent {
            id,
            action: action.clone(),
            key,
        });
        if self.sent.len() > 64 {
            self.sent.remove(0);
        }
    }
}

/// One whole masked client frame at the start of `bytes`: (opcode, unmasked payload,
/// frame length); `None` while incomplete. Panics on anything a client must not send.
fn client_frame(bytes: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    let [b0, b1, rest @ ..] = bytes else {
        return None;
    };
    assert_eq!(b0 & 0x80, 0x80, "client frame without FIN");
    assert_eq!(b0 & 0x70, 0, "client frame with reserved bits");
    assert_eq!(b1 & 0x80, 0x80, "unmasked client frame");
    let opcode = b0 & 0x0F;
    let (len, at) = match b1 & 0x7F {
        126 => {
            let [a, b, ..] = rest else { return None };
            let len = u16::from_be_bytes([*a, *b]) as usize;
            assert!(len >= 126, "non-minimal 16-bit length {len}");
            (len, 4)
        }
        127 => {
            let ext: [u8; 8] = rest.get(..8)?.try_into().ok()?;
            let len = u64::from_be_bytes(ext);
            assert!(len > 0xFFFF, "non-minimal 64-bit length {len}");
            (usize::try_from(len).expect("length fits"), 10)
        }
        n => (n as usize, 2),
    };
    if opcode >= 8 {
        assert!(len <= 125, "control frame of {len} bytes");
    }
    let mask: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    let payload = bytes.get(at + 4..at + 4 + len)?;
    let payload = payload
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i % 4])
        .collect();
    Some((opcode, payload, at + 4 + len))
}

/// An unmasked server frame.
fn server_frame(out: &mut Vec<u8>, first: u8, payload: &[u8]) {
    out.push(first);
    server_frame_len(out, payload.len());
    out.extend_from_slice(payload);
}

/// The length field of an unmasked server frame.
fn server_frame_len(out: &mut Vec<u8>, len: usize) {
    match len {
        n if n < 126 => out.push(n as u8),
        n if n < 65536 => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
}

// ------------------------------------------------------------------------------------
// The driver
// ------------------------------------------------------------------------------------

/// The link's buffers: slices of one per-thread arena (a fresh `Vec` per buffer and input
/// cost page faults under ASAN, whose quarantine hands out new memory every time).
type L<'b, const S: usize, const P: usize> =
    Link<&'b mut [u8], [SubscriptionSlot; S], [Pending; P]>;

/// Bytes for the link's events: enough for any one call (a queued request takes at
/// least 22 bytes of the queue).
fn events_len<const S: usize, const P: usize, const Q: usize>() -> usize {
    Events::<&mut [u8]>::capacity_for(S, P, Q / 22 + 1)
}

thread_local! {
    static ARENA: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Fuzz<'b, const S: usize, const P: usize, const Q: usize, const O: usize> {
    link: L<'b, S, P>,
    /// The handler of every call: the link's events, pulled into `rec` after each.
    events: Events<&'b mut [u8]>,
    rec: Rec,
    setup: Setup,
    tx_len: usize,
    now: Instant,
    sock: Sock,
    conn: Option<Conn>,
    /// Connections the link opened, and `link_closed` reports in all.
    opened: u32,
    closed_reports: u32,
    keys: Vec<String>,
}

/// Operations an input may run at most: every operation costs libFuzzer's per-edge work
/// as much as the link's; the smallest capacities reach the limits in a few operations.
/// `RTM_LINK_MAX_OPS=N` changes it, to measure the trade between speed and depth.
fn max_ops() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("RTM_LINK_MAX_OPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(16)
    })
}

const NAMES: &[&str] = &["a", "b", "c\"q", "é/ü", ""];
const JSONS: &[&str] = &["1", "{\"k\":1}", "\"s\"", "[1,2]", "null", "{oops"];
const POSITIONS: &[&str] = &["\"1:1\"", "\"1479315802:6\"", "null", "7"];

fn name(u: &mut Unstructured<'_>) -> String {
    if u.ratio(1, 10).unwrap_or(false) {
        let s: String = u.arbitrary().unwrap_or_default();
        s.chars().take(12).collect()
    } else {
        u.choose(NAMES).map(|s| s.to_string()).unwrap_or_default()
    }
}

fn json_text(u: &mut Unstructured<'_>) -> String {
    if u.ratio(1, 10).unwrap_or(false) {
        let n = u.int_in_range(50..=3000usize).unwrap_or(100);
        format!("\"{}\"", "x".repeat(n))
    } else {
        u.choose(JSONS).map(|s| s.to_string()).unwrap_or_default()
    }
}

fn quote(s: &str) -> String {
    Json::String(s.to_owned()).to_string()
}

impl<'b, const S: usize, const P: usize, const Q: usize, const O: usize> Fuzz<'b, S, P, Q, O> {
    fn run(setup: Setup, rx: usize, tx_extra: usize, u: &mut Unstructured<'_>) {
        let tx_len = O + 1024 + tx_extra;
        ARENA.with_borrow_mut(|arena| {
            // Kept messages take up to two largest ones beyond the events' room.
            let keeping = if setup.keeping { 2 * rx + 4096 } else { 0 };
            let events_len = events_len::<S, P, Q>() + keeping;
            let total = rx + tx_len + Q + O + S * 128 + events_len;
            if arena.len() < total {
                arena.resize(total, 0);
            }
            // Zeroed like fresh buffers: a run never depends on the one before.
            let arena = &mut arena[..total];
            arena.fill(0);
            let max_message = rx;
            let (rx, rest) = arena.split_at_mut(rx);
            let (tx, rest) = rest.split_at_mut(tx_len);
            let (queue, rest) = rest.split_at_mut(Q);
            let (outbox, rest) = rest.split_at_mut(O);
            let (events, subscription_args) = rest.split_at_mut(events_len);
            let buffers = Buffers {
                rx,
                tx,
                queue,
                outbox,
                subscription_args,
            };
            let mut events = Events::new(events);
            if setup.by_ticket {
                events = events.replies_by_ticket();
            }
            if setup.keeping {
                events = events.keeping_messages(max_message);
            }
            Fuzz::<S, P, Q, O>::run_in(setup, buffers, events, tx_len, u);
        });
    }

    fn run_in(
        setup: Setup,
        buffers: Buffers<&'b mut [u8]>,
        events: Events<&'b mut [u8]>,
        tx_len: usize,
        u: &mut Unstructured<'_>,
    ) {
        let in_flight = [Pending::EMPTY; P];
        let link = Link::new(
            setup.client,
            setup.link,
            setup.endpoint,
            "K",
            buffers,
            [SubscriptionSlot::EMPTY; S],
            in_flight,
        )
        .expect("valid link settings");
        let mut f = Fuzz::<S, P, Q, O> {
            link,
            events,
            rec: Rec {
                state: ClientState::Stopped,
                sealed: false,
                tickets: Tickets::new(max_ops()),
                closed_in_call: 0,
            },
            setup,
            tx_len,
            now: Instant::from_secs(1000),
            sock: Sock::None,
            conn: None,
            opened: 0,
            closed_reports: 0,
            keys: Vec::new(),
        };
        assert_eq!(f.link.poll_timeout(), None);
        assert_eq!(f.link.poll_output(f.now), None);
        for _ in 0..max_ops() {
            if u.is_empty() {
                break;
            }
            let timed = f.step(u);
            f.take_events();
            f.drain(u);
            f.check(timed);
        }
        f.finish();
    }

    fn deadline(&self, u: &mut Unstructured<'_>) -> Option<Instant> {
        match u.int_in_range(0..=5u8).unwrap_or(0) {
            0 | 1 => None,
            2 => Some(self.now),
            3 => Some(self.now.saturating_sub(Duration::from_millis(5))),
            _ => Some(self.now.saturating_add(Duration::from_millis(
                u.int_in_range(1..=60_000u64).unwrap_or(1),
            ))),
        }
    }

    fn ack(&self, u: &mut Unstructured<'_>) -> Ack {
        if u.ratio(1, 3).unwrap_or(false) {
            Ack::None
        } else {
            Ack::Reply {
                deadline: self.deadline(u),
            }
        }
    }

    fn ticket(&mut self, r: Result<Option<Ticket>, RequestError>, kind: Kind, ack: Ack) {
        if self.link.client().state() == ClientState::Disposed {
            assert_eq!(r, Err(RequestError::Disposed));
        }
        self.rec.tickets.issue(r, kind, ack);
    }

    fn key(&self, u: &mut Unstructured<'_>) -> String {
        if self.keys.is_empty() || u.ratio(1, 8).unwrap_or(false) {
            name(u)
        } else {
            u.choose(&self.keys).cloned().unwrap_or_default()
        }
    }

    /// One operation; true when it was a `handle_timeout`.
    fn step(&mut self, u: &mut Unstructured<'_>) -> bool {
        let now = self.now;
        let op = u.int_in_range(0..=28u8).unwrap_or(0);
        trace!(
            "{:>10} ms  op {op:<2} {:?} {:?}",
            now.as_millis(),
            self.sock,
            self.link
        );
        match op {
            0 => {
                let step = match u.int_in_range(0..=2u8).unwrap_or(0) {
                    0 => Duration::from_millis(u.int_in_range(0..=1500u64).unwrap_or(0)),
                    1 => Duration::from_secs(u.int_in_range(0..=400u64).unwrap_or(0)),
                    _ => Duration::from_micros(u.int_in_range(0..=1000u64).unwrap_or(0)),
                };
                self.now = self.now.saturating_add(step);
                false
            }
            1 | 2 => {
                if let Some(at) = self.link.poll_timeout() {
                    self.now = self.now.max(at);
                }
                if u.ratio(1, 4).unwrap_or(false) {
                    self.now = self.now.saturating_add(Duration::from_millis(
                        u.int_in_range(0..=500u64).unwrap_or(0),
                    ));
                }
                self.timeout();
                true
            }
            3 => {
                self.timeout();
                true
            }
            4 => {
                self.link.client_mut().start(now, &mut self.events);
                false
            }
            5 => {
                self.link.client_mut().stop(now, &mut self.events);
                false
            }
            6 => {
                if u.ratio(1, 8).unwrap_or(false) {
                    self.link.client_mut().dispose(now, &mut self.events);
                    self.assert_disposed();
                }
                false
            }
            7 | 8 => {
                let (ch, msg, ack) = (name(u), json_text(u), self.ack(u));
                let r = self
                    .link
                    .client_mut()
                    .publish(now, &ch, &msg, ack, &mut self.events);
                self.ticket(r, Kind::Publish, ack);
                false
            }
            9 => {
                let ch = name(u);
                let args = u.ratio(1, 3).unwrap_or(false).then(|| json_text(u));
                let deadline = self.deadline(u);
                let r = self.link.client_mut().read(
                    now,
                    &ch,
                    args.as_deref(),
                    deadline,
                    &mut self.events,
                );
                self.ticket(r.map(Some), Kind::Read, Ack::Reply { deadline });
                false
            }
            10 => {
                let (ch, msg, ack) = (name(u), json_text(u), self.ack(u));
                let r = self
                    .link
                    .client_mut()
                    .write(now, &ch, &msg, ack, &mut self.events);
                self.ticket(r, Kind::Write, ack);
                false
            }
            11 => {
                let (ch, ack) = (name(u), self.ack(u));
                let r = self
                    .link
                    .client_mut()
                    .delete(now, &ch, ack, &mut self.events);
                self.ticket(r, Kind::Delete, ack);
                false
            }
            12 => {
                let (prefix, deadline) = (name(u), self.deadline(u));
                let r = self
                    .link
                    .client_mut()
                    .search(now, &prefix, deadline, &mut self.events);
                self.ticket(r.map(Some), Kind::Search, Ack::Reply { deadline });
                false
            }
            13 => {
                let role = name(u);
                let secret: [u8; 3] = u.arbitrary().unwrap_or_default();
                let deadline = self.deadline(u);
                let r = self.link.client_mut().authenticate(
                    now,
                    &role,
                    &secret,
                    deadline,
                    &mut self.events,
                );
                self.ticket(r.map(Some), Kind::Auth, Ack::Reply { deadline });
                false
            }
            14 => {
                let key = name(u);
                let mode = *u
                    .choose(&[Mode::Simple, Mode::Reliable, Mode::Advanced])
                    .unwrap_or(&Mode::Reliable);
                let args = SubscribeArgs {
                    position: u.ratio(1, 4).unwrap_or(false).then_some("1:5"),
                    history: u.ratio(1, 4).unwrap_or(false).then_some(History::Count(2)),
                    filter: u.ratio(1, 5).unwrap_or(false).then_some("select * from a"),
                    ..SubscribeArgs::default()
                };
                let r = self
                    .link
                    .client_mut()
                    .subscribe(now, &key, mode, args, &mut self.events);
                if self.link.client().state() == ClientState::Disposed {
                    assert_eq!(r, Err(RequestError::Disposed));
                }
                if !self.keys.contains(&key) {
                    self.keys.push(key);
                }
                false
            }
            15 => {
                let key = self.key(u);
                let _ = self
                    .link
                    .client_mut()
                    .unsubscribe(now, &key, &mut self.events);
                false
            }
            16 | 17 => {
                if self.sock == Sock::Opening {
                    self.sock = Sock::Open;
                    self.conn = Some(Conn::default());
                    self.call(|l, h| l.handle_connected(now, h));
                }
                false
            }
            18 => {
                if self.sock == Sock::Opening {
                    self.sock = Sock::None;
                    let e = *u
                        .choose(&[
                            ConnectError::Resolve,
                            ConnectError::Io { code: 111 },
                            ConnectError::Tls,
                            ConnectError::Timeout,
                        ])
                        .unwrap_or(&ConnectError::Tls);
                    self.call(|l, h| l.handle_connect_failed(now, e, h));
                }
                false
            }
            19 => {
                self.closed();
                false
            }
            20..=22 => {
                let bytes = self.server_batch(u);
                self.feed(u, &bytes);
                false
            }
            23 => {
                // The upgrade answer, when the request went out (else: frames).
                let bytes = self.upgrade_answer(u);
                self.feed(u, &bytes);
                false
            }
            24 => {
                let mut bytes = Vec::new();
                self.control(u, &mut bytes);
                self.feed(u, &bytes);
                false
            }
            25 => {
                // Arbitrary bytes from the server.
                let n = u.int_in_range(0..=64usize).unwrap_or(0);
                let bytes = u.bytes(n).unwrap_or_default().to_vec();
                self.mark_raw();
                self.feed(u, &bytes);
                false
            }
            26 => {
                // A bad or refused upgrade answer.
                let bytes: &[u8] = u
                    .choose(&[
                        &b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"[..],
                        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n",
                        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
                        b"garbage\r\n\r\n",
                        b"HTTP/1.1 101 OK\r\nX: ",
                    ])
                    .copied()
                    .unwrap_or_default();
                self.mark_raw();
                self.feed(u, bytes);
                false
            }
            28 => {
                // The application is slow: the adapter leaves readable bytes in the socket.
                let now = self.now;
                self.call(|l, _| l.handle_input_held(now));
                false
            }
            _ => {
                // A large binary or text frame (the receive buffer's limit).
                let n = u.int_in_range(0..=20_000usize).unwrap_or(0);
                let mut bytes = Vec::new();
                let first = if u.ratio(1, 2).unwrap_or(false) {
                    0x82
                } else {
                    0x81
                };
                // The header for `n` bytes, then the payload in place.
                bytes.push(first);
                server_frame_len(&mut bytes, n);
                bytes.resize(bytes.len() + n, b' ');
                self.feed(u, &bytes);
                false
            }
        }
    }

    /// Runs one call into the link and checks the `link_closed` bookkeeping.
    fn call(&mut self, f: impl FnOnce(&mut L<'b, S, P>, &mut Events<&'b mut [u8]>)) {
        self.call_input(false, f);
    }

    /// Pulls the events of the calls so far into the checking handler; none is lost.
    fn take_events(&mut self) {
        if self.setup.keeping {
            // Read from the kept copies only: the link's buffer is not looked at.
            while let Some(event) = self.events.poll_kept() {
                event.deliver(&mut self.rec);
            }
        }
        self.events.dispatch(&self.link, &mut self.rec);
        if self.setup.by_ticket {
            // Tickets count up from 0, at most one per operation.
            for ticket in (0..max_ops()).rev() {
                let ticket = Ticket::from_raw(u32::try_from(ticket).unwrap_or(u32::MAX));
                while let Some(event) = self.events.take_reply(&self.link, ticket) {
                    event.deliver(&mut self.rec);
                }
            }
        }
        assert_eq!(self.events.lost(), 0, "events lost");
    }

    /// [`call`](Self::call); `input` for `handle_input`, the only call that can open the
    /// link.
    fn call_input<R>(
        &mut self,
        input: bool,
        f: impl FnOnce(&mut L<'b, S, P>, &mut Events<&'b mut [u8]>) -> R,
    ) -> R {
        let was_open = self.link.is_open();
        self.rec.closed_in_call = 0;
        let r = f(&mut self.link, &mut self.events);
        self.take_events();
        let closed = self.rec.closed_in_call;
        assert!(closed <= 1, "link_closed {closed} times in one call");
        // Input reports `link_closed` only while the link is open: it opened in this call
        // when it is open now, or reported a close, without having been open before.
        let opened_now = input && !was_open && (self.link.is_open() || closed > 0);
        if !input {
            assert!(
                was_open || !self.link.is_open(),
                "opened by other than input"
            );
        }
        if closed > 0 {
            assert!(!self.link.is_open(), "link_closed but still open");
        }
        if opened_now {
            self.opened += 1;
            let conn = self.conn.as_mut().expect("opened without a transport");
            assert!(conn.answered, "opened without the server's 101");
            assert!(!conn.opened, "one connection opened twice");
            conn.opened = true;
        }
        if closed > 0 {
            self.closed_reports += closed;
            let conn = self.conn.as_mut().expect("link_closed without a transport");
            assert!(
                conn.opened,
                "link_closed for a connection that never opened"
            );
            conn.closed_reports += closed;
            assert_eq!(
                conn.closed_reports, 1,
                "link_closed twice for one connection"
            );
        }
        assert!(self.closed_reports <= self.opened);
        r
    }

    fn timeout(&mut self) {
        let now = self.now;
        trace!(
            "    handle_timeout({} ms), poll_timeout {:?}",
            now.as_millis(),
            self.link.poll_timeout()
        );
        self.call(|l, h| l.handle_timeout(now, h));
    }

    /// The transport is gone (EOF at any time, or the close the link asked for).
    fn closed(&mut self) {
        if self.sock == Sock::None {
            return;
        }
        let now = self.now;
        self.sock = Sock::None;
        trace!("    handle_closed");
        self.call(|l, h| l.handle_closed(now, h));
        if let Some(conn) = self.conn.take() {
            if conn.opened {
                assert_eq!(
                    conn.closed_reports, 1,
                    "an opened connection ended unreported"
                );
            }
        }
        assert!(!self.link.is_open());
    }

    /// Feeds server bytes split at arbitrary points.
    fn feed(&mut self, u: &mut Unstructured<'_>, bytes: &[u8]) {
        if self.sock != Sock::Open && self.sock != Sock::Closing {
            return;
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = if u.ratio(1, 3).unwrap_or(false) {
                u.int_in_range(1..=rest.len()).unwrap_or(rest.len())
            } else {
                rest.len()
            };
            let (piece, tail) = rest.split_at(n);
            rest = tail;
            let now = self.now;
            trace!("    input {:?}", String::from_utf8_lossy(piece));
            // The link takes what it can while no event waits; the rest is offered again
            // once they are taken (`call_input` takes them).
            let mut piece = piece;
            while !piece.is_empty() {
                let n = self.call_input(true, |l, h| l.handle_input(now, piece, h));
                assert!(n > 0, "no progress with no event waiting");
                piece = &piece[n..];
            }
            // The adapter writes between reads now and then.
            if u.ratio(1, 4).unwrap_or(false) {
                self.drain(u);
            }
        }
    }

    /// The server's next bytes are not modelled frames.
    fn mark_raw(&mut self) {
        if let Some(conn) = self.conn.as_mut() {
            conn.raw = true;
        }
    }

    /// A valid `101` for the request on the wire (sent only once the whole request went
    /// out), possibly with frames behind it in the same read.
    fn upgrade_answer(&mut self, u: &mut Unstructured<'_>) -> Vec<u8> {
        let Some(conn) = self.conn.as_mut() else {
            return Vec::new();
        };
        conn.parse();
        let (Some(key), false) = (conn.key.clone(), conn.answered) else {
            return self.server_batch(u);
        };
        if self.sock != Sock::Open || conn.request_end != Some(conn.wire.len()) {
            return Vec::new();
        }
        conn.answered = true;
        let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
        let mut bytes = match u.int_in_range(0..=3u8).unwrap_or(0) {
            0 => format!(
                "HTTP/1.1 101 Switching Protocols\r\nupgrade: WebSocket\r\nconnection: keep-alive, Upgrade\r\nsec-websocket-accept: {accept}\r\nServer: x\r\n\r\n"
            ),
            _ => format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            ),
        }
        .into_bytes();
        if u.ratio(1, 2).unwrap_or(false) {
            let more = self.server_batch(u);
            bytes.extend(more);
        }
        bytes
    }

    /// A few server frames: PDUs (whole or fragmented, with pings between fragments) and
    /// control frames.
    fn server_batch(&mut self, u: &mut Unstructured<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        let n = u.int_in_range(1..=4u8).unwrap_or(1);
        for _ in 0..n {
            if u.ratio(1, 5).unwrap_or(false) {
                self.control(u, &mut out);
                continue;
            }
            let text = self.pdu(u);
            let bytes = text.as_bytes();
            let pieces = u
                .int_in_range(1..=3usize)
                .unwrap_or(1)
                .min(bytes.len().max(1));
            if pieces == 1 {
                server_frame(&mut out, 0x81, bytes);
                continue;
            }
            // Fragments, split anywhere (even inside a UTF-8 character).
            let mut cuts: Vec<usize> = (0..pieces - 1)
                .map(|_| u.int_in_range(0..=bytes.len()).unwrap_or(0))
                .collect();
            cuts.sort_unstable();
            let mut start = 0;
            for (i, &cut) in cuts.iter().chain([bytes.len()].iter()).enumerate() {
                let fin = if i == pieces - 1 { 0x80 } else { 0 };
                let opcode = if i == 0 { 0x1 } else { 0x0 };
                server_frame(&mut out, fin | opcode, &bytes[start..cut]);
                start = cut;
                if fin == 0 && u.ratio(1, 3).unwrap_or(false) {
                    self.ping(u, &mut out);
                }
            }
        }
        out
    }

    fn ping(&mut self, u: &mut Unstructured<'_>, out: &mut Vec<u8>) {
        let n = u
            .int_in_range(0..=125usize)
            .unwrap_or(0)
            .min(8 + u.int_in_range(0..=8usize).unwrap_or(0) * 15);
        let payload = u.bytes(n).map(<[u8]>::to_vec).unwrap_or_default();
        if let Some(conn) = self.conn.as_mut() {
            conn.pings.push(payload.clone());
        }
        server_frame(out, 0x89, &payload);
    }

    fn control(&mut self, u: &mut Unstructured<'_>, out: &mut Vec<u8>) {
        match u.int_in_range(0..=4u8).unwrap_or(0) {
            0 | 1 => self.ping(u, out),
            2 => server_frame(out, 0x8A, b"pong"),
            3 => {
                let code: u16 = *u
                    .choose(&[1000, 1001, 1002, 1011, 4000, 1005, 999])
                    .unwrap_or(&1000);
                let mut body = code.to_be_bytes().to_vec();
                let reason: String = u.arbitrary().unwrap_or_default();
                body.extend(reason.bytes().take(123));
                if u.ratio(1, 5).unwrap_or(false) {
                    body.clear();
                }
                server_frame(out, 0x88, &body);
            }
            _ => server_frame(out, 0x82, b"\x00\x01binary"),
        }
    }

    /// A server PDU: arbitrary text, or a plausible reply built from what the link sent.
    fn pdu(&self, u: &mut Unstructured<'_>) -> String {
        let position = *u.choose(POSITIONS).unwrap_or(&"null");
        let sent: &[Sent] = self.conn.as_ref().map_or(&[], |c| &c.sent);
        match u.int_in_range(0..=7u8).unwrap_or(0) {
            0 => {
                let s: String = u.arbitrary().unwrap_or_default();
                s.chars().take(200).collect()
            }
            1..=4 => {
                let with_id: Vec<&Sent> = sent.iter().filter(|s| s.id.is_some()).collect();
                let Some(sent) = (if with_id.is_empty() {
                    None
                } else if u.ratio(1, 2).unwrap_or(false) {
                    with_id.first().copied()
                } else {
                    u.choose(&with_id).ok().copied()
                }) else {
                    return "{\"action\":\"rtm/publish/ok\",\"id\":0,\"body\":{}}".to_owned();
                };
                let id = sent.id.unwrap_or(0);
                let key = sent.key.clone().unwrap_or_else(|| "a".to_owned());
                let suffix = *u
                    .choose(&["ok", "ok", "ok", "error", "data"])
                    .unwrap_or(&"ok");
                let action = format!("{}/{suffix}", sent.action);
                let body = match (sent.action.as_str(), suffix) {
                    (_, "error") => "{\"error\":\"e\",\"reason\":\"r\"}".to_owned(),
                    ("auth/handshake", _) => "{\"data\":{\"nonce\":\"MTI0==\"}}".to_owned(),
                    ("rtm/subscribe" | "rtm/unsubscribe", _) => {
                        format!(
                            "{{\"subscription_id\":{},\"position\":{position}}}",
                            quote(&key)
                        )
                    }
                    ("rtm/read", _) => {
                        format!("{{\"message\":{{\"v\":1}},\"position\":{position}}}")
                    }
                    ("rtm/search", _) => "{\"channels\":[\"a\",\"b\"]}".to_owned(),
                    _ => format!("{{\"position\":{position}}}"),
                };
                format!("{{\"action\":\"{action}\",\"id\":{id},\"body\":{body}}}")
            }
            5 | 6 => {
                let key = self.key(u);
                let count = u.int_in_range(1..=20usize).unwrap_or(1);
                let messages = vec!["{\"m\":\"x\"}"; count].join(",");
                format!(
                    "{{\"action\":\"rtm/subscription/data\",\"body\":{{\"subscription_id\":{},\"position\":{position},\"messages\":[{messages}]}}}}",
                    quote(&key)
                )
            }
            _ => {
                let s = *u
                    .choose(&[
                        "{\"action\":\"/error\",\"body\":{\"error\":\"e\",\"reason\":\"r\"}}",
                        "{\"action\":\"rtm/new_thing\",\"body\":{}}",
                        "{\"action\":\"rtm/read/ok\",\"id\":99999,\"body\":{}}",
                        "[]",
                    ])
                    .unwrap_or(&"[]");
                s.to_owned()
            }
        }
    }

    /// The adapter acts on everything the link asks for now.
    fn drain(&mut self, u: &mut Unstructured<'_>) {
        for _ in 0..10_000 {
            let now = self.now;
            let sock = self.sock;
            let tx_len = self.tx_len;
            let state = self.link.client().state();
            let output = self.link.poll_output(now);
            if let Some(Output::Transmit(b)) = output {
                trace!("    output Transmit({} bytes)", b.len());
            } else {
                trace!("    output {output:?}");
            }
            let written = match output {
                None => return,
                Some(Output::Connect { host, port, tls }) => {
                    assert_eq!(sock, Sock::None, "Connect while a transport is open");
                    assert_eq!(state, ClientState::Connecting, "Connect outside Connecting");
                    let ws = self.setup.endpoint.starts_with("ws://");
                    assert_eq!(tls, !ws);
                    assert_eq!(
                        (host, port),
                        if ws {
                            ("127.0.0.1", 8080)
                        } else {
                            ("rtm.example.test", 443)
                        }
                    );
                    self.sock = Sock::Opening;
                    continue;
                }
                Some(Output::Close) => {
                    assert!(
                        matches!(sock, Sock::Open | Sock::Opening),
                        "Close with no transport ({sock:?})"
                    );
                    self.sock = Sock::Closing;
                    if u.ratio(1, 2).unwrap_or(false) {
                        self.closed();
                    }
                    continue;
                }
                Some(Output::Transmit(bytes)) => {
                    assert_eq!(sock, Sock::Open, "Transmit without an open transport");
                    assert!(!bytes.is_empty(), "empty Transmit");
                    assert!(
                        bytes.len() <= tx_len,
                        "Transmit of {} bytes > tx {tx_len}",
                        bytes.len()
                    );
                    let first = bytes.to_vec();
                    // A vectored write takes everything ready, in order, the first piece
                    // being what `Transmit` gave; it may end anywhere.
                    let (offered, n) = match u.int_in_range(0..=9u8).unwrap_or(0) {
                        7 => {
                            let all: Vec<u8> = self.link.unsent().flatten().copied().collect();
                            assert!(all.starts_with(&first), "unsent() starts elsewhere");
                            let n = u.int_in_range(1..=all.len()).unwrap_or(all.len());
                            (all, n)
                        }
                        8 => {
                            let n = u.int_in_range(1..=first.len()).unwrap_or(first.len());
                            (first, n)
                        }
                        9 => (first, 0),
                        _ => {
                            let n = first.len();
                            (first, n)
                        }
                    };
                    let conn = self
                        .conn
                        .as_mut()
                        .expect("an open transport has a connection");
                    conn.wire.extend_from_slice(&offered[..n]);
                    n
                }
            };
            if written == 0 {
                // Would block: the adapter waits for the socket.
                return;
            }
            self.link.transmitted(now, written);
            if let Some(conn) = self.conn.as_mut() {
                conn.parse();
            }
        }
        panic!("poll_output never ends");
    }

    fn check(&mut self, timed: bool) {
        let c = self.link.client();
        let state = c.state();
        assert_eq!(state, self.rec.state, "state() disagrees with the events");
        let (queued, in_flight) = (c.queued_requests(), c.requests_in_flight());
        assert!(
            queued <= self.setup.client.max_queue_size,
            "{queued} queued > {}",
            self.setup.client.max_queue_size
        );
        assert!(
            in_flight <= P + 1,
            "{in_flight} in flight > PENDING {P} + 1"
        );
        assert!(
            self.rec.tickets.open() <= queued + in_flight,
            "{} open tickets but {queued} queued + {in_flight} in flight",
            self.rec.tickets.open()
        );
        if timed {
            // A close the client asked for while no transport was open (the drain's
            // `Close`) is reported at the next call with a handler: `poll_timeout` is due
            // at once for that one call. After it, it must be later than now, or the
            // adapter would spin.
            if self.link.poll_timeout().is_some_and(|at| at <= self.now) {
                self.timeout();
                self.drain(&mut Unstructured::new(&[]));
            }
            if let Some(at) = self.link.poll_timeout() {
                assert!(
                    at > self.now,
                    "poll_timeout {at:?} not after handle_timeout({:?}) ({:?})",
                    self.now,
                    self.link
                );
            }
            for (t, info) in self.rec.tickets.iter() {
                if info.deadline.is_some_and(|d| d <= self.now) {
                    assert_eq!(info.finals, 1, "ticket {t} past its deadline is not final");
                }
            }
        }
    }

    fn assert_disposed(&mut self) {
        self.take_events();
        let c = self.link.client();
        assert_eq!(c.state(), ClientState::Disposed);
        assert_eq!(c.queued_requests(), 0);
        assert_eq!(c.requests_in_flight(), 0);
        for (t, info) in self.rec.tickets.iter() {
            assert_eq!(
                info.finals, 1,
                "ticket {t} ({:?}) open after dispose",
                info.kind
            );
        }
    }

    /// Everything written, every close reported, every timer run.
    fn settle(&mut self) {
        self.drain(&mut Unstructured::new(&[]));
        for _ in 0..200 {
            if self.sock == Sock::Closing {
                self.closed();
                self.drain(&mut Unstructured::new(&[]));
                continue;
            }
            let Some(at) = self.link.poll_timeout() else {
                break;
            };
            self.now = self.now.max(at);
            self.timeout();
            self.drain(&mut Unstructured::new(&[]));
            self.check(true);
        }
    }

    fn finish(mut self) {
        if self.setup.stop_first && self.link.client().state() != ClientState::Disposed {
            let now = self.now;
            self.link.client_mut().stop(now, &mut self.events);
            self.take_events();
            self.drain(&mut Unstructured::new(&[]));
            self.check(false);
            // A transport still opening is refused; an open one ends.
            match self.sock {
                Sock::Opening => {
                    self.sock = Sock::None;
                    self.call(|l, h| l.handle_connect_failed(now, ConnectError::Closed, h));
                }
                Sock::Open | Sock::Closing => self.closed(),
                Sock::None => {}
            }
            self.settle();
            assert_eq!(self.link.client().state(), ClientState::Stopped);
            assert_eq!(self.link.client().requests_in_flight(), 0);
            for (t, info) in self.rec.tickets.iter() {
                if info.finals == 0 {
                    assert!(
                        info.deadline.is_none(),
                        "ticket {t} with a deadline still open"
                    );
                }
            }
        }
        let now = self.now;
        self.link.client_mut().dispose(now, &mut self.events);
        self.take_events();
        self.assert_disposed();
        self.drain(&mut Unstructured::new(&[]));
        self.check(false);
        self.rec.sealed = true;
        if self.sock == Sock::Opening {
            self.sock = Sock::None;
            self.call(|l, h| l.handle_connect_failed(now, ConnectError::Closed, h));
        }
        self.settle();
        self.closed();
        self.settle();
        assert_eq!(
            self.link.poll_timeout(),
            None,
            "timers left after dispose: {:?}",
            self.link
        );
        assert_eq!(self.link.poll_output(self.now), None);
        assert!(self.closed_reports <= self.opened);
    }
}
