//! End to end: the std RTM client against the local RTM server with fault injection.
//!
//! The cases of the reference Python SDK's test suite where they apply to this client,
//! checking where benchlink deliberately differs from that SDK instead of its bugs.
//! Every test has its own server on a free port and its own client (disposed at the
//! end), records observer callbacks into a [`Log`] and waits with bounded timeouts.

use std::net::TcpListener;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use benchlink_core::rtm::RequestError;
use benchlink_sandbox::relay::Relay;
use benchlink_sandbox::rtm::{
    AttemptOutcome, ConnectFault, ConnectionInfo, ReplyOverride, RtmServer, RtmServerConfig,
    DEFAULT_APPKEY, RESTRICTED_PREFIX, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
use benchlink_std::rtm::{
    Callback, Client, ClientObserver, ClientOptions, ConnectError, Error, Mode, Response,
    SubscribeOptions, SubscriptionData, SubscriptionObserver, IN_FLIGHT_REQUEST_BYTES,
};
use benchlink_tests::{wait_until, within};
use serde_json::{json, Value};

/// Upper bound of every wait for something that should happen.
const WAIT: Duration = Duration::from_secs(10);
/// Reconnect interval of most tests.
const INTERVAL: Duration = Duration::from_millis(50);

// ---------------------------------------------------------------------------------------
// Recording observers
// ---------------------------------------------------------------------------------------

/// Observer callbacks as strings, in order, with waiting.
#[derive(Default)]
struct Log {
    events: Mutex<Vec<String>>,
    /// When each event was logged, by the client's thread as it happened: the client's
    /// own timeline (a server's stamps lag by its scheduling of each accept).
    stamps: Mutex<Vec<Instant>>,
    changed: Condvar,
}

impl Log {
    fn new() -> Arc<Log> {
        Arc::new(Log::default())
    }

    /// The events, also after a panic elsewhere (a failed test must not make the
    /// client's observers panic too).
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, event: impl Into<String>) {
        let mut events = self.lock();
        events.push(event.into());
        self.stamps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Instant::now());
        drop(events);
        self.changed.notify_all();
    }

    /// When each `event` at or after index `mark` was logged.
    fn stamps_of(&self, mark: usize, event: &str) -> Vec<Instant> {
        let events = self.lock();
        let stamps = self
            .stamps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (mark..events.len())
            .filter(|&i| events[i] == event)
            .map(|i| stamps[i])
            .collect()
    }

    fn all(&self) -> Vec<String> {
        self.lock().clone()
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    /// The events from index `mark` on.
    fn since(&self, mark: usize) -> Vec<String> {
        self.lock()[mark..].to_vec()
    }

    fn count(&self, event: &str) -> usize {
        self.lock().iter().filter(|e| *e == event).count()
    }

    /// Waits until `pred` holds for the events; panics with `what` and the log otherwise.
    fn wait_until(&self, what: &str, pred: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + WAIT;
        let mut events = self.lock();
        while !pred(&events) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let log = events.clone();
                drop(events);
                panic!("timed out waiting for {what}; log: {log:#?}");
            }
            events = self
                .changed
                .wait_timeout(events, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Waits until `event` was logged `n` times in all.
    fn wait_count(&self, event: &str, n: usize) {
        self.wait_until(&format!("{n} × {event}"), |ev| {
            ev.iter().filter(|e| *e == event).count() >= n
        });
    }

    /// Waits until `event` was logged at or after index `mark`.
    fn wait_since(&self, mark: usize, event: &str) {
        self.wait_until(&format!("{event} after #{mark}"), |ev| {
            ev.get(mark..)
                .is_some_and(|ev| ev.iter().any(|e| e == event))
        });
    }

    /// The messages received (`data:` events), raw JSON.
    fn messages(&self) -> Vec<String> {
        self.all()
            .into_iter()
            .filter_map(|e| e.strip_prefix("data:").map(str::to_owned))
            .collect()
    }

    fn wait_messages(&self, n: usize) -> Vec<String> {
        self.wait_until(&format!("{n} messages"), |ev| {
            ev.iter().filter(|e| e.starts_with("data:")).count() >= n
        });
        self.messages()
    }
}

/// A client observer that logs everything.
struct ClientLog(Arc<Log>);

impl ClientObserver for ClientLog {
    fn on_enter_stopped(&mut self) {
        self.0.push("on_enter_stopped");
    }
    fn on_leave_stopped(&mut self) {
        self.0.push("on_leave_stopped");
    }
    fn on_enter_connecting(&mut self) {
        self.0.push("on_enter_connecting");
    }
    fn on_leave_connecting(&mut self) {
        self.0.push("on_leave_connecting");
    }
    fn on_enter_connected(&mut self) {
        self.0.push("on_enter_connected");
    }
    fn on_leave_connected(&mut self) {
        self.0.push("on_leave_connected");
    }
    fn on_enter_stopping(&mut self) {
        self.0.push("on_enter_stopping");
    }
    fn on_leave_stopping(&mut self) {
        self.0.push("on_leave_stopping");
    }
    fn on_enter_awaiting(&mut self) {
        self.0.push("on_enter_awaiting");
    }
    fn on_leave_awaiting(&mut self) {
        self.0.push("on_leave_awaiting");
    }
    fn on_enter_disposed(&mut self) {
        self.0.push("on_enter_disposed");
    }
    fn on_internal_error(&mut self, error: &str) {
        self.0.push(format!("on_internal_error:{error}"));
    }
    fn on_fast_forward(&mut self, channel: &str) {
        self.0.push(format!("on_fast_forward:{channel}"));
    }
}

/// A subscription observer that logs everything; messages as `data:<raw JSON>`.
struct SubLog(Arc<Log>);

impl SubscriptionObserver for SubLog {
    fn on_created(&mut self) {
        self.0.push("on_created");
    }
    fn on_deleted(&mut self) {
        self.0.push("on_deleted");
    }
    fn on_enter_unsubscribed(&mut self) {
        self.0.push("on_enter_unsubscribed");
    }
    fn on_leave_unsubscribed(&mut self) {
        self.0.push("on_leave_unsubscribed");
    }
    fn on_enter_subscribing(&mut self) {
        self.0.push("on_enter_subscribing");
    }
    fn on_leave_subscribing(&mut self) {
        self.0.push("on_leave_subscribing");
    }
    fn on_enter_subscribed(&mut self) {
        self.0.push("on_enter_subscribed");
    }
    fn on_leave_subscribed(&mut self) {
        self.0.push("on_leave_subscribed");
    }
    fn on_enter_unsubscribing(&mut self) {
        self.0.push("on_enter_unsubscribing");
    }
    fn on_leave_unsubscribing(&mut self) {
        self.0.push("on_leave_unsubscribing");
    }
    fn on_enter_failed(&mut self, reason: &str) {
        self.0.push(format!("on_enter_failed:{reason}"));
    }
    fn on_leave_failed(&mut self) {
        self.0.push("on_leave_failed");
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        self.0
            .push(format!("subscription_id:{}", data.subscription_id()));
        for m in data.messages() {
            self.0.push(format!("data:{m}"));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

/// A server, a client with a logging observer; the client is disposed on drop.
struct Rig {
    client: Client,
    log: Arc<Log>,
    server: RtmServer,
    /// The delaying relay between the client and the server, when there is one.
    relay: Option<Relay>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.client.dispose();
    }
}

fn options(server: &RtmServer) -> ClientOptions {
    let mut o = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    o.reconnect_interval = INTERVAL;
    o.max_reconnect_interval = Duration::from_secs(2);
    o
}

impl Rig {
    fn new() -> Rig {
        Rig::with(RtmServerConfig::default(), |_| {})
    }

    fn with(config: RtmServerConfig, tweak: impl FnOnce(&mut ClientOptions)) -> Rig {
        Rig::linked(config, None, tweak)
    }

    /// A rig whose client reaches the server through a relay that delays every byte by
    /// `delay` each way: a distant server.
    fn delayed(delay: Duration, tweak: impl FnOnce(&mut ClientOptions)) -> Rig {
        Rig::linked(RtmServerConfig::default(), Some(delay), tweak)
    }

    fn linked(
        config: RtmServerConfig,
        delay: Option<Duration>,
        tweak: impl FnOnce(&mut ClientOptions),
    ) -> Rig {
        let server = RtmServer::start(config).unwrap();
        let relay = delay.map(|delay| {
            Relay::start("127.0.0.1:0".parse().unwrap(), server.addr(), delay).unwrap()
        });
        let mut o = options(&server);
        if let Some(relay) = &relay {
            o.transport.endpoint = format!("ws://{}", relay.addr());
        }
        tweak(&mut o);
        let log = Log::new();
        let client = Client::with_observer(o, Some(Box::new(ClientLog(log.clone())))).unwrap();
        Rig {
            client,
            log,
            server,
            relay,
        }
    }

    /// A started and connected rig.
    fn connected() -> Rig {
        let rig = Rig::new();
        rig.start();
        rig
    }

    /// Starts the client and waits for the next `on_enter_connected` and for the server
    /// to list the new connection (it does so only after its post-upgrade pause, so a
    /// fault injected right after the client connected could otherwise reach nobody).
    fn start(&self) {
        let mark = self.log.len();
        let known = self.server.connections().len();
        self.client.start().unwrap();
        self.log.wait_since(mark, "on_enter_connected");
        assert!(
            self.server
                .wait_for_connections(WAIT, |c| c.len() > known && c.iter().any(|c| c.open)),
            "the server never listed the client's connection"
        );
    }

    /// Subscribes with a logging observer; waits until subscribed when connected.
    fn subscribe(&self, key: &str, mode: Mode, options: SubscribeOptions) -> Arc<Log> {
        let log = Log::new();
        self.client
            .subscribe(key, mode, SubLog(log.clone()), options)
            .unwrap();
        if self.client.is_connected() {
            log.wait_count("on_enter_subscribed", 1);
        }
        log
    }

    /// Drops the client's connection and waits until it is connected again.
    fn drop_and_reconnect(&self) -> Vec<String> {
        let mark = self.log.len();
        let known = self.server.connections().len();
        assert!(self.server.faults().drop_connections() >= 1);
        self.log.wait_since(mark, "on_enter_connected");
        // As in `start`: wait until the server lists the new connection too.
        assert!(
            self.server
                .wait_for_connections(WAIT, |c| c.len() > known && c.iter().any(|c| c.open)),
            "the server never listed the reconnected client"
        );
        self.log.since(mark)
    }

    fn publish(&self, channel: &str, message: &Value) -> String {
        self.client.publish_sync(channel, message, WAIT).unwrap()
    }

    /// The event to wait for before checking that something did *not* happen: a
    /// round trip through the server on the current connection (anything the server
    /// sent before its reply has been read by the client, and its callbacks have run)
    /// and then every observer event caused so far delivered.
    fn barrier(&self) {
        self.publish("barrier", &json!("barrier"));
        self.settle();
    }

    /// Waits until every event the client has caused so far (by its own timers and by
    /// this thread's calls) was delivered to the observers and callbacks.
    fn settle(&self) {
        self.client.wait_for_state(|_| true, WAIT);
    }

    /// The PDUs connection number `n` (0-based, in accept order) received, parsed.
    fn received(&self, n: usize) -> Vec<Value> {
        // The server records a connection once its 101 is out: the client may be
        // connected a moment earlier.
        assert!(
            self.server.wait_for_connections(WAIT, |c| c.len() > n),
            "no connection #{n}"
        );
        let conns = self.server.connections();
        conns[n]
            .received
            .iter()
            .map(|t| serde_json::from_str(t).unwrap())
            .collect()
    }

    fn connection_count(&self) -> usize {
        self.server.connections().len()
    }
}

fn reply(rx: &Receiver<Response<'static>>) -> benchlink_std::rtm::Reply<'static> {
    match rx.recv_timeout(WAIT).unwrap() {
        Response::Reply(r) => r,
        other => panic!("expected a reply, got {other:?}"),
    }
}

/// Whether the first connection received a PDU containing `text`.
fn first_received(conns: &[ConnectionInfo], text: &str) -> bool {
    conns
        .first()
        .is_some_and(|c| c.received.iter().any(|p| p.contains(text)))
}

/// Whether the first connection has subscription `id` on the server.
fn first_subscribed(conns: &[ConnectionInfo], id: &str) -> bool {
    conns
        .first()
        .is_some_and(|c| c.subscriptions.iter().any(|s| s == id))
}

fn action(pdu: &Value) -> &str {
    pdu["action"].as_str().unwrap_or("")
}

fn actions(pdus: &[Value]) -> Vec<&str> {
    pdus.iter().map(action).collect()
}

/// The subscribe PDUs among `pdus` for `channel`.
fn subscribes<'a>(pdus: &'a [Value], channel: &str) -> Vec<&'a Value> {
    pdus.iter()
        .filter(|p| action(p) == "rtm/subscribe" && p["body"]["channel"] == channel)
        .collect()
}

const STOP_START_STOP: [&str; 8] = [
    "on_leave_stopped",
    "on_enter_connecting",
    "on_leave_connecting",
    "on_enter_connected",
    "on_leave_connected",
    "on_enter_stopping",
    "on_leave_stopping",
    "on_enter_stopped",
];

const RECONNECT: [&str; 6] = [
    "on_leave_connected",
    "on_enter_awaiting",
    "on_leave_awaiting",
    "on_enter_connecting",
    "on_leave_connecting",
    "on_enter_connected",
];

const RESUBSCRIBE: [&str; 6] = [
    "on_leave_subscribed",
    "on_enter_unsubscribed",
    "on_leave_unsubscribed",
    "on_enter_subscribing",
    "on_leave_subscribing",
    "on_enter_subscribed",
];

// ---------------------------------------------------------------------------------------
// Client states (state_callbacks.py, changing_state_in_state_callback.py)
// ---------------------------------------------------------------------------------------

#[test]
fn state_log_start_stop_dispose() {
    let rig = Rig::new();
    rig.start();
    assert!(rig.client.is_connected());
    rig.client.stop().unwrap();
    rig.log.wait_count("on_enter_stopped", 1);
    assert!(!rig.client.is_connected());
    rig.client.dispose().unwrap();
    let mut expected = STOP_START_STOP.to_vec();
    expected.extend(["on_leave_stopped", "on_enter_disposed"]);
    assert_eq!(rig.log.all(), expected);
    // Any later call fails.
    assert!(matches!(
        rig.client.publish("c", &1, None),
        Err(Error::Disposed)
    ));
    assert!(matches!(rig.client.start(), Err(Error::Disposed)));
}

#[test]
fn stop_while_stopped_then_dispose() {
    let rig = Rig::new();
    rig.client.stop().unwrap();
    rig.client.dispose().unwrap();
    assert_eq!(rig.log.all(), ["on_leave_stopped", "on_enter_disposed"]);
}

/// Stop from `on_enter_connected`, start from `on_enter_stopped`, then stop again: no
/// deadlock, and every transition is reported.
#[test]
fn state_changes_from_state_callbacks() {
    struct Flip {
        log: Arc<Log>,
        client: Arc<OnceLock<Client>>,
        restarted: bool,
    }
    impl ClientObserver for Flip {
        fn on_enter_connected(&mut self) {
            self.log.push("on_enter_connected");
            self.client.get().unwrap().stop().unwrap();
        }
        fn on_enter_stopped(&mut self) {
            self.log.push("on_enter_stopped");
            if !self.restarted {
                self.restarted = true;
                self.client.get().unwrap().start().unwrap();
            }
        }
        fn on_leave_stopped(&mut self) {
            self.log.push("on_leave_stopped");
        }
        fn on_enter_connecting(&mut self) {
            self.log.push("on_enter_connecting");
        }
        fn on_leave_connecting(&mut self) {
            self.log.push("on_leave_connecting");
        }
        fn on_leave_connected(&mut self) {
            self.log.push("on_leave_connected");
        }
        fn on_enter_stopping(&mut self) {
            self.log.push("on_enter_stopping");
        }
        fn on_leave_stopping(&mut self) {
            self.log.push("on_leave_stopping");
        }
    }
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let log = Log::new();
    let cell = Arc::new(OnceLock::new());
    let flip = Flip {
        log: log.clone(),
        client: cell.clone(),
        restarted: false,
    };
    let client = Client::with_observer(options(&server), Some(Box::new(flip))).unwrap();
    assert!(cell.set(client.clone()).is_ok());
    client.start().unwrap();
    log.wait_count("on_enter_stopped", 2);
    let expected: Vec<&str> = STOP_START_STOP
        .iter()
        .chain(&STOP_START_STOP)
        .copied()
        .collect();
    assert_eq!(log.all(), expected);
    client.dispose().unwrap();
}

// ---------------------------------------------------------------------------------------
// Reconnect (reconnect.py, resubscribe.py, two_clients.py)
// ---------------------------------------------------------------------------------------

#[test]
fn reconnect_after_drop_restores_subscription() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    rig.publish("chan", &json!("one"));
    sub.wait_messages(1);
    let sub_mark = sub.len();
    let log = rig.drop_and_reconnect();
    assert_eq!(log, RECONNECT);
    sub.wait_count("on_enter_subscribed", 2);
    let sub_log: Vec<String> = sub
        .since(sub_mark)
        .into_iter()
        .filter(|e| !e.contains(':'))
        .collect();
    assert_eq!(sub_log, RESUBSCRIBE);
    rig.publish("chan", &json!("two"));
    assert_eq!(sub.wait_messages(2), [r#""one""#, r#""two""#]);
}

/// RELIABLE and ADVANCED resubscribe from the tracked position and get the message
/// published while they were away; SIMPLE does not (two_clients.py).
#[test]
fn message_published_while_disconnected() {
    let rig = Rig::connected();
    let reliable = rig.subscribe("rel", Mode::Reliable, SubscribeOptions::default());
    let advanced = rig.subscribe("adv", Mode::Advanced, SubscribeOptions::default());
    let simple = rig.subscribe("simple", Mode::Simple, SubscribeOptions::default());
    let publisher = Client::new(options(&rig.server)).unwrap();
    publisher.start().unwrap();
    for ch in ["rel", "adv", "simple"] {
        publisher.publish_sync(ch, &json!("first"), WAIT).unwrap();
    }
    for log in [&reliable, &advanced, &simple] {
        log.wait_messages(1);
    }
    // Keep the subscriber away while the second message goes out.
    let faults = rig.server.faults();
    faults.refuse_connections(ConnectFault::CloseTcp, None);
    let mark = rig.log.len();
    assert_eq!(faults.drop_subscribers("rel"), 1);
    rig.log.wait_since(mark, "on_enter_awaiting");
    for ch in ["rel", "adv", "simple"] {
        publisher.publish_sync(ch, &json!("second"), WAIT).unwrap();
    }
    faults.clear();
    rig.log.wait_since(mark, "on_enter_connected");
    for log in [&reliable, &advanced, &simple] {
        log.wait_count("on_enter_subscribed", 2);
    }
    for ch in ["rel", "adv", "simple"] {
        publisher.publish_sync(ch, &json!("third"), WAIT).unwrap();
    }
    let all = [r#""first""#, r#""second""#, r#""third""#];
    assert_eq!(reliable.wait_messages(3), all);
    assert_eq!(advanced.wait_messages(3), all);
    assert_eq!(simple.wait_messages(2), [r#""first""#, r#""third""#]);
    // The resubscribes carried the tracked positions; SIMPLE carried none.
    let last = rig.connection_count() - 1;
    let pdus = rig.received(last);
    let rel = subscribes(&pdus, "rel")[0];
    assert_eq!(rel["body"]["fast_forward"], true);
    assert!(rel["body"]["position"].is_string(), "{rel}");
    let adv = subscribes(&pdus, "adv")[0];
    assert!(adv["body"]["position"].is_string(), "{adv}");
    assert!(adv["body"].get("fast_forward").is_none(), "{adv}");
    let simple_pdu = subscribes(&pdus, "simple")[0];
    assert!(simple_pdu["body"].get("position").is_none(), "{simple_pdu}");
    publisher.dispose().unwrap();
}

#[test]
fn manual_start_after_stop_keeps_subscriptions() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    rig.client.stop().unwrap();
    rig.log.wait_count("on_enter_stopped", 1);
    sub.wait_count("on_enter_unsubscribed", 1);
    rig.start();
    sub.wait_count("on_enter_subscribed", 2);
    rig.publish("chan", &json!({"after": "restart"}));
    assert_eq!(sub.wait_messages(1), [r#"{"after":"restart"}"#]);
    assert_eq!(sub.count("on_deleted"), 0);
}

/// A subscription made before `start()` subscribes once connected
/// (subscribe_before_start.py).
#[test]
fn subscribe_before_start() {
    let rig = Rig::new();
    let sub = rig.subscribe("early", Mode::Simple, SubscribeOptions::default());
    // Calls do not wait for their callbacks (they run on the I/O thread, after it).
    sub.wait_count("on_created", 1);
    assert_eq!(sub.all(), ["on_created"]);
    rig.start();
    sub.wait_count("on_enter_subscribed", 1);
    rig.publish("early", &json!(1));
    assert_eq!(sub.wait_messages(1), ["1"]);
}

/// On a new connection the order is: auth restore, resubscribes, then the requests queued
/// while disconnected (the reference SDK's order).
#[test]
fn auth_restored_before_resubscribe_then_queue() {
    let rig = Rig::connected();
    rig.client
        .authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    let faults = rig.server.faults();
    faults.refuse_connections(ConnectFault::CloseTcp, None);
    let mark = rig.log.len();
    faults.drop_connections();
    rig.log.wait_since(mark, "on_enter_awaiting");
    let (cb, rx) = Response::channel();
    rig.client
        .publish("chan", &json!("queued"), Some(cb))
        .unwrap();
    rig.client.publish("chan", &json!("queued2"), None).unwrap();
    faults.clear();
    assert!(reply(&rx).is_ok());
    sub.wait_messages(2);
    let pdus = rig.received(1);
    assert_eq!(
        actions(&pdus)[..5],
        [
            "auth/handshake",
            "auth/authenticate",
            "rtm/subscribe",
            "rtm/publish",
            "rtm/publish"
        ]
    );
    // Ids restart at 0 on the new connection; the ack-less publish has none.
    assert_eq!(pdus[0]["id"], 0);
    assert!(pdus[4].get("id").is_none());
    assert_eq!(pdus[0]["body"]["data"]["role"], SUPERUSER_ROLE);
}

/// The restricted channel still works after a reconnect thanks to the auth restore.
#[test]
fn restricted_channel_after_reconnect() {
    let rig = Rig::connected();
    let channel = format!("{RESTRICTED_PREFIX}_chan");
    // Without auth: the exact authorization error (role_auth.py).
    match rig.client.publish_sync(&channel, &json!(0), WAIT) {
        Err(Error::Reply(r)) => {
            assert_eq!(r.action, "rtm/publish/error");
            assert_eq!(
                r.json(),
                json!({"error": "authorization_denied", "reason": "Unauthorized"})
            );
        }
        other => panic!("expected authorization_denied, got {other:?}"),
    }
    rig.client
        .authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap();
    let sub = rig.subscribe(&channel, Mode::Reliable, SubscribeOptions::default());
    rig.publish(&channel, &json!(1));
    sub.wait_messages(1);
    rig.drop_and_reconnect();
    sub.wait_count("on_enter_subscribed", 2);
    rig.publish(&channel, &json!(2));
    assert_eq!(sub.wait_messages(2), ["1", "2"]);
    assert!(sub.all().iter().all(|e| !e.starts_with("on_enter_failed")));
    assert_eq!(
        rig.server.connections()[1].role.as_deref(),
        Some(SUPERUSER_ROLE)
    );
}

// ---------------------------------------------------------------------------------------
// Backoff and attempt budget: growing delays, exact budget, explicit first-connect rule
// ---------------------------------------------------------------------------------------

/// Gaps between consecutive `event`s logged at or after `mark`, on the client's timeline.
fn gaps(log: &Log, mark: usize, event: &str) -> Vec<Duration> {
    log.stamps_of(mark, event)
        .windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .collect()
}

/// Gap `k` (0-based) between attempts after a drop of a stable connection is
/// `interval · 2^(k+1)` (no jitter by default), counted by the client from the start of
/// the attempt before. The core's tests check that to the microsecond with `now` passed
/// in (`backoff_matches_the_reference_gaps`, `accept_then_close_storm_backs_off`); here,
/// on real threads, the gaps are seen through the client's observer (each attempt's event
/// logged by its I/O thread), which a loaded machine can delay by tens of milliseconds
/// for one attempt and not the next (a second copy of the test command beside this one
/// showed gaps 11 ms short). So this asserts what no scheduling delay can fake: each gap
/// is at least half its wait, which a client that did not double its backoff fails from
/// the second gap on. Only lower bounds: a loaded machine may always be late.
fn assert_backoff(gaps: &[Duration], interval: Duration) {
    for (k, gap) in gaps.iter().enumerate() {
        let low = interval * 2u32.pow(u32::try_from(k).unwrap() + 1) / 2;
        assert!(
            *gap >= low,
            "gap {k} = {gap:?}, expected at least {low:?}; all gaps {gaps:?}"
        );
    }
}

#[test]
fn backoff_grows_on_refused_connections() {
    let interval = Duration::from_millis(60);
    let rig = Rig::with(RtmServerConfig::default(), |o| {
        o.reconnect_interval = interval;
        o.max_reconnect_interval = Duration::from_secs(10);
    });
    rig.start();
    rig.subscribe("chan", Mode::Simple, SubscribeOptions::default()); // a reply: stable
    let faults = rig.server.faults();
    faults.refuse_connections(ConnectFault::Status(503), Some(3));
    let mark = rig.log.len();
    let dropped = std::time::Instant::now();
    faults.drop_connections();
    rig.log.wait_since(mark, "on_enter_connected");
    let attempts = rig.server.attempts();
    assert_eq!(attempts.len(), 5, "{attempts:?}");
    // `reconnect_interval` is the wait before the first reconnection attempt (the SDK
    // contract), counted from the drop.
    let first_wait = attempts[1].at.duration_since(dropped);
    assert!(first_wait >= interval, "{first_wait:?} < {interval:?}");
    assert!(attempts[1..4]
        .iter()
        .all(|a| a.outcome == AttemptOutcome::Rejected(503)));
    let gaps = gaps(&rig.log, mark, "on_enter_connecting");
    assert_eq!(gaps.len(), 3);
    assert_backoff(&gaps, interval);
    let log = rig.log.since(mark);
    assert_eq!(log[..2], ["on_leave_connected", "on_enter_awaiting"]);
    assert!(rig
        .client
        .last_connecting_error()
        .is_none_or(|e| e.to_string().contains("503")));
}

/// A server that accepts the upgrade and closes at once gets a growing backoff, not a
/// reconnect per interval (the reference SDK resets its backoff on every successful
/// upgrade).
#[test]
fn backoff_grows_on_accept_then_close() {
    let interval = Duration::from_millis(60);
    let rig = Rig::with(RtmServerConfig::default(), |o| {
        o.reconnect_interval = interval;
        o.max_reconnect_interval = Duration::from_secs(10);
    });
    rig.start();
    rig.subscribe("chan", Mode::Simple, SubscribeOptions::default());
    let faults = rig.server.faults();
    faults.refuse_connections(ConnectFault::CloseAfterUpgrade, Some(3));
    let mark = rig.log.len();
    faults.drop_connections();
    // Three storm connections, then a good one that stays.
    rig.log.wait_count("on_enter_connected", 5);
    let attempts = rig.server.attempts();
    assert_eq!(attempts.len(), 5, "{attempts:?}");
    assert!(attempts[1..4]
        .iter()
        .all(|a| a.outcome == AttemptOutcome::ClosedAfterUpgrade));
    let gaps = gaps(&rig.log, mark, "on_enter_connecting");
    assert_eq!(gaps.len(), 3);
    assert_backoff(&gaps, interval);
    // The fifth connection is the one that stays: a round trip goes through on it,
    // and no attempt came before that.
    rig.barrier();
    assert!(rig.client.is_connected());
    assert_eq!(rig.server.attempts().len(), 5);
}

/// `fail_count_threshold = n`: exactly `n` reconnect attempts after a drop, then Stopped.
fn threshold_case(n: u32) {
    let rig = Rig::with(RtmServerConfig::default(), |o| {
        o.fail_count_threshold = Some(n);
        o.reconnect_interval = Duration::from_millis(20);
    });
    rig.start();
    rig.subscribe("chan", Mode::Simple, SubscribeOptions::default());
    let faults = rig.server.faults();
    faults.refuse_connections(ConnectFault::CloseTcp, None);
    let mark = rig.log.len();
    faults.drop_connections();
    rig.log.wait_since(mark, "on_enter_stopped");
    rig.settle();
    assert!(!rig.client.is_connected());
    assert_eq!(
        rig.server.attempts().len(),
        1 + n as usize,
        "threshold {n}: {:?}",
        rig.log.since(mark)
    );
    // Stopped means no timer left: the next thing the client does is what the next
    // call asks for. A restart connects at once, with exactly one more attempt and no
    // other state change in between.
    faults.clear();
    let stopped = rig.log.len();
    rig.start();
    assert_eq!(
        rig.log.since(stopped),
        [
            "on_leave_stopped",
            "on_enter_connecting",
            "on_leave_connecting",
            "on_enter_connected"
        ]
    );
    assert_eq!(
        rig.server.attempts().len(),
        2 + n as usize,
        "threshold {n}: {:?}",
        rig.log.since(mark)
    );
    let log = rig.log.since(mark);
    let until_stopped = &log[..log.len() - 4];
    assert_eq!(
        until_stopped.last().map(String::as_str),
        Some("on_enter_stopped")
    );
    assert_eq!(
        until_stopped
            .iter()
            .filter(|e| *e == "on_enter_connecting")
            .count(),
        n as usize
    );
}

#[test]
fn fail_count_threshold_zero() {
    threshold_case(0);
}

#[test]
fn fail_count_threshold_one() {
    threshold_case(1);
}

#[test]
fn fail_count_threshold_two() {
    threshold_case(2);
}

fn dead_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("ws://{addr}")
}

/// Without `retry_first_connect` (the reference SDK's behaviour) a failed first connect
/// is not retried: Stopped with the error kept (unexpected.py, connection_error.py).
#[test]
fn first_connect_to_dead_endpoint_stops() {
    let log = Log::new();
    let mut o = ClientOptions::new(dead_endpoint(), DEFAULT_APPKEY);
    o.reconnect_interval = INTERVAL;
    o.retry_first_connect = false;
    let client = Client::with_observer(o, Some(Box::new(ClientLog(log.clone())))).unwrap();
    client.start().unwrap();
    log.wait_count("on_enter_stopped", 1);
    assert_eq!(
        log.all(),
        [
            "on_leave_stopped",
            "on_enter_connecting",
            "on_leave_connecting",
            "on_enter_stopped"
        ]
    );
    let error = client.last_connecting_error().expect("an error is kept");
    assert!(error.to_string().contains("connection failed"), "{error}");
    // The typed error: the client saw a transport failure, and the socket's error is
    // behind it (as the reference SDK keeps the exception itself).
    assert!(
        matches!(error.transport(), Some(ConnectError::Io(_))),
        "{error:?}"
    );
    assert!(std::error::Error::source(&error).is_some());
    client.dispose().unwrap();
}

/// By default an unsuccessful first connection attempt is retried, as the SDK contract
/// says of every attempt: a server that counts them sees the retries.
#[test]
fn first_connect_retried_by_default() {
    let rig = Rig::with(RtmServerConfig::default(), |o| {
        assert!(o.retry_first_connect, "the default");
        o.fail_count_threshold = Some(2);
        o.reconnect_interval = Duration::from_millis(20);
    });
    // Three refusals exhaust the first attempt and both retries.
    rig.server
        .faults()
        .refuse_connections(ConnectFault::CloseTcp, Some(3));
    rig.client.start().unwrap();
    rig.log.wait_count("on_enter_stopped", 1);
    assert_eq!(rig.server.attempts().len(), 3);
    assert!(rig.client.last_connecting_error().is_some());
    // Two refusals: the second retry succeeds.
    rig.server
        .faults()
        .refuse_connections(ConnectFault::CloseTcp, Some(2));
    rig.start();
    assert_eq!(rig.server.attempts().len(), 6);
    assert_eq!(rig.log.count("on_enter_awaiting"), 4);
}

#[test]
fn first_connect_dead_endpoint_retried() {
    let log = Log::new();
    let mut o = ClientOptions::new(dead_endpoint(), DEFAULT_APPKEY);
    o.reconnect_interval = Duration::from_millis(20);
    o.fail_count_threshold = Some(1);
    let client = Client::with_observer(o, Some(Box::new(ClientLog(log.clone())))).unwrap();
    client.start().unwrap();
    log.wait_count("on_enter_stopped", 1);
    assert_eq!(log.count("on_enter_connecting"), 2);
    assert_eq!(log.count("on_enter_awaiting"), 1);
    assert!(client.last_connecting_error().is_some());
    client.dispose().unwrap();
}

#[test]
fn bad_appkey_fails_to_connect() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let log = Log::new();
    let mut o = options(&server);
    o.transport.appkey = "wrong-appkey".to_owned();
    o.retry_first_connect = false;
    let client = Client::with_observer(o, Some(Box::new(ClientLog(log.clone())))).unwrap();
    client.start().unwrap();
    log.wait_count("on_enter_stopped", 1);
    assert_eq!(log.count("on_enter_connected"), 0);
    let error = client.last_connecting_error().expect("an error is kept");
    assert!(error.to_string().contains("400"), "{error}");
    // Refused by the server's answer to the upgrade: no socket error behind it.
    assert!(error.transport().is_none(), "{error:?}");
    assert_eq!(server.attempts()[0].outcome, AttemptOutcome::Rejected(400));
    client.dispose().unwrap();
}

// ---------------------------------------------------------------------------------------
// Offline queue (delayed_publish.py): every request kind queues, a full queue refuses
// ---------------------------------------------------------------------------------------

#[test]
fn publish_before_start_is_delivered_and_acked() {
    let rig = Rig::new();
    let other = Client::new(options(&rig.server)).unwrap();
    other.start().unwrap();
    let sub_log = Log::new();
    other
        .subscribe(
            "delayed",
            Mode::Simple,
            SubLog(sub_log.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    sub_log.wait_count("on_enter_subscribed", 1);
    let (cb, rx) = Response::channel();
    rig.client
        .publish("delayed", &json!("hello"), Some(cb))
        .unwrap();
    // Every event the publish caused is delivered, and none is its reply.
    rig.settle();
    assert!(rx.try_recv().is_err(), "acked before start");
    rig.start();
    let r = reply(&rx);
    assert_eq!(r.action, "rtm/publish/ok");
    assert!(r.field("position").is_some());
    assert_eq!(sub_log.wait_messages(1), [r#""hello""#]);
    other.dispose().unwrap();
}

/// Read, write and delete made while stopped are queued like publishes, in order (the
/// reference SDK's loop thread dies).
#[test]
fn kv_requests_while_stopped_are_queued() {
    let rig = Rig::new();
    let (wcb, wrx) = Response::channel();
    rig.client.write("kv", &json!({"v": 1}), Some(wcb)).unwrap();
    let (rcb, rrx) = Response::channel();
    rig.client.read("kv", None, Some(rcb)).unwrap();
    let (dcb, drx) = Response::channel();
    rig.client.delete("kv", Some(dcb)).unwrap();
    let (r2cb, r2rx) = Response::channel();
    rig.client.read("kv", None, Some(r2cb)).unwrap();
    rig.start();
    assert_eq!(reply(&wrx).action, "rtm/write/ok");
    let read = reply(&rrx);
    assert_eq!(read.action, "rtm/read/ok");
    assert_eq!(read.json()["message"], json!({"v": 1}));
    assert_eq!(reply(&drx).action, "rtm/delete/ok");
    assert_eq!(reply(&r2rx).json()["message"], Value::Null);
}

/// At the default `max_queue_size` (20,000, the reference SDK's), 20,000 publishes of a
/// 100-byte message wait offline and the next one is refused with `Full`: the count is
/// the limit, not the bytes of the client's queue. Then all 20,000 go out and are
/// acknowledged.
#[test]
fn the_default_queue_holds_twenty_thousand_publishes() {
    let rig = Rig::new();
    let message = "m".repeat(100);
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..20_000 {
        let tx = tx.clone();
        let cb: Callback = Box::new(move |r| {
            let _ = tx.send(matches!(&r, Response::Reply(reply) if reply.is_ok()));
        });
        rig.client.publish("q", &message, Some(cb)).unwrap();
    }
    match rig.client.publish("q", &message, None) {
        Err(Error::Request(RequestError::Full)) => {}
        other => panic!("expected Full, got {other:?}"),
    }
    rig.start();
    for i in 0..20_000 {
        assert!(
            rx.recv_timeout(Duration::from_secs(60)).unwrap(),
            "reply {i}"
        );
    }
}

/// A deep pipe into a server that stops acknowledging: 30,000 publishes go out and stay
/// in flight (the pipe's bytes allow one more here; no request may wait in the queue),
/// the request past that is refused with `Full` at the call, a request's deadline still
/// fires while the pipe is full, and when the connection drops every one of the 30,000
/// callbacks hears `Disconnected`, once.
#[test]
fn a_full_pipe_into_a_silent_server_is_bounded_and_its_deadlines_fire() {
    const IN_FLIGHT: usize = 30_000;
    let rig = Rig::with(RtmServerConfig::default(), |o| {
        o.max_in_flight_bytes = (IN_FLIGHT + 1) * IN_FLIGHT_REQUEST_BYTES;
        o.max_queue_size = 0;
    });
    rig.start();
    rig.server
        .faults()
        .override_replies("rtm/publish", ReplyOverride::Silence, None);
    let (tx, rx) = mpsc::channel();
    for i in 0..IN_FLIGHT {
        let tx = tx.clone();
        let cb: Callback = Box::new(move |r| {
            let _ = tx.send((i, r.to_owned()));
        });
        rig.client.publish("deep", &json!(i), Some(cb)).unwrap();
    }
    // All of them on the wire, not waiting in the client.
    assert!(
        rig.server.wait_for_connections(WAIT, |c| c
            .first()
            .is_some_and(|c| c.received_count == IN_FLIGHT)),
        "the server never saw {IN_FLIGHT} publishes"
    );
    // One slot left: a sync call takes it, and its deadline fires (nothing answers).
    let r = rig
        .client
        .publish_sync("deep", &json!("sync"), Duration::from_millis(200));
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    // Its slot is free again; the one after it is not (publishes without a callback
    // wait for nothing once written, so they take no slot).
    let (last, _last_rx) = Response::channel();
    rig.client
        .publish("deep", &json!("last"), Some(last))
        .unwrap();
    let (over, _over_rx) = Response::channel();
    match rig.client.publish("deep", &json!("over"), Some(over)) {
        Err(Error::Request(RequestError::Full)) => {}
        other => panic!("expected Full, got {other:?}"),
    }
    assert!(rx.try_recv().is_err(), "a silenced publish was answered");
    rig.server.faults().clear();
    rig.drop_and_reconnect();
    let mut seen = vec![false; IN_FLIGHT];
    for _ in 0..IN_FLIGHT {
        let (i, r) = rx.recv_timeout(WAIT).unwrap();
        assert_eq!(r, Response::Disconnected, "publish {i}");
        assert!(
            !std::mem::replace(&mut seen[i], true),
            "publish {i} ended twice"
        );
    }
    rig.barrier();
    assert!(rx.try_recv().is_err(), "a callback ran twice");
}

/// `max_queue_size = 3`: the fourth request is refused at the call with `Full`; the first
/// three are all delivered (nothing dropped silently, unlike the reference SDK).
#[test]
fn max_queue_size_refuses_at_the_call() {
    let rig = Rig::with(RtmServerConfig::default(), |o| o.max_queue_size = 3);
    let mut receivers = Vec::new();
    for i in 0..3 {
        let (cb, rx) = Response::channel();
        rig.client.publish("q", &json!(i), Some(cb)).unwrap();
        receivers.push(rx);
    }
    match rig.client.publish("q", &json!(3), None) {
        Err(Error::Request(RequestError::Full)) => {}
        other => panic!("expected Full, got {other:?}"),
    }
    let (cb, _rx) = Response::channel();
    assert!(matches!(
        rig.client.read("q", None, Some(cb)),
        Err(Error::Request(RequestError::Full))
    ));
    // Subscribe and unsubscribe are not requests of the queue.
    rig.subscribe("other", Mode::Simple, SubscribeOptions::default());
    rig.client.unsubscribe("other").unwrap();
    rig.start();
    for rx in &receivers {
        assert_eq!(reply(rx).action, "rtm/publish/ok");
    }
    let pdus = rig.received(0);
    let published: Vec<&Value> = pdus
        .iter()
        .filter(|p| action(p) == "rtm/publish")
        .map(|p| &p["body"]["message"])
        .collect();
    assert_eq!(published, [&json!(0), &json!(1), &json!(2)]);
    // Room again once acked.
    rig.publish("q", &json!(4));
}

/// Queued requests end `Disconnected` when the client is disposed (never dropped).
#[test]
fn queued_requests_end_disconnected_on_dispose() {
    let rig = Rig::new();
    let (cb, rx) = Response::channel();
    rig.client.publish("c", &json!(1), Some(cb)).unwrap();
    rig.client.dispose().unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), Response::Disconnected);
}

// ---------------------------------------------------------------------------------------
// In-flight requests end exactly once; sync timeouts (connection.py)
// ---------------------------------------------------------------------------------------

#[test]
fn in_flight_publish_gets_disconnected_once() {
    let rig = Rig::connected();
    let faults = rig.server.faults();
    faults.override_replies("rtm/publish", ReplyOverride::Silence, Some(1));
    let (cb, rx) = Response::channel();
    rig.client.publish("c", &json!("lost?"), Some(cb)).unwrap();
    assert!(rig
        .server
        .wait_for_connections(WAIT, |c| first_received(c, "lost?")));
    // A later request's reply is through: the silenced one would have come first.
    rig.barrier();
    assert!(rx.try_recv().is_err(), "the reply was silenced");
    rig.drop_and_reconnect();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), Response::Disconnected);
    rig.barrier();
    assert!(rx.try_recv().is_err(), "completed twice");
    // Not resent on the new connection: at most once.
    assert!(rig
        .received(1)
        .iter()
        .all(|p| action(p) != "rtm/publish" || p["body"]["message"] != "lost?"));
}

#[test]
fn publish_sync_times_out() {
    let rig = Rig::connected();
    rig.server
        .faults()
        .override_replies("rtm/publish", ReplyOverride::Silence, Some(1));
    // The reply never comes: a timer that never fired would hang the call, which the
    // guard turns into a failure.
    let client = rig.client.clone();
    let (r, took) = within(WAIT, "publish_sync's timeout (never fired?)", move || {
        let start = Instant::now();
        let r = client.publish_sync("c", &json!(1), Duration::from_millis(300));
        (r, start.elapsed())
    });
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    // Not before the timeout.
    assert!(took >= Duration::from_millis(290), "{took:?}");
    // The connection is fine afterwards.
    rig.publish("c", &json!(2));
    assert!(rig.client.is_connected());
}

#[test]
fn sync_calls_with_zero_timeout_fail_at_once() {
    let rig = Rig::connected();
    // The server answers both at once: a call that waited for the reply would get it
    // (Ok), so the timeout shows that it did not wait.
    assert!(matches!(
        rig.client.publish_sync("c", &json!(1), Duration::ZERO),
        Err(Error::Timeout)
    ));
    assert!(matches!(
        rig.client.read_sync("c", Duration::ZERO),
        Err(Error::Timeout)
    ));
    // Before start as well (connection.py: sync before start raises).
    let idle = Client::new(options(&rig.server)).unwrap();
    assert!(matches!(
        idle.publish_sync("c", &json!(1), Duration::from_millis(50)),
        Err(Error::Timeout)
    ));
    idle.dispose().unwrap();
}

// ---------------------------------------------------------------------------------------
// Subscribe errors (subscribe_error.py): Failed stays failed, unsubscribing deletes
// ---------------------------------------------------------------------------------------

const INVALID_POSITION: &str = "on_enter_failed:Invalid PDU: 'position' was invalid";

fn bad_position() -> SubscribeOptions {
    SubscribeOptions {
        position: Some("bad".to_owned()),
        ..SubscribeOptions::default()
    }
}

#[test]
fn invalid_position_fails_then_recovers() {
    let rig = Rig::connected();
    let sub = Log::new();
    rig.client
        .subscribe("chan", Mode::Advanced, SubLog(sub.clone()), bad_position())
        .unwrap();
    sub.wait_count(INVALID_POSITION, 1);
    assert_eq!(
        sub.all(),
        [
            "on_created",
            "on_leave_unsubscribed",
            "on_enter_subscribing",
            "on_leave_subscribing",
            INVALID_POSITION
        ]
    );
    // Recovery: unsubscribe, then subscribe again without the position.
    rig.client.unsubscribe("chan").unwrap();
    sub.wait_count("on_deleted", 1);
    let fresh = Log::new();
    rig.client
        .subscribe(
            "chan",
            Mode::Advanced,
            SubLog(fresh.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    fresh.wait_count("on_enter_subscribed", 1);
    assert_eq!(
        fresh.all(),
        [
            "on_created",
            "on_leave_unsubscribed",
            "on_enter_subscribing",
            "on_leave_subscribing",
            "on_enter_subscribed"
        ]
    );
    rig.publish("chan", &json!("ok"));
    assert_eq!(fresh.wait_messages(1), [r#""ok""#]);
}

/// Subscribing again on a Failed key (without unsubscribing) starts over with the new
/// arguments: the old observer is deleted, the new one created.
#[test]
fn resubscribe_over_failed_swaps_observer() {
    let rig = Rig::connected();
    let old = Log::new();
    rig.client
        .subscribe("chan", Mode::Reliable, SubLog(old.clone()), bad_position())
        .unwrap();
    old.wait_count(INVALID_POSITION, 1);
    let new = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    assert_eq!(
        old.since(old.len() - 3),
        ["on_leave_failed", "on_enter_unsubscribed", "on_deleted"]
    );
    assert_eq!(new.all()[0], "on_created");
    rig.publish("chan", &json!(7));
    assert_eq!(new.wait_messages(1), ["7"]);
    assert!(old.messages().is_empty());
}

/// A Failed subscription is not retried on reconnect (the reference SDK retries it
/// every time).
#[test]
fn failed_subscription_not_retried_on_reconnect() {
    let rig = Rig::connected();
    let sub = Log::new();
    rig.client
        .subscribe("chan", Mode::Advanced, SubLog(sub.clone()), bad_position())
        .unwrap();
    sub.wait_count(INVALID_POSITION, 1);
    let before = sub.len();
    rig.drop_and_reconnect();
    // A round trip on the new connection: resubscribes go out right after the
    // connection is up, before this request, and their events would be delivered.
    rig.barrier();
    assert_eq!(sub.len(), before, "{:?}", sub.all());
    let pdus = rig.received(1);
    assert!(subscribes(&pdus, "chan").is_empty());
    assert!(pdus.iter().any(|p| action(p) == "rtm/publish"));
}

#[test]
fn double_subscribe_is_refused() {
    let rig = Rig::connected();
    let first = rig.subscribe("chan", Mode::Simple, SubscribeOptions::default());
    let second = Log::new();
    match rig.client.subscribe(
        "chan",
        Mode::Simple,
        SubLog(second.clone()),
        SubscribeOptions::default(),
    ) {
        Err(Error::Request(RequestError::AlreadySubscribed)) => {}
        other => panic!("expected AlreadySubscribed, got {other:?}"),
    }
    rig.publish("chan", &json!(1));
    assert_eq!(first.wait_messages(1), ["1"]);
    rig.barrier();
    assert!(second.all().is_empty());
    // One subscribe on the wire.
    assert_eq!(subscribes(&rig.received(0), "chan").len(), 1);
}

/// Unsubscribing while disconnected deletes the record at once and it is not
/// resubscribed later (the reference SDK leaks the record and never reports it
/// deleted).
#[test]
fn unsubscribe_while_disconnected_deletes() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    let faults = rig.server.faults();
    faults.refuse_connections(ConnectFault::CloseTcp, None);
    let mark = rig.log.len();
    faults.drop_connections();
    rig.log.wait_since(mark, "on_enter_awaiting");
    rig.client.unsubscribe("chan").unwrap();
    sub.wait_count("on_deleted", 1);
    assert!(matches!(
        rig.client.unsubscribe("chan"),
        Err(Error::Request(RequestError::UnknownSubscription))
    ));
    faults.clear();
    rig.log.wait_since(mark, "on_enter_connected");
    rig.publish("chan", &json!(1));
    let last = rig.connection_count() - 1;
    assert!(subscribes(&rig.received(last), "chan").is_empty());
    assert!(sub.messages().is_empty());
}

/// Unsubscribed from a stopped client, too.
#[test]
fn unsubscribe_while_stopped_deletes() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Simple, SubscribeOptions::default());
    rig.client.stop().unwrap();
    rig.log.wait_count("on_enter_stopped", 1);
    rig.client.unsubscribe("chan").unwrap();
    sub.wait_count("on_deleted", 1);
    rig.start();
    rig.publish("x", &json!(0));
    assert!(subscribes(&rig.received(1), "chan").is_empty());
}

/// A reply of the wrong type to a subscribe is a protocol error: reconnect, then the
/// subscription succeeds (subscribe_error.py).
#[test]
fn wrong_reply_type_to_subscribe_reconnects() {
    let rig = Rig::connected();
    rig.server.faults().override_replies(
        "rtm/subscribe",
        ReplyOverride::Raw(r#"{"action":"rtm/publish/ok","id":{id},"body":{}}"#.to_owned()),
        Some(1),
    );
    let mark = rig.log.len();
    let sub = Log::new();
    rig.client
        .subscribe(
            "chan",
            Mode::Simple,
            SubLog(sub.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    sub.wait_count("on_enter_subscribed", 1);
    let log = rig.log.since(mark);
    assert!(log.iter().any(|e| e.starts_with("on_internal_error:")));
    assert!(log.iter().any(|e| e == "on_enter_awaiting"), "{log:?}");
    rig.publish("chan", &json!(1));
    assert_eq!(sub.wait_messages(1), ["1"]);
}

// ---------------------------------------------------------------------------------------
// Channel errors (channel_error.py, fast_forward.py): out_of_sync per delivery mode
// ---------------------------------------------------------------------------------------

#[test]
fn non_fatal_channel_error_resubscribes() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    let mark = sub.len();
    assert_eq!(
        rig.server
            .faults()
            .inject_subscription_error("chan", "some_error", "injected"),
        1
    );
    sub.wait_count("on_enter_subscribed", 2);
    assert_eq!(
        sub.since(mark),
        [
            "on_leave_subscribed",
            "on_enter_subscribing",
            "on_leave_subscribing",
            "on_enter_subscribed"
        ]
    );
    rig.publish("chan", &json!(1));
    assert_eq!(sub.wait_messages(1), ["1"]);
    assert_eq!(rig.connection_count(), 1, "no reconnect");
}

/// RELIABLE `out_of_sync`: resubscribe WITHOUT a position key (the reference SDK sends
/// `"position": null`).
#[test]
fn reliable_out_of_sync_resubscribes_without_position() {
    let rig = Rig::connected();
    let sub = rig.subscribe("rel", Mode::Reliable, SubscribeOptions::default());
    rig.publish("rel", &json!(1));
    sub.wait_messages(1);
    rig.server
        .faults()
        .inject_subscription_error("rel", "out_of_sync", "Too far behind");
    sub.wait_count("on_enter_subscribed", 2);
    let pdus = rig.received(0);
    let subs = subscribes(&pdus, "rel");
    assert_eq!(subs.len(), 2);
    let body = subs[1]["body"].as_object().unwrap();
    assert!(!body.contains_key("position"), "{body:?}");
    assert_eq!(body["fast_forward"], true);
    rig.publish("rel", &json!(2));
    assert_eq!(sub.wait_messages(2), ["1", "2"]);
}

/// ADVANCED `out_of_sync` → Failed; a message published meanwhile is not delivered; an
/// unsubscribe then deletes it (channel_error.py).
#[test]
fn advanced_out_of_sync_fails() {
    let rig = Rig::connected();
    let sub = rig.subscribe("adv", Mode::Advanced, SubscribeOptions::default());
    rig.publish("adv", &json!(1));
    sub.wait_messages(1);
    rig.server
        .faults()
        .inject_subscription_error("adv", "out_of_sync", "Too far behind");
    sub.wait_until("on_enter_failed", |ev| {
        ev.iter().any(|e| e.starts_with("on_enter_failed:"))
    });
    let failed = sub
        .all()
        .into_iter()
        .find(|e| e.starts_with("on_enter_failed:"))
        .unwrap();
    assert!(
        failed.contains("Too far behind") || failed.contains("out_of_sync"),
        "{failed}"
    );
    rig.publish("adv", &json!(2));
    rig.barrier();
    rig.client.unsubscribe("adv").unwrap();
    sub.wait_count("on_deleted", 1);
    assert_eq!(sub.messages(), ["1"]);
    assert_eq!(subscribes(&rig.received(0), "adv").len(), 1);
}

/// A channel error while Unsubscribing counts as done: Unsubscribed and deleted.
#[test]
fn channel_error_during_unsubscribing() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    let faults = rig.server.faults();
    // The unsubscribe goes unanswered; the server ends the subscription instead.
    faults.override_replies("rtm/unsubscribe", ReplyOverride::Silence, Some(1));
    rig.client.unsubscribe("chan").unwrap();
    assert!(rig
        .server
        .wait_for_connections(WAIT, |c| first_received(c, "rtm/unsubscribe")));
    assert_eq!(
        faults.inject_subscription_error("chan", "some_error", "gone"),
        1
    );
    sub.wait_count("on_deleted", 1);
    // The error completes the unsubscribe: only then does the observer leave Subscribed.
    let log = sub.all();
    assert_eq!(
        log[log.len() - 5..],
        [
            "on_leave_subscribed",
            "on_enter_unsubscribing",
            "on_leave_unsubscribing",
            "on_enter_unsubscribed",
            "on_deleted"
        ]
    );
}

#[test]
fn fast_forward_reaches_client_observer() {
    let rig = Rig::connected();
    let sub = rig.subscribe("ff", Mode::Reliable, SubscribeOptions::default());
    assert_eq!(rig.server.faults().inject_fast_forward("ff"), 1);
    rig.log.wait_count("on_fast_forward:ff", 1);
    // The subscription goes on.
    rig.publish("ff", &json!(1));
    assert_eq!(sub.wait_messages(1), ["1"]);
    assert_eq!(sub.count("on_enter_subscribed"), 1);
    assert_eq!(rig.connection_count(), 1);
}

// ---------------------------------------------------------------------------------------
// Internal errors (internal_error.py, unexpected.py): what reconnects, what is ignored
// ---------------------------------------------------------------------------------------

#[test]
fn protocol_errors_reconnect() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Simple, SubscribeOptions::default());
    let cases = [
        "this is not JSON",
        r#"{"action":"rtm/subscription/data"}"#,
        r#"{"body":{"subscription_id":"chan","messages":[]}}"#,
        r#"{"action":"rtm/publish/ok","body":{"position":"1:1"}}"#,
        r#"{"action":"/error","body":{"error":"bad","reason":"injected"}}"#,
    ];
    for (i, raw) in cases.iter().enumerate() {
        let mark = rig.log.len();
        assert_eq!(rig.server.faults().send_raw(raw), 1);
        rig.log.wait_since(mark, "on_enter_connected");
        let log = rig.log.since(mark);
        assert!(log[0].starts_with("on_internal_error:"), "{raw}: {log:?}");
        let states: Vec<&String> = log.iter().filter(|e| !e.contains(':')).collect();
        assert_eq!(states, RECONNECT, "{raw}");
        // The subscription is back and the new connection is proven stable.
        sub.wait_count("on_enter_subscribed", i + 2);
        rig.publish("chan", &json!(i));
        assert_eq!(rig.connection_count(), i + 2);
    }
    assert_eq!(sub.wait_messages(cases.len()).len(), cases.len());
}

#[test]
fn unexpected_unsolicited_pdus_do_not_reconnect() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    let cases = [
        r#"{"action":"rtm/new_thing","body":{"x":1}}"#,
        r#"{"action":"rtm/subscription/info","body":{"subscription_id":"chan","info":"something_else","reason":"x"}}"#,
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"unknown","position":"1:1","messages":[666]}}"#,
        r#"{"action":"rtm/subscription/error","body":{"subscription_id":"unknown","error":"out_of_sync","reason":"x"}}"#,
        r#"{"action":"rtm/publish/ok","id":4242,"body":{"position":"1:1"}}"#,
    ];
    for raw in cases {
        assert_eq!(rig.server.faults().send_raw(raw), 1);
    }
    // Frames arrive in order: once this reply is in, all of the above were handled.
    rig.publish("chan", &json!("after"));
    assert_eq!(sub.wait_messages(1), [r#""after""#]);
    assert_eq!(
        rig.log.count("on_leave_connected"),
        0,
        "{:?}",
        rig.log.all()
    );
    assert_eq!(rig.connection_count(), 1);
    assert_eq!(sub.count("on_enter_subscribed"), 1);
}

/// A data PDU without `position` is delivered and reported; the client stays (the
/// reference SDK's client stops).
#[test]
fn data_without_position_does_not_stop_the_client() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    rig.server.faults().send_raw(
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"chan","messages":["np"]}}"#,
    );
    assert_eq!(sub.wait_messages(1), [r#""np""#]);
    rig.publish("chan", &json!(2));
    assert_eq!(sub.wait_messages(2), [r#""np""#, "2"]);
    assert!(rig.client.is_connected());
    assert_eq!(rig.log.count("on_leave_connected"), 0);
}

// ---------------------------------------------------------------------------------------
// Unsubscribe (unsubscribe.py, unsubscribe_error.py)
// ---------------------------------------------------------------------------------------

#[test]
fn unsubscribe_completes_with_on_deleted() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    rig.publish("chan", &json!(1));
    sub.wait_messages(1);
    let mark = sub.len();
    rig.client.unsubscribe("chan").unwrap();
    sub.wait_count("on_deleted", 1);
    assert_eq!(
        sub.since(mark),
        [
            "on_leave_subscribed",
            "on_enter_unsubscribing",
            "on_leave_unsubscribing",
            "on_enter_unsubscribed",
            "on_deleted"
        ]
    );
    rig.publish("chan", &json!(2));
    rig.barrier();
    assert_eq!(sub.messages(), ["1"]);
    assert!(rig.server.connections()[0].subscriptions.is_empty());
}

/// The callback chain of unsubscribe.py: publish → subscribe → publish → receive →
/// unsubscribe → publish; only the middle message arrives.
#[test]
fn unsubscribe_from_data_callback() {
    struct Once {
        log: Arc<Log>,
        client: Client,
    }
    impl SubscriptionObserver for Once {
        fn on_subscription_data(&mut self, data: &SubscriptionData) {
            for m in data.messages() {
                self.log.push(format!("data:{m}"));
            }
            self.client.unsubscribe("chain").unwrap();
        }
        fn on_deleted(&mut self) {
            self.log.push("on_deleted");
            self.client.publish("chain", &json!("third"), None).unwrap();
            self.log.push("published third");
        }
    }
    let rig = Rig::connected();
    rig.publish("chain", &json!("first"));
    let log = Log::new();
    let once = Once {
        log: log.clone(),
        client: rig.client.clone(),
    };
    rig.client
        .subscribe("chain", Mode::Simple, once, SubscribeOptions::default())
        .unwrap();
    assert!(rig
        .server
        .wait_for_connections(WAIT, |c| first_subscribed(c, "chain")));
    rig.publish("chain", &json!("second"));
    log.wait_count("published third", 1);
    rig.publish("chain", &json!("fourth"));
    rig.barrier();
    assert_eq!(
        log.all(),
        [r#"data:"second""#, "on_deleted", "published third"]
    );
}

#[test]
fn unsubscribe_error_returns_to_subscribed() {
    let rig = Rig::connected();
    let sub = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    rig.server.faults().override_replies(
        "rtm/unsubscribe",
        ReplyOverride::Raw(
            r#"{"action":"rtm/unsubscribe/error","id":{id},"body":{"error":"nope","reason":"injected"}}"#
                .to_owned(),
        ),
        Some(1),
    );
    let mark = sub.len();
    rig.client.unsubscribe("chan").unwrap();
    sub.wait_count("on_enter_subscribed", 2);
    assert_eq!(
        sub.since(mark),
        [
            "on_leave_subscribed",
            "on_enter_unsubscribing",
            "on_leave_unsubscribing",
            "on_enter_subscribed"
        ]
    );
    // Data keeps flowing, and unsubscribing again works.
    rig.publish("chan", &json!(1));
    assert_eq!(sub.wait_messages(1), ["1"]);
    rig.client.unsubscribe("chan").unwrap();
    sub.wait_count("on_deleted", 1);
}

/// Unsubscribe while Subscribing waits for the subscribe reply, then unsubscribes.
#[test]
fn unsubscribe_while_subscribing() {
    let rig = Rig::connected();
    rig.server
        .faults()
        .delay_subscribe_ok(Some(Duration::from_millis(200)));
    let sub = Log::new();
    rig.client
        .subscribe(
            "slow",
            Mode::Simple,
            SubLog(sub.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    sub.wait_count("on_enter_subscribing", 1);
    rig.client.unsubscribe("slow").unwrap();
    sub.wait_count("on_deleted", 1);
    assert_eq!(
        sub.all(),
        [
            "on_created",
            "on_leave_unsubscribed",
            "on_enter_subscribing",
            "on_leave_subscribing",
            "on_enter_unsubscribing",
            "on_leave_unsubscribing",
            "on_enter_unsubscribed",
            "on_deleted"
        ]
    );
    let pdus = rig.received(0);
    assert_eq!(actions(&pdus), ["rtm/subscribe", "rtm/unsubscribe"]);
}

/// Unsubscribe then subscribe with a new observer (resubscribe.py): `on_deleted` for the
/// old one, `on_created` for the new one.
#[test]
fn observer_swap() {
    let rig = Rig::connected();
    let old = rig.subscribe("chan", Mode::Reliable, SubscribeOptions::default());
    rig.client.unsubscribe("chan").unwrap();
    let new = Log::new();
    rig.client
        .subscribe(
            "chan",
            Mode::Reliable,
            SubLog(new.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    new.wait_count("on_enter_subscribed", 1);
    assert_eq!(old.all().last().unwrap(), "on_deleted");
    assert_eq!(new.all()[0], "on_created");
    rig.publish("chan", &json!(1));
    assert_eq!(new.wait_messages(1), ["1"]);
    assert!(old.messages().is_empty());
}

// ---------------------------------------------------------------------------------------
// Key-value, message types, big messages (kv.py, message_types.py, two_clients.py)
// ---------------------------------------------------------------------------------------

#[test]
fn kv_sequences() {
    let rig = Rig::connected();
    let c = &rig.client;
    let write = |k: &str, v: Value| {
        let (cb, rx) = Response::channel();
        c.write(k, &v, Some(cb)).unwrap();
        assert_eq!(reply(&rx).action, "rtm/write/ok");
    };
    let delete = |k: &str| {
        let (cb, rx) = Response::channel();
        c.delete(k, Some(cb)).unwrap();
        assert_eq!(reply(&rx).action, "rtm/delete/ok");
    };
    let read = |k: &str| c.read_sync(k, WAIT).unwrap();
    // Missing key.
    assert_eq!(read("k0"), Value::Null);
    // write/read
    write("k1", json!("value"));
    assert_eq!(read("k1"), json!("value"));
    // write/write/read: last wins
    write("k2", json!(1));
    write("k2", json!({"two": 2}));
    assert_eq!(read("k2"), json!({"two": 2}));
    // delete/read
    delete("k3");
    assert_eq!(read("k3"), Value::Null);
    // write/delete/read
    write("k4", json!([1, 2]));
    delete("k4");
    assert_eq!(read("k4"), Value::Null);
    // write/delete/write/read
    write("k5", json!(1));
    delete("k5");
    write("k5", json!(2));
    assert_eq!(read("k5"), json!(2));
    // Without callbacks, requests still go out in order.
    c.write("k6", &json!("a"), None).unwrap();
    c.write("k6", &json!("b"), None).unwrap();
    assert_eq!(read("k6"), json!("b"));
    c.delete("k6", None).unwrap();
    assert_eq!(read("k6"), Value::Null);
}

#[test]
fn message_types_round_trip() {
    let rig = Rig::connected();
    let sub = rig.subscribe("types", Mode::Reliable, SubscribeOptions::default());
    let values = [
        Value::Null,
        json!(42),
        json!(-7),
        json!(3.25),
        json!(1e-7),
        json!("string"),
        json!(true),
        json!(false),
        json!([]),
        json!({}),
        json!(""),
        json!("Сообщение на русском"),
        json!("quotes \" and \\ and \n and \u{1F600}"),
        json!({"nested": {"list": [1, [2, [3, {"deep": null}]]], "s": "x"}}),
        json!([{"a": 1}, {"b": [true, false]}]),
        json!(18_446_744_073_709_551_615u64),
    ];
    for v in &values {
        rig.client.publish("types", v, None).unwrap();
    }
    let got: Vec<Value> = sub
        .wait_messages(values.len())
        .iter()
        .map(|m| serde_json::from_str(m).unwrap())
        .collect();
    assert_eq!(got, values);
}

#[test]
fn big_messages() {
    let rig = Rig::connected();
    let sub = rig.subscribe("big", Mode::Reliable, SubscribeOptions::default());
    let string = Value::String("x".repeat(60_000));
    let array = Value::Array((0..10_000).map(Value::from).collect());
    let dict: serde_json::Map<String, Value> =
        (0..5000).map(|i| (format!("k{i}"), json!(i))).collect();
    let dict = Value::Object(dict);
    let values = [string, array, dict];
    for v in &values {
        rig.publish("big", v);
    }
    let got: Vec<Value> = sub
        .wait_messages(values.len())
        .iter()
        .map(|m| serde_json::from_str(m).unwrap())
        .collect();
    assert_eq!(got, values);
    assert_eq!(rig.client.read_sync("big", WAIT).unwrap(), values[2]);
}

// ---------------------------------------------------------------------------------------
// Views and value changes (filter.py, two_clients.py)
// ---------------------------------------------------------------------------------------

#[test]
fn filter_view_delivers_projection() {
    let rig = Rig::connected();
    let sub = rig.subscribe(
        "view1",
        Mode::Reliable,
        SubscribeOptions {
            filter: Some("select test from chan".to_owned()),
            ..SubscribeOptions::default()
        },
    );
    rig.publish("chan", &json!({"test": 42, "other": "x"}));
    rig.publish("chan", &json!({"other": "y"}));
    assert_eq!(sub.wait_messages(2), [r#"{"test":42}"#, r#"{"test":null}"#]);
    assert!(sub.all().contains(&"subscription_id:view1".to_owned()));
    let pdus = rig.received(0);
    let s = &pdus[0];
    assert_eq!(s["body"]["subscription_id"], "view1");
    assert_eq!(s["body"]["filter"], "select test from chan");
    assert!(s["body"].get("channel").is_none());
}

#[test]
fn only_value_changes() {
    let rig = Rig::connected();
    let sub = rig.subscribe(
        "vc",
        Mode::Simple,
        SubscribeOptions {
            only_value_changes: true,
            ..SubscribeOptions::default()
        },
    );
    for v in [1, 1, 2, 2, 2, 1, 3, 3] {
        rig.publish("vc", &json!(v));
    }
    assert_eq!(sub.wait_messages(4), ["1", "2", "1", "3"]);
    // A change after them: anything the duplicates would have delivered comes first.
    rig.publish("vc", &json!(4));
    assert_eq!(sub.wait_messages(5), ["1", "2", "1", "3", "4"]);
}

/// SIMPLE uses a user position for the first subscribe only (the reference SDK re-sends
/// it on every reconnect, which can deliver messages twice).
#[test]
fn simple_position_only_on_first_subscribe() {
    let rig = Rig::connected();
    let position = rig.publish("sp", &json!("old"));
    let sub = rig.subscribe(
        "sp",
        Mode::Simple,
        SubscribeOptions {
            position: Some(position.clone()),
            ..SubscribeOptions::default()
        },
    );
    assert_eq!(sub.wait_messages(1), [r#""old""#]);
    rig.drop_and_reconnect();
    sub.wait_count("on_enter_subscribed", 2);
    rig.publish("sp", &json!("new"));
    assert_eq!(sub.wait_messages(2), [r#""old""#, r#""new""#]);
    assert_eq!(
        subscribes(&rig.received(0), "sp")[0]["body"]["position"],
        position.as_str()
    );
    assert!(subscribes(&rig.received(1), "sp")[0]["body"]
        .get("position")
        .is_none());
}

// ---------------------------------------------------------------------------------------
// Authentication (role_auth.py)
// ---------------------------------------------------------------------------------------

#[test]
fn auth_success_and_bad_secret() {
    let rig = Rig::connected();
    match rig
        .client
        .authenticate_sync(SUPERUSER_ROLE, "wrong secret", WAIT)
    {
        Err(Error::Auth(why)) => assert!(why.contains("Unauthenticated"), "{why}"),
        other => panic!("expected an auth failure, got {other:?}"),
    }
    match rig
        .client
        .authenticate_sync("nobody", SUPERUSER_SECRET, WAIT)
    {
        Err(Error::Auth(why)) => assert!(why.contains("Unauthenticated"), "{why}"),
        other => panic!("expected an auth failure, got {other:?}"),
    }
    assert!(rig.client.is_connected());
    rig.client
        .authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap();
    let channel = format!("{RESTRICTED_PREFIX}_x");
    rig.publish(&channel, &json!("allowed"));
}

#[test]
fn auth_before_start_is_queued() {
    let rig = Rig::new();
    let (tx, rx) = mpsc::channel();
    rig.client
        .authenticate(SUPERUSER_ROLE, SUPERUSER_SECRET, move |r| {
            let _ = tx.send(r);
        })
        .unwrap();
    // Requests after it run with its permissions.
    let channel = format!("{RESTRICTED_PREFIX}_y");
    let (cb, prx) = Response::channel();
    rig.client.publish(&channel, &json!(1), Some(cb)).unwrap();
    rig.settle();
    assert!(rx.try_recv().is_err(), "authenticated before start");
    rig.start();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), Ok(()));
    assert_eq!(reply(&prx).action, "rtm/publish/ok");
    assert_eq!(
        actions(&rig.received(0)),
        ["auth/handshake", "auth/authenticate", "rtm/publish"]
    );
}

/// A failing auth restore counts as a failed attempt and backs off; the client keeps
/// trying and gets back once auth works again.
#[test]
fn failing_auth_restore_backs_off() {
    let rig = Rig::connected();
    rig.client
        .authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap();
    rig.publish("x", &json!(0));
    let faults = rig.server.faults();
    faults.reject_auth(true);
    let mark = rig.log.len();
    faults.drop_connections();
    rig.server.wait_for_connections(WAIT, |c| c.len() >= 4);
    faults.clear();
    rig.log.wait_since(mark, "on_enter_connected");
    let log = rig.log.since(mark);
    // No Connected in between: the failed restores stay in Connecting.
    assert_eq!(
        log.iter().filter(|e| *e == "on_enter_connected").count(),
        1,
        "{log:?}"
    );
    assert!(log.iter().any(|e| e.starts_with("on_internal_error:")));
    let last = rig.connection_count() - 1;
    assert_eq!(
        rig.server.connections()[last].role.as_deref(),
        Some(SUPERUSER_ROLE)
    );
    let gaps = gaps(&rig.log, mark, "on_enter_connecting");
    assert!(gaps.len() >= 2, "{log:?}");
    assert_backoff(&gaps[..2], INTERVAL);
}

// ---------------------------------------------------------------------------------------
// Callbacks that panic, dead peers (unexpected.py, reconnect.py)
// ---------------------------------------------------------------------------------------

/// A panic in `on_subscription_data` stops the client cleanly; it can be started again and
/// the subscription (with its observer) comes back.
#[test]
fn panicking_data_callback_stops_the_client() {
    struct Panicky {
        log: Arc<Log>,
        panicked: bool,
    }
    impl SubscriptionObserver for Panicky {
        fn on_enter_subscribed(&mut self) {
            self.log.push("on_enter_subscribed");
        }
        fn on_subscription_data(&mut self, data: &SubscriptionData) {
            if !self.panicked {
                self.panicked = true;
                panic!("test: a panicking data callback");
            }
            for m in data.messages() {
                self.log.push(format!("data:{m}"));
            }
        }
    }
    let rig = Rig::connected();
    let sub = Log::new();
    let panicky = Panicky {
        log: sub.clone(),
        panicked: false,
    };
    rig.client
        .subscribe("p", Mode::Reliable, panicky, SubscribeOptions::default())
        .unwrap();
    sub.wait_count("on_enter_subscribed", 1);
    // No ack: the data may arrive (and stop the client) before the publish's reply.
    rig.client.publish("p", &json!("boom"), None).unwrap();
    rig.log.wait_count("on_enter_stopped", 1);
    assert!(!rig.client.is_connected());
    // The I/O thread is alive: calls work, a restart works.
    rig.start();
    sub.wait_count("on_enter_subscribed", 2);
    rig.publish("p", &json!("fine"));
    assert!(sub.wait_messages(1).contains(&r#""fine""#.to_owned()));
}

/// A panicking request callback stops the client too.
#[test]
fn panicking_request_callback_stops_the_client() {
    let rig = Rig::connected();
    rig.client
        .publish(
            "c",
            &json!(1),
            Some(Box::new(|_| panic!("test: a panicking request callback"))),
        )
        .unwrap();
    rig.log.wait_count("on_enter_stopped", 1);
    rig.start();
    rig.publish("c", &json!(2));
}

#[test]
fn dead_peer_detected_by_pings() {
    let rig = Rig::with(RtmServerConfig::default(), |o| {
        o.ping_interval = Duration::from_millis(100);
        o.dead_peer_timeout = Duration::from_millis(300);
    });
    rig.start();
    // Answered pings keep an idle connection up: seven pings (the client's own clock,
    // seen by the server) span more than twice the dead-peer timeout.
    assert!(
        rig.server
            .wait_for_connections(WAIT, |c| c.len() == 1 && c[0].pings >= 7),
        "the client never pinged 7 times: {:?}",
        rig.server.connections()
    );
    rig.settle();
    assert_eq!(rig.log.count("on_leave_connected"), 0);
    assert_eq!(rig.server.attempts().len(), 1);
    let faults = rig.server.faults();
    faults.answer_pings(false);
    let mark = rig.log.len();
    rig.log.wait_since(mark, "on_enter_connected");
    faults.clear();
    assert_eq!(rig.log.since(mark), RECONNECT);
    rig.received(1);
}

// ---------------------------------------------------------------------------------------
// Search (legacy)
// ---------------------------------------------------------------------------------------

#[test]
fn search_collects_channels() {
    let rig = Rig::connected();
    for ch in ["animals.cat", "animals.dog", "plants.fern"] {
        rig.publish(ch, &json!(1));
    }
    let (cb, rx) = Response::channel();
    rig.client.search("animals", cb).unwrap();
    let mut channels = Vec::new();
    loop {
        let r = reply(&rx);
        for c in r.json()["channels"].as_array().unwrap() {
            channels.push(c.as_str().unwrap().to_owned());
        }
        if r.action == "rtm/search/ok" {
            break;
        }
        assert_eq!(r.action, "rtm/search/data");
    }
    channels.sort();
    assert_eq!(channels, ["animals.cat", "animals.dog"]);
}

// ---------------------------------------------------------------------------------------
// Calls from callbacks (an observer may call the client, e.g. resubscribe when failed)
// ---------------------------------------------------------------------------------------

/// The recovery of subscribe_error.py done inside `on_enter_failed` itself: unsubscribe,
/// then subscribe again without the position and with a new observer.
#[test]
fn recovery_from_inside_on_enter_failed() {
    struct Recover {
        log: Arc<Log>,
        client: Client,
        fresh: Arc<Log>,
    }
    impl SubscriptionObserver for Recover {
        fn on_enter_failed(&mut self, reason: &str) {
            self.log.push(format!("on_enter_failed:{reason}"));
            self.client.unsubscribe("chan").unwrap();
            self.client
                .subscribe(
                    "chan",
                    Mode::Advanced,
                    SubLog(self.fresh.clone()),
                    SubscribeOptions::default(),
                )
                .unwrap();
            self.log.push("recovered");
        }
        fn on_leave_failed(&mut self) {
            self.log.push("on_leave_failed");
        }
        fn on_deleted(&mut self) {
            self.log.push("on_deleted");
        }
        fn on_created(&mut self) {
            self.log.push("on_created");
        }
    }
    let rig = Rig::connected();
    let log = Log::new();
    let fresh = Log::new();
    let recover = Recover {
        log: log.clone(),
        client: rig.client.clone(),
        fresh: fresh.clone(),
    };
    rig.client
        .subscribe("chan", Mode::Advanced, recover, bad_position())
        .unwrap();
    fresh.wait_count("on_enter_subscribed", 1);
    assert_eq!(
        log.all(),
        [
            "on_created",
            INVALID_POSITION,
            "recovered",
            "on_leave_failed",
            "on_deleted"
        ]
    );
    assert_eq!(
        fresh.all(),
        [
            "on_created",
            "on_leave_unsubscribed",
            "on_enter_subscribing",
            "on_leave_subscribing",
            "on_enter_subscribed"
        ]
    );
    rig.publish("chan", &json!("back"));
    assert_eq!(fresh.wait_messages(1), [r#""back""#]);
}

/// Fast observer swaps (resubscribe.py), all within one callback so that the first
/// unsubscribe is still in flight: unsubscribe, subscribe A, unsubscribe, subscribe B.
/// The old observer sees the unsubscribe through, A only `on_deleted`, B the new life.
#[test]
fn fast_observer_swaps_from_a_callback() {
    struct Swap {
        client: Client,
        a: Arc<Log>,
        b: Arc<Log>,
        done: bool,
    }
    impl SubscriptionObserver for Swap {
        fn on_subscription_data(&mut self, _: &SubscriptionData) {
            if self.done {
                return;
            }
            self.done = true;
            let c = &self.client;
            let opts = SubscribeOptions::default;
            c.unsubscribe("chan").unwrap();
            c.subscribe("chan", Mode::Simple, SubLog(self.a.clone()), opts())
                .unwrap();
            c.unsubscribe("chan").unwrap();
            c.subscribe("chan", Mode::Simple, SubLog(self.b.clone()), opts())
                .unwrap();
        }
    }
    let rig = Rig::connected();
    let old = rig.subscribe("chan", Mode::Simple, SubscribeOptions::default());
    let (a, b) = (Log::new(), Log::new());
    let swap = Swap {
        client: rig.client.clone(),
        a: a.clone(),
        b: b.clone(),
        done: false,
    };
    rig.client
        .subscribe("trigger", Mode::Simple, swap, SubscribeOptions::default())
        .unwrap();
    assert!(rig
        .server
        .wait_for_connections(WAIT, |c| first_subscribed(c, "trigger")));
    rig.publish("trigger", &json!("go"));
    b.wait_count("on_enter_subscribed", 1);
    assert_eq!(old.all().last().unwrap(), "on_deleted");
    assert_eq!(a.all(), ["on_deleted"]);
    assert_eq!(
        b.all(),
        [
            "on_created",
            "on_leave_unsubscribed",
            "on_enter_subscribing",
            "on_leave_subscribing",
            "on_enter_subscribed"
        ]
    );
    rig.publish("chan", &json!(1));
    assert_eq!(b.wait_messages(1), ["1"]);
    assert!(old.messages().is_empty());
}

/// Unsubscribe and subscribe again from a callback while disconnected: the deletion and
/// the creation are delivered to the right observers, in order.
#[test]
fn unsubscribe_subscribe_from_a_callback_while_stopped() {
    struct Cycle {
        client: Arc<OnceLock<Client>>,
        next: Arc<Log>,
    }
    impl ClientObserver for Cycle {
        fn on_enter_stopped(&mut self) {
            let client = self.client.get().unwrap();
            client.unsubscribe("chan").unwrap();
            client
                .subscribe(
                    "chan",
                    Mode::Reliable,
                    SubLog(self.next.clone()),
                    SubscribeOptions::default(),
                )
                .unwrap();
        }
    }
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let next = Log::new();
    let cell = Arc::new(OnceLock::new());
    let cycle = Cycle {
        client: cell.clone(),
        next: next.clone(),
    };
    let client = Client::with_observer(options(&server), Some(Box::new(cycle))).unwrap();
    assert!(cell.set(client.clone()).is_ok());
    let old = Log::new();
    client
        .subscribe(
            "chan",
            Mode::Reliable,
            SubLog(old.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    client.start().unwrap();
    old.wait_count("on_enter_subscribed", 1);
    client.stop().unwrap();
    next.wait_count("on_created", 1);
    assert_eq!(old.all().last().unwrap(), "on_deleted");
    assert_eq!(next.all(), ["on_created"]);
    client.start().unwrap();
    next.wait_count("on_enter_subscribed", 1);
    client.dispose().unwrap();
}

/// Dropping every handle without `dispose()` ends the client: the connection closes and
/// it does not reconnect (connection.py: garbage collection without stop).
#[test]
fn dropped_client_closes_its_connection() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let log = Log::new();
    let client =
        Client::with_observer(options(&server), Some(Box::new(ClientLog(log.clone())))).unwrap();
    let clone = client.clone();
    client.start().unwrap();
    log.wait_count("on_enter_connected", 1);
    drop(client);
    // A clone keeps it alive: a round trip still goes through.
    clone.publish_sync("alive", &json!(1), WAIT).unwrap();
    assert!(clone.is_connected());
    drop(clone);
    assert!(server.wait_for_connections(WAIT, |c| c.len() == 1 && c.iter().all(|c| !c.open)));
    log.wait_count("on_enter_disposed", 1);
    // The client is gone for good once its I/O thread dropped the observer (the log's
    // only other owner): no timer is left to reconnect.
    wait_until("the client to let go of its observer", || {
        Arc::strong_count(&log) == 1
    });
    assert_eq!(server.attempts().len(), 1);
}

/// Data that arrives while the subscription is still Subscribing is delivered, not
/// dropped (the reference SDK drops it silently).
#[test]
fn data_before_subscribe_ok_is_delivered() {
    let rig = Rig::connected();
    rig.server
        .faults()
        .delay_subscribe_ok(Some(Duration::from_millis(300)));
    let sub = Log::new();
    rig.client
        .subscribe(
            "early",
            Mode::Reliable,
            SubLog(sub.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    sub.wait_count("on_enter_subscribing", 1);
    rig.server.faults().send_raw(
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"early","position":"1:5","messages":["before ok"]}}"#,
    );
    assert_eq!(sub.wait_messages(1), [r#""before ok""#]);
    assert_eq!(sub.count("on_enter_subscribed"), 0);
    sub.wait_count("on_enter_subscribed", 1);
    assert_eq!(rig.log.count("on_leave_connected"), 0);
}

/// A subscribe error without reason or error code fails with "Unknown error".
#[test]
fn subscribe_error_without_reason() {
    let rig = Rig::connected();
    rig.server.faults().override_replies(
        "rtm/subscribe",
        ReplyOverride::Raw(r#"{"action":"rtm/subscribe/error","id":{id},"body":{}}"#.to_owned()),
        Some(1),
    );
    let sub = Log::new();
    rig.client
        .subscribe(
            "chan",
            Mode::Simple,
            SubLog(sub.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    sub.wait_count("on_enter_failed:Unknown error", 1);
    assert_eq!(rig.connection_count(), 1);
}

/// The client observer is settable at any time (the reference SDK's `client.observer =
/// …`): one set after start sees the states that follow, the old one sees no more, and
/// `None` silences the client; a swap made inside a callback applies from the next
/// state change.
#[test]
fn client_observer_set_at_any_time() {
    let rig = Rig::connected();
    let second = Log::new();
    rig.client
        .set_observer(Some(Box::new(ClientLog(second.clone()))))
        .unwrap();
    let first_before = rig.log.len();
    rig.client.stop().unwrap();
    second.wait_count("on_enter_stopped", 1);
    assert_eq!(
        second.all(),
        [
            "on_leave_connected",
            "on_enter_stopping",
            "on_leave_stopping",
            "on_enter_stopped"
        ]
    );
    assert_eq!(rig.log.len(), first_before, "{:?}", rig.log.all());

    // An observer that hands over to another from inside its own callback.
    struct HandOver {
        client: Client,
        next: Option<Box<dyn ClientObserver>>,
        log: Arc<Log>,
    }
    impl ClientObserver for HandOver {
        fn on_leave_stopped(&mut self) {
            self.log.push("handover: on_leave_stopped");
            let next = self.next.take();
            self.client.set_observer(next).unwrap();
        }
        fn on_enter_connecting(&mut self) {
            self.log.push("handover: on_enter_connecting");
        }
    }
    let third = Log::new();
    rig.client
        .set_observer(Some(Box::new(HandOver {
            client: rig.client.clone(),
            next: Some(Box::new(ClientLog(third.clone()))),
            log: second.clone(),
        })))
        .unwrap();
    rig.client.start().unwrap();
    third.wait_count("on_enter_connected", 1);
    // The callback's swap applied from the next state change: the transition it ran in
    // (leave Stopped, enter Connecting) stayed with the old observer.
    assert_eq!(
        second.all()[second.len() - 2..],
        [
            "handover: on_leave_stopped",
            "handover: on_enter_connecting"
        ]
    );
    assert_eq!(
        third.all()[..2],
        ["on_leave_connecting", "on_enter_connected"]
    );

    // `None`: nobody hears the rest.
    rig.client.set_observer(None).unwrap();
    let third_before = third.len();
    rig.client.stop().unwrap();
    assert_eq!(
        rig.client
            .wait_for_state(|s| s == benchlink_std::rtm::ClientState::Stopped, WAIT),
        benchlink_std::rtm::ClientState::Stopped
    );
    assert_eq!(third.len(), third_before, "{:?}", third.all());
}

/// Past the pipe's bytes (three requests in flight here) requests wait in the queue, and
/// past `max_queue_size` (one) the next is refused with `Full` at the call (the SDK
/// contract); `wait_for_room` waits until one is answered. A silent server answers
/// nothing, so nothing drains until it speaks again.
#[test]
fn full_at_the_bound_then_wait_for_room() {
    let rig = Rig::with(RtmServerConfig::default(), |o| {
        o.max_in_flight_bytes = 3 * IN_FLIGHT_REQUEST_BYTES;
        o.max_queue_size = 1;
    });
    rig.start();
    let faults = rig.server.faults();
    assert_eq!(
        faults.set_socket_fault(Some(benchlink_sandbox::rtm::SocketFault::Silent)),
        1
    );
    let (tx, rx) = std::sync::mpsc::channel();
    // Three in flight, the fourth waits in the queue.
    for n in 0..4 {
        let tx = tx.clone();
        rig.client
            .publish_json(
                "room",
                n.to_string(),
                Some(Box::new(move |r| {
                    let _ = tx.send(r.to_owned());
                })),
            )
            .unwrap();
    }
    let refused = rig.client.publish_json("room", "4", None);
    assert!(
        matches!(
            refused,
            Err(Error::Request(benchlink_core::rtm::RequestError::Full))
        ),
        "{refused:?}"
    );
    // Nothing can drain while the server is silent: the wait ends at its timeout.
    assert!(!rig.client.wait_for_room(Duration::from_millis(50)).unwrap());
    // The server speaks again: the replies free room, and the waiter sees it.
    let client = rig.client.clone();
    let waiter = std::thread::spawn(move || client.wait_for_room(WAIT));
    faults.set_socket_fault(None);
    assert!(waiter.join().unwrap().unwrap());
    rig.client.publish_json("room", "4", None).unwrap();
    for _ in 0..4 {
        rx.recv_timeout(WAIT).expect("each acked publish ends");
    }
}

/// A callback that sends its request's number and outcome to `tx`.
fn tell(tx: &mpsc::Sender<(usize, Response<'static>)>, i: usize) -> Callback {
    let tx = tx.clone();
    Box::new(move |r| {
        let _ = tx.send((i, r.to_owned()));
    })
}

/// Every one of `n` requests ends once, as `want(i)` says request `i` should.
fn each_ends_once(
    rx: &Receiver<(usize, Response<'static>)>,
    n: usize,
    want: impl Fn(usize, &Response<'static>) -> bool,
) {
    let mut seen = vec![false; n];
    for _ in 0..n {
        let (i, r) = rx.recv_timeout(WAIT).unwrap();
        assert!(want(i, &r), "request {i} ended with {r:?}");
        assert!(
            !std::mem::replace(&mut seen[i], true),
            "request {i} ended twice"
        );
    }
}

/// Across a delayed link, the default pipeline is not a count: 30,000 acknowledged
/// publishes (the reference SDK's count limit is 20,000) are on the wire at once, none
/// of them answered (the server holds its replies), none refused, none waiting in the
/// client; the connection's end then ends each once.
#[test]
fn more_than_twenty_thousand_publishes_in_flight_across_a_delayed_link() {
    const N: usize = 30_000;
    let rig = Rig::delayed(Duration::from_millis(20), |_| {});
    assert!(rig.relay.is_some());
    rig.start();
    rig.server
        .faults()
        .override_replies("rtm/publish", ReplyOverride::Silence, None);
    let (tx, rx) = mpsc::channel();
    for i in 0..N {
        rig.client
            .publish("far", &json!(i), Some(tell(&tx, i)))
            .unwrap();
    }
    assert!(
        rig.server
            .wait_for_connections(WAIT, |c| c.first().is_some_and(|c| c.received_count == N)),
        "the server never saw {N} publishes"
    );
    assert!(rx.try_recv().is_err(), "a held publish was answered");
    rig.server.faults().clear();
    rig.drop_and_reconnect();
    each_ends_once(&rx, N, |_, r| *r == Response::Disconnected);
}

/// The pipeline's byte limit, at the point `ClientOptions::max_in_flight_bytes`
/// documents, across a delayed link: with 25,000 requests' worth of bytes, exactly
/// 25,000 acknowledged publishes go on the wire (the server holds its replies), the next
/// `max_queue_size` (100) wait in the client's queue, and the one after is refused with
/// `Full`; a producer waiting for room (`wait_for_room`) is let go once the requests in
/// flight end (the connection drops), and the waiting ones then go out and are
/// acknowledged.
#[test]
fn the_in_flight_byte_limit_queues_then_refuses_then_waits() {
    const LIMIT: usize = 25_000;
    const QUEUED: usize = 100;
    let rig = Rig::delayed(Duration::from_millis(20), |o| {
        o.max_in_flight_bytes = LIMIT * IN_FLIGHT_REQUEST_BYTES;
        o.max_queue_size = QUEUED;
    });
    rig.start();
    rig.server
        .faults()
        .override_replies("rtm/publish", ReplyOverride::Silence, None);
    let (tx, rx) = mpsc::channel();
    for i in 0..LIMIT + QUEUED {
        rig.client
            .publish("far", &json!(i), Some(tell(&tx, i)))
            .unwrap();
    }
    match rig
        .client
        .publish("far", &json!("over"), Some(tell(&tx, 0)))
    {
        Err(Error::Request(RequestError::Full)) => {}
        other => panic!("expected Full, got {other:?}"),
    }
    assert!(
        rig.server.wait_for_connections(WAIT, |c| c
            .first()
            .is_some_and(|c| c.received_count == LIMIT)),
        "the server never saw {LIMIT} publishes"
    );
    // Nothing drains while the replies are held: the wait ends at its timeout, and no
    // publish past the limit went out meanwhile.
    assert!(!rig.client.wait_for_room(Duration::from_millis(50)).unwrap());
    assert_eq!(rig.server.connections()[0].received_count, LIMIT);
    let client = rig.client.clone();
    let waiter = std::thread::spawn(move || client.wait_for_room(WAIT));
    rig.server.faults().clear();
    rig.drop_and_reconnect();
    assert!(waiter.join().unwrap().unwrap());
    each_ends_once(&rx, LIMIT + QUEUED, |i, r| match r {
        Response::Disconnected => i < LIMIT,
        Response::Reply(reply) => i >= LIMIT && reply.is_ok(),
        _ => false,
    });
    rig.publish("far", &json!("after"));
}

/// The SDK contract: a completed unsubscribe is signalled by `on_leave_subscribed`. While
/// the server has not answered the unsubscribe (its reply held back here), the observer
/// still sees the subscription as subscribed; the end of the request (the connection's
/// end, here) brings the whole sequence in order.
#[test]
fn on_leave_subscribed_signals_the_unsubscribe_completed() {
    let rig = Rig::connected();
    let log = rig.subscribe("leaving", Mode::Simple, SubscribeOptions::default());
    let faults = rig.server.faults();
    faults.override_replies("rtm/unsubscribe", ReplyOverride::Silence, Some(1));
    let mark = log.len();
    rig.client.unsubscribe("leaving").unwrap();
    assert!(
        rig.server
            .wait_for_connections(WAIT, |c| first_received(c, "rtm/unsubscribe")),
        "the unsubscribe never reached the server"
    );
    // Everything the client reported so far has been delivered: still subscribed.
    rig.client.wait_for_state(|_| true, WAIT);
    assert!(log.since(mark).is_empty(), "{:?}", log.since(mark));
    // The connection ends: the unsubscribe is complete (nothing of it is left to resume).
    faults.drop_connections();
    log.wait_count("on_deleted", 1);
    assert_eq!(
        log.since(mark),
        [
            "on_leave_subscribed",
            "on_enter_unsubscribing",
            "on_leave_unsubscribing",
            "on_enter_unsubscribed",
            "on_deleted"
        ]
    );
}

/// `leave_subscribed_on_completion: false` keeps the reference SDK's order:
/// `on_leave_subscribed` as soon as the unsubscribe is sent, before any reply.
#[test]
fn reference_order_leaves_subscribed_when_the_unsubscribe_is_sent() {
    let rig = Rig::with(RtmServerConfig::default(), |o| {
        o.leave_subscribed_on_completion = false;
    });
    rig.start();
    let log = rig.subscribe("leaving", Mode::Simple, SubscribeOptions::default());
    rig.server
        .faults()
        .override_replies("rtm/unsubscribe", ReplyOverride::Silence, Some(1));
    let mark = log.len();
    rig.client.unsubscribe("leaving").unwrap();
    log.wait_count("on_enter_unsubscribing", 1);
    assert_eq!(
        log.since(mark),
        ["on_leave_subscribed", "on_enter_unsubscribing"]
    );
}

/// The reference SDK's `read(channel, args=None, callback=None)` and
/// `read_sync(channel, args=None, timeout)`: `args` are members of the request, and a
/// read without a callback is sent all the same.
#[test]
fn read_takes_args_and_an_optional_callback() {
    let rig = Rig::connected();
    rig.client.write("kv.args", &json!({"v": 1}), None).unwrap();
    let value = rig
        .client
        .read_sync_with("kv.args", Some(json!({"position": null, "extra": 7})), WAIT)
        .unwrap();
    assert_eq!(value, json!({"v": 1}));
    rig.client
        .read("kv.args", Some(json!({"extra": 8})), None)
        .unwrap();
    // Both reads reached the server with their members: a publish's round trip, sent
    // after the second read on the same connection, shows the server has it.
    rig.publish("kv.args.after", &json!(0));
    let reads: Vec<Value> = rig
        .received(0)
        .into_iter()
        .filter(|p| action(p) == "rtm/read")
        .collect();
    assert_eq!(reads.len(), 2, "{reads:?}");
    assert_eq!(reads[0]["body"]["extra"], 7);
    assert_eq!(reads[1]["body"]["extra"], 8);
}
