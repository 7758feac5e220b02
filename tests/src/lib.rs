//! Shared helpers for the cross-crate tests: local benchmark servers with test timings,
//! clients that cannot hang a test, bounded waits, a connection-counting TCP proxy and a
//! TLS-terminating proxy with a throw-away certificate for `localhost`.
//!
//! Everything here panics with a message that says what did not happen: these are test
//! helpers, and a panic is how a test fails.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use benchlink_sandbox::bench::{BenchServer, BenchServerConfig, Speed};
use benchlink_std::bench::{BenchClient, Scenario, ServerAddress, StatusInfo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection};

pub mod browser;

/// `readme!(Name, "path")`: the README at `path` as a doc item, so that
/// `cargo test --doc -p benchlink-tests` compiles its Rust examples (and runs those that
/// need no server) and what the README shows keeps building.
macro_rules! readme {
    ($name:ident, $path:literal) => {
        #[cfg(doctest)]
        #[doc = include_str!($path)]
        pub struct $name;
    };
}

// The READMEs whose crate cannot test them itself: the top one; core's, whose examples
// may use the `serde` and `embedded-io` features this crate turns on; the command line's
// (a binary crate has no doc tests); the firmware's and the device agent's (packages
// outside the workspace, built for thumbv7em only).
readme!(Readme, "../../README.md");
readme!(CoreReadme, "../../core/README.md");
readme!(CliReadme, "../../std-adapter/cli/README.md");
readme!(FirmwareReadme, "../../examples/firmware/README.md");
readme!(DeviceReadme, "../../examples/device/README.md");

/// How long any single wait in these tests may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// The workspace root (where `examples/` lives).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// `examples/scenarios/<name>`.
pub fn scenario_path(name: &str) -> PathBuf {
    repo_root().join("examples/scenarios").join(name)
}

/// `examples/scenarios/<name>` read with its includes.
pub fn scenario(name: &str) -> Scenario {
    let path = scenario_path(name);
    Scenario::from_file(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `hello.bdl`: two workers printing the included `data.txt` for 10 scenario seconds.
pub fn hello() -> Scenario {
    scenario("hello.bdl")
}

/// Timings under which a `hello.bdl` benchmark runs for about 1.2 s, so that streams
/// are observably live, while every other phase stays quick.
pub fn live_speed() -> Speed {
    Speed {
        stage: Duration::from_millis(10),
        scenario_second: Duration::from_millis(120),
        default_running: Duration::from_millis(1200),
        max_running: Duration::from_secs(3),
        metric_interval: Duration::from_millis(100),
        log_flush_interval: Duration::from_millis(50),
        poll: Duration::from_millis(20),
        finalize: Duration::from_millis(60),
    }
}

/// A local server with [`BenchServerConfig::fast`] adjusted by `adjust`.
pub fn server_with(adjust: impl FnOnce(&mut BenchServerConfig)) -> BenchServer {
    let mut config = BenchServerConfig::fast();
    adjust(&mut config);
    BenchServer::start(config).unwrap_or_else(|e| panic!("starting the bench server: {e}"))
}

/// A local server with the fast test timings.
pub fn fast_server() -> BenchServer {
    server_with(|_| {})
}

/// A local server with [`live_speed`].
pub fn live_server() -> BenchServer {
    server_with(|c| c.speed = live_speed())
}

/// A client of `host` (no token file is read) whose every read times out, so that a
/// broken client or server fails the test instead of hanging it.
pub fn client(host: &str) -> BenchClient {
    let address = ServerAddress::parse(host).unwrap_or_else(|e| panic!("address {host}: {e}"));
    BenchClient::new(address)
        .unwrap_or_else(|e| panic!("client of {host}: {e}"))
        .with_reply_timeout(Some(PATIENCE))
        .with_stream_idle_timeout(Some(PATIENCE))
}

/// Polls `cond` (every few milliseconds) until it holds; fails the test, naming `what`,
/// if it still does not after [`PATIENCE`]: a guard against hanging, never a measure.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(3));
    }
}

/// Polls `/status` until `pred` holds; fails the test after [`PATIENCE`].
pub fn wait_status(
    client: &mut BenchClient,
    id: u64,
    what: &str,
    pred: impl Fn(&StatusInfo) -> bool,
) -> StatusInfo {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let s = client
            .status(id)
            .unwrap_or_else(|e| panic!("status of benchmark {id} while waiting for {what}: {e}"));
        if pred(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "benchmark {id} never became {what}; last status {s:?}"
        );
        thread::sleep(Duration::from_millis(3));
    }
}

/// Waits until benchmark `id` has a final status.
pub fn wait_final(client: &mut BenchClient, id: u64) -> StatusInfo {
    wait_status(client, id, "final", |s| s.status().is_final())
}

/// Waits until benchmark `id` is `running`.
pub fn wait_running(client: &mut BenchClient, id: u64) -> StatusInfo {
    wait_status(client, id, "running", |s| s.status_text == "running")
}

/// Waits until the server-side process of benchmark `id` is gone (finalize over, logs
/// closed, streams ended).
pub fn wait_process_gone(server: &BenchServer, id: u64) {
    wait_until(&format!("the end of the process of benchmark {id}"), || {
        !server
            .benchmark(id)
            .unwrap_or_else(|| panic!("benchmark {id} is unknown to the server"))
            .process_alive
    });
}

/// Runs `f` on a thread of its own and returns its result, failing the test (with
/// `what` in the message) if it takes longer than `limit`: the watchdog for calls that
/// would hang forever if the code under test were broken. A panic inside `f` is
/// re-raised here.
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name(format!("within: {what}"))
        .spawn(move || {
            let _ = tx.send(panic::catch_unwind(AssertUnwindSafe(f)));
        });
    if let Err(e) = spawned {
        panic!("{what}: cannot spawn the watched thread: {e}");
    }
    match rx.recv_timeout(limit) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => panic::resume_unwind(payload),
        Err(_) => panic!("{what}: still not done after {limit:?} (hung?)"),
    }
}

/// Sockets of a proxy's connections, so that they can be closed from the test.
type Sockets = Arc<Mutex<Vec<TcpStream>>>;

/// What a proxy's connection handler shares with the proxy: the sockets to close, and
/// the count of connections whose server side has ended and been passed on to the
/// client (the event a test waits for instead of sleeping past a server's idle close).
struct Shared {
    sockets: Sockets,
    upstream_ended: AtomicUsize,
}

impl Shared {
    /// Notes that the server side of a connection ended and the client was told.
    fn upstream_ended(&self) {
        self.upstream_ended.fetch_add(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A listener on `127.0.0.1:0` whose accept loop hands every connection to `serve`
/// on a thread of its own, counting them; stops on drop.
struct Acceptor {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    fn start(serve: impl Fn(TcpStream, &Arc<Shared>) + Send + Sync + 'static) -> Acceptor {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("binding a proxy listener: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("proxy address: {e}"));
        let accepted = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            sockets: Arc::new(Mutex::new(Vec::new())),
            upstream_ended: AtomicUsize::new(0),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let serve = Arc::new(serve);
        let (a, s, st) = (
            Arc::clone(&accepted),
            Arc::clone(&shared),
            Arc::clone(&stop),
        );
        let thread = thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                if let Ok(clone) = conn.try_clone() {
                    lock(&s.sockets).push(clone);
                }
                let (serve, s) = (Arc::clone(&serve), Arc::clone(&s));
                thread::spawn(move || serve(conn, &s));
            }
        });
        Acceptor {
            addr,
            accepted,
            shared,
            stop,
            thread: Some(thread),
        }
    }

    fn close_all(&self) {
        for s in lock(&self.shared.sockets).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn upstream_ended(&self) -> usize {
        self.shared.upstream_ended.load(Ordering::SeqCst)
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(500));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.close_all();
    }
}

/// Copies `from` to `to` until `from` ends, then half-closes `to`; on an error both
/// sides are shut down.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if to.write_all(buf.get(..n).unwrap_or_default()).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// A plain TCP proxy in front of `upstream` that counts the connections clients open
/// (so a test can prove keep-alive) and can cut them all (so a test can make a kept-alive
/// connection stale).
pub struct CountingProxy {
    acceptor: Acceptor,
}

impl CountingProxy {
    /// Starts forwarding from a fresh `127.0.0.1` port to `upstream`.
    pub fn start(upstream: SocketAddr) -> CountingProxy {
        let acceptor = Acceptor::start(move |client, shared| {
            let Ok(server) = TcpStream::connect(upstream) else {
                let _ = client.shutdown(Shutdown::Both);
                return;
            };
            if let Ok(clone) = server.try_clone() {
                lock(&shared.sockets).push(clone);
            }
            let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                return;
            };
            let shared = Arc::clone(shared);
            thread::spawn(move || {
                pump(s2, c2);
                shared.upstream_ended();
            });
            pump(client, server);
        });
        CountingProxy { acceptor }
    }

    /// `127.0.0.1:PORT` of the proxy.
    pub fn host(&self) -> String {
        self.acceptor.addr.to_string()
    }

    /// How many connections clients have opened so far.
    pub fn accepted(&self) -> usize {
        self.acceptor.accepted.load(Ordering::SeqCst)
    }

    /// Closes every connection, both towards the clients and towards the server.
    pub fn close_all(&self) {
        self.acceptor.close_all();
    }

    /// How many connections have ended on the server's side (closed by the server, or
    /// cut by [`CountingProxy::close_all`]) with the end passed on to the client.
    pub fn server_closed(&self) -> usize {
        self.acceptor.upstream_ended()
    }
}

/// The `benchlink` binary, built once per test process with the cargo that builds the
/// tests, into the same target directory (a test of another package cannot name it with
/// `CARGO_BIN_EXE_*`).
pub fn benchlink_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable");
        // <target>/<profile>/deps/cli-<hash>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>")
            .to_path_buf();
        let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
        let mut build = Command::new(env!("CARGO"));
        build
            .args(["build", "-q", "-p", "benchlink-cli", "--bin", "benchlink"])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(repo_root());
        // What cargo set for this test run describes the tests package; passed on, it
        // would change the fingerprints of build scripts (ring's) and make this build
        // and the next `cargo test` rebuild half the dependencies.
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_MANIFEST_")
                || [
                    "CARGO_CRATE_NAME",
                    "CARGO_BIN_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "OUT_DIR",
                ]
                .contains(&k.as_ref())
            {
                build.env_remove(&key);
            }
        }
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("running cargo build");
        assert!(
            status.success(),
            "cargo build of the benchlink binary failed"
        );
        let path = profile_dir.join(format!("benchlink{}", std::env::consts::EXE_SUFFIX));
        assert!(path.exists(), "no binary at {}", path.display());
        path
    })
}

/// An HTTPS proxy: answers `CONNECT host:port` with 200 and then relays bytes both
/// ways, as corporate proxies do; it remembers the targets it was asked for.
pub struct ConnectProxy {
    acceptor: Acceptor,
    targets: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    /// Starts listening on a fresh `127.0.0.1` port.
    pub fn start() -> ConnectProxy {
        let targets = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&targets);
        let acceptor = Acceptor::start(move |mut client, shared| {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match client.read(&mut byte) {
                    Ok(1) if head.len() < 8192 => head.push(byte[0]),
                    _ => return,
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let Some(target) = head
                .strip_prefix("CONNECT ")
                .and_then(|rest| rest.split(' ').next())
            else {
                let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n");
                return;
            };
            lock(&seen).push(target.to_owned());
            // The target's brackets, if any, are the proxy's business.
            let Ok(server) = TcpStream::connect(target.replace(['[', ']'], "")) else {
                let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                return;
            };
            if client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_err()
            {
                return;
            }
            if let Ok(clone) = server.try_clone() {
                lock(&shared.sockets).push(clone);
            }
            let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                return;
            };
            thread::spawn(move || pump(s2, c2));
            pump(client, server);
        });
        ConnectProxy { acceptor, targets }
    }

    /// `127.0.0.1` and the proxy's port.
    pub fn addr(&self) -> SocketAddr {
        self.acceptor.addr
    }

    /// The `host:port` of every `CONNECT` so far.
    pub fn targets(&self) -> Vec<String> {
        lock(&self.targets).clone()
    }
}

/// A throw-away self-signed certificate for `localhost` and its key.
pub fn localhost_certificate() -> (CertificateDer<'static>, PrivateKeyDer<'static>, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .unwrap_or_else(|e| panic!("generating a certificate: {e}"));
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()));
    (certified.cert.der().clone(), key, certified.cert.pem())
}

/// A TLS-terminating proxy (rustls server, certificate for `localhost`) in front of a
/// plain HTTP `upstream`: what an https benchmark server behind a load balancer looks
/// like to a client.
pub struct TlsProxy {
    acceptor: Acceptor,
    cert: CertificateDer<'static>,
    cert_pem: String,
    close_notify: Arc<AtomicBool>,
}

impl TlsProxy {
    /// Starts serving TLS on a fresh `127.0.0.1` port.
    pub fn start(upstream: SocketAddr) -> TlsProxy {
        let (cert, key, cert_pem) = localhost_certificate();
        TlsProxy::with_certificate(upstream, vec![cert], key, cert_pem)
    }

    /// Starts serving TLS with the given certificate chain (the server's certificate
    /// first) and key; `cert_pem` is what [`TlsProxy::cert_pem`] returns.
    pub fn with_certificate(
        upstream: SocketAddr,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        cert_pem: String,
    ) -> TlsProxy {
        let cert = chain
            .first()
            .cloned()
            .unwrap_or_else(|| panic!("a certificate chain of at least one"));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .unwrap_or_else(|e| panic!("TLS server configuration: {e}"));
        let config = Arc::new(config);
        let close_notify = Arc::new(AtomicBool::new(true));
        let notify = Arc::clone(&close_notify);
        let acceptor = Acceptor::start(move |client, shared| {
            serve_tls(
                client,
                upstream,
                Arc::clone(&config),
                Arc::clone(&notify),
                shared,
            );
        });
        TlsProxy {
            acceptor,
            cert,
            cert_pem,
            close_notify,
        }
    }

    /// The proxy's port (connect as `https://localhost:PORT`).
    pub fn port(&self) -> u16 {
        self.acceptor.addr.port()
    }

    /// The proxy's self-signed certificate, to trust as a root.
    pub fn cert(&self) -> CertificateDer<'static> {
        self.cert.clone()
    }

    /// The certificate in PEM (for `--cacert`).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// How many TCP connections clients have opened so far.
    pub fn accepted(&self) -> usize {
        self.acceptor.accepted.load(Ordering::SeqCst)
    }

    /// How many connections have ended on the server's side with the end passed on to
    /// the client (a `close_notify` if [`TlsProxy::set_close_notify`], then the TCP
    /// close).
    pub fn server_closed(&self) -> usize {
        self.acceptor.upstream_ended()
    }

    /// Whether the proxy sends a TLS `close_notify` before closing a connection whose
    /// upstream side closed (default true); false closes the TCP connection bare, as
    /// some load balancers do.
    pub fn set_close_notify(&self, on: bool) {
        self.close_notify.store(on, Ordering::SeqCst);
    }
}

/// Writes whatever TLS records `tls` has pending to `sock`.
fn flush_tls(tls: &mut ServerConnection, sock: &mut TcpStream) -> io::Result<()> {
    while tls.wants_write() {
        tls.write_tls(sock)?;
    }
    Ok(())
}

/// One TLS connection: client records are decrypted by this thread and forwarded to a
/// fresh upstream connection; a second thread encrypts the upstream's replies.
fn serve_tls(
    client: TcpStream,
    upstream: SocketAddr,
    config: Arc<ServerConfig>,
    close_notify: Arc<AtomicBool>,
    shared: &Arc<Shared>,
) {
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    if let Ok(clone) = server.try_clone() {
        lock(&shared.sockets).push(clone);
    }
    let Ok(tls) = ServerConnection::new(config) else {
        return;
    };
    let tls = Arc::new(Mutex::new(tls));
    let (Ok(mut client_out), Ok(mut server_in)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    // Upstream → client.
    let t = Arc::clone(&tls);
    let client_ctl = client.try_clone();
    let ended = Arc::clone(shared);
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match server_in.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut tls = lock(&t);
            let data = buf.get(..n).unwrap_or_default();
            if tls.writer().write_all(data).is_err()
                || flush_tls(&mut tls, &mut client_out).is_err()
            {
                break;
            }
        }
        if close_notify.load(Ordering::SeqCst) {
            let mut tls = lock(&t);
            tls.send_close_notify();
            let _ = flush_tls(&mut tls, &mut client_out);
        }
        if let Ok(c) = client_ctl {
            let _ = c.shutdown(Shutdown::Both);
        }
        ended.upstream_ended();
    });
    // Client → upstream (this thread also writes the handshake records).
    let (mut client_in, mut server_out) = (client, server);
    let Ok(mut handshake_out) = client_in.try_clone() else {
        return;
    };
    let mut buf = [0u8; 16 * 1024];
    'conn: loop {
        let n = match client_in.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut input = buf.get(..n).unwrap_or_default();
        let mut plain = Vec::new();
        {
            let mut guard = lock(&tls);
            while !input.is_empty() {
                if guard.read_tls(&mut input).is_err() {
                    break 'conn;
                }
                let processed = guard.process_new_packets();
                let mut chunk = [0u8; 16 * 1024];
                // Ok(0) is the client's close_notify; WouldBlock means "no more for now".
                while let Ok(m @ 1..) = guard.reader().read(&mut chunk) {
                    plain.extend_from_slice(chunk.get(..m).unwrap_or_default());
                }
                let _ = flush_tls(&mut guard, &mut handshake_out);
                if processed.is_err() {
                    break 'conn;
                }
            }
        }
        if server_out.write_all(&plain).is_err() {
            break;
        }
    }
    let _ = server_out.shutdown(Shutdown::Write);
}

/// The reference Python SDK's venv python (`BENCHLINK_PY_SDK`, which `.ci/test` sets from
/// `bash .ci/python-sdk`), for the tests that run it beside benchlink (`tests` names them
/// in the messages). Under `CI` a missing SDK fails the test, naming what is missing;
/// elsewhere it prints a notice once and gives `None`, and the caller skips its Python
/// side. The first call prints which SDK runs (`interop: reference SDK 1.5.0 at PATH`),
/// past the harness's capture.
pub fn reference_sdk(tests: &str) -> Option<PathBuf> {
    use std::sync::Once;
    let Some(path) = std::env::var_os("BENCHLINK_PY_SDK").filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "BENCHLINK_PY_SDK is unset or empty under CI: {tests} need the reference Python \
             SDK (satori-rtm-sdk 1.5.0). `.ci/test` sets it in two steps, \
             `py_sdk=$(bash .ci/python-sdk) && export BENCHLINK_PY_SDK=$py_sdk`, so that a \
             failed install fails it"
        );
        static NOTICE: Once = Once::new();
        NOTICE.call_once(|| {
            let _ = writeln!(
                io::stderr(),
                "NOTICE: skipping the Python side of {tests}: BENCHLINK_PY_SDK is not set; \
                 export BENCHLINK_PY_SDK=\"$(bash .ci/python-sdk)\" to run it"
            );
        });
        return None;
    };
    let path = PathBuf::from(path);
    assert!(
        path.exists(),
        "BENCHLINK_PY_SDK={} does not exist; run `bash .ci/python-sdk`",
        path.display()
    );
    static RAN: Once = Once::new();
    RAN.call_once(|| {
        let version = Command::new(&path)
            .args([
                "-c",
                "import importlib.metadata as m; print(m.version('satori-rtm-sdk'))",
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        let _ = writeln!(
            io::stderr(),
            "interop: reference SDK {} at {}",
            version.as_deref().unwrap_or("(version unknown)"),
            path.display()
        );
    });
    Some(path)
}

/// Each line of `out` (a child's stdout, say) as it comes, on a channel that closes when
/// the pipe ends: what a test waits on instead of sleeping.
pub fn lines_of(out: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in io::BufRead::lines(io::BufReader::new(out)) {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// All of `err` (a child's stderr, say), gathered as it comes, and a channel that closes
/// when the pipe ends.
pub fn gather(mut err: impl Read + Send + 'static) -> (Arc<Mutex<String>>, mpsc::Receiver<()>) {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&text);
    let (done, ended) = mpsc::channel::<()>();
    thread::spawn(move || {
        let _done = done;
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = err.read(&mut buf) {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (text, ended)
}
