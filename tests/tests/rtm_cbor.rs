//! End to end: the std RTM client in CBOR mode against the local RTM server.
//!
//! Every request of the protocol over CBOR, a JSON and a CBOR client on one channel, a
//! binary message between two CBOR clients, typed messages (core's CBOR serde) between
//! CBOR and JSON clients, a server that does not select `cbor`, and malformed CBOR from
//! the server. Each test has its own server on a free port, waits
//! with bounded timeouts, and disposes of its clients.

use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use benchlink_sandbox::rtm::{
    RtmServer, RtmServerConfig, DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
use benchlink_std::rtm::{
    Callback, Client, ClientObserver, ClientOptions, Encoding, Error, Mode, Response,
    SubscribeOptions, SubscriptionData, SubscriptionObserver,
};
use benchlink_tests::wait_until;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);

fn options(server: &RtmServer, encoding: Encoding) -> ClientOptions {
    ClientOptions {
        encoding,
        reconnect_interval: Duration::from_millis(50),
        max_reconnect_interval: Duration::from_secs(1),
        ..ClientOptions::new(server.endpoint(), DEFAULT_APPKEY)
    }
}

/// Counts the client's connections.
struct Connections(Arc<Mutex<usize>>);

impl ClientObserver for Connections {
    fn on_enter_connected(&mut self) {
        *self.0.lock().unwrap() += 1;
    }
}

/// A started client, connected.
fn connected(server: &RtmServer, encoding: Encoding) -> (Client, Arc<Mutex<usize>>) {
    let count = Arc::new(Mutex::new(0));
    let observer = Connections(count.clone());
    let client =
        Client::with_observer(options(server, encoding), Some(Box::new(observer))).unwrap();
    client.start().unwrap();
    wait_until("connected", || client.is_connected());
    (client, count)
}

/// Subscription data, as JSON texts and (on a CBOR connection) CBOR items.
type Received = Receiver<(Vec<String>, Vec<Vec<u8>>)>;

struct Messages(mpsc::Sender<(Vec<String>, Vec<Vec<u8>>)>);

impl SubscriptionObserver for Messages {
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        let json = data.messages().into_iter().map(str::to_owned).collect();
        let cbor = data
            .cbor_messages()
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        let _ = self.0.send((json, cbor));
    }
}

/// Subscribes and waits until the server has the subscription.
fn subscribe(server: &RtmServer, client: &Client, channel: &str) -> Received {
    let (tx, rx) = mpsc::channel();
    let before = subscribers(server, channel);
    client
        .subscribe(
            channel,
            Mode::Simple,
            Messages(tx),
            SubscribeOptions::default(),
        )
        .unwrap();
    wait_until("subscribed", || subscribers(server, channel) > before);
    rx
}

fn subscribers(server: &RtmServer, channel: &str) -> usize {
    server
        .connections()
        .iter()
        .filter(|c| c.open && c.subscriptions.iter().any(|s| s == channel))
        .count()
}

/// Sends a request with a callback and waits for its reply.
fn reply(send: impl FnOnce(Callback) -> Result<(), Error>) -> Response<'static> {
    let (tx, rx) = mpsc::channel();
    send(Box::new(move |r| {
        let _ = tx.send(r.to_owned());
    }))
    .unwrap();
    rx.recv_timeout(WAIT).expect("a reply")
}

fn ok_body(response: Response) -> Value {
    match response {
        Response::Reply(r) if r.is_ok() => r.json(),
        other => panic!("not ok: {other:?}"),
    }
}

#[test]
fn every_request_over_cbor() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let (client, _) = connected(&server, Encoding::Cbor);
    client
        .authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap();
    let data = subscribe(&server, &client, "ch");

    let position = client
        .publish_sync("ch", &json!({"k": 1.5, "s": "é"}), WAIT)
        .unwrap();
    assert!(position.contains(':'), "{position}");
    let (json, cbor) = data.recv_timeout(WAIT).unwrap();
    assert_eq!(json, [r#"{"k":1.5,"s":"é"}"#]);
    // As published: a float is 64-bit, text is UTF-8.
    let mut expected = vec![
        0xa2, 0x61, b'k', 0xfb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x61, b's', 0x62,
    ];
    expected.extend_from_slice("é".as_bytes());
    assert_eq!(cbor, [expected]);

    let written = ok_body(reply(|cb| {
        client.write("kv", &json!([1, null, true]), Some(cb))
    }));
    assert!(written.get("position").is_some(), "{written}");
    assert_eq!(
        client.read_sync("kv", WAIT).unwrap(),
        json!([1, null, true])
    );
    ok_body(reply(|cb| client.delete("kv", Some(cb))));
    assert_eq!(client.read_sync("kv", WAIT).unwrap(), Value::Null);

    // The server records what it received as JSON; the auth PDUs' key order (`body`
    // before `id`, the Python SDK's) is the CBOR encoder's own.
    let conn = server.connections().into_iter().find(|c| c.open).unwrap();
    assert_eq!(conn.role.as_deref(), Some(SUPERUSER_ROLE));
    assert_eq!(conn.received.len(), 8);
    assert!(
        conn.received[0].starts_with(r#"{"action":"auth/handshake","body":"#),
        "{:?}",
        conn.received
    );
    client.dispose().unwrap();
}

#[test]
fn json_and_cbor_clients_share_a_channel_and_binary_stays_binary() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let (json_client, _) = connected(&server, Encoding::Json);
    let (cbor_a, _) = connected(&server, Encoding::Cbor);
    let (cbor_b, _) = connected(&server, Encoding::Cbor);
    let to_json = subscribe(&server, &json_client, "animals");
    let to_cbor = subscribe(&server, &cbor_b, "animals");

    // JSON → both.
    json_client
        .publish_sync("animals", &json!({"a": [1, "x"]}), WAIT)
        .unwrap();
    assert_eq!(
        to_json.recv_timeout(WAIT).unwrap(),
        (vec![r#"{"a":[1,"x"]}"#.to_owned()], vec![])
    );
    let (json, cbor) = to_cbor.recv_timeout(WAIT).unwrap();
    assert_eq!(json, [r#"{"a":[1,"x"]}"#]);
    assert_eq!(cbor, [vec![0xa1, 0x61, b'a', 0x82, 0x01, 0x61, b'x']]);

    // A binary message from one CBOR client: the other gets its bytes exactly, the JSON
    // client the server's rendering (base64 text).
    let message = [
        0xa3, 0x63, b'w', b'h', b'o', 0x65, b'z', b'e', b'b', b'r', b'a', 0x61, b'n', 0x07, 0x63,
        b'r', b'a', b'w', 0x42, 0x00, 0xff,
    ];
    ok_body(reply(|cb| {
        cbor_a.publish_cbor("animals", message.to_vec(), Some(cb))
    }));
    let (json, cbor) = to_cbor.recv_timeout(WAIT).unwrap();
    assert_eq!(cbor, [message.to_vec()]);
    assert_eq!(json, [r#"{"who":"zebra","n":7,"raw":"AP8="}"#]);
    let (json, cbor) = to_json.recv_timeout(WAIT).unwrap();
    assert!(cbor.is_empty());
    let got: Value = serde_json::from_str(&json[0]).unwrap();
    assert_eq!(got, json!({"who": "zebra", "n": 7, "raw": "AP8="}));

    // A JSON client cannot publish CBOR; a CBOR client cannot publish broken CBOR.
    assert!(json_client
        .publish_cbor("animals", message.to_vec(), None)
        .is_err());
    assert!(cbor_a
        .publish_cbor("animals", message[..5].to_vec(), None)
        .is_err());
    for client in [json_client, cbor_a, cbor_b] {
        client.dispose().unwrap();
    }
}

#[test]
fn a_server_that_does_not_select_cbor_gets_a_clear_error_and_no_cbor() {
    let config = RtmServerConfig {
        cbor: false,
        ..RtmServerConfig::default()
    };
    let server = RtmServer::start(config).unwrap();
    let client = Client::new(options(&server, Encoding::Cbor)).unwrap();
    client.start().unwrap();
    wait_until("a connect error", || {
        client.last_connecting_error().is_some()
    });
    let error = client.last_connecting_error().unwrap().to_string();
    assert!(
        error.contains("did not select") && error.contains("cbor"),
        "{error}"
    );
    // Nothing reached the server after the upgrade.
    assert!(server.connections().iter().all(|c| c.received_count == 0));
    client.dispose().unwrap();
}

#[test]
fn malformed_cbor_from_the_server_makes_the_client_reconnect() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let (client, connections) = connected(&server, Encoding::Cbor);
    let bad: [&[u8]; 4] = [
        b"\xa3\x66act",            // truncated
        b"\xa1\x42\x00\x01\x01",   // a map keyed by a byte string: no action
        b"\x83\x01\x02\x03",       // not a map
        br#"{"action":"/error"}"#, // JSON where CBOR was negotiated
    ];
    for (i, payload) in bad.iter().enumerate() {
        // The client hears the 101 before the server has listed the connection: wait
        // for the server's side too, or the frame may have nobody to go to.
        wait_until("the server to list the connection", || {
            let conns = server.connections();
            conns.len() == i + 1 && conns.last().is_some_and(|c| c.open)
        });
        assert_eq!(server.faults().send_raw_binary(payload), 1);
        wait_until("a reconnect", || *connections.lock().unwrap() == i + 2);
        wait_until("connected again", || client.is_connected());
    }
    // Still working.
    client.publish_sync("ch", &json!(1), WAIT).unwrap();
    client.dispose().unwrap();
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Sample<'a> {
    metric: &'a str,
    seq: u64,
    delta: i32,
    value: f64,
    note: Option<String>,
    missing: Option<u8>,
    place: Place,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Place {
    room: String,
    floor: i8,
    tags: Vec<String>,
}

fn sample(metric: &str) -> Sample<'_> {
    Sample {
        metric,
        seq: u64::MAX,
        delta: -40_000,
        value: 2.5,
        note: Some("quote \" and é".into()),
        missing: None,
        place: Place {
            room: "lab".into(),
            floor: -2,
            tags: vec!["a".into(), String::new()],
        },
    }
}

/// Reads one CBOR message into `T` with core's typed reader, borrowing from `bytes`.
fn read_cbor<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> T {
    use benchlink_core::cbor;
    cbor::parse(bytes, cbor::DEFAULT_MAX_DEPTH)
        .unwrap()
        .deserialize()
        .unwrap()
}

#[test]
fn typed_messages_cross_between_cbor_and_json_clients() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let (json_client, _) = connected(&server, Encoding::Json);
    let (cbor_client, _) = connected(&server, Encoding::Cbor);
    let to_json = subscribe(&server, &json_client, "typed");
    let to_cbor = subscribe(&server, &cbor_client, "typed");
    let sent = sample("rx \"eth0\"");
    let as_json = serde_json::to_value(&sent).unwrap();

    // Core's CBOR serializer, published by the CBOR client: the JSON subscriber sees the
    // struct's JSON, the CBOR subscriber reads the struct back, borrowing its str.
    let mut buf = [0u8; 256];
    let mut out = benchlink_core::http::Cursor::new(&mut buf);
    benchlink_core::cbor::typed::serialize(&mut out, &sent).unwrap();
    let cbor = out.written().to_vec();
    cbor_client
        .publish_cbor("typed", cbor.clone(), None)
        .unwrap();
    let (json, _) = to_json.recv_timeout(WAIT).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&json[0]).unwrap(), as_json);
    let (json, items) = to_cbor.recv_timeout(WAIT).unwrap();
    assert_eq!(items, [cbor]);
    let got: Sample<'_> = read_cbor(&items[0]);
    assert_eq!(got, sent);
    assert!(
        items[0].as_ptr_range().contains(&got.metric.as_ptr()),
        "borrowed"
    );
    // The std client shows it as the same JSON.
    assert_eq!(serde_json::from_str::<Value>(&json[0]).unwrap(), as_json);

    // The std client's typed publish on a CBOR connection: the same value for both.
    cbor_client.publish_sync("typed", &sent, WAIT).unwrap();
    let (json, _) = to_json.recv_timeout(WAIT).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&json[0]).unwrap(), as_json);
    let (_, items) = to_cbor.recv_timeout(WAIT).unwrap();
    assert_eq!(read_cbor::<Sample<'_>>(&items[0]), sent);

    // JSON published (a whole float written as `4`, as JavaScript does): the CBOR client
    // reads it typed.
    let mut published = as_json.clone();
    published["value"] = json!(4);
    json_client.publish_sync("typed", &published, WAIT).unwrap();
    let (_, _) = to_json.recv_timeout(WAIT).unwrap();
    let (json, items) = to_cbor.recv_timeout(WAIT).unwrap();
    let got: Sample<'_> = read_cbor(&items[0]);
    assert_eq!(
        got,
        Sample {
            value: 4.0,
            ..sample("rx \"eth0\"")
        }
    );
    // The std client's JSON view of it is what was published.
    assert_eq!(serde_json::from_str::<Value>(&json[0]).unwrap(), published);

    // A message of another shape is a typed error, not a wrong value.
    json_client
        .publish_sync("typed", &json!({"metric": 1}), WAIT)
        .unwrap();
    let (_, items) = to_cbor.recv_timeout(WAIT).unwrap();
    let item = benchlink_core::cbor::parse(&items[0], 32).unwrap();
    assert_eq!(
        item.deserialize::<Sample<'_>>(),
        Err(benchlink_core::cbor::typed::DeserializeError::InvalidType)
    );
    for client in [json_client, cbor_client] {
        client.dispose().unwrap();
    }
}
