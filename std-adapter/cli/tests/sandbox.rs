//! `benchlink sandbox` flags, run as a user runs them: the built binary, its banner, and
//! raw HTTP against the benchmark server it started. Each run is killed at the end of
//! its test (and every wait is bounded), so a hanging server fails instead of hanging.
//! Addresses stay on loopback: `--listen 127.0.0.2` proves the flag without opening a
//! port to the LAN. `--tls-cert`/`--tls-key` are run with a throw-away certificate made
//! at test time, against `benchlink bench` and `benchlink rtm` as users run them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(20);

/// A running `benchlink sandbox`, killed on drop.
struct Sandbox {
    child: Child,
    /// The benchmark server's `host:port`.
    bench: String,
    /// The benchmark server's URL as the banner says it (`http://…` or `https://…`).
    bench_url: String,
    rtm: String,
    /// The control endpoint's `host:port`, if ARGS asked for one (`--control-port 0`).
    control: String,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `benchlink sandbox ARGS --port 0 --rtm-port 0` and reads the addresses from
/// its banner.
fn sandbox(args: &[&str]) -> Sandbox {
    let mut child = Command::new(env!("CARGO_BIN_EXE_benchlink"))
        .arg("sandbox")
        .args(args)
        .args(["--port", "0", "--rtm-port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("benchlink sandbox");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut sandbox = Sandbox {
        child,
        bench: String::new(),
        bench_url: String::new(),
        rtm: String::new(),
        control: String::new(),
    };
    let controlled = args.contains(&"--control-port");
    while sandbox.rtm.is_empty() || (controlled && sandbox.control.is_empty()) {
        let line = rx.recv_timeout(PATIENCE).expect("banner");
        if let Some(url) = line.strip_prefix("benchmark server listening on ") {
            sandbox.bench_url = url.to_owned();
            sandbox.bench = url
                .split_once("://")
                .map(|(_, h)| h)
                .unwrap_or(url)
                .to_owned();
        }
        if let Some(endpoint) = line.strip_prefix("RTM server listening on ") {
            sandbox.rtm = endpoint.to_owned();
        }
        if let Some(host) = line.strip_prefix("control endpoint listening on http://") {
            sandbox.control = host.to_owned();
        }
    }
    sandbox
}

/// Sends `request` on a fresh connection; the status and body of the reply.
fn exchange(addr: &str, request: &str) -> (u16, String) {
    let addr: SocketAddr = addr.parse().unwrap();
    let mut conn = TcpStream::connect_timeout(&addr, PATIENCE).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = conn.read_to_string(&mut reply);
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no reply: {reply:?}"));
    (head[9..12].parse().unwrap(), body.to_owned())
}

fn get(addr: &str, target: &str, token: &str) -> (u16, String) {
    exchange(
        addr,
        &format!("GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"),
    )
}

fn start(addr: &str, token: &str) -> u64 {
    let script = "#!benchDL\npool(size = 1, worker_type = dummy_worker):\n    loop(time = 100 sec, rate = 1 rps):\n        print(\"x\")\n";
    let body = format!("--b0\r\nContent-Disposition: form-data; name=\"bench\"; filename=\"a.bdl\"\r\n\r\n{script}\r\n--b0--\r\n");
    let (status, reply) = exchange(
        addr,
        &format!("POST /start HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\nContent-Type: multipart/form-data; boundary=b0\r\nContent-Length: {}\r\n\r\n{body}", body.len()),
    );
    assert_eq!(status, 200, "{reply}");
    let id = reply.split("\"id\":").nth(1).unwrap();
    id[..id.find(',').unwrap()].parse().unwrap()
}

#[test]
fn listen_users_quirks_faults_and_limits_from_flags() {
    let s = sandbox(&[
        "--listen",
        "127.0.0.2",
        "--pace",
        "fast",
        "--user",
        "alice=alice-token",
        "--user",
        "bob=bob-token",
        "--faithful",
        "--crash-at",
        "running",
        "--max-body",
        "1000",
    ]);
    assert!(s.bench.starts_with("127.0.0.2:"), "{}", s.bench);
    assert!(s.rtm.starts_with("ws://127.0.0.2:"), "{}", s.rtm);
    // Only on the address asked for.
    let port = s.bench.rsplit(':').next().unwrap();
    assert!(TcpStream::connect(format!("127.0.0.1:{port}")).is_err());
    // Token users.
    assert_eq!(get(&s.bench, "/clusters_info", "nope").0, 403);
    assert_eq!(get(&s.bench, "/clusters_info", "bob-token").0, 200);
    let id = start(&s.bench, "alice-token");
    assert_eq!(get(&s.bench, &format!("/stop?id={id}"), "bob-token").0, 403);
    // The benchmark crashes when it reaches `running`.
    let started = Instant::now();
    loop {
        let (status, body) = get(&s.bench, &format!("/status?id={id}"), "bob-token");
        assert_eq!(status, 200, "{body}");
        if body == r#"{"reason":"crashed","status":"failed"}"# {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "never crashed: {body}");
        thread::sleep(Duration::from_millis(20));
    }
    // Faithful: /server_logs is gone.
    assert_eq!(get(&s.bench, "/server_logs", "bob-token").0, 404);
    // The body limit.
    let big = format!(
        "POST /typecheck HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer bob-token\r\nContent-Length: 1001\r\n\r\n{}",
        "x".repeat(1001)
    );
    assert_eq!(exchange(&s.bench, &big).0, 413);
}

#[test]
fn silent_fault_from_flags() {
    let idle = Duration::from_millis(100);
    let s = sandbox(&[
        "--fault",
        "silent",
        "--idle-timeout-ms",
        &idle.as_millis().to_string(),
        "--control-port",
        "0",
    ]);
    let stat = |name: &str| -> u64 {
        let (status, body) = exchange(
            &s.control,
            "GET /bench/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(status, 200, "{body}");
        let stats: serde_json::Value = serde_json::from_str(&body).unwrap();
        stats[name]
            .as_u64()
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
    };
    let request = b"GET /clusters_info HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut conn = TcpStream::connect(&s.bench).unwrap();
    conn.write_all(request).unwrap();
    // Nothing came back, and the connection is open: nothing to read, no end of stream.
    let quiet = |conn: &TcpStream| {
        conn.set_nonblocking(true).unwrap();
        let peeked = conn.peek(&mut [0u8; 64]);
        conn.set_nonblocking(false).unwrap();
        assert!(
            matches!(&peeked, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the silent server answered or hung up: {peeked:?}"
        );
    };
    // Once the server has read the request (and dropped it), no answer is coming.
    let started = Instant::now();
    while stat("held_bytes") < request.len() as u64 {
        assert!(started.elapsed() < PATIENCE, "the request was never read");
        thread::sleep(Duration::from_millis(20));
    }
    let read_at = Instant::now();
    quiet(&conn);
    // Held past the idle deadline too: a silent server does not hang up. Two deadline
    // sweeps counted after the deadline (the second one began after it) left the
    // connection open.
    let mut sweeps_after_deadline = None;
    loop {
        let now = Instant::now();
        let sweeps = stat("sweeps");
        match sweeps_after_deadline {
            None if now >= read_at + idle => sweeps_after_deadline = Some(sweeps),
            Some(first) if sweeps >= first + 2 => break,
            _ => {}
        }
        assert!(started.elapsed() < PATIENCE, "no deadline sweep");
        thread::sleep(Duration::from_millis(20));
    }
    quiet(&conn);
}

#[test]
fn idle_deadline_from_flags() {
    // A flag past the default deadline (5 s), so that a lower bound tells the two apart:
    // a server that kept the default closes the connection before the flag's time.
    let default = benchlink_sandbox::BenchServerConfig::default().keep_alive_timeout;
    let flag = default + Duration::from_secs(1);
    let s = sandbox(&["--idle-timeout-ms", &flag.as_millis().to_string()]);
    let started = Instant::now();
    let mut conn = TcpStream::connect(&s.bench).unwrap();
    conn.set_read_timeout(Some(flag + PATIENCE)).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(conn.read(&mut buf).unwrap(), 0, "closed by the server");
    assert!(
        started.elapsed() >= flag,
        "closed after {:?}: before the flag's idle deadline {flag:?}",
        started.elapsed()
    );
}

#[test]
fn bad_flags_are_refused() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_benchlink"))
            .arg("sandbox")
            .args(args)
            .args(["--port", "0", "--rtm-port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .code()
    };
    assert_eq!(run(&["--crash-at", "nowhere"]), Some(4));
    assert_eq!(run(&["--user", "no-token"]), Some(4));
    assert_eq!(run(&["--admin", "carol"]), Some(1));
    assert_eq!(run(&["--rtm-fault", "data-flood"]), Some(1));
}

#[test]
fn rtm_socket_fault_from_flags() {
    let s = sandbox(&["--rtm-fault", "ping-flood"]);
    let addr = s.rtm.strip_prefix("ws://").unwrap();
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    conn.write_all(b"GET /v2?appkey=benchlink-test-appkey HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        .unwrap();
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&data));
        data.extend_from_slice(&buf[..n]);
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    assert!(data.starts_with(b"HTTP/1.1 101"));
    // Pings (FIN + opcode 9) without being asked, many of them.
    while data.len() < head_end + 64 * 1024 {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0);
        data.extend_from_slice(&buf[..n]);
    }
    assert_eq!(data[head_end], 0x89);
}

/// `--latency MS`: both servers behind relays that delay each direction by MS; what
/// clients reach at the advertised addresses answers as before, a round trip later.
#[test]
fn latency_puts_both_servers_a_round_trip_away() {
    let s = sandbox(&["--latency", "40"]);
    let started = Instant::now();
    let (status, _) = get(&s.bench, "/clusters_info", "any");
    assert_eq!(status, 200);
    // Connect, request, reply: at least one round trip of 2 × 40 ms (a lower bound).
    assert!(
        started.elapsed() >= Duration::from_millis(80),
        "{:?}",
        started.elapsed()
    );
    // The messaging server answers its upgrade through its relay too.
    let addr = s.rtm.trim_start_matches("ws://");
    let upgrade = format!(
        "GET /v2?appkey=benchlink-test-appkey HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    );
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    conn.write_all(upgrade.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    conn.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 101");
}

/// A directory of this test's own, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "benchlink-cli-sandbox-{name}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self, name: &str, contents: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_str().unwrap().to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// PEM text of a DER block.
fn pem(label: &str, der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::new();
    for chunk in der.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                b64.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                b64.push('=');
            }
        }
    }
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// A throw-away self-signed certificate for `localhost` in `dir`: (CERT.pem, KEY.pem).
fn certificate_files(dir: &TempDir) -> (String, String) {
    let (_, key, cert_pem) = benchlink_tests::localhost_certificate();
    let cert = dir.file("cert.pem", &cert_pem);
    let key = dir.file("key.pem", &pem("PRIVATE KEY", key.secret_der()));
    (cert, key)
}

/// `benchlink ARGS` with the environment that would point it elsewhere removed, waited
/// for at most three PATIENCEs.
fn benchlink(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_benchlink"))
        .args(args)
        .env_remove("SSL_CERT_FILE")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("MZBENCH_API_HOST")
        .env_remove("BENCHLINK_TOKEN")
        .env_remove("BENCHLINK_RTM_ENDPOINT")
        .env_remove("BENCHLINK_RTM_APPKEY")
        .env("MZBENCHTOKEN", "/nonexistent/benchlink-token-file")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + 3 * PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("benchlink {args:?} did not end");
        }
        thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `--tls-cert`/`--tls-key`: the banner says https and wss, a benchmark runs over https
/// and a message goes through over wss with the CLI's own clients trusting the
/// certificate, and a client that does not trust it is refused while the servers go on.
#[test]
fn tls_from_flags() {
    let dir = TempDir::new("tls");
    let (cert, key) = certificate_files(&dir);
    let s = sandbox(&["--pace", "fast", "--tls-cert", &cert, "--tls-key", &key]);
    assert!(
        s.bench_url.starts_with("https://127.0.0.1:"),
        "{}",
        s.bench_url
    );
    assert!(s.rtm.starts_with("wss://127.0.0.1:"), "{}", s.rtm);
    // The certificate is for `localhost`.
    let https = s.bench_url.replace("127.0.0.1", "localhost");
    let wss = s.rtm.replace("127.0.0.1", "localhost");

    // Not trusted: refused in the handshake.
    let out = benchlink(&["bench", "--host", &https, "--retries", "0", "clusters-info"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("certificate"), "{stderr}");

    // Trusted: a whole benchmark.
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios/hello.bdl");
    let out = benchlink(&[
        "bench",
        "--cacert",
        &cert,
        "--host",
        &https,
        "run",
        hello.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("complete"),
        "{}",
        text(&out.stdout)
    );

    // A message over wss: a subscriber for one message, a publisher until it came.
    let mut subscriber = Command::new(env!("CARGO_BIN_EXE_benchlink"))
        .args([
            "rtm",
            "--cacert",
            &cert,
            "-e",
            &wss,
            "-a",
            "benchlink-test-appkey",
        ])
        .args(["subscribe", "animals", "--max", "1"])
        .env_remove("SSL_CERT_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let ended = loop {
        let out = benchlink(&[
            "rtm",
            "--cacert",
            &cert,
            "-e",
            &wss,
            "-a",
            "benchlink-test-appkey",
            "publish",
            "animals",
            r#"{"who":"zebra"}"#,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        if let Some(status) = subscriber.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = subscriber.kill();
            panic!("the subscriber never got a message");
        }
        thread::sleep(Duration::from_millis(100));
    };
    let out = subscriber.wait_with_output().unwrap();
    assert!(ended.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let message = stdout
        .trim()
        .strip_prefix("animals: ")
        .unwrap_or_else(|| panic!("{stdout}"));
    let message: serde_json::Value = serde_json::from_str(message).unwrap();
    assert_eq!(message, serde_json::json!({"who": "zebra"}));

    // Plaintext on the TLS port gets no HTTP answer; the servers still serve TLS.
    let body = plaintext_reply(&s.bench);
    assert!(!body.starts_with("HTTP/"), "{body}");
    let out = benchlink(&[
        "bench",
        "--cacert",
        &cert,
        "--host",
        &https,
        "clusters-info",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A plaintext request to `addr`: what came back before the close (no HTTP reply from a
/// TLS port).
fn plaintext_reply(addr: &str) -> String {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    conn.write_all(b"GET /clusters_info HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut reply = Vec::new();
    let _ = conn.read_to_end(&mut reply);
    text(&reply)
}

/// A bad PEM file is an error naming it (exit 1, as a bad `--cacert`), before any port is
/// taken; one of the two flags alone is a usage error.
#[test]
fn bad_tls_files_are_named() {
    let dir = TempDir::new("tls-bad");
    let (cert, key) = certificate_files(&dir);
    let garbage = dir.file("garbage.pem", "not PEM at all\n");
    for (c, k) in [(&garbage, &key), (&cert, &garbage), (&key, &cert)] {
        let out = benchlink(&[
            "sandbox",
            "--port",
            "0",
            "--rtm-port",
            "0",
            "--tls-cert",
            c,
            "--tls-key",
            k,
        ]);
        assert_eq!(out.status.code(), Some(1), "{c} {k}");
        let stderr = text(&out.stderr);
        let named = if c == &cert { k } else { c };
        assert!(
            stderr.starts_with("error: ") && stderr.contains(named.as_str()),
            "{stderr}"
        );
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }
    let out = benchlink(&["sandbox", "--port", "0", "--tls-cert", &cert]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--tls-key"),
        "{}",
        text(&out.stderr)
    );
}
