//! Client tests: scripted event sequences with explicit `now`, a recording handler and a
//! fake transport that reads `poll_transmit` and feeds replies.
//!
//! Layout: harness; the reference SDK's client transition table, every event in every
//! state; backoff (it grows even against a server that accepts and closes at once);
//! restore order on reconnect, checked against a recorded Python SDK session; offline
//! queue and limits; request outcomes (every acked request ends exactly once); protocol
//! errors (fatal or ignored); subscriptions (positions, failures, unsubscribes, data
//! before the ok); auth; cases from the Python SDK's own test suite; a randomized
//! event-sequence test.

use std::collections::BTreeMap;
use std::format;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use core::time::Duration;

use super::*;
use crate::rtm::pdu::History;
use crate::rtm::{
    FailReason, NoopHandler, Pending, SubscribeArgs, SubscriptionSlot, MAX_POSITION_LEN,
    MAX_SUBSCRIPTION_KEY,
};

type C = Client<[SubscriptionSlot; 8], [Pending; 16], [u8; 4096], [u8; 2048], [u8; 2048]>;

/// Records every event as one line.
#[derive(Default)]
struct Rec {
    log: Vec<String>,
    /// Final outcomes per ticket (replies and auth results).
    finals: BTreeMap<u32, usize>,
}

fn internal_name(e: &InternalError<'_>) -> String {
    let name = match e {
        InternalError::Malformed(_) => "Malformed",
        InternalError::GeneralError(_) => "GeneralError",
        InternalError::WrongReply { .. } => "WrongReply",
        InternalError::AuthRestoreFailed => "AuthRestoreFailed",
        InternalError::Ignored(_) => "Ignored",
        InternalError::UnknownReply(_) => "UnknownReply",
        InternalError::DataWithoutPosition { .. } => "DataWithoutPosition",
        InternalError::PositionNotTracked { .. } => "PositionNotTracked",
        InternalError::UnexpectedForSubscription { .. } => "UnexpectedForSubscription",
        InternalError::NotConnected => "NotConnected",
    };
    format!(
        "internal {name}{}",
        if e.is_fatal() { " fatal" } else { "" }
    )
}

impl Handler for Rec {
    fn client_state(&mut self, leave: ClientState, enter: ClientState) {
        self.log.push(format!("client {leave:?}->{enter:?}"));
    }
    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        let body = |p: &Pdu<'_>| {
            p.body.map_or("-".to_string(), |b| {
                String::from_utf8_lossy(b.raw().as_bytes()).into_owned()
            })
        };
        let what = match &outcome {
            Outcome::Ok(p) => format!("ok {}", body(p)),
            Outcome::Error(p) => format!("error {}", body(p)),
            Outcome::Data(p) => format!("data {}", body(p)),
            Outcome::Timeout => "timeout".to_string(),
            Outcome::Disconnected => "disconnected".to_string(),
        };
        if outcome.is_final() {
            *self.finals.entry(ticket.get()).or_default() += 1;
        }
        self.log.push(format!("reply#{} {what}", ticket.get()));
    }
    fn subscription_state(&mut self, key: &str, leave: SubState, enter: SubState) {
        self.log.push(format!("sub {key} {leave:?}->{enter:?}"));
    }
    fn subscription_failed(&mut self, key: &str, reason: FailReason<'_>) {
        self.log.push(format!("failed {key} {}", reason.reason()));
    }
    fn subscription_created(&mut self, key: &str) {
        self.log.push(format!("created {key}"));
    }
    fn subscription_deleted(&mut self, key: &str) {
        self.log.push(format!("deleted {key}"));
    }
    fn subscription_data(&mut self, key: &str, data: crate::rtm::pdu::SubscriptionData<'_>) {
        let messages: Vec<&str> = data
            .messages
            .elements()
            .map(|m| m.as_json().unwrap().as_raw())
            .collect();
        let position = data.position.map_or("-", |p| p.as_raw());
        self.log
            .push(format!("data {key} [{}] {position}", messages.join(",")));
    }
    fn fast_forward(&mut self, key: &str, _info: crate::rtm::pdu::SubscriptionInfo<'_>) {
        self.log.push(format!("fast_forward {key}"));
    }
    fn internal_error(&mut self, error: InternalError<'_>) {
        self.log.push(internal_name(&error));
    }
    fn auth(&mut self, ticket: Ticket, result: AuthResult<'_>) {
        *self.finals.entry(ticket.get()).or_default() += 1;
        let what = match result {
            AuthResult::Done => "done".to_string(),
            AuthResult::Rejected { failure, error } => format!(
                "rejected {failure:?} {}",
                error.reason.map_or("-", |r| r.as_raw())
            ),
            AuthResult::Timeout => "timeout".to_string(),
            AuthResult::Disconnected => "disconnected".to_string(),
        };
        self.log.push(format!("auth#{} {what}", ticket.get()));
    }
}

/// A client, a recorder and a clock.
struct T {
    c: C,
    r: Rec,
    now: Instant,
}

fn quiet() -> Config {
    Config {
        jitter_seed: 0,
        ..Config::default()
    }
}

impl T {
    fn new(config: Config) -> Self {
        T {
            c: C::new(
                config,
                [SubscriptionSlot::EMPTY; 8],
                [Pending::EMPTY; 16],
                [0; 4096],
                [0; 2048],
                [0; 2048],
            ),
            r: Rec::default(),
            now: Instant::ZERO,
        }
    }
    fn at(&mut self, ms: u64) -> &mut Self {
        self.now = Instant::from_millis(ms);
        self
    }
    /// Drains the transmits: `CONNECT`, `CLOSE` or the PDU text.
    fn out(&mut self) -> Vec<String> {
        let mut v = Vec::new();
        while let Some(t) = self.c.poll_transmit() {
            v.push(match t {
                Transmit::Connect => "CONNECT".to_string(),
                Transmit::Close => "CLOSE".to_string(),
                Transmit::Send(s) => s.to_string(),
                Transmit::Binary(b) => format!("{b:02x?}"),
            });
        }
        v
    }
    fn log(&mut self) -> Vec<String> {
        core::mem::take(&mut self.r.log)
    }
    fn start(&mut self) {
        self.c.start(self.now, &mut self.r);
    }
    fn stop(&mut self) {
        self.c.stop(self.now, &mut self.r);
    }
    fn dispose(&mut self) {
        self.c.dispose(self.now, &mut self.r);
    }
    fn opened(&mut self) {
        self.c.handle_connected(self.now, &mut self.r);
    }
    fn failed(&mut self) {
        self.c
            .handle_connect_failed(self.now, ConnectError::Io { code: 111 }, &mut self.r);
    }
    fn closed(&mut self) {
        self.c.handle_closed(self.now, &mut self.r);
    }
    fn tick(&mut self) {
        self.c.handle_timeout(self.now, &mut self.r);
    }
    fn recv(&mut self, text: &str) {
        self.c.handle_message(self.now, text, &mut self.r);
    }
    /// start → Connect → open; returns what was sent after the open.
    fn connect(&mut self) -> Vec<String> {
        self.start();
        assert_eq!(self.out(), ["CONNECT"]);
        self.opened();
        self.out()
    }
    fn publish(
        &mut self,
        channel: &str,
        msg: &str,
        ack: bool,
    ) -> Result<Option<Ticket>, RequestError> {
        let ack = if ack {
            Ack::Reply { deadline: None }
        } else {
            Ack::None
        };
        self.c.publish(self.now, channel, msg, ack, &mut self.r)
    }
    fn sub(&mut self, key: &str, mode: Mode) {
        self.sub_with(key, mode, SubscribeArgs::default());
    }
    fn sub_with(&mut self, key: &str, mode: Mode, args: SubscribeArgs<'_>) {
        self.c
            .subscribe(self.now, key, mode, args, &mut self.r)
            .unwrap();
    }
    fn unsub(&mut self, key: &str) -> Result<(), RequestError> {
        self.c.unsubscribe(self.now, key, &mut self.r)
    }
    fn auth(&mut self, role: &str, secret: &str) -> Ticket {
        self.c
            .authenticate(self.now, role, secret.as_bytes(), None, &mut self.r)
            .unwrap()
    }
    fn state(&self) -> ClientState {
        self.c.state()
    }
}

fn sub_ok(id: u32, key: &str, position: &str) -> String {
    format!(
        r#"{{"action":"rtm/subscribe/ok","id":{id},"body":{{"subscription_id":"{key}","position":"{position}"}}}}"#
    )
}

fn data(key: &str, position: &str, messages: &str) -> String {
    format!(
        r#"{{"action":"rtm/subscription/data","body":{{"subscription_id":"{key}","position":"{position}","messages":{messages}}}}}"#
    )
}

fn channel_error(key: &str, error: &str) -> String {
    format!(
        r#"{{"action":"rtm/subscription/error","body":{{"subscription_id":"{key}","error":"{error}","reason":"r"}}}}"#
    )
}

fn subscribe_pdu(id: u32, body: &str) -> String {
    format!(r#"{{"action":"rtm/subscribe","id":{id},"body":{body}}}"#)
}

fn unsubscribe_pdu(id: u32, key: &str) -> String {
    format!(r#"{{"action":"rtm/unsubscribe","id":{id},"body":{{"subscription_id":"{key}"}}}}"#)
}

const NONCE: &str = "MTI0Njg4NTAyMjYxMzgxMzgzMg==";
const SECRET: &str = "FF6FFFCfB2f7F3fe0E627d9fE2DB2EcD";

fn handshake_pdu(id: u32) -> String {
    format!(
        r#"{{"action":"auth/handshake","id":{id},"body":{{"method":"role_secret","data":{{"role":"superuser"}}}}}}"#
    )
}

fn authenticate_pdu(id: u32) -> String {
    format!(
        r#"{{"action":"auth/authenticate","id":{id},"body":{{"method":"role_secret","credentials":{{"hash":"P6COJ5aXJvIRoJO1PaYREw=="}}}}}}"#
    )
}

fn handshake_ok(id: u32) -> String {
    format!(r#"{{"action":"auth/handshake/ok","id":{id},"body":{{"data":{{"nonce":"{NONCE}"}}}}}}"#)
}

fn authenticate_ok(id: u32) -> String {
    format!(r#"{{"action":"auth/authenticate/ok","id":{id},"body":{{}}}}"#)
}

// ---------------------------------------------------------------------------------------
// The reference SDK's client transition table: every event in every state
// ---------------------------------------------------------------------------------------

#[test]
fn stopped_rows() {
    let mut t = T::new(quiet());
    // Stop, Tick, ConnectionClosed, ConnectingFailed: nothing.
    t.stop();
    t.tick();
    t.closed();
    t.failed();
    assert_eq!(t.state(), ClientState::Stopped);
    assert!(t.log().is_empty());
    assert!(t.out().is_empty());
    // ConnectingComplete from a stale socket: nothing but closing that socket.
    t.opened();
    assert_eq!(t.state(), ClientState::Stopped);
    assert_eq!(t.out(), ["CLOSE"]);
    // InternalError: notified, no transition.
    t.recv("garbage");
    assert_eq!(t.log(), ["internal NotConnected"]);
    // Start → Connecting.
    t.start();
    assert_eq!(t.log(), ["client Stopped->Connecting"]);
    assert_eq!(t.out(), ["CONNECT"]);
    // Dispose from Stopped.
    let mut t = T::new(quiet());
    t.dispose();
    assert_eq!(t.log(), ["client Stopped->Disposed"]);
}

#[test]
fn connecting_rows() {
    // ConnectingComplete (no auth to restore) → Connected.
    let mut t = T::new(quiet());
    assert!(t.connect().is_empty());
    assert_eq!(
        t.log(),
        ["client Stopped->Connecting", "client Connecting->Connected"]
    );

    // ConnectingFailed, no attempts left (first connect, default policy) → Stopped.
    let mut t = T::new(quiet());
    t.start();
    t.out();
    t.failed();
    assert_eq!(t.state(), ClientState::Stopped);

    // ConnectingFailed with attempts left → Awaiting.
    let mut t = T::new(Config {
        retry_first_connect: true,
        ..quiet()
    });
    t.start();
    t.out();
    t.failed();
    assert_eq!(t.state(), ClientState::Awaiting);

    // Start, Tick, ConnectionClosed (before the Connect was taken): nothing.
    let mut t = T::new(quiet());
    t.start();
    t.log();
    t.start();
    t.tick();
    t.closed();
    assert_eq!(t.state(), ClientState::Connecting);
    assert!(t.log().is_empty());
    assert_eq!(t.out(), ["CONNECT"]);

    // Stop → Stopped; the attempt in progress is closed.
    t.stop();
    assert_eq!(t.state(), ClientState::Stopped);
    assert_eq!(t.out(), ["CLOSE"]);

    // Stop before the adapter took the Connect: it is withdrawn.
    let mut t = T::new(quiet());
    t.start();
    t.stop();
    assert!(t.out().is_empty());

    // Dispose → Disposed.
    let mut t = T::new(quiet());
    t.start();
    t.out();
    t.dispose();
    assert_eq!(t.state(), ClientState::Disposed);
    assert_eq!(t.out(), ["CLOSE"]);
}

#[test]
fn connecting_internal_error_and_auth_restore_failure() {
    // A protocol error during auth restore: attempts left → Awaiting, else → Stopped.
    for (retry, expect) in [(true, ClientState::Awaiting), (false, ClientState::Stopped)] {
        let mut t = T::new(Config {
            fail_count_threshold: Some(if retry { 5 } else { 1 }),
            ..quiet()
        });
        t.connect();
        let a = t.auth("superuser", SECRET);
        t.out();
        t.recv(&handshake_ok(0));
        t.out();
        t.recv(&authenticate_ok(1));
        assert!(t.log().contains(&format!("auth#{} done", a.get())));
        t.at(10_000).closed();
        assert_eq!(t.state(), ClientState::Awaiting);
        t.tick();
        assert_eq!(t.out(), ["CONNECT"]);
        t.opened();
        assert_eq!(t.out(), [handshake_pdu(0)]);
        assert_eq!(t.state(), ClientState::Connecting);
        t.log();
        t.recv("{not json");
        assert_eq!(t.state(), expect, "retry={retry}");
        let log = t.log();
        assert_eq!(log[0], "internal Malformed fatal");
        assert_eq!(t.out(), ["CLOSE"]);
    }
}

#[test]
fn connected_rows() {
    let mut t = T::new(quiet());
    t.connect();
    t.log();
    // Start, Tick, ConnectingFailed, ConnectingComplete: nothing.
    t.start();
    t.tick();
    t.failed();
    t.opened();
    assert_eq!(t.state(), ClientState::Connected);
    assert!(t.log().is_empty() && t.out().is_empty());
    // Stop → Stopping (Close ordered).
    t.stop();
    assert_eq!(t.log(), ["client Connected->Stopping"]);
    assert_eq!(t.out(), ["CLOSE"]);

    // ConnectionClosed → Awaiting.
    let mut t = T::new(quiet());
    t.connect();
    t.log();
    t.at(5_000).closed();
    assert_eq!(t.log(), ["client Connected->Awaiting"]);
    assert!(t.out().is_empty(), "the socket is gone: nothing to close");

    // InternalError → Awaiting, notified, socket closed.
    let mut t = T::new(quiet());
    t.connect();
    t.log();
    t.recv(r#"{"action":"/error","body":{"error":"e","reason":"r"}}"#);
    assert_eq!(
        t.log(),
        ["internal GeneralError fatal", "client Connected->Awaiting"]
    );
    assert_eq!(t.out(), ["CLOSE"]);

    // Dispose → Disposed.
    let mut t = T::new(quiet());
    t.connect();
    t.log();
    t.dispose();
    assert_eq!(t.log(), ["client Connected->Disposed"]);
    assert_eq!(t.out(), ["CLOSE"]);
}

#[test]
fn stopping_rows() {
    let start = |t: &mut T| {
        t.connect();
        t.stop();
        t.out();
        t.log();
    };
    // Stop, Tick, ConnectingFailed, ConnectingComplete: nothing.
    let mut t = T::new(quiet());
    start(&mut t);
    t.stop();
    t.tick();
    t.failed();
    t.opened();
    assert_eq!(t.state(), ClientState::Stopping);
    assert!(t.log().is_empty() && t.out().is_empty());
    // ConnectionClosed → Stopped.
    t.closed();
    assert_eq!(t.log(), ["client Stopping->Stopped"]);

    // InternalError → Stopped, notified.
    let mut t = T::new(quiet());
    start(&mut t);
    t.recv("[]");
    assert_eq!(
        t.log(),
        ["internal Malformed fatal", "client Stopping->Stopped"]
    );

    // Start → Connecting: the old socket is closed first, then a new one opened; the
    // acked request in flight ends Disconnected.
    let mut t = T::new(quiet());
    t.connect();
    t.log();
    let p = t.publish("c", "1", true).unwrap().unwrap();
    t.stop();
    t.start();
    assert_eq!(
        t.log(),
        [
            "client Connected->Stopping".to_string(),
            "client Stopping->Connecting".to_string(),
            format!("reply#{} disconnected", p.get()),
        ]
    );
    // The adapter sends what was ordered before the stop, closes the old socket (its close
    // report, before the new Connect is taken, is ignored), then connects.
    assert_eq!(
        t.c.poll_transmit(),
        Some(Transmit::Send(
            r#"{"action":"rtm/publish","id":0,"body":{"channel":"c","message":1}}"#
        ))
    );
    assert_eq!(t.c.poll_transmit(), Some(Transmit::Close));
    t.closed();
    assert_eq!(t.state(), ClientState::Connecting);
    assert_eq!(t.out(), ["CONNECT"]);
    t.opened();
    assert_eq!(t.state(), ClientState::Connected);

    // Dispose → Disposed.
    let mut t = T::new(quiet());
    start(&mut t);
    t.dispose();
    assert_eq!(t.log(), ["client Stopping->Disposed"]);
}

#[test]
fn awaiting_rows() {
    let awaiting = || {
        let mut t = T::new(quiet());
        t.connect();
        t.at(10_000).closed();
        t.log();
        t
    };
    // ConnectionClosed, ConnectingFailed, ConnectingComplete (stale): nothing but closing it.
    let mut t = awaiting();
    t.closed();
    t.failed();
    t.opened();
    assert_eq!(t.state(), ClientState::Awaiting);
    assert!(t.log().is_empty());
    assert_eq!(t.out(), ["CLOSE"]);
    // InternalError: notified only.
    t.recv("x");
    assert_eq!(t.log(), ["internal NotConnected"]);
    // Tick → Connecting.
    t.tick();
    assert_eq!(t.log(), ["client Awaiting->Connecting"]);
    assert_eq!(t.out(), ["CONNECT"]);

    // Start → Connecting, before the timer.
    let mut t = awaiting();
    t.failed(); // make the next delay non-zero
    t.start();
    assert_eq!(t.state(), ClientState::Connecting);
    // Stop → Stopped.
    let mut t = awaiting();
    t.stop();
    assert_eq!(t.log(), ["client Awaiting->Stopped"]);
    // Dispose → Disposed.
    let mut t = awaiting();
    t.dispose();
    assert_eq!(t.log(), ["client Awaiting->Disposed"]);
}

#[test]
fn disposed_refuses_everything() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    let queued = t.publish("c", "1", true).unwrap().unwrap();
    let a = t.auth("r", "s");
    t.log();
    t.dispose();
    assert_eq!(
        t.log(),
        [
            "client Stopped->Disposed".to_string(),
            format!("reply#{} disconnected", queued.get()),
            format!("auth#{} disconnected", a.get()),
            "deleted chan".to_string(),
        ]
    );
    t.start();
    t.stop();
    t.dispose();
    t.opened();
    t.closed();
    t.failed();
    t.tick();
    t.recv("{}");
    assert_eq!(t.log(), ["internal NotConnected"]);
    assert_eq!(t.state(), ClientState::Disposed);
    assert_eq!(t.c.poll_timeout(), None);
    let e: Result<(), RequestError> = Err(RequestError::Disposed);
    assert_eq!(t.publish("c", "1", false).map(|_| ()), e);
    assert_eq!(t.c.read(t.now, "c", None, None, &mut t.r).map(|_| ()), e);
    assert_eq!(
        t.c.write(t.now, "c", "1", Ack::None, &mut t.r).map(|_| ()),
        e
    );
    assert_eq!(t.c.delete(t.now, "c", Ack::None, &mut t.r).map(|_| ()), e);
    assert_eq!(t.c.search(t.now, "c", None, &mut t.r).map(|_| ()), e);
    assert_eq!(
        t.c.authenticate(t.now, "r", b"s", None, &mut t.r)
            .map(|_| ()),
        e
    );
    let args = SubscribeArgs::default();
    assert_eq!(t.c.subscribe(t.now, "k", Mode::Simple, args, &mut t.r), e);
    assert_eq!(t.unsub("k"), e);
    // The socket the adapter opened late is closed; nothing else.
    assert_eq!(t.out(), ["CLOSE"]);
}

#[test]
fn channel_error_outside_connected_is_applied_not_fatal() {
    // Stopping: the connection still delivers frames; a channel error is applied to the
    // subscription (the reference raised TransitionUndefined here, killing its loop
    // thread).
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.stop();
    t.log();
    t.recv(&channel_error("chan", "out_of_sync"));
    assert_eq!(t.log(), ["sub chan Subscribed->Subscribing",]);
    assert_eq!(
        t.out(),
        ["CLOSE"],
        "nothing more is sent on a closing socket"
    );
    t.closed();
    assert_eq!(t.state(), ClientState::Stopped);
    // Connecting during auth restore: a channel error for an unsubscribed key is reported.
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.auth("superuser", SECRET);
    t.out();
    t.recv(&handshake_ok(1));
    t.out();
    t.recv(&authenticate_ok(2));
    t.at(10_000).closed();
    t.tick();
    t.out();
    t.opened();
    assert_eq!(t.state(), ClientState::Connecting);
    t.log();
    t.recv(&channel_error("chan", "out_of_sync"));
    assert_eq!(t.log(), ["internal UnexpectedForSubscription"]);
    assert_eq!(t.state(), ClientState::Connecting);
}

// ---------------------------------------------------------------------------------------
// Backoff: from the previous attempt's start, reset only after a stable connection
// ---------------------------------------------------------------------------------------

/// Starts of connect attempts (ms) after a stable connection drops at 10 s, every attempt
/// failing at once.
fn attempt_starts(config: Config, attempts: usize) -> Vec<u64> {
    let mut t = T::new(config);
    t.connect();
    t.at(10_000).closed();
    let mut starts = Vec::new();
    for _ in 0..attempts {
        let at = t.c.poll_timeout().unwrap();
        t.now = at;
        t.tick();
        assert_eq!(t.out(), ["CONNECT"]);
        starts.push(at.as_millis());
        t.failed();
    }
    starts
}

#[test]
fn backoff_matches_the_reference_gaps() {
    let config = Config {
        reconnect_interval: Duration::from_millis(250),
        max_reconnect_interval: Duration::from_secs(3),
        ..quiet()
    };
    let starts = attempt_starts(config, 6);
    let gaps: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(starts[0], 10_000, "a stable connection reconnects at once");
    assert_eq!(gaps, [500, 1000, 2000, 3000, 3000]);
}

/// `wait_before_first_reconnect`: the SDK contract's `reconnect_interval`, the wait
/// before the first reconnection attempt, counted from the drop; failed attempts then
/// back off from their own starts as before.
#[test]
fn first_reconnect_waits_the_interval_when_asked() {
    let config = Config {
        reconnect_interval: Duration::from_millis(250),
        max_reconnect_interval: Duration::from_secs(3),
        wait_before_first_reconnect: true,
        ..quiet()
    };
    let starts = attempt_starts(config, 4);
    let gaps: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(starts[0], 10_250, "the interval after the drop at 10 s");
    assert_eq!(gaps, [500, 1000, 2000]);
}

#[test]
fn backoff_is_measured_from_the_attempt_start() {
    let mut t = T::new(Config {
        retry_first_connect: true,
        ..quiet()
    });
    t.start();
    t.out();
    t.at(700).failed(); // the attempt started at 0 and took 0.7 s
    assert_eq!(t.c.poll_timeout(), Some(Instant::from_secs(2)));
}

#[test]
fn jittered_backoff_stays_within_bounds() {
    let config = Config {
        reconnect_interval: Duration::from_millis(250),
        max_reconnect_interval: Duration::from_secs(3),
        jitter_seed: 42,
        ..Config::default()
    };
    let starts = attempt_starts(config, 6);
    let gaps: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, base) in gaps.iter().zip([500u64, 1000, 2000, 3000, 3000]) {
        assert!(*gap <= base && *gap >= base * 3 / 4, "{gaps:?}");
    }
    assert_ne!(gaps, [500, 1000, 2000, 3000, 3000], "jitter applied");
}

#[test]
fn accept_then_close_storm_backs_off() {
    // The server accepts the upgrade and closes at once, every time. The reference
    // reconnects every reconnect_interval; here the delay grows.
    let mut t = T::new(Config {
        reconnect_interval: Duration::from_millis(250),
        max_reconnect_interval: Duration::from_secs(3),
        ..quiet()
    });
    t.connect();
    t.at(10_000).closed();
    let mut starts = Vec::new();
    for _ in 0..6 {
        let at = t.c.poll_timeout().unwrap();
        t.now = at;
        t.tick();
        assert_eq!(t.out(), ["CONNECT"]);
        starts.push(at.as_millis());
        t.opened();
        assert_eq!(t.state(), ClientState::Connected);
        t.closed();
    }
    let gaps: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [500, 1000, 2000, 3000, 3000]);
    // A connection that got a reply is stable even if short: the count resets.
    t.now = t.c.poll_timeout().unwrap();
    t.tick();
    t.out();
    t.opened();
    let p = t.publish("c", "1", true).unwrap().unwrap();
    t.out();
    t.recv(r#"{"action":"rtm/publish/ok","id":0,"body":{"position":"1:0"}}"#);
    assert!(t
        .log()
        .contains(&format!("reply#{} ok {{\"position\":\"1:0\"}}", p.get())));
    let opened_at = t.now;
    t.closed();
    assert_eq!(
        t.c.poll_timeout(),
        Some(opened_at + Duration::from_millis(250))
    );
}

#[test]
fn threshold_counts_reconnect_attempts_exactly() {
    for threshold in [0u32, 1, 3] {
        let mut t = T::new(Config {
            fail_count_threshold: Some(threshold),
            reconnect_interval: Duration::ZERO,
            ..quiet()
        });
        t.connect();
        t.log();
        t.at(1_000).closed();
        let mut attempts = 0;
        while t.state() == ClientState::Awaiting {
            t.now = t.c.poll_timeout().unwrap();
            t.tick();
            assert_eq!(t.out(), ["CONNECT"]);
            attempts += 1;
            t.failed();
        }
        assert_eq!(attempts, threshold, "threshold {threshold}");
        assert_eq!(t.state(), ClientState::Stopped);
        if threshold == 0 {
            assert_eq!(t.log(), ["client Connected->Stopped"]);
        }
    }
}

#[test]
fn reconnect_log_with_threshold_one() {
    // reconnect.py: exact client-state log across a drop and a reconnect.
    let mut t = T::new(Config {
        fail_count_threshold: Some(1),
        reconnect_interval: Duration::ZERO,
        ..quiet()
    });
    t.connect();
    t.at(100).closed();
    t.tick();
    t.out();
    t.opened();
    assert_eq!(
        t.log(),
        [
            "client Stopped->Connecting",
            "client Connecting->Connected",
            "client Connected->Awaiting",
            "client Awaiting->Connecting",
            "client Connecting->Connected"
        ]
    );
}

#[test]
fn first_connect_policy() {
    // Default: the reference behaviour (a bad endpoint fails fast).
    let mut t = T::new(quiet());
    t.start();
    t.out();
    t.c.handle_connect_failed(t.now, ConnectError::Resolve, &mut t.r);
    assert_eq!(
        t.log(),
        ["client Stopped->Connecting", "client Connecting->Stopped"]
    );
    assert_eq!(t.c.last_connecting_error(), Some(ConnectError::Resolve));
    assert_eq!(t.c.poll_timeout(), None);

    // Explicit option: retried per the budget (2 retries here).
    let mut t = T::new(Config {
        retry_first_connect: true,
        fail_count_threshold: Some(2),
        ..quiet()
    });
    t.start();
    let mut attempts = 0;
    loop {
        assert_eq!(t.out(), ["CONNECT"]);
        attempts += 1;
        t.c.handle_connect_failed(t.now, ConnectError::Rejected { status: 401 }, &mut t.r);
        if t.state() == ClientState::Stopped {
            break;
        }
        t.now = t.c.poll_timeout().unwrap();
        t.tick();
    }
    assert_eq!(attempts, 3, "the first attempt plus two retries");
    assert_eq!(
        t.c.last_connecting_error(),
        Some(ConnectError::Rejected { status: 401 })
    );

    // After a successful first connect the normal budget applies.
    let mut t = T::new(Config {
        fail_count_threshold: Some(2),
        ..quiet()
    });
    t.connect();
    t.at(10_000).closed();
    assert_eq!(t.state(), ClientState::Awaiting);
}

#[test]
fn connect_timeout_is_a_failed_attempt() {
    let mut t = T::new(Config {
        retry_first_connect: true,
        connect_timeout: Duration::from_secs(5),
        ..quiet()
    });
    t.start();
    assert_eq!(t.out(), ["CONNECT"]);
    assert_eq!(t.c.poll_timeout(), Some(Instant::from_secs(5)));
    t.at(5_000).tick();
    // Failed; the backoff (2 s from the attempt's start) has already elapsed, so the next
    // attempt starts in the same call.
    assert_eq!(
        t.log(),
        [
            "client Stopped->Connecting",
            "client Connecting->Awaiting",
            "client Awaiting->Connecting"
        ]
    );
    assert_eq!(t.c.last_connecting_error(), Some(ConnectError::Timeout));
    assert_eq!(t.out(), ["CLOSE", "CONNECT"]);
    // A close report during the opening counts as a failure too.
    t.closed();
    assert_eq!(t.state(), ClientState::Awaiting);
    assert_eq!(t.c.poll_timeout(), Some(Instant::from_secs(9)));
    assert_eq!(t.c.last_connecting_error(), Some(ConnectError::Closed));
}

// ---------------------------------------------------------------------------------------
// Restore order: credentials, subscriptions, queued requests (recorded Python session)
// ---------------------------------------------------------------------------------------

#[test]
fn restore_order_matches_the_reference_transcript() {
    let mut t = T::new(quiet());
    // Created stopped: one queued publish, then five subscriptions.
    assert_eq!(t.publish("chan", r#"{"k": 1}"#, false), Ok(None));
    t.sub("chan", Mode::Reliable);
    t.sub("adv", Mode::Advanced);
    t.sub("simple", Mode::Simple);
    let view = SubscribeArgs {
        filter: Some("select * from chan"),
        ..SubscribeArgs::default()
    };
    t.sub_with("view1", Mode::Simple, view);
    let bad = SubscribeArgs {
        position: Some("bad"),
        ..SubscribeArgs::default()
    };
    t.sub_with("badpos", Mode::Advanced, bad);
    // Started: subscriptions in insertion order, then the queued publish.
    assert_eq!(
        t.connect(),
        [
            subscribe_pdu(0, r#"{"channel":"chan","fast_forward":true}"#),
            subscribe_pdu(1, r#"{"channel":"adv"}"#),
            subscribe_pdu(2, r#"{"channel":"simple","fast_forward":true}"#),
            subscribe_pdu(
                3,
                r#"{"subscription_id":"view1","fast_forward":true,"filter":"select * from chan"}"#
            ),
            subscribe_pdu(4, r#"{"channel":"badpos","position":"bad"}"#),
            r#"{"action":"rtm/publish","body":{"channel":"chan","message":{"k": 1}}}"#.to_string(),
        ]
    );
    for (id, key) in [(0, "chan"), (1, "adv"), (2, "simple"), (3, "view1")] {
        t.recv(&sub_ok(id, key, "1479315802:0"));
    }
    t.recv(r#"{"action":"rtm/subscribe/error","id":4,"body":{"error":"invalid_format","reason":"Invalid PDU: 'position' was invalid"}}"#);
    assert!(t
        .log()
        .contains(&"failed badpos Invalid PDU: 'position' was invalid".to_string()));
    t.recv(&data("chan", "1479315802:6", "[1]"));
    t.recv(&data("adv", "1479315802:7", "[2]"));
    t.recv(&data("simple", "1479315802:8", "[3]"));
    // Authenticated; a publish made after authenticate waits for it (a difference: the
    // reference sends it before the auth completes).
    let a = t.auth("superuser", SECRET);
    let p = t.publish("chan", r#""second""#, true).unwrap().unwrap();
    assert_eq!(t.out(), [handshake_pdu(5)]);
    t.recv(&handshake_ok(5));
    assert_eq!(t.out(), [authenticate_pdu(6)]);
    t.recv(&authenticate_ok(6));
    assert_eq!(
        t.out(),
        [r#"{"action":"rtm/publish","id":7,"body":{"channel":"chan","message":"second"}}"#]
    );
    t.log();
    // The server kills the socket: the connection lived long, reconnect at once.
    t.at(60_000).closed();
    let log = t.log();
    assert_eq!(log[0], "client Connected->Awaiting");
    assert!(log.contains(&format!("reply#{} disconnected", p.get())));
    assert_eq!(t.c.poll_timeout(), Some(t.now));
    t.tick();
    assert_eq!(t.out(), ["CONNECT"]);
    t.opened();
    // Auth first, ids from 0.
    assert_eq!(t.out(), [handshake_pdu(0)]);
    t.recv(&handshake_ok(0));
    assert_eq!(t.out(), [authenticate_pdu(1)]);
    assert_eq!(t.state(), ClientState::Connecting);
    t.recv(&authenticate_ok(1));
    // Then the subscriptions: positions tracked from data (RELIABLE, ADVANCED), none for
    // SIMPLE, and the failed one is NOT retried (the reference retries it every time).
    assert_eq!(
        t.out(),
        [
            subscribe_pdu(
                2,
                r#"{"channel":"chan","fast_forward":true,"position":"1479315802:6"}"#
            ),
            subscribe_pdu(3, r#"{"channel":"adv","position":"1479315802:7"}"#),
            subscribe_pdu(4, r#"{"channel":"simple","fast_forward":true}"#),
            subscribe_pdu(
                5,
                r#"{"subscription_id":"view1","fast_forward":true,"filter":"select * from chan"}"#
            ),
        ]
    );
    assert_eq!(t.state(), ClientState::Connected);
    assert_eq!(t.c.subscription_state("badpos"), Some(SubState::Failed));
    assert!(t.r.finals.get(&a.get()) == Some(&1));
}

#[test]
fn restore_failure_backs_off_with_a_higher_fail_count() {
    let mut t = T::new(Config {
        reconnect_interval: Duration::from_secs(1),
        ..quiet()
    });
    t.connect();
    t.auth("superuser", SECRET);
    t.out();
    t.recv(&handshake_ok(0));
    t.out();
    t.recv(&authenticate_ok(1));
    t.at(10_000).closed();
    t.tick();
    t.out();
    t.opened();
    t.out();
    t.log();
    // The credentials were revoked.
    t.recv(r#"{"action":"auth/handshake/error","id":0,"body":{"error":"e","reason":"Unauthenticated"}}"#);
    assert_eq!(
        t.log(),
        [
            "internal AuthRestoreFailed fatal",
            "client Connecting->Awaiting"
        ]
    );
    assert_eq!(t.out(), ["CLOSE"]);
    assert_eq!(t.c.last_connecting_error(), Some(ConnectError::AuthRestore));
    // fail_count 1: 2 s after the attempt's start.
    assert_eq!(t.c.poll_timeout(), Some(Instant::from_secs(12)));
    assert_eq!(t.c.backoff.fail_count(), 1);
    // A restore that never answers times out after auth_timeout.
    t.at(12_000).tick();
    t.out();
    t.opened();
    t.out();
    assert_eq!(t.c.poll_timeout(), Some(Instant::from_secs(22)));
    t.at(22_000).tick();
    assert_eq!(t.c.backoff.fail_count(), 2);
    // 4 s after the attempt's start have passed already: the next attempt starts at once.
    assert_eq!(t.state(), ClientState::Connecting);
    assert_eq!(t.out(), ["CLOSE", "CONNECT"]);
}

#[test]
fn restore_can_be_turned_off() {
    let mut t = T::new(Config {
        restore_auth_on_reconnect: false,
        ..quiet()
    });
    t.sub("chan", Mode::Simple);
    t.connect();
    t.auth("superuser", SECRET);
    t.out();
    t.recv(&handshake_ok(1));
    t.out();
    t.recv(&authenticate_ok(2));
    t.at(10_000).closed();
    t.tick();
    t.out();
    t.opened();
    assert_eq!(
        t.out(),
        [subscribe_pdu(
            0,
            r#"{"channel":"chan","fast_forward":true}"#
        )]
    );
}

// ---------------------------------------------------------------------------------------
// Offline queue and limits: read/write/delete queue too; a full queue refuses requests
// ---------------------------------------------------------------------------------------

#[test]
fn max_queue_size_refuses_at_the_call() {
    // Observed with the reference: ok, ok, ok, Full, Full, Full; unsubscribe and stop
    // still accepted.
    let mut t = T::new(Config {
        max_queue_size: 3,
        ..quiet()
    });
    t.sub("chan", Mode::Simple);
    let results: Vec<bool> = (0..6).map(|_| t.publish("c", "1", false).is_ok()).collect();
    assert_eq!(results, [true, true, true, false, false, false]);
    assert_eq!(t.publish("c", "1", false), Err(RequestError::Full));
    assert_eq!(
        t.c.read(t.now, "c", None, None, &mut t.r),
        Err(RequestError::Full)
    );
    assert_eq!(t.unsub("chan"), Ok(()));
    t.stop();
    // Draining sends all three (never more than the limit, and no crash: the
    // reference's loop thread died draining more entries than max_queue_size).
    t.connect();
    assert_eq!(t.c.queued_requests(), 0);
    // Requests in flight do not count: the table of 16 bounds them. Past it, requests
    // wait in the queue, two at most, and the next is refused; a reply sends the oldest
    // waiting one and makes room for another.
    let mut t = T::new(Config {
        max_queue_size: 2,
        ..quiet()
    });
    t.connect();
    for n in 0..18 {
        t.publish("c", &n.to_string(), true).unwrap();
    }
    assert_eq!((t.c.requests_in_flight(), t.c.queued_requests()), (16, 2));
    assert_eq!(t.publish("c", "18", true), Err(RequestError::Full));
    assert_eq!(t.out().len(), 16);
    t.recv(r#"{"action":"rtm/publish/ok","id":0}"#);
    assert_eq!(
        t.out(),
        [r#"{"action":"rtm/publish","id":16,"body":{"channel":"c","message":16}}"#]
    );
    assert_eq!((t.c.requests_in_flight(), t.c.queued_requests()), (16, 1));
    assert!(t.publish("c", "18", true).is_ok());
    assert_eq!(t.publish("c", "19", true), Err(RequestError::Full));
}

type Growing = crate::rtm::in_flight::tests::Growing;

/// A client whose table of requests in flight starts empty and doubles up to `max`
/// entries, as the std client's grows up to its byte limit.
fn growing(max: usize) -> Client<[SubscriptionSlot; 2], Growing, [u8; 4096], [u8; 4096], [u8; 64]> {
    let table = Growing {
        entries: Vec::new(),
        max,
        double: true,
    };
    Client::new(
        quiet(),
        [SubscriptionSlot::EMPTY; 2],
        table,
        [0; 4096],
        [0; 4096],
        [0; 64],
    )
}

/// The accounting of a pipeline bounded by its table: the table grows only as requests
/// need it (1, 2, 4 entries), never past its limit; every acked request is counted once
/// while in flight and released exactly once, by its reply (in or out of order), its
/// timeout or the connection's end, each release sending the oldest request waiting;
/// unacknowledged publishes never take an entry.
#[test]
fn the_pipeline_grows_to_its_limit_and_releases_every_entry_once() {
    let mut c = growing(4);
    let mut r = Rec::default();
    let now = Instant::ZERO;
    c.start(now, &mut r);
    assert_eq!(c.poll_transmit(), Some(Transmit::Connect));
    c.handle_connected(now, &mut r);
    let sent = |c: &mut Client<_, Growing, _, _, _>| {
        let mut ids = Vec::new();
        while let Some(t) = c.poll_transmit() {
            if let Transmit::Send(pdu) = t {
                let id = pdu
                    .split(r#""id":"#)
                    .nth(1)
                    .map(|rest| rest.split(',').next().unwrap().to_string());
                ids.push(id.unwrap_or_else(|| "-".to_string()));
            }
        }
        ids
    };
    let ack = |deadline: Option<u64>| Ack::Reply {
        deadline: deadline.map(Instant::from_secs),
    };
    let mut tickets = Vec::new();
    for (n, capacity) in [(0, 1), (1, 2), (2, 4), (3, 4)] {
        let deadline = (n == 2).then_some(5);
        tickets.push(
            c.publish(now, "c", "1", ack(deadline), &mut r)
                .unwrap()
                .unwrap(),
        );
        assert_eq!(c.pending.capacity(), capacity, "after publish {n}");
        assert_eq!(c.requests_in_flight(), n + 1);
    }
    // Without an ack: no entry, straight out.
    assert_eq!(c.publish(now, "c", "0", Ack::None, &mut r), Ok(None));
    // The table is at its limit: the next two wait.
    for _ in 0..2 {
        tickets.push(
            c.publish(now, "c", "1", ack(None), &mut r)
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(c.pending.capacity(), 4);
    assert_eq!((c.requests_in_flight(), c.queued_requests()), (4, 2));
    assert_eq!(sent(&mut c), ["0", "1", "2", "3", "-"]);
    // A reply out of order releases its entry: the oldest waiting request takes it.
    c.handle_message(now, r#"{"action":"rtm/publish/ok","id":1}"#, &mut r);
    assert_eq!(sent(&mut c), ["4"]);
    assert_eq!((c.requests_in_flight(), c.queued_requests()), (4, 1));
    // A timeout releases its entry.
    c.handle_timeout(Instant::from_secs(5), &mut r);
    assert_eq!(sent(&mut c), ["5"]);
    assert_eq!((c.requests_in_flight(), c.queued_requests()), (4, 0));
    // A reply in order.
    c.handle_message(now, r#"{"action":"rtm/publish/ok","id":0}"#, &mut r);
    assert_eq!(c.requests_in_flight(), 3);
    // The end of the connection releases the rest.
    c.handle_closed(Instant::from_secs(6), &mut r);
    assert_eq!(c.requests_in_flight(), 0);
    assert_eq!(c.pending.capacity(), 4);
    let outcomes: Vec<&str> = r
        .log
        .iter()
        .filter_map(|l| l.strip_prefix("reply#"))
        .collect();
    assert_eq!(
        outcomes,
        [
            "1 ok -",
            "2 timeout",
            "0 ok -",
            "3 disconnected",
            "4 disconnected",
            "5 disconnected"
        ]
    );
    for t in &tickets {
        assert_eq!(r.finals.get(&t.get()), Some(&1), "ticket {}", t.get());
    }
}

/// A table that cannot grow at all (a device's `[Pending; 0]`, or a storage at its
/// limit from the start) sends no acked request: each waits in the queue, counted
/// against `max_queue_size`, and ends `Disconnected` on dispose; publishes without an
/// ack still go out.
#[test]
fn a_table_with_no_room_queues_every_acked_request() {
    let mut c = growing(0);
    let mut r = Rec::default();
    let now = Instant::ZERO;
    c.start(now, &mut r);
    assert_eq!(c.poll_transmit(), Some(Transmit::Connect));
    c.handle_connected(now, &mut r);
    assert_eq!(c.publish(now, "c", "0", Ack::None, &mut r), Ok(None));
    let ticket = c.publish(now, "c", "1", Ack::Reply { deadline: None }, &mut r);
    let ticket = ticket.unwrap().unwrap();
    assert_eq!((c.requests_in_flight(), c.queued_requests()), (0, 1));
    assert!(
        matches!(c.poll_transmit(), Some(Transmit::Send(pdu)) if pdu.contains("\"message\":0"))
    );
    assert!(c.poll_transmit().is_none());
    c.dispose(now, &mut r);
    assert_eq!(r.finals.get(&ticket.get()), Some(&1));
}

#[test]
fn offline_queue_is_never_dropped_silently() {
    // A small queue: the reference dropped the oldest entries silently; here the call
    // fails.
    let mut c: Client<_, _, _, _, _> = Client::new(
        quiet(),
        [SubscriptionSlot::EMPTY; 2],
        [Pending::EMPTY; 4],
        [0; 256],
        [0; 512],
        [0; 512],
    );
    let mut r = Rec::default();
    let now = Instant::ZERO;
    let mut accepted = 0;
    let refusal = loop {
        match c.publish(now, "chan", "\"0123456789\"", Ack::None, &mut r) {
            Ok(_) => accepted += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(refusal, RequestError::Full);
    assert!(accepted > 3);
    c.start(now, &mut r);
    assert_eq!(c.poll_transmit(), Some(Transmit::Connect));
    c.handle_connected(now, &mut r);
    let mut sent = 0;
    while let Some(Transmit::Send(pdu)) = c.poll_transmit() {
        assert!(pdu.contains("0123456789"));
        sent += 1;
    }
    assert_eq!(sent, accepted);
    // Larger than the whole queue.
    c.stop(now, &mut r);
    let big = format!("\"{}\"", "x".repeat(220));
    assert_eq!(
        c.publish(now, "chan", &big, Ack::None, &mut r),
        Err(RequestError::QueueTooSmall)
    );
    // Larger than the outbox: can never be sent.
    let huge = format!("\"{}\"", "x".repeat(600));
    assert_eq!(
        c.publish(now, "chan", &huge, Ack::None, &mut r),
        Err(RequestError::TooLarge)
    );
    assert_eq!(
        c.publish(now, "chan", "{bad", Ack::None, &mut r),
        Err(RequestError::InvalidJson)
    );
}

#[test]
fn read_write_delete_and_publish_before_start_are_queued() {
    // Read/write/delete while disconnected killed the reference's loop thread; here
    // they queue.
    let mut t = T::new(quiet());
    let w =
        t.c.write(t.now, "kv", "42", Ack::Reply { deadline: None }, &mut t.r)
            .unwrap()
            .unwrap();
    let r =
        t.c.read(t.now, "kv", Some(r#"{"position":"1:0"}"#), None, &mut t.r)
            .unwrap();
    let d =
        t.c.delete(t.now, "kv", Ack::Reply { deadline: None }, &mut t.r)
            .unwrap()
            .unwrap();
    let p = t.publish("ch\"an", "null", true).unwrap().unwrap();
    assert_eq!(t.c.queued_requests(), 4);
    assert_eq!(
        t.connect(),
        [
            r#"{"action":"rtm/write","id":0,"body":{"channel":"kv","message":42}}"#,
            r#"{"action":"rtm/read","id":1,"body":{"channel":"kv","position":"1:0"}}"#,
            r#"{"action":"rtm/delete","id":2,"body":{"channel":"kv"}}"#,
            r#"{"action":"rtm/publish","id":3,"body":{"channel":"ch\"an","message":null}}"#,
        ]
    );
    t.log();
    t.recv(r#"{"action":"rtm/write/ok","id":0,"body":{"position":"1:1"}}"#);
    t.recv(r#"{"action":"rtm/read/ok","id":1,"body":{"message":42,"position":"1:1"}}"#);
    t.recv(r#"{"action":"rtm/delete/ok","id":2}"#);
    t.recv(r#"{"action":"rtm/publish/error","body":{"error":"authorization_denied","reason":"Unauthorized"},"id":3}"#);
    assert_eq!(
        t.log(),
        [
            format!("reply#{} ok {{\"position\":\"1:1\"}}", w.get()),
            format!(
                "reply#{} ok {{\"message\":42,\"position\":\"1:1\"}}",
                r.get()
            ),
            format!("reply#{} ok -", d.get()),
            format!(
                "reply#{} error {{\"error\":\"authorization_denied\",\"reason\":\"Unauthorized\"}}",
                p.get()
            ),
        ]
    );
}

#[test]
fn pending_table_full_waits_in_the_queue() {
    let mut c: Client<_, _, _, _, _> = Client::new(
        quiet(),
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 2],
        [0; 1024],
        [0; 512],
        [0; 256],
    );
    let mut r = Rec::default();
    let now = Instant::ZERO;
    c.start(now, &mut r);
    let _ = c.poll_transmit();
    c.handle_connected(now, &mut r);
    for _ in 0..4 {
        c.publish(now, "c", "1", Ack::Reply { deadline: None }, &mut r)
            .unwrap();
    }
    let mut sent = Vec::new();
    while let Some(Transmit::Send(s)) = c.poll_transmit() {
        sent.push(s.to_string());
    }
    assert_eq!(sent.len(), 2, "two in flight, two waiting");
    assert_eq!(c.queued_requests(), 2);
    c.handle_message(now, r#"{"action":"rtm/publish/ok","id":0}"#, &mut r);
    assert!(matches!(c.poll_transmit(), Some(Transmit::Send(s)) if s.contains("\"id\":2")));
}

#[test]
fn small_outbox_keeps_order() {
    // An outbox for one PDU at a time: everything still goes out, in order.
    let mut c: Client<_, _, _, _, _> = Client::new(
        quiet(),
        [SubscriptionSlot::EMPTY; 4],
        [Pending::EMPTY; 8],
        [0; 2048],
        [0; 200],
        [0; 1024],
    );
    let mut r = Rec::default();
    let now = Instant::ZERO;
    for key in ["a", "b", "c"] {
        c.subscribe(now, key, Mode::Simple, SubscribeArgs::default(), &mut r)
            .unwrap();
    }
    for n in 0..3 {
        c.publish(now, "c", &format!("{n}"), Ack::None, &mut r)
            .unwrap();
    }
    c.start(now, &mut r);
    let _ = c.poll_transmit();
    c.handle_connected(now, &mut r);
    c.publish(now, "c", "3", Ack::None, &mut r).unwrap();
    let mut sent = Vec::new();
    while let Some(Transmit::Send(s)) = c.poll_transmit() {
        sent.push(s.to_string());
    }
    assert_eq!(sent.len(), 7);
    assert!(sent[..3].iter().all(|s| s.contains("rtm/subscribe")));
    for (i, s) in sent[3..].iter().enumerate() {
        assert!(s.ends_with(&format!("\"message\":{i}}}}}")), "{s}");
    }
}

// ---------------------------------------------------------------------------------------
// Request outcomes: exactly once (reply, timeout or disconnect; never dropped)
// ---------------------------------------------------------------------------------------

#[test]
fn deadlines_including_now() {
    let mut t = T::new(quiet());
    t.connect();
    t.log();
    t.at(1_000);
    // A deadline of `now` times out at the next handle_timeout (timeout 0 of the _sync
    // calls).
    let p =
        t.c.publish(
            t.now,
            "c",
            "1",
            Ack::Reply {
                deadline: Some(t.now),
            },
            &mut t.r,
        )
        .unwrap()
        .unwrap();
    assert_eq!(t.c.poll_timeout(), Some(t.now));
    t.tick();
    assert_eq!(t.log(), [format!("reply#{} timeout", p.get())]);
    // The late reply is reported, not delivered again.
    t.out();
    t.recv(r#"{"action":"rtm/publish/ok","id":0,"body":{}}"#);
    assert_eq!(t.log(), ["internal UnknownReply"]);
    assert_eq!(t.state(), ClientState::Connected);
    // A reply before the deadline wins; no timeout later.
    let r =
        t.c.read(t.now, "kv", None, Some(Instant::from_secs(5)), &mut t.r)
            .unwrap();
    t.out();
    t.recv(r#"{"action":"rtm/read/ok","id":1,"body":{"message":null}}"#);
    t.at(6_000).tick();
    assert_eq!(
        t.log(),
        [format!("reply#{} ok {{\"message\":null}}", r.get())]
    );
    assert_eq!(t.c.poll_timeout(), None);
}

#[test]
fn queued_requests_time_out_while_offline() {
    let mut t = T::new(quiet());
    let early =
        t.c.publish(
            t.now,
            "c",
            "1",
            Ack::Reply {
                deadline: Some(Instant::from_secs(1)),
            },
            &mut t.r,
        )
        .unwrap()
        .unwrap();
    let late =
        t.c.publish(
            t.now,
            "c",
            "2",
            Ack::Reply {
                deadline: Some(Instant::from_secs(9)),
            },
            &mut t.r,
        )
        .unwrap()
        .unwrap();
    let auth =
        t.c.authenticate(t.now, "r", b"s", Some(Instant::from_secs(2)), &mut t.r)
            .unwrap();
    assert_eq!(t.c.poll_timeout(), Some(Instant::from_secs(1)));
    t.at(2_000).tick();
    assert_eq!(
        t.log(),
        [
            format!("reply#{} timeout", early.get()),
            format!("auth#{} timeout", auth.get()),
        ]
    );
    assert_eq!(t.c.queued_requests(), 1);
    assert_eq!(t.c.poll_timeout(), Some(Instant::from_secs(9)));
    // Only the live one is sent; a new authenticate is accepted.
    assert_eq!(
        t.connect(),
        [r#"{"action":"rtm/publish","id":0,"body":{"channel":"c","message":2}}"#]
    );
    assert!(t.c.authenticate(t.now, "r", b"s", None, &mut t.r).is_ok());
    let _ = late;
}

#[test]
fn in_flight_requests_end_disconnected_exactly_once() {
    let mut t = T::new(quiet());
    t.connect();
    let a = t.publish("c", "1", true).unwrap().unwrap();
    let b = t.c.search(t.now, "c", None, &mut t.r).unwrap();
    t.out();
    t.recv(r#"{"action":"rtm/search/data","id":1,"body":{"channels":["c1"]}}"#);
    t.at(5_000).closed();
    let log = t.log();
    assert!(log.contains(&format!("reply#{} disconnected", a.get())));
    assert!(log.contains(&format!("reply#{} disconnected", b.get())));
    assert_eq!(t.c.requests_in_flight(), 0);
    // Late replies on a new connection do not resolve them again.
    t.tick();
    t.out();
    t.opened();
    t.recv(r#"{"action":"rtm/publish/ok","id":0}"#);
    assert_eq!(
        t.log().last().map(String::as_str),
        Some("internal UnknownReply")
    );
    assert!(t.r.finals.values().all(|&n| n == 1));
}

#[test]
fn search_multi_reply() {
    let mut t = T::new(quiet());
    t.connect();
    let s = t.c.search(t.now, "ch", None, &mut t.r).unwrap();
    assert_eq!(
        t.out(),
        [r#"{"action":"rtm/search","id":0,"body":{"prefix":"ch"}}"#]
    );
    t.log();
    t.recv(r#"{"action":"rtm/search/data","id":0,"body":{"channels":["ch1"]}}"#);
    t.recv(r#"{"action":"rtm/search/data","id":0,"body":{"channels":["ch2"]}}"#);
    t.recv(r#"{"action":"rtm/search/ok","id":0,"body":{"channels":["ch3"]}}"#);
    let n = s.get();
    assert_eq!(
        t.log(),
        [
            format!(r#"reply#{n} data {{"channels":["ch1"]}}"#),
            format!(r#"reply#{n} data {{"channels":["ch2"]}}"#),
            format!(r#"reply#{n} ok {{"channels":["ch3"]}}"#),
        ]
    );
    // An error ends it too.
    let s = t.c.search(t.now, "x", None, &mut t.r).unwrap();
    t.out();
    t.recv(r#"{"action":"rtm/search/error","id":1,"body":{"error":"e","reason":"gone"}}"#);
    assert_eq!(
        t.log(),
        [format!(
            r#"reply#{} error {{"error":"e","reason":"gone"}}"#,
            s.get()
        )]
    );
    assert_eq!(t.c.requests_in_flight(), 0);
}

// ---------------------------------------------------------------------------------------
// Protocol errors: malformed PDUs reconnect, unknown ones are ignored (the Python SDK's
// internal_error.py and unexpected.py)
// ---------------------------------------------------------------------------------------

#[test]
fn internal_errors_reconnect() {
    let cases = [
        "not json",
        r#"{"action":"rtm/read/ok","id":0}"#,
        r#"{"id":0,"body":{}}"#,
        r#"{"action":"rtm/publish/ok","body":{}}"#,
        r#"{"action":"/error","body":{"error":"e","reason":"General error"}}"#,
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"chan"}}"#,
        r#"{"action":"rtm/read/ok","id":0,"body":{}}"#,
        r#"{"action":"rtm/publish/data","id":0,"body":{}}"#,
    ];
    for (n, frame) in cases.iter().enumerate() {
        let mut t = T::new(quiet());
        t.connect();
        let p = t.publish("c", "1", true).unwrap().unwrap();
        t.out();
        t.log();
        t.at(5_000).recv(frame);
        let log = t.log();
        assert!(log[0].ends_with("fatal"), "case {n}: {log:?}");
        assert_eq!(log[1], "client Connected->Awaiting", "case {n}");
        assert!(
            log.contains(&format!("reply#{} disconnected", p.get())),
            "case {n}"
        );
        assert_eq!(t.out(), ["CLOSE"], "case {n}");
        assert!(t.r.finals.values().all(|&c| c == 1));
    }
}

#[test]
fn tolerated_pdus_are_reported_not_fatal() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.log();
    t.recv(r#"{"action":"rtm/new_thing","body":{}}"#);
    t.recv(r#"{"action":"rtm/subscription/info","body":{"subscription_id":"chan","info":"something_new"}}"#);
    t.recv(r#"{"action":"rtm/publish/ok","id":77,"body":{}}"#);
    t.recv(r#"{"action":"rtm/publish/ok","id":"0","body":{}}"#);
    // Unknown subscriptions: ignored (unexpected.py).
    t.recv(&data("nobody", "1:1", "[1]"));
    t.recv(&channel_error("nobody", "out_of_sync"));
    t.recv(r#"{"action":"rtm/subscription/info","body":{"subscription_id":"nobody","info":"fast_forward"}}"#);
    assert_eq!(
        t.log(),
        [
            "internal Ignored",
            "internal Ignored",
            "internal UnknownReply",
            "internal UnknownReply",
        ]
    );
    assert_eq!(t.state(), ClientState::Connected);
}

#[test]
fn wrong_reply_types_reconnect() {
    // A publish/ok answering a subscribe (subscribe_error.py) or an unsubscribe
    // (unsubscribe_error.py).
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.log();
    t.at(5_000)
        .recv(r#"{"action":"rtm/publish/ok","id":0,"body":{}}"#);
    assert_eq!(
        t.log(),
        [
            "internal WrongReply fatal",
            "client Connected->Awaiting",
            "sub chan Subscribing->Unsubscribed"
        ]
    );
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.unsub("chan").unwrap();
    assert_eq!(t.out(), [unsubscribe_pdu(1, "chan")]);
    t.log();
    t.at(5_000)
        .recv(r#"{"action":"rtm/publish/ok","id":1,"body":{}}"#);
    assert_eq!(t.log()[0], "internal WrongReply fatal");
    assert_eq!(t.state(), ClientState::Awaiting);
    // The unsubscribe is done: the connection is gone.
    assert_eq!(t.c.subscription_state("chan"), None);
    // And a subscribe/ok for an auth id.
    let mut t = T::new(quiet());
    t.connect();
    let a = t.auth("superuser", SECRET);
    t.out();
    t.log();
    t.at(5_000).recv(&sub_ok(0, "x", "1:0"));
    let log = t.log();
    assert_eq!(log[0], "internal WrongReply fatal");
    assert!(log.contains(&format!("auth#{} disconnected", a.get())));
}

// ---------------------------------------------------------------------------------------
// Subscriptions
// ---------------------------------------------------------------------------------------

#[test]
fn subscribe_before_start_then_data() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    assert_eq!(t.log(), ["created chan"]);
    assert_eq!(
        t.connect(),
        [subscribe_pdu(
            0,
            r#"{"channel":"chan","fast_forward":true}"#
        )]
    );
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.recv(&data("chan", "1:2", r#"[{"k":1},"two"]"#));
    assert_eq!(
        t.log(),
        [
            "client Stopped->Connecting",
            "client Connecting->Connected",
            "sub chan Unsubscribed->Subscribing",
            "sub chan Subscribing->Subscribed",
            r#"data chan [{"k":1},"two"] 1:2"#,
        ]
    );
}

#[test]
fn data_while_subscribing_is_reported_and_tracked() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Advanced);
    t.connect();
    t.log();
    t.recv(&data("chan", "1:5", "[1]"));
    // The ok's older position must not overwrite the data position.
    t.recv(&sub_ok(0, "chan", "1:0"));
    assert_eq!(
        t.log(),
        ["data chan [1] 1:5", "sub chan Subscribing->Subscribed"]
    );
    t.at(5_000).closed();
    t.tick();
    t.out();
    t.opened();
    assert_eq!(
        t.out(),
        [subscribe_pdu(0, r#"{"channel":"chan","position":"1:5"}"#)]
    );
}

#[test]
fn data_without_position_is_delivered_and_reported() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.log();
    t.recv(
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"chan","messages":[1]}}"#,
    );
    assert_eq!(t.log(), ["data chan [1] -", "internal DataWithoutPosition"]);
    assert_eq!(t.state(), ClientState::Connected);
    // A position that cannot be tracked keeps the previous one.
    let long = "9".repeat(MAX_POSITION_LEN + 1);
    t.recv(&data("chan", &long, "[2]"));
    assert_eq!(t.log()[1], "internal PositionNotTracked");
    t.at(5_000).closed();
    t.tick();
    t.out();
    t.opened();
    assert_eq!(
        t.out(),
        [subscribe_pdu(
            0,
            r#"{"channel":"chan","fast_forward":true,"position":"1:0"}"#
        )]
    );
}

#[test]
fn simple_mode_uses_position_and_history_once() {
    let mut t = T::new(quiet());
    let args = SubscribeArgs {
        position: Some("1:3"),
        history: Some(History::Count(1)),
        ..SubscribeArgs::default()
    };
    t.sub_with("s", Mode::Simple, args);
    t.sub_with("r", Mode::Reliable, args);
    assert_eq!(
        t.connect(),
        [
            subscribe_pdu(
                0,
                r#"{"channel":"s","fast_forward":true,"position":"1:3","history":{"count":1}}"#
            ),
            subscribe_pdu(
                1,
                r#"{"channel":"r","fast_forward":true,"position":"1:3","history":{"count":1}}"#
            ),
        ]
    );
    t.recv(&sub_ok(0, "s", "1:4"));
    t.recv(&sub_ok(1, "r", "1:4"));
    t.at(5_000).closed();
    t.tick();
    t.out();
    t.opened();
    assert_eq!(
        t.out(),
        [
            subscribe_pdu(0, r#"{"channel":"s","fast_forward":true}"#),
            subscribe_pdu(1, r#"{"channel":"r","fast_forward":true,"position":"1:4"}"#),
        ]
    );
}

#[test]
fn view_subscription_is_keyed_by_id() {
    let mut t = T::new(quiet());
    let args = SubscribeArgs {
        filter: Some("select test from ch"),
        period: Some(1),
        only_value_changes: true,
        force: true,
        extras: Some(r#"{"custom":[1]}"#),
        ..SubscribeArgs::default()
    };
    t.sub_with("view1", Mode::Reliable, args);
    assert_eq!(
        t.connect(),
        [subscribe_pdu(
            0,
            r#"{"subscription_id":"view1","fast_forward":true,"filter":"select test from ch","period":1,"force":true,"only":"value_changes","custom":[1]}"#
        )]
    );
    t.recv(&sub_ok(0, "view1", "1:0"));
    t.log();
    t.recv(&data("view1", "1:1", r#"[{"test":42},{"test":null}]"#));
    assert_eq!(t.log(), [r#"data view1 [{"test":42},{"test":null}] 1:1"#]);
    assert_eq!(t.unsub("view1"), Ok(()));
    assert_eq!(t.out(), [unsubscribe_pdu(1, "view1")]);
}

#[test]
fn subscribe_argument_errors() {
    let mut t = T::new(quiet());
    let e = |t: &mut T, key: &str, args: SubscribeArgs<'_>| {
        t.c.subscribe(t.now, key, Mode::Simple, args, &mut t.r)
    };
    let bad = SubscribeArgs {
        extras: Some("[1]"),
        ..SubscribeArgs::default()
    };
    assert_eq!(e(&mut t, "k", bad), Err(RequestError::InvalidJson));
    let long = "k".repeat(MAX_SUBSCRIPTION_KEY + 1);
    assert_eq!(
        e(&mut t, &long, SubscribeArgs::default()),
        Err(RequestError::TooLarge)
    );
    let pos = "1".repeat(MAX_POSITION_LEN + 1);
    let args = SubscribeArgs {
        position: Some(&pos),
        ..SubscribeArgs::default()
    };
    assert_eq!(e(&mut t, "k", args), Err(RequestError::TooLarge));
    let args = SubscribeArgs {
        position: Some("1:\"2"),
        ..SubscribeArgs::default()
    };
    assert_eq!(e(&mut t, "k", args), Err(RequestError::InvalidPosition));
    for n in 0..8 {
        assert_eq!(
            e(&mut t, &format!("k{n}"), SubscribeArgs::default()),
            Ok(())
        );
    }
    assert_eq!(
        e(&mut t, "k8", SubscribeArgs::default()),
        Err(RequestError::TooManySubscriptions)
    );
    // Too large for a small outbox.
    let mut small: Client<_, _, _, _, _> = Client::new(
        quiet(),
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 1],
        [0; 64],
        [0; 300],
        [0; 256],
    );
    let key = "k".repeat(200);
    assert_eq!(
        small.subscribe(
            Instant::ZERO,
            &key,
            Mode::Simple,
            SubscribeArgs::default(),
            &mut NoopHandler
        ),
        Err(RequestError::TooLarge)
    );
}

#[test]
fn fast_forward_is_reported_and_tracked() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.log();
    t.recv(r#"{"action":"rtm/subscription/info","body":{"subscription_id":"chan","info":"fast_forward","reason":"r","position":"1:40"}}"#);
    assert_eq!(t.log(), ["fast_forward chan"]);
    t.at(5_000).closed();
    t.tick();
    t.out();
    t.opened();
    assert_eq!(
        t.out(),
        [subscribe_pdu(
            0,
            r#"{"channel":"chan","fast_forward":true,"position":"1:40"}"#
        )]
    );
}

#[test]
fn subscription_survives_stop_start() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.recv(&data("chan", "1:1", "[1]"));
    t.stop();
    t.out();
    t.closed();
    assert_eq!(t.c.subscription_state("chan"), Some(SubState::Unsubscribed));
    assert_eq!(
        t.connect(),
        [subscribe_pdu(
            0,
            r#"{"channel":"chan","fast_forward":true,"position":"1:1"}"#
        )]
    );
}

#[test]
fn subscribe_error_then_recovery_by_unsubscribe_and_subscribe() {
    // subscribe_error.py: invalid position → Failed; recovery without a position.
    let mut t = T::new(quiet());
    let args = SubscribeArgs {
        position: Some("bad"),
        ..SubscribeArgs::default()
    };
    t.sub_with("chan", Mode::Advanced, args);
    t.connect();
    t.log();
    t.recv(r#"{"action":"rtm/subscribe/error","id":0,"body":{"error":"invalid_format","reason":"Invalid PDU: 'position' was invalid"}}"#);
    assert_eq!(
        t.log(),
        [
            "sub chan Subscribing->Failed",
            "failed chan Invalid PDU: 'position' was invalid"
        ]
    );
    // Failed stays failed across reconnects (the reference retries it on each).
    t.at(5_000).closed();
    t.tick();
    t.out();
    t.opened();
    assert!(t.out().is_empty());
    assert_eq!(t.c.subscription_state("chan"), Some(SubState::Failed));
    t.log();
    // Unsubscribe from Failed: nothing sent, deleted at once (the reference leaks it).
    t.unsub("chan").unwrap();
    assert!(t.out().is_empty());
    t.sub("chan", Mode::Advanced);
    assert_eq!(
        t.log(),
        [
            "sub chan Failed->Unsubscribed",
            "deleted chan",
            "created chan",
            "sub chan Unsubscribed->Subscribing"
        ]
    );
    assert_eq!(t.out(), [subscribe_pdu(0, r#"{"channel":"chan"}"#)]);
    t.recv(&sub_ok(0, "chan", "1:0"));
    assert_eq!(t.log(), ["sub chan Subscribing->Subscribed"]);
}

#[test]
fn subscribe_on_failed_key_restarts_it() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Advanced);
    t.connect();
    t.recv(r#"{"action":"rtm/subscribe/error","id":0,"body":{}}"#);
    assert!(t.log().contains(&"failed chan Unknown error".to_string()));
    t.sub("chan", Mode::Reliable);
    assert_eq!(
        t.log(),
        [
            "sub chan Failed->Unsubscribed",
            "deleted chan",
            "created chan",
            "sub chan Unsubscribed->Subscribing"
        ]
    );
    assert_eq!(
        t.out(),
        [subscribe_pdu(
            1,
            r#"{"channel":"chan","fast_forward":true}"#
        )]
    );
}

#[test]
fn double_subscribe_is_a_reported_no_op() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Simple);
    t.connect();
    t.log();
    let again = t.c.subscribe(
        t.now,
        "chan",
        Mode::Simple,
        SubscribeArgs::default(),
        &mut t.r,
    );
    assert_eq!(again, Err(RequestError::AlreadySubscribed));
    assert!(t.log().is_empty());
    assert!(t.out().is_empty());
}

#[test]
fn unsubscribe_while_subscribing_waits_for_the_ok() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Simple);
    t.connect();
    t.log();
    t.unsub("chan").unwrap();
    assert!(t.out().is_empty());
    t.recv(&sub_ok(0, "chan", "1:0"));
    assert_eq!(t.out(), [unsubscribe_pdu(1, "chan")]);
    t.recv(r#"{"action":"rtm/unsubscribe/ok","id":1,"body":{"position":"1:0","subscription_id":"chan"}}"#);
    assert_eq!(
        t.log(),
        [
            "sub chan Subscribing->Unsubscribing",
            "sub chan Unsubscribing->Unsubscribed",
            "deleted chan"
        ]
    );
    // If the subscribe fails instead: straight to Unsubscribed.
    t.sub("chan", Mode::Simple);
    t.unsub("chan").unwrap();
    t.out();
    t.log();
    t.recv(r#"{"action":"rtm/subscribe/error","id":2,"body":{"error":"e"}}"#);
    assert_eq!(
        t.log(),
        ["sub chan Subscribing->Unsubscribed", "deleted chan"]
    );
}

#[test]
fn unsubscribe_error_returns_to_subscribed_and_retry_works() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Simple);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.unsub("chan").unwrap();
    t.out();
    t.log();
    t.recv(r#"{"action":"rtm/unsubscribe/error","id":1,"body":{"error":"e","reason":"r"}}"#);
    assert_eq!(t.log(), ["sub chan Unsubscribing->Subscribed"]);
    // Data keeps flowing.
    t.recv(&data("chan", "1:1", "[1]"));
    assert_eq!(t.log(), ["data chan [1] 1:1"]);
    // A double unsubscribe removes the record (log ends with deleted).
    t.unsub("chan").unwrap();
    assert_eq!(t.out(), [unsubscribe_pdu(2, "chan")]);
    t.recv(r#"{"action":"rtm/unsubscribe/ok","id":2,"body":{}}"#);
    assert_eq!(
        t.log(),
        [
            "sub chan Subscribed->Unsubscribing",
            "sub chan Unsubscribing->Unsubscribed",
            "deleted chan"
        ]
    );
    assert_eq!(t.unsub("chan"), Err(RequestError::UnknownSubscription));
}

#[test]
fn unsubscribe_while_disconnected_does_not_leak() {
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.at(5_000).closed();
    t.log();
    t.unsub("chan").unwrap();
    assert_eq!(t.log(), ["deleted chan"]);
    t.tick();
    t.out();
    t.opened();
    assert!(t.out().is_empty());
    assert_eq!(t.c.subscription_state("chan"), None);
}

#[test]
fn channel_errors_per_mode() {
    // channel_error.py: a non-fatal error resubscribes (exact log).
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Reliable);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.recv(&data("chan", "1:3", "[1]"));
    t.log();
    t.recv(&channel_error("chan", "some_error"));
    assert_eq!(
        t.out(),
        [subscribe_pdu(
            1,
            r#"{"channel":"chan","fast_forward":true,"position":"1:3"}"#
        )]
    );
    t.recv(&sub_ok(1, "chan", "1:3"));
    assert_eq!(
        t.log(),
        [
            "sub chan Subscribed->Subscribing",
            "sub chan Subscribing->Subscribed"
        ]
    );
    // RELIABLE out_of_sync: resubscribe WITHOUT a position key; the reference SDK sends
    // `"position": null` there.
    t.recv(&channel_error("chan", "out_of_sync"));
    assert_eq!(
        t.out(),
        [subscribe_pdu(
            2,
            r#"{"channel":"chan","fast_forward":true}"#
        )]
    );
    // SIMPLE out_of_sync: resubscribe without a position.
    let mut t = T::new(quiet());
    t.sub("s", Mode::Simple);
    t.connect();
    t.recv(&sub_ok(0, "s", "1:0"));
    t.recv(&channel_error("s", "out_of_sync"));
    assert_eq!(
        t.out(),
        [subscribe_pdu(1, r#"{"channel":"s","fast_forward":true}"#)]
    );
    // ADVANCED out_of_sync: Failed with the body; then unsubscribe → deleted.
    let mut t = T::new(quiet());
    t.sub("adv", Mode::Advanced);
    t.connect();
    t.recv(&sub_ok(0, "adv", "1:0"));
    t.log();
    t.recv(&channel_error("adv", "out_of_sync"));
    assert_eq!(t.log(), ["sub adv Subscribed->Failed", "failed adv r"]);
    assert!(t.out().is_empty());
    // A message for it in between is not delivered.
    t.recv(&data("adv", "1:9", "[9]"));
    assert_eq!(t.log(), ["internal UnexpectedForSubscription"]);
    t.unsub("adv").unwrap();
    assert_eq!(t.log(), ["sub adv Failed->Unsubscribed", "deleted adv"]);
    // expired_position fails ADVANCED too.
    let mut t = T::new(quiet());
    t.sub("adv", Mode::Advanced);
    t.connect();
    t.recv(&sub_ok(0, "adv", "1:0"));
    t.recv(&channel_error("adv", "expired_position"));
    assert_eq!(t.c.subscription_state("adv"), Some(SubState::Failed));
    // A channel error during Unsubscribing counts as done.
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Simple);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.unsub("chan").unwrap();
    t.out();
    t.log();
    t.recv(&channel_error("chan", "whatever"));
    assert_eq!(
        t.log(),
        ["sub chan Unsubscribing->Unsubscribed", "deleted chan"]
    );
}

#[test]
fn cycle_unsubscribe_then_subscribe_swaps_arguments() {
    // resubscribe.py: unsubscribe then subscribe before the old one is gone.
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Simple);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.unsub("chan").unwrap();
    let args = SubscribeArgs {
        history: Some(History::Age(5)),
        ..SubscribeArgs::default()
    };
    t.sub_with("chan", Mode::Advanced, args);
    assert_eq!(t.out(), [unsubscribe_pdu(1, "chan")]);
    t.log();
    t.recv(r#"{"action":"rtm/unsubscribe/ok","id":1,"body":{}}"#);
    assert_eq!(
        t.log(),
        [
            "sub chan Unsubscribing->Unsubscribed",
            "deleted chan",
            "created chan",
            "sub chan Unsubscribed->Subscribing"
        ]
    );
    assert_eq!(
        t.out(),
        [subscribe_pdu(
            2,
            r#"{"channel":"chan","history":{"age":5}}"#
        )]
    );
    // A subscribe error while cycling: swap and resubscribe (subscribe_error.py).
    t.unsub("chan").unwrap();
    t.sub("chan", Mode::Simple);
    t.log();
    t.recv(r#"{"action":"rtm/subscribe/error","id":2,"body":{"error":"e"}}"#);
    assert_eq!(
        t.log(),
        [
            "deleted chan",
            "created chan",
            "sub chan Subscribing->Subscribing"
        ]
    );
    assert_eq!(
        t.out(),
        [subscribe_pdu(
            3,
            r#"{"channel":"chan","fast_forward":true}"#
        )]
    );
    // A subscribe error after the cycle resolved: Failed with "Unknown error".
    t.recv(r#"{"action":"rtm/subscribe/error","id":3,"body":{}}"#);
    assert_eq!(
        t.log(),
        ["sub chan Subscribing->Failed", "failed chan Unknown error"]
    );
    // Cancelling a cycle: unsubscribe again.
    t.unsub("chan").unwrap();
    assert_eq!(t.c.subscription_state("chan"), None);
}

// ---------------------------------------------------------------------------------------
// The reference SDK's subscription table, and every event in every state
// ---------------------------------------------------------------------------------------

fn pdu(text: &str) -> Pdu<'_> {
    Pdu::parse(text).unwrap()
}

/// A subscription's filter and extras live in the caller's slots (storage / `SUBS`
/// bytes each), not in the record: a view query of exactly a slot is sent whole, one
/// byte more is `TooLarge` with nothing changed, a slot given back (unsubscribe) is taken
/// again, and a record cycled to new arguments rewrites its own slot.
#[test]
fn view_queries_live_in_the_callers_slots() {
    // Two subscriptions, 1000-byte slots.
    let mut c: Client<_, _, _, _, _> = Client::new(
        quiet(),
        [SubscriptionSlot::EMPTY; 2],
        [Pending::EMPTY; 4],
        [0; 4096],
        [0; 8192],
        [0; 2000],
    );
    let mut r = Rec::default();
    let t = Instant::ZERO;
    c.start(t, &mut r);
    assert_eq!(c.poll_transmit(), Some(Transmit::Connect));
    c.handle_connected(t, &mut r);
    let query = |n: usize| format!("select * from ch where a = '{}'", "x".repeat(n - 29));
    fn view(q: &str) -> SubscribeArgs<'_> {
        SubscribeArgs {
            filter: Some(q),
            ..SubscribeArgs::default()
        }
    }
    let at_limit = query(1000);
    assert_eq!(at_limit.len(), 1000);
    let over = query(1001);
    assert_eq!(
        c.subscribe(t, "v1", Mode::Simple, view(&over), &mut r),
        Err(RequestError::TooLarge)
    );
    assert_eq!(c.subscription_state("v1"), None, "nothing was made");
    c.subscribe(t, "v1", Mode::Simple, view(&at_limit), &mut r)
        .unwrap();
    let sent = |c: &mut Client<_, _, _, _, _>| match c.poll_transmit() {
        Some(Transmit::Send(pdu)) => pdu.to_owned(),
        other => panic!("{other:?}"),
    };
    assert!(sent(&mut c).contains(&format!(r#""filter":"{at_limit}""#)));
    // A second view with extras takes the other slot; a third has none left.
    let second_query = query(500);
    let extras = SubscribeArgs {
        extras: Some(r#"{"x":1}"#),
        ..view(&second_query)
    };
    c.subscribe(t, "v2", Mode::Simple, extras, &mut r).unwrap();
    let second = sent(&mut c);
    assert!(
        second.contains(&query(500)) && second.contains(r#""x":1"#),
        "{second}"
    );
    for (id, key) in [(0, "v1"), (1, "v2")] {
        let ok = format!(
            r#"{{"action":"rtm/subscribe/ok","id":{id},"body":{{"subscription_id":"{key}","position":"1:0"}}}}"#
        );
        c.handle_message(t, &ok, &mut r);
        assert_eq!(c.subscription_state(key), Some(SubState::Subscribed));
    }
    c.unsubscribe(t, "v1", &mut r).unwrap();
    assert!(sent(&mut c).contains(r#""rtm/unsubscribe""#));
    c.handle_message(
        t,
        r#"{"action":"rtm/unsubscribe/ok","id":2,"body":{}}"#,
        &mut r,
    );
    assert_eq!(c.subscription_state("v1"), None);
    // Its slot is free again: a new view takes it and carries its own query.
    let third = query(999);
    c.subscribe(t, "v3", Mode::Simple, view(&third), &mut r)
        .unwrap();
    assert!(sent(&mut c).contains(&format!(r#""filter":"{third}""#)));
    // A plain channel needs no slot even when every slot is taken.
    c.unsubscribe(t, "v2", &mut r).unwrap();
    let _ = sent(&mut c);
    c.handle_message(
        t,
        r#"{"action":"rtm/unsubscribe/ok","id":4,"body":{}}"#,
        &mut r,
    );
    c.subscribe(t, "plain", Mode::Simple, SubscribeArgs::default(), &mut r)
        .unwrap();
    assert!(sent(&mut c).contains(r#""channel":"plain""#));
    // Without storage for arguments, a view is refused and a channel is not.
    let mut bare: Client<_, _, _, _, _> = Client::new(
        quiet(),
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 1],
        [0; 512],
        [0; 512],
        [0; 0],
    );
    assert_eq!(
        bare.subscribe(t, "v", Mode::Simple, view(&query(40)), &mut r),
        Err(RequestError::TooLarge)
    );
    assert_eq!(
        bare.subscribe(t, "c", Mode::Simple, SubscribeArgs::default(), &mut r),
        Ok(())
    );
}

fn sub_in(state: SubState, link: LinkMode, mode: Mode) -> Subscription {
    let args = SubscribeArgs::default();
    let parts = Subscription::args_parts(&args).unwrap();
    let mut s = Subscription::new("k", mode, &args, parts).unwrap();
    let mut h = NoopHandler;
    let _ = match state {
        SubState::Unsubscribed => Fate::Keep,
        SubState::Subscribing => s.handle(SubEvent::Connect, true, &mut h),
        SubState::Subscribed => {
            let _ = s.handle(SubEvent::Connect, true, &mut h);
            s.handle(SubEvent::SubscribeOk(pdu(OK)), true, &mut h)
        }
        SubState::Unsubscribing => {
            let _ = s.handle(SubEvent::Connect, true, &mut h);
            let _ = s.handle(SubEvent::SubscribeOk(pdu(OK)), true, &mut h);
            s.link_mode = LinkMode::Unlinked;
            s.handle(SubEvent::ModeChange, true, &mut h)
        }
        SubState::Failed => {
            let _ = s.handle(SubEvent::Connect, true, &mut h);
            s.handle(SubEvent::SubscribeError(pdu(ERR)), true, &mut h)
        }
    };
    assert_eq!(s.state(), state);
    s.link_mode = link;
    s
}

const OK: &str = r#"{"action":"rtm/subscribe/ok","id":0,"body":{"position":"1:0"}}"#;
const ERR: &str = r#"{"action":"rtm/subscribe/error","id":0,"body":{"reason":"nope"}}"#;
const OUT_OF_SYNC: &str =
    r#"{"action":"rtm/subscription/error","body":{"subscription_id":"k","error":"out_of_sync"}}"#;
const OTHER_ERROR: &str =
    r#"{"action":"rtm/subscription/error","body":{"subscription_id":"k","error":"other"}}"#;

fn channel_err(text: &str) -> crate::rtm::pdu::ChannelError<'_> {
    match crate::rtm::pdu::Incoming::parse(text).unwrap() {
        crate::rtm::pdu::Incoming::ChannelError(e) => e,
        other => panic!("{other:?}"),
    }
}

/// (state, link, mode, event, connected) → (new state, fate)
fn step(
    state: SubState,
    link: LinkMode,
    mode: Mode,
    event: SubEvent<'_>,
    connected: bool,
) -> (SubState, Fate, Vec<String>) {
    let mut s = sub_in(state, link, mode);
    let mut r = Rec::default();
    let fate = s.handle(event, connected, &mut r);
    (s.state(), fate, r.log)
}

#[test]
fn subscription_table_rows() {
    use LinkMode::*;
    use SubState as S;
    let m = Mode::Reliable;
    let ok = || SubEvent::SubscribeOk(pdu(OK));
    let err = || SubEvent::SubscribeError(pdu(ERR));
    let ce = |t| SubEvent::ChannelError(channel_err(t));
    // Unsubscribed
    assert_eq!(
        step(S::Unsubscribed, Linked, m, SubEvent::Connect, true).0,
        S::Subscribing
    );
    assert_eq!(
        step(S::Unsubscribed, Cycle, m, SubEvent::Connect, true).0,
        S::Subscribing
    );
    assert_eq!(
        step(S::Unsubscribed, Linked, m, SubEvent::ModeChange, true).0,
        S::Subscribing
    );
    assert_eq!(
        step(S::Unsubscribed, Linked, m, SubEvent::ModeChange, false).0,
        S::Unsubscribed
    );
    assert_eq!(
        step(S::Unsubscribed, Unlinked, m, SubEvent::Connect, true).0,
        S::Unsubscribed
    );
    // Subscribing
    assert_eq!(step(S::Subscribing, Linked, m, ok(), true).0, S::Subscribed);
    assert_eq!(
        step(S::Subscribing, Unlinked, m, ok(), true).0,
        S::Unsubscribing
    );
    assert_eq!(
        step(S::Subscribing, Cycle, m, ok(), true).0,
        S::Unsubscribing
    );
    let (st, _, log) = step(S::Subscribing, Linked, m, err(), true);
    assert_eq!((st, log[1].as_str()), (S::Failed, "failed k nope"));
    assert_eq!(
        step(S::Subscribing, Unlinked, m, err(), true).1,
        Fate::Remove
    );
    let (st, fate, log) = step(S::Subscribing, Cycle, m, err(), true);
    assert_eq!((st, fate), (S::Subscribing, Fate::Keep));
    assert_eq!(
        log,
        ["deleted k", "created k", "sub k Subscribing->Subscribing"]
    );
    assert_eq!(
        step(S::Subscribing, Linked, m, SubEvent::Disconnect, false).0,
        S::Unsubscribed
    );
    for e in [
        SubEvent::ModeChange,
        ce(OUT_OF_SYNC),
        SubEvent::UnsubscribeOk,
        SubEvent::UnsubscribeError,
        SubEvent::Connect,
    ] {
        assert_eq!(
            step(S::Subscribing, Linked, m, e, true),
            (S::Subscribing, Fate::Keep, vec![])
        );
    }
    // Subscribed
    assert_eq!(
        step(S::Subscribed, Linked, m, SubEvent::Disconnect, false).0,
        S::Unsubscribed
    );
    assert_eq!(
        step(S::Subscribed, Unlinked, m, SubEvent::ModeChange, true).0,
        S::Unsubscribing
    );
    assert_eq!(
        step(S::Subscribed, Cycle, m, SubEvent::ModeChange, true).0,
        S::Unsubscribing
    );
    assert_eq!(
        step(S::Subscribed, Linked, m, SubEvent::ModeChange, true).0,
        S::Subscribed
    );
    assert_eq!(
        step(S::Subscribed, Linked, Mode::Advanced, ce(OUT_OF_SYNC), true).0,
        S::Failed
    );
    assert_eq!(
        step(S::Subscribed, Linked, Mode::Advanced, ce(OTHER_ERROR), true).0,
        S::Subscribing
    );
    assert_eq!(
        step(S::Subscribed, Linked, m, ce(OUT_OF_SYNC), true).0,
        S::Subscribing
    );
    assert_eq!(
        step(S::Subscribed, Linked, Mode::Simple, ce(OUT_OF_SYNC), true).0,
        S::Subscribing
    );
    assert_eq!(
        step(S::Subscribed, Unlinked, m, ce(OTHER_ERROR), true).1,
        Fate::Remove
    );
    for e in [
        ok(),
        err(),
        SubEvent::UnsubscribeOk,
        SubEvent::UnsubscribeError,
        SubEvent::Connect,
    ] {
        assert_eq!(
            step(S::Subscribed, Linked, m, e, true),
            (S::Subscribed, Fate::Keep, vec![])
        );
    }
    // Unsubscribing (always unlinked or cycling)
    assert_eq!(
        step(S::Unsubscribing, Unlinked, m, SubEvent::UnsubscribeOk, true).1,
        Fate::Remove
    );
    assert_eq!(
        step(
            S::Unsubscribing,
            Unlinked,
            m,
            SubEvent::UnsubscribeError,
            true
        )
        .0,
        S::Subscribed
    );
    assert_eq!(
        step(S::Unsubscribing, Unlinked, m, ce(OTHER_ERROR), true).1,
        Fate::Remove
    );
    assert_eq!(
        step(S::Unsubscribing, Unlinked, m, SubEvent::Disconnect, false).1,
        Fate::Remove
    );
    assert_eq!(
        step(S::Unsubscribing, Cycle, m, SubEvent::UnsubscribeOk, true).0,
        S::Subscribing
    );
    assert_eq!(
        step(S::Unsubscribing, Cycle, m, SubEvent::UnsubscribeOk, false).0,
        S::Unsubscribed
    );
    for e in [ok(), err(), SubEvent::ModeChange, SubEvent::Connect] {
        assert_eq!(
            step(S::Unsubscribing, Unlinked, m, e, true),
            (S::Unsubscribing, Fate::Keep, vec![])
        );
    }
    // Failed
    assert_eq!(
        step(S::Failed, Unlinked, m, SubEvent::UnsubscribeOk, true).1,
        Fate::Remove
    );
    // A Disconnect or a ChannelError does not revive a Failed subscription (in the
    // reference they lead to a retry).
    for e in [
        SubEvent::Disconnect,
        ce(OUT_OF_SYNC),
        SubEvent::Connect,
        SubEvent::ModeChange,
        ok(),
        err(),
        SubEvent::UnsubscribeError,
    ] {
        assert_eq!(
            step(S::Failed, Linked, m, e, true),
            (S::Failed, Fate::Keep, vec![])
        );
    }
}

#[test]
fn state_machines_do_not_crash() {
    // Every event in every subscription state, link mode, delivery mode and connection
    // status: no panic, and the resulting state is coherent.
    let states = [
        SubState::Unsubscribed,
        SubState::Subscribing,
        SubState::Subscribed,
        SubState::Unsubscribing,
        SubState::Failed,
    ];
    let links = [LinkMode::Linked, LinkMode::Unlinked, LinkMode::Cycle];
    let modes = [Mode::Simple, Mode::Reliable, Mode::Advanced];
    let data_text =
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"k","messages":[1]}}"#;
    let info_text = r#"{"action":"rtm/subscription/info","body":{"subscription_id":"k","info":"fast_forward","position":"2:0"}}"#;
    for state in states {
        for link in links {
            for mode in modes {
                for connected in [false, true] {
                    let events = [
                        SubEvent::Connect,
                        SubEvent::Disconnect,
                        SubEvent::ModeChange,
                        SubEvent::SubscribeOk(pdu(OK)),
                        SubEvent::SubscribeError(pdu(ERR)),
                        SubEvent::UnsubscribeOk,
                        SubEvent::UnsubscribeError,
                        SubEvent::ChannelError(channel_err(OUT_OF_SYNC)),
                        SubEvent::ChannelError(channel_err(OTHER_ERROR)),
                    ];
                    for event in events {
                        let mut s = sub_in(state, link, mode);
                        let mut r = Rec::default();
                        let fate = s.handle(event, connected, &mut r);
                        if fate == Fate::Remove {
                            assert_eq!(s.state(), SubState::Unsubscribed);
                            assert_eq!(r.log.last().map(String::as_str), Some("deleted k"));
                        }
                        if s.state() == SubState::Subscribing {
                            assert!(s.to_send.is_some());
                        }
                        // Data and info in every state.
                        if let Ok(crate::rtm::pdu::Incoming::Data(d)) =
                            crate::rtm::pdu::Incoming::parse(data_text)
                        {
                            s.on_data(d, &mut r);
                        }
                        if let Ok(crate::rtm::pdu::Incoming::FastForward(i)) =
                            crate::rtm::pdu::Incoming::parse(info_text)
                        {
                            s.on_fast_forward(i, &mut r);
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Auth (the Python SDK's role_auth.py, auth before start, restore on reconnect)
// ---------------------------------------------------------------------------------------

#[test]
fn auth_success_failure_and_before_start() {
    // Before start: queued, sent after connecting (after subscriptions on the first
    // connection: nothing is remembered yet).
    let mut t = T::new(quiet());
    t.sub("chan", Mode::Simple);
    let a = t.auth("superuser", SECRET);
    assert_eq!(
        t.connect(),
        [
            subscribe_pdu(0, r#"{"channel":"chan","fast_forward":true}"#),
            handshake_pdu(1)
        ]
    );
    assert_eq!(t.c.requests_in_flight(), 1);
    t.recv(&handshake_ok(1));
    assert_eq!(t.out(), [authenticate_pdu(2)]);
    t.log();
    t.recv(&authenticate_ok(2));
    assert_eq!(t.log(), [format!("auth#{} done", a.get())]);
    // A bad secret: rejected with the server's reason.
    let b =
        t.c.authenticate(t.now, "superuser", b"wrong", None, &mut t.r)
            .unwrap();
    t.out();
    t.recv(&handshake_ok(3));
    t.out();
    t.recv(r#"{"action":"auth/authenticate/error","id":4,"body":{"error":"authentication_failed","reason":"Unauthenticated"}}"#);
    assert_eq!(
        t.log(),
        [format!(
            "auth#{} rejected AuthenticateRejected Unauthenticated",
            b.get()
        )]
    );
    // An unknown role: rejected at the handshake.
    let c =
        t.c.authenticate(t.now, "nobody", b"x", None, &mut t.r)
            .unwrap();
    t.out();
    t.recv(r#"{"action":"auth/handshake/error","id":5,"body":{"error":"e","reason":"Unauthenticated"}}"#);
    assert_eq!(
        t.log(),
        [format!(
            "auth#{} rejected HandshakeRejected Unauthenticated",
            c.get()
        )]
    );
    // The remembered credentials are still the successful ones.
    t.at(10_000).closed();
    t.tick();
    t.out();
    t.opened();
    assert_eq!(t.out(), [handshake_pdu(0)]);
    // Limits.
    let long = "r".repeat(MAX_ROLE_LEN + 1);
    assert_eq!(
        t.c.authenticate(t.now, &long, b"s", None, &mut t.r),
        Err(RequestError::TooLarge)
    );
    let long = [0u8; MAX_SECRET_LEN + 1];
    assert_eq!(
        t.c.authenticate(t.now, "r", &long, None, &mut t.r),
        Err(RequestError::TooLarge)
    );
}

#[test]
fn auth_timeout_and_disconnect() {
    let mut t = T::new(quiet());
    t.connect();
    let a =
        t.c.authenticate(
            t.now,
            "superuser",
            SECRET.as_bytes(),
            Some(Instant::from_secs(3)),
            &mut t.r,
        )
        .unwrap();
    let p = t.publish("c", "1", false).unwrap();
    assert_eq!(p, None);
    assert_eq!(t.out(), [handshake_pdu(0)]);
    t.log();
    t.at(3_000).tick();
    assert_eq!(t.log(), [format!("auth#{} timeout", a.get())]);
    // The barrier is lifted: the publish goes out.
    assert_eq!(
        t.out(),
        [r#"{"action":"rtm/publish","body":{"channel":"c","message":1}}"#]
    );
    // Disconnected while in progress.
    let b = t.auth("superuser", SECRET);
    t.out();
    t.at(10_000).closed();
    assert!(t.log().contains(&format!("auth#{} disconnected", b.get())));
    assert!(t.r.finals.values().all(|&n| n == 1));
}

#[test]
fn debug_output_has_no_secrets() {
    let mut t = T::new(quiet());
    t.connect();
    t.auth("superuser", SECRET);
    t.out();
    t.recv(&handshake_ok(0));
    t.out();
    t.recv(&authenticate_ok(1));
    let shown = format!("{:?}", t.c);
    assert!(
        !shown.contains(SECRET) && !shown.contains("P6COJ5aX"),
        "{shown}"
    );
    assert!(shown.contains("authenticated: true"));
}

// ---------------------------------------------------------------------------------------
// Cases of the Python SDK's test suite not covered above
// ---------------------------------------------------------------------------------------

#[test]
fn state_callbacks_logs() {
    // start, wait, stop, dispose.
    let mut t = T::new(quiet());
    t.connect();
    t.stop();
    t.out();
    t.closed();
    t.dispose();
    assert_eq!(
        t.log(),
        [
            "client Stopped->Connecting",
            "client Connecting->Connected",
            "client Connected->Stopping",
            "client Stopping->Stopped",
            "client Stopped->Disposed"
        ]
    );
    // stop while already stopped, then dispose: only the dispose transition.
    let mut t = T::new(quiet());
    t.stop();
    t.dispose();
    assert_eq!(t.log(), ["client Stopped->Disposed"]);
    // Start then immediate stop.
    let mut t = T::new(quiet());
    t.start();
    t.stop();
    assert_eq!(
        t.log(),
        ["client Stopped->Connecting", "client Connecting->Stopped"]
    );
}

#[test]
fn changing_state_right_after_state_events() {
    // changing_state_in_state_callback.py: start on entering Stopped and stop on entering
    // Connected (handlers cannot re-enter; the app acts right after the call returns).
    let mut t = T::new(quiet());
    for _ in 0..3 {
        t.connect();
        assert_eq!(t.state(), ClientState::Connected);
        t.stop();
        t.out();
        t.closed();
        assert_eq!(t.state(), ClientState::Stopped);
    }
    // 100 rapid start/stop cycles (stress/pathologic.py).
    for _ in 0..100 {
        t.start();
        t.stop();
    }
    assert!(
        t.out().is_empty(),
        "withdrawn connects are never handed out"
    );
}

#[test]
fn manual_start_after_a_drop() {
    let mut t = T::new(Config {
        fail_count_threshold: Some(0),
        ..quiet()
    });
    t.sub("chan", Mode::Simple);
    t.connect();
    t.recv(&sub_ok(0, "chan", "1:0"));
    t.at(5_000).closed();
    assert_eq!(t.state(), ClientState::Stopped);
    assert_eq!(
        t.connect(),
        [subscribe_pdu(
            0,
            r#"{"channel":"chan","fast_forward":true}"#
        )]
    );
}

#[test]
fn unsubscribe_chain_only_middle_message() {
    // unsubscribe.py: publish → subscribe → publish → receive → unsubscribe → publish.
    let mut t = T::new(quiet());
    t.connect();
    t.publish("chan", "\"first\"", false).unwrap();
    t.sub("chan", Mode::Simple);
    t.out();
    t.recv(&sub_ok(0, "chan", "1:1"));
    t.publish("chan", "\"second\"", false).unwrap();
    t.recv(&data("chan", "1:2", "[\"second\"]"));
    t.unsub("chan").unwrap();
    t.recv(r#"{"action":"rtm/unsubscribe/ok","id":1,"body":{}}"#);
    t.publish("chan", "\"third\"", false).unwrap();
    t.recv(&data("chan", "1:3", "[\"third\"]")); // a late frame for a deleted key: ignored
    let got: Vec<String> = t
        .log()
        .into_iter()
        .filter(|l| l.starts_with("data"))
        .collect();
    assert_eq!(got, ["data chan [\"second\"] 1:2"]);
}

#[test]
fn thousand_acks_with_a_small_pending_table() {
    // connection.py's throttling case: a watermark of 3 still delivers 1000 acks.
    let mut c: Client<_, _, _, _, _> = Client::new(
        quiet(),
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 3],
        [0; 4096],
        [0; 512],
        [0; 256],
    );
    let mut r = Rec::default();
    let now = Instant::ZERO;
    c.start(now, &mut r);
    let _ = c.poll_transmit();
    c.handle_connected(now, &mut r);
    let mut issued = 0;
    let mut ids = Vec::new();
    while r.finals.len() < 1000 {
        while issued < 1000
            && c.publish(now, "c", "1", Ack::Reply { deadline: None }, &mut r)
                .is_ok()
        {
            issued += 1;
        }
        while let Some(Transmit::Send(s)) = c.poll_transmit() {
            let pdu = Pdu::parse(s).unwrap();
            ids.push(pdu.id.and_then(|id| id.as_u64()).unwrap());
        }
        for id in ids.drain(..) {
            c.handle_message(
                now,
                &format!(r#"{{"action":"rtm/publish/ok","id":{id}}}"#),
                &mut r,
            );
        }
    }
    assert_eq!(issued, 1000);
    assert!(r.finals.values().all(|&n| n == 1));
}

#[test]
fn message_types_arrive_identical() {
    let mut t = T::new(quiet());
    t.connect();
    let messages = [
        "null",
        "42",
        "-1.5e3",
        "\"str\"",
        "true",
        "[]",
        "{}",
        "\"\"",
        "\"Привет\"",
        r#"{"a":[1,{"b":null}]}"#,
    ];
    for m in messages {
        t.publish("chan", m, false).unwrap();
    }
    let sent = t.out();
    for (m, pdu) in messages.iter().zip(&sent) {
        assert_eq!(
            pdu,
            &format!(r#"{{"action":"rtm/publish","body":{{"channel":"chan","message":{m}}}}}"#)
        );
    }
}

#[test]
fn memory_figures() {
    use core::mem::size_of;
    let small = size_of::<
        Client<[SubscriptionSlot; 4], [Pending; 8], [u8; 1024], [u8; 2048], [u8; 1024]>,
    >();
    let base = size_of::<Client<[SubscriptionSlot; 0], [Pending; 0], [u8; 0], [u8; 0], [u8; 0]>>();
    let per_sub =
        size_of::<Client<[SubscriptionSlot; 1], [Pending; 0], [u8; 0], [u8; 0], [u8; 0]>>() - base;
    let per_pending =
        size_of::<Client<[SubscriptionSlot; 0], [Pending; 1], [u8; 0], [u8; 0], [u8; 0]>>() - base;
    std::println!("Client<4,8,1024,2048>: {small} bytes; fixed {base}; per subscription {per_sub}; per pending {per_pending}");
    assert!(per_sub <= 440, "{per_sub}");
    assert!(per_pending <= 24, "{per_pending}");
    assert!(small <= base + 4 * per_sub + 8 * per_pending + 1024 + 2048 + 1024 + 16);
}

// ---------------------------------------------------------------------------------------
// Randomized event sequences
// ---------------------------------------------------------------------------------------

use crate::testing::Xorshift as Rng;

#[test]
fn random_event_sequences_keep_the_invariants() {
    let keys = ["a", "b", "c"];
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let config = Config {
            reconnect_interval: Duration::from_millis(rng.below(3) * 100),
            max_reconnect_interval: Duration::from_secs(2),
            fail_count_threshold: [None, Some(0), Some(2)][rng.below(3) as usize],
            retry_first_connect: rng.below(2) == 0,
            max_queue_size: 1 + rng.below(12) as usize,
            jitter_seed: rng.next(),
            ..Config::default()
        };
        let mut c: Client<_, _, _, _, _> = Client::new(
            config,
            [SubscriptionSlot::EMPTY; 3],
            [Pending::EMPTY; 4],
            [0; 512],
            [0; 512],
            [0; 256],
        );
        let mut r = Rec::default();
        let mut now = Instant::ZERO;
        let mut issued: Vec<u32> = Vec::new();
        // Ids the fake server may answer: (id, action) of PDUs sent on this socket.
        let mut sent: Vec<(u64, String)> = Vec::new();
        for _ in 0..400 {
            now += Duration::from_millis(rng.below(700));
            match rng.below(22) {
                0 => c.start(now, &mut r),
                1 => c.stop(now, &mut r),
                2 if rng.below(20) == 0 => c.dispose(now, &mut r),
                3 => {
                    let ack = if rng.below(2) == 0 {
                        Ack::None
                    } else {
                        Ack::Reply {
                            deadline: [None, Some(now), Some(now + Duration::from_secs(1))]
                                [rng.below(3) as usize],
                        }
                    };
                    if let Ok(Some(t)) = c.publish(now, "ch", "1", ack, &mut r) {
                        issued.push(t.get());
                    }
                }
                4 => {
                    if let Ok(t) =
                        c.read(now, "ch", None, Some(now + Duration::from_secs(2)), &mut r)
                    {
                        issued.push(t.get());
                    }
                }
                5 => {
                    if let Ok(t) = c.search(now, "c", None, &mut r) {
                        issued.push(t.get());
                    }
                }
                6 => {
                    if let Ok(t) = c.authenticate(now, "superuser", SECRET.as_bytes(), None, &mut r)
                    {
                        issued.push(t.get());
                    }
                }
                7 => {
                    let key = keys[rng.below(3) as usize];
                    let mode =
                        [Mode::Simple, Mode::Reliable, Mode::Advanced][rng.below(3) as usize];
                    let _ = c.subscribe(now, key, mode, SubscribeArgs::default(), &mut r);
                }
                8 => {
                    let _ = c.unsubscribe(now, keys[rng.below(3) as usize], &mut r);
                }
                9 => {
                    sent.clear();
                    c.handle_connected(now, &mut r);
                }
                10 => c.handle_connect_failed(now, ConnectError::Tls, &mut r),
                11 => {
                    sent.clear();
                    c.handle_closed(now, &mut r);
                }
                12 | 13 => {
                    if let Some(at) = c.poll_timeout() {
                        now = now.max(at);
                    }
                    c.handle_timeout(now, &mut r);
                }
                _ => {
                    // A server frame: mostly answers to what was sent.
                    let frame = if !sent.is_empty() && rng.below(4) != 0 {
                        let (id, action) = sent[rng.below(sent.len() as u64) as usize].clone();
                        let suffix = ["ok", "error", "data", "ok"][rng.below(4) as usize];
                        let body = match action.as_str() {
                            "auth/handshake" if suffix == "ok" => {
                                format!(r#"{{"data":{{"nonce":"{NONCE}"}}}}"#)
                            }
                            _ => r#"{"position":"1:1","reason":"r"}"#.to_string(),
                        };
                        if rng.below(10) == 0 {
                            format!(r#"{{"action":"rtm/publish/ok","id":{id},"body":{{}}}}"#)
                        } else {
                            format!(r#"{{"action":"{action}/{suffix}","id":{id},"body":{body}}}"#)
                        }
                    } else {
                        let key = keys[rng.below(3) as usize];
                        match rng.below(7) {
                            0 => data(key, "1:2", "[1,2]"),
                            1 => {
                                channel_error(key, ["out_of_sync", "other"][rng.below(2) as usize])
                            }
                            2 => format!(
                                r#"{{"action":"rtm/subscription/info","body":{{"subscription_id":"{key}","info":"fast_forward"}}}}"#
                            ),
                            3 => "garbage".to_string(),
                            4 => r#"{"action":"rtm/unknown","body":{}}"#.to_string(),
                            5 => r#"{"action":"/error","body":{}}"#.to_string(),
                            _ => format!(r#"{{"action":"rtm/publish/ok","id":{}}}"#, rng.below(8)),
                        }
                    };
                    c.handle_message(now, &frame, &mut r);
                }
            }
            // The adapter drains every output.
            while let Some(t) = c.poll_transmit() {
                if let Transmit::Send(s) = t {
                    let pdu = Pdu::parse(s).expect("outgoing PDUs are valid JSON");
                    if let Some(id) = pdu.id.and_then(|id| id.as_u64()) {
                        sent.push((id, pdu.action.as_str().to_string()));
                    }
                }
            }
            // Invariants.
            assert!(
                r.finals.values().all(|&n| n == 1),
                "seed {seed}: a ticket resolved twice"
            );
            assert_eq!(c.is_connected(), c.state() == ClientState::Connected);
            if !c.subs_connected && c.state() != ClientState::Stopping {
                assert!(
                    c.subs
                        .iter()
                        .all(|s| matches!(s.state(), SubState::Unsubscribed | SubState::Failed)),
                    "seed {seed}: a subscription is live without a connection"
                );
            }
            assert!(c
                .subs
                .iter()
                .all(|s| s.link_mode != LinkMode::Unlinked || s.state() != SubState::Unsubscribed));
            if c.state() == ClientState::Connected {
                assert!(c.open && c.writable && c.subs_connected && c.restoring.is_none());
            }
            if matches!(c.state(), ClientState::Stopped | ClientState::Awaiting) {
                assert_eq!(c.requests_in_flight(), 0, "seed {seed}");
            }
            if c.state() == ClientState::Disposed {
                break;
            }
            assert!(c.queued_requests() <= config.max_queue_size);
        }
        c.dispose(now, &mut r);
        for t in &issued {
            assert_eq!(
                r.finals.get(t),
                Some(&1),
                "seed {seed}: ticket {t} not resolved exactly once"
            );
        }
        for line in &r.log {
            let words: Vec<&str> = line.split(' ').collect();
            let kind = match words.as_slice() {
                [w, outcome, ..] if w.starts_with("reply#") || w.starts_with("auth#") => {
                    format!("outcome {outcome}")
                }
                ["sub" | "data" | "failed", ..] => words[0].to_string(),
                [a, b, ..] => format!("{a} {b}"),
                _ => line.clone(),
            };
            *seen.entry(kind).or_default() += 1;
        }
    }
    // The sequences reach every kind of outcome and transition.
    for kind in [
        "outcome ok",
        "outcome error",
        "outcome data",
        "outcome timeout",
        "outcome disconnected",
        "outcome done",
        "outcome rejected",
        "data",
        "failed",
        "sub",
        "client Connecting->Connected",
        "client Connected->Awaiting",
        "client Connected->Stopping",
        "client Stopping->Stopped",
        "client Awaiting->Connecting",
        "client Connecting->Awaiting",
        "internal Malformed",
        "internal WrongReply",
        "internal GeneralError",
        "internal Ignored",
    ] {
        assert!(
            seen.get(kind).is_some_and(|&n| n > 0),
            "never saw {kind}: {seen:?}"
        );
    }
}

#[test]
fn subscribe_size_bound_holds() {
    let position = "7".repeat(MAX_POSITION_LEN);
    let key = "k\"\u{1}";
    for (filter, extras) in [
        (None, None),
        (
            Some("select \"x\" from c"),
            Some(r#"{"a": [1, 2], "b": null}"#),
        ),
    ] {
        for mode in [Mode::Simple, Mode::Reliable, Mode::Advanced] {
            let args = SubscribeArgs {
                position: Some(&position),
                history: Some(History::Count(u64::MAX)),
                filter,
                period: Some(u32::MAX),
                only_value_changes: true,
                force: true,
                extras,
            };
            let [f, x] = Subscription::args_parts(&args).unwrap();
            let sub = Subscription::new(key, mode, &args, [f, x]).unwrap();
            let slot = format!("{f}{x}");
            let bound = Subscription::pdu_bound(key, mode, &args, x);
            let mut buf = [0u8; 1024];
            for kind in [SubRequest::Subscribe, SubRequest::Unsubscribe] {
                let mut out = Cursor::new(&mut buf);
                sub.request(kind, slot.as_bytes())
                    .encode(Some(u64::from(u32::MAX)), &mut out)
                    .unwrap();
                assert!(out.len() <= bound, "{} > {bound}", out.len());
            }
            let mut out = Cursor::new(&mut buf);
            sub.request(SubRequest::Subscribe, slot.as_bytes())
                .encode(Some(u64::from(u32::MAX)), &mut out)
                .unwrap();
            assert!(
                bound - out.len() <= 16,
                "bound too loose: {bound} vs {}",
                out.len()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Raw actions (`Client::action`, the reference `Connection.action`).

#[test]
fn raw_action_sent_when_connected_and_any_outcome_of_its_id_resolves_it() {
    let mut t = T::new(quiet());
    t.connect();
    let ack = Ack::Reply { deadline: None };
    let ticket =
        t.c.action(t.now, "rtm/new_thing", r#"{"x":"a\"b"}"#, ack, &mut t.r)
            .unwrap()
            .unwrap();
    assert_eq!(
        t.out(),
        [r#"{"action":"rtm/new_thing","id":0,"body":{"x":"a\"b"}}"#]
    );
    t.log();
    // `/data` keeps it pending; the final `/ok` ends it, whatever the action name.
    t.recv(r#"{"action":"rtm/new_thing/data","id":0,"body":{"n":1}}"#);
    t.recv(r#"{"action":"rtm/new_thing/ok","id":0,"body":{"n":2}}"#);
    assert_eq!(
        t.log(),
        [
            format!("reply#{} data {{\"n\":1}}", ticket.get()),
            format!("reply#{} ok {{\"n\":2}}", ticket.get()),
        ]
    );
    assert_eq!(t.state(), ClientState::Connected);
    // Without an ack it carries no id.
    assert_eq!(
        t.c.action(t.now, "rtm/x", "{}", Ack::None, &mut t.r),
        Ok(None)
    );
    assert_eq!(t.out(), [r#"{"action":"rtm/x","body":{}}"#]);
}

#[test]
fn raw_action_made_offline_is_queued_with_its_name_and_sent_on_connect() {
    let mut t = T::new(quiet());
    let ack = Ack::Reply { deadline: None };
    let ticket =
        t.c.action(t.now, "rtm/later", r#"{"k":[1,2]}"#, ack, &mut t.r)
            .unwrap()
            .unwrap();
    assert_eq!(t.c.queued_requests(), 1);
    assert_eq!(
        t.connect(),
        [r#"{"action":"rtm/later","id":0,"body":{"k":[1,2]}}"#]
    );
    t.log();
    t.recv(r#"{"action":"rtm/later/error","id":0,"body":{"error":"e","reason":"r"}}"#);
    assert_eq!(
        t.log(),
        [format!(
            "reply#{} error {{\"error\":\"e\",\"reason\":\"r\"}}",
            ticket.get()
        )]
    );
}

#[test]
fn raw_action_rejects_bad_names_and_bodies() {
    let mut t = T::new(quiet());
    for (name, body) in [("", "{}"), ("a\nb", "{}"), ("rtm/x", "[1]"), ("rtm/x", "{")] {
        assert_eq!(
            t.c.action(t.now, name, body, Ack::None, &mut t.r),
            Err(RequestError::InvalidJson),
            "{name:?} {body:?}"
        );
    }
    assert_eq!(t.c.queued_requests(), 0);
}

/// In CBOR, queued requests (a subscription, a publish, any action) go out as CBOR
/// PDUs in binary frames once connected, and CBOR replies end them.
#[cfg(feature = "cbor")]
#[test]
fn cbor_client_queues_and_sends_cbor() {
    use crate::rtm::pdu::{Encoding, Id, Pdu, Raw};
    let mut t = T::new(Config {
        encoding: Encoding::Cbor,
        ..quiet()
    });
    let ticket = t.publish("ch", r#"{"a":1}"#, true).unwrap().unwrap();
    let ack = Ack::Reply { deadline: None };
    t.c.action(t.now, "rtm/x", r#"{"k":[1]}"#, ack, &mut t.r)
        .unwrap();
    t.sub("ch", Mode::Simple);
    t.start();
    assert_eq!(t.c.poll_transmit(), Some(Transmit::Connect));
    t.opened();
    let mut sent = Vec::new();
    while let Some(out) = t.c.poll_transmit() {
        let Transmit::Binary(bytes) = out else {
            panic!("{out:?}")
        };
        sent.push(bytes.to_vec());
    }
    let pdus: Vec<Pdu<'_>> = sent.iter().map(|b| Pdu::parse_cbor(b).unwrap()).collect();
    let actions: Vec<_> = pdus.iter().map(|p| (p.action.as_str(), p.id)).collect();
    assert_eq!(
        actions,
        [
            ("rtm/subscribe", Some(Id::Int(0))),
            ("rtm/publish", Some(Id::Int(1))),
            ("rtm/x", Some(Id::Int(2))),
        ]
    );
    assert_eq!(
        pdus[1].message().unwrap().raw(),
        Raw::Cbor(&[0xa1, 0x61, b'a', 0x01])
    );
    let k = pdus[2].body.unwrap().get("k").unwrap();
    assert_eq!(k.raw(), Raw::Cbor(&[0x81, 0x01]));
    // {"action":"rtm/publish/ok","id":1,"body":{}}
    let mut ok = vec![0xa3, 0x66];
    ok.extend_from_slice(b"action");
    ok.push(0x6e);
    ok.extend_from_slice(b"rtm/publish/ok");
    ok.extend_from_slice(&[0x62, b'i', b'd', 0x01, 0x64]);
    ok.extend_from_slice(b"body");
    ok.push(0xa0);
    t.c.handle_frame(t.now, &ok, &mut t.r);
    assert_eq!(t.r.finals.get(&ticket.get()), Some(&1));
}
