//! The local RTM server against tungstenite's client over real sockets: upgrade, PDUs,
//! the position model, auth and ACLs, views, key-value, search, and every fault hook.

mod common;
use common::{returns, wait_until};

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{
    AttemptOutcome, ConnectFault, Permissions, ReplyOverride, Role, RtmServer, RtmServerConfig,
    SocketFault, DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
use serde_json::{json, Value};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

/// How long a test waits for what must come (generous: the tests share two cores with
/// floods and other test binaries; nothing waits this long when all is well).
const WAIT: Duration = Duration::from_secs(10);

struct Client {
    ws: WebSocket<TcpStream>,
    next_id: u64,
    /// PDUs read while waiting for a reply (e.g. data for our own publish, which the
    /// server may send before the `publish/ok`).
    pending: VecDeque<String>,
}

fn url(server: &RtmServer, path: &str, appkey: &str) -> String {
    format!("{}{path}?appkey={appkey}", server.endpoint())
}

// tungstenite's error is what the tests inspect; its size does not matter here.
#[allow(clippy::result_large_err)]
fn try_connect(server: &RtmServer, path: &str, appkey: &str) -> Result<Client, tungstenite::Error> {
    let tcp = TcpStream::connect(server.addr()).map_err(tungstenite::Error::Io)?;
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    match tungstenite::client(url(server, path, appkey), tcp) {
        Ok((ws, resp)) => {
            assert_eq!(resp.status(), 101);
            Ok(Client {
                ws,
                next_id: 0,
                pending: VecDeque::new(),
            })
        }
        Err(tungstenite::HandshakeError::Failure(e)) => Err(e),
        Err(tungstenite::HandshakeError::Interrupted(_)) => panic!("interrupted handshake"),
    }
}

fn connect(server: &RtmServer) -> Client {
    try_connect(server, "/v2", DEFAULT_APPKEY).expect("upgrade")
}

impl Client {
    fn send_text(&mut self, text: &str) {
        self.ws.send(Message::text(text)).unwrap();
    }

    fn send(&mut self, pdu: &Value) {
        self.send_text(&pdu.to_string());
    }

    /// Sends a request with the next integer id and returns that id.
    fn request(&mut self, action: &str, body: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"action": action, "id": id, "body": body}));
        id
    }

    /// The next text frame, raw.
    fn recv_text(&mut self) -> String {
        if let Some(text) = self.pending.pop_front() {
            return text;
        }
        self.read_text()
    }

    fn read_text(&mut self) -> String {
        loop {
            match self.ws.read().expect("a frame") {
                Message::Text(t) => return t.as_str().to_owned(),
                Message::Binary(_) => panic!("binary frame"),
                _ => {}
            }
        }
    }

    fn recv(&mut self) -> Value {
        let text = self.recv_text();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// Sends a request and returns its reply; unsolicited PDUs read meanwhile stay
    /// pending for `recv`.
    fn call(&mut self, action: &str, body: Value) -> Value {
        let id = self.request(action, body);
        loop {
            let text = self.read_text();
            let pdu: Value = serde_json::from_str(&text).unwrap();
            if pdu.get("id").is_none() {
                self.pending.push_back(text);
                continue;
            }
            assert_eq!(pdu["id"], json!(id), "{pdu}");
            return pdu;
        }
    }

    fn ok(&mut self, action: &str, body: Value) -> Value {
        let reply = self.call(action, body);
        assert_eq!(reply["action"], format!("{action}/ok"), "{reply}");
        reply["body"].clone()
    }

    fn error(&mut self, action: &str, body: Value) -> Value {
        let reply = self.call(action, body);
        assert_eq!(reply["action"], format!("{action}/error"), "{reply}");
        assert!(reply["body"]["reason"].is_string(), "{reply}");
        reply["body"].clone()
    }

    fn publish(&mut self, channel: &str, message: Value) -> String {
        let body = self.ok(
            "rtm/publish",
            json!({"channel": channel, "message": message}),
        );
        body["position"].as_str().unwrap().to_owned()
    }

    /// Nothing arrived: the reply to a request sent now (a publish to a channel nobody
    /// reads) is the next frame, pongs included (the server sends this connection
    /// everything caused before the request first).
    fn quiet(&mut self) {
        assert!(self.pending.is_empty(), "{:?}", self.pending);
        let id = self.request(
            "rtm/publish",
            json!({"channel": "quiet.marker", "message": null}),
        );
        match self.ws.read() {
            Ok(Message::Text(t)) => {
                let pdu: Value = serde_json::from_str(t.as_str()).unwrap();
                assert_eq!(
                    pdu["action"], "rtm/publish/ok",
                    "expected silence, got {pdu}"
                );
                assert_eq!(pdu["id"], json!(id), "expected silence, got {pdu}");
            }
            other => panic!("expected silence, got {other:?}"),
        }
    }

    /// Reads until the connection ends; returns what ended it.
    fn closed(&mut self) -> tungstenite::Error {
        loop {
            match self.ws.read() {
                Ok(Message::Close(_)) | Ok(_) => {}
                Err(e) => return e,
            }
        }
    }

    /// Reads data PDUs of `sid` until `n` messages arrived; returns them.
    fn messages(&mut self, sid: &str, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        while out.len() < n {
            let pdu = self.recv();
            assert_eq!(pdu["action"], "rtm/subscription/data", "{pdu}");
            assert_eq!(pdu["body"]["subscription_id"], sid, "{pdu}");
            assert!(pdu.get("id").is_none());
            out.extend(pdu["body"]["messages"].as_array().unwrap().iter().cloned());
        }
        assert_eq!(out.len(), n);
        out
    }
}

fn seq(position: &str) -> u64 {
    let (epoch, n) = position.split_once(':').unwrap();
    assert!(epoch.parse::<u64>().unwrap() > 1_600_000_000);
    n.parse().unwrap()
}

fn start(config: RtmServerConfig) -> RtmServer {
    RtmServer::start(config).unwrap()
}

#[test]
fn upgrade_paths_and_appkeys() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    // A prefix before /v2 is fine (Python: ws://h/foo → /foo/v2).
    let mut d = try_connect(&server, "/foo/v2", DEFAULT_APPKEY).unwrap();
    c.quiet();
    d.ok("rtm/publish", json!({"channel": "x", "message": 1}));
    for (path, appkey, status) in [
        ("/v2", "wrong", 400),
        ("/v2", "", 400),
        ("/v3", DEFAULT_APPKEY, 404),
        ("/", DEFAULT_APPKEY, 404),
    ] {
        match try_connect(&server, path, appkey) {
            Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), status),
            Err(e) => panic!("{path} {appkey}: {e}"),
            Ok(_) => panic!("{path} {appkey} upgraded"),
        }
    }
    let outcomes: Vec<AttemptOutcome> = server.attempts().into_iter().map(|a| a.outcome).collect();
    assert_eq!(
        outcomes,
        [
            AttemptOutcome::Upgraded,
            AttemptOutcome::Upgraded,
            AttemptOutcome::Rejected(400),
            AttemptOutcome::Rejected(400),
            AttemptOutcome::Rejected(404),
            AttemptOutcome::Rejected(404),
        ]
    );
    let conns = server.connections();
    assert_eq!(conns.len(), 2);
    assert_eq!(conns[1].path, "/foo/v2");
    assert_eq!(conns[1].appkey, DEFAULT_APPKEY);
    // The appkey is URL-decoded.
    let config = RtmServerConfig {
        appkeys: vec!["a b/c".to_owned()],
        ..RtmServerConfig::default()
    };
    let other = start(config);
    assert!(try_connect(&other, "/v2", "a%20b%2Fc").is_ok());
}

#[test]
fn json_subprotocol_is_selected_when_offered() {
    use tungstenite::client::IntoClientRequest;
    let server = start(RtmServerConfig::default());
    let mut req = url(&server, "/v2", DEFAULT_APPKEY)
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "json".parse().unwrap());
    let tcp = TcpStream::connect(server.addr()).unwrap();
    let (_ws, resp) = tungstenite::client(req, tcp).unwrap();
    assert_eq!(resp.headers()["Sec-WebSocket-Protocol"], "json");
}

#[test]
fn no_frame_shares_the_segment_of_the_101() {
    // A frame sent as early as possible (a fault that fires as soon as the connection
    // exists) still reaches the client apart from the 101, which a client blocked in
    // `read` sees alone (tungstenite refuses frames pipelined behind the upgrade
    // request, so the first frame can only come from the server).
    use std::io::{Read, Write};
    let config = RtmServerConfig {
        upgrade_pause: Duration::from_millis(100),
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let faults = server.faults();
    let mut tcp = TcpStream::connect(server.addr()).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        tcp,
        "GET /v2?appkey={DEFAULT_APPKEY} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: cnRtLXNlY3VyaXR5LWtleQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let end = Instant::now() + WAIT;
            while faults.send_raw("{}") == 0 && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let mut buf = [0u8; 4096];
        let n = tcp.read(&mut buf).unwrap();
        let head = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "{head:?}");
        let n = tcp.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"\x81\x02{}");
    });
    // Zero-key masks (Python) are fine.
    let pdu = br#"{"action":"rtm/publish","id":1,"body":{"channel":"c","message":1}}"#;
    let mut frame = vec![0x81, 0x80 | pdu.len() as u8, 0, 0, 0, 0];
    frame.extend(pdu);
    tcp.write_all(&frame).unwrap();
    let mut buf = [0u8; 4096];
    let n = tcp.read(&mut buf).unwrap();
    let reply = std::str::from_utf8(&buf[2..n]).unwrap();
    assert!(
        reply.starts_with(r#"{"action":"rtm/publish/ok","id":1,"#),
        "{reply}"
    );
}

#[test]
fn ids_are_echoed_and_requests_without_id_get_no_reply() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    c.send_text(r#"{"action":"rtm/publish","id":0,"body":{"channel":"a","message":1}}"#);
    assert!(c
        .recv_text()
        .starts_with(r#"{"action":"rtm/publish/ok","id":0,"body":{"position":""#));
    c.send_text(r#"{"action":"rtm/publish","id":"7","body":{"channel":"a","message":1}}"#);
    assert_eq!(c.recv()["id"], "7");
    // No id, or a null id: no reply, neither for success nor for errors.
    c.send_text(r#"{"action":"rtm/publish","body":{"channel":"a","message":1}}"#);
    c.send_text(r#"{"action":"rtm/publish","id":null,"body":{"channel":"a","message":1}}"#);
    c.send_text(r#"{"action":"rtm/subscribe","body":{"channel":"a","position":"bad"}}"#);
    c.send_text(r#"{"action":"rtm/publish","body":{"channel":"restricted","message":1}}"#);
    c.send_text(r#"{"action":"nope/nope","body":{}}"#);
    c.send_text(
        r#"{"action":"rtm/publish","id":18446744073709551615,"body":{"channel":"a","message":1}}"#,
    );
    let reply = c.recv_text();
    assert!(reply.contains(r#""id":18446744073709551615"#), "{reply}");
    let body = c.ok("rtm/read", json!({"channel": "a"}));
    assert_eq!(seq(body["position"].as_str().unwrap()), 4);
    // $heartbeat publishes are acked (JS liveness), even for unauthenticated clients.
    let config = RtmServerConfig {
        default_permissions: Permissions::none(),
        ..RtmServerConfig::default()
    };
    let locked = start(config);
    let mut c = connect(&locked);
    c.ok(
        "rtm/publish",
        json!({"channel": "$heartbeat", "message": ""}),
    );
}

#[test]
fn positions_follow_the_consistent_model() {
    let server = start(RtmServerConfig::default());
    let mut sub = connect(&server);
    let mut publ = connect(&server);
    let ok = sub.ok("rtm/subscribe", json!({"channel": "ch"}));
    assert_eq!(ok["subscription_id"], "ch");
    let p0 = ok["position"].as_str().unwrap().to_owned();
    assert_eq!(seq(&p0), 0);
    let m1 = publ.publish("ch", json!({"n": 1}));
    let m2 = publ.publish("ch", json!({"n": 2}));
    assert_eq!((seq(&m1), seq(&m2)), (0, 1));
    let d1 = sub.recv();
    assert_eq!(d1["body"]["messages"], json!([{"n": 1}]));
    let d1_pos = d1["body"]["position"].as_str().unwrap().to_owned();
    assert_eq!(
        seq(&d1_pos),
        1,
        "a data position points past its last message"
    );
    assert_eq!(sub.messages("ch", 1), [json!({"n": 2})]);

    // publish/ok's position delivers that very message (then live traffic).
    let mut c = connect(&server);
    let ok = c.ok(
        "rtm/subscribe",
        json!({"channel": "ch", "subscription_id": "s1", "position": m1}),
    );
    assert_eq!(ok["position"], m1);
    let replay = c.recv();
    assert_eq!(replay["body"]["messages"], json!([{"n": 1}, {"n": 2}]));
    assert_eq!(seq(replay["body"]["position"].as_str().unwrap()), 2);
    // A data position resumes after the messages of that PDU.
    c.ok(
        "rtm/subscribe",
        json!({"channel": "ch", "subscription_id": "s2", "position": d1_pos}),
    );
    assert_eq!(c.messages("s2", 1), [json!({"n": 2})]);
    // subscribe/ok's position replays everything published since.
    c.ok(
        "rtm/subscribe",
        json!({"channel": "ch", "subscription_id": "s3", "position": p0}),
    );
    assert_eq!(c.messages("s3", 2), [json!({"n": 1}), json!({"n": 2})]);
    // position: null is absent: live only.
    let ok = c.ok(
        "rtm/subscribe",
        json!({"channel": "ch", "subscription_id": "s4", "position": null}),
    );
    assert_eq!(seq(ok["position"].as_str().unwrap()), 2);
    // A position beyond the end means "from now".
    let (generation, _) = p0.split_once(':').unwrap();
    let ok = c.ok(
        "rtm/subscribe",
        json!({"channel": "ch", "subscription_id": "s5", "position": format!("{generation}:99")}),
    );
    assert_eq!(seq(ok["position"].as_str().unwrap()), 2);
    publ.publish("ch", json!("live"));
    let mut got: Vec<String> = (0..5)
        .map(|_| {
            c.recv()["body"]["subscription_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    got.sort();
    assert_eq!(got, ["s1", "s2", "s3", "s4", "s5"]);
    assert_eq!(sub.messages("ch", 1), [json!("live")]);

    // Unsubscribe returns the resume position; an unknown id is an error.
    let ok = c.ok("rtm/unsubscribe", json!({"subscription_id": "s1"}));
    assert_eq!(
        (
            ok["subscription_id"].as_str(),
            seq(ok["position"].as_str().unwrap())
        ),
        (Some("s1"), 3)
    );
    let err = c.error("rtm/unsubscribe", json!({"subscription_id": "s1"}));
    assert_eq!(err["error"], "not_subscribed");
    // A second subscribe with the same id is an error unless forced.
    assert_eq!(
        c.error(
            "rtm/subscribe",
            json!({"channel": "ch", "subscription_id": "s2"})
        )["error"],
        "already_subscribed"
    );
    c.ok(
        "rtm/subscribe",
        json!({"channel": "ch", "subscription_id": "s2", "force": true}),
    );
    // Messages are delivered byte for byte as published.
    publ.send_text(
        r#"{"action":"rtm/publish","body":{"channel":"ch","message": {"k": 1.50, "t": "\u043f"}}}"#,
    );
    let raw = sub.recv_text();
    assert!(
        raw.contains(r#""messages":[{"k": 1.50, "t": "\u043f"}]"#),
        "{raw}"
    );
}

#[test]
fn invalid_subscribe_options() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    c.send_text(r#"{"action":"rtm/subscribe","id":0,"body":{"channel":"c","position":"bad"}}"#);
    assert_eq!(
        c.recv_text(),
        r#"{"action":"rtm/subscribe/error","id":0,"body":{"error":"invalid_format","reason":"Invalid PDU: 'position' was invalid"}}"#
    );
    for body in [
        json!({"channel": "c", "position": 5}),
        json!({"channel": "c", "history": {"count": 1, "age": 1}}),
        json!({"channel": "c", "history": {"count": -1}}),
        json!({"channel": "c", "history": 3}),
        json!({"channel": "c", "period": 61}),
        json!({"channel": "c", "only": "everything"}),
        json!({"channel": "c", "fast_forward": "yes"}),
        json!({"subscription_id": "v", "filter": "select a from c", "period": 0}),
        json!({"filter": "select a from c"}),
        json!({"channel": ""}),
        json!({}),
    ] {
        let err = c.error("rtm/subscribe", body.clone());
        assert_eq!(err["error"], "invalid_format", "{body}");
    }
    c.ok("rtm/subscribe", json!({"channel": "c", "period": 60}));
}

#[test]
fn history_count_and_age() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    let mut first = String::new();
    for i in 0..5 {
        let position = c.publish("h", json!(i));
        if i == 0 {
            first = position;
        }
    }
    let (generation, _) = first.split_once(':').unwrap();
    let ok = c.ok(
        "rtm/subscribe",
        json!({"channel": "h", "subscription_id": "a", "history": {"count": 2}}),
    );
    assert_eq!(seq(ok["position"].as_str().unwrap()), 3);
    assert_eq!(c.messages("a", 2), [json!(3), json!(4)]);
    // count backs up from the position; beyond the history it stops at the start.
    c.ok(
        "rtm/subscribe",
        json!({"channel": "h", "subscription_id": "b", "position": format!("{generation}:2"), "history": {"count": 1}}),
    );
    assert_eq!(c.messages("b", 4), [json!(1), json!(2), json!(3), json!(4)]);
    c.ok(
        "rtm/subscribe",
        json!({"channel": "h", "subscription_id": "c", "history": {"count": 100}}),
    );
    assert_eq!(c.messages("c", 5).len(), 5);
    // age: all five are younger than 60 s, none younger than 0 s... after a pause.
    c.ok(
        "rtm/subscribe",
        json!({"channel": "h", "subscription_id": "d", "history": {"age": 60}}),
    );
    assert_eq!(c.messages("d", 5).len(), 5);
    // The five are made older than a second, instead of waiting for it.
    assert!(server
        .faults()
        .age_history("h", Duration::from_millis(1100)));
    c.publish("h", json!(5));
    // The live message reaches a..d.
    for _ in 0..4 {
        assert_eq!(c.recv()["body"]["messages"], json!([5]));
    }
    c.ok(
        "rtm/subscribe",
        json!({"channel": "h", "subscription_id": "e", "history": {"age": 1}}),
    );
    assert_eq!(c.messages("e", 1), [json!(5)]);
    // The C SDK's test: one message, history.count = 1.
    c.publish("one", json!("x"));
    c.ok(
        "rtm/subscribe",
        json!({"channel": "one", "history": {"count": 1}}),
    );
    assert_eq!(c.messages("one", 1), [json!("x")]);
}

#[test]
fn expired_positions_fast_forward_or_fail() {
    let config = RtmServerConfig {
        history_len: 3,
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let mut c = connect(&server);
    let first = c.publish("e", json!(0));
    for i in 1..5 {
        c.publish("e", json!(i));
    }
    // Without fast_forward: ok, then subscription/error out_of_sync; the subscription ends.
    let ok = c.ok("rtm/subscribe", json!({"channel": "e", "position": first}));
    assert_eq!(ok["position"], first);
    let err = c.recv();
    assert_eq!(err["action"], "rtm/subscription/error");
    assert_eq!(err["body"]["error"], "out_of_sync");
    assert_eq!(err["body"]["subscription_id"], "e");
    assert!(err["body"]["reason"].is_string());
    assert_eq!(seq(err["body"]["position"].as_str().unwrap()), 2);
    assert!(server.connections()[0].subscriptions.is_empty());
    // With fast_forward: ok at the oldest message, info fast_forward, the replay.
    let ok = c.ok(
        "rtm/subscribe",
        json!({"channel": "e", "position": first, "fast_forward": true}),
    );
    assert_eq!(seq(ok["position"].as_str().unwrap()), 2);
    let info = c.recv();
    assert_eq!(info["action"], "rtm/subscription/info");
    assert_eq!(info["body"]["info"], "fast_forward");
    assert!(info.get("id").is_none());
    assert_eq!(c.messages("e", 3), [json!(2), json!(3), json!(4)]);
    c.ok("rtm/unsubscribe", json!({"subscription_id": "e"}));

    // A byte budget discards old messages too (the newest always stays).
    let config = RtmServerConfig {
        history_bytes: 10,
        ..RtmServerConfig::default()
    };
    let bytes = start(config);
    let mut b = connect(&bytes);
    for m in ["\"aaaa\"", "\"bbbb\"", "\"cccccccccccccccc\""] {
        b.send_text(&format!(
            r#"{{"action":"rtm/publish","body":{{"channel":"b","message":{m}}}}}"#
        ));
    }
    b.ok(
        "rtm/subscribe",
        json!({"channel": "b", "position": "0:0", "fast_forward": true}),
    );
    assert_eq!(b.recv()["body"]["info"], "fast_forward");
    assert_eq!(b.messages("b", 1), [json!("cccccccccccccccc")]);

    // Expiry by age, and the expired_position variant.
    let config = RtmServerConfig {
        message_ttl: Some(Duration::from_millis(100)),
        expired_error: "expired_position".to_owned(),
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let mut c = connect(&server);
    let old = c.publish("t", json!("old"));
    // Older than the TTL, instead of waiting for it.
    assert!(server.faults().age_history("t", Duration::from_millis(200)));
    c.ok("rtm/subscribe", json!({"channel": "t", "position": old}));
    assert_eq!(c.recv()["body"]["error"], "expired_position");
    // The value stays readable: key-value semantics.
    assert_eq!(c.ok("rtm/read", json!({"channel": "t"}))["message"], "old");
    // And Faults::expire_history discards on demand.
    let p = c.publish("t", json!("new"));
    assert!(server.faults().expire_history("t"));
    c.ok(
        "rtm/subscribe",
        json!({"channel": "t", "position": p, "fast_forward": true}),
    );
    assert_eq!(c.recv()["body"]["info"], "fast_forward");
    c.publish("t", json!("live"));
    assert_eq!(c.messages("t", 1), [json!("live")]);
}

#[test]
fn slow_subscribers_get_out_of_sync_or_fast_forward() {
    let config = RtmServerConfig {
        max_queued_frames: 2,
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let mut plain = connect(&server);
    let mut ff = connect(&server);
    plain.ok("rtm/subscribe", json!({"channel": "big"}));
    ff.ok(
        "rtm/subscribe",
        json!({"channel": "big", "fast_forward": true}),
    );
    // Nobody reads while 40 MB go out: socket buffers fill, then the outboxes.
    let message = format!("\"{}\"", "x".repeat(500_000));
    for _ in 0..80 {
        server.publish("big", &message).unwrap();
    }
    let mut saw_error = false;
    for _ in 0..81 {
        let pdu = plain.recv();
        if pdu["action"] == "rtm/subscription/error" {
            assert_eq!(pdu["body"]["error"], "out_of_sync");
            saw_error = true;
            break;
        }
    }
    assert!(saw_error);
    // The fast-forward subscriber drains what it was sent (everything before the reply
    // to a request it makes now); the next message that fits comes with a fast_forward
    // info first.
    let reply = ff.call(
        "rtm/publish",
        json!({"channel": "drain.marker", "message": null}),
    );
    assert_eq!(reply["action"], "rtm/publish/ok", "{reply}");
    let received = ff.pending.len();
    ff.pending.clear();
    assert!(received < 80, "some messages were skipped");
    server.publish("big", "\"last\"").unwrap();
    let info = ff.recv();
    assert_eq!(info["body"]["info"], "fast_forward", "{info}");
    assert_eq!(ff.messages("big", 1), [json!("last")]);
    assert_eq!(server.connections()[1].subscriptions, ["big"]);
}

#[test]
fn key_value_sequences() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    fn read(c: &mut Client, ch: &str) -> Value {
        c.ok("rtm/read", json!({"channel": ch}))["message"].clone()
    }
    assert_eq!(read(&mut c, "never"), Value::Null);
    c.ok("rtm/write", json!({"channel": "k1", "message": "v"}));
    assert_eq!(read(&mut c, "k1"), "v");
    c.ok("rtm/write", json!({"channel": "k2", "message": 1}));
    c.ok("rtm/write", json!({"channel": "k2", "message": 2}));
    assert_eq!(read(&mut c, "k2"), 2);
    let del = c.ok("rtm/delete", json!({"channel": "k3"}));
    assert!(del["position"].is_string());
    assert_eq!(read(&mut c, "k3"), Value::Null);
    c.ok("rtm/write", json!({"channel": "k4", "message": {"a": 1}}));
    c.ok("rtm/delete", json!({"channel": "k4"}));
    assert_eq!(read(&mut c, "k4"), Value::Null);
    c.ok("rtm/write", json!({"channel": "k5", "message": "a"}));
    c.ok("rtm/delete", json!({"channel": "k5"}));
    c.ok("rtm/write", json!({"channel": "k5", "message": "b"}));
    assert_eq!(read(&mut c, "k5"), "b");
    // Publish and write are the same to readers and subscribers.
    c.publish("k5", json!("c"));
    assert_eq!(read(&mut c, "k5"), "c");
    let first = c.ok("rtm/read", json!({"channel": "k5", "position": "0:0"}));
    assert_eq!(
        (
            first["message"].clone(),
            seq(first["position"].as_str().unwrap())
        ),
        (json!("a"), 0)
    );
    assert_eq!(
        c.error("rtm/read", json!({"channel": "k5", "position": "x"}))["error"],
        "invalid_format"
    );
    assert_eq!(
        c.error("rtm/write", json!({"channel": "k5"}))["error"],
        "invalid_format"
    );
}

#[test]
fn role_secret_auth_with_spec_vector_3() {
    let config = RtmServerConfig {
        fixed_nonce: Some("MTI0Njg4NTAyMjYxMzgxMzgzMg==".to_owned()),
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let mut c = connect(&server);
    // The Python SDK's exchange for this role, secret and nonce, byte for byte (key order
    // aside).
    c.send_text(r#"{"action":"auth/handshake","id":0,"body":{"method":"role_secret","data":{"role":"superuser"}}}"#);
    assert_eq!(
        c.recv_text(),
        r#"{"action":"auth/handshake/ok","id":0,"body":{"data":{"nonce":"MTI0Njg4NTAyMjYxMzgxMzgzMg=="}}}"#
    );
    c.send_text(r#"{"action":"auth/authenticate","id":1,"body":{"method":"role_secret","credentials":{"hash":"P6COJ5aXJvIRoJO1PaYREw=="}}}"#);
    assert_eq!(
        c.recv_text(),
        r#"{"action":"auth/authenticate/ok","id":1,"body":{}}"#
    );
    c.next_id = 2;
    c.publish("restricted_channel", json!(1));
    assert_eq!(
        server.connections()[0].role.as_deref(),
        Some(SUPERUSER_ROLE)
    );
    // Permissions last for the connection only.
    let mut other = connect(&server);
    let err = other.error(
        "rtm/publish",
        json!({"channel": "restricted_channel", "message": 1}),
    );
    assert_eq!(err["error"], "authorization_denied");

    // A bad secret, an unknown role, no handshake, a reused nonce: all Unauthenticated.
    let mut d = connect(&server);
    d.ok(
        "auth/handshake",
        json!({"method": "role_secret", "data": {"role": "superuser"}}),
    );
    let err = d.error(
        "auth/authenticate",
        json!({"method": "role_secret", "credentials": {"hash": "CzrVc2jGuqBUt9z5hlUklw=="}}),
    );
    assert_eq!(
        (err["error"].as_str(), err["reason"].as_str()),
        (Some("authentication_failed"), Some("Unauthenticated"))
    );
    let good =
        json!({"method": "role_secret", "credentials": {"hash": "P6COJ5aXJvIRoJO1PaYREw=="}});
    assert_eq!(
        d.error("auth/authenticate", good.clone())["reason"],
        "Unauthenticated"
    );
    d.ok(
        "auth/handshake",
        json!({"method": "role_secret", "data": {"role": "nobody"}}),
    );
    assert_eq!(
        d.error("auth/authenticate", good.clone())["reason"],
        "Unauthenticated"
    );
    d.ok(
        "auth/handshake",
        json!({"method": "role_secret", "data": {"role": "superuser"}}),
    );
    d.ok("auth/authenticate", good);
    assert_eq!(
        d.error(
            "auth/handshake",
            json!({"method": "other", "data": {"role": "x"}})
        )["error"],
        "invalid_format"
    );
    assert_eq!(
        d.error("auth/authenticate", json!({"method": "role_secret"}))["error"],
        "invalid_format"
    );
}

#[test]
fn fresh_nonce_per_handshake_and_custom_roles() {
    let reader = Permissions {
        subscribe: vec!["news.*".to_owned()],
        read: vec!["news.*".to_owned()],
        ..Permissions::none()
    };
    let config = RtmServerConfig {
        roles: vec![Role::new("reader", "s3cret", reader)],
        default_permissions: Permissions::none(),
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let mut c = connect(&server);
    let hs = json!({"method": "role_secret", "data": {"role": "reader"}});
    let n1 = c.ok("auth/handshake", hs.clone())["data"]["nonce"]
        .as_str()
        .unwrap()
        .to_owned();
    let n2 = c.ok("auth/handshake", hs)["data"]["nonce"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(n1, n2);
    assert_eq!(n1.len(), 24);
    // Unauthenticated: nothing is allowed; every operation gets the same error body.
    for (action, body) in [
        ("rtm/publish", json!({"channel": "news.a", "message": 1})),
        ("rtm/subscribe", json!({"channel": "news.a"})),
        (
            "rtm/subscribe",
            json!({"subscription_id": "v", "filter": "select * from news.a"}),
        ),
        ("rtm/read", json!({"channel": "news.a"})),
        ("rtm/write", json!({"channel": "news.a", "message": 1})),
        ("rtm/delete", json!({"channel": "news.a"})),
    ] {
        let err = c.error(action, body);
        assert_eq!(
            err,
            json!({"error": "authorization_denied", "reason": "Unauthorized"})
        );
    }
    // The hash of the latest nonce authenticates.
    let hash = hmac_md5_base64("s3cret", &n2);
    c.ok(
        "auth/authenticate",
        json!({"method": "role_secret", "credentials": {"hash": hash}}),
    );
    c.ok("rtm/subscribe", json!({"channel": "news.a"}));
    c.ok("rtm/read", json!({"channel": "news.b"}));
    assert_eq!(
        c.error("rtm/publish", json!({"channel": "news.a", "message": 1}))["error"],
        "authorization_denied"
    );
    assert_eq!(
        c.error("rtm/subscribe", json!({"channel": "sports"}))["error"],
        "authorization_denied"
    );
}

/// Textbook HMAC-MD5 + base64 through the same crates a client would use.
fn hmac_md5_base64(secret: &str, nonce: &str) -> String {
    use base64::Engine as _;
    use hmac::Mac as _;
    let mut mac = hmac::Hmac::<md5::Md5>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(nonce.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

#[test]
fn unauthorized_publish_is_the_exact_spec_pdu() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    c.send_text(r#"{"action":"rtm/publish","id":0,"body":{"channel":"restricted","message":1}}"#);
    assert_eq!(
        c.recv_text(),
        r#"{"action":"rtm/publish/error","id":0,"body":{"error":"authorization_denied","reason":"Unauthorized"}}"#
    );
    assert_eq!(SUPERUSER_SECRET.len(), 32);
}

#[test]
fn views_project_fields() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    let ok = c.ok(
        "rtm/subscribe",
        json!({"subscription_id": "view1", "filter": "select test from fch"}),
    );
    assert_eq!(ok["subscription_id"], "view1");
    c.ok(
        "rtm/subscribe",
        json!({"subscription_id": "all", "filter": "SELECT * FROM `fch`"}),
    );
    c.publish("fch", json!({"test": 42, "unused": 1}));
    c.publish("fch", json!({"unused": 1}));
    let mut view = Vec::new();
    let mut all = Vec::new();
    for _ in 0..4 {
        let pdu = c.recv();
        let target = if pdu["body"]["subscription_id"] == "view1" {
            &mut view
        } else {
            &mut all
        };
        target.extend(pdu["body"]["messages"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(view, [json!({"test": 42}), json!({"test": null})]);
    assert_eq!(
        all,
        [json!({"test": 42, "unused": 1}), json!({"unused": 1})]
    );
    assert_eq!(server.faults().drop_subscribers("fch"), 1);
}

#[test]
fn value_changes_deduplicates_consecutive_messages() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    c.publish("vc", json!("first"));
    c.ok(
        "rtm/subscribe",
        json!({"channel": "vc", "only": "value_changes", "history": {"count": 1}}),
    );
    assert_eq!(c.messages("vc", 1), [json!("first")]);
    for _ in 0..10 {
        c.publish("vc", json!("second"));
    }
    c.publish("vc", json!("third"));
    c.publish("vc", json!({"a": 1, "b": 2}));
    c.send_text(r#"{"action":"rtm/publish","body":{"channel":"vc","message":{"b":2,"a":1}}}"#);
    c.publish("vc", json!("first"));
    assert_eq!(
        c.messages("vc", 4),
        [
            json!("second"),
            json!("third"),
            json!({"a": 1, "b": 2}),
            json!("first")
        ]
    );
    // The resume position counts the skipped messages too.
    let ok = c.ok("rtm/unsubscribe", json!({"subscription_id": "vc"}));
    assert_eq!(seq(ok["position"].as_str().unwrap()), 15);
}

#[test]
fn legacy_search_lists_each_channel_once() {
    let config = RtmServerConfig {
        search_batch: 2,
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let mut c = connect(&server);
    for ch in ["s.a", "s.b", "s.c", "s.d", "s.e", "other"] {
        c.publish(ch, json!(1));
    }
    let id = c.request("rtm/search", json!({"prefix": "s."}));
    let mut names = Vec::new();
    let mut datas = 0;
    loop {
        let pdu = c.recv();
        assert_eq!(pdu["id"], id);
        names.extend(pdu["body"]["channels"].as_array().unwrap().iter().cloned());
        if pdu["action"] == "rtm/search/ok" {
            break;
        }
        assert_eq!(pdu["action"], "rtm/search/data");
        datas += 1;
    }
    assert_eq!(datas, 2);
    assert_eq!(names, ["s.a", "s.b", "s.c", "s.d", "s.e"]);
    assert_eq!(
        c.ok("rtm/search", json!({"prefix": "zzz"}))["channels"],
        json!([])
    );
    // Off: an unknown action.
    let config = RtmServerConfig {
        search: false,
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let mut c = connect(&server);
    assert_eq!(
        c.error("rtm/search", json!({"prefix": ""}))["error"],
        "invalid_operation"
    );
}

#[test]
fn malformed_input_never_kills_the_server() {
    let config = RtmServerConfig {
        max_message_size: 10_000,
        ..RtmServerConfig::default()
    };
    let server = start(config);
    let mut c = connect(&server);
    c.send_text("not json");
    let err = c.recv();
    assert_eq!(
        (err["action"].as_str(), err["body"]["error"].as_str()),
        (Some("/error"), Some("invalid_json"))
    );
    assert!(err.get("id").is_none());
    c.send_text("[1,2]");
    assert_eq!(c.recv()["action"], "/error");
    c.send_text(r#"{"id":5,"body":{}}"#);
    let err = c.recv();
    assert_eq!(
        (err["action"].as_str(), err["id"].as_u64()),
        (Some("/error"), Some(5))
    );
    c.send_text(r#"{"action":"rtm/publish","id":6}"#);
    let err = c.recv();
    assert_eq!(
        (err["action"].as_str(), err["body"]["error"].as_str()),
        (Some("rtm/publish/error"), Some("invalid_format"))
    );
    c.send_text(r#"{"action":"rtm/publish","id":7,"body":[]}"#);
    assert_eq!(c.recv()["action"], "rtm/publish/error");
    let err = c.error("what/ever", json!({}));
    assert_eq!(err["error"], "invalid_operation");
    // Deeply nested JSON is refused by the parser's recursion limit, not a crash.
    c.send_text(&format!("{}{}", "[".repeat(5000), "]".repeat(5000)));
    assert_eq!(c.recv()["body"]["error"], "invalid_json");
    // Binary frames are read as JSON text (like the C SDK).
    c.ws.send(Message::binary(
        br#"{"action":"rtm/publish","id":"b","body":{"channel":"x","message":1}}"#.to_vec(),
    ))
    .unwrap();
    assert_eq!(c.recv()["action"], "rtm/publish/ok");
    c.ws.send(Message::binary(vec![0xff, 0x00, 0xc3])).unwrap();
    assert_eq!(c.recv()["body"]["error"], "invalid_json");
    // Fragmented messages are reassembled.
    use tungstenite::protocol::frame::{
        coding::{Data, OpCode},
        Frame,
    };
    let text = br#"{"action":"rtm/publish","id":"f","body":{"channel":"x","message":2}}"#;
    let first = Frame::message(text[..10].to_vec(), OpCode::Data(Data::Text), false);
    c.ws.write(Message::Frame(first)).unwrap();
    c.ws.write(Message::Frame(Frame::message(
        text[10..].to_vec(),
        OpCode::Data(Data::Continue),
        true,
    )))
    .unwrap();
    c.ws.flush().unwrap();
    assert_eq!(c.recv()["id"], "f");
    // Pings are answered.
    c.ws.send(Message::Ping(b"py".to_vec().into())).unwrap();
    loop {
        if let Message::Pong(p) = c.ws.read().unwrap() {
            assert_eq!(&p[..], b"py");
            break;
        }
    }
    // A message over the limit closes the connection with 1009.
    c.send_text(&"x".repeat(20_000));
    match c.ws.read() {
        Ok(Message::Close(Some(frame))) => assert_eq!(frame.code, CloseCode::Size),
        other => panic!("{other:?}"),
    }
    // Raw garbage instead of frames.
    use std::io::Write;
    let mut raw = TcpStream::connect(server.addr()).unwrap();
    raw.write_all(b"\x00\x01garbage\r\n\r\n").unwrap();
    let mut ok = connect(&server);
    ok.publish("x", json!(3));
    assert!(server
        .attempts()
        .iter()
        .any(|a| a.outcome == AttemptOutcome::HandshakeFailed
            || a.outcome == AttemptOutcome::Pending));
}

#[test]
fn fault_drop_close_and_pings() {
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    let mut a = connect(&server);
    let mut b = connect(&server);
    a.ok("rtm/subscribe", json!({"channel": "da"}));
    b.ok("rtm/subscribe", json!({"channel": "db"}));
    assert_eq!(faults.drop_subscribers("da"), 1);
    a.closed();
    b.publish("db", json!(1));
    assert_eq!(b.messages("db", 1), [json!(1)]);
    assert!(server.wait_for_connections(WAIT, |c| c.iter().filter(|c| c.open).count() == 1));
    assert_eq!(faults.drop_connections(), 1);
    b.closed();

    // A close frame with a code, then the socket closes.
    let mut c = connect(&server);
    // c registered (its client may see the 101 first) and b's end recorded: otherwise
    // the close could go to b alone.
    assert!(server.wait_for_connections(WAIT, |c| {
        c.len() == 3 && c[2].open && c.iter().filter(|c| c.open).count() == 1
    }));
    assert_eq!(faults.close_connections(1001), 1);
    match c.ws.read() {
        Ok(Message::Close(Some(frame))) => assert_eq!(frame.code, CloseCode::Away),
        other => panic!("{other:?}"),
    }

    // Pings go unanswered while the fault is on.
    let mut d = connect(&server);
    faults.answer_pings(false);
    d.ws.send(Message::Ping(b"1".to_vec().into())).unwrap();
    d.quiet();
    faults.answer_pings(true);
    d.ws.send(Message::Ping(b"2".to_vec().into())).unwrap();
    match d.ws.read().unwrap() {
        Message::Pong(p) => assert_eq!(&p[..], b"2"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn fault_subscription_error_info_and_raw() {
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    let mut c = connect(&server);
    c.ok("rtm/subscribe", json!({"channel": "adv"}));
    c.ok("rtm/subscribe", json!({"channel": "rel"}));
    assert_eq!(faults.inject_fast_forward("rel"), 1);
    let info = c.recv();
    assert_eq!(info["action"], "rtm/subscription/info");
    assert_eq!(info["body"]["info"], "fast_forward");
    assert_eq!(info["body"]["subscription_id"], "rel");
    assert!(info["body"]["position"].is_string());
    assert_eq!(
        faults.inject_subscription_error("adv", "out_of_sync", "Too slow"),
        1
    );
    let err = c.recv();
    assert_eq!(err["action"], "rtm/subscription/error");
    assert_eq!(
        err["body"],
        json!({"subscription_id": "adv", "error": "out_of_sync", "reason": "Too slow", "position": err["body"]["position"].clone()})
    );
    // The subscription is over: a message published now does not arrive on it.
    c.publish("adv", json!("lost"));
    c.publish("rel", json!("kept"));
    assert_eq!(c.messages("rel", 1), [json!("kept")]);
    assert_eq!(
        faults.inject_subscription_error("adv", "out_of_sync", "again"),
        0
    );
    assert_eq!(server.connections()[0].subscriptions, ["rel"]);

    for raw in [
        "garbage",
        r#"{"action":"rtm/publish/ok","id":0}"#,
        r#"{"id":0,"body":{}}"#,
        r#"{"action":"rtm/publish/ok","body":{}}"#,
        r#"{"action":"/error","body":{"error":"x","reason":"y"}}"#,
        r#"{"action":"rtm/publish/ok","id":12345,"body":{}}"#,
    ] {
        assert_eq!(faults.send_raw(raw), 1);
        assert_eq!(c.recv_text(), raw);
    }
    let id = server.connections()[0].id;
    assert!(faults.send_raw_to(id, "to one"));
    assert_eq!(c.recv_text(), "to one");
    assert!(!faults.send_raw_to(999, "nobody"));
}

#[test]
fn fault_reply_overrides_delays_and_rejections() {
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    let mut c = connect(&server);
    // A reply of the wrong type for a subscribe, once.
    faults.override_replies(
        "rtm/subscribe",
        ReplyOverride::Raw(r#"{"action":"rtm/publish/ok","id":{id},"body":{}}"#.to_owned()),
        Some(1),
    );
    let reply = c.call("rtm/subscribe", json!({"channel": "o"}));
    assert_eq!(reply["action"], "rtm/publish/ok");
    assert!(
        server.connections()[0].subscriptions.is_empty(),
        "not carried out"
    );
    c.ok("rtm/subscribe", json!({"channel": "o"}));
    // Silence for reads, until cleared.
    faults.override_replies("rtm/read", ReplyOverride::Silence, None);
    c.request("rtm/read", json!({"channel": "o"}));
    c.quiet();
    faults.clear();
    c.ok("rtm/read", json!({"channel": "o"}));

    // A delayed subscribe/ok still comes before the data.
    faults.delay_subscribe_ok(Some(Duration::from_millis(300)));
    let before = Instant::now();
    c.send(&json!({"action": "rtm/subscribe", "id": 100, "body": {"channel": "late", "history": {"count": 1}}}));
    server.publish("late", "1").unwrap();
    let ok = c.recv();
    assert_eq!(
        (ok["action"].as_str(), ok["id"].as_u64()),
        (Some("rtm/subscribe/ok"), Some(100))
    );
    assert!(before.elapsed() >= Duration::from_millis(290));
    assert_eq!(c.messages("late", 1), [json!(1)]);
    faults.delay_subscribe_ok(None);

    faults.reject_subscribes(true);
    let err = c.error("rtm/subscribe", json!({"channel": "r"}));
    assert_eq!(err["error"], "invalid_format");
    faults.reject_subscribes(false);
    c.ok("rtm/subscribe", json!({"channel": "r"}));

    faults.reject_auth(true);
    let hs = json!({"method": "role_secret", "data": {"role": SUPERUSER_ROLE}});
    let nonce = c.ok("auth/handshake", hs.clone())["data"]["nonce"]
        .as_str()
        .unwrap()
        .to_owned();
    let creds = |n: &str| json!({"method": "role_secret", "credentials": {"hash": hmac_md5_base64(SUPERUSER_SECRET, n)}});
    assert_eq!(
        c.error("auth/authenticate", creds(&nonce))["reason"],
        "Unauthenticated"
    );
    faults.reject_auth(false);
    let nonce = c.ok("auth/handshake", hs)["data"]["nonce"]
        .as_str()
        .unwrap()
        .to_owned();
    c.ok("auth/authenticate", creds(&nonce));
}

#[test]
fn fault_refused_connections_and_attempt_times() {
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    faults.refuse_connections(ConnectFault::Status(503), Some(2));
    for _ in 0..2 {
        match try_connect(&server, "/v2", DEFAULT_APPKEY) {
            Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 503),
            other => panic!("{:?}", other.err()),
        }
    }
    connect(&server);
    faults.refuse_connections(ConnectFault::CloseTcp, None);
    assert!(try_connect(&server, "/v2", DEFAULT_APPKEY).is_err());
    // Between the two refused attempts, on the test's clock: their times must fall on
    // either side of it.
    let between = Instant::now();
    assert!(try_connect(&server, "/v2", DEFAULT_APPKEY).is_err());
    faults.refuse_connections(ConnectFault::CloseAfterUpgrade, Some(1));
    let mut c = try_connect(&server, "/v2", DEFAULT_APPKEY).expect("the upgrade succeeds");
    c.closed();
    connect(&server).publish("x", json!(1));
    let attempts = server.attempts();
    let outcomes: Vec<AttemptOutcome> = attempts.iter().map(|a| a.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            AttemptOutcome::Rejected(503),
            AttemptOutcome::Rejected(503),
            AttemptOutcome::Upgraded,
            AttemptOutcome::Refused,
            AttemptOutcome::Refused,
            AttemptOutcome::ClosedAfterUpgrade,
            AttemptOutcome::Upgraded,
        ]
    );
    // Attempt times are in order, and they are the times of the attempts.
    assert!(attempts.windows(2).all(|w| w[0].at <= w[1].at));
    assert!(
        attempts[3].at <= between && between <= attempts[4].at,
        "{attempts:?}"
    );
    assert_eq!(
        attempts.iter().map(|a| a.id).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );
}

#[test]
fn transcripts_record_what_each_connection_sent() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    c.send_text(
        r#"{"action":"rtm/subscribe","id":0,"body":{"channel": "chan", "fast_forward": true}}"#,
    );
    c.recv();
    c.send_text(r#"{"action":"rtm/publish","body":{"channel":"chan","message": {"k": 1}}}"#);
    c.recv();
    server.faults().drop_connections();
    c.closed();
    assert!(server.wait_for_connections(WAIT, |c| !c[0].open));
    let info = &server.connections()[0];
    assert_eq!(
        info.received,
        [
            r#"{"action":"rtm/subscribe","id":0,"body":{"channel": "chan", "fast_forward": true}}"#,
            r#"{"action":"rtm/publish","body":{"channel":"chan","message": {"k": 1}}}"#,
        ]
    );
    assert_eq!(info.received_count, 2);
    assert!(info.subscriptions.is_empty());
}

#[test]
fn shutdown_closes_everything_and_frees_the_port() {
    // The half-open upgrade below would end by itself only at the handshake timeout:
    // far beyond the guard, so that shutdown must close it rather than wait it out.
    let server = start(RtmServerConfig {
        handshake_timeout: Duration::from_secs(3600),
        ..RtmServerConfig::default()
    });
    let addr = server.addr();
    let mut c = connect(&server);
    c.ok("rtm/subscribe", json!({"channel": "s"}));
    // A half-open upgrade too.
    let _idle = TcpStream::connect(addr).unwrap();
    // Guarded: a shutdown that waited for the connections to end by themselves would
    // not return before the handshake timeout.
    returns("shutdown with open connections", move || server.shutdown());
    c.closed();
    TcpListener::bind(addr).expect("the port is free again");
}

#[test]
fn mutated_pdus_get_answers_or_nothing_never_a_crash() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    let seeds = [
        r#"{"action":"rtm/publish","id":0,"body":{"channel":"m","message":{"a":[1,2]}}}"#,
        r#"{"action":"rtm/subscribe","id":1,"body":{"channel":"m","position":"1:0","history":{"count":2},"fast_forward":true}}"#,
        r#"{"action":"rtm/subscribe","id":2,"body":{"subscription_id":"v","filter":"select a from m","only":"value_changes"}}"#,
        r#"{"action":"rtm/unsubscribe","id":3,"body":{"subscription_id":"m"}}"#,
        r#"{"action":"rtm/read","id":4,"body":{"channel":"m","position":"1:0"}}"#,
        r#"{"action":"auth/handshake","id":5,"body":{"method":"role_secret","data":{"role":"superuser"}}}"#,
        r#"{"action":"auth/authenticate","id":6,"body":{"method":"role_secret","credentials":{"hash":"x"}}}"#,
        r#"{"action":"rtm/search","id":7,"body":{"prefix":"m"}}"#,
    ];
    let alphabet = br#"{}[]":,01-9.aez\ nulltrue"#;
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for i in 0..2000 {
        let mut bytes = seeds[i % seeds.len()].as_bytes().to_vec();
        for _ in 0..=(next() % 4) {
            if bytes.is_empty() {
                break;
            }
            let at = (next() as usize) % bytes.len();
            match next() % 3 {
                0 => bytes[at] = alphabet[(next() as usize) % alphabet.len()],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.truncate(at),
            }
        }
        if bytes.is_empty() {
            continue;
        }
        c.ws.write(Message::text(String::from_utf8(bytes).unwrap()))
            .unwrap();
        if i % 100 == 0 {
            c.ws.flush().unwrap();
        }
    }
    c.ws.flush().unwrap();
    // Drain the answers, then the connection (and the server) still work.
    c.send_text(r#"{"action":"rtm/publish","id":"end","body":{"channel":"fin","message":1}}"#);
    loop {
        let pdu = c.recv();
        assert!(pdu["action"].is_string(), "{pdu}");
        if pdu["id"] == "end" {
            assert_eq!(pdu["action"], "rtm/publish/ok");
            break;
        }
    }
    connect(&server).publish("fin", json!(2));
}

/// A client that speaks WebSocket by hand, to see the server's frames exactly as they
/// are on the wire (fragments, control frames, FIN bits).
struct Raw {
    tcp: TcpStream,
    reader: std::io::BufReader<TcpStream>,
}

/// One server frame.
#[derive(Debug, PartialEq, Eq)]
struct RawFrame {
    fin: bool,
    opcode: u8,
    payload: Vec<u8>,
}

impl RawFrame {
    fn text(&self) -> &str {
        std::str::from_utf8(&self.payload).unwrap()
    }
}

impl Raw {
    /// Connects and upgrades; returns the client and its connection id.
    fn connect(server: &RtmServer) -> (Raw, u64) {
        use std::io::{BufRead, Write};
        let before = server.connections().len();
        let mut tcp = TcpStream::connect(server.addr()).unwrap();
        tcp.set_read_timeout(Some(WAIT)).unwrap();
        write!(
            tcp,
            "GET /v2?appkey={DEFAULT_APPKEY} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: cnRtLXNlY3VyaXR5LWtleQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut reader = std::io::BufReader::with_capacity(1 << 16, tcp.try_clone().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 101"), "{line}");
        while line != "\r\n" {
            line.clear();
            reader.read_line(&mut line).unwrap();
        }
        assert!(server.wait_for_connections(WAIT, |c| c.len() > before));
        let id = server.connections()[before].id;
        (Raw { tcp, reader }, id)
    }

    /// Sends one masked frame.
    fn send(&mut self, opcode: u8, payload: &[u8]) {
        use std::io::Write;
        self.tcp.write_all(&masked(opcode, payload)).unwrap();
    }

    fn send_text(&mut self, text: &str) {
        self.send(0x1, text.as_bytes());
    }

    /// The next frame.
    fn frame(&mut self) -> RawFrame {
        self.try_frame().expect("a frame")
    }

    /// The next frame; `None` when the connection ends or nothing comes in time.
    fn try_frame(&mut self) -> Option<RawFrame> {
        use std::io::Read;
        let mut head = [0u8; 2];
        self.reader.read_exact(&mut head).ok()?;
        assert_eq!(head[1] & 0x80, 0, "server frames are not masked");
        let len = match head[1] & 0x7F {
            126 => {
                let mut n = [0u8; 2];
                self.reader.read_exact(&mut n).unwrap();
                u64::from(u16::from_be_bytes(n))
            }
            127 => {
                let mut n = [0u8; 8];
                self.reader.read_exact(&mut n).unwrap();
                u64::from_be_bytes(n)
            }
            n => u64::from(n),
        };
        let mut payload = vec![0; usize::try_from(len).unwrap()];
        self.reader.read_exact(&mut payload).unwrap();
        Some(RawFrame {
            fin: head[0] & 0x80 != 0,
            opcode: head[0] & 0x0F,
            payload,
        })
    }

    /// Sends a request now (a read with an id of its own) and reads up to its reply;
    /// returns the frames that came before it. The server sends a connection everything
    /// caused before a request first, so when the reply is in, what was on its way has
    /// come: the event to wait for instead of a quiet spell.
    fn barrier(&mut self) -> Vec<RawFrame> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = format!(
            "barrier-{}",
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        self.send_text(&format!(
            r#"{{"action":"rtm/read","id":"{id}","body":{{"channel":"barrier"}}}}"#
        ));
        let reply = format!(r#"{{"action":"rtm/read/ok","id":"{id}""#);
        let mut before = Vec::new();
        loop {
            let f = self.frame();
            if f.opcode == 0x1 && f.fin && f.text().starts_with(&reply) {
                return before;
            }
            before.push(f);
        }
    }
}

/// A masked client frame with FIN.
fn masked(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x11, 0x22, 0x33, 0x44];
    let mut out = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

const PING: u8 = 0x9;
const PONG: u8 = 0xA;

#[test]
fn fault_ping_flood() {
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    let (mut a, a_id) = Raw::connect(&server);
    let (mut b, _) = Raw::connect(&server);
    // One connection: pings back to back, far more than any client would send.
    assert!(faults.set_socket_fault_on(a_id, Some(SocketFault::PingFlood)));
    for _ in 0..20_000 {
        let f = a.frame();
        assert_eq!(
            (f.fin, f.opcode, f.payload.as_slice()),
            (true, PING, &b"flood"[..])
        );
    }
    // Requests are still served: the reply comes between pings.
    a.send_text(r#"{"action":"rtm/publish","id":1,"body":{"channel":"p","message":1}}"#);
    let reply = loop {
        let f = a.frame();
        if f.opcode != PING {
            break f;
        }
    };
    assert!(
        reply
            .text()
            .starts_with(r#"{"action":"rtm/publish/ok","id":1"#),
        "{reply:?}"
    );
    // The other connection is left alone.
    b.send_text(r#"{"action":"rtm/read","id":2,"body":{"channel":"p"}}"#);
    assert!(b.frame().text().starts_with(r#"{"action":"rtm/read/ok""#));
    assert_eq!(b.barrier(), []);
    // Cleared: what was already on its way arrives, then nothing more.
    assert!(faults.set_socket_fault_on(a_id, None));
    a.barrier();
    a.send(PING, b"still there?");
    assert_eq!(
        a.frame(),
        RawFrame {
            fin: true,
            opcode: PONG,
            payload: b"still there?".to_vec()
        }
    );
    assert_eq!(a.barrier(), []);

    // For every connection, present and future; the flood ends with the connection.
    assert_eq!(faults.set_socket_fault(Some(SocketFault::PingFlood)), 2);
    let (mut c, c_id) = Raw::connect(&server);
    for client in [&mut a, &mut b, &mut c] {
        for _ in 0..1000 {
            assert_eq!(client.frame().opcode, PING);
        }
    }
    drop(c);
    assert!(
        server.wait_for_connections(WAIT, |conns| conns.iter().any(|x| x.id == c_id && !x.open))
    );
    faults.clear();
    for client in [&mut a, &mut b] {
        client.barrier();
        client.send(PING, b"1");
        assert_eq!(client.frame().opcode, PONG);
    }
}

#[test]
fn fault_data_flood() {
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    let (mut c, id) = Raw::connect(&server);
    let position = |pdu: &Value| seq(pdu["body"]["position"].as_str().unwrap());
    // Set before the subscription exists: the flood starts with it, after subscribe/ok.
    let fault = SocketFault::DataFlood {
        subscription_id: "flood".to_owned(),
        message: r#"{"k":[1,"v"]}"#.to_owned(),
    };
    assert!(faults.set_socket_fault_on(id, Some(fault.clone())));
    assert_eq!(c.barrier(), [], "no subscription, no flood");
    server.publish("ch", "0").unwrap();
    c.send_text(
        r#"{"action":"rtm/subscribe","id":1,"body":{"channel":"ch","subscription_id":"flood"}}"#,
    );
    let ok: Value = serde_json::from_str(c.frame().text()).unwrap();
    assert_eq!(ok["action"], "rtm/subscribe/ok");
    let mut last = seq(ok["body"]["position"].as_str().unwrap());
    // Valid data PDUs with increasing positions; real data fits in between.
    // (The socket buffers hold thousands of flood PDUs written before the real one.)
    let mut real = false;
    let mut i = 0;
    while i < 5000 || !real {
        assert!(i < 2_000_000, "the published message never came");
        i += 1;
        if i == 2000 {
            server.publish("ch", r#""real""#).unwrap();
        }
        let f = c.frame();
        assert_eq!((f.fin, f.opcode), (true, 0x1));
        let pdu: Value = serde_json::from_str(f.text()).unwrap();
        assert_eq!(pdu["action"], "rtm/subscription/data", "{pdu}");
        assert_eq!(pdu["body"]["subscription_id"], "flood");
        let messages = pdu["body"]["messages"].as_array().unwrap();
        // Flood PDUs batch 100 messages; a real one comes alone.
        if messages == &[json!("real")] {
            real = true;
        } else {
            assert_eq!(messages.len(), 100);
            assert!(
                messages.iter().all(|m| *m == json!({"k": [1, "v"]})),
                "{pdu}"
            );
        }
        let p = position(&pdu);
        assert!(p > last, "{p} after {last}");
        last = p;
    }
    // The flood follows the subscription: an unsubscribe pauses it.
    c.send_text(r#"{"action":"rtm/unsubscribe","id":2,"body":{"subscription_id":"flood"}}"#);
    let unsubscribed = loop {
        let pdu: Value = serde_json::from_str(c.frame().text()).unwrap();
        if pdu["action"] != "rtm/subscription/data" {
            break pdu;
        }
        last = position(&pdu);
    };
    assert_eq!(unsubscribed["action"], "rtm/unsubscribe/ok");
    assert_eq!(
        position(&unsubscribed),
        last,
        "the resume position follows the flood"
    );
    assert_eq!(c.barrier(), []);
    // Position checks of a later message.
    let next = seq(&server.publish("ch", "1").unwrap());
    assert_eq!(
        next, last,
        "flood messages took the channel's sequence numbers"
    );
    // Globally, and cleared.
    assert_eq!(faults.set_socket_fault(Some(fault)), 1);
    c.send_text(
        r#"{"action":"rtm/subscribe","id":3,"body":{"channel":"ch","subscription_id":"flood"}}"#,
    );
    for _ in 0..100 {
        let pdu: Value = serde_json::from_str(c.frame().text()).unwrap();
        assert!(pdu["action"] == "rtm/subscribe/ok" || pdu["action"] == "rtm/subscription/data");
    }
    faults.clear();
    // What was on its way comes before the reply; nothing after it.
    c.barrier();
    c.send_text(r#"{"action":"rtm/read","id":4,"body":{"channel":"ch"}}"#);
    assert!(c.frame().text().starts_with(r#"{"action":"rtm/read/ok""#));
}

#[test]
fn fault_endless_fragmented_message() {
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    let (mut c, id) = Raw::connect(&server);
    assert!(faults.set_socket_fault_on(id, Some(SocketFault::EndlessMessage)));
    let first = c.frame();
    assert_eq!((first.fin, first.opcode), (false, 0x1));
    assert!(first
        .text()
        .starts_with(r#"{"action":"rtm/subscription/data","body":{"subscription_id":"endless""#));
    for _ in 0..20_000 {
        let f = c.frame();
        assert_eq!((f.fin, f.opcode), (false, 0x0));
        assert_eq!(f.payload, [b'x'; 125]);
    }
    // Control frames still get through; a reply (a data frame) waits for the end.
    c.send_text(r#"{"action":"rtm/publish","id":1,"body":{"channel":"e","message":1}}"#);
    c.send(PING, b"p");
    let pong = loop {
        let f = c.frame();
        if f.opcode != 0x0 {
            break f;
        }
        assert!(!f.fin);
    };
    assert_eq!((pong.opcode, pong.payload.as_slice()), (PONG, &b"p"[..]));
    faults.clear();
    // The message ends (and is then valid JSON), and the held reply follows.
    let last = loop {
        let f = c.frame();
        assert_eq!(f.opcode, 0x0);
        if f.fin {
            break f;
        }
    };
    let whole = format!("{}{}{}", first.text(), "x".repeat(3), last.text());
    let pdu: Value = serde_json::from_str(&whole).unwrap();
    assert_eq!(pdu["body"]["messages"], json!(["xxx"]));
    let reply = c.frame();
    assert!(reply
        .text()
        .starts_with(r#"{"action":"rtm/publish/ok","id":1"#));
    assert_eq!(c.barrier(), []);
}

#[test]
fn fault_silent_socket() {
    use std::io::Write;
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    let (mut c, id) = Raw::connect(&server);
    let (mut other, _) = Raw::connect(&server);
    assert!(faults.set_socket_fault_on(id, Some(SocketFault::Silent)));
    let info = |server: &RtmServer| {
        server
            .connections()
            .into_iter()
            .find(|x| x.id == id)
            .unwrap()
    };
    // Nothing is answered, not even a ping, and nothing is handled: once the server has
    // read the ping and holds it, nothing has come back.
    c.send(PING, b"p");
    c.send_text(r#"{"action":"rtm/publish","id":1,"body":{"channel":"s","message":1}}"#);
    wait_until("the silenced connection to hold the ping it read", || {
        info(&server).held > 0
    });
    assert!(c.reader.buffer().is_empty(), "{:?}", c.reader.buffer());
    c.tcp.set_nonblocking(true).unwrap();
    let peeked = c.tcp.peek(&mut [0u8; 16]);
    c.tcp.set_nonblocking(false).unwrap();
    assert!(
        matches!(&peeked, Err(e) if e.kind() == ErrorKind::WouldBlock),
        "something came: {peeked:?}"
    );
    assert!(info(&server).open);
    assert_eq!(info(&server).received_count, 0);
    // The server does not read: the client's writes block once the socket buffers are
    // full (publishes without an id, which get no reply).
    let block: Vec<u8> = (0..500)
        .flat_map(|_| {
            masked(
                0x1,
                br#"{"action":"rtm/publish","body":{"channel":"s","message":2}}"#,
            )
        })
        .collect();
    c.tcp
        .set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let (mut written, mut offset) = (0usize, 0usize);
    let blocked = loop {
        match c.tcp.write(&block[offset..]) {
            Ok(n) => {
                written += n;
                offset = (offset + n) % block.len();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                break true
            }
            Err(e) => panic!("{e}"),
        }
        if written > 256 << 20 {
            break false;
        }
    };
    assert!(blocked, "{written} bytes went in without blocking");
    // Others are served meanwhile.
    other.send_text(r#"{"action":"rtm/read","id":2,"body":{"channel":"s"}}"#);
    assert!(other
        .frame()
        .text()
        .starts_with(r#"{"action":"rtm/read/ok""#));
    // Cleared: the rest goes in, the pong and the reply come, and everything written is
    // handled.
    faults.set_socket_fault(None);
    c.tcp.set_write_timeout(None).unwrap();
    c.tcp.write_all(&block[offset..]).unwrap();
    assert_eq!(c.frame().opcode, PONG);
    assert!(c
        .frame()
        .text()
        .starts_with(r#"{"action":"rtm/publish/ok","id":1"#));
    c.send_text(r#"{"action":"rtm/read","id":3,"body":{"channel":"s"}}"#);
    assert!(c
        .frame()
        .text()
        .starts_with(r#"{"action":"rtm/read/ok","id":3"#));
    let frames = written
        / masked(
            0x1,
            br#"{"action":"rtm/publish","body":{"channel":"s","message":2}}"#,
        )
        .len()
        + 1;
    assert!(info(&server).received_count >= frames + 2);
    // A silenced connection can still be dropped.
    faults.set_socket_fault_on(id, Some(SocketFault::Silent));
    assert_eq!(faults.drop_connections(), 2);
    assert!(server.wait_for_connections(WAIT, |conns| conns.iter().all(|x| !x.open)));
}

#[test]
fn fault_floods_wait_for_a_slow_reader() {
    // A client that does not read holds the flood back: the server writes a chunk at a
    // time and blocks on a full socket, instead of building PDUs for it in memory. The
    // data flood shows how far it went, in the channel's sequence numbers.
    let server = start(RtmServerConfig::default());
    let faults = server.faults();
    let (mut c, id) = Raw::connect(&server);
    c.send_text(r#"{"action":"rtm/subscribe","id":1,"body":{"channel":"slow"}}"#);
    assert!(c
        .frame()
        .text()
        .starts_with(r#"{"action":"rtm/subscribe/ok""#));
    let message = format!("\"{}\"", "m".repeat(1000));
    faults.set_socket_fault_on(
        id,
        Some(SocketFault::DataFlood {
            subscription_id: "slow".to_owned(),
            message,
        }),
    );
    // The writer stalls once the socket buffers are full (it counts each wait): from
    // then on the flood builds nothing more, however long the test takes.
    let stalls = || {
        server
            .connections()
            .iter()
            .find(|c| c.id == id)
            .map_or(0, |c| c.write_stalls)
    };
    wait_until("the flood to fill the socket", || stalls() >= 2);
    let first = seq(&server.publish("slow", "1").unwrap());
    let seen = stalls();
    wait_until("the writer to stall again", || stalls() >= seen + 2);
    let second = seq(&server.publish("slow", "2").unwrap());
    // The socket buffers (a few MB) hold a few thousand of these 1 KB PDUs.
    assert!(
        first < 20_000,
        "{first} PDUs built for a client that reads nothing"
    );
    assert!(
        second - first < 1000,
        "{first} then {second}: still building"
    );
    // Reading lets it go on.
    for _ in 0..(second + 1000) {
        assert_eq!(c.frame().opcode, 0x1);
    }
    faults.clear();
}
