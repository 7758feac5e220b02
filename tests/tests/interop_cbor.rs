//! Interop with the reference Python SDK (`satori-rtm-sdk` 1.5.0) in CBOR mode
//! (`protocol='cbor'`) against the local RTM server: publish, subscribe, read, write,
//! delete and role-secret auth over CBOR, byte strings included, and JSON and CBOR
//! clients of the SDK on the same channel (`tests/interop/cbor.py` for CBOR, the JSON
//! scripts of `interop_python.rs` for JSON), and the benchlink client in CBOR mode
//! exchanging messages with the SDK in CBOR mode.
//!
//! The SDK in CBOR mode sends its CBOR in text frames and reads only binary ones; had
//! the server got that wrong, the SDK would drop the connection and reconnect, which
//! the CBOR script reports as a failure. To run these tests by hand:
//!
//! ```text
//! export BENCHLINK_PY_SDK="$(bash .ci/python-sdk)"
//! cargo test -p benchlink-tests --test interop_cbor
//! ```

mod py_sdk;

use benchlink_sandbox::rtm::{
    RtmServer, RtmServerConfig, RESTRICTED_PREFIX, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
use py_sdk::{message_types, messages_of, python, Py};
use serde_json::{json, Value};

fn start_server() -> RtmServer {
    RtmServer::start(RtmServerConfig::default()).expect("RTM server")
}

/// Byte strings, as `cbor.py` writes them on both sides: `{"$bytes": "<hex>"}`.
fn bytes(hex: &str) -> Value {
    json!({"$bytes": hex})
}

/// What a JSON subscriber gets for a message with byte strings: each as base64 text.
fn as_json_subscriber_sees(v: &Value) -> Value {
    match v {
        Value::Object(m) if m.len() == 1 && m.contains_key("$bytes") => {
            let hex = m["$bytes"].as_str().expect("hex");
            let raw: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect();
            Value::String(base64(&raw))
        }
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), as_json_subscriber_sees(v)))
            .collect(),
        Value::Array(a) => a.iter().map(as_json_subscriber_sees).collect(),
        v => v.clone(),
    }
}

/// Standard base64 with padding (a few lines beat a dependency for a test).
fn base64(raw: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in raw.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The JSON message types plus values only CBOR can carry.
fn cbor_messages() -> Vec<Value> {
    let mut sent = message_types();
    sent.push(bytes("00ff"));
    sent.push(bytes(""));
    sent.push(json!({"who": "zebra", "n": 7, "raw": bytes("00ff"), "list": [bytes("010203")]}));
    sent
}

#[test]
fn base64_of_the_test() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(&[0, 0xff]), "AP8=");
    assert_eq!(base64(b"abc"), "YWJj");
    assert_eq!(base64(b"abcd"), "YWJjZA==");
}

/// A CBOR publisher reaches a CBOR subscriber (byte strings kept) and a JSON subscriber
/// (byte strings as base64) on the same channel; acks carry text positions.
#[test]
fn cbor_publisher_reaches_cbor_and_json_subscribers() {
    let Some(python) = python() else { return };
    let server = start_server();
    let channel = "cbor-to-both";
    let sent = cbor_messages();
    let count = sent.len().to_string();
    let mut cbor_sub = Py::spawn(
        &python,
        "cbor.py",
        &server,
        channel,
        &["--step", "subscribe", "--count", &count],
        &[],
    );
    let mut json_sub = Py::spawn(
        &python,
        "subscribe.py",
        &server,
        channel,
        &["--count", &count],
        &[],
    );
    cbor_sub.expect("subscribed");
    json_sub.expect("subscribed");
    let acks = Py::spawn(
        &python,
        "cbor.py",
        &server,
        channel,
        &["--step", "publish"],
        &sent,
    )
    .finish();
    let positions: Vec<&Value> = acks
        .iter()
        .filter(|e| e["event"] == "ack")
        .map(|e| &e["body"]["position"])
        .collect();
    assert_eq!(positions.len(), sent.len(), "{acks:?}");
    assert!(
        positions.iter().all(|p| p.is_string()),
        "positions are text: {positions:?}"
    );
    assert_eq!(messages_of(&cbor_sub.finish()), sent);
    let want: Vec<Value> = sent.iter().map(as_json_subscriber_sees).collect();
    assert_eq!(messages_of(&json_sub.finish()), want);

    // What the server read from the CBOR publisher, as JSON: the SDK's envelope.
    let publisher = server
        .connections()
        .into_iter()
        .find(|c| c.received.iter().any(|p| p.contains("rtm/publish")))
        .expect("the publisher's connection");
    let first: Value = serde_json::from_str(&publisher.received[0]).expect("JSON");
    assert_eq!(
        first,
        json!({"action": "rtm/publish", "id": 0, "body": {"channel": channel, "message": null}})
    );
}

/// A JSON publisher reaches a CBOR subscriber with the same values.
#[test]
fn json_publisher_reaches_cbor_subscriber() {
    let Some(python) = python() else { return };
    let server = start_server();
    let channel = "json-to-cbor";
    let sent = message_types();
    let count = sent.len().to_string();
    let mut cbor_sub = Py::spawn(
        &python,
        "cbor.py",
        &server,
        channel,
        &["--step", "subscribe", "--count", &count],
        &[],
    );
    cbor_sub.expect("subscribed");
    Py::spawn(&python, "publish.py", &server, channel, &[], &sent).finish();
    assert_eq!(messages_of(&cbor_sub.finish()), sent);
}

/// Role-secret auth over CBOR, then publish to a restricted channel, and write, read,
/// delete and read again a binary value: the read gives the bytes back.
#[test]
fn cbor_auth_and_key_value() {
    let Some(python) = python() else { return };
    let server = start_server();
    let channel = format!("{RESTRICTED_PREFIX}cbor");
    let auth = ["--role", SUPERUSER_ROLE, "--secret", SUPERUSER_SECRET];

    let mut args = vec!["--step", "publish"];
    args.extend(auth);
    let events = Py::spawn(
        &python,
        "cbor.py",
        &server,
        &channel,
        &args,
        &[json!({"secret": bytes("5ec2e7")})],
    )
    .finish();
    assert_eq!(events[0]["event"], "authenticated");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["action"] == "rtm/publish/ok")
            .count(),
        1,
        "{events:?}"
    );
    let roles: Vec<Option<String>> = server.connections().into_iter().map(|c| c.role).collect();
    assert_eq!(roles, [Some(SUPERUSER_ROLE.to_owned())]);

    let value = json!({"raw": bytes("00ff10"), "n": 1.5, "text": "é"});
    let mut args = vec!["--step", "kv"];
    args.extend(auth);
    let events = Py::spawn(
        &python,
        "cbor.py",
        &server,
        &channel,
        &args,
        std::slice::from_ref(&value),
    )
    .finish();
    let steps: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e.get("action").is_some())
        .map(|e| (&e["event"], &e["action"]))
        .collect();
    assert_eq!(
        steps,
        [
            (&json!("write"), &json!("rtm/write/ok")),
            (&json!("read"), &json!("rtm/read/ok")),
            (&json!("delete"), &json!("rtm/delete/ok")),
            (&json!("read"), &json!("rtm/read/ok")),
        ]
    );
    let reads: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "read")
        .map(|e| &e["body"]["message"])
        .collect();
    assert_eq!(reads, [&value, &Value::Null]);
}

/// Without `cbor` selected (a JSON-only server), the SDK's CBOR cannot be read: the
/// script sees its connection drop, which is what the tests above would show if the
/// server got CBOR wrong.
#[test]
fn a_server_without_cbor_fails_the_sdk_in_cbor_mode() {
    let Some(python) = python() else { return };
    let server = RtmServer::start(RtmServerConfig {
        cbor: false,
        ..RtmServerConfig::default()
    })
    .expect("RTM server");
    let events = Py::spawn(
        &python,
        "cbor.py",
        &server,
        "nowhere",
        &["--step", "publish", "--timeout", "3"],
        &[json!(1)],
    )
    .finish_failing();
    assert_eq!(
        events.last().map(|e| &e["event"]),
        Some(&json!("error")),
        "{events:?}"
    );
}

/// The benchlink client in CBOR mode and the SDK in CBOR mode exchange messages both
/// ways, byte strings included: what the SDK publishes reaches benchlink as the same
/// values (CBOR items, and JSON text with byte strings as base64), and what benchlink
/// publishes (JSON text transcoded, or CBOR as is) reaches the SDK as the same values.
#[test]
fn benchlink_and_the_sdk_exchange_cbor_both_ways() {
    use benchlink_std::rtm::{
        Client, ClientOptions, Encoding, Mode, SubscribeOptions, SubscriptionData,
        SubscriptionObserver,
    };
    use std::sync::mpsc;
    use std::time::Duration;

    struct Collect(mpsc::Sender<(String, Vec<u8>)>);
    impl SubscriptionObserver for Collect {
        fn on_enter_subscribed(&mut self) {
            let _ = self.0.send(("subscribed".to_owned(), Vec::new()));
        }
        fn on_subscription_data(&mut self, data: &SubscriptionData) {
            for (json, cbor) in data.messages().into_iter().zip(data.cbor_messages()) {
                let _ = self.0.send((json.to_owned(), cbor.to_vec()));
            }
        }
    }

    let Some(python) = python() else { return };
    let server = start_server();
    let wait = Duration::from_secs(10);
    let options = ClientOptions {
        encoding: Encoding::Cbor,
        ..ClientOptions::new(server.endpoint(), benchlink_sandbox::rtm::DEFAULT_APPKEY)
    };
    let client = Client::new(options).expect("client");
    client.start().expect("start");

    // SDK → benchlink.
    let (tx, rx) = mpsc::channel();
    client
        .subscribe(
            "sdk-to-rust",
            Mode::Simple,
            Collect(tx),
            SubscribeOptions::default(),
        )
        .expect("subscribe");
    assert_eq!(rx.recv_timeout(wait).expect("subscribed").0, "subscribed");
    let sent = cbor_messages();
    Py::spawn(
        &python,
        "cbor.py",
        &server,
        "sdk-to-rust",
        &["--step", "publish"],
        &sent,
    )
    .finish();
    let mut last = Vec::new();
    for want in &sent {
        let (json, cbor) = rx.recv_timeout(wait).expect("a message");
        let got: Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(got, as_json_subscriber_sees(want));
        last = cbor;
    }
    // The last one as the SDK's cbor2 encoded it, byte strings as byte strings (its keys
    // in the order the script got them: serde_json's, sorted).
    assert_eq!(
        last,
        b"\xa4\x64list\x81\x43\x01\x02\x03\x61n\x07\x63raw\x42\x00\xff\x63who\x65zebra"
    );

    // benchlink → SDK.
    let mut sdk_sub = Py::spawn(
        &python,
        "cbor.py",
        &server,
        "rust-to-sdk",
        &["--step", "subscribe", "--count", "3"],
        &[],
    );
    sdk_sub.expect("subscribed");
    client
        .publish_sync("rust-to-sdk", &json!({"a": [1, "x", null]}), wait)
        .expect("publish JSON");
    client
        .publish_json("rust-to-sdk", "2.5", None)
        .expect("publish JSON text");
    // {"who": "zebra", "raw": h'00ff'}
    let binary = b"\xa2\x63who\x65zebra\x63raw\x42\x00\xff".to_vec();
    client
        .publish_cbor("rust-to-sdk", binary, None)
        .expect("publish CBOR");
    assert_eq!(
        messages_of(&sdk_sub.finish()),
        [
            json!({"a": [1, "x", null]}),
            json!(2.5),
            json!({"who": "zebra", "raw": bytes("00ff")}),
        ]
    );
    client.dispose().expect("dispose");
}
