//! The local RTM server's CBOR mode at the byte level, with a raw socket that frames its
//! PDUs as the reference Python SDK 1.5.0 does (CBOR in text frames, masking key
//! `00 00 00 00`): subprotocol selection, binary replies, JSON and CBOR clients on one
//! channel, byte strings, malformed and hostile input.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use ciborium::value::Value;

const WAIT: Duration = Duration::from_secs(3);

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A client on a raw socket.
struct Raw {
    tcp: TcpStream,
    buf: Vec<u8>,
}

/// Upgrades with `protocol` as `Sec-WebSocket-Protocol` (if any); returns the client and
/// the selected subprotocol (the header's value), if any.
fn upgrade(server: &RtmServer, protocol: Option<&str>) -> (Raw, Option<String>) {
    let mut tcp = TcpStream::connect(server.addr()).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let offer = protocol.map_or(String::new(), |p| {
        format!("Sec-WebSocket-Protocol: {p}\r\n")
    });
    write!(
        tcp,
        "GET /v2?appkey={DEFAULT_APPKEY} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n{offer}\r\n",
        server.addr()
    )
    .unwrap();
    let mut raw = Raw {
        tcp,
        buf: Vec::new(),
    };
    let end = loop {
        if let Some(at) = raw.buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        raw.fill();
    };
    let head = String::from_utf8(raw.buf.drain(..end).collect()).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let selected = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("sec-websocket-protocol")
            .then(|| value.trim().to_owned())
    });
    (raw, selected)
}

impl Raw {
    fn fill(&mut self) {
        let mut chunk = [0u8; 4096];
        let n = self.tcp.read(&mut chunk).expect("read");
        assert!(n > 0, "the server closed the connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    /// Sends one frame as the SDK does: FIN, masked with key 0.
    fn send(&mut self, opcode: u8, payload: &[u8]) {
        self.send_fragment(0x80 | opcode, payload);
    }

    /// Sends one frame whose first byte (FIN and opcode) is `b0`, masked with key 0.
    fn send_fragment(&mut self, b0: u8, payload: &[u8]) {
        let mut frame = vec![b0];
        match payload.len() {
            n @ 0..=125 => frame.push(0x80 | n as u8),
            n => {
                frame.push(0x80 | 126);
                frame.extend((n as u16).to_be_bytes());
            }
        }
        frame.extend([0, 0, 0, 0]);
        frame.extend_from_slice(payload);
        self.tcp.write_all(&frame).unwrap();
    }

    /// The next frame: (opcode, payload). Server frames are unmasked.
    fn frame(&mut self) -> (u8, Vec<u8>) {
        loop {
            if self.buf.len() >= 2 {
                let (len, header) = match self.buf[1] & 0x7F {
                    126 if self.buf.len() >= 4 => {
                        (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4)
                    }
                    127 if self.buf.len() >= 10 => (
                        u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize,
                        10,
                    ),
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && self.buf.len() >= header + len {
                    let opcode = self.buf[0] & 0x0F;
                    let payload = self.buf[header..header + len].to_vec();
                    self.buf.drain(..header + len);
                    return (opcode, payload);
                }
            }
            self.fill();
        }
    }

    /// The next PDU, which must come in a binary frame, decoded.
    fn pdu(&mut self) -> Value {
        let (opcode, payload) = self.frame();
        assert_eq!(opcode, 2, "a binary frame: {payload:02x?}");
        let mut rest = &payload[..];
        let v: Value = ciborium::from_reader(&mut rest).expect("one CBOR item");
        assert!(rest.is_empty(), "nothing after the PDU");
        v
    }

    /// The next text frame (a JSON client's PDU).
    fn json(&mut self) -> serde_json::Value {
        let (opcode, payload) = self.frame();
        assert_eq!(opcode, 1, "a text frame");
        serde_json::from_slice(&payload).unwrap()
    }
}

fn cbor(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(v, &mut out).unwrap();
    out
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn map(members: &[(&str, Value)]) -> Value {
    Value::Map(members.iter().map(|(k, v)| (text(k), v.clone())).collect())
}

fn get<'v>(v: &'v Value, name: &str) -> &'v Value {
    v.as_map()
        .and_then(|m| m.iter().find(|(k, _)| k.as_text() == Some(name)))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no `{name}` in {v:?}"))
}

fn start(config: RtmServerConfig) -> RtmServer {
    RtmServer::start(config).unwrap()
}

#[test]
fn cbor_is_selected_only_when_offered_and_enabled() {
    let server = start(RtmServerConfig::default());
    for offer in ["cbor", "CBOR", "x, cbor"] {
        let (_, selected) = upgrade(&server, Some(offer));
        assert_eq!(selected.as_deref(), Some("cbor"), "offer {offer:?}");
    }
    assert_eq!(upgrade(&server, None).1, None);
    assert_eq!(upgrade(&server, Some("cbor2")).1, None);
    let off = start(RtmServerConfig {
        cbor: false,
        ..RtmServerConfig::default()
    });
    let (mut raw, selected) = upgrade(&off, Some("cbor"));
    assert_eq!(selected, None, "CBOR off: the offer is ignored");
    // And the connection speaks JSON.
    raw.send(
        1,
        br#"{"action":"rtm/publish","id":0,"body":{"channel":"c","message":1}}"#,
    );
    assert_eq!(raw.json()["action"], "rtm/publish/ok");
}

/// The SDK's own bytes (publish "hello" to `ch`, id 0) in a text frame that is not
/// UTF-8; the ack is a binary frame in the shape the SDK accepted.
#[test]
fn the_sdk_publish_in_a_text_frame_is_acked_in_binary() {
    let server = start(RtmServerConfig::default());
    let (mut raw, _) = upgrade(&server, Some("cbor"));
    let publish = hex("a366616374696f6e6b72746d2f7075626c6973686269640064626f6479a2676368616e6e656c626368676d6573736167656568656c6c6f");
    raw.send(1, &publish);
    let (opcode, payload) = raw.frame();
    assert_eq!(opcode, 2);
    let mut want = hex("a366616374696f6e6e72746d2f7075626c6973682f6f6b6269640064626f6479a168706f736974696f6e6c313530303030303030303a30");
    // The position's first half is the server run's generation (its start time in
    // milliseconds), not the example's: the text string (head byte and text) is rebuilt.
    let position = server.publish("other", "0").unwrap();
    let generation = position.split(':').next().unwrap();
    let ours = format!("{generation}:0");
    assert!(ours.len() < 24, "a one-byte text head");
    want.truncate(want.len() - 13);
    want.push(0x60 | ours.len() as u8);
    want.extend_from_slice(ours.as_bytes());
    assert_eq!(payload, want);
    // A fragmented text message (text without FIN, a ping between, continuation with
    // FIN) is one PDU too.
    let (head, tail) = publish.split_at(20);
    raw.send_fragment(0x01, head);
    raw.send(9, b"py");
    raw.send_fragment(0x80, tail);
    assert_eq!(raw.frame(), (0xA, b"py".to_vec()));
    let ack = raw.pdu();
    assert_eq!(get(&ack, "action"), &text("rtm/publish/ok"));
    assert_eq!(get(&ack, "id"), &Value::Integer(0.into()));
    // Binary frames are read the same, and requests without id get no reply.
    let no_ack = hex("a266616374696f6e6b72746d2f7075626c69736864626f6479a2676368616e6e656c626368676d657373616765182a");
    raw.send(2, &no_ack);
    raw.send(
        2,
        &cbor(&map(&[
            ("action", text("rtm/read")),
            ("id", Value::Integer(7.into())),
            ("body", map(&[("channel", text("ch"))])),
        ])),
    );
    let reply = raw.pdu();
    assert_eq!(get(&reply, "action"), &text("rtm/read/ok"));
    assert_eq!(get(&reply, "id"), &Value::Integer(7.into()));
    assert_eq!(
        get(get(&reply, "body"), "message"),
        &Value::Integer(42.into())
    );
    assert!(get(get(&reply, "body"), "position").is_text());
}

/// JSON and CBOR clients on one channel: byte strings reach CBOR subscribers and
/// readers as byte strings, JSON ones as base64 text; JSON messages reach CBOR
/// subscribers as the same values.
#[test]
fn json_and_cbor_clients_share_a_channel() {
    let server = start(RtmServerConfig::default());
    let (mut cbor_sub, _) = upgrade(&server, Some("cbor"));
    let (mut json_sub, _) = upgrade(&server, None);
    cbor_sub.send(
        1,
        &cbor(&map(&[
            ("action", text("rtm/subscribe")),
            ("id", Value::Integer(0.into())),
            ("body", map(&[("channel", text("animals"))])),
        ])),
    );
    let ok = cbor_sub.pdu();
    assert_eq!(get(&ok, "action"), &text("rtm/subscribe/ok"));
    json_sub.send(
        1,
        br#"{"action":"rtm/subscribe","id":0,"body":{"channel":"animals"}}"#,
    );
    assert_eq!(json_sub.json()["action"], "rtm/subscribe/ok");

    // The SDK's binary publish (id 1).
    let (mut publisher, _) = upgrade(&server, Some("cbor"));
    publisher.send(1, &hex("a366616374696f6e6b72746d2f7075626c6973686269640164626f6479a2676368616e6e656c67616e696d616c73676d657373616765a36377686f657a65627261616e07637261774200ff"));
    assert_eq!(get(&publisher.pdu(), "action"), &text("rtm/publish/ok"));
    let data = cbor_sub.pdu();
    assert_eq!(get(&data, "action"), &text("rtm/subscription/data"));
    let messages = get(get(&data, "body"), "messages");
    let zebra = map(&[
        ("who", text("zebra")),
        ("n", Value::Integer(7.into())),
        ("raw", Value::Bytes(vec![0x00, 0xff])),
    ]);
    assert_eq!(messages, &Value::Array(vec![zebra.clone()]));
    let data = json_sub.json();
    assert_eq!(
        data["body"]["messages"],
        serde_json::json!([{"who": "zebra", "n": 7, "raw": "AP8="}])
    );

    // A JSON publish reaches the CBOR subscriber as the same value.
    let (mut json_pub, _) = upgrade(&server, None);
    json_pub.send(
        1,
        r#"{"action":"rtm/publish","id":0,"body":{"channel":"animals","message":{"f":1.5,"s":"é","l":[null,true,-3]}}}"#.as_bytes(),
    );
    assert_eq!(json_pub.json()["action"], "rtm/publish/ok");
    let data = cbor_sub.pdu();
    let want = map(&[
        ("f", Value::Float(1.5)),
        ("s", text("é")),
        (
            "l",
            Value::Array(vec![
                Value::Null,
                Value::Bool(true),
                Value::Integer((-3).into()),
            ]),
        ),
    ]);
    assert_eq!(
        get(get(&data, "body"), "messages"),
        &Value::Array(vec![want])
    );
    assert_eq!(
        json_sub.json()["body"]["messages"][0],
        serde_json::json!({"f": 1.5, "s": "é", "l": [null, true, -3]})
    );

    // rtm/read of the binary message: bytes for CBOR, base64 for JSON.
    publisher.send(
        1,
        &cbor(&map(&[
            ("action", text("rtm/write")),
            ("id", Value::Integer(2.into())),
            (
                "body",
                map(&[("channel", text("kv")), ("message", zebra.clone())]),
            ),
        ])),
    );
    assert_eq!(get(&publisher.pdu(), "action"), &text("rtm/write/ok"));
    publisher.send(
        1,
        &cbor(&map(&[
            ("action", text("rtm/read")),
            ("id", Value::Integer(3.into())),
            ("body", map(&[("channel", text("kv"))])),
        ])),
    );
    let read = publisher.pdu();
    assert_eq!(get(&read, "id"), &Value::Integer(3.into()));
    assert_eq!(get(get(&read, "body"), "message"), &zebra);
    json_pub.send(
        1,
        br#"{"action":"rtm/read","id":"r","body":{"channel":"kv"}}"#,
    );
    assert_eq!(json_pub.json()["body"]["message"]["raw"], "AP8=");
}

/// Errors carry `reason`; malformed CBOR gets an id-less `/error` and the connection
/// goes on; hostile lengths and nesting are refused without harm.
#[test]
fn errors_and_malformed_input() {
    let server = start(RtmServerConfig::default());
    let (mut raw, _) = upgrade(&server, Some("cbor"));
    raw.send(
        1,
        &cbor(&map(&[
            ("action", text("rtm/nope")),
            ("id", Value::Integer(1.into())),
            ("body", map(&[])),
        ])),
    );
    let err = raw.pdu();
    assert_eq!(get(&err, "action"), &text("rtm/nope/error"));
    assert_eq!(get(get(&err, "body"), "error"), &text("invalid_operation"));
    assert!(get(get(&err, "body"), "reason").is_text());
    let mut deep = vec![0x81u8; 100_000];
    deep.push(0);
    for bad in [
        hex("a2"),
        hex("9affffffff00"),
        hex("a142000101"),
        b"{\"action\":\"rtm/read\"}".to_vec(),
        deep,
    ] {
        if bad.len() > 0xFFFF {
            // Longer than `send` frames; sent in a binary frame with a 64-bit length.
            let mut frame = vec![0x82, 0x80 | 127];
            frame.extend((bad.len() as u64).to_be_bytes());
            frame.extend([0, 0, 0, 0]);
            frame.extend(&bad);
            raw.tcp.write_all(&frame).unwrap();
        } else {
            raw.send(1, &bad);
        }
        let err = raw.pdu();
        assert_eq!(get(&err, "action"), &text("/error"), "{bad:02x?}");
        assert_eq!(get(get(&err, "body"), "error"), &text("invalid_cbor"));
        assert!(get(&err, "body").as_map().unwrap().len() == 2);
    }
    // Still serving.
    raw.send(
        2,
        &cbor(&map(&[
            ("action", text("rtm/publish")),
            ("id", Value::Integer(2.into())),
            (
                "body",
                map(&[("channel", text("c")), ("message", Value::Null)]),
            ),
        ])),
    );
    assert_eq!(get(&raw.pdu(), "action"), &text("rtm/publish/ok"));
    // Fault injection: whatever bytes a test wants, in a binary frame.
    assert_eq!(server.faults().send_raw_binary(&hex("a142000101")), 1);
    assert_eq!(raw.frame(), (2, hex("a142000101")));
    // A ping is still answered with a pong.
    raw.send(9, b"py");
    assert_eq!(raw.frame(), (0xA, b"py".to_vec()));
    // Close: the server answers and ends the connection.
    raw.send(8, &1000u16.to_be_bytes());
    assert_eq!(raw.frame().0, 8);
    let mut rest = [0u8; 16];
    match raw.tcp.read(&mut rest) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("expected the end of the connection, got {other:?}"),
    }
}
