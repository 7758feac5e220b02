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
//! Without `BENCHLINK_PY_SDK` the tests fail when `CI` is set (interop must not be skipped
//! silently there) and print a notice and pass otherwise.
//!
//! Every Python process is bounded twice: the script's own `--timeout` (with a watchdog
//! that ends it) and a deadline here after which it is killed. A failure prints the
//! script's command line, what it printed and its stderr.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{
    RtmServer, RtmServerConfig, DEFAULT_APPKEY, RESTRICTED_PREFIX, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
use benchlink_std::rtm::{
    Client, ClientOptions, Error, Mode, Response, SubscribeOptions, SubscriptionData,
    SubscriptionObserver,
};
use serde_json::{json, Value};

/// Any single wait on the Rust side.
const WAIT: Duration = Duration::from_secs(10);
/// What each script is given as its `--timeout`.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(12);
/// After this the driver kills a script (its own watchdog fires at timeout + 2 s).
const KILL_AFTER: Duration = Duration::from_secs(16);

/// The venv's python, or `None` (after a notice) when the SDK is not installed and this
/// is not CI.
fn python() -> Option<PathBuf> {
    match std::env::var_os("BENCHLINK_PY_SDK").filter(|v| !v.is_empty()) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.exists(),
                "BENCHLINK_PY_SDK={} does not exist; run `bash .ci/python-sdk`",
                path.display()
            );
            Some(path)
        }
        None if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) => panic!(
            "BENCHLINK_PY_SDK is unset or empty under CI: the Python SDK interop tests must \
             run there. `.ci/test` sets it with `export BENCHLINK_PY_SDK=\"$(bash \
             .ci/python-sdk)\"`; if it is empty, that install failed (see its output above)"
        ),
        None => {
            // Straight to stderr, past the test harness's capture, so that it shows.
            static NOTICE: Once = Once::new();
            NOTICE.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "NOTICE: skipping the Python SDK interop tests (interop_python.rs): \
                     BENCHLINK_PY_SDK is not set; \
                     export BENCHLINK_PY_SDK=\"$(bash .ci/python-sdk)\" to run them"
                );
            });
            None
        }
    }
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("interop")
        .join(name)
}

/// A running interop script: its JSON stdout lines arrive on a channel, its stderr is
/// collected for failure messages, and it is killed when dropped.
struct Py {
    command: String,
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    deadline: Instant,
    reported: bool,
}

impl Py {
    /// Starts `tests/interop/<name>` with the common arguments plus `extra`, writing
    /// `stdin` (one JSON value per line) to it.
    fn spawn(
        python: &Path,
        name: &str,
        server: &RtmServer,
        channel: &str,
        extra: &[&str],
        stdin: &[Value],
    ) -> Py {
        let timeout = SCRIPT_TIMEOUT.as_secs().to_string();
        let endpoint = server.endpoint();
        let mut args = vec![
            "--endpoint",
            endpoint.as_str(),
            "--appkey",
            DEFAULT_APPKEY,
            "--channel",
            channel,
            "--timeout",
            timeout.as_str(),
        ];
        args.extend_from_slice(extra);
        let path = script(name);
        let command = format!("{} {} {}", python.display(), path.display(), args.join(" "));
        let mut child = Command::new(python)
            .arg(&path)
            .args(&args)
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning `{command}`: {e}"));
        let input: String = stdin.iter().map(|v| format!("{v}\n")).collect();
        let mut pipe = child.stdin.take().expect("stdin");
        thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&stderr);
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Py {
            command,
            child,
            lines,
            seen: Vec::new(),
            stderr,
            deadline: Instant::now() + KILL_AFTER,
            reported: false,
        }
    }

    /// The command line, what the script printed and its stderr.
    fn transcript(&mut self) -> String {
        // Let the reader threads drain what is left.
        thread::sleep(Duration::from_millis(100));
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        let stderr = self
            .stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        format!(
            "--- command: {}\n--- stdout:\n{}\n--- stderr:\n{stderr}",
            self.command,
            self.seen.join("\n"),
        )
    }

    /// Fails the test with everything the script said.
    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let status = self.child.wait();
        self.reported = true;
        panic!("{why}\n--- exit: {status:?}\n{}", self.transcript())
    }

    /// The next stdout line as JSON, or `None` at end of output; fails at the deadline.
    fn next(&mut self) -> Option<Value> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => {
                self.seen.push(line.clone());
                match serde_json::from_str(&line) {
                    Ok(v) => Some(v),
                    Err(e) => self.fail(&format!("stdout line is not JSON ({e}): {line}")),
                }
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => self.fail("the script ran past its deadline"),
        }
    }

    /// Waits for the line `{"event": event, …}`, failing on an `error` event or the end.
    fn expect(&mut self, event: &str) -> Value {
        loop {
            match self.next() {
                Some(v) if v["event"] == event => return v,
                Some(v) if v["event"] == "error" => {
                    self.fail(&format!("the script failed while we waited for `{event}`"))
                }
                Some(_) => {}
                None => self.fail(&format!("the script ended without printing `{event}`")),
            }
        }
    }

    /// Reads the rest of stdout and waits for a successful exit; returns the events.
    fn finish(mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(v) = self.next() {
            events.push(v);
        }
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => {
                    // Shown by the test harness only if the test fails later.
                    println!("{}", self.transcript());
                    self.reported = true;
                    return events;
                }
                Ok(Some(status)) => self.fail(&format!("the script exited with {status}")),
                Ok(None) if Instant::now() >= self.deadline => {
                    self.fail("the script did not exit before its deadline")
                }
                Ok(None) => thread::sleep(Duration::from_millis(20)),
                Err(e) => self.fail(&format!("waiting for the script: {e}")),
            }
        }
    }

    /// Like [`Py::finish`], for a script that must fail: returns its stdout events.
    fn finish_failing(mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(v) = self.next() {
            events.push(v);
        }
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => {
                    self.fail("the script succeeded but should have failed")
                }
                Ok(Some(_)) => {
                    println!("{}", self.transcript());
                    self.reported = true;
                    return events;
                }
                Ok(None) if Instant::now() >= self.deadline => {
                    self.fail("the script did not exit before its deadline")
                }
                Ok(None) => thread::sleep(Duration::from_millis(20)),
                Err(e) => self.fail(&format!("waiting for the script: {e}")),
            }
        }
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() && !self.reported {
            println!(
                "a Python script was running when the test failed:\n{}",
                self.transcript()
            );
        }
    }
}

/// The `message` members of the `message` events, in order.
fn messages_of(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| e["message"].clone())
        .collect()
}

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

/// Every kind of JSON value (as in the SDK's `message_types.py`), non-ASCII and escapes
/// included.
fn message_types() -> Vec<Value> {
    vec![
        Value::Null,
        json!(42),
        json!(-7),
        json!(0),
        json!(9_007_199_254_740_993_u64),
        json!(0.1),
        json!(6.022_140_76e23),
        json!(-0.5),
        json!(1e-7),
        json!(2.5e100),
        json!(""),
        json!("hello"),
        json!("Привет, мир! Ёжик"),
        json!("quotes \" and 'single' and \\ backslash / slash"),
        json!("control \n\t\r\u{1} chars"),
        json!("emoji 🎉 and 中文 and é"),
        json!(true),
        json!(false),
        json!([]),
        json!({}),
        json!([1, "two", 3.5, null, [true, [false]], {"k": []}]),
        json!({"a": {"b": {"c": [1, {"d": "е"}]}}, "ключ": "значение", "e": null, "q\"k": 1}),
    ]
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
                .publish("duplex-a", m, Some(Box::new(move |r| drop(tx.send(r)))))
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
        Some(Box::new(move |r| drop(tx.send(r)))),
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
