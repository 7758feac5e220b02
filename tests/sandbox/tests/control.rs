//! The control endpoint over real sockets: every family of operations has an effect a
//! client of the servers sees (a close code, a raw frame, a substituted reply, floods,
//! a refused upgrade, a crashed benchmark), the observations list what is connected,
//! bad arguments are 400, unknown paths 404, `GET /` lists everything, and hostile
//! peers (silent, trickling, endless head, huge body, too many) meet its limits. The
//! relays in front of the servers are cut on demand and their cuts counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::control::{Relays, MAX_BODY, MAX_CONNECTIONS, MAX_HEAD, REQUEST_TIMEOUT};
use benchlink_sandbox::relay::Relay;
use benchlink_sandbox::rtm::DEFAULT_APPKEY;
use benchlink_sandbox::{
    BenchServer, BenchServerConfig, ControlServer, RtmServer, RtmServerConfig,
};
use serde_json::Value;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

const WAIT: Duration = Duration::from_secs(10);

struct Servers {
    control: ControlServer,
    bench: Arc<BenchServer>,
    rtm: Arc<RtmServer>,
}

fn servers() -> Servers {
    let bench = Arc::new(BenchServer::start(BenchServerConfig::default()).unwrap());
    let rtm = Arc::new(RtmServer::start(RtmServerConfig::default()).unwrap());
    let control = ControlServer::start(
        "127.0.0.1:0".parse().unwrap(),
        Some(Arc::clone(&bench)),
        Some(Arc::clone(&rtm)),
    )
    .unwrap();
    Servers {
        control,
        bench,
        rtm,
    }
}

/// Sends raw bytes on a fresh connection; the status and body of the reply.
fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(WAIT)).unwrap();
    conn.write_all(request).unwrap();
    let mut reply = Vec::new();
    let _ = conn.read_to_end(&mut reply);
    let reply = String::from_utf8(reply).unwrap();
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no reply: {reply:?}"));
    (head[9..12].parse().unwrap(), body.to_owned())
}

/// One control request; the status and the JSON reply.
fn call(addr: SocketAddr, method: &str, target: &str, body: &[u8]) -> (u16, Value) {
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    let (status, reply) = exchange(addr, &request);
    let json = serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply}"));
    (status, json)
}

fn ok(addr: SocketAddr, method: &str, target: &str, body: &[u8]) -> Value {
    let (status, json) = call(addr, method, target, body);
    assert_eq!(status, 200, "{method} {target}: {json}");
    json
}

fn affected(addr: SocketAddr, target: &str, body: &[u8]) -> u64 {
    ok(addr, "POST", target, body)["affected"].as_u64().unwrap()
}

/// The 400 message for a request.
fn bad(addr: SocketAddr, method: &str, target: &str, body: &[u8]) -> String {
    let (status, json) = call(addr, method, target, body);
    assert_eq!(status, 400, "{method} {target}: {json}");
    json["error"].as_str().unwrap().to_owned()
}

type Ws = WebSocket<TcpStream>;

fn ws(rtm: &RtmServer) -> Ws {
    let tcp = TcpStream::connect(rtm.addr()).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let url = format!("{}/v2?appkey={DEFAULT_APPKEY}", rtm.endpoint());
    tungstenite::client(url, tcp).expect("upgrade").0
}

fn text(ws: &mut Ws) -> String {
    loop {
        match ws.read().unwrap() {
            Message::Text(t) => return t.to_string(),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn send(ws: &mut Ws, pdu: &str) {
    ws.send(Message::text(pdu)).unwrap();
}

/// The id of the only open connection, as `GET /rtm/connections` shows it.
fn only_connection(addr: SocketAddr) -> u64 {
    let deadline = Instant::now() + WAIT;
    loop {
        let conns = ok(addr, "GET", "/rtm/connections", b"");
        let open: Vec<&Value> = conns
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["open"] == true)
            .collect();
        if let [c] = open.as_slice() {
            assert_eq!(c["appkey"], DEFAULT_APPKEY);
            assert_eq!(c["path"], "/v2");
            return c["id"].as_u64().unwrap();
        }
        assert!(Instant::now() < deadline, "{conns}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn index_lists_every_endpoint_and_arguments_are_checked() {
    let s = servers();
    let a = s.control.addr();
    let index = ok(a, "GET", "/", b"");
    let listed: Vec<String> = index["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["method"].as_str().unwrap(),
                e["path"].as_str().unwrap()
            )
        })
        .collect();
    for faults in [
        "drop-connections",
        "drop-subscribers",
        "close-connections",
        "answer-pings",
        "subscription-error",
        "fast-forward",
        "send-raw",
        "send-raw-binary",
        "expire-history",
        "delay-subscribe-ok",
        "reject-subscribes",
        "reject-auth",
        "override-reply",
        "refuse-connections",
        "socket-fault",
        "close-view-windows",
        "clear",
    ] {
        let endpoint = format!("POST /rtm/faults/{faults}");
        assert!(listed.contains(&endpoint), "{endpoint} not in {listed:?}");
    }
    for endpoint in [
        "GET /",
        "GET /rtm/connections",
        "GET /rtm/attempts",
        "GET /rtm/history-bytes",
        "POST /bench/benchmarks/{id}/crash",
        "POST /bench/benchmarks/{id}/zombie",
        "GET /bench/benchmarks/{id}",
        "GET /bench/stats",
        "GET /bench/email-reports",
    ] {
        assert!(
            listed.contains(&endpoint.to_owned()),
            "{endpoint} not in {listed:?}"
        );
    }
    assert_eq!(listed.len(), 26, "{listed:?}");
    // Arguments and bodies are described.
    let socket = &index["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "/rtm/faults/socket-fault")
        .unwrap();
    assert!(socket["args"]["kind"]
        .as_str()
        .unwrap()
        .contains("ping-flood"));
    assert!(socket["body"].as_str().unwrap().contains("data-flood"));

    // Unknown paths, wrong methods.
    let (status, json) = call(a, "GET", "/rtm/nothing", b"");
    assert_eq!(status, 404, "{json}");
    assert!(json["error"].as_str().unwrap().contains("GET / lists them"));
    assert_eq!(call(a, "POST", "/bench/benchmarks/1/explode", b"").0, 404);
    let (status, json) = call(a, "GET", "/rtm/faults/clear", b"");
    assert_eq!(status, 405, "{json}");

    // Bad arguments: each says what is wrong.
    let m = bad(a, "POST", "/rtm/faults/close-connections?code=abc", b"");
    assert!(m.contains("code must be a number"), "{m}");
    let m = bad(a, "POST", "/rtm/faults/close-connections?cod=4000", b"");
    assert!(
        m.contains("unknown argument \"cod\"") && m.contains("takes: code"),
        "{m}"
    );
    let m = bad(
        a,
        "POST",
        "/rtm/faults/close-connections?code=1&code=2",
        b"",
    );
    assert!(m.contains("twice"), "{m}");
    let m = bad(a, "POST", "/rtm/faults/drop-subscribers", b"");
    assert!(m.contains("missing argument: channel"), "{m}");
    let m = bad(a, "POST", "/rtm/faults/drop-subscribers?channel", b"");
    assert!(m.contains("needs a value"), "{m}");
    let m = bad(a, "POST", "/rtm/faults/socket-fault?kind=fire", b"");
    assert!(m.contains("unknown kind fire"), "{m}");
    let m = bad(a, "POST", "/rtm/faults/socket-fault?kind=data-flood", b"");
    assert!(m.contains("needs subscription"), "{m}");
    let m = bad(
        a,
        "POST",
        "/rtm/faults/refuse-connections?kind=close-tcp&status=503",
        b"",
    );
    assert!(m.contains("kind=status"), "{m}");
    let m = bad(
        a,
        "POST",
        "/rtm/faults/override-reply?action=rtm/publish&times=0",
        b"x",
    );
    assert!(m.contains("at least 1"), "{m}");
    let m = bad(
        a,
        "POST",
        "/rtm/faults/override-reply?action=rtm/publish",
        b"",
    );
    assert!(m.contains("raw reply"), "{m}");
    let m = bad(a, "POST", "/rtm/faults/reject-auth?reject=maybe", b"");
    assert!(m.contains("true or false"), "{m}");
    let m = bad(a, "POST", "/rtm/faults/send-raw", b"\xff\xfe");
    assert!(m.contains("UTF-8"), "{m}");
    let m = bad(a, "POST", "/rtm/faults/clear", b"body");
    assert!(m.contains("no body"), "{m}");
    let m = bad(a, "POST", "/bench/benchmarks/abc/crash", b"");
    assert!(m.contains("must be a number"), "{m}");

    // A control endpoint for one server serves and lists only its endpoints.
    let bench_only = ControlServer::start(
        "127.0.0.1:0".parse().unwrap(),
        Some(Arc::clone(&s.bench)),
        None,
    )
    .unwrap();
    let b = bench_only.addr();
    assert_eq!(call(b, "POST", "/rtm/faults/clear", b"").0, 404);
    assert_eq!(
        ok(b, "GET", "/bench/email-reports", b""),
        Value::Array(Vec::new())
    );
    let index = ok(b, "GET", "/", b"").to_string();
    assert!(
        !index.contains("/rtm/") && index.contains("/bench/stats"),
        "{index}"
    );
    bench_only.shutdown();
}

#[test]
fn observations_close_codes_and_raw_frames() {
    let s = servers();
    let a = s.control.addr();
    let mut client = ws(&s.rtm);
    let id = only_connection(a);
    let attempts = ok(a, "GET", "/rtm/attempts", b"");
    let attempt = attempts
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap();
    assert_eq!(attempt["outcome"], "upgraded");
    assert!(attempt["ago_ms"].as_f64().unwrap() >= 0.0);

    // The PDUs a connection sent show up in its record.
    send(
        &mut client,
        r#"{"action":"rtm/publish","id":1,"body":{"channel":"c","message":1}}"#,
    );
    assert!(text(&mut client).contains("rtm/publish/ok"));
    let conns = ok(a, "GET", "/rtm/connections", b"");
    assert!(conns.to_string().contains("rtm/publish"), "{conns}");
    assert!(
        ok(a, "GET", "/rtm/history-bytes", b"")["bytes"]
            .as_u64()
            .unwrap()
            > 0
    );

    // Raw frames: to one connection, to an unknown one, to all; binary.
    assert_eq!(
        affected(
            a,
            &format!("/rtm/faults/send-raw?connection={id}"),
            b"not json"
        ),
        1
    );
    assert_eq!(text(&mut client), "not json");
    assert_eq!(
        affected(a, "/rtm/faults/send-raw?connection=999999", b"x"),
        0
    );
    assert_eq!(
        affected(a, "/rtm/faults/send-raw", br#"{"action":"/error"}"#),
        1
    );
    assert_eq!(text(&mut client), r#"{"action":"/error"}"#);
    assert_eq!(
        affected(a, "/rtm/faults/send-raw-binary", b"\xa1\x42\x00\x01\x01"),
        1
    );
    assert_eq!(
        client.read().unwrap(),
        Message::binary(&b"\xa1\x42\x00\x01\x01"[..])
    );

    // The channel's history, expired.
    assert_eq!(affected(a, "/rtm/faults/expire-history?channel=c", b""), 1);
    assert_eq!(
        affected(a, "/rtm/faults/expire-history?channel=none", b""),
        0
    );
    assert_eq!(ok(a, "GET", "/rtm/history-bytes", b"")["bytes"], 0);

    // Close with a code of our choice.
    assert_eq!(
        affected(a, "/rtm/faults/close-connections?code=4000", b""),
        1
    );
    let frame = loop {
        match client.read().unwrap() {
            Message::Close(frame) => break frame.unwrap(),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(frame.code, CloseCode::from(4000));
    let deadline = Instant::now() + WAIT;
    while ok(a, "GET", "/rtm/connections", b"")[0]["open"] == true {
        assert!(Instant::now() < deadline);
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn replies_subscriptions_and_connection_faults() {
    let s = servers();
    let a = s.control.addr();
    let mut client = ws(&s.rtm);
    let id = only_connection(a);

    // The next publish gets the raw reply, the one after is served again.
    ok(
        a,
        "POST",
        "/rtm/faults/override-reply?action=rtm/publish&times=1",
        br#"{"action":"rtm/publish/ok","id":{id},"body":{"odd":true}}"#,
    );
    send(
        &mut client,
        r#"{"action":"rtm/publish","id":7,"body":{"channel":"c","message":1}}"#,
    );
    assert_eq!(
        text(&mut client),
        r#"{"action":"rtm/publish/ok","id":7,"body":{"odd":true}}"#
    );
    send(
        &mut client,
        r#"{"action":"rtm/publish","id":8,"body":{"channel":"c","message":1}}"#,
    );
    assert!(text(&mut client).contains(r#""position":"#));

    // Subscriptions: rejected while the switch is on, then an injected error ends one.
    ok(a, "POST", "/rtm/faults/reject-subscribes", b"");
    send(
        &mut client,
        r#"{"action":"rtm/subscribe","id":9,"body":{"channel":"c"}}"#,
    );
    assert!(text(&mut client).contains("rtm/subscribe/error"));
    ok(a, "POST", "/rtm/faults/reject-subscribes?reject=false", b"");
    send(
        &mut client,
        r#"{"action":"rtm/subscribe","id":10,"body":{"channel":"c"}}"#,
    );
    assert!(text(&mut client).contains("rtm/subscribe/ok"));
    assert_eq!(
        affected(a, "/rtm/faults/fast-forward?subscription=c", b""),
        1
    );
    assert!(text(&mut client).contains("fast_forward"));
    assert_eq!(
        affected(a, "/rtm/faults/drop-subscribers?channel=other", b""),
        0
    );
    let target = "/rtm/faults/subscription-error?subscription=c&reason=gone+away";
    assert_eq!(affected(a, target, b""), 1);
    let error = text(&mut client);
    assert!(
        error.contains("rtm/subscription/error")
            && error.contains("out_of_sync")
            && error.contains("gone away"),
        "{error}"
    );

    // A socket fault on this connection: a ping flood, then back to normal.
    assert_eq!(
        affected(
            a,
            &format!("/rtm/faults/socket-fault?kind=ping-flood&connection={id}"),
            b""
        ),
        1
    );
    for _ in 0..3 {
        assert_eq!(
            client.read().unwrap(),
            Message::Ping(b"flood".to_vec().into())
        );
    }
    assert_eq!(
        affected(
            a,
            &format!("/rtm/faults/socket-fault?kind=none&connection={id}"),
            b""
        ),
        1
    );

    // Refused upgrades: the next one gets 503, the one after succeeds.
    ok(
        a,
        "POST",
        "/rtm/faults/refuse-connections?kind=status&status=503&times=1",
        b"",
    );
    let url = format!("{}/v2?appkey={DEFAULT_APPKEY}", s.rtm.endpoint());
    match tungstenite::connect(&url) {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 503),
        other => panic!("expected 503, got {other:?}"),
    }
    let attempts = ok(a, "GET", "/rtm/attempts", b"").to_string();
    assert!(
        attempts.contains(r#""outcome":"rejected","status":503"#),
        "{attempts}"
    );
    let (mut second, _) = tungstenite::connect(&url).expect("upgrade after the fault");
    // Clear ends every switch; a network failure drops both clients.
    ok(a, "POST", "/rtm/faults/clear", b"");
    assert_eq!(affected(a, "/rtm/faults/drop-connections", b""), 2);
    assert!(second.read().is_err());
}

fn start_benchmark(bench: SocketAddr) -> u64 {
    let script = "#!benchDL\npool(size = 1, worker_type = dummy_worker):\n    loop(time = 100 sec, rate = 1 rps):\n        print(\"x\")\n";
    let body = format!("--b0\r\nContent-Disposition: form-data; name=\"bench\"; filename=\"a.bdl\"\r\n\r\n{script}\r\n--b0--\r\n");
    let (status, reply) = exchange(
        bench,
        format!("POST /start?email=ops%40example.org HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: multipart/form-data; boundary=b0\r\nContent-Length: {}\r\n\r\n{body}", body.len()).as_bytes(),
    );
    assert_eq!(status, 200, "{reply}");
    serde_json::from_str::<Value>(&reply).unwrap()["id"]
        .as_u64()
        .unwrap()
}

fn bench_status(bench: SocketAddr, id: u64) -> Value {
    let (status, reply) = exchange(
        bench,
        format!("GET /status?id={id} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 200, "{reply}");
    serde_json::from_str(&reply).unwrap()
}

#[test]
fn benchmarks_crash_and_turn_zombie() {
    let s = servers();
    let (a, b) = (s.control.addr(), s.bench.addr());
    let crashed = start_benchmark(b);
    let zombie = start_benchmark(b);
    let record = ok(a, "GET", &format!("/bench/benchmarks/{crashed}"), b"");
    assert_eq!(record["script_name"], "a.bdl");
    assert_eq!(record["emails"][0], "ops@example.org");
    assert_eq!(record["process_alive"], true);

    assert_eq!(
        affected(a, &format!("/bench/benchmarks/{crashed}/crash"), b""),
        1
    );
    assert_eq!(
        bench_status(b, crashed),
        serde_json::json!({"reason": "crashed", "status": "failed"})
    );
    assert_eq!(
        affected(a, &format!("/bench/benchmarks/{crashed}/crash"), b""),
        0,
        "already final"
    );
    assert_eq!(
        affected(a, &format!("/bench/benchmarks/{zombie}/zombie"), b""),
        1
    );
    assert_eq!(bench_status(b, zombie)["status"], "zombie");
    assert_eq!(
        ok(a, "GET", &format!("/bench/benchmarks/{zombie}"), b"")["status"],
        "zombie"
    );

    assert_eq!(affected(a, "/bench/benchmarks/999/crash", b""), 0);
    let (status, json) = call(a, "GET", "/bench/benchmarks/999", b"");
    assert_eq!(
        (status, json["error"].as_str()),
        (404, Some("no benchmark 999"))
    );

    // A report asked for on the benchmark server shows up.
    let (status, reply) = exchange(
        b,
        format!("GET /email_report?id={crashed}&addr=me%40example.org HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 200, "{reply}");
    let reports = ok(a, "GET", "/bench/email-reports", b"");
    let report = reports
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["on_request"] == true)
        .unwrap_or_else(|| panic!("{reports}"));
    assert_eq!(report["bench_id"], crashed);
    assert_eq!(report["addresses"][0], "me@example.org");
    let stats = ok(a, "GET", "/bench/stats", b"");
    assert!(stats["body_bytes_read"].as_u64().unwrap() > 0, "{stats}");
    assert!(stats["accepted"].as_u64().unwrap() > 0, "{stats}");
    assert!(stats["requests"]["/start"].as_u64().unwrap() > 0, "{stats}");
}

/// The reply of a full endpoint, which answers `503` at once, before any request (a
/// probe that sends nothing first cannot be reset for unread bytes); `None` when the
/// probe was admitted (it then sends a request, so that its slot is freed).
///
/// Whether the `503` came is known without waiting for it to (not) come: a second
/// connection made after the probe ends one way or another (answered, refused, reset),
/// and the accept loop, which takes connections in order and writes its `503` before
/// taking the next, decided on the probe before that.
fn busy_reply(addr: SocketAddr) -> Option<String> {
    let mut conn = TcpStream::connect(addr).unwrap();
    let mut marker = TcpStream::connect(addr).unwrap();
    marker.set_read_timeout(Some(WAIT)).unwrap();
    let _ = marker.write_all(b"GET / HTTP/1.1\r\n\r\n");
    let _ = marker.read_to_end(&mut Vec::new());
    drop(marker);
    conn.set_nonblocking(true).unwrap();
    let mut first = [0u8; 1];
    let decided = conn.peek(&mut first);
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(WAIT)).unwrap();
    let mut reply = String::new();
    if matches!(&decided, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
        conn.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let _ = conn.read_to_string(&mut reply);
        assert!(reply.starts_with("HTTP/1.1 200 "), "{reply}");
        return None;
    }
    let _ = conn.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 503 "), "{reply}");
    Some(reply)
}

#[test]
fn hostile_peers_meet_the_limits() {
    let s = servers();
    let a = s.control.addr();
    // Every slot taken: one silent peer, the others trickling a request byte by byte
    // (all connected before the probes, so accepted first, and before any other
    // connection, so that none is still closing).
    let started = Instant::now();
    let silent = TcpStream::connect(a).unwrap();
    let tricklers: Vec<_> = (1..MAX_CONNECTIONS)
        .map(|_| {
            let mut conn = TcpStream::connect(a).unwrap();
            thread::spawn(move || {
                for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ".iter().cycle() {
                    if conn.write_all(&[*byte]).is_err() {
                        break;
                    }
                    thread::sleep(Duration::from_millis(50));
                    if started.elapsed() > REQUEST_TIMEOUT + WAIT {
                        panic!("never cut off");
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + WAIT;
    let busy = loop {
        if let Some(reply) = busy_reply(a) {
            break reply;
        }
        assert!(Instant::now() < deadline, "never full");
        thread::sleep(Duration::from_millis(20));
    };
    assert!(busy.contains("busy"), "{busy}");

    // The silent peer gets 408 at the deadline, and then the slots are free again.
    let mut silent = silent;
    silent
        .set_read_timeout(Some(REQUEST_TIMEOUT + WAIT))
        .unwrap();
    let mut reply = String::new();
    let _ = silent.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408 "), "{reply}");
    assert!(started.elapsed() >= REQUEST_TIMEOUT);
    for t in tricklers {
        t.join().unwrap();
    }
    let deadline = Instant::now() + WAIT;
    while busy_reply(a).is_some() {
        assert!(Instant::now() < deadline, "slots never freed");
        thread::sleep(Duration::from_millis(20));
    }

    // Too large: the head (400) and the announced body (413), answered at once.
    let mut endless = b"GET /".to_vec();
    endless.extend(vec![b'a'; MAX_HEAD + 10]);
    assert_eq!(exchange(a, &endless).0, 400);
    let huge = format!(
        "POST /rtm/faults/send-raw HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        MAX_BODY + 1
    );
    assert_eq!(exchange(a, huge.as_bytes()).0, 413);
}

#[test]
fn switches_floods_and_view_windows() {
    let s = servers();
    let a = s.control.addr();
    let mut client = ws(&s.rtm);
    let id = only_connection(a);
    let publish = r#"{"action":"rtm/publish","id":1,"body":{"channel":"c","message":{}}}"#;

    // Pongs dropped: a ping goes unanswered (the publish after it is answered).
    ok(a, "POST", "/rtm/faults/answer-pings?answer=false", b"");
    client.send(Message::Ping(b"p".to_vec().into())).unwrap();
    send(&mut client, publish);
    match client.read().unwrap() {
        Message::Text(t) => assert!(t.contains("rtm/publish/ok"), "{t}"),
        other => panic!("expected no pong, got {other:?}"),
    }
    ok(a, "POST", "/rtm/faults/answer-pings", b"");
    client.send(Message::Ping(b"p".to_vec().into())).unwrap();
    assert_eq!(client.read().unwrap(), Message::Pong(b"p".to_vec().into()));

    // An aggregated view's window, closed on demand.
    send(
        &mut client,
        r#"{"action":"rtm/subscribe","id":2,"body":{"subscription_id":"n","period":60,"filter":"select count(*) as n from c"}}"#,
    );
    assert!(text(&mut client).contains("rtm/subscribe/ok"));
    send(&mut client, publish);
    assert!(text(&mut client).contains("rtm/publish/ok"));
    assert_eq!(affected(a, "/rtm/faults/close-view-windows", b""), 1);
    let data = text(&mut client);
    assert!(data.ends_with(r#""messages":[{"n":1}]}}"#), "{data}");

    // A data flood for that subscription, with our message, on this connection.
    let target = format!("/rtm/faults/socket-fault?kind=data-flood&subscription=n&connection={id}");
    assert_eq!(affected(a, &target, br#"{"flood":true}"#), 1);
    // Each PDU carries a batch of the message (100 of them: the flood outruns clients).
    for _ in 0..3 {
        let data = text(&mut client);
        assert!(
            data.contains("rtm/subscription/data")
                && data.contains(r#""messages":[{"flood":true},{"flood":true}"#)
                && data.ends_with(r#"{"flood":true}]}}"#),
            "{data}"
        );
    }
    ok(a, "POST", "/rtm/faults/clear", b"");
}

/// `POST /relay/cut` closes what the relays carry (one relay or both), `GET /relay/stats`
/// counts it; without relays neither is served or listed.
#[test]
fn relays_are_cut_on_demand_and_counted() {
    let s = servers();
    assert_eq!(call(s.control.addr(), "POST", "/relay/cut", b"").0, 404);
    let index = ok(s.control.addr(), "GET", "/", b"").to_string();
    assert!(!index.contains("/relay/"), "{index}");

    let any = "127.0.0.1:0".parse().unwrap();
    let bench_relay = Relay::start(any, s.bench.addr(), Duration::ZERO).unwrap();
    let rtm_relay = Relay::start(any, s.rtm.addr(), Duration::ZERO).unwrap();
    let control = ControlServer::start_with_relays(
        any,
        Some(Arc::clone(&s.bench)),
        Some(Arc::clone(&s.rtm)),
        Relays {
            bench: Some(bench_relay.cutter()),
            rtm: Some(rtm_relay.cutter()),
        },
    )
    .unwrap();
    let a = control.addr();
    let index = ok(a, "GET", "/", b"").to_string();
    assert!(
        index.contains("/relay/cut") && index.contains("/relay/stats"),
        "{index}"
    );

    // One connection through each relay, each with a reply already through it.
    let tcp = TcpStream::connect(rtm_relay.addr()).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let url = format!("ws://{}/v2?appkey={DEFAULT_APPKEY}", rtm_relay.addr());
    let mut client = tungstenite::client(url, tcp).expect("upgrade").0;
    let mut http = TcpStream::connect(bench_relay.addr()).unwrap();
    http.set_read_timeout(Some(WAIT)).unwrap();
    http.write_all(b"GET /clusters_info HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut head = [0u8; 12];
    http.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"HTTP/1.1 "), "{head:?}");

    let stats = ok(a, "GET", "/relay/stats", b"");
    assert_eq!(stats["bench"]["open"], 1, "{stats}");
    assert_eq!(stats["rtm"]["open"], 1, "{stats}");
    assert_eq!(stats["rtm"]["cuts"], 0, "{stats}");

    assert_eq!(affected(a, "/relay/cut?server=rtm", b""), 1);
    assert!(client.read().is_err(), "the WebSocket outlived the cut");
    // Both relays: only the benchmark server's connection was left.
    assert_eq!(affected(a, "/relay/cut", b""), 1);
    let mut rest = Vec::new();
    let _ = http.read_to_end(&mut rest); // the end of stream (or a reset): the cut
    let stats = ok(a, "GET", "/relay/stats", b"");
    assert_eq!(stats["rtm"]["cuts"], 2, "{stats}");
    assert_eq!(stats["rtm"]["connections_cut"], 1, "{stats}");
    assert_eq!(stats["bench"]["cuts"], 1, "{stats}");
    assert_eq!(stats["bench"]["connections_cut"], 1, "{stats}");
    assert_eq!(stats["bench"]["accepted"], 1, "{stats}");
    assert_eq!(stats["bench"]["open"], 0, "{stats}");

    let m = bad(a, "POST", "/relay/cut?server=db", b"");
    assert!(m.contains("one of bench, rtm"), "{m}");
    // A relay in front of one server only: the other is 404.
    let one = ControlServer::start_with_relays(
        any,
        None,
        None,
        Relays {
            bench: Some(bench_relay.cutter()),
            rtm: None,
        },
    )
    .unwrap();
    assert_eq!(
        call(one.addr(), "POST", "/relay/cut?server=rtm", b"").0,
        404
    );
    assert_eq!(affected(one.addr(), "/relay/cut?server=bench", b""), 0);
    one.shutdown();
    control.shutdown();
}
