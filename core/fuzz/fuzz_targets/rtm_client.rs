//! The sans-IO RTM `Client` driven by an arbitrary stream of user calls, transport events,
//! server frames and clock ticks, through a model adapter and a recording `Handler`.
//!
//! Input: `[sizes/options][event bytes…]`
//! - byte 0 bits 0-1: capacities (subscriptions, in flight, queue and outbox bytes)
//!   `4, 8, 1024, 2048` / `2, 2, 256, 512` / `1, 1, 96, 384` / `4, 8, 1024, 2048`; bit 2: `restore_auth_on_reconnect`; bit 3:
//!   `retry_first_connect`; bit 4: end with `stop` + close + timeouts before `dispose`.
//! - then (via `arbitrary::Unstructured`) the rest of the config (intervals, attempt
//!   budget, `max_queue_size` 1..=12, jitter seed, timeouts) and up to 16 events (`MAX_EVENTS`, to keep an
//!   execution cheap; the smallest capacities reach the limits in a few events): user
//!   calls (start, stop, dispose, publish, read, write, delete, search, authenticate,
//!   subscribe, unsubscribe with small names, modes, JSON texts, ack or not, deadlines in
//!   the past / now / future), transport events the model adapter can report (connected,
//!   connect failed, closed, late frames on a closing socket), server frames (arbitrary
//!   text, or replies built from the PDUs actually sent: ok / error / data / wrong type /
//!   unknown or string ids; subscription data, errors, infos for known keys; `/error`;
//!   unknown actions), and time (small and large steps, to `poll_timeout`).
//!
//! The model adapter drains `poll_transmit` after every call: `Connect` opens a new socket
//! (dropping the old one silently), `Send` must be valid JSON with a string `action` and
//! go to an open socket with per-socket strictly increasing ids, `Close` closes it (the
//! adapter later reports `handle_closed`).
//!
//! Invariants checked after every call: no panic; `client_state(leave, enter)` chains
//! (`leave` is the previous `enter`, nothing after `Disposed`) and matches `state()`;
//! tickets count up from 0 (at most one per event), every ticket is known and of the right kind (`auth` for authenticate, `Data` only for
//! search), gets at most one final outcome and nothing after it, and `Ok`/`Error` replies
//! answer its request; `subscription_created`/`deleted` alternate per key, transitions
//! chain per key, `subscription_failed` only in Failed, data only while
//! Subscribing/Subscribed/Unsubscribing and for that key, `subscription_state()` agrees;
//! delivered slices lie within the received frame; `queued ≤ max_queue_size`, in flight
//! ≤ the table's `P` entries (and one authenticate), and together they bound the
//! unresolved tickets; nothing in flight unless Connected or Stopping;
//! after `handle_timeout(now)`, `poll_timeout()` is `None` or later than `now` and every
//! ticket whose deadline passed is final. At the end (optionally after `stop`, the
//! socket's close and all timeouts: Stopped, nothing in flight, only deadline-less
//! queued tickets open) `dispose` gives every ticket exactly one final outcome, deletes
//! every subscription, leaves no timer, and every later call is refused silently.
#![no_main]

use std::time::Duration;

use benchlink_core::rtm::pdu::History;
use benchlink_core::rtm::{
    Ack, AuthResult, Client, ClientState, Config, ConnectError, FailReason, Handler, InternalError,
    Mode, Outcome, Pending, RequestError, SubState, SubscribeArgs, SubscriptionSlot, Ticket,
    Transmit,
};
use benchlink_core::time::Instant;
use benchlink_core_fuzz::tickets::{Kind, Tickets};
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use serde_json::Value as Json;

fuzz_target!(|input: &[u8]| {
    let [opts, rest @ ..] = input else {
        return;
    };
    let mut u = Unstructured::new(rest);
    let ms = |u: &mut Unstructured<'_>, max: u64| {
        Duration::from_millis(u.int_in_range(0..=max).unwrap_or(0))
    };
    let config = Config {
        reconnect_interval: ms(&mut u, 3000),
        max_reconnect_interval: ms(&mut u, 20_000),
        fail_count_threshold: match u.int_in_range(0..=4u32).unwrap_or(0) {
            0 => None,
            n => Some(n - 1),
        },
        restore_auth_on_reconnect: opts & 4 != 0,
        max_queue_size: u.int_in_range(1..=12usize).unwrap_or(4),
        retry_first_connect: opts & 8 != 0,
        jitter_seed: u.arbitrary().unwrap_or(0),
        auth_timeout: ms(&mut u, 20_000).max(Duration::from_millis(1)),
        connect_timeout: ms(&mut u, 40_000).max(Duration::from_millis(1)),
        // JSON: the model server reads JSON.
        ..Config::DEFAULT
    };
    let stop_first = opts & 16 != 0;
    match opts & 3 {
        1 => Fuzz::<2, 2, 256, 512>::run(config, &mut u, stop_first),
        2 => Fuzz::<1, 1, 96, 384>::run(config, &mut u, stop_first),
        _ => Fuzz::<4, 8, 1024, 2048>::run(config, &mut u, stop_first),
    }
});

// ------------------------------------------------------------------------------------
// The recording handler
// ------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct SubModel {
    state: Option<SubState>,
    /// created − deleted: 0 or 1.
    live: i32,
}

struct Rec {
    state: ClientState,
    /// After the final dispose: no state, reply, auth or subscription event may come.
    sealed: bool,
    tickets: Tickets,
    /// Per key, in order of appearance (a handful of keys: a linear search).
    subs: Vec<(String, SubModel)>,
    /// The frame being handled (address range), for borrowed slices.
    frame: (usize, usize),
}

impl Rec {
    fn in_frame(&self, s: &str) {
        let p = s.as_ptr() as usize;
        assert!(
            p >= self.frame.0 && p + s.len() <= self.frame.1,
            "slice {s:?} not within the received frame"
        );
    }

    fn sub(&self, key: &str) -> Option<&SubModel> {
        self.subs.iter().find(|(k, _)| k == key).map(|(_, s)| s)
    }

    fn sub_mut(&mut self, key: &str) -> &mut SubModel {
        let i = match self.subs.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.subs.push((key.to_owned(), SubModel::default()));
                self.subs.len() - 1
            }
        };
        &mut self.subs[i].1
    }
}

impl Handler for Rec {
    fn client_state(&mut self, leave: ClientState, enter: ClientState) {
        assert!(!self.sealed, "client_state after dispose");
        assert_eq!(leave, self.state, "client_state leave != previous enter");
        assert_ne!(leave, ClientState::Disposed, "left Disposed");
        self.state = enter;
    }

    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        assert!(!self.sealed, "reply after dispose");
        self.tickets.reply(ticket, &outcome);
        if let Outcome::Ok(p) = outcome {
            p.body
                .inspect(|b| self.in_frame(b.as_json().expect("JSON").as_raw()));
        }
    }

    fn auth(&mut self, ticket: Ticket, result: AuthResult<'_>) {
        assert!(!self.sealed, "auth after dispose");
        self.tickets.auth(ticket, &result);
    }

    fn subscription_state(&mut self, key: &str, leave: SubState, enter: SubState) {
        assert!(!self.sealed);
        let s = self.sub_mut(key);
        assert_eq!(s.live, 1, "transition of {key:?} without a record");
        assert_eq!(
            s.state,
            Some(leave),
            "{key:?}: leave {leave:?} != previous enter"
        );
        s.state = Some(enter);
    }

    fn subscription_failed(&mut self, key: &str, reason: FailReason<'_>) {
        assert!(!self.sealed);
        let s = self.sub(key).expect("failed() for an unknown key");
        assert_eq!(s.state, Some(SubState::Failed), "failed() outside Failed");
        let _ = (reason.reason(), reason.error());
    }

    fn subscription_created(&mut self, key: &str) {
        assert!(!self.sealed);
        let s = self.sub_mut(key);
        s.live += 1;
        assert_eq!(s.live, 1, "{key:?} created twice");
        s.state.get_or_insert(SubState::Unsubscribed);
    }

    fn subscription_deleted(&mut self, key: &str) {
        assert!(!self.sealed);
        let s = self.sub_mut(key);
        s.live -= 1;
        assert_eq!(s.live, 0, "{key:?} deleted without a record");
    }

    fn subscription_data(
        &mut self,
        key: &str,
        data: benchlink_core::rtm::pdu::SubscriptionData<'_>,
    ) {
        assert!(!self.sealed);
        let s = self.sub(key).expect("data for an unknown key");
        assert_eq!(s.live, 1);
        assert!(
            matches!(
                s.state,
                Some(SubState::Subscribing | SubState::Subscribed | SubState::Unsubscribing)
            ),
            "data for {key:?} in {:?}",
            s.state
        );
        assert!(data.subscription_id == key, "data for another key");
        self.in_frame(data.messages.as_json().expect("JSON").as_raw());
        for m in data.messages.elements() {
            self.in_frame(m.as_json().expect("JSON").as_raw());
        }
    }

    fn fast_forward(&mut self, key: &str, info: benchlink_core::rtm::pdu::SubscriptionInfo<'_>) {
        assert!(!self.sealed);
        assert_eq!(self.sub(key).expect("info for an unknown key").live, 1);
        assert!(info.subscription_id == key);
    }

    fn internal_error(&mut self, error: InternalError<'_>) {
        let _ = error.is_fatal();
    }
}

// ------------------------------------------------------------------------------------
// The model adapter and the driver
// ------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sock {
    None,
    Opening,
    Open,
    Closing,
}

/// A PDU sent on the current socket.
#[derive(Debug, Clone)]
struct Sent {
    id: Option<u64>,
    action: String,
    key: Option<String>,
}

/// The client under test: `S` subscriptions, `P` requests in flight, a `Q`-byte queue,
/// an `O`-byte outbox.
type Fuzzed<const S: usize, const P: usize, const Q: usize, const O: usize> =
    Client<[SubscriptionSlot; S], [Pending; P], [u8; Q], [u8; O], Vec<u8>>;

struct Fuzz<const S: usize, const P: usize, const Q: usize, const O: usize> {
    client: Fuzzed<S, P, Q, O>,
    rec: Rec,
    config: Config,
    now: Instant,
    sock: Sock,
    sent: Vec<Sent>,
    last_id: Option<u64>,
    keys: Vec<String>,
}

/// Events an input may drive at most: every event costs libFuzzer's per-edge work as much
/// as the client's; the smallest capacities reach the limits in a few events.
const MAX_EVENTS: usize = 16;

/// A position longer than the client keeps.
const LONG_POSITION: &str =
    "\"9999999999999999999999999999999999999999999999999999999999999999999999\"";

const NAMES: &[&str] = &["a", "b", "c\"q", "é/ü", "a\\b", ""];
const JSONS: &[&str] = &[
    "1",
    "{\"k\":1}",
    "\"s\"",
    "[1,2]",
    "null",
    " 2 ",
    "{oops",
    "{\"a\":[{}]}",
];
const POSITIONS: &[&str] = &["\"1:1\"", "\"1479315802:6\"", "null", "\"1\\u003a2\"", "7"];

fn name(u: &mut Unstructured<'_>) -> String {
    if u.ratio(1, 8).unwrap_or(false) {
        let s: String = u.arbitrary().unwrap_or_default();
        s.chars().take(12).collect()
    } else {
        u.choose(NAMES).map(|s| s.to_string()).unwrap_or_default()
    }
}

fn json_text(u: &mut Unstructured<'_>) -> String {
    if u.ratio(1, 10).unwrap_or(false) {
        // Big enough to hit the queue and outbox limits.
        let n = u.int_in_range(50..=3000usize).unwrap_or(100);
        format!("\"{}\"", "x".repeat(n))
    } else {
        u.choose(JSONS).map(|s| s.to_string()).unwrap_or_default()
    }
}

fn quote(s: &str) -> String {
    Json::String(s.to_owned()).to_string()
}

impl<const S: usize, const P: usize, const Q: usize, const O: usize> Fuzz<S, P, Q, O> {
    fn run(config: Config, u: &mut Unstructured<'_>, stop_first: bool) {
        let mut f = Fuzz {
            client: Client::new(
                config,
                [SubscriptionSlot::EMPTY; S],
                [Pending::EMPTY; P],
                [0; Q],
                [0; O],
                vec![0; S * 128],
            ),
            rec: Rec {
                state: ClientState::Stopped,
                sealed: false,
                tickets: Tickets::new(MAX_EVENTS),
                subs: Vec::new(),
                frame: (0, 0),
            },
            config,
            now: Instant::from_secs(1000),
            sock: Sock::None,
            sent: Vec::new(),
            last_id: None,
            keys: Vec::new(),
        };
        assert_eq!(f.client.state(), ClientState::Stopped);
        assert_eq!(f.client.poll_timeout(), None);
        for _ in 0..MAX_EVENTS {
            if u.is_empty() {
                break;
            }
            let timed = f.step(u);
            f.drain();
            f.check(timed);
        }
        f.finish(stop_first);
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
        if self.client.state() == ClientState::Disposed {
            assert_eq!(r, Err(RequestError::Disposed));
        }
        self.rec.tickets.issue(r, kind, ack);
    }

    /// One event; true when it was `handle_timeout`.
    fn step(&mut self, u: &mut Unstructured<'_>) -> bool {
        let now = self.now;
        let h = &mut self.rec;
        match u.int_in_range(0..=22u8).unwrap_or(0) {
            0 => self.client.start(now, h),
            1 => self.client.stop(now, h),
            2 => {
                if u.ratio(1, 6).unwrap_or(false) {
                    self.client.dispose(now, h);
                    assert_eq!(self.client.queued_requests(), 0);
                    assert_eq!(self.client.requests_in_flight(), 0);
                }
            }
            3 => {
                let (ch, msg, ack) = (name(u), json_text(u), self.ack(u));
                let r = self.client.publish(now, &ch, &msg, ack, &mut self.rec);
                self.ticket(r, Kind::Publish, ack);
            }
            4 => {
                let ch = name(u);
                let args = match u.int_in_range(0..=3u8).unwrap_or(0) {
                    0 => Some("{\"position\":\"1:2\"}".to_owned()),
                    1 => Some(json_text(u)),
                    _ => None,
                };
                let deadline = self.deadline(u);
                let r = self
                    .client
                    .read(now, &ch, args.as_deref(), deadline, &mut self.rec);
                self.ticket(r.map(Some), Kind::Read, Ack::Reply { deadline });
            }
            5 => {
                let (ch, msg, ack) = (name(u), json_text(u), self.ack(u));
                let r = self.client.write(now, &ch, &msg, ack, &mut self.rec);
                self.ticket(r, Kind::Write, ack);
            }
            6 => {
                let (ch, ack) = (name(u), self.ack(u));
                let r = self.client.delete(now, &ch, ack, &mut self.rec);
                self.ticket(r, Kind::Delete, ack);
            }
            7 => {
                let (prefix, deadline) = (name(u), self.deadline(u));
                let r = self.client.search(now, &prefix, deadline, &mut self.rec);
                self.ticket(r.map(Some), Kind::Search, Ack::Reply { deadline });
            }
            8 => {
                let role = name(u);
                let secret: Vec<u8> = u.arbitrary::<[u8; 3]>().unwrap_or_default().to_vec();
                let deadline = self.deadline(u);
                let r = self
                    .client
                    .authenticate(now, &role, &secret, deadline, &mut self.rec);
                self.ticket(r.map(Some), Kind::Auth, Ack::Reply { deadline });
            }
            9 => {
                let key = name(u);
                let mode = *u
                    .choose(&[Mode::Simple, Mode::Reliable, Mode::Advanced])
                    .unwrap_or(&Mode::Reliable);
                let position = u.ratio(1, 4).unwrap_or(false).then_some("1:5");
                let filter = u.ratio(1, 5).unwrap_or(false).then_some("select * from a");
                let extras = match u.int_in_range(0..=8u8).unwrap_or(0) {
                    0 => Some("{\"position\":\"9:9\",\"x\":1}"),
                    1 => Some("[1]"),
                    _ => None,
                };
                let args = SubscribeArgs {
                    position,
                    history: u.ratio(1, 4).unwrap_or(false).then_some(History::Count(2)),
                    filter,
                    period: None,
                    only_value_changes: u.ratio(1, 6).unwrap_or(false),
                    force: u.ratio(1, 6).unwrap_or(false),
                    extras,
                };
                let r = self.client.subscribe(now, &key, mode, args, &mut self.rec);
                if self.client.state() == ClientState::Disposed {
                    assert_eq!(r, Err(RequestError::Disposed));
                }
                if !self.keys.contains(&key) {
                    self.keys.push(key);
                }
            }
            10 => {
                let key = self.key(u);
                let r = self.client.unsubscribe(now, &key, &mut self.rec);
                if r == Err(RequestError::UnknownSubscription) {
                    assert_eq!(self.client.subscription_state(&key), None);
                }
            }
            11 | 12 => {
                if self.sock == Sock::Opening {
                    self.sock = Sock::Open;
                    self.sent.clear();
                    self.last_id = None;
                    self.client.handle_connected(now, h);
                }
            }
            13 => {
                if self.sock == Sock::Opening {
                    self.sock = Sock::None;
                    let e = *u
                        .choose(&[
                            ConnectError::Resolve,
                            ConnectError::Io { code: 111 },
                            ConnectError::Rejected { status: 401 },
                            ConnectError::Timeout,
                        ])
                        .unwrap_or(&ConnectError::Tls);
                    self.client.handle_connect_failed(now, e, h);
                }
            }
            14 => {
                if self.sock != Sock::None {
                    self.sock = Sock::None;
                    self.client.handle_closed(now, h);
                }
            }
            15..=19 => {
                if matches!(self.sock, Sock::Open | Sock::Closing) {
                    let text = self.frame(u);
                    self.rec.frame = (text.as_ptr() as usize, text.as_ptr() as usize + text.len());
                    self.client.handle_message(now, &text, &mut self.rec);
                }
            }
            20 => {
                let step = match u.int_in_range(0..=2u8).unwrap_or(0) {
                    0 => Duration::from_millis(u.int_in_range(0..=1500u64).unwrap_or(0)),
                    1 => Duration::from_secs(u.int_in_range(0..=400u64).unwrap_or(0)),
                    _ => Duration::ZERO,
                };
                self.now = self.now.saturating_add(step);
                self.client.handle_timeout(self.now, &mut self.rec);
                return true;
            }
            _ => {
                if let Some(at) = self.client.poll_timeout() {
                    self.now = self.now.max(at);
                }
                self.client.handle_timeout(self.now, &mut self.rec);
                return true;
            }
        }
        false
    }

    fn key(&self, u: &mut Unstructured<'_>) -> String {
        if self.keys.is_empty() || u.ratio(1, 8).unwrap_or(false) {
            name(u)
        } else {
            u.choose(&self.keys).cloned().unwrap_or_default()
        }
    }

    /// A server frame: arbitrary text, or a plausible PDU built from what was sent.
    fn frame(&self, u: &mut Unstructured<'_>) -> String {
        let position = *u.choose(POSITIONS).unwrap_or(&"null");
        let position = if u.ratio(1, 10).unwrap_or(false) {
            LONG_POSITION
        } else {
            position
        };
        match u.int_in_range(0..=9u8).unwrap_or(0) {
            0 => {
                let s: String = u.arbitrary().unwrap_or_default();
                s.chars().take(200).collect()
            }
            1..=4 => {
                let with_id: Vec<&Sent> = self.sent.iter().filter(|s| s.id.is_some()).collect();
                let Some(sent) = (if with_id.is_empty() {
                    None
                } else if u.ratio(1, 2).unwrap_or(false) {
                    with_id.last().copied()
                } else {
                    u.choose(&with_id).ok().copied()
                }) else {
                    return "{\"action\":\"rtm/publish/ok\",\"id\":0}".to_owned();
                };
                let id = sent.id.unwrap_or(0);
                let key = sent.key.clone().unwrap_or_else(|| "a".to_owned());
                let suffix = *u.choose(&["ok", "ok", "error", "data"]).unwrap_or(&"ok");
                let action = if u.ratio(1, 12).unwrap_or(false) {
                    "rtm/publish/ok".to_owned()
                } else if u.ratio(1, 12).unwrap_or(false) {
                    "/error".to_owned()
                } else {
                    format!("{}/{suffix}", sent.action)
                };
                let body = match (sent.action.as_str(), suffix) {
                    (_, "error") => "{\"error\":\"e\",\"reason\":\"r\"}".to_owned(),
                    ("auth/handshake", _) if !u.ratio(1, 6).unwrap_or(false) => {
                        "{\"data\":{\"nonce\":\"MTI0==\"}}".to_owned()
                    }
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
                let id = match u.int_in_range(0..=12u8).unwrap_or(0) {
                    0 => "\"0\"".to_owned(),
                    1 => (id + 1).to_string(),
                    _ => id.to_string(),
                };
                if u.ratio(1, 10).unwrap_or(false) {
                    format!("{{\"action\":\"{action}\",\"id\":{id}}}")
                } else {
                    format!("{{\"action\":\"{action}\",\"id\":{id},\"body\":{body}}}")
                }
            }
            5 | 6 => {
                let key = self.key(u);
                let pos = if u.ratio(1, 6).unwrap_or(false) {
                    String::new()
                } else {
                    format!(",\"position\":{position}")
                };
                format!(
                    "{{\"action\":\"rtm/subscription/data\",\"body\":{{\"subscription_id\":{}{pos},\"messages\":[1,{{\"m\":\"x\"}}]}}}}",
                    quote(&key)
                )
            }
            7 => {
                let key = self.key(u);
                let error = *u
                    .choose(&["out_of_sync", "expired_position", "other"])
                    .unwrap_or(&"other");
                format!(
                    "{{\"action\":\"rtm/subscription/error\",\"body\":{{\"subscription_id\":{},\"error\":\"{error}\",\"reason\":\"r\"}}}}",
                    quote(&key)
                )
            }
            8 => {
                let key = self.key(u);
                let info = *u.choose(&["fast_forward", "other"]).unwrap_or(&"other");
                format!(
                    "{{\"action\":\"rtm/subscription/info\",\"body\":{{\"subscription_id\":{},\"info\":\"{info}\",\"position\":{position}}}}}",
                    quote(&key)
                )
            }
            _ => {
                let s = *u
                    .choose(&[
                        "{\"action\":\"/error\",\"body\":{\"error\":\"e\",\"reason\":\"r\"}}",
                        "{\"action\":\"rtm/new_thing\",\"body\":{}}",
                        "{\"action\":\"rtm/read/ok\",\"id\":99999,\"body\":{}}",
                        "{\"action\":\"rtm/read/ok\",\"body\":{}}",
                        " {\"action\":\"rtm/subscription/data\"}",
                        "[]",
                    ])
                    .unwrap_or(&"[]");
                s.to_owned()
            }
        }
    }

    /// The adapter acts on every transmit.
    fn drain(&mut self) {
        for _ in 0..100_000 {
            let state = self.client.state();
            let Some(t) = self.client.poll_transmit() else {
                return;
            };
            match t {
                Transmit::Connect => {
                    assert_eq!(state, ClientState::Connecting, "Connect outside Connecting");
                    self.sock = Sock::Opening;
                    self.sent.clear();
                    self.last_id = None;
                }
                Transmit::Close => {
                    if matches!(self.sock, Sock::Opening | Sock::Open) {
                        self.sock = Sock::Closing;
                    }
                }
                Transmit::Binary(bytes) => panic!("binary from a JSON client: {bytes:02x?}"),
                Transmit::Send(text) => {
                    assert_eq!(self.sock, Sock::Open, "Send without an open socket: {text}");
                    let v: Json = serde_json::from_str(text)
                        .unwrap_or_else(|e| panic!("Send of invalid JSON {text:?}: {e}"));
                    let Some(Json::String(action)) = v.get("action") else {
                        panic!("Send without a string action: {text}");
                    };
                    let id = v.get("id").map(|id| {
                        id.as_u64()
                            .unwrap_or_else(|| panic!("id not a u64 in {text}"))
                    });
                    if let Some(id) = id {
                        assert!(
                            self.last_id.is_none_or(|last| id > last),
                            "id {id} after {:?} on one socket",
                            self.last_id
                        );
                        self.last_id = Some(id);
                    }
                    let body = v.get("body");
                    assert!(
                        body.is_some_and(Json::is_object),
                        "body not an object: {text}"
                    );
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
        }
        panic!("poll_transmit never ends");
    }

    fn check(&mut self, timed: bool) {
        let c = &self.client;
        let state = c.state();
        assert_eq!(state, self.rec.state, "state() disagrees with the events");
        let (queued, in_flight) = (c.queued_requests(), c.requests_in_flight());
        assert!(
            queued <= self.config.max_queue_size,
            "{queued} queued > {}",
            self.config.max_queue_size
        );
        assert!(
            in_flight <= P + 1,
            "{in_flight} in flight > {P} entries and an auth"
        );
        assert!(
            self.rec.tickets.open() <= queued + in_flight,
            "{} open tickets but {queued} queued + {in_flight} in flight",
            self.rec.tickets.open()
        );
        if !matches!(state, ClientState::Connected | ClientState::Stopping) {
            assert_eq!(in_flight, 0, "requests in flight in {state:?}");
        }
        if timed {
            if let Some(at) = c.poll_timeout() {
                assert!(
                    at > self.now,
                    "poll_timeout {at:?} not after handle_timeout({:?})",
                    self.now
                );
            }
            for (t, info) in self.rec.tickets.iter() {
                if info.deadline.is_some_and(|d| d <= self.now) {
                    assert_eq!(info.finals, 1, "ticket {t} past its deadline is not final");
                }
            }
        }
        for key in &self.keys {
            let model = self.rec.sub(key);
            let live = model.is_some_and(|m| m.live == 1);
            let got = c.subscription_state(key);
            assert_eq!(got.is_some(), live, "record of {key:?}");
            if live {
                assert_eq!(got, model.and_then(|m| m.state), "state of {key:?}");
            }
        }
    }

    fn finish(mut self, stop_first: bool) {
        if stop_first && self.client.state() != ClientState::Disposed {
            self.client.stop(self.now, &mut self.rec);
            self.drain();
            self.check(false);
            if self.sock != Sock::None {
                self.sock = Sock::None;
                self.client.handle_closed(self.now, &mut self.rec);
                self.drain();
                self.check(false);
            }
            for _ in 0..100 {
                let Some(at) = self.client.poll_timeout() else {
                    break;
                };
                self.now = self.now.max(at);
                self.client.handle_timeout(self.now, &mut self.rec);
                self.drain();
                self.check(true);
            }
            assert_eq!(self.client.poll_timeout(), None, "timers left after stop");
            assert_eq!(self.client.state(), ClientState::Stopped);
            assert_eq!(self.client.requests_in_flight(), 0);
            for (t, info) in self.rec.tickets.iter() {
                if info.finals == 0 {
                    assert!(
                        info.deadline.is_none(),
                        "ticket {t} with a deadline still open"
                    );
                }
            }
        }
        self.client.dispose(self.now, &mut self.rec);
        self.drain();
        assert_eq!(self.client.state(), ClientState::Disposed);
        self.check(false);
        self.rec.sealed = true;
        assert_eq!(
            self.rec.tickets.open(),
            0,
            "tickets without a final outcome"
        );
        for (t, info) in self.rec.tickets.iter() {
            assert_eq!(
                info.finals, 1,
                "ticket {t} ({:?}) has no final outcome",
                info.kind
            );
        }
        for (key, s) in &self.rec.subs {
            assert_eq!(s.live, 0, "subscription {key:?} not deleted by dispose");
        }
        assert_eq!(self.client.poll_timeout(), None);
        assert_eq!(self.client.queued_requests(), 0);
        assert_eq!(self.client.requests_in_flight(), 0);

        // Everything later is refused or ignored, without events.
        let (now, h) = (self.now, &mut self.rec);
        self.client.start(now, h);
        self.client.handle_connected(now, h);
        self.client
            .handle_timeout(now.saturating_add(Duration::from_secs(1000)), h);
        self.client
            .handle_message(now, "{\"action\":\"rtm/publish/ok\",\"id\":0}", h);
        self.client.handle_closed(now, h);
        let ack = Ack::Reply { deadline: None };
        assert_eq!(
            self.client.publish(now, "a", "1", ack, h),
            Err(RequestError::Disposed)
        );
        assert_eq!(
            self.client
                .subscribe(now, "a", Mode::Simple, SubscribeArgs::default(), h),
            Err(RequestError::Disposed)
        );
        assert_eq!(
            self.client.authenticate(now, "r", b"s", None, h),
            Err(RequestError::Disposed)
        );
        assert_eq!(self.client.state(), ClientState::Disposed);
        while let Some(t) = self.client.poll_transmit() {
            assert_eq!(t, Transmit::Close, "only a Close after dispose");
        }
    }
}
