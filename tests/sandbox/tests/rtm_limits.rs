//! The local RTM server's limits against hostile clients over 127.0.0.1: sockets that
//! never finish their upgrade (idle, or trickling it byte by byte), more connections
//! than the cap, a flood of large publishes, a role secret guessed in a loop, `search`
//! as a way to learn restricted channel names, and positions of another server run.
//! Each test uses small configured limits so that it stays fast.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{
    AttemptOutcome, Permissions, Role, RtmServer, RtmServerConfig, DEFAULT_APPKEY, MAX_NAME_BYTES,
    SUPERUSER_ROLE,
};
use serde_json::{json, Value};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

const WAIT: Duration = Duration::from_secs(5);

/// The nonce [`RtmServerConfig::fixed_nonce`] makes every handshake answer, and the
/// superuser's hash for it.
const NONCE: &str = "MTI0Njg4NTAyMjYxMzgxMzgzMg==";
const SUPERUSER_HASH: &str = "P6COJ5aXJvIRoJO1PaYREw==";

struct Client {
    ws: WebSocket<TcpStream>,
    next_id: u64,
}

// tungstenite's error is what the tests inspect; its size does not matter here.
#[allow(clippy::result_large_err)]
fn try_connect(server: &RtmServer) -> Result<Client, tungstenite::Error> {
    let tcp = TcpStream::connect(server.addr()).map_err(tungstenite::Error::Io)?;
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let url = format!("{}/v2?appkey={DEFAULT_APPKEY}", server.endpoint());
    match tungstenite::client(url, tcp) {
        Ok((ws, _)) => Ok(Client { ws, next_id: 0 }),
        Err(tungstenite::HandshakeError::Failure(e)) => Err(e),
        Err(tungstenite::HandshakeError::Interrupted(_)) => panic!("interrupted handshake"),
    }
}

fn connect(server: &RtmServer) -> Client {
    try_connect(server).expect("upgrade")
}

impl Client {
    /// Sends a request with the next id and returns that id.
    fn request(&mut self, action: &str, body: &Value) -> u64 {
        let id = self.queue(action, body);
        self.ws.flush().unwrap();
        id
    }

    /// Queues a request with the next id (sent at the next flush) and returns that id.
    fn queue(&mut self, action: &str, body: &Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let pdu = json!({"action": action, "id": id, "body": body});
        self.ws.write(Message::text(pdu.to_string())).unwrap();
        id
    }

    /// The next PDU (a close or an error panics).
    fn recv(&mut self) -> Value {
        loop {
            match self.ws.read().expect("a frame") {
                Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
                Message::Binary(_) => panic!("binary frame"),
                _ => {}
            }
        }
    }

    /// Sends a request and returns its reply (PDUs without an id in between are
    /// dropped).
    fn call(&mut self, action: &str, body: &Value) -> Value {
        let id = self.request(action, body);
        loop {
            let pdu = self.recv();
            if pdu.get("id").is_some() {
                assert_eq!(pdu["id"], json!(id), "{pdu}");
                return pdu;
            }
        }
    }

    fn ok(&mut self, action: &str, body: &Value) -> Value {
        let reply = self.call(action, body);
        assert_eq!(reply["action"], format!("{action}/ok"), "{reply}");
        reply["body"].clone()
    }

    /// The channel names of an `rtm/search` for `prefix`, sorted.
    fn search(&mut self, prefix: &str) -> Vec<String> {
        let id = self.request("rtm/search", &json!({"prefix": prefix}));
        let mut names = Vec::new();
        loop {
            let pdu = self.recv();
            assert_eq!(pdu["id"], json!(id), "{pdu}");
            for name in pdu["body"]["channels"].as_array().unwrap() {
                names.push(name.as_str().unwrap().to_owned());
            }
            if pdu["action"] == "rtm/search/ok" {
                names.sort();
                return names;
            }
            assert_eq!(pdu["action"], "rtm/search/data", "{pdu}");
        }
    }

    /// Queues one `auth/handshake` and one `auth/authenticate` with `hash` (sent at
    /// the next flush).
    fn queue_auth(&mut self, hash: &str) {
        self.queue(
            "auth/handshake",
            &json!({"method": "role_secret", "data": {"role": SUPERUSER_ROLE}}),
        );
        self.queue(
            "auth/authenticate",
            &json!({"method": "role_secret", "credentials": {"hash": hash}}),
        );
    }

    /// Sends one `auth/handshake` and one `auth/authenticate` with `hash`, without
    /// waiting for the replies.
    fn send_auth(&mut self, hash: &str) {
        self.queue_auth(hash);
        self.ws.flush().unwrap();
    }
}

/// Whether the server has closed `tcp`: waits up to `wait` for the end of the stream (or
/// a reset), ignoring anything the server sent before.
fn closed_within(tcp: &mut TcpStream, wait: Duration) -> bool {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    while start.elapsed() < wait {
        tcp.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        match tcp.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// The start of an upgrade request that never ends.
fn partial_request() -> String {
    format!("GET /v2?appkey={DEFAULT_APPKEY} HTTP/1.1\r\nHost: 127.0.0.1\r\n")
}

/// Whether `cond` holds within [`WAIT`].
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Runs test `name` of this file alone in a child process and checks that it passed:
/// for tests that measure the process (its memory), which the other tests running in
/// parallel threads would disturb. Returns true in the child, where the test is to run.
fn in_own_process(name: &str) -> bool {
    const CHILD: &str = "BENCHLINK_RTM_LIMITS_CHILD";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    false
}

fn start(config: RtmServerConfig) -> RtmServer {
    RtmServer::start(config).unwrap()
}

/// A value of this process's `/proc/self/status` in KiB (`VmRSS`, `Threads`).
fn proc_status(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn upgrade_deadline_counts_from_the_accept_not_from_each_byte() {
    let server = start(RtmServerConfig {
        handshake_timeout: Duration::from_millis(300),
        ..RtmServerConfig::default()
    });
    let mut idle = TcpStream::connect(server.addr()).unwrap();
    let mut trickle = TcpStream::connect(server.addr()).unwrap();
    let started = Instant::now();
    // One byte every 40 ms: each read of the server's gets a byte well within 300 ms,
    // so only a deadline that is not reset by each byte ends this (the whole request
    // would take about 4 s).
    let request = format!("{}\r\n", partial_request()).repeat(2);
    let mut sent = 0;
    let mut closed = false;
    for byte in request.as_bytes() {
        if trickle.write_all(&[*byte]).is_err()
            || closed_within(&mut trickle, Duration::from_millis(40))
        {
            closed = true;
            break;
        }
        sent += 1;
    }
    assert!(closed, "the trickling socket got its whole request in");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(
        sent < request.len() / 2,
        "{sent} of {} bytes",
        request.len()
    );
    assert!(closed_within(&mut idle, WAIT), "the idle socket stays open");
    // The outcome is recorded just after the close.
    let failed = || {
        let outcomes: Vec<AttemptOutcome> =
            server.attempts().into_iter().map(|a| a.outcome).collect();
        outcomes
            == [
                AttemptOutcome::HandshakeFailed,
                AttemptOutcome::HandshakeFailed,
            ]
    };
    assert!(eventually(failed), "{:?}", server.attempts());
    // A normal client is not bothered by any of it.
    connect(&server).ok("rtm/publish", &json!({"channel": "c", "message": 1}));
}

#[test]
fn slow_sockets_beyond_the_pending_cap_cannot_lock_a_normal_client_out() {
    let server = start(RtmServerConfig {
        max_connections: 16,
        max_pending_upgrades: 8,
        // Long: the cap has to do it, not the deadline.
        handshake_timeout: Duration::from_secs(60),
        ..RtmServerConfig::default()
    });
    let threads_before = proc_status("Threads");
    let mut slow: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut tcp = TcpStream::connect(server.addr()).unwrap();
            tcp.write_all(partial_request().as_bytes()).unwrap();
            tcp
        })
        .collect();
    // A normal client still upgrades and is served, at once and again.
    for round in 0..3 {
        let mut c = connect(&server);
        c.ok("rtm/publish", &json!({"channel": "c", "message": round}));
    }
    // The oldest slow sockets made room: all but the newest 8 are closed.
    let closed = slow
        .iter_mut()
        .take(300 - 8)
        .map(|tcp| closed_within(tcp, WAIT))
        .filter(|closed| *closed)
        .count();
    assert_eq!(closed, 300 - 8);
    // Their threads are gone too: a connection thread per slow socket would add 300.
    let deadline = Instant::now() + WAIT;
    while proc_status("Threads") > threads_before + 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let threads = proc_status("Threads");
    assert!(
        threads <= threads_before + 100,
        "{threads_before} → {threads}"
    );
    let failed = server
        .attempts()
        .iter()
        .filter(|a| a.outcome == AttemptOutcome::HandshakeFailed)
        .count();
    assert!(failed >= 300 - 8, "{failed}");
}

#[test]
fn connections_over_the_cap_are_refused_until_one_closes() {
    let server = start(RtmServerConfig {
        max_connections: 4,
        ..RtmServerConfig::default()
    });
    let mut clients: Vec<Client> = (0..4).map(|_| connect(&server)).collect();
    for _ in 0..3 {
        match try_connect(&server) {
            Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 503),
            // The refusal may reach the client as a reset before it reads the 503.
            Err(tungstenite::Error::Io(_) | tungstenite::Error::Protocol(_)) => {}
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a fifth connection was served"),
        }
    }
    let refused = server
        .attempts()
        .iter()
        .filter(|a| a.outcome == AttemptOutcome::Rejected(503))
        .count();
    assert_eq!(refused, 3);
    // The four are served as before.
    for (i, c) in clients.iter_mut().enumerate() {
        c.ok("rtm/publish", &json!({"channel": "c", "message": i}));
    }
    // One goes: its place is free again.
    clients.pop();
    assert!(server.wait_for_connections(WAIT, |c| c.iter().filter(|c| c.open).count() == 3));
    connect(&server).ok("rtm/publish", &json!({"channel": "c", "message": "again"}));
}

#[test]
fn history_stays_within_its_total_budget_under_a_flood_of_large_publishes() {
    const BUDGET: usize = 2 << 20;
    const MESSAGES: usize = 64;
    if !in_own_process("history_stays_within_its_total_budget_under_a_flood_of_large_publishes") {
        return;
    }
    let server = start(RtmServerConfig {
        history_total_bytes: BUDGET,
        ..RtmServerConfig::default()
    });
    let rss_before = proc_status("VmRSS");
    // 64 messages of 1 MB, each to its own channel: every per-channel limit would keep
    // them all (64 MB).
    let big = json!("x".repeat(1_000_000 - 64));
    let mut publishers: Vec<Client> = (0..3).map(|_| connect(&server)).collect();
    for i in 0..MESSAGES {
        let c = &mut publishers[i % 3];
        c.ok(
            "rtm/publish",
            &json!({"channel": format!("big.{i}"), "message": big}),
        );
        let kept = server.history_bytes();
        assert!(kept <= BUDGET, "{kept} after {i}");
    }
    let kept = server.history_bytes();
    assert!(kept > BUDGET - 1_100_000, "{kept}");
    let rss = proc_status("VmRSS");
    assert!(
        rss < rss_before + 40 * 1024,
        "RSS {rss_before} KiB → {rss} KiB"
    );
    // The newest channels keep their message; the oldest lost it, value included.
    let c = &mut publishers[0];
    let last = c.ok(
        "rtm/read",
        &json!({"channel": format!("big.{}", MESSAGES - 1)}),
    );
    assert_eq!(last["message"], big);
    let first = c.ok("rtm/read", &json!({"channel": "big.0"}));
    assert_eq!(first["message"], Value::Null);
    // Tiny messages are bounded too: their bookkeeping counts.
    for i in 0..20_000 {
        server.publish(&format!("tiny.{}", i % 500), "1").unwrap();
    }
    assert!(server.history_bytes() <= BUDGET);
}

#[test]
fn a_subscriber_that_does_not_read_holds_at_most_the_queued_bytes() {
    const MESSAGES: usize = 60;
    let server = start(RtmServerConfig {
        max_queued_bytes: 2 << 20,
        ..RtmServerConfig::default()
    });
    let mut slow = connect(&server);
    slow.ok("rtm/subscribe", &json!({"channel": "big"}));
    // 60 MB for a subscriber that reads nothing meanwhile: the frame limit (10,000)
    // would queue them all.
    let big = format!("\"{}\"", "x".repeat(1_000_000));
    for _ in 0..MESSAGES {
        server.publish("big", &big).unwrap();
    }
    let mut delivered = 0;
    let error = loop {
        let pdu = slow.recv();
        match pdu["action"].as_str() {
            Some("rtm/subscription/data") => {
                delivered += pdu["body"]["messages"].as_array().unwrap().len();
            }
            _ => break pdu,
        }
    };
    assert_eq!(error["action"], "rtm/subscription/error", "{error}");
    assert_eq!(error["body"]["error"], "out_of_sync");
    // What the kernel's socket buffers took, plus the queue's 2 MiB.
    assert!(delivered < MESSAGES / 2, "{delivered}");
    // The connection is served as before.
    slow.ok("rtm/publish", &json!({"channel": "c", "message": 1}));
}

#[test]
fn guessing_a_role_secret_is_slowed_down_then_the_connection_closed() {
    let server = start(RtmServerConfig {
        auth_failure_delay: Duration::from_millis(250),
        max_auth_failures: 3,
        ..RtmServerConfig::default()
    });
    let mut guesser = connect(&server);
    let started = Instant::now();
    // A pipelined brute force: 50 guesses in one write, so that the server reads them
    // all at once.
    for _ in 0..50 {
        guesser.queue_auth("AAAAAAAAAAAAAAAAAAAAAA==");
    }
    guesser.ws.flush().unwrap();
    let mut other = connect(&server);
    // When each failure's reply arrived.
    let mut failures = Vec::new();
    let mut other_served = None;
    loop {
        let pdu = match guesser.ws.read() {
            Ok(Message::Text(t)) => serde_json::from_str::<Value>(t.as_str()).unwrap(),
            Ok(Message::Close(frame)) => {
                assert_eq!(frame.map(|f| f.code), Some(CloseCode::Policy));
                break;
            }
            Ok(_) => continue,
            Err(e) => panic!("no close frame: {e}"),
        };
        if pdu["action"] == "auth/authenticate/error" {
            assert_eq!(pdu["body"]["reason"], "Unauthenticated");
            failures.push(started.elapsed());
            if failures.len() == 2 {
                // The third reply waits 1 s: meanwhile another connection is served.
                other.ok("rtm/publish", &json!({"channel": "c", "message": 1}));
                other_served = Some(started.elapsed());
            }
        } else {
            assert_eq!(pdu["action"], "auth/handshake/ok", "{pdu}");
        }
    }
    // Three failures, their replies 250 ms, 500 ms and 1 s apart: each reply leaves when
    // its delay is over, not with the later ones. (Lower bounds, with room for a busy
    // machine.)
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert!(failures[0] >= Duration::from_millis(250), "{failures:?}");
    assert!(
        failures[1] - failures[0] >= Duration::from_millis(250),
        "{failures:?}"
    );
    assert!(
        failures[2] - failures[1] >= Duration::from_millis(500),
        "{failures:?}"
    );
    assert!(other_served.is_some_and(|t| t < failures[2]));
    // The server ends the connection.
    let tcp = guesser.ws.get_mut();
    assert!(closed_within(tcp, WAIT));
    // A correct secret on a fresh connection still works.
    let server = start(RtmServerConfig {
        fixed_nonce: Some(NONCE.to_owned()),
        ..RtmServerConfig::default()
    });
    let mut c = connect(&server);
    c.send_auth(SUPERUSER_HASH);
    assert_eq!(c.recv()["action"], "auth/handshake/ok");
    assert_eq!(c.recv()["action"], "auth/authenticate/ok");
}

#[test]
fn search_lists_only_channels_the_connection_may_read() {
    let reader = Role::new(
        "reader",
        "reader-secret",
        Permissions {
            subscribe: vec!["news.*".to_owned()],
            ..Permissions::none()
        },
    );
    let mut config = RtmServerConfig {
        fixed_nonce: Some(NONCE.to_owned()),
        ..RtmServerConfig::default()
    };
    config.roles.push(reader);
    let server = start(config);
    for channel in ["restricted_plans", "restricted_keys", "news.a", "weather"] {
        server.publish(channel, "1").unwrap();
    }
    let mut anonymous = connect(&server);
    assert_eq!(anonymous.search(""), ["news.a", "weather"]);
    assert!(anonymous.search("restricted").is_empty());
    let mut superuser = connect(&server);
    superuser.send_auth(SUPERUSER_HASH);
    assert_eq!(superuser.recv()["action"], "auth/handshake/ok");
    assert_eq!(superuser.recv()["action"], "auth/authenticate/ok");
    assert_eq!(
        superuser.search(""),
        ["news.a", "restricted_keys", "restricted_plans", "weather"]
    );
    let mut news = connect(&server);
    news.ok(
        "auth/handshake",
        &json!({"method": "role_secret", "data": {"role": "reader"}}),
    );
    let hash = "vUXAL0eTXINZpD81K9NGBA=="; // base64(HMAC-MD5("reader-secret", NONCE))
    let reply = news.call(
        "auth/authenticate",
        &json!({"method": "role_secret", "credentials": {"hash": hash}}),
    );
    assert_eq!(reply["action"], "auth/authenticate/ok", "{reply}");
    assert_eq!(news.search(""), ["news.a"]);
}

#[test]
fn a_position_of_another_run_is_expired_never_misread() {
    let old = start(RtmServerConfig {
        generation: Some(1000),
        ..RtmServerConfig::default()
    });
    let stale = old.publish("ch", "\"old 0\"").unwrap();
    let stale = {
        assert_eq!(stale, "1000:0");
        old.publish("ch", "\"old 1\"").unwrap()
    };
    assert_eq!(stale, "1000:1");
    drop(old);
    let server = start(RtmServerConfig {
        generation: Some(2000),
        ..RtmServerConfig::default()
    });
    for i in 0..3 {
        server.publish("ch", &i.to_string()).unwrap();
    }
    let mut c = connect(&server);
    // Without fast_forward: the subscription fails as for an expired position.
    let ok = c.ok(
        "rtm/subscribe",
        &json!({"channel": "ch", "position": stale}),
    );
    assert_eq!(ok["position"], "2000:0");
    let err = c.recv();
    assert_eq!(err["action"], "rtm/subscription/error", "{err}");
    assert_eq!(err["body"]["error"], "out_of_sync");
    assert_eq!(err["body"]["position"], "2000:0");
    // With fast_forward: from the oldest stored message, said so, not from message 1.
    c.ok(
        "rtm/subscribe",
        &json!({"channel": "ch", "subscription_id": "ff", "position": stale, "fast_forward": true}),
    );
    let info = c.recv();
    assert_eq!(info["body"]["info"], "fast_forward", "{info}");
    let data = c.recv();
    assert_eq!(data["body"]["messages"], json!([0, 1, 2]), "{data}");
    // A read of another run's position reads from the oldest message.
    let read = c.ok("rtm/read", &json!({"channel": "ch", "position": stale}));
    assert_eq!(
        (read["message"].clone(), read["position"].clone()),
        (json!(0), json!("2000:0"))
    );
    // This run's positions work as before.
    c.ok(
        "rtm/subscribe",
        &json!({"channel": "ch", "subscription_id": "here", "position": "2000:1"}),
    );
    assert_eq!(c.recv()["body"]["messages"], json!([1, 2]));
    // Without a configured generation, every run has its own.
    let a = start(RtmServerConfig::default());
    let b = start(RtmServerConfig::default());
    let generation = |s: &RtmServer| -> u64 {
        let p = s.publish("x", "1").unwrap();
        p.split_once(':').unwrap().0.parse().unwrap()
    };
    let (ga, gb) = (generation(&a), generation(&b));
    assert_ne!(ga, gb);
    assert!(ga > 1_600_000_000_000, "unix milliseconds: {ga}");
}

#[test]
fn channel_names_and_subscription_ids_are_bounded() {
    let server = start(RtmServerConfig::default());
    let mut c = connect(&server);
    let longest = "n".repeat(MAX_NAME_BYTES);
    let too_long = "n".repeat(MAX_NAME_BYTES + 1);
    c.ok("rtm/publish", &json!({"channel": longest, "message": 1}));
    c.ok("rtm/subscribe", &json!({"channel": longest}));
    for (action, body, field) in [
        (
            "rtm/publish",
            json!({"channel": too_long, "message": 1}),
            "channel",
        ),
        (
            "rtm/write",
            json!({"channel": too_long, "message": 1}),
            "channel",
        ),
        ("rtm/subscribe", json!({"channel": too_long}), "channel"),
        (
            "rtm/subscribe",
            json!({"channel": "c", "subscription_id": too_long}),
            "subscription_id",
        ),
    ] {
        let reply = c.call(action, &body);
        assert_eq!(reply["action"], format!("{action}/error"));
        assert_eq!(
            reply["body"]["reason"],
            format!("Invalid PDU: '{field}' was invalid")
        );
    }
    assert_eq!(
        server.connections()[0].subscriptions,
        [longest],
        "only the subscription with the longest allowed name"
    );
}

#[test]
fn guessing_on_many_connections_at_once_is_no_faster_than_the_server_wide_rate() {
    const GUESSERS: usize = 25;
    let server = start(RtmServerConfig {
        auth_failure_delay: Duration::from_millis(1),
        auth_failures_per_second: 10,
        fixed_nonce: Some(NONCE.to_owned()),
        ..RtmServerConfig::default()
    });
    let mut guessers: Vec<Client> = (0..GUESSERS).map(|_| connect(&server)).collect();
    let started = Instant::now();
    for g in &mut guessers {
        g.send_auth("AAAAAAAAAAAAAAAAAAAAAA==");
    }
    // The right secret is not held up by the others' failures.
    let mut superuser = connect(&server);
    superuser.send_auth(SUPERUSER_HASH);
    assert_eq!(superuser.recv()["action"], "auth/handshake/ok");
    assert_eq!(superuser.recv()["action"], "auth/authenticate/ok");
    let authenticated = started.elapsed();
    let mut last = Duration::ZERO;
    for g in &mut guessers {
        assert_eq!(g.recv()["action"], "auth/handshake/ok");
        let reply = g.recv();
        assert_eq!(reply["action"], "auth/authenticate/error", "{reply}");
        last = last.max(started.elapsed());
    }
    // Ten at once (a second's worth), then one per 100 ms: the 25th after 1.5 s.
    assert!(last >= Duration::from_millis(1400), "{last:?}");
    assert!(authenticated < last, "{authenticated:?} {last:?}");
}
