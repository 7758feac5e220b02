//! Interop with the reference Python SDK (`satori-rtm-sdk` 1.5.0, the version whose
//! behaviour benchlink follows): the scripts in `tests/interop/` drive the SDK's public
//! API (`Client` and the low-level `Connection`), with cases taken from its own test
//! suite, against the local RTM server, next to `benchlink_std::rtm::Client`s on the
//! same server.
//!
//! The SDK lives in a venv made by `.ci/python-sdk`; `.ci/test` exports its python as
//! `BENCHLINK_PY_SDK`. To run these tests by hand:
//!
//! ```text
//! export BENCHLINK_PY_SDK="$(bash .ci/python-sdk)"
//! cargo test -p benchlink-tests --test interop_python
//! ```
//!
//! The Python side (the SDK's venv, deadlines, transcripts) is in `py_sdk`.

mod py_sdk;

use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use benchlink_sandbox::rtm::{
    RtmServer, RtmServerConfig, DEFAULT_APPKEY, RESTRICTED_PREFIX, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
use benchlink_std::rtm::{
    Client, ClientOptions, Error, Mode, Response, SubscribeOptions, SubscriptionData,
    SubscriptionObserver,
};
use py_sdk::{message_types, messages_of, python, Py};
use serde_json::{json, Value};

/// Any single wait on the Rust side.
const WAIT: Duration = Duration::from_secs(10);

/// What a Rust subscription observed.
#[derive(Debug)]
enum Got {
    Subscribed,
    Message(Value),
    Failed(String),
}

struct Sink(mpsc::Sender<Got>);

impl SubscriptionObserver for Sink {
    fn on_enter_subscribed(&mut self) {
        let _ = self.0.send(Got::Subscribed);
    }
    fn on_enter_failed(&mut self, reason: &str) {
        let _ = self.0.send(Got::Failed(reason.to_owned()));
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        for m in data.messages() {
            let v = serde_json::from_str(m)
                .unwrap_or_else(|e| Value::String(format!("unparsable message ({e}): {m}")));
            let _ = self.0.send(Got::Message(v));
        }
    }
}

struct RustSub {
    rx: Receiver<Got>,
    channel: String,
}

impl RustSub {
    /// Subscribes `client` (RELIABLE) and waits until the subscription is active.
    fn new(client: &Client, channel: &str) -> RustSub {
        let (tx, rx) = mpsc::channel();
        client
            .subscribe(
                channel,
                Mode::Reliable,
                Sink(tx),
                SubscribeOptions::default(),
            )
            .unwrap_or_else(|e| panic!("subscribing to {channel}: {e}"));
        let sub = RustSub {
            rx,
            channel: channel.to_owned(),
        };
        match sub.rx.recv_timeout(WAIT) {
            Ok(Got::Subscribed) => sub,
            other => panic!("Rust subscription to {channel}: expected subscribed, got {other:?}"),
        }
    }

    /// The next `n` messages, in order.
    fn take(&self, n: usize) -> Vec<Value> {
        let mut got = Vec::with_capacity(n);
        while got.len() < n {
            match self.rx.recv_timeout(WAIT) {
                Ok(Got::Message(v)) => got.push(v),
                Ok(Got::Failed(reason)) => panic!(
                    "Rust subscription to {} failed ({reason}) after {} of {n} messages",
                    self.channel,
                    got.len()
                ),
                Ok(other) => panic!(
                    "Rust subscription to {}: {other:?} after {} of {n} messages: {got:?}",
                    self.channel,
                    got.len()
                ),
                Err(_) => panic!(
                    "Rust subscription to {}: only {} of {n} messages arrived: {got:?}",
                    self.channel,
                    got.len()
                ),
            }
        }
        got
    }
}

fn rust_client(server: &RtmServer) -> Client {
    let client =
        Client::new(ClientOptions::new(server.endpoint(), DEFAULT_APPKEY)).expect("Rust client");
    client.start().expect("start");
    client
}

fn superuser_client(server: &RtmServer) -> Client {
    let client = rust_client(server);
    client
        .authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap_or_else(|e| panic!("Rust superuser auth: {e}"));
    client
}

/// `"<digits>:<digits>"` (positions are opaque strings, in practice
/// `<unix-seconds>:<counter>`); returns the counter.
fn counter(position: &Value) -> u64 {
    let text = position
        .as_str()
        .unwrap_or_else(|| panic!("position {position} is not a string"));
    let (epoch, n) = text
        .split_once(':')
        .unwrap_or_else(|| panic!("position {text} is not <epoch>:<n>"));
    assert!(epoch.parse::<u64>().is_ok(), "position {text}");
    n.parse()
        .unwrap_or_else(|_| panic!("position {text} is not <epoch>:<n>"))
}

fn assert_increasing(positions: &[Value]) {
    let counters: Vec<u64> = positions.iter().map(counter).collect();
    assert!(
        counters.windows(2).all(|w| w[0] < w[1]),
        "positions are not increasing: {positions:?}"
    );
}

/// Large payloads (as in the SDK's `two_clients.py`): 16- and 64-bit WebSocket lengths,
/// long strings, arrays and objects, the largest about 62 KB of JSON.
fn big_payloads() -> Vec<Value> {
    let mut v = Vec::new();
    for n in [600, 6000, 60000] {
        v.push(Value::String("ж".repeat(n / 2) + &"x".repeat(n - n / 2)));
    }
    for n in [100, 1000, 10000] {
        v.push(Value::Array((0..n).map(|i| json!(i)).collect()));
    }
    for n in [100, 1000, 5000] {
        v.push(Value::Object(
            (0..n).map(|i| (format!("k{i}"), json!(i))).collect(),
        ));
    }
    v
}

/// The PDUs that the connections opened after `before` (connection ids) sent, as raw
/// text: what the Python SDK put on the wire.
fn new_connections(server: &RtmServer, before: &[u64]) -> Vec<Vec<String>> {
    server
        .connections()
        .into_iter()
        .filter(|c| !before.contains(&c.id))
        .map(|c| c.received)
        .collect()
}

fn connection_ids(server: &RtmServer) -> Vec<u64> {
    server.connections().iter().map(|c| c.id).collect()
}

fn parse(pdu: &str) -> Value {
    serde_json::from_str(pdu).unwrap_or_else(|e| panic!("the server recorded non-JSON {pdu}: {e}"))
}

fn start_server() -> RtmServer {
    RtmServer::start(RtmServerConfig::default()).expect("RTM server")
}

#[test]
fn python_publishes_rust_receives_every_message_type() {
    let Some(python) = python() else { return };
    let server = start_server();
    let rust = rust_client(&server);
    let sub = RustSub::new(&rust, "py-to-rust");
    let sent = message_types();
    let before = connection_ids(&server);
    let events = Py::spawn(&python, "publish.py", &server, "py-to-rust", &[], &sent).finish();
    let acks: Vec<&Value> = events.iter().filter(|e| e["event"] == "ack").collect();
    assert_eq!(acks.len(), sent.len(), "{events:?}");
    for (i, ack) in acks.iter().enumerate() {
        assert_eq!(ack["index"], i, "{ack}");
        assert_eq!(ack["action"], "rtm/publish/ok", "{ack}");
    }
    assert_increasing(
        &acks
            .iter()
            .map(|a| a["position"].clone())
            .collect::<Vec<_>>(),
    );
    assert_eq!(sub.take(sent.len()), sent);

    // What the SDK sent: ids from 0 on each connection, hand-built publish bodies with
    // a space after `"message":`, non-ASCII as \u escapes — all accepted by the server.
    let wire = new_connections(&server, &before);
    assert_eq!(wire.len(), 1, "one Python connection: {wire:?}");
    assert_eq!(wire[0].len(), sent.len(), "{:?}", wire[0]);
    for (i, (raw, message)) in wire[0].iter().zip(&sent).enumerate() {
        assert!(raw.contains(r#","message": "#), "{raw}");
        assert!(raw.is_ascii(), "{raw}");
        let pdu = parse(raw);
        assert_eq!(pdu["action"], "rtm/publish", "{raw}");
        assert_eq!(pdu["id"], i, "{raw}");
        assert_eq!(pdu["body"]["channel"], "py-to-rust", "{raw}");
        assert_eq!(&pdu["body"]["message"], message, "{raw}");
    }
    rust.dispose().expect("dispose");
    server.shutdown();
}

#[test]
fn rust_publishes_python_receives_every_message_type() {
    let Some(python) = python() else { return };
    let server = start_server();
    let sent = message_types();
    let count = sent.len().to_string();
    let mut py = Py::spawn(
        &python,
        "subscribe.py",
        &server,
        "rust-to-py",
        &["--count", &count],
        &[],
    );
    py.expect("subscribed");
    let rust = rust_client(&server);
    let mut positions = Vec::new();
    for m in &sent {
        match rust.publish_sync("rust-to-py", m, WAIT) {
            Ok(p) => positions.push(Value::String(p)),
            Err(e) => py.fail(&format!("Rust publish of {m} failed: {e}")),
        }
    }
    assert_increasing(&positions);
    let events = py.finish();
    assert_eq!(messages_of(&events), sent);
    assert_eq!(events.last().map(|e| &e["event"]), Some(&json!("done")));
    rust.dispose().expect("dispose");
    server.shutdown();
}

#[test]
fn both_directions_at_once() {
    let Some(python) = python() else { return };
    const N: usize = 300;
    let server = start_server();
    let stream = |dir: &str| -> Vec<Value> {
        (0..N)
            .map(|i| json!({"dir": dir, "seq": i, "text": format!("сообщение №{i} \"q\""), "f": i as f64 + 0.25}))
            .chain(message_types())
            .collect()
    };
    let to_py = stream("rust→py");
    let to_rust = stream("py→rust");
    let count = to_py.len().to_string();
    let mut py_sub = Py::spawn(
        &python,
        "subscribe.py",
        &server,
        "duplex-a",
        &["--count", &count],
        &[],
    );
    py_sub.expect("subscribed");
    let rust = rust_client(&server);
    let sub = RustSub::new(&rust, "duplex-b");

    // The Python publisher and the Rust publisher run at the same time, each while the
    // other side's subscriber receives.
    let py_pub = Py::spawn(&python, "publish.py", &server, "duplex-b", &[], &to_rust);
    let publisher = rust.clone();
    let messages = to_py.clone();
    let rust_pub = thread::spawn(move || {
        let (tx, rx) = mpsc::channel();
        for m in &messages {
            let tx = tx.clone();
            publisher
                .publish(
                    "duplex-a",
                    m,
                    Some(Box::new(move |r| drop(tx.send(r.to_owned())))),
                )
                .expect("Rust publish");
        }
        (0..messages.len())
            .map(|_| rx.recv_timeout(WAIT).expect("a publish ack"))
            .filter(|r| !matches!(r, Response::Reply(reply) if reply.action == "rtm/publish/ok"))
            .collect::<Vec<_>>()
    });
    let received = sub.take(to_rust.len());
    let pub_events = py_pub.finish();
    let bad_acks = rust_pub.join().expect("Rust publisher thread");
    let sub_events = py_sub.finish();

    assert!(
        bad_acks.is_empty(),
        "Rust publishes not acked: {bad_acks:?}"
    );
    assert_eq!(
        pub_events.iter().filter(|e| e["event"] == "ack").count(),
        to_rust.len()
    );
    assert_eq!(received, to_rust, "Python → Rust");
    assert_eq!(messages_of(&sub_events), to_py, "Rust → Python");
    rust.dispose().expect("dispose");
    server.shutdown();
}

#[test]
fn authenticated_python_and_rust_share_a_restricted_channel() {
    let Some(python) = python() else { return };
    // The Python SDK's test secret and a recorded nonce: both SDKs must send HASH.
    const NONCE: &str = "MTI0Njg4NTAyMjYxMzgxMzgzMg==";
    const HASH: &str = "P6COJ5aXJvIRoJO1PaYREw==";
    let server = RtmServer::start(RtmServerConfig {
        fixed_nonce: Some(NONCE.to_owned()),
        ..RtmServerConfig::default()
    })
    .expect("RTM server");
    let channel = format!("{RESTRICTED_PREFIX}-interop");
    let kv = format!("{RESTRICTED_PREFIX}-interop-kv");

    let su = superuser_client(&server);
    let sub = RustSub::new(&su, &channel);

    // Unauthenticated, the restricted channel is denied (as in the SDK's role_auth.py).
    let anon = rust_client(&server);
    match anon.publish_sync(&channel, &"anonymous", WAIT) {
        Err(Error::Reply(reply)) => {
            assert_eq!(reply.action, "rtm/publish/error", "{reply:?}");
            assert_eq!(
                reply.field("error").as_deref(),
                Some("authorization_denied"),
                "{reply:?}"
            );
        }
        other => panic!("unauthenticated publish to {channel}: expected a denial, got {other:?}"),
    }

    let sent = message_types();
    let value = json!({"written by": "python", "значение": [1, 2.5, null]});
    let value_text = value.to_string();
    let before = connection_ids(&server);
    let events = Py::spawn(
        &python,
        "auth_kv.py",
        &server,
        &channel,
        &[
            "--role",
            SUPERUSER_ROLE,
            "--secret",
            SUPERUSER_SECRET,
            "--kv-channel",
            &kv,
            "--value",
            &value_text,
        ],
        &sent,
    )
    .finish();
    let event = |name: &str| {
        events
            .iter()
            .find(|e| e["event"] == name)
            .unwrap_or_else(|| panic!("no `{name}` event in {events:?}"))
    };
    event("authenticated");
    let wire = new_connections(&server, &before);
    assert_eq!(wire.len(), 1, "one Python connection: {wire:?}");
    let auth: Vec<Value> = wire[0].iter().take(2).map(|p| parse(p)).collect();
    assert_eq!(
        auth,
        [
            json!({"action": "auth/handshake", "id": 0,
                   "body": {"method": "role_secret", "data": {"role": "superuser"}}}),
            json!({"action": "auth/authenticate", "id": 1,
                   "body": {"method": "role_secret", "credentials": {"hash": HASH}}}),
        ],
        "the Python SDK's auth PDUs (role-secret test vector)"
    );
    let rust_hashes: Vec<Value> = server
        .connections()
        .iter()
        .filter(|c| before.contains(&c.id) && c.role.is_some())
        .flat_map(|c| c.received.iter().map(|p| parse(p)).collect::<Vec<_>>())
        .filter(|p| p["action"] == "auth/authenticate")
        .map(|p| p["body"]["credentials"]["hash"].clone())
        .collect();
    assert_eq!(
        rust_hashes,
        [json!(HASH)],
        "the Rust client's hash for the same nonce"
    );
    assert_eq!(event("write")["action"], "rtm/write/ok");
    assert_eq!(event("read")["action"], "rtm/read/ok");
    assert_eq!(
        event("read")["message"],
        value,
        "Python reads back its write"
    );

    assert_eq!(
        sub.take(sent.len()),
        sent,
        "Python (superuser) → Rust (superuser)"
    );
    assert_eq!(
        su.read_sync(&kv, WAIT).expect("Rust superuser read"),
        value,
        "Rust reads Python's write"
    );
    match anon.read_sync(&kv, WAIT) {
        Err(Error::Reply(reply)) => assert_eq!(
            reply.field("error").as_deref(),
            Some("authorization_denied"),
            "{reply:?}"
        ),
        other => panic!("unauthenticated read of {kv}: expected a denial, got {other:?}"),
    }

    // A wrong secret makes the SDK's make_client raise AuthError.
    let failed = Py::spawn(
        &python,
        "auth_kv.py",
        &server,
        &channel,
        &[
            "--role",
            SUPERUSER_ROLE,
            "--secret",
            "wrong-secret",
            "--kv-channel",
            &kv,
            "--value",
            "1",
        ],
        &[json!("never sent")],
    )
    .finish_failing();
    let error = failed
        .iter()
        .find(|e| e["event"] == "error")
        .unwrap_or_else(|| panic!("no error event: {failed:?}"));
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|e| e.contains("authentication failed") && e.contains("Unauthenticated")),
        "{error}"
    );
    assert!(
        failed.iter().all(|e| e["event"] != "authenticated"),
        "{failed:?}"
    );

    su.dispose().expect("dispose");
    anon.dispose().expect("dispose");
    server.shutdown();
}

#[test]
fn python_low_level_connection_sync_calls() {
    let Some(python) = python() else { return };
    let server = start_server();
    let rust = rust_client(&server);
    let from_rust = json!({"written by": "rust", "list": [1, "два", 3.0]});
    let (tx, rx) = mpsc::channel();
    rust.write(
        "conn-from-rust",
        &from_rust,
        Some(Box::new(move |r| drop(tx.send(r.to_owned())))),
    )
    .expect("Rust write");
    match rx.recv_timeout(WAIT) {
        Ok(Response::Reply(r)) if r.action == "rtm/write/ok" => {}
        other => panic!("Rust write: {other:?}"),
    }
    let sub = RustSub::new(&rust, "conn-interop");

    let sent = message_types();
    let value = json!(["kv", {"n": 1}, "ünïcödé"]);
    let value_text = value.to_string();
    let restricted = format!("{RESTRICTED_PREFIX}-conn");
    let events = Py::spawn(
        &python,
        "connection_api.py",
        &server,
        "conn-interop",
        &[
            "--kv-channel",
            "conn-kv",
            "--read-channel",
            "conn-from-rust",
            "--missing-channel",
            "conn-never-written",
            "--restricted-channel",
            &restricted,
            "--value",
            &value_text,
        ],
        &sent,
    )
    .finish();
    let of = |name: &str| -> Vec<&Value> { events.iter().filter(|e| e["event"] == name).collect() };

    let positions: Vec<Value> = of("published")
        .iter()
        .map(|e| e["position"].clone())
        .collect();
    assert_eq!(positions.len(), sent.len(), "{events:?}");
    assert_increasing(&positions);
    assert_eq!(of("write")[0]["action"], "rtm/write/ok");
    // The Python Connection numbers requests from 0: one per publish_sync, so the write
    // is request number `sent.len()`.
    assert_eq!(of("write")[0]["id"], sent.len());
    let reads: Vec<(Value, Value)> = of("read")
        .iter()
        .map(|e| (e["channel"].clone(), e["message"].clone()))
        .collect();
    assert_eq!(
        reads,
        vec![
            (json!("conn-kv"), value),
            (json!("conn-from-rust"), from_rust),
            (json!("conn-never-written"), Value::Null),
            (json!("conn-kv"), Value::Null),
        ],
        "read_sync: own write, Rust's write, never written, after delete"
    );
    assert_eq!(of("delete")[0]["action"], "rtm/delete/ok");
    let denied = &of("denied")[0]["reply"];
    assert_eq!(denied["action"], "rtm/publish/error", "{denied}");
    assert_eq!(denied["body"]["error"], "authorization_denied", "{denied}");
    assert!(
        denied["id"].is_u64(),
        "the error reply echoes the id: {denied}"
    );
    // subscribe_sync at the first publish's position replays every message (a publish's
    // position is the message's own, so subscribing there includes it).
    assert_eq!(
        messages_of(&events),
        sent,
        "replayed to the Python Connection"
    );
    assert!(of("message")
        .iter()
        .all(|e| e["subscription_id"] == "conn-interop"));

    assert_eq!(sub.take(sent.len()), sent, "Python Connection → Rust");
    assert_eq!(
        rust.read_sync("conn-kv", WAIT).expect("Rust read"),
        Value::Null
    );
    rust.dispose().expect("dispose");
    server.shutdown();
}

#[test]
fn big_payloads_both_ways() {
    let Some(python) = python() else { return };
    let server = start_server();
    let sent = big_payloads();
    let rust = rust_client(&server);
    let sub = RustSub::new(&rust, "big-py-to-rust");
    let count = sent.len().to_string();
    let mut py_sub = Py::spawn(
        &python,
        "subscribe.py",
        &server,
        "big-rust-to-py",
        &["--count", &count],
        &[],
    );
    py_sub.expect("subscribed");
    let py_pub = Py::spawn(&python, "publish.py", &server, "big-py-to-rust", &[], &sent);
    for m in &sent {
        if let Err(e) = rust.publish_sync("big-rust-to-py", m, WAIT) {
            py_sub.fail(&format!("Rust publish of a big message failed: {e}"));
        }
    }
    py_pub.finish();
    assert!(
        sub.take(sent.len()) == sent,
        "Python → Rust: big payloads differ"
    );
    assert!(
        messages_of(&py_sub.finish()) == sent,
        "Rust → Python: big payloads differ"
    );
    rust.dispose().expect("dispose");
    server.shutdown();
}
