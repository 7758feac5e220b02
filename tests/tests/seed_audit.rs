//! The tests of the seed audit (`std-adapter/docs/seed-audit.md`): one for each row of
//! the audit table that no existing test checked. Each test's doc comment quotes the
//! statement of the messaging seed (the SDK contract the reference Python SDK 1.5.0
//! implements) that it checks, so that a failure points at the row whose promise broke.
//!
//! Every test has its own local RTM server on a free port and waits on events (channels,
//! `Client::wait_for_state`, `RtmServer::wait_for_connections`); `WAIT` is only a guard
//! against a hang, never a timing assertion.

use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use benchlink_sandbox::rtm::{
    ReplyOverride, RtmServer, RtmServerConfig, DEFAULT_APPKEY, RESTRICTED_PREFIX, SUPERUSER_ROLE,
    SUPERUSER_SECRET,
};
use benchlink_std::rtm::{
    make_client, Callback, Client, ClientObserver, ClientOptions, ClientState, Connection,
    ConnectionDelegate, Error, History, Mode, Reply, Response, SubscribeOptions, SubscriptionData,
    SubscriptionObserver,
};
use benchlink_tests::ConnectProxy;
use serde_json::{json, Value};

/// Hang guard of every wait for something that should happen.
const WAIT: Duration = Duration::from_secs(10);
/// The timeout of the `_sync` calls that are meant to time out (the server is told to
/// stay silent, so any value would do; a short one keeps the test quick).
const SHORT: Duration = Duration::from_millis(200);

fn server() -> RtmServer {
    RtmServer::start(RtmServerConfig::default()).unwrap()
}

/// A connection delegate that reports everything it hears, in order, as strings:
/// `closed`, `internal:<error>`, `data:<message JSON>`.
struct Events(Sender<String>);

impl ConnectionDelegate for Events {
    fn on_connection_closed(&mut self) {
        let _ = self.0.send("closed".into());
    }
    fn on_internal_error(&mut self, error: &str) {
        let _ = self.0.send(format!("internal:{error}"));
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        for m in data.messages() {
            let _ = self.0.send(format!("data:{m}"));
        }
    }
}

/// A subscription observer that reports `subscribed` and `data:<message JSON>`.
struct Forward(Sender<String>);

impl SubscriptionObserver for Forward {
    fn on_enter_subscribed(&mut self) {
        let _ = self.0.send("subscribed".into());
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        for m in data.messages() {
            let _ = self.0.send(format!("data:{m}"));
        }
    }
}

/// A client observer that reports each `on_enter_connected`.
struct Connected(Sender<()>);

impl ClientObserver for Connected {
    fn on_enter_connected(&mut self) {
        let _ = self.0.send(());
    }
}

/// A request callback that forwards its response to a channel.
fn callback() -> (Callback, Receiver<Response<'static>>) {
    let (tx, rx) = mpsc::channel();
    let cb: Callback = Box::new(move |r| {
        let _ = tx.send(r.to_owned());
    });
    (cb, rx)
}

fn reply(rx: &Receiver<Response<'static>>) -> Reply<'static> {
    match rx.recv_timeout(WAIT).unwrap() {
        Response::Reply(r) => r,
        other => panic!("expected a reply, got {other:?}"),
    }
}

fn next(rx: &Receiver<String>) -> String {
    rx.recv_timeout(WAIT).unwrap()
}

/// The next `n` messages [`Forward`] reported, skipping its `subscribed` (a replay may
/// come before or after the subscribe's reply).
fn data(rx: &Receiver<String>, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    while got.len() < n {
        let e = next(rx);
        if e != "subscribed" {
            got.push(e);
        }
    }
    got
}

/// The PDUs connection `n` (0-based, in accept order) received, parsed.
fn received(server: &RtmServer, n: usize) -> Vec<Value> {
    assert!(
        server.wait_for_connections(WAIT, |c| c.len() > n),
        "no connection #{n}"
    );
    server.connections()[n]
        .received
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect()
}

fn with_action<'a>(pdus: &'a [Value], action: &str) -> Vec<&'a Value> {
    pdus.iter().filter(|p| p["action"] == action).collect()
}

/// A started `Connection` to `server` whose delegate is [`Events`].
fn open_connection(server: &RtmServer) -> (Connection, Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let conn = Connection::new(
        &server.endpoint(),
        DEFAULT_APPKEY,
        Some(Box::new(Events(tx))),
        None,
    )
    .unwrap();
    conn.start().unwrap();
    (conn, rx)
}

// ---------------------------------------------------------------------------------------
// Connection
// ---------------------------------------------------------------------------------------

/// Seed, Connection's `delegate`: "It can also be set later as the attribute
/// `connection.delegate`." A connection made without a delegate gets one after it
/// opened, and a second replacement takes over from the first for everything after it.
#[test]
fn connection_delegate_can_be_set_after_construction() {
    let server = server();
    let conn = Connection::new(&server.endpoint(), DEFAULT_APPKEY, None, None).unwrap();
    conn.start().unwrap();
    let (tx, rx) = mpsc::channel();
    conn.set_delegate(Some(Box::new(Events(tx))));
    conn.subscribe_sync("later", SubscribeOptions::default(), WAIT)
        .unwrap();
    conn.publish_sync("later", &"first", WAIT).unwrap();
    assert_eq!(next(&rx), r#"data:"first""#);
    let (tx2, rx2) = mpsc::channel();
    conn.set_delegate(Some(Box::new(Events(tx2))));
    conn.publish_sync("later", &"second", WAIT).unwrap();
    assert_eq!(next(&rx2), r#"data:"second""#);
    conn.stop().unwrap();
    assert_eq!(next(&rx2), "closed");
    // Everything after the replacement went to the new delegate (the close was the last
    // event, so the old one would have had its share by now).
    assert!(rx.try_recv().is_err(), "the old delegate heard more");
}

/// Seed, Connection's `https_proxy`: "(host, port) tuple, optional." The connection goes
/// through the proxy's `CONNECT` to the server, and works.
#[test]
fn connection_through_an_https_proxy() {
    let server = server();
    let proxy = ConnectProxy::start();
    let conn = Connection::new(
        &server.endpoint(),
        DEFAULT_APPKEY,
        None,
        Some(("127.0.0.1".to_owned(), proxy.addr().port())),
    )
    .unwrap();
    conn.start().unwrap();
    let position = conn.publish_sync("proxied", &1, WAIT).unwrap();
    assert!(position.contains(':'), "{position}");
    assert_eq!(proxy.targets(), [server.addr().to_string()]);
    conn.stop().unwrap();
}

/// Seed, Connection operations: `publish` "Without a callback, completion is not
/// acknowledged. With a callback, the callback receives the response PDU"; `read`
/// "`args` is an object whose key-value pairs are added to the request PDU. The callback
/// receives the response PDU"; `read_sync` "Returns the JSON value"; `write` "The
/// callback receives the response PDU"; `delete` "No response PDU is sent when no
/// callback is given". On the wire: a request without a callback carries no `id`, so the
/// server has nothing to answer it with.
#[test]
fn connection_requests_answer_callbacks_and_go_unacknowledged_without() {
    let server = server();
    let (conn, _rx) = open_connection(&server);
    let (cb, rx) = callback();
    conn.publish("kv", &json!({"n": 1}), Some(cb)).unwrap();
    let published = reply(&rx);
    assert_eq!(published.action, "rtm/publish/ok");
    assert!(published.field("position").is_some(), "{published:?}");
    conn.publish("kv", &json!({"n": 2}), None).unwrap();

    let (cb, rx) = callback();
    conn.write("kv", &json!({"v": 3}), Some(cb)).unwrap();
    assert_eq!(reply(&rx).action, "rtm/write/ok");
    let (cb, rx) = callback();
    conn.read("kv", Some(json!({"audit": 9})), Some(cb))
        .unwrap();
    let read = reply(&rx);
    assert_eq!(read.action, "rtm/read/ok");
    assert_eq!(read.json()["message"], json!({"v": 3}));
    assert_eq!(
        conn.read_sync_with("kv", Some(json!({"audit": 10})), WAIT)
            .unwrap(),
        json!({"v": 3})
    );

    conn.delete("kv", None).unwrap();
    let (cb, rx) = callback();
    conn.delete("kv", Some(cb)).unwrap();
    assert_eq!(reply(&rx).action, "rtm/delete/ok");
    assert_eq!(conn.read_sync("kv", WAIT).unwrap(), Value::Null);

    // Every request above was received before the last read's reply was sent.
    let pdus = received(&server, 0);
    let publishes = with_action(&pdus, "rtm/publish");
    assert_eq!(publishes.len(), 2, "{pdus:?}");
    assert!(publishes[0].get("id").is_some(), "{:?}", publishes[0]);
    assert!(publishes[1].get("id").is_none(), "{:?}", publishes[1]);
    let deletes = with_action(&pdus, "rtm/delete");
    assert_eq!(deletes.len(), 2, "{pdus:?}");
    assert!(deletes[0].get("id").is_none(), "{:?}", deletes[0]);
    assert!(deletes[1].get("id").is_some(), "{:?}", deletes[1]);
    let reads = with_action(&pdus, "rtm/read");
    assert_eq!(reads[0]["body"]["audit"], 9);
    assert_eq!(reads[1]["body"]["audit"], 10);
    conn.stop().unwrap();
}

/// Seed, Errors: "A `_sync` operation (publish_sync, read_sync, subscribe_sync,
/// unsubscribe_sync) does not complete in its timeout: RuntimeError is raised" — here on
/// a `Connection`, each against a server told to stay silent to that one request. The
/// connection is still usable afterwards.
#[test]
fn connection_sync_calls_fail_with_timeout() {
    let server = server();
    let (conn, _rx) = open_connection(&server);
    let faults = server.faults();
    conn.subscribe_sync("kept", SubscribeOptions::default(), WAIT)
        .unwrap();
    for action in [
        "rtm/publish",
        "rtm/read",
        "rtm/subscribe",
        "rtm/unsubscribe",
    ] {
        faults.override_replies(action, ReplyOverride::Silence, Some(1));
    }
    let timed_out = |what: &str, r: Result<(), Error>| {
        assert!(matches!(r, Err(Error::Timeout)), "{what}: {r:?}");
    };
    timed_out("publish_sync", conn.publish_sync("c", &1, SHORT).map(drop));
    timed_out("read_sync", conn.read_sync("c", SHORT).map(drop));
    timed_out(
        "subscribe_sync",
        conn.subscribe_sync("silent", SubscribeOptions::default(), SHORT),
    );
    timed_out("unsubscribe_sync", conn.unsubscribe_sync("kept", SHORT));
    // The overrides are used up: the same calls succeed.
    assert!(conn.publish_sync("c", &2, WAIT).is_ok());
    // A read gives the channel's last message: the publish the silence swallowed was
    // not carried out.
    assert_eq!(conn.read_sync("c", WAIT).unwrap(), json!(2));
    conn.stop().unwrap();
}

/// A started `Connection` subscribed to `c`, whose unsubscribe (with a callback) went
/// out and which the server is told never to answer: the connection, its delegate's
/// events and the callback's responses.
fn unsubscribing_unanswered(
    server: &RtmServer,
) -> (Connection, Receiver<String>, Receiver<Response<'static>>) {
    let (conn, rx) = open_connection(server);
    conn.subscribe_sync("c", SubscribeOptions::default(), WAIT)
        .unwrap();
    server
        .faults()
        .override_replies("rtm/unsubscribe", ReplyOverride::Silence, Some(1));
    let (cb, done) = callback();
    conn.unsubscribe("c", Some(cb)).unwrap();
    (conn, rx, done)
}

/// Seed, Connection `unsubscribe`: "Messages stop arriving for the channel only after the
/// service completes the unsubscribe." While the server has not carried the unsubscribe
/// out (it is told to ignore it), messages still arrive and the callback has not run;
/// after a completed one on a new connection, they stop.
#[test]
fn connection_messages_stop_only_after_the_unsubscribe_completes() {
    let server = server();
    let (conn, rx, done) = unsubscribing_unanswered(&server);
    conn.publish_sync("c", &"still", WAIT).unwrap();
    assert_eq!(next(&rx), r#"data:"still""#);
    assert!(done.try_recv().is_err(), "completed without a reply");
    conn.stop().unwrap();
    assert_eq!(next(&rx), "closed");

    conn.start().unwrap();
    conn.subscribe_sync("c", SubscribeOptions::default(), WAIT)
        .unwrap();
    conn.subscribe_sync("marker", SubscribeOptions::default(), WAIT)
        .unwrap();
    conn.publish_sync("c", &"before", WAIT).unwrap();
    assert_eq!(next(&rx), r#"data:"before""#);
    conn.unsubscribe_sync("c", WAIT).unwrap();
    conn.publish_sync("c", &"after", WAIT).unwrap();
    conn.publish_sync("marker", &"marker", WAIT).unwrap();
    // Messages arrive in order: the marker, published later, comes with nothing before.
    assert_eq!(next(&rx), r#"data:"marker""#);
    conn.stop().unwrap();
}

/// Seed, Connection `unsubscribe`: "Messages stop arriving for the channel only after
/// the service completes the unsubscribe", and Connection `publish` etc.: "the callback
/// receives the response PDU". An unsubscribe the server never answered, cut short by
/// the connection's end, should end like every other request in flight then
/// (`Response::Disconnected`, benchlink's rule that callbacks end exactly once; the
/// reference SDK never calls it), never with a reply the server did not send (the audit
/// found a made-up `rtm/unsubscribe/ok` there).
#[test]
fn connection_unsubscribe_cut_by_the_connection_end_is_not_reported_as_confirmed() {
    let server = server();
    let (conn, rx, done) = unsubscribing_unanswered(&server);
    assert!(server.wait_for_connections(WAIT, |c| c
        .first()
        .is_some_and(|c| c.received.iter().any(|p| p.contains("rtm/unsubscribe")))));
    conn.stop().unwrap();
    assert_eq!(next(&rx), "closed");
    assert_eq!(done.recv_timeout(WAIT).unwrap(), Response::Disconnected);
    assert!(done.try_recv().is_err(), "one response per callback");
}

/// Seed, Connection `authenticate(auth_delegate, callback)` and Authentication 4.3: "The
/// callback receives the result. A successful result is an instance of the class `Done`
/// … Any other result object is a failure." Here `Ok(())` and `Err(reason)`; the
/// session then has the role's permissions.
#[test]
fn connection_authenticate_gives_done_or_a_failure() {
    let server = server();
    let (conn, _rx) = open_connection(&server);
    let restricted = format!("{RESTRICTED_PREFIX}_conn");
    match conn.publish_sync(&restricted, &0, WAIT) {
        Err(Error::Reply(r)) => assert_eq!(r.action, "rtm/publish/error"),
        other => panic!("expected authorization_denied, got {other:?}"),
    }
    let (tx, rx) = mpsc::channel();
    let auth = |tx: &Sender<Result<(), String>>| {
        let tx = tx.clone();
        move |r| {
            let _ = tx.send(r);
        }
    };
    conn.authenticate(SUPERUSER_ROLE, "not the secret", auth(&tx))
        .unwrap();
    let failed = rx.recv_timeout(WAIT).unwrap();
    assert!(failed.is_err(), "{failed:?}");
    conn.authenticate(SUPERUSER_ROLE, SUPERUSER_SECRET, auth(&tx))
        .unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), Ok(()));
    conn.publish_sync(&restricted, &1, WAIT).unwrap();
    assert_eq!(
        server.connections()[0].role.as_deref(),
        Some(SUPERUSER_ROLE)
    );
    conn.stop().unwrap();
}

/// Seed, Connection delegate: "The delegate can also implement `on_connection_closed()`
/// and `on_internal_error(error)`." A frame that is not a PDU is an internal error; the
/// connection ends (a `Connection` does not reconnect) and says so, in that order.
#[test]
fn connection_delegate_hears_internal_errors() {
    let server = server();
    let (conn, rx) = open_connection(&server);
    assert!(server.wait_for_connections(WAIT, |c| c.len() == 1 && c[0].open));
    assert_eq!(server.faults().send_raw("this is not JSON"), 1);
    let first = next(&rx);
    assert!(first.starts_with("internal:"), "{first}");
    assert_eq!(next(&rx), "closed");
    assert!(conn.publish_sync("c", &1, WAIT).is_err(), "finished");
}

// ---------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------

/// Seed, Client `stop`: "Publish and subscribe calls made while stopped are queued and
/// sent when the client reconnects"; and `last_connecting_error`: "None when there was
/// none". Calls made after a `stop()` of a connected client wait, unanswered, and go out
/// on the next connection.
#[test]
fn calls_made_while_stopped_go_out_on_the_next_start() {
    let server = server();
    let client = Client::new(ClientOptions::new(server.endpoint(), DEFAULT_APPKEY)).unwrap();
    client.start().unwrap();
    let connected = |s| s == ClientState::Connected;
    assert_eq!(
        client.wait_for_state(connected, WAIT),
        ClientState::Connected
    );
    assert!(client.last_connecting_error().is_none());
    client.stop().unwrap();
    let stopped = |s| s == ClientState::Stopped;
    assert_eq!(client.wait_for_state(stopped, WAIT), ClientState::Stopped);

    let (cb, acked) = callback();
    client
        .publish("stopped.pub", &json!("queued"), Some(cb))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    client
        .subscribe(
            "stopped.sub",
            Mode::Simple,
            Forward(tx),
            SubscribeOptions::default(),
        )
        .unwrap();
    // Every event those calls caused so far was delivered: no reply, no subscription.
    client.wait_for_state(|_| true, WAIT);
    assert!(acked.try_recv().is_err(), "answered while stopped");
    assert!(rx.try_recv().is_err(), "subscribed while stopped");
    assert_eq!(server.connections().len(), 1);

    client.start().unwrap();
    assert_eq!(reply(&acked).action, "rtm/publish/ok");
    assert_eq!(next(&rx), "subscribed");
    client.publish_sync("stopped.sub", &"live", WAIT).unwrap();
    assert_eq!(next(&rx), r#"data:"live""#);
    let pdus = received(&server, 1);
    assert!(pdus
        .iter()
        .any(|p| p["action"] == "rtm/publish" && p["body"]["message"] == "queued"));
    assert!(pdus
        .iter()
        .any(|p| p["action"] == "rtm/subscribe" && p["body"]["channel"] == "stopped.sub"));
    client.dispose().unwrap();
}

/// Seed, Authentication 5: "`restore_auth_on_reconnect` … controls automatic
/// re-authentication after a reconnect. Passing False disables it." With false, the
/// connection after a drop has no role and the restricted channel is refused.
#[test]
fn restore_auth_on_reconnect_false_leaves_the_new_connection_unauthenticated() {
    let server = server();
    let mut options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    options.restore_auth_on_reconnect = false;
    options.reconnect_interval = Duration::from_millis(50);
    let (tx, connected) = mpsc::channel();
    let client = Client::with_observer(options, Some(Box::new(Connected(tx)))).unwrap();
    client.start().unwrap();
    connected.recv_timeout(WAIT).unwrap();
    client
        .authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap();
    let restricted = format!("{RESTRICTED_PREFIX}_no_restore");
    client.publish_sync(&restricted, &1, WAIT).unwrap();
    assert!(server.wait_for_connections(WAIT, |c| c.len() == 1 && c[0].open));
    assert_eq!(server.faults().drop_connections(), 1);
    connected.recv_timeout(WAIT).unwrap();
    assert!(server.wait_for_connections(WAIT, |c| c.len() == 2 && c[1].open));
    match client.publish_sync(&restricted, &2, WAIT) {
        Err(Error::Reply(r)) => {
            assert_eq!(r.action, "rtm/publish/error");
            assert_eq!(r.field("error").as_deref(), Some("authorization_denied"));
        }
        other => panic!("expected authorization_denied, got {other:?}"),
    }
    assert_eq!(server.connections()[1].role, None);
    let second = received(&server, 1);
    assert!(
        with_action(&second, "auth/handshake").is_empty(),
        "{second:?}"
    );
    client.dispose().unwrap();
}

/// Seed, Position: "value returned by `publish_sync`. It identifies the message stream
/// position of the published message. It can be passed in the subscribe `args` as the key
/// `position`"; and subscribe's `args`: "an object of extra key-value pairs for the
/// request PDU" (`SubscribeOptions::extra`). A subscription started at the first
/// message's position gets it and the one after it, then live messages.
#[test]
fn position_from_publish_sync_starts_a_subscription_there() {
    let server = server();
    let client = Client::new(ClientOptions::new(server.endpoint(), DEFAULT_APPKEY)).unwrap();
    client.start().unwrap();
    let first = client.publish_sync("positions", &"first", WAIT).unwrap();
    client.publish_sync("positions", &"second", WAIT).unwrap();
    let (tx, rx) = mpsc::channel();
    let options = SubscribeOptions {
        position: Some(first.clone()),
        extra: Some(json!({"audit": "extra member"})),
        ..SubscribeOptions::default()
    };
    client
        .subscribe("positions", Mode::Simple, Forward(tx), options)
        .unwrap();
    assert_eq!(data(&rx, 2), [r#"data:"first""#, r#"data:"second""#]);
    client.publish_sync("positions", &"third", WAIT).unwrap();
    assert_eq!(data(&rx, 1), [r#"data:"third""#]);
    let pdus = received(&server, 0);
    let subscribe = with_action(&pdus, "rtm/subscribe");
    assert_eq!(subscribe[0]["body"]["position"], first.as_str());
    assert_eq!(subscribe[0]["body"]["audit"], "extra member");
    client.dispose().unwrap();
}

/// Seed, subscribe `args` (the request's extra members) with history: `History::Count(n)`
/// replays the last n messages before live ones, `History::Age(s)` those of the last s
/// seconds, as the protocol's `history` member `{"count": n}` / `{"age": s}`.
#[test]
fn history_replays_the_last_messages_before_live_ones() {
    let server = server();
    let client = Client::new(ClientOptions::new(server.endpoint(), DEFAULT_APPKEY)).unwrap();
    client.start().unwrap();
    for n in 1..=3 {
        client.publish_sync("history", &n, WAIT).unwrap();
    }
    let subscribe = |history| {
        let (tx, rx) = mpsc::channel();
        let options = SubscribeOptions {
            history: Some(history),
            ..SubscribeOptions::default()
        };
        client
            .subscribe("history", Mode::Simple, Forward(tx), options)
            .unwrap();
        rx
    };
    let counted = subscribe(History::Count(2));
    assert_eq!(data(&counted, 2), ["data:2", "data:3"]);
    client.unsubscribe("history").unwrap();
    // Unsubscribed on the server before the next subscribe (the server answers in order).
    client.publish_sync("history", &4, WAIT).unwrap();
    let aged = subscribe(History::Age(60));
    assert_eq!(data(&aged, 4), ["data:1", "data:2", "data:3", "data:4"]);
    client.publish_sync("history", &5, WAIT).unwrap();
    assert_eq!(data(&aged, 1), ["data:5"]);
    let pdus = received(&server, 0);
    let subscribes = with_action(&pdus, "rtm/subscribe");
    assert_eq!(subscribes[0]["body"]["history"], json!({"count": 2}));
    assert_eq!(subscribes[1]["body"]["history"], json!({"age": 60}));
    client.dispose().unwrap();
}

/// Seed, Client `read`: "`args` may contain the key `filter` with an fSQL string. The
/// callback receives the response PDU." The filter goes out as a member of the read.
#[test]
fn read_args_carry_a_filter() {
    let server = server();
    let client = Client::new(ClientOptions::new(server.endpoint(), DEFAULT_APPKEY)).unwrap();
    client.start().unwrap();
    client.write("filtered", &json!({"a": 1}), None).unwrap();
    let (cb, rx) = callback();
    let filter = "select * from filtered";
    client
        .read("filtered", Some(json!({ "filter": filter })), Some(cb))
        .unwrap();
    let read = reply(&rx);
    assert_eq!(read.action, "rtm/read/ok");
    let pdus = received(&server, 0);
    let reads = with_action(&pdus, "rtm/read");
    assert_eq!(reads[0]["body"]["filter"], filter);
    assert_eq!(reads[0]["body"]["channel"], "filtered");
    client.dispose().unwrap();
}

/// Seed, make_client 4: "It stops and closes the connection when the statement ends,
/// normally or through an error." A body that panics, and one that returns an error: the
/// panic or the error reaches the caller and the connection is closed either way.
#[test]
fn make_client_closes_the_connection_when_the_body_fails() {
    let server = server();
    let options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        make_client(options.clone(), None, |c| {
            c.publish_sync("mc", &1, WAIT).unwrap();
            panic!("the body failed");
        })
    }));
    assert!(panicked.is_err(), "the panic reaches the caller");
    assert!(
        server.wait_for_connections(WAIT, |c| c.len() == 1 && !c[0].open),
        "the connection stayed open after a panic: {:?}",
        server.connections()
    );
    let failed = make_client(options, None, |c| -> Result<(), Error> {
        c.publish_sync("mc", &2, WAIT)?;
        Err(Error::Timeout)
    });
    assert!(matches!(failed, Ok(Err(Error::Timeout))), "{failed:?}");
    assert!(
        server.wait_for_connections(WAIT, |c| c.len() == 2 && c.iter().all(|c| !c.open)),
        "the connection stayed open after an error: {:?}",
        server.connections()
    );
}

// ---------------------------------------------------------------------------------------
// Logging
// ---------------------------------------------------------------------------------------

/// Set in the environment of this test binary when it runs as the child of
/// [`debug_variable_turns_verbose_logging_on_and_its_absence_off`].
const LOGGING_CHILD: &str = "SEED_AUDIT_LOGGING_CHILD";

/// The child's part (the logger is per process): a client whose first connect fails,
/// which benchlink logs.
fn logging_child() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = ClientOptions {
        retry_first_connect: false,
        ..ClientOptions::new(format!("ws://127.0.0.1:{port}"), DEFAULT_APPKEY)
    };
    let client = Client::new(options).unwrap();
    client.start().unwrap();
    let stopped = |s| s == ClientState::Stopped;
    assert_eq!(client.wait_for_state(stopped, WAIT), ClientState::Stopped);
    assert!(client.last_connecting_error().is_some());
    client.dispose().unwrap();
}

/// This test binary run as [`logging_child`] with `env` (and neither debug variable
/// otherwise); returns its stderr.
fn run_logging_child(env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "debug_variable_turns_verbose_logging_on_and_its_absence_off",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(LOGGING_CHILD, "1")
    .env_remove("DEBUG_BENCHLINK_SDK")
    .env_remove("DEBUG_SATORI_SDK");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child did not run: {stdout}"
    );
    stderr
}

/// Seed, Logging: "Setting the environment variable `DEBUG_VENDOR_SDK` to the value
/// `debug` turns on verbose logging to standard error. Unsetting the variable turns it
/// off." The vendor's spelling (`DEBUG_SATORI_SDK`, so a ported program keeps its switch)
/// and benchlink's (`DEBUG_BENCHLINK_SDK`) both turn it on; without them, or with another
/// value, the same client writes nothing to stderr.
#[test]
fn debug_variable_turns_verbose_logging_on_and_its_absence_off() {
    if std::env::var_os(LOGGING_CHILD).is_some() {
        return logging_child();
    }
    for var in ["DEBUG_SATORI_SDK", "DEBUG_BENCHLINK_SDK"] {
        let on = run_logging_child(&[(var, "debug")]);
        assert!(on.contains("rtm: connect failed"), "{var}: {on}");
        assert!(
            on.contains("benchlink"),
            "{var}: the log names its source: {on}"
        );
    }
    let off = run_logging_child(&[]);
    assert!(!off.contains("rtm:"), "logged without the variable: {off}");
    let other = run_logging_child(&[("DEBUG_SATORI_SDK", "info")]);
    assert!(
        !other.contains("rtm:"),
        "logged with another value: {other}"
    );
}

/// Seed, Authentication 6: "Custom authentication is possible by creating a delegate
/// manually." A second method (`auth::AuthMethod`), against a server answering it (the
/// hub's replies to both auth requests set by the test): the client sends the method's
/// own handshake, answers the server's challenge with the method's credentials, reports
/// success, and replays the same exchange, with a fresh challenge, after a reconnect.
#[test]
fn a_custom_auth_delegate_runs_its_exchange_and_is_restored_on_reconnect() {
    use benchlink_std::rtm::auth::{AuthMethod, MAX_CREDENTIALS_LEN};
    use benchlink_std::rtm::pdu::Pdu;

    /// Credentials: the secret, a colon, and the server's `salt`.
    struct SaltedToken;
    impl AuthMethod for SaltedToken {
        const METHOD: &'static str = "salted_token";
        const IDENTITY: &'static str = "user";
        const CREDENTIALS: &'static str = "token";
        fn credentials(
            secret: &[u8],
            reply: &Pdu<'_>,
            out: &mut [u8; MAX_CREDENTIALS_LEN],
        ) -> Option<usize> {
            let salt = reply
                .body?
                .get("data")?
                .get("salt")?
                .as_text()?
                .as_plain()?;
            let token = [secret, b":", salt.as_bytes()].concat();
            out.get_mut(..token.len())?.copy_from_slice(&token);
            Some(token.len())
        }
    }

    let server = server();
    let faults = server.faults();
    let answer = |salt: &str| {
        faults.override_replies(
            "auth/handshake",
            ReplyOverride::Raw(format!(
                r#"{{"action":"auth/handshake/ok","id":{{id}},"body":{{"data":{{"salt":"{salt}"}}}}}}"#
            )),
            Some(1),
        );
        faults.override_replies(
            "auth/authenticate",
            ReplyOverride::Raw(r#"{"action":"auth/authenticate/ok","id":{id},"body":{}}"#.into()),
            Some(1),
        );
    };
    let mut options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    options.reconnect_interval = Duration::from_millis(50);
    let (tx, connected) = mpsc::channel();
    let client = Client::with_observer(options, Some(Box::new(Connected(tx)))).unwrap();
    client.start().unwrap();
    connected.recv_timeout(WAIT).unwrap();
    answer("NaCl");
    let (done_tx, done) = mpsc::channel();
    client
        .authenticate_with::<SaltedToken>("ann", "t0k3n", move |r| {
            let _ = done_tx.send(r);
        })
        .unwrap();
    assert_eq!(done.recv_timeout(WAIT).unwrap(), Ok(()));
    let auth_pdus = |n| {
        let pdus = received(&server, n);
        let of = |a| {
            with_action(&pdus, a)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        };
        (of("auth/handshake"), of("auth/authenticate"))
    };
    let (handshake, authenticate) = auth_pdus(0);
    assert_eq!(
        handshake[0]["body"],
        json!({"method": "salted_token", "data": {"user": "ann"}})
    );
    assert_eq!(
        authenticate[0]["body"],
        json!({"method": "salted_token", "credentials": {"token": "t0k3n:NaCl"}})
    );

    // A reconnect replays the exchange first, with the new challenge.
    answer("KCl");
    assert!(server.wait_for_connections(WAIT, |c| c.len() == 1 && c[0].open));
    assert_eq!(server.faults().drop_connections(), 1);
    connected.recv_timeout(WAIT).unwrap();
    let (handshake, authenticate) = auth_pdus(1);
    assert_eq!(handshake[0]["body"]["method"], "salted_token");
    assert_eq!(
        authenticate[0]["body"]["credentials"],
        json!({"token": "t0k3n:KCl"})
    );
    client.dispose().unwrap();
}
